package metadata

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/messages"
)

// fourNodes is an image of four live nodes, node 5 registered and fenced,
// and topic "t" of one partition on nodes 1 and 2 (in directories "d1"
// and "d2"), led by node 1.
func fourNodes(t *testing.T) *Image {
	t.Helper()
	var recs []*messages.MetadataRecord
	for id := int32(1); id <= 4; id++ {
		recs = append(recs, register(id)...)
	}
	recs = append(recs, RegisterNode(&messages.RegisterNodeRequest{NodeId: 5, Address: "127.0.0.1:7005"}))
	recs = append(recs, CreateTopic(&messages.CreateTopicRequest{Name: "t", Partitions: 1}, "id", [][]int32{{1, 2}}),
		dirRecord("t", 0, 1, "d1"), dirRecord("t", 0, 2, "d2"))
	image, _ := replay(t, Empty(), recs...)
	return image
}

// move asks for one partition of "t".
func move(partition int32, replicas ...int32) *messages.ReassignPartitionsRequest {
	return &messages.ReassignPartitionsRequest{Partitions: []*messages.PartitionReassignment{{Topic: "t", Partition: partition, Replicas: replicas}}}
}

func cancelMove() *messages.ReassignPartitionsRequest {
	return &messages.ReassignPartitionsRequest{Partitions: []*messages.PartitionReassignment{{Topic: "t", Cancel: true}}}
}

// reassigned applies the one record m makes of image, which must make one.
func reassigned(t *testing.T, image *Image, m *messages.ReassignPartitionsRequest) (*Image, *Delta) {
	t.Helper()
	recs, results := image.Reassign(m)
	for _, r := range results {
		require.Equal(t, messages.ErrorCode_NONE, r.GetError(), r.GetErrorMessage())
	}
	require.Len(t, recs, 1)
	return replay(t, image, recs...)
}

// alterISR has the leader of "t"-0 ask for isr.
func alterISR(t *testing.T, image *Image, isr ...int32) (*Image, *Delta) {
	t.Helper()
	p, _ := image.Partition("t", 0)
	rec, code, msg := image.AlterPartition(&messages.AlterPartitionRequest{
		Topic: "t", Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, Isr: isr,
	})
	require.Equal(t, messages.ErrorCode_NONE, code, msg)
	require.NotNil(t, rec)
	return replay(t, image, rec)
}

func TestReassignRefusals(t *testing.T) {
	image := fourNodes(t)
	for _, c := range []struct {
		name string
		req  *messages.ReassignPartitionsRequest
		code messages.ErrorCode
	}{
		{"an unknown topic", &messages.ReassignPartitionsRequest{Partitions: []*messages.PartitionReassignment{{Topic: "nope", Replicas: []int32{1}}}}, messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION},
		{"an unknown partition", move(1, 2, 3), messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION},
		{"a negative partition", move(-1, 2, 3), messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION},
		{"an empty target", move(0), messages.ErrorCode_INVALID_REPLICA_ASSIGNMENT},
		{"a node twice", move(0, 2, 3, 2), messages.ErrorCode_INVALID_REPLICA_ASSIGNMENT},
		{"a node not registered", move(0, 2, 9), messages.ErrorCode_INVALID_REPLICA_ASSIGNMENT},
		{"a fenced node added", move(0, 2, 5), messages.ErrorCode_INVALID_REPLICA_ASSIGNMENT},
		{"the replicas it has", move(0, 1, 2), messages.ErrorCode_INVALID_REPLICA_ASSIGNMENT},
		{"a cancel with no move", cancelMove(), messages.ErrorCode_NO_REASSIGNMENT_IN_PROGRESS},
	} {
		recs, results := image.Reassign(c.req)
		require.Empty(t, recs, c.name)
		require.Len(t, results, 1, c.name)
		require.Equal(t, c.code, results[0].GetError(), "%s: %s", c.name, results[0].GetErrorMessage())
		require.NotEmpty(t, results[0].GetErrorMessage(), c.name)
	}

	twice := move(0, 2, 3)
	twice.Partitions = append(twice.Partitions, twice.Partitions[0])
	recs, results := image.Reassign(twice)
	require.Len(t, recs, 1, "the first is taken")
	require.Equal(t, messages.ErrorCode_NONE, results[0].GetError())
	require.Equal(t, messages.ErrorCode_INVALID_REQUEST, results[1].GetError())

	retried := move(0, 1, 2)
	retried.Retried = true
	recs, results = image.Reassign(retried)
	require.Empty(t, recs)
	require.Equal(t, messages.ErrorCode_NONE, results[0].GetError(), "a retry finds its move made")
	retried = cancelMove()
	retried.Retried = true
	recs, results = image.Reassign(retried)
	require.Empty(t, recs)
	require.Equal(t, messages.ErrorCode_NONE, results[0].GetError(), "a retry finds its cancel made")

	// A replica the partition keeps may be on a fenced node.
	image, _ = replay(t, image, image.Fence(2)...)
	recs, results = image.Reassign(move(0, 2, 3))
	require.Equal(t, messages.ErrorCode_NONE, results[0].GetError(), results[0].GetErrorMessage())
	require.Len(t, recs, 1)
}

