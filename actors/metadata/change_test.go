package metadata

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/messages"
)

func assigned(replicas ...[]int32) []*messages.ReplicaAssignment {
	out := make([]*messages.ReplicaAssignment, len(replicas))
	for i, r := range replicas {
		out[i] = &messages.ReplicaAssignment{Replicas: r}
	}
	return out
}

// A create may name each partition's replicas, as Kafka's manual
// assignment: then it gives no count or factor, every partition has as
// many replicas, each on a live node named once.
func TestValidateCreateWithAssignments(t *testing.T) {
	image := fourNodes(t)
	for _, tc := range []struct {
		name    string
		req     *messages.CreateTopicRequest
		code    messages.ErrorCode
		message string
	}{
		{"fine", &messages.CreateTopicRequest{Name: "o", Assignments: assigned([]int32{1, 2}, []int32{3, 4})}, messages.ErrorCode_NONE, ""},
		{"with a count too", &messages.CreateTopicRequest{Name: "o", Partitions: 2, Assignments: assigned([]int32{1})}, messages.ErrorCode_INVALID_REQUEST,
			`topic "o": give either a partition count and replication factor or the replicas of each partition, not both`},
		{"with a factor too", &messages.CreateTopicRequest{Name: "o", ReplicationFactor: 1, Assignments: assigned([]int32{1})}, messages.ErrorCode_INVALID_REQUEST,
			`topic "o": give either a partition count and replication factor or the replicas of each partition, not both`},
		{"no replicas", &messages.CreateTopicRequest{Name: "o", Assignments: assigned([]int32{})}, messages.ErrorCode_INVALID_REPLICA_ASSIGNMENT,
			`partition 0 of topic "o" is given no replicas`},
		{"uneven", &messages.CreateTopicRequest{Name: "o", Assignments: assigned([]int32{1, 2}, []int32{3})}, messages.ErrorCode_INVALID_REPLICA_ASSIGNMENT,
			`partition 1 of topic "o" is given 1 replicas where its other partitions have 2: every partition has as many`},
		{"twice", &messages.CreateTopicRequest{Name: "o", Assignments: assigned([]int32{2, 2})}, messages.ErrorCode_INVALID_REPLICA_ASSIGNMENT,
			`partition 0 of topic "o" names node 2 twice`},
		{"unknown node", &messages.CreateTopicRequest{Name: "o", Assignments: assigned([]int32{9})}, messages.ErrorCode_INVALID_REPLICA_ASSIGNMENT,
			`partition 0 of topic "o" names node 9, which is not registered`},
		{"fenced node", &messages.CreateTopicRequest{Name: "o", Assignments: assigned([]int32{1, 5})}, messages.ErrorCode_INVALID_REPLICA_ASSIGNMENT,
			`partition 0 of topic "o" names node 5, which is fenced`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, code, msg := image.ValidateCreate(tc.req)
			require.Equal(t, tc.code, code, msg)
			require.Equal(t, tc.message, msg)
		})
	}
	m := &messages.CreateTopicRequest{Name: "o", Assignments: assigned([]int32{1, 2}, []int32{3, 4})}
	require.Equal(t, int32(2), PartitionCount(m))
	require.Equal(t, [][]int32{{1, 2}, {3, 4}}, Replicas(m.Assignments))
	require.Nil(t, Replicas(nil))
}

func TestValidateCreatePartitions(t *testing.T) {
	image := fourNodes(t)
	image, _ = replay(t, image, CreateTopic(&messages.CreateTopicRequest{Name: "__consumer_offsets", Partitions: 1}, "id2", [][]int32{{1}}))
	for _, tc := range []struct {
		name    string
		req     *messages.CreatePartitionsRequest
		code    messages.ErrorCode
		message string
	}{
		{"fine", &messages.CreatePartitionsRequest{Topic: "t", Count: 3}, messages.ErrorCode_NONE, ""},
		{"fine with replicas", &messages.CreatePartitionsRequest{Topic: "t", Count: 2, Assignments: assigned([]int32{3, 4})}, messages.ErrorCode_NONE, ""},
		{"unknown topic", &messages.CreatePartitionsRequest{Topic: "nope", Count: 3}, messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, `topic "nope" does not exist`},
		{"internal topic", &messages.CreatePartitionsRequest{Topic: "__consumer_offsets", Count: 3}, messages.ErrorCode_INVALID_REQUEST,
			`partitions are not added to internal topic "__consumer_offsets": what each holds is found by hashing among its partitions`},
		{"fewer", &messages.CreatePartitionsRequest{Topic: "t", Count: 0}, messages.ErrorCode_INVALID_PARTITIONS,
			`topic "t" has 1 partitions: a topic's partitions can be added, never removed, so 0 is refused`},
		{"as many", &messages.CreatePartitionsRequest{Topic: "t", Count: 1}, messages.ErrorCode_INVALID_PARTITIONS, `topic "t" already has 1 partitions`},
		{"too many", &messages.CreatePartitionsRequest{Topic: "t", Count: MaxPartitionsPerTopic + 1}, messages.ErrorCode_INVALID_PARTITIONS,
			`topic "t" cannot have 10001 partitions: a topic has 1 to 10000`},
		{"replicas of too few", &messages.CreatePartitionsRequest{Topic: "t", Count: 3, Assignments: assigned([]int32{3, 4})}, messages.ErrorCode_INVALID_REPLICA_ASSIGNMENT,
			`2 partitions are added to topic "t", but the replicas of 1 are given`},
		{"another factor", &messages.CreatePartitionsRequest{Topic: "t", Count: 2, Assignments: assigned([]int32{3})}, messages.ErrorCode_INVALID_REPLICA_ASSIGNMENT,
			`partition 1 of topic "t" is given 1 replicas where its other partitions have 2: every partition has as many`},
		{"fenced", &messages.CreatePartitionsRequest{Topic: "t", Count: 2, Assignments: assigned([]int32{3, 5})}, messages.ErrorCode_INVALID_REPLICA_ASSIGNMENT,
			`partition 1 of topic "t" names node 5, which is fenced`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic, rf, code, msg := image.ValidateCreatePartitions(tc.req)
			require.Equal(t, tc.code, code, msg)
			require.Equal(t, tc.message, msg)
			if code == messages.ErrorCode_NONE {
				require.Equal(t, "t", topic.Name)
				require.Equal(t, 2, rf, "the factor of the topic's first partition")
			}
		})
	}
}

