package kafka

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/messages"
)

func electRequest(electionType int8, topics map[string][]int32, order ...string) *kmsg.ElectLeadersRequest {
	req := kmsg.NewPtrElectLeadersRequest()
	req.ElectionType = electionType
	if topics == nil {
		return req
	}
	req.Topics = []kmsg.ElectLeadersRequestTopic{}
	for _, name := range order {
		t := kmsg.NewElectLeadersRequestTopic()
		t.Topic, t.Partitions = name, topics[name]
		req.Topics = append(req.Topics, t)
	}
	return req
}

func TestElectLeadersAsk(t *testing.T) {
	for _, c := range []struct {
		name string
		req  *kmsg.ElectLeadersRequest
		want *messages.ElectLeadersRequest
	}{
		{"a null list: every partition", electRequest(electionPreferred, nil), &messages.ElectLeadersRequest{}},
		{"unclean", electRequest(electionUnclean, nil), &messages.ElectLeadersRequest{Unclean: true}},
		{"partitions of two topics, in order", electRequest(electionPreferred, map[string][]int32{"b": {2, 0}, "a": {1}}, "b", "a"),
			&messages.ElectLeadersRequest{TopicPartitions: []*messages.TopicPartition{{Topic: "b", Partition: 2}, {Topic: "b"}, {Topic: "a", Partition: 1}}}},
		{"an empty list: nothing", electRequest(electionPreferred, map[string][]int32{}), nil},
		{"topics without partitions: nothing", electRequest(electionPreferred, map[string][]int32{"a": {}}, "a"), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := electLeadersAsk(c.req)
			if c.want == nil {
				require.Nil(t, got)
				return
			}
			require.True(t, proto.Equal(c.want, got), "%v", got)
		})
	}
}

func TestElectLeadersResponse(t *testing.T) {
	results := []*messages.ElectionResult{
		{Topic: "a", Partition: 0, Leader: 1},
		{Topic: "a", Partition: 1, Error: messages.ErrorCode_ELECTION_NOT_NEEDED, ErrorMessage: "leads", Leader: 2},
		{Topic: "b", Partition: 0, Error: messages.ErrorCode_PREFERRED_LEADER_NOT_AVAILABLE, ErrorMessage: "fenced"},
		{Topic: "a", Partition: 2, Error: messages.ErrorCode_ELIGIBLE_LEADERS_NOT_AVAILABLE, ErrorMessage: "not allowed"},
	}
	type partition struct {
		topic     string
		partition int32
		code      int16
		message   string
	}
	flatten := func(resp *kmsg.ElectLeadersResponse) []partition {
		var out []partition
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				msg := ""
				if p.ErrorMessage != nil {
					msg = *p.ErrorMessage
				}
				out = append(out, partition{t.Topic, p.Partition, p.ErrorCode, msg})
			}
		}
		return out
	}
	named := flatten(electLeadersResponse(electRequest(electionPreferred, map[string][]int32{"a": {0, 1, 2}, "b": {0}}, "a", "b"), results))
	require.Equal(t, []partition{
		{"a", 0, 0, ""},
		{"a", 1, kerr.ElectionNotNeeded.Code, "leads"},
		{"a", 2, kerr.EligibleLeadersNotAvailable.Code, "not allowed"},
		{"b", 0, kerr.PreferredLeaderNotAvailable.Code, "fenced"},
	}, named, "by topic, every partition named")
	all := flatten(electLeadersResponse(electRequest(electionPreferred, nil), results))
	require.Equal(t, []partition{
		{"a", 0, 0, ""},
		{"a", 2, kerr.EligibleLeadersNotAvailable.Code, "not allowed"},
		{"b", 0, kerr.PreferredLeaderNotAvailable.Code, "fenced"},
	}, all, "a null list leaves out the partitions that needed no election")

	refused := refuseElectLeaders(electRequest(electionPreferred, map[string][]int32{"a": {0, 1}}, "a"), codeRequestTimedOut).(*kmsg.ElectLeadersResponse)
	require.Equal(t, codeRequestTimedOut, refused.ErrorCode)
	require.Len(t, refused.Topics[0].Partitions, 2)
	for _, p := range refused.Topics[0].Partitions {
		require.Equal(t, codeRequestTimedOut, p.ErrorCode)
	}
}

