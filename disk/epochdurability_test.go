package disk

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/wire"
)

// syncRecordFS wraps an FS and records, in order, each fsync of a file
// ("sync <path>") and of a directory ("syncdir <path>"). Safe for
// concurrent use as far as its inner FS is.
type syncRecordFS struct {
	FS
	mu    sync.Mutex
	syncs []string
}

func (s *syncRecordFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := s.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &syncRecordFile{File: f, fs: s}, nil
}

func (s *syncRecordFS) SyncDir(name string) error {
	s.record("syncdir " + name)
	return s.FS.SyncDir(name)
}

func (s *syncRecordFS) record(op string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.syncs = append(s.syncs, op)
}

// take returns the syncs recorded since the last take.
func (s *syncRecordFS) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	syncs := s.syncs
	s.syncs = nil
	return syncs
}

type syncRecordFile struct {
	File
	fs *syncRecordFS
}

func (f *syncRecordFile) Sync() error {
	f.fs.record("sync " + f.Name())
	return f.File.Sync()
}

const epochCheckpointOfP = "/p/" + LeaderEpochCheckpointFile

// requireCheckpointSyncedFirst checks that syncs, a flush's, make the
// leader-epoch checkpoint of /p durable, its bytes and then the directory,
// before the fsync of any .log.
func requireCheckpointSyncedFirst(t *testing.T, syncs []string) {
	t.Helper()
	file := slices.Index(syncs, "sync "+epochCheckpointOfP)
	dir := slices.Index(syncs, "syncdir /p")
	segment := slices.IndexFunc(syncs, func(s string) bool { return strings.HasSuffix(s, logExt) })
	require.GreaterOrEqual(t, file, 0, "the checkpoint is synced: %v", syncs)
	require.Greater(t, dir, file, "then the directory: %v", syncs)
	require.GreaterOrEqual(t, segment, 0, "the segment is synced: %v", syncs)
	require.Greater(t, segment, dir, "after the checkpoint: %v", syncs)
}

// appendOfEpoch appends a batch of 5 records of epoch at the end of l, as
// a leader (AppendValidated, the partition's path) or as a follower.
func appendOfEpoch(t testing.TB, l *Log, epoch int32, asFollower bool) {
	t.Helper()
	b := leaderBatch(t, 5, epoch, l.EndOffset())
	h, err := wire.Validate(b)
	require.NoError(t, err)
	if asFollower {
		_, err = l.AppendAsFollower(b, h)
	} else {
		_, err = l.AppendValidated(b, h)
	}
	require.NoError(t, err)
}

// recordedLog opens a log at /p on a MemFS whose syncs rec records, and
// appends a batch of epoch 0 to it as a follower.
func recordedLog(t *testing.T) (*MemFS, *syncRecordFS, Options, *Log) {
	t.Helper()
	mem := NewMemFS()
	rec := &syncRecordFS{FS: mem}
	opts := testOptions(newClock(), nil)
	l := openLog(t, rec, "/p", opts)
	appendOfEpoch(t, l, 0, true)
	return mem, rec, opts, l
}

// TestFirstAppendOfAnEpochDoesNotSync appends the first batch of a new
// epoch, the log's first epoch or a later one, as a leader and as a
// follower: the checkpoint is written, with the epoch, before the batch,
// and nothing is synced. A process kill then keeps the batch and its
// epoch (the page cache survives); an OS crash keeps what it keeps, and
// the cache recovered with the partition's epoch matches the log.
func TestFirstAppendOfAnEpochDoesNotSync(t *testing.T) {
	type crash struct {
		name string
		do   func(mem *MemFS, l *Log)
	}
	crashes := []crash{
		{"kill", func(_ *MemFS, l *Log) { abandon(l) }},
		{"crash", func(mem *MemFS, _ *Log) { mem.Crash() }},
	}
	for seed := range uint64(12) {
		crashes = append(crashes, crash{fmt.Sprintf("torn crash %d", seed), func(mem *MemFS, _ *Log) {
			mem.CrashTorn(rand.New(rand.NewPCG(seed, 3)))
		}})
	}
	for _, asFollower := range []bool{false, true} {
		for _, before := range [][]int32{nil, {0, 0}} {
			for _, c := range crashes {
				name := fmt.Sprintf("follower=%v/epochs before %v/%s", asFollower, before, c.name)
				t.Run(name, func(t *testing.T) {
					mem := NewMemFS()
					rec := &syncRecordFS{FS: mem}
					opts := testOptions(newClock(), nil)
					opts.LeaderEpoch = 3
					l := openLog(t, rec, "/p", opts)
					for _, e := range before {
						appendOfEpoch(t, l, e, asFollower)
					}
					require.NoError(t, l.Sync())
					durable, base := l.Epochs(), l.EndOffset()

					rec.take()
					appendOfEpoch(t, l, 3, asFollower)
					require.Empty(t, rec.take(), "no fsync on the append path")
					want := append(slices.Clone(durable), EpochEntry{Epoch: 3, StartOffset: base})
					require.Equal(t, want, l.Epochs())
					requireCheckpoint(t, mem, l)
					requireNoBatchAboveCheckpoint(t, mem, "/p", "after the append")

					c.do(mem, l)
					o := opts
					o.RecoveryPoint = base
					l = openLog(t, mem, "/p", o)
					require.GreaterOrEqual(t, l.EndOffset(), base, "what was synced survives")
					if l.EndOffset() > base {
						requireEpochs(t, want, l.Epochs(), "the batch survived, and its epoch with it")
					} else {
						requireEpochs(t, durable, l.Epochs(), "the batch is gone, and its epoch with it")
					}
					if c.name == "kill" {
						require.Equal(t, base+5, l.EndOffset(), "a kill loses nothing")
					}
					requireEpochsMatchBatches(t, l, name)
					if len(l.Epochs()) > 0 {
						requireCheckpoint(t, mem, l)
					}
					require.NoError(t, l.Close())
				})
			}
		}
	}
}