// [1,2] to [2,3]: node 3's replica is added and node 1's marked for
// removal; the ISR change that brings node 3 in completes the move, node 2
// leading in a new epoch, and node 1 loses its replica.
func TestReassignStartsAndCompletes(t *testing.T) {
	image := fourNodes(t)
	moving, d := reassigned(t, image, move(0, 2, 3))
	p, _ := moving.Partition("t", 0)
	require.Equal(t, []int32{2, 3, 1}, p.Replicas, "the target, then what it removes")
	require.Equal(t, []int32{3}, p.Adding)
	require.Equal(t, []int32{1}, p.Removing)
	require.Equal(t, []int32{2, 3}, p.Target())
	require.True(t, p.Reassigning())
	require.Equal(t, []int32{1, 2}, p.ISR)
	require.Equal(t, int32(1), p.Leader)
	require.Equal(t, int32(0), p.LeaderEpoch, "the leader stays")
	require.Equal(t, int32(1), p.PartitionEpoch)
	require.Equal(t, []string{"d2", "", "d1"}, p.Dirs, "kept replicas keep their directories")

	added := d.LocalChanges(3)
	require.Len(t, added.Added, 1)
	require.Empty(t, added.Updated)
	a := added.Added[0]
	require.Equal(t, "", a.GetDirId(), "node 3 chooses its directory")
	require.Equal(t, []int32{2, 3, 1}, a.GetReplicas())
	require.Equal(t, []int32{3}, a.GetAddingReplicas())
	require.Equal(t, int32(1), a.GetLeader())
	for _, node := range []int32{1, 2} {
		changes := d.LocalChanges(node)
		require.Empty(t, changes.Added)
		require.Empty(t, changes.Removed)
		require.Len(t, changes.Updated, 1, "node %d", node)
		require.Equal(t, []int32{3}, changes.Updated[0].GetAddingReplicas())
		require.Equal(t, []int32{2, 3, 1}, changes.Updated[0].GetReplicas())
	}
	require.Equal(t, LocalChanges{}, d.LocalChanges(4))
	require.Equal(t, d.LocalChanges(3), Diff(image, moving, 3), "a snapshot's difference tells the same")

	md := moving.Describe([]string{"t"}, View{DirPath: func(int32, string) string { return "" }})[0].Partitions[0]
	require.Equal(t, []int32{3}, md.GetAddingReplicas())
	require.Equal(t, []int32{1}, md.GetRemovingReplicas())
	require.Len(t, md.GetReplicaDirs(), 3)

	// A snapshot keeps the move.
	restored, _ := replay(t, Empty(), moving.Records()...)
	rp, _ := restored.Partition("t", 0)
	require.Equal(t, p, rp)

	// Node 3 has fetched, but another change comes first: no completion.
	shrunk, _ := alterISR(t, moving, 1)
	p, _ = shrunk.Partition("t", 0)
	require.True(t, p.Reassigning())
	require.Equal(t, []int32{1}, p.ISR)

	done, d := alterISR(t, shrunk, 1, 2, 3)
	p, _ = done.Partition("t", 0)
	require.False(t, p.Reassigning())
	require.Equal(t, []int32{2, 3}, p.Replicas)
	require.Nil(t, p.Adding)
	require.Nil(t, p.Removing)
	require.Equal(t, []int32{2, 3}, p.ISR, "the ISR keeps the target's members")
	require.Equal(t, int32(2), p.Leader, "the first of the target in the ISR leads")
	require.Equal(t, int32(1), p.LeaderEpoch)
	require.Equal(t, []string{"d2", ""}, p.Dirs)

	removed := d.LocalChanges(1)
	require.Equal(t, []*messages.TopicPartition{{Topic: "t", Partition: 0}}, removed.Removed)
	require.Empty(t, removed.Updated, "a replica removed hears of no state")
	require.Empty(t, removed.Added)
	for _, node := range []int32{2, 3} {
		changes := d.LocalChanges(node)
		require.Len(t, changes.Updated, 1, "node %d", node)
		require.Equal(t, int32(2), changes.Updated[0].GetLeader())
		require.Empty(t, changes.Updated[0].GetAddingReplicas())
		require.Empty(t, changes.Removed)
	}
	require.Equal(t, removed.Removed, Diff(shrunk, done, 1).Removed)
}

