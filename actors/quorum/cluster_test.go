package quorum

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/depot-dev/depot/disk"
)

// kv is the tests' state machine: a key/value map from entries
// "key=value", with the history of the entries applied ("index data"), so
// that nodes can be compared entry by entry.
type kv struct {
	state    map[string]string
	history  []string
	last     uint64
	restores int
	// misuse is the first call out of order: an index not above the last.
	misuse error
}

func newKV() *kv { return &kv{state: map[string]string{}} }

type kvSnapshot struct {
	State   map[string]string
	History []string
	Last    uint64
}

func (s *kv) Apply(index uint64, data []byte) {
	if index <= s.last && s.misuse == nil {
		s.misuse = fmt.Errorf("applied index %d after %d", index, s.last)
	}
	s.last = index
	k, v, _ := strings.Cut(string(data), "=")
	s.state[k] = v
	s.history = append(s.history, fmt.Sprintf("%d %s", index, data))
}

func (s *kv) Snapshot() ([]byte, error) {
	return json.Marshal(kvSnapshot{State: s.state, History: s.history, Last: s.last})
}

func (s *kv) Restore(data []byte) error {
	var snap kvSnapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		return err
	}
	s.state, s.history, s.last = snap.State, snap.History, snap.Last
	if s.state == nil {
		s.state = map[string]string{}
	}
	s.restores++
	return nil
}

// testNode is one node of a cluster: its file system, storage, peer and
// state machine.
type testNode struct {
	id      uint64
	fs      *disk.MemFS
	storage *Storage
	peer    *Peer
	sm      *kv
	down    bool
}

// link is a direction between two nodes.
type link struct{ from, to uint64 }

// cluster is a deterministic in-memory network of peers, as etcd-io/raft's
// tests have: no goroutine, no sleep. Messages wait in flight until
// delivered; delivery drops them on cut links, to nodes that are down and
// at random (with a seeded rand) at dropRate. MsgSnap messages may travel
// in chunks through an Assembler per node, and the sender hears whether a
// snapshot arrived, as a transport tells it. After every Step and Handle
// it checks that no two nodes lead in one term.
type cluster struct {
	t             *testing.T
	rng           *rand.Rand
	nodes         map[uint64]*testNode
	voters        []uint64
	snapshotEvery uint64

	inflight []*raftpb.Message
	dropRate float64
	cut      map[link]bool
	// drop, when set, is asked about every message before delivery; true
	// drops it.
	drop func(m *raftpb.Message) bool
	// chunkBytes > 0 sends each MsgSnap as chunks of at most that size.
	chunkBytes int
	assemblers map[uint64]*Assembler
	// reportSnapshots has the sender told of each snapshot delivered or
	// lost (ReportSnapshot).
	reportSnapshots bool

	leaders map[uint64]uint64 // term: the node that led in it
	chunks  int               // snapshot chunks delivered
	sent    map[raftpb.MessageType]int
	dropped map[raftpb.MessageType]int
}

// newCluster starts a cluster of the voters, each with a memory file
// system of its own.
func newCluster(t *testing.T, seed uint64, snapshotEvery uint64, voters ...uint64) *cluster {
	c := &cluster{
		t:               t,
		rng:             newRand(seed),
		nodes:           map[uint64]*testNode{},
		voters:          voters,
		snapshotEvery:   snapshotEvery,
		cut:             map[link]bool{},
		assemblers:      map[uint64]*Assembler{},
		reportSnapshots: true,
		leaders:         map[uint64]uint64{},
		sent:            map[raftpb.MessageType]int{},
		dropped:         map[raftpb.MessageType]int{},
	}
	for _, id := range voters {
		c.addNode(id)
	}
	return c
}

// addNode starts node id with an empty storage. Not among the voters, it
// starts as a learner would.
func (c *cluster) addNode(id uint64) *testNode {
	n := &testNode{id: id, fs: disk.NewMemFS()}
	c.nodes[id] = n
	c.start(n)
	return n
}