// TestFlushesSyncTheEpochCheckpointFirst makes a batch of a new epoch
// durable each way a log does it: every one syncs the checkpoint and the
// directory before the segment, and an OS crash afterwards keeps the
// batch and its epoch, with no partition epoch to recover it from.
func TestFlushesSyncTheEpochCheckpointFirst(t *testing.T) {
	for _, tt := range []struct {
		name string
		// flushMessages is flush.messages: 1 makes the append flush.
		flushMessages int64
		flush         func(t *testing.T, mem *MemFS, l *Log)
		// syncfs is set when nothing but a sync of everything runs.
		syncfs bool
	}{
		{"Flush", 0, func(t *testing.T, _ *MemFS, l *Log) { require.NoError(t, l.Flush(l.EndOffset())) }, false},
		{"Sync", 0, func(t *testing.T, _ *MemFS, l *Log) { require.NoError(t, l.Sync()) }, false},
		{"Settle", 0, func(t *testing.T, _ *MemFS, l *Log) { require.NoError(t, l.Settle()) }, false},
		{"Close", 0, func(t *testing.T, _ *MemFS, l *Log) { require.NoError(t, l.Close()) }, false},
		{"flush.messages", 1, func(*testing.T, *MemFS, *Log) {}, false},
		{"FlushJob", 0, func(t *testing.T, _ *MemFS, l *Log) {
			j, err := l.StartFlush()
			require.NoError(t, err)
			require.NoError(t, l.FinishFlush(j, j.Run()))
		}, false},
		{"FlushJob on another goroutine", 0, func(t *testing.T, _ *MemFS, l *Log) {
			j, err := l.StartFlush()
			require.NoError(t, err)
			done := make(chan error)
			go func() { done <- j.Run() }()
			require.NoError(t, l.FinishFlush(j, <-done))
		}, false},
		{"FlushJob after a roll", 0, func(t *testing.T, _ *MemFS, l *Log) {
			// StartFlush syncs the sealed segment and the directory on
			// the owner's goroutine: the checkpoint there too, first.
			require.NoError(t, l.Roll())
			j, err := l.StartFlush()
			require.NoError(t, err)
			require.False(t, l.epochsUnsynced)
			require.NoError(t, l.FinishFlush(j, j.Run()))
		}, false},
		{"Flush after a roll", 0, func(t *testing.T, _ *MemFS, l *Log) {
			require.NoError(t, l.Roll())
			require.NoError(t, l.Sync())
		}, false},
		{"FlushJob covered by a syncfs", 0, func(t *testing.T, mem *MemFS, l *Log) {
			j, err := l.StartFlush()
			require.NoError(t, err)
			mem.SyncAll()
			require.NoError(t, l.FinishFlush(j, nil))
		}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mem, rec, opts, l := recordedLog(t)
			require.NoError(t, l.Sync())
			if tt.flushMessages > 0 {
				require.NoError(t, l.SetConfig(testOptions(newClock(), func(c *Config) { c.FlushMessages = tt.flushMessages }).Config))
			}
			rec.take()
			appendOfEpoch(t, l, 3, true)
			tt.flush(t, mem, l)
			if !tt.syncfs {
				requireCheckpointSyncedFirst(t, rec.take())
			}
			require.False(t, l.epochsUnsynced, "the checkpoint is durable")

			l = requireEpochSurvivesCrash(t, mem, opts)
			requireCheckpoint(t, mem, l)
			require.NoError(t, l.Close())
		})
	}
}