// How a move completes, at once or once its replicas are in the ISR.
func TestReassignCompletion(t *testing.T) {
	for _, c := range []struct {
		name   string
		target []int32
		// joins are the ISR changes asked, in turn, once the move started.
		joins [][]int32
		// afterStart is whether the move is still in flight once started.
		afterStart bool
		replicas   []int32
		isr        []int32
		leader     int32
		epoch      int32
	}{
		{name: "a new order", target: []int32{2, 1}, replicas: []int32{2, 1}, isr: []int32{1, 2}, leader: 1, epoch: 0},
		{name: "the leader dropped", target: []int32{2}, replicas: []int32{2}, isr: []int32{2}, leader: 2, epoch: 1},
		{name: "a follower dropped", target: []int32{1}, replicas: []int32{1}, isr: []int32{1}, leader: 1, epoch: 0},
		{name: "the leader kept", target: []int32{1, 3}, joins: [][]int32{{1, 2, 3}}, afterStart: true, replicas: []int32{1, 3}, isr: []int32{1, 3}, leader: 1, epoch: 0},
		{name: "the first of the target leads", target: []int32{3, 2}, joins: [][]int32{{1, 2, 3}}, afterStart: true, replicas: []int32{3, 2}, isr: []int32{2, 3}, leader: 3, epoch: 1},
		{name: "a follower left as the last joins", target: []int32{2, 3}, joins: [][]int32{{1, 3}}, afterStart: true, replicas: []int32{2, 3}, isr: []int32{3}, leader: 3, epoch: 1},
		{name: "two added, one at a time", target: []int32{3, 4}, joins: [][]int32{{1, 2, 3}, {1, 2, 3, 4}}, afterStart: true, replicas: []int32{3, 4}, isr: []int32{3, 4}, leader: 3, epoch: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			image, _ := reassigned(t, fourNodes(t), move(0, c.target...))
			p, _ := image.Partition("t", 0)
			require.Equal(t, c.afterStart, p.Reassigning())
			for i, isr := range c.joins {
				p, _ = image.Partition("t", 0)
				require.True(t, p.Reassigning(), "still moving before ISR change %d", i)
				image, _ = alterISR(t, image, isr...)
			}
			p, _ = image.Partition("t", 0)
			require.False(t, p.Reassigning())
			require.Equal(t, c.replicas, p.Replicas)
			require.Equal(t, c.isr, p.ISR)
			require.Equal(t, c.leader, p.Leader)
			require.Equal(t, c.epoch, p.LeaderEpoch)
		})
	}

	// A target whose only member is out of the ISR waits for it to join.
	image := fourNodes(t)
	image, _ = alterISR(t, image, 1)
	image, _ = reassigned(t, image, move(0, 2))
	p, _ := image.Partition("t", 0)
	require.Equal(t, []int32{2, 1}, p.Replicas)
	require.Nil(t, p.Adding)
	require.Equal(t, []int32{1}, p.Removing)
	image, _ = alterISR(t, image, 1, 2)
	p, _ = image.Partition("t", 0)
	require.Equal(t, []int32{2}, p.Replicas)
	require.Equal(t, int32(2), p.Leader)
}

