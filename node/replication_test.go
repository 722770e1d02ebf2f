package node

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
)

// replicaStatus is node id's replica of topic-partition as its actor
// describes it.
func (c *testCluster) replicaStatus(id int32, topic string, partition int32) *messages.PartitionStatusResponse {
	c.t.Helper()
	n := c.nodes[id]
	pid := actor.NewPID(n.Address(), actors.PartitionActorName(topic, partition))
	return request[*messages.PartitionStatusResponse](c.t, n, pid, &messages.PartitionStatusRequest{})
}

// waitReplicated waits until every running replica of every partition of
// topic ends where its leader ends, and the leader's high watermark is
// there too.
func (c *testCluster) waitReplicated(topic string) *messages.TopicMetadata {
	c.t.Helper()
	var md *messages.TopicMetadata
	require.Eventually(c.t, func() bool {
		md = c.agree().Topics[0]
		for _, p := range md.Partitions {
			if p.Leader < 0 || c.nodes[p.Leader] == nil {
				return false
			}
			lead := c.replicaStatus(p.Leader, topic, p.Partition)
			if lead.HighWatermark != lead.LogEndOffset {
				return false
			}
			for _, r := range p.Replicas {
				if c.nodes[r] == nil {
					continue
				}
				if s := c.replicaStatus(r, topic, p.Partition); s.LogEndOffset != lead.LogEndOffset {
					return false
				}
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond)
	return md
}

// produceAcked produces n keyed records, key i value i, from first on,
// with acks, and waits for every acknowledgement.
func produceAcked(t testing.TB, cl *client.Client, topic string, first, n, acks int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := cl.NewProducer(client.Acks(acks))
	require.NoError(t, err)
	defer p.Close()
	for i := first; i < first+n; i++ {
		p.Produce(ctx, &client.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "%d", i)}, nil)
	}
	require.NoError(t, p.Flush(ctx))
}

// Three nodes, a topic of three replicas: every follower ends where its
// leader ends, acks=all is answered only once the ISR has the batches, and
// when a leader stops another member of the ISR leads, in a new leader
// epoch, with everything acknowledged; the old leader, back, follows and
// rejoins the ISR.
func TestReplicationAcrossThreeNodes(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := c.client()
	md, err := cl.CreateTopicReplicated(ctx, "orders", 3, 3, map[string]string{"min.insync.replicas": "2"})
	require.NoError(t, err)
	for _, p := range md.Partitions {
		require.Len(t, p.Replicas, 3)
		require.ElementsMatch(t, p.Replicas, p.Isr)
	}
	produceAcked(t, cl, "orders", 0, 3000, -1)
	md = c.waitReplicated("orders")
	for _, p := range md.Partitions {
		require.Len(t, p.Isr, 3, "partition %d", p.Partition)
	}

	p0 := md.Partitions[0]
	old, epoch := p0.Leader, p0.LeaderEpoch
	acked := c.replicaStatus(old, "orders", 0).HighWatermark
	require.NoError(t, killInProcess(c.nodes[old]))
	delete(c.nodes, old)
	var now *messages.PartitionMetadata
	require.Eventually(t, func() bool {
		now = c.agree().Topics[0].Partitions[0]
		return now.Leader >= 0 && now.Leader != old
	}, 30*time.Second, 20*time.Millisecond)
	require.Greater(t, now.LeaderEpoch, epoch)
	require.NotContains(t, now.Isr, old, "a fenced node leaves the ISR at once")
	require.Len(t, now.Isr, 2)
	// The new leader's high watermark trails its predecessor's until its
	// follower fetches; meanwhile the latest offset waits (KIP-207), so it
	// is never below what was acknowledged.
	latest, err := c.client().ListOffset(ctx, "orders", 0, client.LatestOffset)
	require.NoError(t, err)
	require.Equal(t, acked, latest)

	produceAcked(t, c.client(), "orders", 3000, 3000, -1)
	got := consumeAll(t, c.client(), "orders", 3)
	seen := map[string]bool{}
	for _, rs := range got {
		for _, r := range rs {
			require.False(t, seen[string(r.Value)], "record %s twice", r.Value)
			seen[string(r.Value)] = true
		}
	}
	require.Len(t, seen, 6000, "every acknowledged record is there once")

	c.nodes[old] = c.start(old)
	c.waitRegistered(old)
	require.Eventually(t, func() bool {
		p := c.agree().Topics[0].Partitions[0]
		return len(p.Isr) == 3
	}, 60*time.Second, 50*time.Millisecond, "the old leader catches up and rejoins the ISR")
	c.waitReplicated("orders")

	// Its preferred replica, back in the ISR, leads partition 0 again.
	require.Equal(t, old, p0.Replicas[0], "the first leader is the preferred replica")
	results, err := c.client().ElectLeaders(ctx, "orders")
	require.NoError(t, err)
	require.Len(t, results, 3)
	for _, r := range results {
		if r.Partition == 0 {
			require.Equal(t, messages.ErrorCode_NONE, r.Error, r.ErrorMessage)
			require.Equal(t, old, r.Leader)
			continue
		}
		require.Equal(t, messages.ErrorCode_ELECTION_NOT_NEEDED, r.Error, "partition %d: %s", r.Partition, r.ErrorMessage)
	}
	back := c.agree().Topics[0].Partitions[0]
	require.Equal(t, old, back.Leader)
	require.Greater(t, back.LeaderEpoch, now.LeaderEpoch)
	produceAcked(t, c.client(), "orders", 6000, 300, -1)
	total := 0
	for _, rs := range consumeAll(t, c.client(), "orders", 3) {
		total += len(rs)
	}
	require.Equal(t, 6300, total, "the preferred leader takes produces again")
}

// __consumer_offsets created while a node is down has the replicas the
// live nodes allowed; once the node is back, the controller raises it to
// three by reassignment, and the new replicas catch up and join the ISR.
func TestInternalTopicReplicasRaised(t *testing.T) {
	if testing.Short() {
		t.Skip("stops and restarts a node")
	}
	quorum := fastQuorum
	quorum.LeaderRebalanceInterval = 200 * time.Millisecond
	c := newTestClusterOf(t, 3, quorum, nil)
	controller := c.leader()
	down := controller%3 + 1
	require.NoError(t, killInProcess(c.nodes[down]))
	delete(c.nodes, down)
	c.waitState(down, true)
	n := c.nodes[controller]
	created := request[*messages.CreateTopicResponse](t, n, n.Metadata(), &messages.CreateTopicRequest{Name: "__consumer_offsets", Partitions: 4, ReplicationFactor: -3})
	require.Equal(t, messages.ErrorCode_NONE, created.Error, created.ErrorMessage)
	for _, p := range created.Topic.Partitions {
		require.Len(t, p.Replicas, 2, "two live nodes")
	}

	c.nodes[down] = c.start(down)
	c.waitRegistered(down)
	require.Eventually(t, func() bool {
		for _, p := range c.agree().Topics[0].Partitions {
			if len(p.Replicas) != 3 || len(p.Isr) != 3 || len(p.AddingReplicas) > 0 {
				return false
			}
		}
		return true
	}, time.Minute, 50*time.Millisecond, "every partition of __consumer_offsets has three in-sync replicas")
	for _, p := range c.agree().Topics[0].Partitions {
		require.Equal(t, created.Topic.Partitions[p.Partition].Replicas, p.Replicas[:2], "the replicas it had stay first")
	}
}

// restartCutOff creates topic, of one partition on the cluster's three
// nodes, with 100 records, kills its leader and waits for another, then
// starts the killed node again while the others' messages to it are lost,
// so that it cannot catch up with the cluster's metadata. whileDown, when
// not nil, runs while it is down. It returns the restarted node, its id,
// and the leader epoch it led in.
func (c *testCluster) restartCutOff(topic string, whileDown func(id int32)) (*Node, int32, int32) {
	t := c.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := c.client()
	_, err := cl.CreateTopicReplicated(ctx, topic, 1, 3, map[string]string{"min.insync.replicas": "2"})
	require.NoError(t, err)
	produceAcked(t, cl, topic, 0, 100, -1)
	p0 := c.waitReplicated(topic).Partitions[0]
	old, epoch := p0.Leader, p0.LeaderEpoch
	// Every node knows where each replica lives.
	require.Eventually(t, func() bool {
		for _, r := range c.agree().Topics[0].Partitions[0].ReplicaDirs {
			if r.DirId == "" {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond)

	require.NoError(t, killInProcess(c.nodes[old]))
	delete(c.nodes, old)
	require.Eventually(t, func() bool {
		now := c.agree().Topics[0].Partitions[0]
		return now.Leader >= 0 && now.Leader != old
	}, 30*time.Second, 20*time.Millisecond, "a new leader")
	if whileDown != nil {
		whileDown(old)
	}
	for _, n := range c.nodes {
		n.Faults().Cut(c.cfgs[old].Listen)
	}
	return c.start(old), old, epoch
}

// rejoin heals the cut restartCutOff made and waits until node id, its
// restarted node, is registered.
func (c *testCluster) rejoin(id int32, restarted *Node) {
	c.t.Helper()
	for _, n := range c.nodes {
		n.Faults().HealAll()
	}
	c.nodes[id] = restarted
	c.waitRegistered(id)
}

// A node restarted with the metadata it had when it was killed takes no
// produce, and coordinates no group, until its metadata has caught up with
// the cluster's: until then it would lead, in an old leader epoch, a
// partition that has a new leader since.
func TestRestartedNodeTakesNoProduceOrGroupUntilCaughtUp(t *testing.T) {
	c := newTestCluster(t, 3)
	restarted, old, epoch := c.restartCutOff("orders", nil)
	md := request[*messages.MetadataResponse](t, restarted, restarted.Metadata(), &messages.MetadataRequest{Topics: []string{"orders"}})
	stale := md.Topics[0].Partitions[0]
	require.Equal(t, old, stale.Leader, "the restarted node's metadata names it the leader")
	require.Equal(t, epoch, stale.LeaderEpoch)

	manager := actor.NewPID(restarted.Address(), actors.PartitionManagerName)
	produce := func() *messages.ProduceResponse {
		resp := request[*messages.ProduceResponses](t, restarted, manager, &messages.ProduceRequests{Requests: []*messages.ProduceRequest{
			{Topic: "orders", Partition: 0, Acks: 1, Records: actortest.Batch(t, "stale"), CorrelationId: 1},
		}})
		require.Len(t, resp.Responses, 1)
		return resp.Responses[0]
	}
	refused := produce()
	require.Equal(t, messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, refused.Error, refused.ErrorMessage)
	require.Contains(t, refused.ErrorMessage, "catching up")
	// Nor does it coordinate groups, from the offsets it held then.
	coordinator := actor.NewPID(restarted.Address(), actors.GroupCoordinatorName)
	findCoordinator := func() *messages.FindCoordinatorResponse {
		return request[*messages.FindCoordinatorResponse](t, restarted, coordinator, &messages.FindCoordinatorRequest{GroupId: "readers"})
	}
	found := findCoordinator()
	require.Equal(t, messages.ErrorCode_COORDINATOR_NOT_AVAILABLE, found.Error, found.ErrorMessage)
	require.Contains(t, found.ErrorMessage, "catching up")

	c.rejoin(old, restarted)
	require.Eventually(t, func() bool {
		md := request[*messages.MetadataResponse](t, restarted, restarted.Metadata(), &messages.MetadataRequest{Topics: []string{"orders"}})
		return md.Topics[0].Partitions[0].Leader != old
	}, 30*time.Second, 20*time.Millisecond, "the restarted node learns the new leader")
	refused = produce()
	require.Equal(t, messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, refused.Error, "a follower now: %s", refused.ErrorMessage)
	require.NotContains(t, refused.ErrorMessage, "catching up")
	require.Eventually(t, func() bool {
		return findCoordinator().Error == messages.ErrorCode_NONE
	}, 30*time.Second, 50*time.Millisecond, "the restarted node finds the group's coordinator")

	produceAcked(t, c.client(), "orders", 100, 100, -1)
	got := consumeAll(t, c.client(), "orders", 1)
	var values []string
	for _, r := range got[0] {
		values = append(values, string(r.Value))
	}
	require.Len(t, values, 200, "the acknowledged records, and nothing the restarted node was sent")
	require.NotContains(t, values, "stale")
}

// A leader reads what its followers fetch into frames of its transport's
// pool, which its streams write as they lie and then take back (see
// remote.TestReplicaFetchMessage), and each follower appends the records
// where they arrived, in its own transport's pool, and lets go of them
// once appended. With every buffer handed back overwritten at once, what
// the followers appended is still what was produced: the new leader, once
// the old one stops, gives back every record.
func TestReplicaFetchesTravelInPooledBuffers(t *testing.T) {
	c := newTestCluster(t, 3)
	for _, n := range c.nodes {
		n.Transport().PoisonPool(true)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := c.client()
	_, err := cl.CreateTopicReplicated(ctx, "frames", 1, 3, map[string]string{"min.insync.replicas": "2"})
	require.NoError(t, err)
	leader := c.agree().Topics[0].Partitions[0].Leader
	pool := c.nodes[leader].Transport()
	p, err := cl.NewProducer(client.Acks(-1))
	require.NoError(t, err)
	defer p.Close()
	const count = 4000
	value := make([]byte, 1000)
	produce := func(from int) {
		for i := from; i < from+count/2; i++ {
			copy(value, fmt.Sprintf("record %d ", i))
			p.Produce(ctx, &client.Record{Topic: "frames", Value: bytes.Clone(value)}, nil)
		}
		require.NoError(t, p.Flush(ctx))
		c.waitReplicated("frames")
	}
	// Each follower's partition lets go of the records it was handed;
	// its fetcher, of those it hands on to none.
	released := func() {
		for id, n := range c.nodes {
			if id == leader {
				continue
			}
			tr := n.Transport()
			require.Eventually(t, func() bool { return tr.PoolStats().Held == 0 }, 10*time.Second, 10*time.Millisecond,
				"node %d holds %d received records", id, tr.PoolStats().Held)
		}
	}
	produce(0)
	frames := pool.PoolStats().Frames
	require.GreaterOrEqual(t, frames, int64(2), "each follower's fetches read into frames")
	aliased := map[int32]int64{}
	for id, n := range c.nodes {
		if id != leader {
			aliased[id] = n.Transport().PoolStats().Aliased
			require.Positive(t, aliased[id], "node %d copied every fetched record", id)
		}
	}
	released()
	produce(count / 2)
	require.Greater(t, pool.PoolStats().Frames, frames)
	for id, n := range aliased {
		require.Greater(t, c.nodes[id].Transport().PoolStats().Aliased, n)
	}
	released()

	require.NoError(t, c.nodes[leader].Stop())
	delete(c.nodes, leader)
	require.Eventually(t, func() bool {
		now := c.agree().Topics[0].Partitions[0]
		return now.Leader >= 0 && now.Leader != leader
	}, 30*time.Second, 20*time.Millisecond, "a follower leads")
	got := consumeAll(t, c.client(), "frames", 1)[0]
	require.Len(t, got, count)
	for i, r := range got {
		require.True(t, bytes.HasPrefix(r.Value, fmt.Appendf(nil, "record %d ", i)), "record %d", i)
	}
}

// A node restarted while no controller answers it starts all the same when
// it finds a partition in another log dir than the metadata names (as a
// move between its disks that a crash cut short leaves it), serves it from
// there, and records the dir once the controller takes it.
func TestRestartedNodeRecordsMovedDirsOnceItCan(t *testing.T) {
	c := newTestCluster(t, 3)
	var moved string
	restarted, old, _ := c.restartCutOff("orders", func(id int32) {
		dirs, err := filepath.Glob(filepath.Join(c.cfgs[id].DataDir, "logs-*"))
		require.NoError(t, err)
		require.Len(t, dirs, 2)
		name := disk.PartitionDirName(disk.TopicPartition{Topic: "orders", Partition: 0})
		for i, d := range dirs {
			if _, err := os.Stat(filepath.Join(d, name)); err == nil {
				moved = dirs[1-i]
				require.NoError(t, os.Rename(filepath.Join(d, name), filepath.Join(moved, name)))
				break
			}
		}
		require.NotEmpty(t, moved, "node %d holds the partition", id)
	})
	c.rejoin(old, restarted)
	require.Eventually(t, func() bool {
		md := request[*messages.MetadataResponse](t, restarted, restarted.Metadata(), &messages.MetadataRequest{Topics: []string{"orders"}})
		for _, r := range md.Topics[0].Partitions[0].ReplicaDirs {
			if r.Node == old {
				return r.LogDir == moved
			}
		}
		return false
	}, 30*time.Second, 50*time.Millisecond, "the metadata names the dir the partition was found in")
	c.waitReplicated("orders")
}