// requireEpochSurvivesCrash crashes mem and opens the log at /p again,
// with opts and no partition epoch to recover epochs from: the batch of
// epoch 3 that followed epoch 0's is there, its epoch in the checkpoint.
func requireEpochSurvivesCrash(t *testing.T, mem *MemFS, opts Options) *Log {
	t.Helper()
	mem.Crash()
	opts.RecoveryPoint = 10
	l := openLog(t, mem, "/p", opts)
	require.Equal(t, int64(10), l.EndOffset(), "the batch survives")
	require.Equal(t, epochs(0, 0, 3, 5), l.Epochs(), "its epoch is in the checkpoint")
	return l
}

// TestEpochAssignedWhileAFlushJobIsInFlight: a job covers the checkpoint as
// it was at StartFlush. An epoch an append assigns while a job that syncs
// the checkpoint is in flight is written durably (the job's directory sync
// could otherwise make its rename durable before its bytes); one assigned
// while a job that does not is in flight stays to be synced by the next
// flush.
func TestEpochAssignedWhileAFlushJobIsInFlight(t *testing.T) {
	for _, jobSyncsCheckpoint := range []bool{true, false} {
		t.Run(fmt.Sprintf("the job syncs the checkpoint=%v", jobSyncsCheckpoint), func(t *testing.T) {
			mem, rec, opts, l := recordedLog(t)
			if !jobSyncsCheckpoint {
				require.NoError(t, l.Sync())
			}
			appendOfEpoch(t, l, 0, true)
			require.Equal(t, jobSyncsCheckpoint, l.epochsUnsynced)
			j, err := l.StartFlush()
			require.NoError(t, err)

			rec.take()
			appendOfEpoch(t, l, 4, true)
			syncs := rec.take()
			if jobSyncsCheckpoint {
				require.Equal(t, []string{"sync " + epochCheckpointOfP + ".tmp", "syncdir /p"}, syncs, "written durably")
			} else {
				require.Empty(t, syncs, "written without a sync")
			}
			require.NoError(t, l.FinishFlush(j, j.Run()))
			require.Equal(t, int64(10), l.RecoveryPoint())
			require.Equal(t, !jobSyncsCheckpoint, l.epochsUnsynced, "the job covers the checkpoint it saw only")

			// The job's fsync wrote the later batch too, as it may.
			mem.Crash()
			opts.RecoveryPoint = l.RecoveryPoint()
			l = openLog(t, mem, "/p", opts)
			if jobSyncsCheckpoint {
				require.Equal(t, int64(15), l.EndOffset(), "the later batch is kept: its epoch is durable")
				require.Equal(t, epochs(0, 0, 4, 10), l.Epochs())
			} else {
				require.Equal(t, int64(10), l.EndOffset(), "the later batch is above the durable checkpoint, and no partition epoch covers it")
				require.Equal(t, epochs(0, 0), l.Epochs())
			}
			requireCheckpoint(t, mem, l)
			require.NoError(t, l.Close())
		})
	}
}

// TestEpochCheckpointSyncFailure fails the fsync of the checkpoint that a
// flush makes before the segment's: the flush fails and so does the log,
// as for any failed fsync, and the recovery point stays where it was.
func TestEpochCheckpointSyncFailure(t *testing.T) {
	for _, tt := range []struct {
		name  string
		flush func(l *Log) error
	}{
		{"Flush", func(l *Log) error { return l.Sync() }},
		{"FlushJob", func(l *Log) error {
			j, err := l.StartFlush()
			if err != nil {
				return err
			}
			return l.FinishFlush(j, j.Run())
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			efs := NewErrorFS(NewMemFS())
			efs.InjectWritesOnly(true)
			l := openLog(t, efs, "/p", testOptions(newClock(), nil))
			appendOfEpoch(t, l, 0, true)
			require.True(t, l.epochsUnsynced)
			efs.InjectAt(1) // the checkpoint's fsync, the flush's first
			err := tt.flush(l)
			require.ErrorIs(t, err, ErrInjected)
			require.ErrorContains(t, err, LeaderEpochCheckpointFile)
			require.Equal(t, int64(0), l.RecoveryPoint())
			require.True(t, l.epochsUnsynced)
			_, err = l.Append(leaderBatch(t, 1, 0, 0))
			require.ErrorIs(t, err, ErrInjected, "the log is failed")
		})
	}
}

