package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// electionTimeout is the election timeout of a node started with the
// default raft settings: ten ticks of 100 ms.
const electionTimeout = time.Second

// clusterInfo is `depot cluster info -o json`.
type clusterInfo struct {
	ClusterID        string `json:"cluster_id"`
	ControllerLeader int32  `json:"controller_leader"`
	Nodes            []struct {
		ID      int32  `json:"id"`
		Address string `json:"address"`
		State   string `json:"state"`
		Voter   bool   `json:"voter"`
	} `json:"nodes"`
}

// state is node id's state in info, "" when info does not list it.
func (info clusterInfo) state(id int32) string {
	for _, n := range info.Nodes {
		if n.ID == id {
			return n.State
		}
	}
	return ""
}

// topicDescription is the part of `depot topic describe -o json` that every
// node must describe alike.
type topicDescription struct {
	Name       string `json:"name"`
	TopicID    string `json:"topic_id"`
	Partitions []struct {
		Partition   int32   `json:"partition"`
		Leader      int32   `json:"leader"`
		Replicas    []int32 `json:"replicas"`
		ISR         []int32 `json:"isr"`
		LeaderEpoch int32   `json:"leader_epoch"`
	} `json:"partitions"`
}

// leaders counts the partitions each node leads.
func (d topicDescription) leaders() map[int32]int {
	out := map[int32]int{}
	for _, p := range d.Partitions {
		out[p.Leader]++
	}
	return out
}

// nodeProcesses are depot nodes of one cluster, each its own process,
// voters all.
type nodeProcesses struct {
	t      *testing.T
	addrs  map[int32]string
	dirs   map[int32]string
	procs  map[int32]*process
	voters string
	extra  []string
	// killed are the nodes the test killed.
	killed map[int32]bool
}

func newNodeProcesses(t *testing.T, n int, extra ...string) *nodeProcesses {
	c := &nodeProcesses{t: t, addrs: map[int32]string{}, dirs: map[int32]string{}, procs: map[int32]*process{}, extra: extra, killed: map[int32]bool{}}
	var voters []string
	for id := int32(1); id <= int32(n); id++ {
		c.addrs[id] = unusedAddress(t)
		c.dirs[id] = t.TempDir()
		voters = append(voters, fmt.Sprintf("%d@%s", id, c.addrs[id]))
	}
	c.voters = strings.Join(voters, ",")
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, id := range c.ids() {
			log := c.procs[id].stderr.String()
			if lines := strings.Split(log, "\n"); len(lines) > 60 {
				log = strings.Join(lines[len(lines)-60:], "\n")
			}
			t.Logf("node %d's log, last lines:\n%s", id, log)
		}
	})
	for _, id := range c.ids() {
		c.start(id)
	}
	return c
}

