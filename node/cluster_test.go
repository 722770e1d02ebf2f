package node

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/actors/disks"
	"github.com/depot-dev/depot/actors/group"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
)

// freeAddrs returns n addresses on 127.0.0.1 with ports free a moment ago:
// voters are named by address before they start.
func freeAddrs(t testing.TB, n int) []string {
	t.Helper()
	var out []string
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	for _, l := range ls {
		l.Close()
	}
	return out
}

// testCluster is nodes in one process that form one cluster.
type testCluster struct {
	t      testing.TB
	voters []Voter
	cfgs   map[int32]Config
	nodes  map[int32]*Node
}

// fastQuorum is a quorum whose elections and sessions take a fraction of a
// second, for tests.
var fastQuorum = QuorumSettings{
	TickInterval:      20 * time.Millisecond,
	ElectionTicks:     10,
	HeartbeatInterval: 100 * time.Millisecond,
	SessionTimeout:    time.Second,
	SnapshotEvery:     20,
}

// newTestCluster starts voters nodes, the quorum, and waits until each is
// registered and unfenced.
func newTestCluster(t testing.TB, voters int) *testCluster {
	t.Helper()
	return newTestClusterWith(t, voters, fastQuorum)
}

// newTestClusterWith is newTestCluster with the quorum settings given.
func newTestClusterWith(t testing.TB, voters int, quorum QuorumSettings) *testCluster {
	t.Helper()
	return newTestClusterOf(t, voters, quorum, nil)
}

// newTestClusterOf is newTestClusterWith with each node's config changed
// by configure, when not nil, before it starts.
func newTestClusterOf(t testing.TB, voters int, quorum QuorumSettings, configure func(*Config)) *testCluster {
	t.Helper()
	c := &testCluster{t: t, cfgs: map[int32]Config{}, nodes: map[int32]*Node{}}
	for i, addr := range freeAddrs(t, voters) {
		c.voters = append(c.voters, Voter{ID: int32(i + 1), Address: addr})
	}
	for _, v := range c.voters {
		cfg := testConfig(t, t.TempDir())
		cfg.NodeID, cfg.Listen, cfg.HTTP = v.ID, v.Address, ""
		cfg.Controllers, cfg.Quorum = c.voters, quorum
		if configure != nil {
			configure(&cfg)
		}
		c.cfgs[v.ID] = cfg
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for id := range c.cfgs {
		wg.Go(func() {
			n := c.start(id)
			mu.Lock()
			c.nodes[id] = n
			mu.Unlock()
		})
	}
	wg.Wait()
	for id := range c.nodes {
		c.waitRegistered(id)
	}
	c.knowEachOther()
	return c
}

// knowEachOther waits until every node's metadata names every node of the
// cluster, unfenced: a node learns the others' registrations from the
// controller's log, some time after its own.
func (c *testCluster) knowEachOther() {
	c.t.Helper()
	require.Eventually(c.t, func() bool {
		for _, n := range c.nodes {
			md := request[*messages.MetadataResponse](c.t, n, n.Metadata(), &messages.MetadataRequest{})
			live := 0
			for _, b := range md.Brokers {
				if _, ok := c.nodes[b.NodeId]; ok && !b.Fenced {
					live++
				}
			}
			if live != len(c.nodes) {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond, "every node to know every other, unfenced")
}

// start starts node id from its config.
func (c *testCluster) start(id int32) *Node {
	n, err := Start(c.cfgs[id])
	require.NoError(c.t, err, "node %d", id)
	c.t.Cleanup(func() { _ = n.Stop() })
	return n
}

func (c *testCluster) waitRegistered(id int32) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(c.t, c.nodes[id].WaitRegistered(ctx), "node %d", id)
}

// addBroker starts a node that is not a voter.
func (c *testCluster) addBroker(id int32) *Node {
	cfg := testConfig(c.t, c.t.TempDir())
	cfg.NodeID, cfg.HTTP = id, ""
	cfg.Controllers, cfg.Quorum = c.voters, fastQuorum
	c.cfgs[id] = cfg
	c.nodes[id] = c.start(id)
	c.waitRegistered(id)
	return c.nodes[id]
}

func (c *testCluster) addrs() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.Address())
	}
	return out
}