// TestRecoveryAssignsEpochsOfBatchesPastTheCheckpoint opens a log whose
// checkpoint lost the epochs of its last batches, as an OS crash leaves
// it when writeback wrote the batches and not the checkpoint: the
// batches past the recovery point whose epochs are above the checkpoint's
// latest are kept, and their epochs assigned, up to the partition's epoch
// given to Open, and the cache is written back durably; those above it
// are taken for damage and cut, as before.
func TestRecoveryAssignsEpochsOfBatchesPastTheCheckpoint(t *testing.T) {
	for _, tt := range []struct {
		leaderEpoch int32
		end         int64
		want        []EpochEntry
	}{
		{5, 25, epochs(0, 0, 3, 10, 4, 20)},
		{4, 25, epochs(0, 0, 3, 10, 4, 20)},
		{3, 20, epochs(0, 0, 3, 10)},
		{2, 10, epochs(0, 0)},
		{NoLeaderEpoch, 10, epochs(0, 0)},
	} {
		for _, recoveryPoint := range []int64{10, 5, 0} {
			t.Run(fmt.Sprintf("partition epoch %d/recovery point %d", tt.leaderEpoch, recoveryPoint), func(t *testing.T) {
				mem := NewMemFS()
				opts := testOptions(newClock(), func(c *Config) { c.SegmentBytes = 600 })
				l := openLog(t, mem, "/p", opts)
				for _, epoch := range []int32{0, 0, 3, 3, 4} {
					appendOfEpoch(t, l, epoch, true)
				}
				require.Greater(t, len(l.Segments()), 1, "the batches span segments")
				require.NoError(t, l.Close())
				// The checkpoint as the first flush left it.
				require.NoError(t, mem.WriteFile(epochCheckpointOfP, mustEpochText(t, epochs(0, 0))))

				o := opts
				o.RecoveryPoint = recoveryPoint
				o.LeaderEpoch = tt.leaderEpoch
				l = openLog(t, mem, "/p", o)
				require.Equal(t, tt.end, l.EndOffset())
				require.Equal(t, tt.want, l.Epochs())
				requireEpochsMatchBatches(t, l, "recovered")
				requireReadable(t, l)

				mem.Crash()
				got, err := ReadFile(mem, epochCheckpointOfP)
				require.NoError(t, err)
				require.Equal(t, mustEpochText(t, tt.want), got, "written back durably")
				o.RecoveryPoint = tt.end
				o.LeaderEpoch = NoLeaderEpoch
				l = openLog(t, mem, "/p", o)
				require.Equal(t, tt.end, l.EndOffset(), "no partition epoch is needed any more")
				require.Equal(t, tt.want, l.Epochs())
				require.NoError(t, l.Close())
			})
		}
	}
}

// TestOpenSyncsACheckpointAKilledProcessLeft: a process killed after an
// append of a new epoch leaves the checkpoint in the page cache only; the
// Open that recovers the batch syncs the checkpoint before it, so that
// the batch it reports durable keeps its epoch through an OS crash.
func TestOpenSyncsACheckpointAKilledProcessLeft(t *testing.T) {
	mem, rec, opts, l := recordedLog(t)
	require.NoError(t, l.Sync())
	appendOfEpoch(t, l, 2, true)
	abandon(l)

	rec.take()
	o := opts
	o.RecoveryPoint = 5
	l = openLog(t, rec, "/p", o)
	requireCheckpointSyncedFirst(t, rec.take())
	require.Equal(t, int64(10), l.RecoveryPoint())
	mem.Crash()
	o.RecoveryPoint = 10
	l = openLog(t, mem, "/p", o)
	require.Equal(t, int64(10), l.EndOffset())
	require.Equal(t, epochs(0, 0, 2, 5), l.Epochs())
	require.NoError(t, l.Close())
}

// requireEpochs checks a cache against want, nil and empty alike.
func requireEpochs(t *testing.T, want, got []EpochEntry, msg string) {
	t.Helper()
	if len(want) == 0 {
		require.Empty(t, got, msg)
		return
	}
	require.Equal(t, want, got, msg)
}

// TestOpenSyncsNoCheckpointWithNothingToRecover: an Open that validates no
// batch, after a clean close or with only an empty active segment past
// the recovery point, syncs neither the checkpoint nor the directory: a
// node of many partitions restarts without an fsync for each.
func TestOpenSyncsNoCheckpointWithNothingToRecover(t *testing.T) {
	for _, roll := range []bool{false, true} {
		t.Run(fmt.Sprintf("empty active segment=%v", roll), func(t *testing.T) {
			_, rec, opts, l := recordedLog(t)
			appendOfEpoch(t, l, 1, true)
			if roll {
				require.NoError(t, l.Roll())
			}
			require.NoError(t, l.Close())

			rec.take()
			o := opts
			o.RecoveryPoint = 10
			l = openLog(t, rec, "/p", o)
			for _, s := range rec.take() {
				require.NotContains(t, []string{"sync " + epochCheckpointOfP, "syncdir /p"}, s)
			}
			require.Equal(t, epochs(0, 0, 1, 5), l.Epochs())
			require.NoError(t, l.Close())
		})
	}
}