// ids are the nodes' ids in order.
func (c *nodeProcesses) ids() []int32 {
	var out []int32
	for id := range c.addrs {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// start starts node id on its address and data dir. The test's end stops
// it by its PID.
func (c *nodeProcesses) start(id int32) {
	c.t.Helper()
	args := append([]string{"node", "--node-id", strconv.Itoa(int(id)), "--listen", c.addrs[id], "--http", "", "--kafka-listen", "",
		"--data-dir", c.dirs[id], "--controllers", c.voters}, c.extra...)
	c.procs[id] = spawn(c.t, "", args...)
	c.killed[id] = false
}

// kill ends node id's process with SIGKILL, as kill -9 does.
func (c *nodeProcesses) kill(id int32) {
	c.t.Helper()
	p := c.procs[id]
	c.killed[id] = true
	require.NoError(c.t, p.cmd.Process.Kill())
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		c.t.Fatalf("node %d (pid %d) did not end on SIGKILL", id, p.cmd.Process.Pid)
	}
}

// depot runs a depot command against node id alone.
func (c *nodeProcesses) depot(id int32, args ...string) (stdout, stderr string, code int) {
	c.t.Helper()
	return runDepot(c.t, "", append(args, "--brokers", c.addrs[id], "--timeout", "5s")...)
}

// info is node id's view of the cluster; ok is false when it did not
// answer.
func (c *nodeProcesses) info(id int32) (clusterInfo, bool) {
	c.t.Helper()
	stdout, _, code := runDepot(c.t, "", "cluster", "info", "-o", "json", "--brokers", c.addrs[id], "--timeout", "1s")
	var info clusterInfo
	if code != 0 || json.Unmarshal([]byte(stdout), &info) != nil {
		return clusterInfo{}, false
	}
	return info, true
}

// waitFor polls until cond holds or timeout passes; it returns how long
// cond took.
func (c *nodeProcesses) waitFor(timeout time.Duration, what string, cond func() bool) time.Duration {
	c.t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			c.t.Fatalf("%s: not within %v", what, timeout)
		}
		for id, p := range c.procs {
			if !c.killed[id] && c.dead(id) {
				c.t.Fatalf("node %d ended: %s", id, p.stderr)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

// dead reports whether node id's process has ended.
func (c *nodeProcesses) dead(id int32) bool {
	select {
	case <-c.procs[id].done:
		return true
	default:
		return false
	}
}

// live are the nodes whose process runs.
func (c *nodeProcesses) live() []int32 {
	var out []int32
	for _, id := range c.ids() {
		if !c.dead(id) {
			out = append(out, id)
		}
	}
	return out
}

// agreedLeader waits until every live node names the same controller
// leader, other than not, with each node in want's state, and returns the
// leader.
func (c *nodeProcesses) agreedLeader(timeout time.Duration, not int32, want map[int32]string) (int32, time.Duration) {
	c.t.Helper()
	var leader int32
	took := c.waitFor(timeout, fmt.Sprintf("a controller leader other than %d, nodes %v", not, want), func() bool {
		leader = -1
		for _, id := range c.live() {
			info, ok := c.info(id)
			if !ok || info.ControllerLeader < 0 || info.ControllerLeader == not || (leader >= 0 && info.ControllerLeader != leader) {
				return false
			}
			for node, state := range want {
				if info.state(node) != state {
					return false
				}
			}
			leader = info.ControllerLeader
		}
		return true
	})
	return leader, took
}

// describe is node id's description of topic; ok is false when it did not
// describe it.
func (c *nodeProcesses) describe(id int32, topic string) (topicDescription, bool) {
	c.t.Helper()
	stdout, _, code := c.depot(id, "topic", "describe", topic, "-o", "json")
	var d topicDescription
	if code != 0 || json.Unmarshal([]byte(stdout), &d) != nil {
		return topicDescription{}, false
	}
	return d, true
}

// agree waits until every live node describes topic alike: the same topic
// id, and per partition the same leader, replicas, ISR and leader epoch.
func (c *nodeProcesses) agree(topic string) topicDescription {
	c.t.Helper()
	var first topicDescription
	c.waitFor(30*time.Second, "every node describes "+topic+" alike", func() bool {
		for i, id := range c.live() {
			d, ok := c.describe(id, topic)
			if !ok {
				return false
			}
			if i == 0 {
				first = d
				continue
			}
			a, _ := json.Marshal(first)
			b, _ := json.Marshal(d)
			if string(a) != string(b) {
				return false
			}
		}
		return true
	})
	return first
}

// Three voters, each its own process. The quorum leader is killed with
// SIGKILL: another voter takes over within a few election timeouts and
// fences it; a topic created afterwards is described alike by every live
// node; more topics than the metadata log keeps between snapshots are
// created while it is down, so the log is compacted past what it holds.
// Restarted, it catches up from a snapshot, describes the new topics as
// the others do, and is online again, leading its partitions once more.
func TestBinaryClusterLeaderKilled(t *testing.T) {
	const snapshotEvery = 20
	c := newNodeProcesses(t, 3, "--metadata-snapshot-every", strconv.Itoa(snapshotEvery))
	online := map[int32]string{1: "online", 2: "online", 3: "online"}
	old, took := c.agreedLeader(time.Minute, -1, online)
	t.Logf("three nodes online, controller %d, after %v", old, took.Round(time.Millisecond))
	info, _ := c.info(old)
	require.NotEmpty(t, info.ClusterID)
	for _, n := range info.Nodes {
		require.True(t, n.Voter, "node %d", n.ID)
	}

	// Twelve partitions over three nodes lead four on each.
	_, stderr, code := c.depot(old%3+1, "topic", "create", "spread", "-p", "12")
	require.Equal(t, 0, code, stderr)
	spread := c.agree("spread")
	require.Equal(t, map[int32]int{1: 4, 2: 4, 3: 4}, spread.leaders())

	c.kill(old)
	killed := time.Now()
	leader, _ := c.agreedLeader(10*electionTimeout, old, nil)
	elected := time.Since(killed)
	// A new controller grants every node a full session (9 s by default)
	// before it fences anyone, but for a node its watch finds unreachable,
	// as the dead controller's node is: that one has a grace of a second.
	_, _ = c.agreedLeader(30*time.Second, old, map[int32]string{old: "fenced"})
	fenced := time.Since(killed)
	t.Logf("node %d killed: node %d leads after %v, node %d fenced after %v (election timeout %v)",
		old, leader, elected.Round(time.Millisecond), old, fenced.Round(time.Millisecond), electionTimeout)
	require.Less(t, elected, 5*electionTimeout, "a new leader within a few election timeouts")
	// The session was granted at the election, after the kill.
	require.Less(t, fenced, 9*time.Second, "fenced before the session the new controller granted would have lapsed")

	// The dead node's partitions, with no other replica, are offline.
	offline := c.agree("spread")
	for _, p := range offline.Partitions {
		require.NotEqual(t, old, p.Leader, "partition %d", p.Partition)
		if slices.Equal(p.Replicas, []int32{old}) {
			require.Equal(t, int32(-1), p.Leader, "partition %d", p.Partition)
		}
	}

	_, stderr, code = c.depot(leader, "topic", "create", "after", "-p", "6")
	require.Equal(t, 0, code, stderr)
	after := c.agree("after")
	require.Len(t, after.Partitions, 6)
	for _, p := range after.Partitions {
		require.NotEqual(t, old, p.Leader, "partition %d led by the fenced node", p.Partition)
		require.Equal(t, []int32{p.Leader}, p.Replicas)
		require.Equal(t, []int32{p.Leader}, p.ISR)
	}

	// More changes than the log keeps between snapshots.
	survivor := c.live()[0]
	const more = snapshotEvery + 5
	for i := range more {
		_, stderr, code := c.depot(survivor, "topic", "create", fmt.Sprintf("more-%02d", i), "-p", "1")
		require.Equal(t, 0, code, "topic %d: %s", i, stderr)
	}

	c.start(old)
	restarted := time.Now()
	_, _ = c.agreedLeader(time.Minute, -1, online)
	t.Logf("node %d restarted: online after %v", old, time.Since(restarted).Round(time.Millisecond))
	for _, topic := range []string{"after", fmt.Sprintf("more-%02d", more-1)} {
		d := c.agree(topic)
		mine, ok := c.describe(old, topic)
		require.True(t, ok, "node %d describes %s", old, topic)
		require.Equal(t, d, mine)
	}

	// It caught up from a snapshot holding the topics created while it was
	// down, not entry by entry.
	restored := regexp.MustCompile(`msg="metadata restored from a snapshot".* topics=(\d+)`)
	var topics []int
	for _, m := range restored.FindAllStringSubmatch(c.procs[old].stderr.String(), -1) {
		n, _ := strconv.Atoi(m[1])
		topics = append(topics, n)
	}
	require.NotEmpty(t, topics, "node %d's log tells of no snapshot restored", old)
	require.Greater(t, slices.Max(topics), 1, "node %d knew one topic when killed: a snapshot holds those created while it was down", old)
	t.Logf("node %d restored a snapshot of %d topics, of %d", old, slices.Max(topics), 2+more)

	// Its partitions of spread lead from it again.
	c.waitFor(30*time.Second, "spread led four on each node again", func() bool {
		d, ok := c.describe(old, "spread")
		return ok && fmt.Sprint(d.leaders()) == fmt.Sprint(map[int32]int{1: 4, 2: 4, 3: 4})
	})
	c.agree("spread")
}
