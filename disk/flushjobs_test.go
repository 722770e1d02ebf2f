package disk

import (
	"fmt"
	"path"
	"testing"

	"github.com/stretchr/testify/require"
)

// startFlushes appends count records to each of n logs on fsys and starts
// a FlushJob on each.
func startFlushes(t *testing.T, fsys FS, root string, opts Options, n, count int) ([]*Log, []*FlushJob) {
	t.Helper()
	logs := make([]*Log, n)
	jobs := make([]*FlushJob, n)
	for i := range logs {
		logs[i] = openLog(t, fsys, path.Join(root, fmt.Sprintf("t-%d", i)), opts)
		appendBatch(t, logs[i], makeBatch(t, count, 100, 0))
		j, err := logs[i].StartFlush()
		require.NoError(t, err)
		jobs[i] = j
	}
	return logs, jobs
}

// TestRunFlushJobs: the jobs of many logs run as one make everything each
// covered durable, whether the file system is synced at once or, when that
// fails, file by file; an error of one file's writeback is that job's
// alone, and fails its log only.
func TestRunFlushJobs(t *testing.T) {
	for _, tc := range []struct {
		name string
		// injectAt is the eligible operation of RunFlushJobs that fails: 0
		// none, 1 the file system's sync, 2 the first job's check.
		injectAt int64
		failed   []bool
	}{
		{"file system synced at once", 0, []bool{false, false, false, false}},
		{"its sync fails, each file synced", 1, []bool{false, false, false, false}},
		{"a file's own writeback failed", 2, []bool{true, false, false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newClock()
			m := NewMemFS()
			e := NewErrorFS(m)
			e.InjectWritesOnly(true)
			opts := testOptions(clock, nil)
			logs, jobs := startFlushes(t, e, "/data", opts, len(tc.failed), 3)
			e.InjectAt(tc.injectAt)
			errs := RunFlushJobs(jobs)
			for i, l := range logs {
				ferr := l.FinishFlush(jobs[i], errs[i])
				if tc.failed[i] {
					require.ErrorIs(t, errs[i], ErrInjected, "job %d", i)
					require.Error(t, ferr, "a failed sync fails the log")
					continue
				}
				require.NoError(t, errs[i], "job %d", i)
				require.NoError(t, ferr)
				require.Equal(t, int64(3), l.RecoveryPoint())
			}
			m.Crash()
			for i := range logs {
				if tc.failed[i] {
					continue
				}
				l := openLog(t, m, path.Join("/data", fmt.Sprintf("t-%d", i)), opts)
				require.Equal(t, int64(3), l.EndOffset(), "log %d keeps what its job covered", i)
				requireReadable(t, l)
			}
		})
	}
}

// TestRunFlushJobsOnTheOS runs the jobs of logs whose descriptors a small
// file cache closes and reopens: the file system is synced at once where
// the kernel reports its errors, and every file's bytes count as synced,
// so that the cache may close their descriptors again.
func TestRunFlushJobsOnTheOS(t *testing.T) {
	cache := NewFileCache(4)
	opts := testOptions(newClock(), nil)
	opts.Files = cache
	logs, jobs := startFlushes(t, OS, t.TempDir(), opts, 16, 5)
	// The last job's file is open, the others' closed by the cache
	// unless their unsynced bytes keep them open.
	for i, err := range RunFlushJobs(jobs) {
		require.NoError(t, err)
		require.NoError(t, logs[i].FinishFlush(jobs[i], nil))
		require.Equal(t, int64(5), logs[i].RecoveryPoint())
	}
	require.Zero(t, cache.Stats().Unsynced, "the syncs counted for every file")
	for _, l := range logs {
		require.NoError(t, l.Close())
	}
}

// TestRunFlushJobsCoversTheEpochCheckpoint: a job that carries a
// leader-epoch checkpoint an append wrote without a sync leaves it durable
// when run with the others, with no partition epoch to recover it from;
// a failed writeback of the checkpoint is the job's error.
func TestRunFlushJobsCoversTheEpochCheckpoint(t *testing.T) {
	for _, failCheckpoint := range []bool{false, true} {
		t.Run(fmt.Sprintf("failed=%v", failCheckpoint), func(t *testing.T) {
			m := NewMemFS()
			e := NewErrorFS(m)
			e.InjectWritesOnly(true)
			opts := testOptions(newClock(), nil)
			l := openLog(t, e, "/p", opts)
			appendOfEpoch(t, l, 0, true)
			require.NoError(t, l.Sync())
			appendOfEpoch(t, l, 3, true)
			require.True(t, l.epochsUnsynced)
			j, err := l.StartFlush()
			require.NoError(t, err)
			if failCheckpoint {
				e.InjectAt(2) // after the file system's sync, the checkpoint's check
			}
			errs := RunFlushJobs([]*FlushJob{j})
			if failCheckpoint {
				require.ErrorIs(t, errs[0], ErrInjected)
				require.ErrorContains(t, errs[0], LeaderEpochCheckpointFile)
				require.Error(t, l.FinishFlush(j, errs[0]))
				return
			}
			require.NoError(t, errs[0])
			require.NoError(t, l.FinishFlush(j, nil))
			require.False(t, l.epochsUnsynced, "the checkpoint is durable")

			l = requireEpochSurvivesCrash(t, m, opts)
			require.NoError(t, l.Close())
		})
	}
}
