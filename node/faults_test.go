package node

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/messages"
)

// A cut between two nodes makes a request between them time out, each way,
// and a heal brings the answers back; a delay holds a request's answer
// back by at least the delay.
func TestFaultsBetweenNodes(t *testing.T) {
	c := newTestCluster(t, 3)
	one, two := c.nodes[1], c.nodes[2]
	// Each asks the other's metadata actor, by a PID of its own.
	ask := func(from, to *Node, timeout time.Duration) error {
		_, err := actors.Request[*messages.ClusterInfoResponse](context.Background(), from.System().Root,
			actor.NewPID(to.Address(), actors.MetadataActorName), &messages.ClusterInfoRequest{}, timeout)
		return err
	}
	require.NoError(t, ask(one, two, requestTimeout))
	require.NoError(t, ask(two, one, requestTimeout))

	one.Faults().Cut(two.Address())
	two.Faults().Cut(one.Address())
	require.ErrorIs(t, ask(one, two, 300*time.Millisecond), actor.ErrTimeout)
	require.ErrorIs(t, ask(two, one, 300*time.Millisecond), actor.ErrTimeout)
	// The third node reaches both.
	require.NoError(t, ask(c.nodes[3], one, requestTimeout))
	require.NoError(t, ask(c.nodes[3], two, requestTimeout))

	one.Faults().Heal(two.Address())
	two.Faults().HealAll()
	require.NoError(t, ask(one, two, requestTimeout))
	require.NoError(t, ask(two, one, requestTimeout))

	const delay = 300 * time.Millisecond
	one.Faults().Delay(two.Address(), delay)
	start := time.Now()
	require.NoError(t, ask(one, two, requestTimeout))
	require.GreaterOrEqual(t, time.Since(start), delay)
	one.Faults().HealAll()
}

// The active controller, cut off from the other two voters both ways,
// loses the quorum: they elect another, which fences it once its session
// lapses. Healed, it follows the new controller and is unfenced.
func TestFaultsIsolatedController(t *testing.T) {
	c := newTestCluster(t, 3)
	old := c.leader()
	var others []int32
	for id := range c.nodes {
		if id != old {
			others = append(others, id)
		}
	}
	for _, id := range others {
		c.nodes[old].Faults().Cut(c.nodes[id].Address())
		c.nodes[id].Faults().Cut(c.nodes[old].Address())
	}
	var leader int32
	require.Eventually(t, func() bool {
		a, b := c.info(others[0]), c.info(others[1])
		leader = a.GetControllerLeader()
		if leader < 0 || leader == old || b.GetControllerLeader() != leader {
			return false
		}
		for _, n := range a.GetNodes() {
			if n.GetNodeId() == old {
				return n.GetFenced()
			}
		}
		return false
	}, 30*time.Second, 20*time.Millisecond, "the others elect a controller that fences node %d", old)

	for _, n := range c.nodes {
		n.Faults().HealAll()
	}
	require.Equal(t, leader, c.leader())
	c.waitState(old, false)
}
