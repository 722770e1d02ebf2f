package quorum

import (
	"errors"
	"fmt"
	"path"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/disk"
)

const testDir = "/data/meta/raft"

func walPath(first uint64) string  { return path.Join(testDir, walFileName(first)) }
func snapPath(index uint64) string { return path.Join(testDir, snapshotFileName(index)) }

func voters(ids ...uint64) *raftpb.ConfState {
	return raftpb.EnsureConfState(&raftpb.ConfState{Voters: ids})
}

func TestStorageCreatesItsDirectoryDurably(t *testing.T) {
	m := disk.NewMemFS()
	s := openStorage(t, m, testDir)
	require.True(t, s.Empty())
	m.Crash()
	names, err := m.ReadDir(testDir)
	require.NoError(t, err)
	require.Equal(t, []string{"00000000000000000001.wal"}, names)

	s = openStorage(t, m, testDir)
	require.True(t, s.Empty())
	hs, cs, err := s.InitialState()
	require.NoError(t, err)
	require.True(t, raft.IsEmptyHardState(hs))
	require.Empty(t, cs.GetVoters())
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	require.Equal(t, uint64(1), first)
	require.Equal(t, uint64(0), last)
}

func TestStorageSaveSurvivesACrash(t *testing.T) {
	m := disk.NewMemFS()
	s := openStorage(t, m, testDir)
	require.NoError(t, s.Save(hardState(1, 1, 0), entries(1, 3, 1), true))
	require.NoError(t, s.Save(hardState(1, 1, 3), entries(4, 5, 1), true))
	require.False(t, s.Empty())
	want := logOf(t, s)
	require.Len(t, want, 5)

	m.Crash()
	s = openStorage(t, m, testDir)
	require.Equal(t, want, logOf(t, s))
	hs, _, err := s.InitialState()
	require.NoError(t, err)
	require.True(t, proto.Equal(hardState(1, 1, 3), hs), "%v", hs)
	term, err := s.Term(4)
	require.NoError(t, err)
	require.Equal(t, uint64(1), term)

	// The reopened storage appends after what it read.
	require.NoError(t, s.Save(nil, entries(6, 6, 2), true))
	m.Crash()
	s = openStorage(t, m, testDir)
	require.Len(t, logOf(t, s), 6)
}

func TestStorageConflictingEntriesReplaceTheSuffix(t *testing.T) {
	m := disk.NewMemFS()
	s := openStorage(t, m, testDir)
	require.NoError(t, s.Save(hardState(1, 1, 2), entries(1, 10, 1), true))
	require.NoError(t, s.Save(hardState(2, 2, 2), entries(6, 8, 2), true))
	want := append(logOf(t, openNothing(t, entries(1, 5, 1))), logOf(t, openNothing(t, entries(6, 8, 2)))[5:]...)
	require.Equal(t, want, logOf(t, s))

	m.Crash()
	s = openStorage(t, m, testDir)
	require.Equal(t, want, logOf(t, s))
	last, _ := s.LastIndex()
	require.Equal(t, uint64(8), last)

	// A second conflict, at the very first entry after the snapshot.
	require.NoError(t, s.Save(hardState(3, 3, 0), entries(1, 2, 3), true))
	m.Crash()
	s = openStorage(t, m, testDir)
	require.Equal(t, logOf(t, openNothing(t, entries(1, 2, 3))), logOf(t, s))
}

// openNothing returns a storage in a memory file system of its own holding
// ents, for building expected logs.
func openNothing(t *testing.T, ents []*raftpb.Entry) *Storage {
	t.Helper()
	s := openStorage(t, disk.NewMemFS(), testDir)
	if first := ents[0].GetIndex(); first > 1 {
		require.NoError(t, s.Save(nil, entries(1, first-1, ents[0].GetTerm()), true))
	}
	require.NoError(t, s.Save(nil, ents, true))
	return s
}

