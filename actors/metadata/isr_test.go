package metadata

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/messages"
)

// threeNodes is an image of three live nodes and topic "t" of one
// partition on all three, led by node 1.
func threeNodes(t *testing.T, configs map[string]string) *Image {
	t.Helper()
	recs := append(append(register(1), register(2)...), register(3)...)
	recs = append(recs, CreateTopic(&messages.CreateTopicRequest{Name: "t", Partitions: 1, Configs: configs}, "id", [][]int32{{1, 2, 3}}))
	image, _ := replay(t, Empty(), recs...)
	return image
}

func TestAlterPartition(t *testing.T) {
	image := threeNodes(t, nil)
	p, _ := image.Partition("t", 0)
	require.Equal(t, []int32{1, 2, 3}, p.ISR)
	ask := func(leader, leaderEpoch, partitionEpoch int32, isr ...int32) *messages.AlterPartitionRequest {
		return &messages.AlterPartitionRequest{Topic: "t", Partition: 0, Leader: leader, LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch, Isr: isr}
	}

	rec, code, msg := image.AlterPartition(ask(1, 0, 0, 1, 2))
	require.Equal(t, messages.ErrorCode_NONE, code, msg)
	shrunk, _ := replay(t, image, rec)
	p, _ = shrunk.Partition("t", 0)
	require.Equal(t, []int32{1, 2}, p.ISR)
	require.Equal(t, int32(0), p.LeaderEpoch, "the leader stays: same leader epoch")
	require.Equal(t, int32(1), p.PartitionEpoch)

	for _, c := range []struct {
		name string
		req  *messages.AlterPartitionRequest
		code messages.ErrorCode
	}{
		{"a stale partition epoch", ask(1, 0, 0, 1), messages.ErrorCode_INVALID_UPDATE_VERSION},
		{"not the leader", ask(2, 0, 1, 2), messages.ErrorCode_FENCED_LEADER_EPOCH},
		{"an old leader epoch", ask(1, -1, 1, 1), messages.ErrorCode_FENCED_LEADER_EPOCH},
		{"a leader epoch from the future", ask(1, 1, 1, 1), messages.ErrorCode_UNKNOWN_LEADER_EPOCH},
		{"without the leader", ask(1, 0, 1, 2), messages.ErrorCode_INVALID_REQUEST},
		{"a stranger", ask(1, 0, 1, 1, 4), messages.ErrorCode_INVALID_REQUEST},
		{"twice the same", ask(1, 0, 1, 1, 2, 2), messages.ErrorCode_INVALID_REQUEST},
		{"no such partition", &messages.AlterPartitionRequest{Topic: "t", Partition: 1}, messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION},
	} {
		rec, code, msg := shrunk.AlterPartition(c.req)
		require.Equal(t, c.code, code, "%s: %s", c.name, msg)
		require.Nil(t, rec, c.name)
		require.NotEmpty(t, msg, c.name)
	}

	rec, code, _ = shrunk.AlterPartition(ask(1, 0, 1, 2, 1))
	require.Equal(t, messages.ErrorCode_NONE, code)
	require.Nil(t, rec, "the ISR asked for is the ISR: no record")

	// A fenced node may not join.
	fenced, _ := replay(t, shrunk, fenceRecord(3, true))
	_, code, _ = fenced.AlterPartition(ask(1, 0, 1, 1, 2, 3))
	require.Equal(t, messages.ErrorCode_INELIGIBLE_REPLICA, code)
	rec, code, _ = shrunk.AlterPartition(ask(1, 0, 1, 1, 2, 3))
	require.Equal(t, messages.ErrorCode_NONE, code)
	grown, _ := replay(t, shrunk, rec)
	p, _ = grown.Partition("t", 0)
	require.Equal(t, []int32{1, 2, 3}, p.ISR)
}

// A fenced node leaves every ISR in one change: acks=all does not wait for
// the lag time.
func TestFenceLeavesEveryISR(t *testing.T) {
	image := threeNodes(t, nil)
	fenced, _ := replay(t, image, image.Fence(2)...)
	p, _ := fenced.Partition("t", 0)
	require.Equal(t, []int32{1, 3}, p.ISR)
	require.Equal(t, int32(1), p.Leader)
	require.Equal(t, int32(0), p.LeaderEpoch)
	fenced, _ = replay(t, fenced, fenced.Fence(1)...)
	p, _ = fenced.Partition("t", 0)
	require.Equal(t, int32(3), p.Leader, "the leader comes from the ISR")
	require.Equal(t, []int32{3}, p.ISR)
	require.Equal(t, int32(1), p.LeaderEpoch)
}

