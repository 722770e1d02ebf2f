package node

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
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

// requireOnce requires the records of got to be those keyed k0 to k(n-1),
// each once.
func requireOnce(t *testing.T, got map[int32][]*client.Record, n int) {
	t.Helper()
	seen := map[string]bool{}
	for _, rs := range got {
		for _, r := range rs {
			require.False(t, seen[string(r.Key)], "record %s twice", r.Key)
			seen[string(r.Key)] = true
		}
	}
	for i := range n {
		require.True(t, seen[fmt.Sprintf("k%d", i)], "record k%d is missing", i)
	}
	require.Len(t, seen, n)
}

// producePadded produces n records keyed k<i> from first on, each value
// padded to about size bytes, with acks=all, in batches of 64 KiB at
// most, and waits for every acknowledgement.
func producePadded(t *testing.T, cl *client.Client, topic string, first, n, size int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := cl.NewProducer(client.Acks(-1), client.BatchBytes(64<<10))
	require.NoError(t, err)
	defer p.Close()
	pad := strings.Repeat("x", size)
	for i := first; i < first+n; i++ {
		p.Produce(ctx, &client.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "%d:%s", i, pad)}, nil)
	}
	require.NoError(t, p.Flush(ctx))
}

// steadyProducer produces acks=all records keyed k<i>, from a first key on,
// a few at a time, each few acknowledged before the next, until stopped.
type steadyProducer struct {
	next  atomic.Int64
	stop  chan struct{}
	done  chan struct{}
	err   error
	acked atomic.Int64
}

func startSteadyProducer(t *testing.T, cl *client.Client, topic string, first int) *steadyProducer {
	t.Helper()
	p, err := cl.NewProducer(client.Acks(-1))
	require.NoError(t, err)
	s := &steadyProducer{stop: make(chan struct{}), done: make(chan struct{})}
	s.next.Store(int64(first))
	s.acked.Store(int64(first))
	go func() {
		defer close(s.done)
		defer p.Close()
		for {
			select {
			case <-s.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			for range 20 {
				i := s.next.Add(1) - 1
				p.Produce(ctx, &client.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "%d", i)}, nil)
			}
			err := p.Flush(ctx)
			cancel()
			if err != nil {
				s.err = err
				return
			}
			s.acked.Store(s.next.Load())
		}
	}()
	return s
}

