package node

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/messages"
)

// replicaFiles are the directories node id holds of topic-partition, in
// any of its log dirs, under any suffix (a future or a copy being
// deleted included).
func (c *testCluster) replicaFiles(id int32, topic string, partition int32) []string {
	c.t.Helper()
	var out []string
	for _, d := range c.cfgs[id].withDefaults().LogDirs {
		found, err := filepath.Glob(filepath.Join(d.Path, fmt.Sprintf("%s-%d*", topic, partition)))
		require.NoError(c.t, err)
		out = append(out, found...)
	}
	return out
}

// waitMoved waits until every running node describes topic-partition with
// replicas want and no move in flight.
func (c *testCluster) waitMoved(topic string, partition int32, want []int32) *messages.PartitionMetadata {
	c.t.Helper()
	var p *messages.PartitionMetadata
	require.Eventually(c.t, func() bool {
		for _, t := range c.agree().Topics {
			if t.Name == topic {
				p = t.Partitions[partition]
			}
		}
		return slices.Equal(p.Replicas, want) && len(p.AddingReplicas) == 0 && len(p.RemovingReplicas) == 0
	}, time.Minute, 50*time.Millisecond, "%s-%d to %v", topic, partition, want)
	return p
}

// spareNodes are the nodes of c that hold no replica of p, by id.
func (c *testCluster) spareNodes(p *messages.PartitionMetadata) []int32 {
	var out []int32
	for id := range c.nodes {
		if !slices.Contains(p.Replicas, id) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// requireOnce requires the records of got to be the values 0 to n-1, each
// once.
func requireOnce(t *testing.T, got map[int32][]*client.Record, n int) {
	t.Helper()
	seen := map[string]bool{}
	for _, rs := range got {
		for _, r := range rs {
			require.False(t, seen[string(r.Value)], "record %s twice", r.Value)
			seen[string(r.Value)] = true
		}
	}
	for i := range n {
		require.True(t, seen[fmt.Sprint(i)], "record %d is missing", i)
	}
	require.Len(t, seen, n)
}

// A partition on two of three nodes is moved to the third and one of its
// replicas: the new replica starts there, in a directory its node chose
// and recorded, catches up and joins the ISR, which completes the move;
// the replica left out, the leader, hands over and is deleted from its
// disk, and every record is there, once.
func TestReassignMovesAReplica(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := c.client()
	md, err := cl.CreateTopicReplicated(ctx, "moves", 1, 2, map[string]string{"min.insync.replicas": "2"})
	require.NoError(t, err)
	before := md.Partitions[0]
	spare := c.spareNodes(before)[0]
	produceAcked(t, cl, "moves", 0, 3000, -1)
	c.waitReplicated("moves")
	gone := before.Replicas[0]
	require.Equal(t, gone, before.Leader, "the preferred replica leads")
	require.NotEmpty(t, c.replicaFiles(gone, "moves", 0))
	require.Empty(t, c.replicaFiles(spare, "moves", 0))

	target := []int32{before.Replicas[1], spare}
	res, err := cl.ReassignPartition(ctx, "moves", 0, target)
	require.NoError(t, err)
	require.Equal(t, []int32{before.Replicas[1], spare, gone}, res.GetReplicas())
	require.Equal(t, []int32{spare}, res.GetAddingReplicas())
	require.Equal(t, []int32{gone}, res.GetRemovingReplicas())

	after := c.waitMoved("moves", 0, target)
	require.Equal(t, target[0], after.Leader, "the leader left out hands over to the first of the target")
	require.Greater(t, after.LeaderEpoch, before.LeaderEpoch)
	require.ElementsMatch(t, target, after.Isr)
	for _, r := range after.ReplicaDirs {
		require.NotEmpty(t, r.DirId, "node %d recorded its directory", r.Node)
	}
	require.Eventually(t, func() bool { return len(c.replicaFiles(gone, "moves", 0)) == 0 }, 30*time.Second, 20*time.Millisecond,
		"node %d deletes the replica it no longer holds", gone)
	require.NotEmpty(t, c.replicaFiles(spare, "moves", 0))

	produceAcked(t, c.client(), "moves", 3000, 1000, -1)
	c.waitReplicated("moves")
	requireOnce(t, consumeAll(t, c.client(), "moves", 1), 4000)
	st := c.replicaStatus(spare, "moves", 0)
	require.Equal(t, int64(4000), st.LogEndOffset, "the new replica holds every record")
}