// New partitions are replayed after the topic's last one; the node that
// holds one starts it, and the image before is a value, unchanged. A
// snapshot keeps them.
func TestAddPartitions(t *testing.T) {
	image := fourNodes(t)
	topic, _ := image.Topic("t")
	recs := AddPartitions(topic, [][]int32{{3, 4}, {4, 1}})
	next, delta := replay(t, image, recs...)

	before, _ := image.Topic("t")
	require.Len(t, before.Partitions, 1)
	after, _ := next.Topic("t")
	require.Len(t, after.Partitions, 3)
	for i, want := range [][]int32{{1, 2}, {3, 4}, {4, 1}} {
		p := after.Partitions[i]
		require.Equal(t, int32(i), p.Partition)
		require.Equal(t, want, p.Replicas)
		require.Equal(t, want, p.ISR)
		require.Equal(t, want[0], p.Leader)
		require.Len(t, p.Dirs, 2)
	}
	require.Equal(t, []string{"d1", "d2"}, after.Partitions[0].Dirs, "the partitions it had keep their dirs")

	local := delta.LocalChanges(4)
	require.Len(t, local.Added, 2)
	require.Equal(t, []int32{1, 2}, []int32{local.Added[0].Partition, local.Added[1].Partition})
	require.Equal(t, int32(3), local.Added[0].Leader)
	require.Empty(t, local.Created)
	require.Empty(t, local.Updated)
	require.Len(t, delta.LocalChanges(1).Added, 1)
	require.Empty(t, delta.LocalChanges(2).Added)
	diff := Diff(image, next, 4).Added
	require.Len(t, diff, 2)
	require.True(t, proto.Equal(local.Added[1], diff[1]), "a snapshot restored starts them too")

	restored, _ := replay(t, Empty(), next.Records()...)
	again, _ := restored.Topic("t")
	require.Equal(t, after.Partitions, again.Partitions)

	// A record for a partition that is not the topic's next, or of a topic
	// that does not exist, is skipped.
	d := NewDelta(next, nil)
	require.ErrorIs(t, d.Replay(recs[0]), ErrRecord)
	require.ErrorIs(t, d.Replay(AddPartitions(&Topic{Name: "gone"}, [][]int32{{1}})[0]), ErrRecord)
	require.True(t, proto.Equal(&messages.PartitionAssignment{Topic: "t", Partition: 1, NodeId: 3, Replicas: []int32{3, 4}, Isr: []int32{3, 4}},
		recs[0].GetPartition().GetAssignment()))
}