func (c *testCluster) client() *client.Client {
	c.t.Helper()
	cl, err := client.New(client.Brokers(c.addrs()...), client.RequestTimeout(10*time.Second), client.Logger(logrus.NewEntry(actortest.Logger(c.t, logrus.WarnLevel))))
	require.NoError(c.t, err)
	c.t.Cleanup(cl.Close)
	return cl
}

// info is node id's own view of the cluster.
func (c *testCluster) info(id int32) *messages.ClusterInfoResponse {
	return request[*messages.ClusterInfoResponse](c.t, c.nodes[id], c.nodes[id].Metadata(), &messages.ClusterInfoRequest{})
}

// leader waits until every running node agrees on one controller leader,
// and returns it.
func (c *testCluster) leader() int32 {
	c.t.Helper()
	var leader int32
	require.Eventually(c.t, func() bool {
		leader = -1
		for id := range c.nodes {
			l := c.info(id).GetControllerLeader()
			if l < 0 || (leader >= 0 && l != leader) {
				return false
			}
			leader = l
		}
		return true
	}, 30*time.Second, 20*time.Millisecond)
	return leader
}

// nodeState waits until node id's state in the leader's view is want.
func (c *testCluster) waitState(id int32, fenced bool) {
	c.t.Helper()
	require.Eventually(c.t, func() bool {
		for _, n := range c.info(c.leader()).GetNodes() {
			if n.GetNodeId() == id {
				return n.GetFenced() == fenced
			}
		}
		return false
	}, 30*time.Second, 20*time.Millisecond, "node %d fenced=%v", id, fenced)
}