func reassignRequest(version int16, allowRFChange bool) *kmsg.AlterPartitionAssignmentsRequest {
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.SetVersion(version)
	req.AllowReplicationFactorChange = allowRFChange
	for _, name := range []string{"a", "b"} {
		t := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		t.Topic = name
		move := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		move.Partition, move.Replicas = 0, []int32{2, 3}
		cancel := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		cancel.Partition = 1
		t.Partitions = append(t.Partitions, move, cancel)
		req.Topics = append(req.Topics, t)
	}
	return req
}

func TestReassignMapping(t *testing.T) {
	ask := reassignAsk(reassignRequest(0, false))
	require.False(t, ask.KeepReplicationFactor, "v0 has no say: the factor may change")
	require.True(t, proto.Equal(&messages.ReassignPartitionsRequest{Partitions: []*messages.PartitionReassignment{
		{Topic: "a", Partition: 0, Replicas: []int32{2, 3}}, {Topic: "a", Partition: 1, Cancel: true},
		{Topic: "b", Partition: 0, Replicas: []int32{2, 3}}, {Topic: "b", Partition: 1, Cancel: true},
	}}, ask), "%v", ask)
	require.True(t, reassignAsk(reassignRequest(1, false)).KeepReplicationFactor)
	require.False(t, reassignAsk(reassignRequest(1, true)).KeepReplicationFactor)

	req := reassignRequest(1, false)
	resp := reassignResponse(req, []*messages.ReassignmentResult{
		{Topic: "a", Partition: 0},
		{Topic: "a", Partition: 1, Error: messages.ErrorCode_NO_REASSIGNMENT_IN_PROGRESS, ErrorMessage: "none"},
		{Topic: "b", Partition: 0, Error: messages.ErrorCode_INVALID_REPLICATION_FACTOR, ErrorMessage: "2 to 3"},
		{Topic: "x", Partition: 9},
	})
	require.False(t, resp.AllowReplicationFactorChange, "given back as asked")
	var codes []int16
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			codes = append(codes, p.ErrorCode)
		}
	}
	require.Equal(t, []int16{0, kerr.NoReassignmentInProgress.Code, kerr.InvalidReplicationFactor.Code, codeUnknownServerError}, codes,
		"a result that is not the partition's own answers UNKNOWN_SERVER_ERROR")
	require.Equal(t, "2 to 3", *resp.Topics[1].Partitions[0].ErrorMessage)

	refused := refuseAlterPartitionAssignments(req, kerr.NotController.Code, "no controller")
	require.Equal(t, kerr.NotController.Code, refused.ErrorCode)
	require.Equal(t, "no controller", *refused.ErrorMessage)
	for _, rt := range refused.Topics {
		for _, p := range rt.Partitions {
			require.Equal(t, kerr.NotController.Code, p.ErrorCode)
		}
	}
}