func TestAlterConfigs(t *testing.T) {
	image := fourNodes(t)
	image, _ = replay(t, image, CreateTopic(&messages.CreateTopicRequest{Name: "c", Partitions: 1, Configs: map[string]string{"retention.ms": "1000"}}, "idc", [][]int32{{1}}))
	set := func(key, value string) *messages.ConfigChange {
		return &messages.ConfigChange{Key: key, Op: messages.ConfigChange_SET, Value: value}
	}
	for _, tc := range []struct {
		name    string
		req     *messages.AlterTopicConfigsRequest
		code    messages.ErrorCode
		message string
		// configs are those set after the change, nil for no record.
		configs map[string]string
	}{
		{"set", &messages.AlterTopicConfigsRequest{Topic: "c", Changes: []*messages.ConfigChange{set("segment.bytes", "4096")}}, messages.ErrorCode_NONE, "",
			map[string]string{"retention.ms": "1000", "segment.bytes": "4096"}},
		{"delete", &messages.AlterTopicConfigsRequest{Topic: "c", Changes: []*messages.ConfigChange{{Key: "retention.ms", Op: messages.ConfigChange_DELETE, Value: "ignored"}}},
			messages.ErrorCode_NONE, "", map[string]string{}},
		{"replace", &messages.AlterTopicConfigsRequest{Topic: "c", Replace: true, Changes: []*messages.ConfigChange{set("flush.ms", "10")}}, messages.ErrorCode_NONE, "",
			map[string]string{"flush.ms": "10"}},
		{"as it is", &messages.AlterTopicConfigsRequest{Topic: "c", Changes: []*messages.ConfigChange{set("retention.ms", "1000")}}, messages.ErrorCode_NONE, "", nil},
		{"unknown topic", &messages.AlterTopicConfigsRequest{Topic: "nope"}, messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, `topic "nope" does not exist`, nil},
		{"unknown key", &messages.AlterTopicConfigsRequest{Topic: "c", Changes: []*messages.ConfigChange{set("retention.hours", "1")}}, messages.ErrorCode_INVALID_CONFIG,
			`invalid config for topic "c": unknown key "retention.hours"`, nil},
		{"bad value", &messages.AlterTopicConfigsRequest{Topic: "c", Changes: []*messages.ConfigChange{set("retention.ms", "soon")}}, messages.ErrorCode_INVALID_CONFIG,
			`invalid config for topic "c": retention.ms "soon" is not an integer`, nil},
		{"compact", &messages.AlterTopicConfigsRequest{Topic: "c", Changes: []*messages.ConfigChange{{Key: "cleanup.policy", Op: messages.ConfigChange_APPEND, Value: "compact"}}},
			messages.ErrorCode_INVALID_CONFIG, `invalid config for topic "c": cleanup.policy "delete,compact": compaction is not supported, only "delete"`, nil},
		{"twice", &messages.AlterTopicConfigsRequest{Topic: "c", Changes: []*messages.ConfigChange{set("flush.ms", "1"), set("flush.ms", "2")}}, messages.ErrorCode_INVALID_REQUEST,
			`configs of topic "c" not changed: invalid config change: flush.ms is changed twice`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, code, msg := image.AlterConfigs(tc.req)
			require.Equal(t, tc.code, code, msg)
			require.Equal(t, tc.message, msg)
			if tc.configs == nil {
				require.Nil(t, rec)
				return
			}
			require.Equal(t, tc.configs, rec.GetTopicConfig().GetConfigs())
		})
	}

	rec, code, _ := image.AlterConfigs(&messages.AlterTopicConfigsRequest{Topic: "t", Changes: []*messages.ConfigChange{set("retention.ms", "5000"), set("max.message.bytes", "100")}})
	require.Equal(t, messages.ErrorCode_NONE, code)
	next, delta := replay(t, image, rec)
	after, _ := next.Topic("t")
	require.Equal(t, map[string]string{"retention.ms": "5000", "max.message.bytes": "100"}, after.Configs)
	require.Equal(t, int32(100), after.Config.MaxMessageBytes)
	require.Equal(t, int64(5000), after.Config.Log.RetentionMs.Milliseconds())
	before, _ := image.Topic("t")
	require.Empty(t, before.Configs, "the image before is unchanged")

	for _, node := range []int32{1, 2} {
		local := delta.LocalChanges(node)
		require.Len(t, local.Reconfigured, 1, "node %d holds a partition of t", node)
		require.Equal(t, "t", local.Reconfigured[0].Name)
		require.Empty(t, local.Added)
		require.Empty(t, local.Updated)
	}
	require.Empty(t, delta.LocalChanges(3).Reconfigured)
	require.Len(t, Diff(image, next, 1).Reconfigured, 1)

	md := next.DescribeTopic(after, View{DirPath: func(int32, string) string { return "" }})
	require.Equal(t, map[string]string{"retention.ms": "5000", "max.message.bytes": "100"}, md.ConfigsSet)
	require.Equal(t, "5000", md.Configs["retention.ms"])
	require.Equal(t, "1073741824", md.Configs["segment.bytes"])

	restored, _ := replay(t, Empty(), next.Records()...)
	again, _ := restored.Topic("t")
	require.Equal(t, after.Configs, again.Configs)
	require.Equal(t, after.Config, again.Config)

	// Stored configs no longer valid leave the topic as it was.
	d := NewDelta(next, nil)
	err := d.Replay(&messages.MetadataRecord{Record: &messages.MetadataRecord_TopicConfig{TopicConfig: &messages.TopicConfigRecord{Name: "t", Configs: map[string]string{"x": "1"}}}})
	require.True(t, errors.Is(err, ErrRecord), err)
	kept, _ := d.Apply().Topic("t")
	require.Equal(t, after.Configs, kept.Configs)
	require.ErrorIs(t, d.Replay(&messages.MetadataRecord{Record: &messages.MetadataRecord_TopicConfig{TopicConfig: &messages.TopicConfigRecord{Name: "gone"}}}), ErrRecord)
}
