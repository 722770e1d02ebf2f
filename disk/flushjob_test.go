package disk

import (
	"path"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFlushJobMakesDurableWhatWasAppendedBeforeIt: a job covers the offsets
// appended before StartFlush, raises the recovery point only when finished,
// and what it covers survives a crash.
func TestFlushJobMakesDurableWhatWasAppendedBeforeIt(t *testing.T) {
	clock := newClock()
	m := NewMemFS()
	l := openLog(t, m, "/p", testOptions(clock, nil))
	appendBatch(t, l, makeBatch(t, 3, 10, 0))

	j, err := l.StartFlush()
	require.NoError(t, err)
	require.Equal(t, int64(3), j.UpTo())
	// Appends go on while the job is in flight; they are not covered.
	appendBatch(t, l, makeBatch(t, 2, 10, 0))
	require.Equal(t, int64(0), l.RecoveryPoint(), "nothing is durable before the job is finished")
	require.NoError(t, j.Run())
	require.NoError(t, l.FinishFlush(j, nil))
	require.Equal(t, int64(3), l.RecoveryPoint())

	// The next job covers the rest.
	j, err = l.StartFlush()
	require.NoError(t, err)
	require.Equal(t, int64(5), j.UpTo())
	require.NoError(t, j.Run())
	require.NoError(t, l.FinishFlush(j, nil))
	require.Equal(t, int64(5), l.RecoveryPoint())

	m.Crash()
	l = openLog(t, m, "/p", testOptions(clock, nil))
	require.Equal(t, int64(5), l.EndOffset(), "everything a finished job covered survives a crash")
	requireReadable(t, l)
}

// TestFlushJobAcrossARoll: a segment rolled while a job is in flight is
// still synced by it, and the next StartFlush syncs the sealed segment's
// indexes and the new directory entries, so a crash keeps all of it.
func TestFlushJobAcrossARoll(t *testing.T) {
	clock := newClock()
	m := NewMemFS()
	opts := testOptions(clock, func(c *Config) { c.SegmentBytes = 4 << 10 })
	l := openLog(t, m, "/p", opts)
	appendBatch(t, l, makeBatch(t, 2, 1000, 0))

	j, err := l.StartFlush()
	require.NoError(t, err)
	for range 6 { // several rolls while the job is in flight
		appendBatch(t, l, makeBatch(t, 2, 1000, 0))
	}
	require.Greater(t, len(l.Segments()), 2)
	require.NoError(t, j.Run())
	require.NoError(t, l.FinishFlush(j, nil))
	require.Equal(t, int64(2), l.RecoveryPoint())

	j, err = l.StartFlush()
	require.NoError(t, err)
	require.NoError(t, j.Run())
	require.NoError(t, l.FinishFlush(j, nil))
	require.Equal(t, int64(14), l.RecoveryPoint())
	segments := l.Segments()

	m.Crash()
	l = openLog(t, m, "/p", opts)
	require.Equal(t, int64(14), l.EndOffset())
	require.Equal(t, segments, l.Segments(), "every segment and its files survive")
	requireReadable(t, l)
}

// TestFlushJobRefusesRemovalsWhileInFlight: nothing that closes or removes
// a segment file runs while a job may be syncing one, and a refused call
// changes nothing.
func TestFlushJobRefusesRemovalsWhileInFlight(t *testing.T) {
	clock := newClock()
	opts := testOptions(clock, func(c *Config) { c.SegmentBytes = 4 << 10; c.RetentionBytes = 1 })
	l := openLog(t, NewMemFS(), "/p", opts)
	for range 5 {
		appendBatch(t, l, makeBatch(t, 2, 1000, 0))
	}
	before := l.Segments()
	j, err := l.StartFlush()
	require.NoError(t, err)

	refused := map[string]func() error{
		"StartFlush":     func() error { _, err := l.StartFlush(); return err },
		"Close":          l.Close,
		"Delete":         l.Delete,
		"TruncateTo":     func() error { return l.TruncateTo(1) },
		"DeleteBefore":   func() error { return l.DeleteBefore(4) },
		"ApplyRetention": func() error { _, err := l.ApplyRetention(); return err },
	}
	for name, call := range refused {
		t.Run(name, func(t *testing.T) {
			require.ErrorIs(t, call(), ErrFlushInFlight)
			require.Equal(t, before, l.Segments())
			require.Equal(t, int64(0), l.StartOffset())
		})
	}
	// Appends, rolls and a synchronous Flush go on.
	appendBatch(t, l, makeBatch(t, 2, 1000, 0))
	require.NoError(t, l.Roll())
	require.NoError(t, l.Sync())
	require.Equal(t, int64(12), l.RecoveryPoint())

	require.NoError(t, j.Run())
	require.NoError(t, l.FinishFlush(j, nil))
	require.Equal(t, int64(12), l.RecoveryPoint(), "a job finished late never lowers the recovery point")
	n, err := l.ApplyRetention()
	require.NoError(t, err)
	require.Positive(t, n)
	require.NoError(t, l.Close())
}

// TestFlushJobFailure: a failed fsync fails the log as a failed Flush does
// and leaves the recovery point where it was.
func TestFlushJobFailure(t *testing.T) {
	clock := newClock()
	e := NewErrorFS(NewMemFS())
	l := openLog(t, e, "/p", testOptions(clock, nil))
	appendBatch(t, l, makeBatch(t, 3, 10, 0))
	j, err := l.StartFlush()
	require.NoError(t, err)
	e.InjectAt(1)
	runErr := j.Run()
	require.ErrorIs(t, runErr, ErrInjected)
	require.ErrorIs(t, l.FinishFlush(j, runErr), ErrInjected)
	require.Equal(t, int64(0), l.RecoveryPoint())
	_, err = l.Append(makeBatch(t, 1, 10, 0))
	require.ErrorIs(t, err, ErrInjected, "the log is failed")

	other := openLog(t, NewMemFS(), "/q", testOptions(clock, nil))
	require.Error(t, other.FinishFlush(j, nil), "a job is finished only by its own log")
}

// TestFlushJobRunsBesideAppends runs jobs on another goroutine while the
// owner appends to real files, as a partition does: run with -race.
func TestFlushJobRunsBesideAppends(t *testing.T) {
	clock := newClock()
	dir := path.Join(t.TempDir(), "topic-0")
	opts := testOptions(clock, func(c *Config) { c.SegmentBytes = 64 << 10 })
	l := openLog(t, OS, dir, opts)
	batch := makeBatch(t, 4, 1000, 0)
	done := make(chan error, 1)
	var j *FlushJob
	for i := range 200 {
		appendBatch(t, l, batch)
		if j == nil {
			var err error
			j, err = l.StartFlush()
			require.NoError(t, err)
			go func(j *FlushJob) { done <- j.Run() }(j)
		}
		select {
		case err := <-done:
			require.NoError(t, l.FinishFlush(j, err))
			j = nil
		default:
		}
		require.LessOrEqual(t, l.RecoveryPoint(), int64(4*(i+1)))
	}
	if j != nil {
		require.NoError(t, l.FinishFlush(j, <-done))
	}
	require.NoError(t, l.Close())
	l = openLog(t, OS, dir, opts)
	require.Equal(t, int64(800), l.EndOffset())
	requireReadable(t, l)
	require.NoError(t, l.Close())
}

// TestFlushJobLeavesFewIndexEntriesInMemory: a group commit writes the
// active segment's index entries only once groupCommitIndexEntries wait;
// a kill with fewer in memory loses nothing, recovery reading the batch
// headers the entries would have pointed to.
func TestFlushJobLeavesFewIndexEntriesInMemory(t *testing.T) {
	clock := newClock()
	m := NewMemFS()
	opts := testOptions(clock, func(c *Config) { c.IndexIntervalBytes = 0 })
	l := openLog(t, m, "/p", opts)
	flushJob := func() {
		t.Helper()
		j, err := l.StartFlush()
		require.NoError(t, err)
		require.NoError(t, l.FinishFlush(j, j.Run()))
	}
	indexBytes := func() int { // of the active segment
		t.Helper()
		segments := l.Segments()
		b, err := m.ReadFile(strings.TrimSuffix(segments[len(segments)-1].Path, ".log") + ".index")
		require.NoError(t, err)
		return len(b)
	}
	for i := range groupCommitIndexEntries - 1 {
		appendBatch(t, l, makeBatch(t, 1, 50, int64(i)))
	}
	flushJob()
	require.Zero(t, indexBytes(), "the entries wait in memory")

	// A kill: the log is opened again without being closed, and rolls.
	opts.RecoveryPoint = l.RecoveryPoint()
	l = openLog(t, m, "/p", opts)
	require.Equal(t, int64(groupCommitIndexEntries-1), l.EndOffset())
	requireReadable(t, l)

	// The entries of the batches recovery read are not rebuilt: a lookup
	// there reads their headers from the entry before them.
	for i := range groupCommitIndexEntries - 1 {
		appendBatch(t, l, makeBatch(t, 1, 50, int64(100+i)))
	}
	flushJob()
	require.Zero(t, indexBytes())
	appendBatch(t, l, makeBatch(t, 1, 50, 200))
	flushJob()
	require.Equal(t, groupCommitIndexEntries*8, indexBytes(), "written once enough wait")
	requireReadable(t, l)
	require.NoError(t, l.Close())
}