func TestReassignmentsOf(t *testing.T) {
	md := &messages.MetadataResponse{Topics: []*messages.TopicMetadata{
		{Name: "a", Partitions: []*messages.PartitionMetadata{
			{Partition: 0, Replicas: []int32{1, 2}},
			{Partition: 1, Replicas: []int32{2, 3, 1}, AddingReplicas: []int32{3}, RemovingReplicas: []int32{1}},
			{Partition: 2, Replicas: []int32{1, 2, 3}, AddingReplicas: []int32{3}},
		}},
		{Name: "b", Partitions: []*messages.PartitionMetadata{{Partition: 0, Replicas: []int32{1}}}},
		{Name: "gone", Error: messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION},
	}}
	list := func(topics map[string][]int32) *kmsg.ListPartitionReassignmentsRequest {
		req := kmsg.NewPtrListPartitionReassignmentsRequest()
		if topics == nil {
			return req
		}
		req.Topics = []kmsg.ListPartitionReassignmentsRequestTopic{}
		for name, ps := range topics {
			t := kmsg.NewListPartitionReassignmentsRequestTopic()
			t.Topic, t.Partitions = name, ps
			req.Topics = append(req.Topics, t)
		}
		return req
	}
	partitions := func(topics []kmsg.ListPartitionReassignmentsResponseTopic) map[string][]int32 {
		out := map[string][]int32{}
		for _, t := range topics {
			for _, p := range t.Partitions {
				out[t.Topic] = append(out[t.Topic], p.Partition)
			}
		}
		return out
	}
	all := reassignmentsOf(list(nil), md)
	require.Equal(t, map[string][]int32{"a": {1, 2}}, partitions(all), "every move, of every topic")
	moving := all[0].Partitions[0]
	require.Equal(t, []int32{2, 3, 1}, moving.Replicas)
	require.Equal(t, []int32{3}, moving.AddingReplicas)
	require.Equal(t, []int32{1}, moving.RemovingReplicas)

	require.Equal(t, map[string][]int32{"a": {2}}, partitions(reassignmentsOf(list(map[string][]int32{"a": {0, 2}, "b": {0}, "gone": {0}}), md)),
		"only the partitions named that move")
	require.Empty(t, reassignmentsOf(list(map[string][]int32{}), md))
}

func TestDescribeLogDirsResponse(t *testing.T) {
	dirs := []*messages.LogDirInfo{
		{Path: "/a", State: "online", CapacityBytes: 1000, FreeBytes: 600, PartitionUsage: []*messages.PartitionUsage{
			{Topic: "t", Partition: 1, Bytes: 300}, {Topic: "s", Partition: 0, Bytes: 100},
		}},
		{Path: "/b", State: "online", FreeBytes: 50, PartitionUsage: []*messages.PartitionUsage{{Topic: "t", Partition: 0, Bytes: 10}},
			Futures: []*messages.FutureLog{{Topic: "t", Partition: 1, Bytes: 120, OffsetLag: 7}}},
		{Path: "/c", State: "offline", Error: "input/output error", CapacityBytes: 1000, PartitionUsage: []*messages.PartitionUsage{{Topic: "t", Partition: 2}}},
		{Path: "/d", State: "draining", Draining: true, CapacityBytes: 500, FreeBytes: 500},
	}
	type log struct {
		dir, topic string
		partition  int32
		size, lag  int64
		future     bool
	}
	logs := func(resp *kmsg.DescribeLogDirsResponse) []log {
		var out []log
		for _, d := range resp.Dirs {
			for _, t := range d.Topics {
				for _, p := range t.Partitions {
					out = append(out, log{d.Dir, t.Topic, p.Partition, p.Size, p.OffsetLag, p.IsFuture})
				}
			}
		}
		return out
	}
	req := kmsg.NewPtrDescribeLogDirsRequest()
	req.SetVersion(5)
	resp := describeLogDirsResponse(req, dirs)
	require.Len(t, resp.Dirs, 4)
	require.Equal(t, []log{
		{"/a", "s", 0, 100, 0, false},
		{"/a", "t", 1, 300, 0, false},
		{"/b", "t", 0, 10, 0, false},
		{"/b", "t", 1, 120, 7, true},
	}, logs(resp), "by dir, topic by name, partition by number")
	a, b, c, d := resp.Dirs[0], resp.Dirs[1], resp.Dirs[2], resp.Dirs[3]
	require.Equal(t, [2]int64{1000, 600}, [2]int64{a.TotalBytes, a.UsableBytes})
	require.Equal(t, [2]int64{-1, -1}, [2]int64{b.TotalBytes, b.UsableBytes}, "capacity unknown")
	require.Equal(t, kerr.KafkaStorageError.Code, c.ErrorCode)
	require.Empty(t, c.Topics, "an offline dir lists nothing")
	require.Equal(t, [2]int64{-1, -1}, [2]int64{c.TotalBytes, c.UsableBytes})
	require.True(t, d.IsCordoned, "draining is cordoned")
	require.False(t, a.IsCordoned)
	require.Zero(t, a.ErrorCode)

	only := kmsg.NewPtrDescribeLogDirsRequest()
	topic := kmsg.NewDescribeLogDirsRequestTopic()
	topic.Topic, topic.Partitions = "t", []int32{1}
	only.Topics = append(only.Topics, topic)
	require.Equal(t, []log{{"/a", "t", 1, 300, 0, false}, {"/b", "t", 1, 120, 7, true}}, logs(describeLogDirsResponse(only, dirs)),
		"the partition named, current and future")
	only.Topics = []kmsg.DescribeLogDirsRequestTopic{}
	require.Empty(t, logs(describeLogDirsResponse(only, dirs)), "an empty list names nothing")

	refused := refuseDescribeLogDirs(req, codeRequestTimedOut).(*kmsg.DescribeLogDirsResponse)
	require.Equal(t, codeRequestTimedOut, refused.ErrorCode)
	require.Empty(t, refused.Dirs)
}