// finish stops the producer and returns how many records it had
// acknowledged, every one below that key, or its first failure.
func (s *steadyProducer) finish() (int, error) {
	close(s.stop)
	<-s.done
	return int(s.acked.Load()), s.err
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

// waitProgress waits until the status of topic-partition's move shows an
// added replica on its way: some of the leader's log, not all of it.
func waitProgress(t *testing.T, cl *client.Client, topic string, partition int32) client.Reassignment {
	t.Helper()
	var seen client.Reassignment
	require.Eventually(t, func() bool {
		all, err := cl.Reassignments(context.Background(), topic)
		require.NoError(t, err)
		for _, r := range all {
			if r.Partition != partition {
				continue
			}
			for _, p := range r.Progress {
				if p.LogEndOffset > 0 && p.LogEndOffset < r.LeaderLogEnd && !p.InSync {
					seen = r
					return true
				}
			}
		}
		return false
	}, 30*time.Second, 20*time.Millisecond)
	return seen
}

// Three nodes, the throttle at 256 KiB/s: a partition of about 1.5 MiB on
// two of them moves to the third and one of its replicas while acks=all
// produces go on and are acknowledged throughout. The status shows the new
// replica catching up, the catch-up takes the time the throttle allows,
// and once the move completes the replica left out is deleted and every
// acknowledged record is there, once.
func TestReassignOnlineUnderThrottle(t *testing.T) {
	if testing.Short() {
		t.Skip("moves a partition under a throttle")
	}
	const throttle = 256 << 10
	c := newTestClusterOf(t, 3, fastQuorum, func(cfg *Config) { cfg.Balance.ThrottleBytesPerS = throttle })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := c.client()
	md, err := cl.CreateTopicReplicated(ctx, "online", 1, 2, map[string]string{"min.insync.replicas": "2"})
	require.NoError(t, err)
	before := md.Partitions[0]
	spare, gone := c.spareNodes(before)[0], before.Replicas[0]
	const records = 1500
	producePadded(t, cl, "online", 0, records, 1000)
	c.waitReplicated("online")
	size := c.replicaStatus(before.Leader, "online", 0).SizeBytes

	steady := startSteadyProducer(t, c.client(), "online", records)
	target := []int32{before.Replicas[1], spare}
	started := time.Now()
	_, err = cl.ReassignPartition(ctx, "online", 0, target)
	require.NoError(t, err)
	ackedAtStart := steady.acked.Load()

	r := waitProgress(t, cl, "online", 0)
	require.Equal(t, target, r.Target)
	require.Equal(t, []int32{spare}, r.Adding)
	require.Equal(t, []int32{gone}, r.Removing)
	require.Equal(t, []int32{before.Replicas[1], spare, gone}, r.Replicas)
	t.Logf("status: node %d at %d of the leader's %d", r.Progress[0].Node, r.Progress[0].LogEndOffset, r.LeaderLogEnd)

	after := c.waitMoved("online", 0, target)
	took := time.Since(started)
	require.Greater(t, steady.acked.Load(), ackedAtStart, "acks=all produces were acknowledged during the move")
	least := time.Duration(float64(size) / throttle * float64(time.Second) / 2)
	require.GreaterOrEqual(t, took, least, "%d bytes caught up at a throttle of %d bytes/s", size, throttle)
	t.Logf("%d bytes caught up at a throttle of %d bytes/s in %v: %.0f bytes/s", size, throttle, took.Round(time.Millisecond), float64(size)/took.Seconds())
	require.Equal(t, target[0], after.Leader)
	require.Eventually(t, func() bool { return len(c.replicaFiles(gone, "online", 0)) == 0 }, 30*time.Second, 20*time.Millisecond)
	all, err := cl.Reassignments(ctx)
	require.NoError(t, err)
	require.Empty(t, all, "no move in flight")

	acked, err := steady.finish()
	require.NoError(t, err, "acks=all produces are acknowledged throughout")
	c.waitReplicated("online")
	requireOnce(t, consumeAll(t, c.client(), "online", 1), acked)
}

// Four nodes: a move of a partition to the two nodes that hold none of it
// is cancelled on its way, which gives the partition back its replicas and
// deletes the two it was adding; asked again, the move completes, and the
// leader hands over to a node new to the partition.
func TestReassignCancelThenMoveToNewNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("moves a partition under a throttle")
	}
	const throttle = 128 << 10
	c := newTestClusterOf(t, 4, fastQuorum, func(cfg *Config) { cfg.Balance.ThrottleBytesPerS = throttle })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := c.client()
	md, err := cl.CreateTopicReplicated(ctx, "away", 1, 2, map[string]string{"min.insync.replicas": "2"})
	require.NoError(t, err)
	before := md.Partitions[0]
	target := c.spareNodes(before)
	const records = 800
	producePadded(t, cl, "away", 0, records, 1000)
	c.waitReplicated("away")

	res, err := cl.ReassignPartition(ctx, "away", 0, target)
	require.NoError(t, err)
	require.Equal(t, target, res.GetAddingReplicas())
	require.Equal(t, before.Replicas, res.GetRemovingReplicas())
	waitProgress(t, cl, "away", 0)
	for _, id := range target {
		require.Eventually(t, func() bool { return len(c.replicaFiles(id, "away", 0)) > 0 }, 10*time.Second, 20*time.Millisecond, "node %d started its replica", id)
	}

	res, err = cl.CancelReassignment(ctx, "away", 0)
	require.NoError(t, err)
	require.Equal(t, before.Replicas, res.GetReplicas())
	require.Empty(t, res.GetAddingReplicas())
	require.Empty(t, res.GetRemovingReplicas())
	back := c.waitMoved("away", 0, before.Replicas)
	require.Equal(t, before.Leader, back.Leader)
	require.Equal(t, before.LeaderEpoch, back.LeaderEpoch, "the leader never changed")
	for _, id := range target {
		require.Eventually(t, func() bool { return len(c.replicaFiles(id, "away", 0)) == 0 }, 30*time.Second, 20*time.Millisecond, "node %d deletes the replica it was adding", id)
	}
	_, err = cl.CancelReassignment(ctx, "away", 0)
	require.ErrorIs(t, err, &client.Error{Code: messages.ErrorCode_NO_REASSIGNMENT_IN_PROGRESS})
	requireOnce(t, consumeAll(t, c.client(), "away", 1), records)

	_, err = cl.ReassignPartition(ctx, "away", 0, target)
	require.NoError(t, err)
	after := c.waitMoved("away", 0, target)
	require.Equal(t, target[0], after.Leader)
	for _, id := range before.Replicas {
		require.Eventually(t, func() bool { return len(c.replicaFiles(id, "away", 0)) == 0 }, 30*time.Second, 20*time.Millisecond, "node %d deletes its replica", id)
	}
	produceAcked(t, c.client(), "away", records, 200, -1)
	c.waitReplicated("away")
	requireOnce(t, consumeAll(t, c.client(), "away", 1), records+200)
}