func TestStorageRefusesEntriesThatDoNotFollowTheLog(t *testing.T) {
	s := openStorage(t, disk.NewMemFS(), testDir)
	require.NoError(t, s.Save(nil, entries(1, 3, 1), true))
	for _, tc := range []struct {
		name string
		ents []*raftpb.Entry
	}{
		{"gap", entries(5, 6, 1)},
		{"index zero", []*raftpb.Entry{{Index: new(uint64(0)), Term: new(uint64(1))}}},
		{"not consecutive", append(entries(4, 4, 1), entries(6, 6, 1)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Error(t, s.Save(nil, tc.ents, true))
		})
	}
	// Refusals do not fail the storage.
	require.NoError(t, s.Save(nil, entries(4, 4, 1), true))
}

func TestStorageCommitIndexAloneWaitsForTheNextBatch(t *testing.T) {
	m := disk.NewMemFS()
	s := openStorage(t, m, testDir)
	require.NoError(t, s.Save(hardState(1, 1, 1), entries(1, 3, 1), true))
	before, err := m.ReadFile(walPath(1))
	require.NoError(t, err)
	require.NoError(t, s.Save(hardState(1, 1, 3), nil, false))
	after, err := m.ReadFile(walPath(1))
	require.NoError(t, err)
	require.Equal(t, before, after, "a commit index alone is not written")
	hs, _, _ := s.InitialState()
	require.Equal(t, uint64(3), hs.GetCommit())

	m.Crash()
	s = openStorage(t, m, testDir)
	hs, _, _ = s.InitialState()
	require.Equal(t, uint64(1), hs.GetCommit(), "the commit index may be lost")

	require.NoError(t, s.Save(hardState(1, 1, 3), nil, false))
	require.NoError(t, s.Close())
	m.Crash()
	s = openStorage(t, m, testDir)
	hs, _, _ = s.InitialState()
	require.Equal(t, uint64(3), hs.GetCommit(), "Close writes it")
}

// walWithBatches returns the bytes of a WAL file of four batches and the
// offset at which each record begins.
func walWithBatches(t *testing.T) (b []byte, starts []int64) {
	t.Helper()
	m := disk.NewMemFS()
	s := openStorage(t, m, testDir)
	for i := uint64(0); i < 4; i++ {
		size, err := m.Stat(walPath(1))
		require.NoError(t, err)
		starts = append(starts, size.Size())
		require.NoError(t, s.Save(hardState(1, 1, 3*i), entries(3*i+1, 3*i+3, 1), true))
	}
	b, err := m.ReadFile(walPath(1))
	require.NoError(t, err)
	return b, starts
}

// memWith returns a memory file system whose directory testDir durably
// holds the WAL file b.
func memWith(t *testing.T, b []byte) *disk.MemFS {
	t.Helper()
	m := disk.NewMemFS()
	require.NoError(t, m.MkdirAll(testDir, 0o755))
	m.SyncAll()
	require.NoError(t, m.WriteFile(walPath(1), b))
	return m
}

func TestStorageCutsATornTailAtEveryOffsetOfTheLastRecord(t *testing.T) {
	b, starts := walWithBatches(t)
	last := starts[len(starts)-1]
	for cut := last; cut < int64(len(b)); cut++ {
		m := memWith(t, b[:cut])
		s := openStorage(t, m, testDir)
		require.Len(t, logOf(t, s), 9, "cut at %d", cut)
		got, err := m.ReadFile(walPath(1))
		require.NoError(t, err)
		require.Equal(t, b[:last], got, "the torn tail is cut off the file")
		// The storage appends after the cut, and that survives.
		require.NoError(t, s.Save(nil, entries(10, 10, 2), true))
		m.Crash()
		require.Len(t, logOf(t, openStorage(t, m, testDir)), 10)
	}
}

func TestStorageCutsALastRecordThatFailsItsChecksum(t *testing.T) {
	b, starts := walWithBatches(t)
	last := starts[len(starts)-1]
	for off := last; off < int64(len(b)); off++ {
		m := memWith(t, b)
		require.NoError(t, m.Corrupt(walPath(1), off))
		s := openStorage(t, m, testDir)
		require.Len(t, logOf(t, s), 9, "damage at %d", off)
	}
}