func TestUncleanElection(t *testing.T) {
	for _, unclean := range []bool{false, true} {
		configs := map[string]string{}
		if unclean {
			configs["unclean.leader.election.enable"] = "true"
		}
		image := threeNodes(t, configs)
		// The ISR shrinks to the leader alone, then the leader dies.
		rec, _, _ := image.AlterPartition(&messages.AlterPartitionRequest{Topic: "t", Leader: 1, Isr: []int32{1}})
		image, _ = replay(t, image, rec)
		image, _ = replay(t, image, image.Fence(1)...)
		p, _ := image.Partition("t", 0)
		if !unclean {
			require.Equal(t, NoLeader, p.Leader, "no clean leader: the partition waits for node 1")
			require.Equal(t, []int32{1}, p.ISR)
			back, _ := replay(t, image, image.Fence(2)...)
			back, _ = replay(t, back, back.Unfence(2)...)
			p, _ = back.Partition("t", 0)
			require.Equal(t, NoLeader, p.Leader, "a replica outside the ISR does not lead")
			continue
		}
		require.Equal(t, int32(2), p.Leader, "unclean: a live replica outside the ISR leads")
		require.Equal(t, []int32{2}, p.ISR)
	}
}

// The replicas of a partition hear of every change of its leader or ISR.
func TestLocalChangesUpdated(t *testing.T) {
	image := threeNodes(t, nil)
	rec, _, _ := image.AlterPartition(&messages.AlterPartitionRequest{Topic: "t", Leader: 1, Isr: []int32{1, 3}})
	_, d := replay(t, image, rec)
	for _, node := range []int32{1, 2, 3} {
		changes := d.LocalChanges(node)
		require.Len(t, changes.Updated, 1)
		s := changes.Updated[0]
		require.Equal(t, []int32{1, 3}, s.GetIsr())
		require.Equal(t, int32(1), s.GetPartitionEpoch())
		require.Equal(t, "127.0.0.1:7001", s.GetLeaderAddress())
	}
	require.Empty(t, d.LocalChanges(4).Updated)
	after := d.Apply()
	require.Len(t, Diff(image, after, 2).Updated, 1, "a snapshot's difference tells the same")
	require.Empty(t, Diff(after, after, 2).Updated)
}

func TestElectPreferred(t *testing.T) {
	image := threeNodes(t, nil)
	require.False(t, image.Imbalanced(), "node 1 leads: balanced")
	recs, results := image.ElectLeaders(&messages.ElectLeadersRequest{Topic: "t"})
	require.Empty(t, recs)
	require.Equal(t, messages.ErrorCode_ELECTION_NOT_NEEDED, results[0].GetError())

	// Node 1 goes and comes back: node 2 leads, and node 1 rejoins the ISR.
	image, _ = replay(t, image, image.Fence(1)...)
	require.False(t, image.Imbalanced(), "node 1 is fenced")
	recs, results = image.ElectLeaders(&messages.ElectLeadersRequest{})
	require.Empty(t, recs)
	require.Equal(t, messages.ErrorCode_PREFERRED_LEADER_NOT_AVAILABLE, results[0].GetError())
	image, _ = replay(t, image, image.Unfence(1)...)
	recs, _ = image.ElectLeaders(&messages.ElectLeadersRequest{Topic: "t"})
	require.Empty(t, recs, "node 1 is not in the ISR yet")
	p, _ := image.Partition("t", 0)
	rec, _, _ := image.AlterPartition(&messages.AlterPartitionRequest{Topic: "t", Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, Isr: append(slices.Clone(p.ISR), 1)})
	image, _ = replay(t, image, rec)
	require.True(t, image.Imbalanced())
	recs, results = image.ElectLeaders(&messages.ElectLeadersRequest{Topic: "t", Partitions: []int32{0, 5}})
	require.Len(t, recs, 1)
	require.Equal(t, int32(1), results[0].GetLeader())
	require.Equal(t, messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, results[1].GetError())
	before, _ := image.Partition("t", 0)
	image, _ = replay(t, image, recs...)
	p, _ = image.Partition("t", 0)
	require.Equal(t, int32(1), p.Leader)
	require.Equal(t, before.LeaderEpoch+1, p.LeaderEpoch)
	require.False(t, image.Imbalanced())

	_, results = image.ElectLeaders(&messages.ElectLeadersRequest{Topic: "nope"})
	require.Equal(t, messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, results[0].GetError())
}

// An internal topic created with one replica gets three once three nodes
// are live, by a reassignment that keeps its replica first.
func TestRaiseInternalReplicas(t *testing.T) {
	recs := append(register(1), CreateTopic(&messages.CreateTopicRequest{Name: "__consumer_offsets", Partitions: 2}, "id", [][]int32{{1}, {1}}))
	image, _ := replay(t, Empty(), recs...)
	require.Nil(t, image.RaiseInternalReplicas(3), "one live node: one replica is all there can be")
	image, _ = replay(t, image, append(register(2), register(3)...)...)
	req := image.RaiseInternalReplicas(3)
	require.NotNil(t, req)
	require.Len(t, req.Partitions, 2)
	for _, p := range req.Partitions {
		require.Len(t, p.Replicas, 3)
		require.Equal(t, int32(1), p.Replicas[0], "the replica it has stays the preferred one")
		require.ElementsMatch(t, []int32{1, 2, 3}, p.Replicas)
	}
	recs, results := image.Reassign(req)
	for _, r := range results {
		require.Equal(t, messages.ErrorCode_NONE, r.GetError(), r.GetErrorMessage())
	}
	moving, _ := replay(t, image, recs...)
	require.Nil(t, moving.RaiseInternalReplicas(3), "a partition that moves already is left to its move")

	// Ordinary topics are not touched.
	plain, _ := replay(t, image, CreateTopic(&messages.CreateTopicRequest{Name: "t1", Partitions: 1}, "id2", [][]int32{{2}}))
	require.Len(t, plain.RaiseInternalReplicas(3).Partitions, 2)
}

