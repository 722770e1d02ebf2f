package node

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/actors/group"
	"github.com/depot-dev/depot/messages"
)

// waitCoordinator waits until every running node answers that node id
// coordinates group.
func (c *testCluster) waitCoordinator(group string, id int32) {
	c.t.Helper()
	require.Eventually(c.t, func() bool {
		for _, n := range c.nodes {
			r, err := actors.Request[*messages.FindCoordinatorResponse](context.Background(), n.System().Root, n.Groups(),
				&messages.FindCoordinatorRequest{GroupId: group}, time.Second)
			if err != nil || r.Error != messages.ErrorCode_NONE || r.NodeId != id {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond, "node %d coordinates group %q", id, group)
}

// offsetsTopic waits until node n describes __consumer_offsets.
func offsetsTopic(t *testing.T, n *Node) *messages.TopicMetadata {
	t.Helper()
	var md *messages.TopicMetadata
	require.Eventually(t, func() bool {
		md = request[*messages.MetadataResponse](t, n, n.Metadata(), &messages.MetadataRequest{Topics: []string{group.OffsetsTopic}}).Topics[0]
		return md.Error == messages.ErrorCode_NONE
	}, 30*time.Second, 20*time.Millisecond)
	return md
}

// On a node alone, __consumer_offsets, created on the first group request,
// has one replica per partition: as many as there are live nodes.
func TestOffsetsTopicOnOneNode(t *testing.T) {
	n := startNode(t, groupTestConfig(t, t.TempDir()))
	findGroup(t, n, "solo")
	md := offsetsTopic(t, n)
	require.Len(t, md.Partitions, 3)
	for _, p := range md.Partitions {
		require.Len(t, p.Replicas, 1, "partition %d", p.Partition)
	}
}

// Three nodes, a group that read half of a topic and committed: when the
// node that leads the group's partition of __consumer_offsets is killed,
// another replica of it leads, its node coordinates the group with every
// committed offset and its stored generation, and the member finds it and
// goes on, in its generation, without joining again: nothing committed is
// read again, nothing is missed.
// The group is one whose coordinator leads none of the topic's
// partitions, so that what is tested is the coordinator's move alone.
func TestGroupCoordinatorFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("kills the coordinator of three nodes")
	}
	c := newTestClusterOf(t, 3, fastQuorum, func(cfg *Config) { cfg.OffsetsTopicPartitions = 3 })
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const total = 4000
	events, err := cl.CreateTopicReplicated(ctx, "events", 2, 3, nil)
	require.NoError(t, err)
	produceAcked(t, cl, "events", 0, total, -1)

	// __consumer_offsets, made by the first group request, has a replica,
	// in sync, on each node.
	var n1 *Node
	for _, n := range c.nodes {
		n1 = n
	}
	request[*messages.FindCoordinatorResponse](t, n1, n1.Groups(), &messages.FindCoordinatorRequest{GroupId: "warm-up"})
	offsetsTopic(t, n1)
	var offsets *messages.TopicMetadata
	for _, tm := range c.agree().Topics {
		if tm.Name == group.OffsetsTopic {
			offsets = tm
		}
	}
	require.Len(t, offsets.Partitions, 3)
	for _, p := range offsets.Partitions {
		require.Len(t, p.Replicas, 3, "partition %d", p.Partition)
		require.Len(t, p.Isr, 3, "partition %d", p.Partition)
	}
	leadsEvents := map[int32]bool{}
	for _, p := range events.Partitions {
		leadsEvents[p.Leader] = true
	}
	groupID := ""
	for i := 0; groupID == "" && i < 1000; i++ {
		id := fmt.Sprint("failover-", i)
		if !leadsEvents[offsets.Partitions[group.OffsetsPartitionFor(id, 3)].Leader] {
			groupID = id
		}
	}
	require.NotEmpty(t, groupID, "a group whose coordinator leads no partition of the topic")
	index := group.OffsetsPartitionFor(groupID, 3)
	old := offsets.Partitions[index]
	c.waitCoordinator(groupID, old.Leader)

	member, err := c.client().NewGroupConsumer(groupID, []string{"events"},
		client.ResetOffset(client.ResetEarliest), client.HeartbeatInterval(100*time.Millisecond), client.SessionTimeout(3*time.Second),
		client.AutoCommit(0), client.Assignors(client.AssignorRange))
	require.NoError(t, err)
	defer member.Close()
	before := newSeen()
	for before.distinct() < total/2 {
		records, err := member.Poll(ctx)
		require.NoError(t, err)
		before.add(records)
	}
	require.NoError(t, member.CommitSync(ctx))
	committed, err := cl.CommittedOffsets(ctx, groupID)
	require.NoError(t, err)
	sum := int64(0)
	for _, offset := range committed {
		sum += offset
	}
	require.Equal(t, int64(before.distinct()), sum, "the commit covers every record read")
	firstMember := member.MemberID()
	d := request[*messages.DescribeGroupResponse](t, c.nodes[old.Leader], c.nodes[old.Leader].Groups(), &messages.DescribeGroupRequest{GroupId: groupID})
	generation := d.Generation

	require.NoError(t, killInProcess(c.nodes[old.Leader]))
	delete(c.nodes, old.Leader)
	killed := time.Now()
	var now *messages.PartitionMetadata
	require.Eventually(t, func() bool {
		for _, tm := range c.agree().Topics {
			if tm.Name == group.OffsetsTopic {
				now = tm.Partitions[index]
			}
		}
		return now.Leader >= 0 && now.Leader != old.Leader
	}, 30*time.Second, 20*time.Millisecond)
	require.Greater(t, now.LeaderEpoch, old.LeaderEpoch)

	// A client of the live nodes finds the new coordinator and every offset.
	c.waitCoordinator(groupID, now.Leader)
	got, err := c.client().CommittedOffsets(ctx, groupID)
	require.NoError(t, err)
	require.Equal(t, committed, got)

	// The member, whose coordinator is gone, finds the new one, which
	// knows it, and reads on from the committed offsets.
	after := newSeen()
	require.NoError(t, poll(ctx, member, after, func() bool {
		if len(member.Assigned()) != len(events.Partitions) {
			return false
		}
		after.mu.Lock()
		defer after.mu.Unlock()
		for i := range total {
			if v := strconv.Itoa(i); before.count[v] == 0 && after.count[v] == 0 {
				return false
			}
		}
		return true
	}))
	require.NoError(t, ctx.Err(), "the member did not read on")
	t.Logf("the member read on %v after its coordinator was killed", time.Since(killed).Round(10*time.Millisecond))
	after.mu.Lock()
	defer after.mu.Unlock()
	for v := range before.count {
		require.Zero(t, after.count[v], "committed record %s read again", v)
	}
	d = request[*messages.DescribeGroupResponse](t, c.nodes[now.Leader], c.nodes[now.Leader].Groups(), &messages.DescribeGroupRequest{GroupId: groupID})
	require.Equal(t, messages.ErrorCode_NONE, d.Error, d.ErrorMessage)
	require.Len(t, d.Members, 1)
	require.Equal(t, firstMember, member.MemberID(), "the same member")
	require.Equal(t, firstMember, d.Members[0].MemberId)
	require.Equal(t, generation, d.Generation, "in the same generation: no rebalance")
}