func TestStorageDamageBeforeTheLastRecordIsAnError(t *testing.T) {
	b, starts := walWithBatches(t)
	starts = append([]int64{0}, starts...) // the base record first
	for rec := 0; rec < len(starts)-1; rec++ {
		for off := starts[rec]; off < starts[rec+1]; off++ {
			m := memWith(t, b)
			require.NoError(t, m.Corrupt(walPath(1), off))
			_, err := OpenStorage(m, testDir, nil)
			require.ErrorIs(t, err, ErrCorrupt, "damage at %d", off)
			var ce *disk.CorruptionError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, walPath(1), ce.Path)
			require.Equal(t, starts[rec], ce.Offset, "damage at %d: %v", off, err)
			got, err := m.ReadFile(walPath(1))
			require.NoError(t, err)
			require.Len(t, got, len(b), "nothing is cut")
		}
	}
}

func TestStorageWholeRecordsThatBreakTheRulesAreErrors(t *testing.T) {
	base := appendBaseRecord(nil, 0, 0)
	for _, tc := range []struct {
		name string
		wal  []byte
	}{
		{"no base record", appendBatchRecord(nil, nil, entries(1, 1, 1))},
		{"a second base record", appendBaseRecord(append([]byte{}, base...), 0, 0)},
		{"a gap", appendBatchRecord(append([]byte{}, base...), nil, entries(2, 2, 1))},
		{"terms going down", appendBatchRecord(appendBatchRecord(append([]byte{}, base...), nil, entries(1, 1, 2)), nil, entries(2, 2, 1))},
		{"commit past the last entry", appendBatchRecord(append([]byte{}, base...), hardState(1, 0, 2), entries(1, 1, 1))},
		{"empty file", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := OpenStorage(memWith(t, tc.wal), testDir, nil)
			require.ErrorIs(t, err, ErrCorrupt)
		})
	}
}

func TestStorageFsyncFailureFailsIt(t *testing.T) {
	m := disk.NewMemFS()
	efs := disk.NewErrorFS(m)
	efs.InjectWritesOnly(true)
	s := openStorage(t, efs, testDir)
	require.NoError(t, s.Save(hardState(1, 1, 0), entries(1, 3, 1), true))

	efs.InjectAt(2) // the write succeeds, its fsync fails
	err := s.Save(hardState(1, 1, 3), entries(4, 6, 1), true)
	require.ErrorIs(t, err, disk.ErrInjected)
	require.ErrorIs(t, err, ErrStorageFailed)
	require.Equal(t, int64(1), efs.Injected())

	// Every later write is refused, though the file system works again.
	require.ErrorIs(t, s.Save(nil, entries(4, 4, 1), true), ErrStorageFailed)
	_, err = s.CreateSnapshot(3, voters(1), nil)
	require.ErrorIs(t, err, ErrStorageFailed)
	require.ErrorIs(t, s.ApplySnapshot(&raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(9)), Term: new(uint64(1))}}), ErrStorageFailed)
	// Reads go on, from what was made durable.
	require.Len(t, logOf(t, s), 3)

	m.Crash()
	require.Len(t, logOf(t, openStorage(t, m, testDir)), 3)
}

func TestStorageWriteFailureFailsIt(t *testing.T) {
	m := disk.NewMemFS()
	efs := disk.NewErrorFS(m)
	efs.InjectWritesOnly(true)
	s := openStorage(t, efs, testDir)
	require.NoError(t, s.Save(hardState(1, 1, 0), entries(1, 3, 1), true))
	efs.InjectAt(1)
	efs.TornWrites(newRand(1))
	require.ErrorIs(t, s.Save(nil, entries(4, 6, 1), true), ErrStorageFailed)
	require.ErrorIs(t, s.Save(nil, entries(4, 6, 1), true), ErrStorageFailed)
	require.NoError(t, s.Close())
	m.SyncAll() // even a torn write made durable is cut at open
	require.Len(t, logOf(t, openStorage(t, m, testDir)), 3)
}