// agree waits until every running node describes the same topics.
func (c *testCluster) agree() *messages.MetadataResponse {
	c.t.Helper()
	var first *messages.MetadataResponse
	require.Eventually(c.t, func() bool {
		first = nil
		for _, n := range c.nodes {
			md := request[*messages.MetadataResponse](c.t, n, n.Metadata(), &messages.MetadataRequest{})
			for _, t := range md.Topics {
				for _, p := range t.Partitions {
					// Directories are described with their paths only by
					// their own node.
					p.LogDir = ""
					for _, r := range p.ReplicaDirs {
						r.LogDir = ""
					}
				}
			}
			if first == nil {
				first = md
				continue
			}
			if !proto.Equal(&messages.MetadataResponse{Topics: first.Topics, Brokers: first.Brokers, ClusterId: first.ClusterId},
				&messages.MetadataResponse{Topics: md.Topics, Brokers: md.Brokers, ClusterId: md.ClusterId}) {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond)
	return first
}

// Three voters form one cluster: they agree on its id and leader, a topic
// created on any node spreads its leaders evenly over them, and records
// produced through any node reach every partition's leader and come back.
func TestClusterOfThree(t *testing.T) {
	c := newTestCluster(t, 3)
	leader := c.leader()
	require.Contains(t, []int32{1, 2, 3}, leader)
	// Each node registered itself; node 1 learns of the others' unfencing
	// as it applies the log.
	var info *messages.ClusterInfoResponse
	require.Eventually(t, func() bool {
		info = c.info(1)
		for _, n := range info.GetNodes() {
			if n.GetFenced() {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)
	require.NotEmpty(t, info.GetClusterId())
	require.Len(t, info.GetNodes(), 3)
	for _, n := range info.GetNodes() {
		require.False(t, n.GetFenced(), "node %d", n.GetNodeId())
		require.True(t, n.GetVoter(), "node %d", n.GetNodeId())
	}
	for id := range c.nodes {
		require.Equal(t, info.GetClusterId(), c.info(id).GetClusterId())
	}

	// Asked of a node that is not the active controller.
	follower := leader%3 + 1
	cl := newClient(t, c.nodes[follower].Address())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	md, err := cl.CreateTopic(ctx, "spread", 12, nil)
	require.NoError(t, err)
	require.Len(t, md.Partitions, 12)
	led := map[int32]int{}
	for _, p := range md.Partitions {
		led[p.Leader]++
		require.Equal(t, []int32{p.Leader}, p.Replicas)
		require.Equal(t, []int32{p.Leader}, p.Isr)
	}
	require.Equal(t, map[int32]int{1: 4, 2: 4, 3: 4}, led, "twelve partitions over three nodes lead four on each")
	require.NotEmpty(t, md.TopicId)
	_, err = cl.CreateTopic(ctx, "spread", 1, nil)
	require.ErrorIs(t, err, client.ErrTopicAlreadyExists)

	all := c.client()
	p, err := all.NewProducer(client.Acks(-1))
	require.NoError(t, err)
	for i := range 1200 {
		p.Produce(ctx, &client.Record{Topic: "spread", Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)}, nil)
	}
	require.NoError(t, p.Flush(ctx))
	p.Close()
	got := consumeAll(t, all, "spread", 12)
	total := 0
	for part, rs := range got {
		require.NotEmpty(t, rs, "partition %d", part)
		total += len(rs)
	}
	require.Equal(t, 1200, total)

	described := c.agree()
	require.Len(t, described.Topics, 1)
}

// The active controller stops: another voter takes over within a few
// election timeouts and fences it, a topic is created meanwhile, and the
// node, restarted, catches up (from a snapshot, the log being compacted
// meanwhile) and is unfenced.
func TestClusterControllerFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts nodes")
	}
	c := newTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := c.client()
	_, err := cl.CreateTopic(ctx, "before", 3, nil)
	require.NoError(t, err)

	old := c.leader()
	require.NoError(t, c.nodes[old].Stop())
	delete(c.nodes, old)
	start := time.Now()
	leader := c.leader()
	require.NotEqual(t, old, leader)
	t.Logf("new controller %d after %v", leader, time.Since(start))
	c.waitState(old, true)

	// Enough changes for the log to be compacted past what the stopped
	// node holds.
	for i := range 2 * int(fastQuorum.SnapshotEvery) {
		_, err := cl.CreateTopicReplicated(ctx, fmt.Sprintf("after-%02d", i), 2, 0, nil)
		require.NoError(t, err, "topic %d", i)
	}
	md := c.agree()
	require.Len(t, md.Topics, 1+2*int(fastQuorum.SnapshotEvery))
	for _, tp := range md.Topics {
		for _, p := range tp.Partitions {
			require.NotEqual(t, old, p.Leader, "a fenced node leads nothing")
		}
	}

	c.nodes[old] = c.start(old)
	c.waitRegistered(old)
	c.waitState(old, false)
	again := c.agree()
	require.Len(t, again.Topics, len(md.Topics))
	// Its partitions of "before" lead again from it.
	bt := request[*messages.MetadataResponse](t, c.nodes[old], c.nodes[old].Metadata(), &messages.MetadataRequest{Topics: []string{"before"}})
	for _, p := range bt.Topics[0].Partitions {
		require.GreaterOrEqual(t, p.Leader, int32(1), "partition %d", p.Partition)
	}
}

// A node not named as a voter joins as a broker: it follows the metadata
// log as a learner, is registered, and leads its share of a topic created
// afterwards.
func TestClusterBrokerJoins(t *testing.T) {
	c := newTestCluster(t, 3)
	b := c.addBroker(4)
	info := c.info(4)
	require.Len(t, info.GetNodes(), 4)
	for _, n := range info.GetNodes() {
		require.Equal(t, n.GetNodeId() != 4, n.GetVoter(), "node %d", n.GetNodeId())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	md, err := newClient(t, b.Address()).CreateTopic(ctx, "four", 8, nil)
	require.NoError(t, err)
	led := map[int32]int{}
	for _, p := range md.Partitions {
		led[p.Leader]++
	}
	require.Equal(t, map[int32]int{1: 2, 2: 2, 3: 2, 4: 2}, led)
	c.agree()
}

// A node whose data dir belongs to another cluster is refused, with the
// reason; so is a second node with an id in use.
func TestClusterRefusesStrangers(t *testing.T) {
	c := newTestCluster(t, 1)
	c.addBroker(2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	foreign := testConfig(t, t.TempDir())
	foreign.NodeID, foreign.HTTP, foreign.Controllers, foreign.Quorum = 3, "", c.voters, fastQuorum
	for _, dir := range []string{"logs-0", "logs-1"} {
		path := filepath.Join(foreign.DataDir, dir)
		require.NoError(t, os.MkdirAll(path, 0o755))
		require.NoError(t, disks.SetClusterID(disk.OS, path, 3, "another-cluster-id"))
	}
	n, err := Start(foreign)
	require.NoError(t, err)
	defer n.Stop()
	require.ErrorContains(t, n.WaitRegistered(ctx), "belongs to cluster another-cluster-id")

	twin := testConfig(t, t.TempDir())
	twin.NodeID, twin.HTTP, twin.Controllers, twin.Quorum = 2, "", c.voters, fastQuorum
	n, err = Start(twin)
	require.NoError(t, err)
	defer n.Stop()
	require.ErrorContains(t, n.WaitRegistered(ctx), "held by a live node")
}

// A quorum's voters are those its log was started with: a restart that
// names others is refused with both lists, and so is a single node's old
// data dir given to a quorum of more than one.
func TestClusterVotersAreFixed(t *testing.T) {
	addrs := freeAddrs(t, 2)
	cfg := testConfig(t, t.TempDir())
	cfg.Listen, cfg.HTTP = addrs[0], ""
	n := startNode(t, cfg)
	require.NoError(t, n.Stop())

	cfg.Controllers = []Voter{{ID: 1, Address: addrs[0]}, {ID: 2, Address: addrs[1]}}
	_, err := Start(cfg)
	require.ErrorContains(t, err, "the voters given (1,2) are not those of the metadata log")
	require.ErrorContains(t, err, "(1)")

	// The same data dir as a version before the quorum left it: its
	// metadata log, no raft log.
	require.NoError(t, os.RemoveAll(filepath.Join(cfg.DataDir, "meta", "raft")))
	require.NoError(t, os.WriteFile(filepath.Join(cfg.DataDir, "meta", "00000000000000000000.log"), nil, 0o644))
	_, err = Start(cfg)
	require.ErrorContains(t, err, "can seed only a quorum of one")
}

func FuzzParseVoters(f *testing.F) {
	for _, s := range []string{"1@127.0.0.1:7070,2@127.0.0.1:7080", "1@h:1", "", "@", "1@", "x@127.0.0.1:1", "1@127.0.0.1:99999", " 3@[::1]:7070 , "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		voters, err := ParseVoters(s)
		if err != nil {
			require.Nil(t, voters)
			return
		}
		require.NotEmpty(t, voters)
		parts := make([]string, len(voters))
		for i, v := range voters {
			parts[i] = v.String()
		}
		again, err := ParseVoters(strings.Join(parts, ","))
		require.NoError(t, err, "what it parsed reads back")
		require.Equal(t, voters, again)
	})
}

// A group's coordinator is the node that leads its partition of
// __consumer_offsets, whichever node is asked; the topic has a replica on
// each of the three nodes.
func TestClusterGroupCoordinator(t *testing.T) {
	c := newTestCluster(t, 3)
	ask := func(id int32, group string) *messages.FindCoordinatorResponse {
		n := c.nodes[id]
		return request[*messages.FindCoordinatorResponse](t, n, n.Groups(), &messages.FindCoordinatorRequest{GroupId: group})
	}
	// The first request creates __consumer_offsets.
	ask(1, "warm-up")
	require.Eventually(t, func() bool {
		md := request[*messages.MetadataResponse](t, c.nodes[1], c.nodes[1].Metadata(), &messages.MetadataRequest{Topics: []string{group.OffsetsTopic}})
		if md.Topics[0].Error != messages.ErrorCode_NONE {
			return false
		}
		for _, p := range md.Topics[0].Partitions {
			require.Len(t, p.Replicas, 3, "partition %d of %s: as many replicas as live nodes, up to 3", p.Partition, group.OffsetsTopic)
		}
		for _, g := range []string{"billing", "audit", "search", "mail"} {
			leader := md.Topics[0].Partitions[group.OffsetsPartitionFor(g, int32(len(md.Topics[0].Partitions)))].LeaderAddress
			for id := range c.nodes {
				if r := ask(id, g); r.Error != messages.ErrorCode_NONE || r.Address != leader {
					return false
				}
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond)
}