// start opens n's storage and starts its peer with a new state machine.
func (c *cluster) start(n *testNode) {
	c.t.Helper()
	logger := testLogger(c.t, logrus.WarnLevel, n.id)
	storage, err := OpenStorage(n.fs, "/raft", logger)
	require.NoError(c.t, err)
	n.storage, n.sm, n.down = storage, newKV(), false
	n.peer, err = NewPeer(Config{
		ID:            n.id,
		Storage:       storage,
		Voters:        c.voters,
		SnapshotEvery: c.snapshotEvery,
		Logger:        logger,
		StateMachine:  n.sm,
	})
	require.NoError(c.t, err)
	c.assemblers[n.id] = NewAssembler(0)
}

// crash stops node id and crashes its file system: only what was synced
// survives.
func (c *cluster) crash(id uint64) {
	n := c.nodes[id]
	n.down = true
	n.fs.Crash()
}

// restart starts node id again from its storage, with a new state machine.
func (c *cluster) restart(id uint64) { c.start(c.nodes[id]) }

// isolate cuts every link of node id.
func (c *cluster) isolate(id uint64) {
	for other := range c.nodes {
		if other != id {
			c.cut[link{id, other}] = true
			c.cut[link{other, id}] = true
		}
	}
}

// heal restores every link and stops random drops.
func (c *cluster) heal() {
	c.cut = map[link]bool{}
	c.dropRate = 0
}

func (c *cluster) ids() []uint64 { return slices.Sorted(maps.Keys(c.nodes)) }

// up returns the nodes that are not down, in id order.
func (c *cluster) up() []*testNode {
	var out []*testNode
	for _, id := range c.ids() {
		if n := c.nodes[id]; !n.down {
			out = append(out, n)
		}
	}
	return out
}

// checkLeaders fails the test if two nodes ever lead in the same term.
func (c *cluster) checkLeaders() {
	c.t.Helper()
	for _, n := range c.up() {
		if !n.peer.IsLeader() {
			continue
		}
		term := n.peer.Term()
		if other, ok := c.leaders[term]; ok && other != n.id {
			c.t.Fatalf("nodes %d and %d both lead in term %d", other, n.id, term)
		}
		c.leaders[term] = n.id
	}
}

// handleAll has every node that is up handle its Readies and puts what
// they send in flight.
func (c *cluster) handleAll() {
	c.t.Helper()
	for _, n := range c.up() {
		out, err := n.peer.Handle()
		require.NoError(c.t, err, "node %d", n.id)
		require.NoError(c.t, n.sm.misuse, "node %d", n.id)
		for _, m := range out {
			c.sent[m.GetType()]++
		}
		c.inflight = append(c.inflight, out...)
		c.checkLeaders()
	}
}

// dropped reports whether the network loses m, and why.
func (c *cluster) lost(m *raftpb.Message) (lost, unreachable bool) {
	to := c.nodes[m.GetTo()]
	switch {
	case to == nil || to.down || c.cut[link{m.GetFrom(), m.GetTo()}]:
		return true, true
	case c.drop != nil && c.drop(m):
		return true, false
	case c.dropRate > 0 && c.rng.Float64() < c.dropRate:
		return true, false
	}
	return false, false
}

// deliver delivers or drops every message in flight.
func (c *cluster) deliver() {
	c.t.Helper()
	msgs := c.inflight
	c.inflight = nil
	for _, m := range msgs {
		from := c.nodes[m.GetFrom()]
		if m.GetType() == raftpb.MsgSnap && c.chunkBytes > 0 {
			c.deliverChunks(m)
			continue
		}
		if lost, unreachable := c.lost(m); lost {
			c.dropped[m.GetType()]++
			if !from.down {
				if unreachable {
					from.peer.ReportUnreachable(m.GetTo())
				}
				if m.GetType() == raftpb.MsgSnap && c.reportSnapshots {
					from.peer.ReportSnapshot(m.GetTo(), raft.SnapshotFailure)
				}
			}
			continue
		}
		c.step(m)
		if m.GetType() == raftpb.MsgSnap && c.reportSnapshots && !from.down {
			from.peer.ReportSnapshot(m.GetTo(), raft.SnapshotFinish)
		}
	}
}