func TestStorageSnapshotCompactsTheLog(t *testing.T) {
	m := disk.NewMemFS()
	s := openStorage(t, m, testDir)
	require.NoError(t, s.Save(hardState(2, 1, 18), entries(1, 20, 2), true))
	snap, err := s.CreateSnapshot(15, voters(1, 2, 3), []byte("state at 15"))
	require.NoError(t, err)
	require.Equal(t, uint64(15), snap.GetMetadata().GetIndex())
	require.Equal(t, uint64(2), snap.GetMetadata().GetTerm())

	// Memory keeps the entries until Compact.
	first, _ := s.FirstIndex()
	require.Equal(t, uint64(1), first)
	require.NoError(t, s.Compact(10))
	first, _ = s.FirstIndex()
	require.Equal(t, uint64(11), first)
	require.Error(t, s.Compact(16), "past the snapshot")
	require.NoError(t, s.Compact(5), "already compacted")

	names, err := m.ReadDir(testDir)
	require.NoError(t, err)
	require.Equal(t, []string{"00000000000000000015.snap", "00000000000000000016.wal"}, names)

	_, err = s.CreateSnapshot(15, voters(1), nil)
	require.ErrorIs(t, err, raft.ErrSnapOutOfDate)
	_, err = s.CreateSnapshot(21, voters(1), nil)
	require.ErrorIs(t, err, raft.ErrUnavailable)
	_, err = s.CreateSnapshot(19, voters(1), nil)
	require.ErrorContains(t, err, "past the commit index")

	require.NoError(t, s.Save(nil, entries(21, 22, 3), true))
	m.Crash()
	s = openStorage(t, m, testDir)
	got, err := s.Snapshot()
	require.NoError(t, err)
	require.True(t, proto.Equal(snap, got), "%v", got)
	first, _ = s.FirstIndex()
	require.Equal(t, uint64(16), first)
	require.Equal(t, append(logOf(t, openNothing(t, entries(1, 20, 2)))[15:], logOf(t, openNothing(t, entries(1, 22, 3)))[20:]...), logOf(t, s))
	hs, cs, err := s.InitialState()
	require.NoError(t, err)
	require.Equal(t, []uint64{1, 2, 3}, cs.GetVoters())
	require.Equal(t, uint64(18), hs.GetCommit())

	// A second snapshot replaces the first.
	require.NoError(t, s.Save(hardState(3, 1, 22), nil, false))
	_, err = s.CreateSnapshot(22, voters(1, 2), []byte("state at 22"))
	require.NoError(t, err)
	names, err = m.ReadDir(testDir)
	require.NoError(t, err)
	require.Equal(t, []string{"00000000000000000022.snap", "00000000000000000023.wal"}, names)
	m.Crash()
	s = openStorage(t, m, testDir)
	last, _ := s.LastIndex()
	require.Equal(t, uint64(22), last)
	require.Empty(t, logOf(t, s))
}

func TestStorageSnapshotFromTheLeaderReplacesTheLog(t *testing.T) {
	m := disk.NewMemFS()
	s := openStorage(t, m, testDir)
	require.NoError(t, s.Save(hardState(1, 1, 3), entries(1, 5, 1), true))
	snap := &raftpb.Snapshot{
		Data:     []byte("leader's state"),
		Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(50)), Term: new(uint64(3)), ConfState: voters(1, 2, 3)},
	}
	require.NoError(t, s.ApplySnapshot(snap))
	require.ErrorIs(t, s.ApplySnapshot(snap), raft.ErrSnapOutOfDate)
	check := func(s *Storage) {
		first, _ := s.FirstIndex()
		last, _ := s.LastIndex()
		require.Equal(t, uint64(51), first)
		require.Equal(t, uint64(50), last)
		hs, cs, err := s.InitialState()
		require.NoError(t, err)
		require.Equal(t, uint64(50), hs.GetCommit())
		require.Equal(t, uint64(3), hs.GetTerm())
		require.Equal(t, []uint64{1, 2, 3}, cs.GetVoters())
		got, err := s.Snapshot()
		require.NoError(t, err)
		require.Equal(t, "leader's state", string(got.GetData()))
	}
	check(s)
	m.Crash()
	s = openStorage(t, m, testDir)
	check(s)
	require.NoError(t, s.Save(hardState(3, 0, 50), entries(51, 52, 3), true))
	m.Crash()
	require.Len(t, logOf(t, openStorage(t, m, testDir)), 2)
}

