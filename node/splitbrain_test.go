package node

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/messages"
)

// A partition's leader is cut off from every other node, both ways. The
// controller fences it once its session lapses and another member of the
// ISR leads, in a new epoch, taking acks=all writes. The old leader, which
// does not know, can take no acks=all write: its followers no longer fetch,
// and the ISR shrink it asks for never reaches the controller, so none is
// answered with success. There is no split brain. Healed, it follows the
// new leader and truncates what only it had: the acks=1 write it took
// while cut off, Kafka's trade-off.
func TestNoSplitBrain(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for sessions and the lag time")
	}
	const lag = 2 * time.Second
	c := newTestClusterOf(t, 3, fastQuorum, func(cfg *Config) { cfg.ReplicaLagMax = lag })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := c.client()
	md, err := cl.CreateTopicReplicated(ctx, "sb", 3, 3, map[string]string{"min.insync.replicas": "2"})
	require.NoError(t, err)
	produceAcked(t, cl, "sb", 0, 300, -1)
	c.waitReplicated("sb")

	controller := c.leader()
	var p *messages.PartitionMetadata
	for _, q := range md.Partitions {
		if q.Leader != controller {
			p = q
			break
		}
	}
	require.NotNil(t, p, "a partition led by a node that is not the controller")
	old, epoch := p.Leader, p.LeaderEpoch
	for id, n := range c.nodes {
		if id != old {
			n.Faults().Cut(c.nodes[old].Address())
			c.nodes[old].Faults().Cut(n.Address())
		}
	}

	// The old leader takes an acks=1 write, and an acks=all one it never
	// acknowledges.
	n := c.nodes[old]
	pid := actor.NewPID(n.Address(), actors.PartitionActorName("sb", p.Partition))
	one := request[*messages.ProduceResponse](t, n, pid, &messages.ProduceRequest{Topic: "sb", Partition: p.Partition, Acks: 1, Records: actortest.Batch(t, "lost")})
	require.Equal(t, messages.ErrorCode_NONE, one.Error, one.ErrorMessage)
	allDone := make(chan *messages.ProduceResponse, 1)
	go func() {
		res, err := actors.Request[*messages.ProduceResponse](context.Background(), n.System().Root, pid,
			&messages.ProduceRequest{Topic: "sb", Partition: p.Partition, Acks: -1, TimeoutMs: int32((3 * lag).Milliseconds()), Records: actortest.Batch(t, "never")}, 2*time.Minute)
		if err != nil {
			res = &messages.ProduceResponse{Error: messages.ErrorCode_REQUEST_TIMED_OUT, ErrorMessage: err.Error()}
		}
		allDone <- res
	}()

	// The others elect a new leader from the ISR.
	others := map[int32]*Node{}
	for id, n := range c.nodes {
		if id != old {
			others[id] = n
		}
	}
	var now *messages.PartitionMetadata
	require.Eventually(t, func() bool {
		for _, n := range others {
			md := request[*messages.MetadataResponse](t, n, n.Metadata(), &messages.MetadataRequest{Topics: []string{"sb"}})
			now = md.Topics[0].Partitions[p.Partition]
			if now.Leader == old || now.Leader < 0 {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond)
	require.Greater(t, now.LeaderEpoch, epoch)
	require.NotContains(t, now.Isr, old)

	// It takes acks=all writes while the old one cannot.
	ln := others[now.Leader]
	lpid := actor.NewPID(ln.Address(), actors.PartitionActorName("sb", p.Partition))
	res := request[*messages.ProduceResponse](t, ln, lpid, &messages.ProduceRequest{Topic: "sb", Partition: p.Partition, Acks: -1, Records: actortest.Batch(t, "kept")})
	require.Equal(t, messages.ErrorCode_NONE, res.Error, res.ErrorMessage)

	select {
	case r := <-allDone:
		require.NotEqual(t, messages.ErrorCode_NONE, r.Error, "the cut-off leader acknowledged an acks=all write")
		t.Logf("the cut-off leader answered acks=all with %s: %s", r.Error, r.ErrorMessage)
	case <-time.After(time.Minute):
		t.Fatal("the cut-off leader never answered its acks=all write")
	}
	s := c.replicaStatus(old, "sb", p.Partition)
	require.Less(t, s.HighWatermark, s.LogEndOffset, "what it appended alone never became readable")

	for _, n := range c.nodes {
		n.Faults().HealAll()
	}
	require.Eventually(t, func() bool {
		q := c.agree().Topics[0].Partitions[p.Partition]
		return len(q.Isr) == 3
	}, time.Minute, 50*time.Millisecond, "healed, the old leader follows and rejoins the ISR")
	c.waitReplicated("sb")
	leader := c.agree().Topics[0].Partitions[p.Partition].Leader
	values := fetchValues(t, c.nodes[leader], actor.NewPID(c.nodes[leader].Address(), actors.PartitionActorName("sb", p.Partition)), "sb", 0)
	var kept, lost, never int
	for _, v := range values {
		switch {
		case len(v) >= 4 && v[len(v)-4:] == "kept":
			kept++
		case len(v) >= 4 && v[len(v)-4:] == "lost":
			lost++
		case len(v) >= 5 && v[len(v)-5:] == "never":
			never++
		}
	}
	require.Equal(t, 1, kept, "the write acknowledged by the new leader is there")
	require.Zero(t, lost, "the acks=1 write only the old leader had is truncated")
	require.Zero(t, never)
	old2 := c.replicaStatus(old, "sb", p.Partition)
	require.Equal(t, c.replicaStatus(leader, "sb", p.Partition).LogEndOffset, old2.LogEndOffset)
}
