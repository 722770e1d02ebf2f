package quorum

import (
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/depot-dev/depot/disk"
)

func TestNewPeerChecksItsConfig(t *testing.T) {
	storage := openStorage(t, disk.NewMemFS(), testDir)
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no id", Config{Storage: storage, StateMachine: newKV()}},
		{"no storage", Config{ID: 1, StateMachine: newKV()}},
		{"no state machine", Config{ID: 1, Storage: storage}},
		{"election tick not above heartbeat tick", Config{ID: 1, Storage: storage, StateMachine: newKV(), ElectionTick: 2, HeartbeatTick: 2}},
		{"negative heartbeat tick", Config{ID: 1, Storage: storage, StateMachine: newKV(), HeartbeatTick: -1}},
		{"voter 0", Config{ID: 1, Storage: storage, StateMachine: newKV(), Voters: []uint64{0, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewPeer(tc.cfg)
			require.Error(t, err)
		})
	}
	require.True(t, storage.Empty(), "nothing was written")
}

// singleNode starts a one-voter peer on fsys and makes it leader.
func singleNode(t *testing.T, fsys disk.FS, snapshotEvery uint64, logger *logrus.Entry) (*Peer, *kv, *Storage) {
	t.Helper()
	storage, err := OpenStorage(fsys, testDir, logger)
	require.NoError(t, err)
	sm := newKV()
	p, err := NewPeer(Config{ID: 1, Storage: storage, Voters: []uint64{1}, SnapshotEvery: snapshotEvery, Logger: logger, StateMachine: sm})
	require.NoError(t, err)
	for range 100 {
		_, err := p.Handle()
		require.NoError(t, err)
		if p.IsLeader() {
			return p, sm, storage
		}
		p.Tick()
	}
	t.Fatal("no leader")
	return nil, nil, nil
}

func TestPeerLogsThroughItsLogger(t *testing.T) {
	l, hook := logtest.NewNullLogger()
	l.SetLevel(logrus.DebugLevel)
	p, _, _ := singleNode(t, disk.NewMemFS(), 0, logrus.NewEntry(l).WithField("node", 1))
	require.True(t, p.IsLeader())
	var raftLines, leaderChanged bool
	for _, e := range hook.AllEntries() {
		require.Equal(t, 1, e.Data["node"])
		if e.Message == "1 became leader at term 2" {
			raftLines = true
			require.Equal(t, logrus.DebugLevel, e.Level, "raft's info lines log at debug")
		}
		if e.Message == "raft leader changed" {
			leaderChanged = true
		}
	}
	require.True(t, raftLines, "raft's own lines reach the logger")
	require.True(t, leaderChanged)
}

func TestPeerSnapshotsEveryNEntriesAndRestartsFromThem(t *testing.T) {
	m := disk.NewMemFS()
	p, sm, storage := singleNode(t, m, 5, nil)
	for i := range 23 {
		require.NoError(t, p.Propose([]byte{'k', byte('a' + i), '=', 'v'}))
		_, err := p.Handle()
		require.NoError(t, err)
	}
	require.Len(t, sm.state, 23)
	snap, err := storage.Snapshot()
	require.NoError(t, err)
	// Entries 1 (the bootstrap configuration) and 2 (the leader's empty
	// entry) come first: 25 applied, snapshots at 5, 10, ..., 25.
	require.Equal(t, uint64(25), p.Applied())
	require.Equal(t, uint64(25), snap.GetMetadata().GetIndex())
	require.Equal(t, []uint64{1}, snap.GetMetadata().GetConfState().GetVoters())
	first, err := storage.FirstIndex()
	require.NoError(t, err)
	require.Equal(t, uint64(26), first, "compacted but for SnapshotEvery/10 = 0 entries")

	m.Crash()
	p, sm2, _ := singleNode(t, m, 5, nil)
	require.Equal(t, 1, sm2.restores)
	require.Equal(t, sm.state, sm2.state)
	require.False(t, p.Bootstrapped())
}

func TestPeerFailsWhenItsStorageFails(t *testing.T) {
	efs := disk.NewErrorFS(disk.NewMemFS())
	efs.InjectWritesOnly(true)
	p, _, _ := singleNode(t, efs, 0, nil)
	efs.InjectAt(2) // the sync of the next batch
	require.NoError(t, p.Propose([]byte("k=v")))
	_, err := p.Handle()
	require.ErrorIs(t, err, ErrPeerFailed)
	require.ErrorIs(t, err, ErrStorageFailed)
	require.ErrorIs(t, p.Propose([]byte("k=v")), ErrPeerFailed)
	_, err = p.Handle()
	require.ErrorIs(t, err, ErrPeerFailed)
	p.Tick() // does nothing
}

func TestPeerTurnsARaftPanicIntoAnError(t *testing.T) {
	c := newCluster(t, 1, 0, 1, 2, 3)
	l := c.leader()
	var follower *testNode
	for _, n := range c.up() {
		if n != l {
			follower = n
		}
	}
	// A heartbeat committing past the end of the log: raft panics, taking
	// it for a log that lost entries.
	err := follower.peer.Step(&raftpb.Message{
		Type:   raftpb.MsgHeartbeat.Enum(),
		From:   new(l.id),
		To:     new(follower.id),
		Term:   new(l.peer.Term()),
		Commit: new(uint64(1 << 40)),
	})
	require.ErrorIs(t, err, ErrPeerFailed)
	_, err = follower.peer.Handle()
	require.ErrorIs(t, err, ErrPeerFailed)
	require.ErrorIs(t, follower.peer.Step(&raftpb.Message{To: new(follower.id), From: new(l.id)}), ErrPeerFailed)
}