// step gives m to its recipient and checks the leaders.
func (c *cluster) step(m *raftpb.Message) {
	c.t.Helper()
	err := c.nodes[m.GetTo()].peer.Step(m)
	if err != nil && !errors.Is(err, raft.ErrStepPeerNotFound) {
		require.NoError(c.t, err, "step %s from %d to %d", m.GetType(), m.GetFrom(), m.GetTo())
	}
	c.checkLeaders()
}

// deliverChunks sends the snapshot message m as chunks, each lost or
// delivered on its own, and steps the message the recipient's Assembler
// rebuilds.
func (c *cluster) deliverChunks(m *raftpb.Message) {
	c.t.Helper()
	chunks, err := SplitSnapshot(m, c.chunkBytes)
	require.NoError(c.t, err)
	from := c.nodes[m.GetFrom()]
	for _, chunk := range chunks {
		if lost, _ := c.lost(m); lost {
			c.dropped[raftpb.MsgSnap]++
			if c.reportSnapshots && !from.down {
				from.peer.ReportSnapshot(m.GetTo(), raft.SnapshotFailure)
			}
			return
		}
		whole, err := c.assemblers[m.GetTo()].Add(chunk)
		require.NoError(c.t, err)
		c.chunks++
		if whole != nil {
			c.step(whole)
			if c.reportSnapshots && !from.down {
				from.peer.ReportSnapshot(m.GetTo(), raft.SnapshotFinish)
			}
		}
	}
}

// stabilize handles and delivers until no message is in flight.
func (c *cluster) stabilize() {
	c.t.Helper()
	for range 100000 {
		c.handleAll()
		if len(c.inflight) == 0 {
			return
		}
		c.deliver()
	}
	c.t.Fatal("the cluster never stabilized")
}

// tick ticks every node that is up n times, stabilizing after each.
func (c *cluster) tick(n int) {
	c.t.Helper()
	for range n {
		for _, node := range c.up() {
			node.peer.Tick()
		}
		c.stabilize()
	}
}

// leader ticks until one node that is up leads and every member of its
// configuration up and connected to it knows it, and returns it.
func (c *cluster) leader() *testNode {
	c.t.Helper()
	for range 1000 {
		c.stabilize()
		for _, n := range c.up() {
			if !n.peer.IsLeader() {
				continue
			}
			agreed := true
			members := append(n.peer.Voters(), n.peer.Learners()...)
			for _, o := range c.up() {
				if slices.Contains(members, o.id) && !c.cut[link{n.id, o.id}] && o.peer.Leader() != n.id {
					agreed = false
				}
			}
			if agreed {
				return n
			}
		}
		c.tick(1)
	}
	for _, n := range c.up() {
		c.t.Logf("node %d: %s", n.id, n.peer.Status())
	}
	c.t.Fatal("no leader elected")
	return nil
}

// propose proposes "key=value" through the leader until it is applied
// there, ticking meanwhile.
func (c *cluster) propose(key, value string) {
	c.t.Helper()
	data := key + "=" + value
	for range 100 {
		l := c.leader()
		if err := l.peer.Propose([]byte(data)); err != nil {
			require.ErrorIs(c.t, err, raft.ErrProposalDropped)
		}
		for range 20 {
			c.stabilize()
			if l.sm.state[key] == value {
				return
			}
			c.tick(1)
		}
	}
	c.t.Fatalf("%s never applied", data)
}

// requireSameState fails unless every node up has applied the same
// entries as want, and checks that histories agree entry by entry.
func (c *cluster) requireSameState(want *testNode) {
	c.t.Helper()
	for _, n := range c.up() {
		require.Equal(c.t, want.sm.history, n.sm.history, "node %d against node %d", n.id, want.id)
		require.Equal(c.t, want.sm.state, n.sm.state, "node %d against node %d", n.id, want.id)
	}
}

// requireConsistent fails if two nodes' histories disagree on any index
// both have applied: a prefix of one another.
func (c *cluster) requireConsistent() {
	c.t.Helper()
	for _, a := range c.nodes {
		for _, b := range c.nodes {
			n := min(len(a.sm.history), len(b.sm.history))
			if n == 0 {
				continue
			}
			require.Equal(c.t, a.sm.history[:n], b.sm.history[:n], "nodes %d and %d disagree", a.id, b.id)
		}
	}
}