// A new target replaces the move in flight, from the original replicas;
// a cancel takes the partition back to them, and the replicas the move
// added are removed.
func TestReassignReplaceAndCancel(t *testing.T) {
	image := fourNodes(t)
	moving, _ := reassigned(t, image, move(0, 3, 4))
	p, _ := moving.Partition("t", 0)
	require.Equal(t, []int32{3, 4, 1, 2}, p.Replicas)
	require.Equal(t, []int32{3, 4}, p.Adding)
	require.Equal(t, []int32{1, 2}, p.Removing)
	moving, _ = alterISR(t, moving, 1, 2, 3)
	p, _ = moving.Partition("t", 0)
	require.True(t, p.Reassigning(), "node 4 is not in the ISR yet")

	recs, results := moving.Reassign(move(0, 3, 4))
	require.Empty(t, recs, "the move in flight asked again")
	require.Equal(t, messages.ErrorCode_NONE, results[0].GetError())

	// Node 3 is in the ISR already: the new move completes at once, and
	// node 4, which it drops, loses its replica.
	replaced, d := reassigned(t, moving, move(0, 2, 3))
	p, _ = replaced.Partition("t", 0)
	require.False(t, p.Reassigning())
	require.Equal(t, []int32{2, 3}, p.Replicas)
	require.Equal(t, []int32{2, 3}, p.ISR)
	require.Equal(t, int32(2), p.Leader)
	require.Equal(t, []*messages.TopicPartition{{Topic: "t", Partition: 0}}, d.LocalChanges(4).Removed)
	require.Equal(t, []*messages.TopicPartition{{Topic: "t", Partition: 0}}, d.LocalChanges(1).Removed)
	require.Len(t, d.LocalChanges(3).Updated, 1)

	// Replaced before any new replica joined.
	moving, _ = reassigned(t, image, move(0, 3, 4))
	replaced, d = reassigned(t, moving, move(0, 1, 3))
	p, _ = replaced.Partition("t", 0)
	require.Equal(t, []int32{1, 3, 2}, p.Replicas)
	require.Equal(t, []int32{3}, p.Adding)
	require.Equal(t, []int32{2}, p.Removing)
	require.Equal(t, []int32{1, 2}, p.ISR)
	require.Equal(t, []*messages.TopicPartition{{Topic: "t", Partition: 0}}, d.LocalChanges(4).Removed)
	require.Len(t, d.LocalChanges(3).Updated, 1, "node 3 keeps its replica")

	// Cancelled: the replicas before the move, in the order Kafka's revert
	// leaves them (those kept in the target's order, then those it was
	// removing), node 3's replica removed.
	moving, _ = reassigned(t, image, move(0, 2, 3))
	cancelled, d := reassigned(t, moving, cancelMove())
	p, _ = cancelled.Partition("t", 0)
	require.False(t, p.Reassigning())
	require.Equal(t, []int32{2, 1}, p.Replicas)
	require.ElementsMatch(t, []int32{1, 2}, p.ISR)
	require.Equal(t, int32(1), p.Leader)
	require.Equal(t, int32(0), p.LeaderEpoch)
	require.Equal(t, []string{"d2", "d1"}, p.Dirs)
	require.Equal(t, []*messages.TopicPartition{{Topic: "t", Partition: 0}}, d.LocalChanges(3).Removed)
	require.Empty(t, d.LocalChanges(1).Removed)

	// Cancelled once node 3 joined the ISR, while the move waited for node
	// 4: node 3 leaves the ISR with its replica.
	moving, _ = reassigned(t, image, move(0, 3, 4))
	moving, _ = alterISR(t, moving, 1, 2, 3)
	cancelled, _ = reassigned(t, moving, cancelMove())
	p, _ = cancelled.Partition("t", 0)
	require.Equal(t, []int32{1, 2}, p.Replicas)
	require.Equal(t, []int32{1, 2}, p.ISR)
}