func TestStorageCorruptSnapshotIsAnError(t *testing.T) {
	m := disk.NewMemFS()
	s := openStorage(t, m, testDir)
	require.NoError(t, s.Save(hardState(1, 1, 5), entries(1, 5, 1), true))
	_, err := s.CreateSnapshot(4, voters(1), []byte("state"))
	require.NoError(t, err)
	b, err := m.ReadFile(snapPath(4))
	require.NoError(t, err)
	for off := int64(0); off < int64(len(b)); off++ {
		require.NoError(t, m.Corrupt(snapPath(4), off))
		_, err := OpenStorage(m, testDir, nil)
		require.ErrorIs(t, err, ErrCorrupt, "damage at %d", off)
		var ce *disk.CorruptionError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, snapPath(4), ce.Path)
		require.NoError(t, m.Corrupt(snapPath(4), off)) // undo
	}
	require.Len(t, logOf(t, openStorage(t, m, testDir)), 1)
}

// storageView is what a storage holds that must survive a crash: the
// snapshot, the entries after it and the hard state.
type storageView struct {
	snapIndex, snapTerm uint64
	snapData            string
	log                 []string
	hardState           string
}

func viewOf(t *testing.T, s *Storage) storageView {
	t.Helper()
	snap, err := s.Snapshot()
	require.NoError(t, err)
	hs, _, err := s.InitialState()
	require.NoError(t, err)
	v := storageView{
		snapIndex: snap.GetMetadata().GetIndex(),
		snapTerm:  snap.GetMetadata().GetTerm(),
		snapData:  string(snap.GetData()),
		hardState: fmt.Sprintf("%d/%d/%d", hs.GetTerm(), hs.GetVote(), hs.GetCommit()),
	}
	for _, line := range logOf(t, s) {
		var index uint64
		_, err := fmt.Sscanf(line, "%d/", &index)
		require.NoError(t, err)
		if index > v.snapIndex {
			v.log = append(v.log, line)
		}
	}
	return v
}

// storageWorkload is a run of writes covering every kind: appends,
// a conflict, snapshots taken, a snapshot from a leader, appends after
// each.
var storageWorkload = []func(s *Storage) error{
	func(s *Storage) error { return s.Save(hardState(1, 1, 0), entries(1, 4, 1), true) },
	func(s *Storage) error { return s.Save(hardState(1, 1, 2), entries(5, 8, 1), true) },
	func(s *Storage) error { return s.Save(hardState(2, 2, 5), entries(6, 9, 2), true) },
	func(s *Storage) error {
		_, err := s.CreateSnapshot(5, voters(1, 2, 3), []byte("at 5"))
		return err
	},
	func(s *Storage) error { return s.Save(hardState(2, 2, 12), entries(10, 12, 2), true) },
	func(s *Storage) error {
		_, err := s.CreateSnapshot(11, voters(1, 2, 3), []byte("at 11"))
		return err
	},
	func(s *Storage) error {
		return s.ApplySnapshot(&raftpb.Snapshot{
			Data:     []byte("at 40"),
			Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(40)), Term: new(uint64(4)), ConfState: voters(1, 2, 3)},
		})
	},
	func(s *Storage) error { return s.Save(hardState(4, 0, 40), entries(41, 43, 4), true) },
}