// catchUp ticks until every node up has applied as much as want, and
// requires the same state.
func (c *cluster) catchUp(want *testNode) {
	c.t.Helper()
	for range 500 {
		done := true
		for _, n := range c.up() {
			if n.peer.Applied() < want.peer.Applied() || len(n.sm.history) < len(want.sm.history) {
				done = false
			}
		}
		if done {
			break
		}
		c.tick(1)
	}
	c.requireSameState(want)
}

func TestClusterElectsOneLeader(t *testing.T) {
	for _, size := range []int{1, 3, 5} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			var ids []uint64
			for i := range size {
				ids = append(ids, uint64(i+1))
			}
			c := newCluster(t, 1, 0, ids...)
			for _, n := range c.nodes {
				require.True(t, n.peer.Bootstrapped())
				require.Equal(t, ids, n.peer.Voters())
			}
			l := c.leader()
			leaders := 0
			for _, n := range c.nodes {
				require.Equal(t, l.id, n.peer.Leader(), "node %d", n.id)
				require.Equal(t, l.peer.Term(), n.peer.Term())
				if n.peer.IsLeader() {
					leaders++
				}
			}
			require.Equal(t, 1, leaders)
			// A leader keeps leading while its followers hear it.
			c.tick(100)
			require.True(t, l.peer.IsLeader())
		})
	}
}

func TestClusterCommitsProposalsOnEveryNode(t *testing.T) {
	c := newCluster(t, 1, 0, 1, 2, 3)
	l := c.leader()
	for i := range 50 {
		c.propose(fmt.Sprintf("k%d", i), fmt.Sprint(i))
	}
	// A follower forwards a proposal to the leader.
	var follower *testNode
	for _, n := range c.up() {
		if n != l {
			follower = n
			break
		}
	}
	require.NoError(t, follower.peer.Propose([]byte("from=follower")))
	c.stabilize()
	require.Equal(t, "follower", l.sm.state["from"])
	c.catchUp(l)
	require.Len(t, l.sm.state, 51)

	require.ErrorIs(t, l.peer.Propose(nil), ErrEmptyProposal)
	require.ErrorIs(t, l.peer.Propose(make([]byte, MaxEntryBytes+1)), ErrTooLarge)
}

func TestClusterIsolatedLeaderStepsDown(t *testing.T) {
	c := newCluster(t, 1, 0, 1, 2, 3)
	c.propose("before", "1")
	old := c.leader()
	oldTerm := old.peer.Term()
	c.isolate(old.id)
	// CheckQuorum: a leader checks every election timeout that it heard
	// from a quorum since the last check, and steps down when not.
	c.tick(2 * DefaultElectionTick)
	require.False(t, old.peer.IsLeader(), "the isolated leader steps down")
	var next *testNode
	for range 50 * DefaultElectionTick {
		for _, n := range c.up() {
			if n != old && n.peer.IsLeader() {
				next = n
			}
		}
		if next != nil {
			break
		}
		c.tick(1)
	}
	require.NotNil(t, next, "the others elect a leader")
	require.Greater(t, next.peer.Term(), oldTerm)
	// PreVote: the isolated node did not raise its term while away.
	require.Equal(t, oldTerm, old.peer.Term())

	c.heal()
	c.propose("after", "2")
	l := c.leader()
	require.Equal(t, next.id, l.id, "the returning node does not disrupt the leader")
	c.catchUp(l)
	require.Equal(t, "2", old.sm.state["after"])
}

func TestClusterSurvivesMessageLoss(t *testing.T) {
	c := newCluster(t, 7, 0, 1, 2, 3)
	c.dropRate = 0.2
	for i := range 100 {
		c.propose(fmt.Sprintf("k%d", i), fmt.Sprint(i))
		c.requireConsistent()
	}
	require.Positive(t, c.dropped[raftpb.MsgApp]+c.dropped[raftpb.MsgAppResp])
	c.heal()
	l := c.leader()
	c.catchUp(l)
	require.Len(t, l.sm.state, 100)
}

