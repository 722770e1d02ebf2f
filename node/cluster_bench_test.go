package node

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// benchQuorum is the controller quorum as a node runs it by default: raft
// ticks of 100 ms and an election timeout of ten of them. Sessions are
// shorter than the default 9 s only so that a node stopped by a benchmark
// is fenced, and may register again, sooner between rounds; no figure
// measured depends on them.
var benchQuorum = QuorumSettings{
	HeartbeatInterval: 250 * time.Millisecond,
	SessionTimeout:    2 * time.Second,
}

// percentile is the p-th percentile (0 < p <= 100) of sorted, by nearest
// rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(rank, 0)]
}

// reportLatencies reports the p50, p99 and largest of took, in ms.
func reportLatencies(b *testing.B, took []time.Duration, unit string) {
	b.Helper()
	if len(took) == 0 {
		return
	}
	sorted := slices.Clone(took)
	slices.Sort(sorted)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(percentile(sorted, 50)), "p50-ms/"+unit)
	b.ReportMetric(ms(percentile(sorted, 99)), "p99-ms/"+unit)
	b.ReportMetric(ms(sorted[len(sorted)-1]), "max-ms/"+unit)
}

// BenchmarkClusterTopicCreate creates topics of three partitions, one
// after the other, on a cluster of three voters, and reports the p50 and
// p99 of the time a create takes to be answered: the change forwarded to
// the active controller when asked of another node, committed by the
// quorum, applied, the partitions started on their nodes and their log
// dirs recorded. Run with:
//
//	go test -run '^$' -bench ClusterTopicCreate -benchtime 300x ./node/
func BenchmarkClusterTopicCreate(b *testing.B) {
	for _, asked := range []string{"controller", "follower"} {
		b.Run("asked-of-"+asked, func(b *testing.B) {
			c := newTestClusterWith(b, 3, benchQuorum)
			target := c.leader()
			if asked == "follower" {
				target = target%3 + 1
			}
			cl := newClient(b, c.nodes[target].Address())
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			took := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				_, err := cl.CreateTopic(ctx, fmt.Sprintf("t%06d", i), 3, nil)
				took = append(took, time.Since(start))
				require.NoError(b, err, "topic %d", i)
			}
			b.StopTimer()
			reportLatencies(b, took, "create")
		})
	}
}

// BenchmarkClusterFailover stops the active controller of three voters and
// measures the time until every other node knows the same new leader; the
// node is then started again, untimed, and the next round stops the
// controller of the moment. Two ways to stop it:
//
//   - stop: Stop, a controlled shutdown that first hands leadership to
//     another voter, as SIGTERM does;
//   - kill: as abrupt as a killed process, within one: the node's listener
//     is closed and its controller stopped without handing anything over,
//     so the leader falls silent at once and the others elect a new one
//     after an election timeout; the rest of the node stops afterwards.
//
// Run with:
//
//	go test -run '^$' -bench ClusterFailover -benchtime 10x ./node/
func BenchmarkClusterFailover(b *testing.B) {
	for _, how := range []string{"stop", "kill"} {
		b.Run(how, func(b *testing.B) {
			c := newTestClusterWith(b, 3, benchQuorum)
			stop := (*Node).Stop
			if how == "kill" {
				stop = killInProcess
			}
			took := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				old := c.leader()
				n := c.nodes[old]
				delete(c.nodes, old)
				stopped := make(chan error, 1)
				b.StartTimer()
				start := time.Now()
				go func() { stopped <- stop(n) }()
				c.newLeader(old, time.Minute)
				took = append(took, time.Since(start))
				b.StopTimer()
				require.NoError(b, <-stopped)
				c.nodes[old] = c.start(old)
				c.waitRegistered(old)
				c.waitState(old, false)
			}
			reportLatencies(b, took, "failover")
		})
	}
}

// killInProcess stops n as abruptly as the process it runs in can: its
// listener closes, dropping every connection to it, and its controller
// stops without a controlled shutdown, so that its raft replica falls
// silent at once. The rest of the node then stops as Stop stops it.
func killInProcess(n *Node) error {
	if n.remote != nil {
		n.remote.Shutdown(false)
	}
	if n.metadata != nil {
		if err := n.system.Root.StopFuture(n.metadata).Wait(); err != nil {
			return fmt.Errorf("stop the controller: %w", err)
		}
	}
	return n.Stop()
}

// newLeader waits until every running node knows one controller leader
// other than old, polling each node's controller without pause, and
// returns it.
func (c *testCluster) newLeader(old int32, timeout time.Duration) int32 {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		leader := int32(-1)
		agreed := true
		for id := range c.nodes {
			l := c.info(id).GetControllerLeader()
			if l < 0 || l == old || (leader >= 0 && l != leader) {
				agreed = false
				break
			}
			leader = l
		}
		if agreed && leader >= 0 {
			return leader
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no new controller leader within %v of stopping %d", timeout, old)
		}
		time.Sleep(time.Millisecond)
	}
}