// TestStorageErrorAtEveryOperation fails the n-th mutating file operation
// of the workload, for every n, crashes, and checks that the reopened
// storage holds what it held before the failed write or after it, never
// anything else, and takes writes again.
func TestStorageErrorAtEveryOperation(t *testing.T) {
	for n := int64(1); ; n++ {
		m := disk.NewMemFS()
		efs := disk.NewErrorFS(m)
		efs.InjectWritesOnly(true)
		efs.InjectAt(n)
		s, err := OpenStorage(efs, testDir, nil)
		before := viewOf(t, openStorage(t, disk.NewMemFS(), testDir))
		after := before
		failed := err != nil
		if !failed {
			for _, write := range storageWorkload {
				before = viewOf(t, s)
				if err := write(s); err != nil {
					failed = true
					// The write may have become durable before the failure.
					after = viewAfter(t, before, write)
					break
				}
			}
		}
		if !failed {
			require.Zero(t, efs.Injected())
			t.Logf("the workload makes %d mutating operations", n-1)
			return
		}
		m.Crash()
		s, err = OpenStorage(m, testDir, testLogger(t, 0, 0))
		require.NoError(t, err, "failure at operation %d", n)
		got := viewOf(t, s)
		if got.snapIndex != before.snapIndex || got.hardState != before.hardState || fmt.Sprint(got.log) != fmt.Sprint(before.log) {
			require.Equal(t, after, got, "failure at operation %d: neither before %+v nor after", n, before)
		}
		last, _ := s.LastIndex()
		require.NoError(t, s.Save(nil, entries(last+1, last+1, 9), true), "failure at operation %d", n)
	}
}

// viewAfter returns the view of a storage holding before once write has
// succeeded, computed on a storage of its own.
func viewAfter(t *testing.T, before storageView, write func(*Storage) error) storageView {
	t.Helper()
	// Replay the workload on a working file system up to the same view,
	// then the write.
	s := openStorage(t, disk.NewMemFS(), testDir)
	for _, w := range storageWorkload {
		if fmt.Sprint(viewOf(t, s)) == fmt.Sprint(before) {
			break
		}
		require.NoError(t, w(s))
	}
	require.NoError(t, write(s))
	return viewOf(t, s)
}

func TestStorageClosedRefusesWrites(t *testing.T) {
	s := openStorage(t, disk.NewMemFS(), testDir)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.Save(nil, entries(1, 1, 1), true), ErrClosed)
	_, err := s.CreateSnapshot(1, nil, nil)
	require.True(t, errors.Is(err, ErrClosed))
}

// TestStorageTornUnsyncedBatch writes a batch whose fsync fails, then
// crashes keeping a random part of it, sometimes garbled, as a torn write
// would: the reopened storage holds the synced batches and the torn one
// whole or not at all.
func TestStorageTornUnsyncedBatch(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		m := disk.NewMemFS()
		efs := disk.NewErrorFS(m)
		efs.InjectWritesOnly(true)
		s := openStorage(t, efs, testDir)
		require.NoError(t, s.Save(hardState(1, 1, 0), entries(1, 3, 1), true))
		require.NoError(t, s.Save(hardState(1, 1, 3), entries(4, 6, 1), true))
		efs.InjectAt(2)
		require.ErrorIs(t, s.Save(hardState(2, 2, 3), entries(7, 40, 2), true), ErrStorageFailed)
		m.CrashTorn(newRand(seed))
		s = openStorage(t, m, testDir)
		n := len(logOf(t, s))
		require.True(t, n == 6 || n == 40, "seed %d: %d entries", seed, n)
		hs, _, _ := s.InitialState()
		if n == 6 {
			require.Equal(t, uint64(1), hs.GetTerm())
		} else {
			require.Equal(t, uint64(2), hs.GetTerm())
		}
	}
}

// TestStorageOnTheOS runs a save, a conflict, a snapshot and a reopen on
// the operating system's file system.
func TestStorageOnTheOS(t *testing.T) {
	dir := path.Join(t.TempDir(), "meta", "raft")
	s := openStorage(t, disk.OS, dir)
	require.NoError(t, s.Save(hardState(1, 1, 5), entries(1, 8, 1), true))
	require.NoError(t, s.Save(hardState(2, 2, 5), entries(7, 9, 2), true))
	_, err := s.CreateSnapshot(5, voters(1, 2, 3), []byte("state at 5"))
	require.NoError(t, err)
	require.NoError(t, s.Save(hardState(2, 2, 9), nil, false))
	want := viewOf(t, s)
	require.NoError(t, s.Close())

	s = openStorage(t, disk.OS, dir)
	require.Equal(t, want, viewOf(t, s))
	names, err := disk.OS.ReadDir(dir)
	require.NoError(t, err)
	require.Equal(t, []string{"00000000000000000005.snap", "00000000000000000006.wal"}, names)
	require.NoError(t, s.Close())
}