func TestClusterLearnerCatchesUp(t *testing.T) {
	c := newCluster(t, 1, 0, 1, 2, 3)
	for i := range 20 {
		c.propose(fmt.Sprintf("k%d", i), fmt.Sprint(i))
	}
	learner := c.addNode(4)
	require.False(t, learner.peer.Bootstrapped())
	require.Empty(t, learner.peer.Voters())

	l := c.leader()
	require.NoError(t, l.peer.AddLearner(4))
	c.stabilize()
	require.Equal(t, []uint64{4}, l.peer.Learners())
	c.propose("after", "learner")
	c.catchUp(l)
	require.Equal(t, []uint64{1, 2, 3}, learner.peer.Voters())
	require.Equal(t, []uint64{4}, learner.peer.Learners())
	require.Equal(t, l.id, learner.peer.Leader())

	// A learner never campaigns, even cut off from the leader.
	c.isolate(l.id)
	c.tick(5 * DefaultElectionTick)
	require.False(t, learner.peer.IsLeader())
	c.heal()
	c.propose("later", "x")
	c.catchUp(c.leader())
}

func TestClusterRefusesMessagesFromStrangers(t *testing.T) {
	c := newCluster(t, 1, 0, 1, 2, 3)
	l := c.leader()
	m := &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), From: new(uint64(9)), To: new(l.id), Term: new(l.peer.Term() + 5)}
	require.ErrorIs(t, l.peer.Step(m), ErrNotMember)
	m.To = new(uint64(2000))
	require.ErrorIs(t, l.peer.Step(m), ErrWrongRecipient)
	c.stabilize()
	require.True(t, l.peer.IsLeader(), "the stranger's higher term changed nothing")
}

func TestClusterRestartRecoversTheAppliedState(t *testing.T) {
	c := newCluster(t, 1, 10, 1, 2, 3)
	for i := range 30 {
		c.propose(fmt.Sprintf("k%d", i), fmt.Sprint(i))
	}
	l := c.leader()
	var follower uint64
	for _, id := range c.ids() {
		if id != l.id {
			follower = id
			break
		}
	}
	c.crash(follower)
	for i := 30; i < 60; i++ {
		c.propose(fmt.Sprintf("k%d", i), fmt.Sprint(i))
	}
	c.restart(follower)
	n := c.nodes[follower]
	require.False(t, n.peer.Bootstrapped())
	_, err := n.peer.Handle()
	require.NoError(t, err)
	// Alone, it is back where its storage says: a prefix of the leader's.
	require.GreaterOrEqual(t, len(n.sm.history), 25)
	require.Equal(t, l.sm.history[:len(n.sm.history)], n.sm.history)
	c.catchUp(l)
}

// TestClusterCrashOfEveryNodeLosesNothingCommitted crashes every node at
// once, keeping only what each synced, and checks that everything any node
// had applied (so committed) is there after the restart.
func TestClusterCrashOfEveryNodeLosesNothingCommitted(t *testing.T) {
	c := newCluster(t, 3, 7, 1, 2, 3)
	for round := range 3 {
		for i := range 20 {
			c.propose(fmt.Sprintf("r%dk%d", round, i), fmt.Sprint(i))
		}
		// Proposals in flight when the crash comes may be lost, or not.
		l := c.leader()
		require.NoError(t, l.peer.Propose([]byte("inflight=1")))
		c.handleAll()
		c.deliver()
		var applied []string
		for _, n := range c.nodes {
			if len(n.sm.history) > len(applied) {
				applied = n.sm.history
			}
		}
		for _, id := range c.ids() {
			c.crash(id)
		}
		for _, id := range c.ids() {
			c.restart(id)
		}
		l = c.leader()
		c.propose(fmt.Sprintf("after%d", round), "1")
		c.catchUp(l)
		require.Equal(t, applied, l.sm.history[:len(applied)], "round %d", round)
	}
}