// An unclean election gives a leaderless partition the first live member
// of its ISR, or, where none is live and the topic allows it, its first
// live replica; a partition with a leader needs none.
func TestElectUnclean(t *testing.T) {
	for _, c := range []struct {
		name string
		// isr is the ISR of the leaderless partition, fenced the nodes
		// fenced after it lost its leader.
		isr, fenced []int32
		allowed     bool
		leads       bool // the partition keeps node 1 as leader
		code        messages.ErrorCode
		leader      int32
		wantISR     []int32
	}{
		{name: "a leader already", isr: []int32{1, 2, 3}, leads: true, code: messages.ErrorCode_ELECTION_NOT_NEEDED, leader: 1, wantISR: []int32{1, 2, 3}},
		{name: "a live member of the ISR", isr: []int32{1, 2}, fenced: []int32{1}, code: messages.ErrorCode_NONE, leader: 2, wantISR: []int32{1, 2}},
		{name: "none in the ISR, not allowed", isr: []int32{1}, fenced: []int32{1}, code: messages.ErrorCode_ELIGIBLE_LEADERS_NOT_AVAILABLE, leader: NoLeader, wantISR: []int32{1}},
		{name: "none in the ISR, allowed", isr: []int32{1}, fenced: []int32{1}, allowed: true, code: messages.ErrorCode_NONE, leader: 2, wantISR: []int32{2}},
		{name: "the first live replica", isr: []int32{1}, fenced: []int32{1, 2}, allowed: true, code: messages.ErrorCode_NONE, leader: 3, wantISR: []int32{3}},
		{name: "no replica live", isr: []int32{1}, fenced: []int32{1, 2, 3}, allowed: true, code: messages.ErrorCode_ELIGIBLE_LEADERS_NOT_AVAILABLE, leader: NoLeader, wantISR: []int32{1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			configs := map[string]string{"unclean.leader.election.enable": fmt.Sprint(c.allowed)}
			image := threeNodes(t, configs)
			p, _ := image.Partition("t", 0)
			leader := NoLeader
			if c.leads {
				leader = 1
			}
			image, _ = replay(t, image, changeRecord("t", p, leader, c.isr))
			for _, id := range c.fenced {
				image, _ = replay(t, image, fenceRecord(id, true))
			}
			before, _ := image.Partition("t", 0)
			recs, results := image.ElectLeaders(&messages.ElectLeadersRequest{Unclean: true, TopicPartitions: []*messages.TopicPartition{{Topic: "t"}}})
			require.Len(t, results, 1)
			require.Equal(t, c.code, results[0].GetError(), results[0].GetErrorMessage())
			require.Equal(t, c.leader, results[0].GetLeader())
			image, _ = replay(t, image, recs...)
			p, _ = image.Partition("t", 0)
			require.Equal(t, c.leader, p.Leader)
			require.Equal(t, c.wantISR, p.ISR)
			if c.code == messages.ErrorCode_NONE {
				require.Equal(t, before.LeaderEpoch+1, p.LeaderEpoch)
			} else {
				require.Empty(t, recs)
			}
		})
	}
}

// Partitions named one by one, of several topics, are elected in the
// order named; one named twice is elected once and answered twice.
func TestElectNamedPartitions(t *testing.T) {
	image := threeNodes(t, nil)
	p, _ := image.Partition("t", 0)
	image, _ = replay(t, image, changeRecord("t", p, 2, p.ISR))
	recs, results := image.ElectLeaders(&messages.ElectLeadersRequest{TopicPartitions: []*messages.TopicPartition{
		{Topic: "t", Partition: 0}, {Topic: "nope", Partition: 0}, {Topic: "t", Partition: 3}, {Topic: "t", Partition: 0},
	}})
	require.Len(t, recs, 1)
	require.Len(t, results, 4)
	codes := make([]messages.ErrorCode, len(results))
	for i, r := range results {
		codes[i] = r.GetError()
	}
	require.Equal(t, []messages.ErrorCode{messages.ErrorCode_NONE, messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION,
		messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, messages.ErrorCode_NONE}, codes)
	require.Equal(t, int32(1), results[0].GetLeader())
	require.Equal(t, int32(1), results[3].GetLeader())
	require.Equal(t, "nope", results[1].GetTopic())
	require.Equal(t, int32(3), results[2].GetPartition())
}