func TestAlterReplicaLogDirsAnswer(t *testing.T) {
	req := kmsg.NewPtrAlterReplicaLogDirsRequest()
	for _, d := range []struct {
		dir    string
		topics map[string][]int32
		order  []string
	}{
		{"/a", map[string][]int32{"t": {0, 2}, "s": {1}}, []string{"t", "s"}},
		{"/b", map[string][]int32{"t": {1}}, []string{"t"}},
	} {
		rd := kmsg.NewAlterReplicaLogDirsRequestDir()
		rd.Dir = d.dir
		for _, name := range d.order {
			rt := kmsg.NewAlterReplicaLogDirsRequestDirTopic()
			rt.Topic, rt.Partitions = name, d.topics[name]
			rd.Topics = append(rd.Topics, rt)
		}
		req.Dirs = append(req.Dirs, rd)
	}
	type named struct {
		dir, topic string
		partition  int32
	}
	resp := req.ResponseKind().(*kmsg.AlterReplicaLogDirsResponse)
	var calls []named
	forEachReplicaDir(req, resp, func(dir, topic string, partition int32, rp *kmsg.AlterReplicaLogDirsResponseTopicPartition, slot replicaDirSlot) {
		calls = append(calls, named{dir, topic, partition})
		require.Equal(t, partition, rp.Partition)
		require.Same(t, rp, &resp.Topics[slot.topic].Partitions[slot.partition])
		rp.ErrorCode = int16(100 + partition)
	})
	require.Equal(t, []named{{"/a", "t", 0}, {"/a", "t", 2}, {"/a", "s", 1}, {"/b", "t", 1}}, calls)
	require.Len(t, resp.Topics, 2, "grouped by topic")
	require.Equal(t, "t", resp.Topics[0].Topic)
	var codes []int16
	for _, p := range resp.Topics[0].Partitions {
		codes = append(codes, p.ErrorCode)
	}
	require.Equal(t, []int16{100, 102, 101}, codes, "each answer where its partition is")

	refused := refuseAlterReplicaLogDirs(req, codeUnsupportedVersion).(*kmsg.AlterReplicaLogDirsResponse)
	require.Len(t, refused.Topics, 2)
	for _, t2 := range refused.Topics {
		for _, p := range t2.Partitions {
			require.Equal(t, codeUnsupportedVersion, p.ErrorCode)
		}
	}

	require.Equal(t, kerr.ReplicaNotAvailable.Code, replicaDirCode(messages.ErrorCode_NOT_LEADER_OR_FOLLOWER), "as Kafka answers it here")
	require.Equal(t, kerr.LogDirNotFound.Code, replicaDirCode(messages.ErrorCode_LOG_DIR_NOT_FOUND))
	require.Equal(t, kerr.KafkaStorageError.Code, replicaDirCode(messages.ErrorCode_KAFKA_STORAGE_ERROR))
	require.Equal(t, int16(0), replicaDirCode(messages.ErrorCode_NONE))
}
