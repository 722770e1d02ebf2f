package node

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/controller"
)

// defaultQuorum is the controller quorum as a node runs it by default:
// raft ticks of 100 ms, elections after ten, heartbeats every 2 s and
// sessions of 9 s.
var defaultQuorum = QuorumSettings{}

// fencedWithin waits until the active controller, other than not, reports
// node id fenced, and returns how long that took from since.
func (c *testCluster) fencedWithin(id, not int32, since time.Time, timeout time.Duration) time.Duration {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, n := range c.info(c.newLeader(not, timeout)).GetNodes() {
			if n.GetNodeId() == id && n.GetFenced() {
				return time.Since(since)
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("node %d not fenced within %v", id, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A node killed abruptly while another is the active controller is fenced
// well before its session would have lapsed: the controller's watch of it
// drops with its listener.
func TestClusterKilledNodeFenced(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a node of a cluster with sessions of the default length")
	}
	c := newTestClusterWith(t, 3, defaultQuorum)
	leader := c.leader()
	victim := leader%3 + 1
	n := c.nodes[victim]
	delete(c.nodes, victim)
	killed := time.Now()
	stopped := make(chan error, 1)
	go func() { stopped <- killInProcess(n) }()
	took := c.fencedWithin(victim, -1, killed, 30*time.Second)
	t.Logf("node %d killed: fenced by node %d after %v", victim, leader, took.Round(time.Millisecond))
	require.Less(t, took, controller.DefaultSessionTimeout, "fenced before its session would have lapsed")
	require.Equal(t, leader, c.leader(), "the active controller stays")
	require.NoError(t, <-stopped)
}

// The active controller's node killed abruptly: the voter elected in its
// place grants every node a full session, but its watch finds the killed
// node unreachable, and fences it well before that session would have
// lapsed.
func TestClusterKilledControllerFenced(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a node of a cluster with sessions of the default length")
	}
	c := newTestClusterWith(t, 3, defaultQuorum)
	old := c.leader()
	n := c.nodes[old]
	delete(c.nodes, old)
	killed := time.Now()
	stopped := make(chan error, 1)
	go func() { stopped <- killInProcess(n) }()
	leader := c.newLeader(old, time.Minute)
	elected := time.Since(killed)
	took := c.fencedWithin(old, old, killed, 30*time.Second)
	t.Logf("node %d killed: node %d elected after %v, node %d fenced after %v",
		old, leader, elected.Round(time.Millisecond), old, took.Round(time.Millisecond))
	// The session was granted at the election, after the kill.
	require.Less(t, took, controller.DefaultSessionTimeout, "fenced before the session the new controller granted would have lapsed")
	require.NoError(t, <-stopped)
}