// awayNode proposes while node 3 is away (isolated, or crashed when crash
// is set) long enough for the leader to compact its log past what node 3
// has, then brings it back.
func snapshotCatchUp(t *testing.T, c *cluster, crash bool) *testNode {
	t.Helper()
	for i := range 5 {
		c.propose(fmt.Sprintf("k%d", i), "early")
	}
	if l := c.leader(); l.id == 3 {
		l.peer.TransferLeadership(1)
		c.tick(2 * DefaultElectionTick)
	}
	require.NotEqual(t, uint64(3), c.leader().id)
	if crash {
		c.crash(3)
	} else {
		c.isolate(3)
	}
	for i := range 100 {
		c.propose(fmt.Sprintf("k%d", i), fmt.Sprint(i))
	}
	l := c.leader()
	first, err := l.storage.FirstIndex()
	require.NoError(t, err)
	require.Greater(t, first, c.nodes[3].peer.Applied()+1, "the leader compacted what node 3 lacks")
	if crash {
		c.restart(3)
	} else {
		c.heal()
	}
	c.catchUp(l)
	n := c.nodes[3]
	require.Positive(t, n.sm.restores, "node 3 caught up from a snapshot")
	require.Positive(t, c.sent[raftpb.MsgSnap])
	snap, err := n.storage.Snapshot()
	require.NoError(t, err)
	require.Positive(t, snap.GetMetadata().GetIndex())
	return l
}

func TestClusterNodeAwayCatchesUpFromASnapshot(t *testing.T) {
	c := newCluster(t, 1, 10, 1, 2, 3)
	l := snapshotCatchUp(t, c, false)
	// Its restart starts from the snapshot it received.
	c.crash(3)
	c.restart(3)
	c.catchUp(l)
	require.Equal(t, 1, c.nodes[3].sm.restores)
}

func TestClusterSnapshotTravelsInChunks(t *testing.T) {
	c := newCluster(t, 1, 10, 1, 2, 3)
	c.chunkBytes = 256
	snapshotCatchUp(t, c, true)
	require.Greater(t, c.chunks, 4*c.sent[raftpb.MsgSnap], "each snapshot travelled in several chunks")
}

func TestClusterLostSnapshotIsSentAgainAfterReportSnapshot(t *testing.T) {
	c := newCluster(t, 1, 10, 1, 2, 3)
	c.reportSnapshots = false
	lost := 0
	c.drop = func(m *raftpb.Message) bool {
		if m.GetType() == raftpb.MsgSnap && lost == 0 {
			lost++
			return true
		}
		return false
	}
	for i := range 5 {
		c.propose(fmt.Sprintf("k%d", i), "early")
	}
	if l := c.leader(); l.id == 3 {
		l.peer.TransferLeadership(1)
		c.tick(2 * DefaultElectionTick)
	}
	c.isolate(3)
	for i := range 50 {
		c.propose(fmt.Sprintf("k%d", i), fmt.Sprint(i))
	}
	l := c.leader()
	c.heal()
	c.tick(5 * DefaultElectionTick)
	require.Equal(t, 1, lost)
	require.Equal(t, 1, c.sent[raftpb.MsgSnap], "unreported, the lost snapshot is not sent again")
	require.Zero(t, c.nodes[3].sm.restores)

	l.peer.ReportSnapshot(3, raft.SnapshotFailure)
	c.catchUp(l)
	require.Equal(t, 2, c.sent[raftpb.MsgSnap])
	require.Equal(t, 1, c.nodes[3].sm.restores)
}

// TestClusterRandomPartitions runs proposals through partitions that
// change at random, with messages lost, checking in every step that no
// two nodes lead in one term and that no two nodes ever applied different
// entries at one index; healed, the cluster converges.
func TestClusterRandomPartitions(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			c := newCluster(t, seed, 15, 1, 2, 3, 4, 5)
			c.dropRate = 0.05
			for round := range 20 {
				c.cut = map[link]bool{}
				for _, a := range c.ids() {
					for _, b := range c.ids() {
						if a != b && c.rng.IntN(4) == 0 {
							c.cut[link{a, b}] = true
						}
					}
				}
				for i := range 10 {
					for _, n := range c.up() {
						if n.peer.IsLeader() {
							_ = n.peer.Propose(fmt.Appendf(nil, "r%dk%d=%d", round, i, n.id))
						}
					}
					c.tick(1)
				}
				c.requireConsistent()
			}
			c.heal()
			c.propose("end", "1")
			c.catchUp(c.leader())
			require.Greater(t, len(c.leaders), 0)
		})
	}
}