// A fenced node leaves the ISR as ever: a replica being added there joins
// only once it is back.
func TestReassignWithAFencedNode(t *testing.T) {
	image, _ := reassigned(t, fourNodes(t), move(0, 2, 3))
	image, _ = replay(t, image, image.Fence(3)...)
	p, _ := image.Partition("t", 0)
	require.True(t, p.Reassigning())
	_, code, _ := image.AlterPartition(&messages.AlterPartitionRequest{Topic: "t", Leader: 1, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, Isr: []int32{1, 2, 3}})
	require.Equal(t, messages.ErrorCode_INELIGIBLE_REPLICA, code)

	// The leader, which the move removes, is fenced: node 2 leads, and the
	// move waits on.
	image, _ = replay(t, image, image.Fence(1)...)
	p, _ = image.Partition("t", 0)
	require.Equal(t, int32(2), p.Leader)
	require.Equal(t, []int32{2}, p.ISR)
	require.True(t, p.Reassigning())

	image, _ = replay(t, image, image.Unfence(3)...)
	image, _ = alterISR(t, image, 2, 3)
	p, _ = image.Partition("t", 0)
	require.Equal(t, []int32{2, 3}, p.Replicas)
	require.Equal(t, int32(2), p.Leader)
	require.False(t, p.Reassigning())
}

// The records of a move in flight read back the same in a snapshot, and a
// change record without replicas keeps them.
func TestReassignRecordsReplay(t *testing.T) {
	image, _ := reassigned(t, fourNodes(t), move(0, 3, 2))
	recs := image.Records()
	again, _ := replay(t, Empty(), recs...)
	require.True(t, proto.Equal(&messages.MetadataBatch{Records: recs}, &messages.MetadataBatch{Records: again.Records()}))
	p, _ := image.Partition("t", 0)
	q, _ := again.Partition("t", 0)
	require.Equal(t, p, q)

	rec := changeRecord("t", p, p.Leader, slices.Clone(p.ISR))
	require.Nil(t, rec.GetPartitionChange().GetReplicas(), "a change of leader or ISR leaves the replicas unnamed")
	after, _ := replay(t, again, rec)
	q, _ = after.Partition("t", 0)
	require.Equal(t, p.Replicas, q.Replicas)
	require.Equal(t, p.Adding, q.Adding)
	require.Equal(t, p.Removing, q.Removing)
}

// A request that keeps the replication factor refuses a target of another
// size, counted against the replicas before any move, and lets a cancel
// through.
func TestReassignKeepsReplicationFactor(t *testing.T) {
	image := fourNodes(t)
	keep := func(req *messages.ReassignPartitionsRequest) *messages.ReassignPartitionsRequest {
		req.KeepReplicationFactor = true
		return req
	}
	for _, c := range []struct {
		name string
		req  *messages.ReassignPartitionsRequest
		code messages.ErrorCode
	}{
		{"one more", keep(move(0, 1, 2, 3)), messages.ErrorCode_INVALID_REPLICATION_FACTOR},
		{"one fewer", keep(move(0, 2)), messages.ErrorCode_INVALID_REPLICATION_FACTOR},
		{"as many", keep(move(0, 2, 3)), messages.ErrorCode_NONE},
		{"one more, allowed", move(0, 1, 2, 3), messages.ErrorCode_NONE},
	} {
		recs, results := image.Reassign(c.req)
		require.Equal(t, c.code, results[0].GetError(), "%s: %s", c.name, results[0].GetErrorMessage())
		require.Equal(t, c.code == messages.ErrorCode_NONE, len(recs) == 1, c.name)
	}

	// While [1,2] moves to [2,3] its replicas are [2,3,1]: a new target
	// of two keeps the factor, and a cancel is let through.
	moving, _ := reassigned(t, image, move(0, 2, 3))
	_, results := moving.Reassign(keep(move(0, 3, 4)))
	require.Equal(t, messages.ErrorCode_NONE, results[0].GetError(), results[0].GetErrorMessage())
	_, results = moving.Reassign(keep(move(0, 2, 3, 4)))
	require.Equal(t, messages.ErrorCode_INVALID_REPLICATION_FACTOR, results[0].GetError())
	_, results = moving.Reassign(keep(cancelMove()))
	require.Equal(t, messages.ErrorCode_NONE, results[0].GetError())
}
