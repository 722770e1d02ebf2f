package disk

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/wire"
)

// epochs builds a cache from (epoch, start offset) pairs.
func epochs(pairs ...int64) []EpochEntry {
	entries := []EpochEntry{}
	for i := 0; i < len(pairs); i += 2 {
		entries = append(entries, EpochEntry{Epoch: int32(pairs[i]), StartOffset: pairs[i+1]})
	}
	return entries
}

// The cases of Kafka's LeaderEpochFileCacheTest, assigned in order.
func TestAssignEpochRules(t *testing.T) {
	tests := []struct {
		name    string
		assigns []EpochEntry
		want    []EpochEntry
	}{
		{"first", epochs(2, 10), epochs(2, 10)},
		{"start of an epoch never moves forward", epochs(2, 6, 2, 10), epochs(2, 6)},
		{"same epoch, same start", epochs(2, 6, 2, 6), epochs(2, 6)},
		{"next epoch at the same offset replaces an empty one", epochs(2, 9, 3, 9), epochs(3, 9)},
		{"start offsets increase", epochs(2, 6, 3, 5), epochs(3, 5)},
		{"matching epoch at an earlier offset truncates", epochs(5, 11, 6, 12, 7, 13, 7, 12), epochs(5, 11, 7, 12)},
		{"leaders change many times", epochs(0, 0, 1, 0, 2, 5), epochs(1, 0, 2, 5)},
		{"follower receives many batches", epochs(0, 0, 0, 1, 0, 2, 1, 3, 1, 4, 1, 5, 2, 6, 2, 7, 2, 8), epochs(0, 0, 1, 3, 2, 6)},
		{"epochs that do not start from zero", epochs(2, 6), epochs(2, 6)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var entries []EpochEntry
			for _, e := range tt.assigns {
				before := append([]EpochEntry(nil), entries...)
				got, changed := assignEpoch(entries, e)
				require.Equal(t, before, entries, "assign %v: not modified in place", e)
				require.Equal(t, !slices.Equal(before, got), changed, "assign %v", e)
				entries = got
				require.NoError(t, checkEpochs(entries))
			}
			require.Equal(t, tt.want, entries)
		})
	}
}

// EndOffsetForEpoch answers as Kafka's LeaderEpochFileCache.endOffsetFor.
func TestEndOffsetForEpochRules(t *testing.T) {
	const undefined = NoLeaderEpoch
	tests := []struct {
		name      string
		entries   []EpochEntry
		logEnd    int64
		epoch     int32
		wantEpoch int32
		wantEnd   int64
	}{
		{"empty cache", nil, 0, 0, undefined, -1},
		{"empty cache, undefined epoch", nil, 73, undefined, undefined, -1},
		{"empty cache, any epoch", nil, 0, 7, undefined, -1},
		{"latest epoch gives the log end", epochs(2, 10), 11, 2, 2, 11},
		{"undefined epoch", epochs(2, 11, 3, 12), 0, undefined, undefined, -1},
		{"negative epoch", epochs(2, 11, 3, 12), 0, -5, undefined, -1},
		{"below the first epoch", epochs(5, 11, 6, 12, 7, 13), 0, 4, 4, 11},
		{"next epoch's start", epochs(1, 11, 2, 13, 3, 15), 17, 2, 2, 15},
		{"no exact epoch: the one below", epochs(0, 10, 2, 13, 4, 17), 0, 1, 0, 13},
		{"exact epoch", epochs(0, 10, 2, 13, 4, 17), 0, 2, 2, 17},
		{"no exact epoch, the one below, again", epochs(0, 10, 2, 13, 4, 17), 0, 3, 2, 17},
		{"past the latest", epochs(2, 100), 100, 3, undefined, -1},
		{"an epoch with no batch", epochs(0, 0, 1, 0), 5, 0, 0, 0},
		{"epoch 2 of (0,0) (1,5) (3,10)", epochs(0, 0, 1, 5, 3, 10), 15, 2, 1, 10},
		{"epoch 3 of (0,0) (1,5) (3,10)", epochs(0, 0, 1, 5, 3, 10), 15, 3, 3, 15},
		{"epoch 4 of (0,0) (1,5) (3,10)", epochs(0, 0, 1, 5, 3, 10), 15, 4, undefined, -1},
		{"epoch 0 of (0,0) (1,5) (3,10)", epochs(0, 0, 1, 5, 3, 10), 15, 0, 0, 5},
		{"largest epoch", epochs(0, 0, 2147483647, 5), 9, 2147483647, 2147483647, 9},
		{"below the largest epoch", epochs(0, 0, 2147483647, 5), 9, 2147483646, 0, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			epoch, end := endOffsetForEpoch(tt.entries, tt.epoch, tt.logEnd)
			require.Equal(t, tt.wantEpoch, epoch)
			require.Equal(t, tt.wantEnd, end)
		})
	}
}

// Kafka's truncateFromEnd and truncateFromStart cases.
func TestTruncateEpochRules(t *testing.T) {
	entries := epochs(2, 6, 3, 8, 4, 11)
	tests := []struct {
		name    string
		apply   func([]EpochEntry) ([]EpochEntry, bool)
		want    []EpochEntry
		changed bool
	}{
		{"end on an epoch boundary", func(e []EpochEntry) ([]EpochEntry, bool) { return dropEpochsFrom(e, 8) }, epochs(2, 6), true},
		{"end between boundaries", func(e []EpochEntry) ([]EpochEntry, bool) { return dropEpochsFrom(e, 9) }, epochs(2, 6, 3, 8), true},
		{"end past the latest", func(e []EpochEntry) ([]EpochEntry, bool) { return dropEpochsFrom(e, 12) }, entries, false},
		{"end at the first", func(e []EpochEntry) ([]EpochEntry, bool) { return dropEpochsFrom(e, 6) }, epochs(), true},
		{"start on a boundary", func(e []EpochEntry) ([]EpochEntry, bool) { return startEpochsAt(e, 8) }, epochs(3, 8, 4, 11), true},
		{"start too early", func(e []EpochEntry) ([]EpochEntry, bool) { return startEpochsAt(e, 1) }, entries, false},
		{"start at the first", func(e []EpochEntry) ([]EpochEntry, bool) { return startEpochsAt(e, 6) }, entries, false},
		{"start at the latest", func(e []EpochEntry) ([]EpochEntry, bool) { return startEpochsAt(e, 11) }, epochs(4, 11), true},
		{"start between boundaries", func(e []EpochEntry) ([]EpochEntry, bool) { return startEpochsAt(e, 9) }, epochs(3, 9, 4, 11), true},
		{"start inside the first", func(e []EpochEntry) ([]EpochEntry, bool) { return startEpochsAt(e, 7) }, epochs(2, 7, 3, 8, 4, 11), true},
		{"start past the latest", func(e []EpochEntry) ([]EpochEntry, bool) { return startEpochsAt(e, 15) }, epochs(4, 15), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := tt.apply(entries)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.changed, changed)
			require.Equal(t, epochs(2, 6, 3, 8, 4, 11), entries, "not modified in place")
		})
	}
	got, changed := dropEpochsFrom(nil, 7)
	require.Empty(t, got)
	require.False(t, changed)
	got, changed = startEpochsAt(nil, 7)
	require.Empty(t, got)
	require.False(t, changed)
	got, _ = startEpochsAt(epochs(0, 0, 1, 7, 2, 10), 5)
	require.Equal(t, epochs(0, 5, 1, 7, 2, 10), got)
}

// leaderBatch is a batch of count records as a leader sends it: with its
// leader epoch and base offset set.
func leaderBatch(t testing.TB, count int, epoch int32, base int64) []byte {
	t.Helper()
	b := makeBatch(t, count, 30, 1000+base)
	wire.SetLeaderEpoch(b, epoch)
	wire.SetBaseOffset(b, base)
	return b
}

// appendFollower appends b with AppendAsFollower and checks that it went
// in unchanged, at its own offsets.
func appendFollower(t testing.TB, l *Log, b []byte) AppendResult {
	t.Helper()
	h, err := wire.Validate(b)
	require.NoError(t, err)
	sent := bytes.Clone(b)
	res, err := l.AppendAsFollower(b, h)
	require.NoError(t, err)
	require.Equal(t, h.BaseOffset, res.BaseOffset)
	require.Equal(t, h.LastOffset(), res.LastOffset)
	require.True(t, bytes.Equal(sent, b), "the batch is not rewritten")
	return res
}

// followerRun is a leader's log to replicate: batches of 5 records with
// epochs -1, 0, 0, 2, 2, 2, 5, 5, and the cache they give.
func followerRun(t testing.TB) ([][]byte, []EpochEntry) {
	var batches [][]byte
	var base int64
	for _, epoch := range []int32{-1, 0, 0, 2, 2, 2, 5, 5} {
		batches = append(batches, leaderBatch(t, 5, epoch, base))
		base += 5
	}
	return batches, epochs(0, 5, 2, 15, 5, 30)
}

// requireCheckpoint checks that the leader-epoch checkpoint on fs holds
// what the log's cache does.
func requireCheckpoint(t testing.TB, fs FS, l *Log) {
	t.Helper()
	b, err := ReadFile(fs, path.Join(l.Dir(), LeaderEpochCheckpointFile))
	require.NoError(t, err)
	got, err := ParseEpochCheckpoint(b)
	require.NoError(t, err)
	if len(got) == 0 {
		require.Empty(t, l.Epochs())
		return
	}
	require.Equal(t, l.Epochs(), got)
}

// requireNoCheckpoint checks that the log has no leader-epoch checkpoint.
func requireNoCheckpoint(t testing.TB, fs FS, dir string) {
	t.Helper()
	_, err := fs.Stat(path.Join(dir, LeaderEpochCheckpointFile))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestAppendAsFollower(t *testing.T) {
	for _, fc := range fsCases {
		t.Run(fc.name, func(t *testing.T) {
			fs, dir := fc.new(t)
			opts := testOptions(newClock(), func(c *Config) { c.SegmentBytes = 700; c.IndexIntervalBytes = 100 })
			l := openLog(t, fs, dir, opts)
			batches, want := followerRun(t)
			for i, b := range batches {
				appendFollower(t, l, b)
				if i == 0 {
					requireNoCheckpoint(t, fs, dir)
				}
			}
			require.Greater(t, len(l.Segments()), 2, "the run rolls")
			got, err := l.Read(0, 1<<20, nil)
			require.NoError(t, err)
			require.True(t, bytes.Equal(bytes.Join(batches, nil), got), "read back byte for byte")
			requireReadable(t, l)
			require.Equal(t, want, l.Epochs())
			require.Equal(t, int32(5), l.LatestEpoch())
			requireCheckpoint(t, fs, l)

			// A batch that does not start at the end changes nothing.
			for _, base := range []int64{l.EndOffset() + 1, l.EndOffset() - 1, 0} {
				b := leaderBatch(t, 2, 7, base)
				h, err := wire.Validate(b)
				require.NoError(t, err)
				_, err = l.AppendAsFollower(b, h)
				require.ErrorIs(t, err, ErrOffsetMismatch, "base %d", base)
				require.Equal(t, int64(40), l.EndOffset())
				require.Equal(t, want, l.Epochs(), "no epoch assigned")
			}
			// The follower's epoch is the leader's: a leader's append at
			// epoch 5 goes in, one past it does not.
			appendBatch(t, l, leaderBatch(t, 1, 5, 0))
			_, err = l.Append(leaderBatch(t, 1, 6, 0))
			require.ErrorIs(t, err, wire.ErrLeaderEpoch)

			require.NoError(t, l.Close())
			for _, rp := range []int64{41, 0} {
				o := opts
				o.RecoveryPoint = rp
				l = openLog(t, fs, dir, o)
				require.Equal(t, want, l.Epochs(), "recovery point %d", rp)
				require.Equal(t, int64(41), l.EndOffset())
				require.NoError(t, l.Close())
			}
			l = openLog(t, fs, dir, opts)
			require.NoError(t, l.Delete())
			_, err = fs.Stat(path.Join(dir, LeaderEpochCheckpointFile))
			require.ErrorIs(t, err, os.ErrNotExist, "the checkpoint goes with the directory")
		})
	}
}

// The leader's appends assign the epoch of a batch above the latest, up to
// the partition's.
func TestAppendAssignsEpoch(t *testing.T) {
	fs := NewMemFS()
	opts := testOptions(newClock(), nil)
	opts.LeaderEpoch = 3
	l := openLog(t, fs, "/p", opts)
	appendBatch(t, l, leaderBatch(t, 2, NoLeaderEpoch, 0))
	require.Empty(t, l.Epochs())
	requireNoCheckpoint(t, fs, "/p")
	for _, tt := range []struct {
		epoch int32
		want  []EpochEntry
	}{
		{1, epochs(1, 2)},
		{1, epochs(1, 2)},
		{3, epochs(1, 2, 3, 6)},
		{2, epochs(1, 2, 3, 6)},
		{NoLeaderEpoch, epochs(1, 2, 3, 6)},
		{3, epochs(1, 2, 3, 6)},
	} {
		appendBatch(t, l, leaderBatch(t, 2, tt.epoch, 999))
		require.Equal(t, tt.want, l.Epochs(), "after a batch of epoch %d", tt.epoch)
		requireCheckpoint(t, fs, l)
	}
	_, err := l.Append(leaderBatch(t, 2, 4, 0))
	require.ErrorIs(t, err, wire.ErrLeaderEpoch)
	require.Equal(t, epochs(1, 2, 3, 6), l.Epochs(), "a refused batch assigns nothing")
	require.NoError(t, l.AssignEpoch(4, l.EndOffset()))
	appendBatch(t, l, leaderBatch(t, 2, 4, 0))
	require.Equal(t, epochs(1, 2, 3, 6, 4, 14), l.Epochs())
	requireCheckpoint(t, fs, l)
}

func TestAssignEpoch(t *testing.T) {
	mem := NewMemFS()
	efs := NewErrorFS(mem)
	l := openLog(t, efs, "/p", testOptions(newClock(), nil))
	for i := 0; i < 3; i++ {
		appendBatch(t, l, leaderBatch(t, 2, NoLeaderEpoch, 0))
	}
	require.Equal(t, NoLeaderEpoch, l.LatestEpoch())
	_, err := l.Append(leaderBatch(t, 1, 2, 0))
	require.ErrorIs(t, err, wire.ErrLeaderEpoch)

	require.NoError(t, l.AssignEpoch(2, 6))
	require.Equal(t, epochs(2, 6), l.Epochs())
	require.Equal(t, int32(2), l.LatestEpoch())
	requireCheckpoint(t, mem, l)
	appendBatch(t, l, leaderBatch(t, 1, 2, 0))

	// Changing nothing writes nothing.
	ops := efs.Ops()
	require.NoError(t, l.AssignEpoch(2, 6))
	require.NoError(t, l.AssignEpoch(2, 7), "an epoch's start never moves forward")
	require.Equal(t, ops, efs.Ops())
	require.Equal(t, epochs(2, 6), l.Epochs())

	for _, tt := range []struct {
		epoch int32
		start int64
		err   error
	}{
		{1, 7, ErrInvalidEpoch},
		{-1, 7, ErrInvalidEpoch},
		{3, -1, ErrInvalidEpoch},
		{3, 8, ErrOffsetOutOfRange},
	} {
		err := l.AssignEpoch(tt.epoch, tt.start)
		require.ErrorIs(t, err, tt.err, "epoch %d at %d", tt.epoch, tt.start)
		require.Equal(t, epochs(2, 6), l.Epochs())
		require.Equal(t, ops, efs.Ops(), "epoch %d at %d: nothing written", tt.epoch, tt.start)
	}
	require.NoError(t, l.failed)

	// An epoch with no batch yet, at the end; the next at the same offset
	// replaces it.
	require.NoError(t, l.AssignEpoch(3, 7))
	require.NoError(t, l.AssignEpoch(4, 7))
	require.Equal(t, epochs(2, 6, 4, 7), l.Epochs())
	requireCheckpoint(t, mem, l)

	// SetLeaderEpoch raises the partition's epoch, never lowers it, and
	// assigns nothing.
	l.SetLeaderEpoch(9)
	l.SetLeaderEpoch(5)
	ops = efs.Ops()
	appendBatch(t, l, leaderBatch(t, 1, 9, 0))
	require.Greater(t, efs.Ops(), ops)
	require.Equal(t, epochs(2, 6, 9, 7), l.Epochs(), "the epoch with no batch is replaced")
	require.NoError(t, l.Close())
	require.ErrorIs(t, l.AssignEpoch(10, 8), ErrClosed)
	require.ErrorIs(t, l.SetEpochs(nil), ErrClosed)

	l = openLog(t, mem, "/p", testOptions(newClock(), nil))
	require.Equal(t, epochs(2, 6, 9, 7), l.Epochs(), "the cache survives a restart")
	appendBatch(t, l, leaderBatch(t, 1, 9, 0))
	_, err = l.Append(leaderBatch(t, 1, 10, 0))
	require.ErrorIs(t, err, wire.ErrLeaderEpoch, "the checkpoint's latest epoch is the partition's")
	epoch, end := l.EndOffsetForEpoch(4)
	require.Equal(t, int32(2), epoch)
	require.Equal(t, int64(7), end)
	epoch, end = l.EndOffsetForEpoch(9)
	require.Equal(t, int32(9), epoch)
	require.Equal(t, l.EndOffset(), end)
}

func TestSetEpochs(t *testing.T) {
	fs := NewMemFS()
	l := openLog(t, fs, "/p", testOptions(newClock(), nil))
	require.NoError(t, l.SetEpochs(nil))
	requireNoCheckpoint(t, fs, "/p")
	for _, b := range []int32{0, 0, 2} {
		appendFollower(t, l, leaderBatch(t, 5, b, l.EndOffset()))
	}
	for _, bad := range [][]EpochEntry{
		epochs(0, 0, 0, 5),
		epochs(2, 0, 1, 5),
		epochs(0, 5, 1, 4),
		epochs(-1, 0),
		epochs(0, 0, 1, 16),
		epochs(0, 0, 1, 10),
	} {
		err := l.SetEpochs(bad)
		require.Error(t, err, "%v", bad)
		require.Equal(t, epochs(0, 0, 2, 10), l.Epochs())
	}
	require.ErrorIs(t, l.SetEpochs(epochs(0, 0, 1, 16)), ErrOffsetOutOfRange)
	require.ErrorIs(t, l.SetEpochs(epochs(0, 0, 1, 10)), ErrInvalidEpoch, "below the latest epoch")
	want := epochs(0, 0, 1, 7, 2, 10, 6, 15)
	require.NoError(t, l.SetEpochs(want))
	want[0].Epoch = 99
	require.Equal(t, epochs(0, 0, 1, 7, 2, 10, 6, 15), l.Epochs(), "a copy is kept")
	requireCheckpoint(t, fs, l)
	appendBatch(t, l, leaderBatch(t, 1, 6, 0))
	require.NoError(t, l.failed)
}

func TestTruncateToDropsEpochs(t *testing.T) {
	tests := []struct {
		offset int64
		want   []EpochEntry
	}{
		{40, epochs(0, 5, 2, 15, 5, 30)},
		{35, epochs(0, 5, 2, 15, 5, 30)},
		{33, epochs(0, 5, 2, 15)}, // the first batch of epoch 5 goes whole
		{31, epochs(0, 5, 2, 15)},
		{30, epochs(0, 5, 2, 15)},
		{20, epochs(0, 5, 2, 15)},
		{16, epochs(0, 5)},
		{15, epochs(0, 5)},
		{5, epochs()},
		{0, epochs()},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.offset), func(t *testing.T) {
			fs := NewMemFS()
			opts := testOptions(newClock(), func(c *Config) { c.SegmentBytes = 700 })
			l := openLog(t, fs, "/p", opts)
			batches, _ := followerRun(t)
			for _, b := range batches {
				appendFollower(t, l, b)
			}
			require.NoError(t, l.TruncateTo(tt.offset))
			require.Equal(t, tt.want, l.Epochs())
			requireCheckpoint(t, fs, l)
			require.NoError(t, l.Close())
			l = openLog(t, fs, "/p", opts)
			require.Equal(t, tt.want, l.Epochs())
		})
	}
}

func TestStartOffsetMovesEpochs(t *testing.T) {
	build := func(t *testing.T) (*MemFS, Options, *Log) {
		fs := NewMemFS()
		opts := testOptions(newClock(), func(c *Config) {
			c.SegmentBytes = 500 // two batches a segment
			c.RetentionMs = -1
		})
		l := openLog(t, fs, "/p", opts)
		batches, _ := followerRun(t)
		for _, b := range batches {
			appendFollower(t, l, b)
		}
		require.Len(t, l.Segments(), 4)
		return fs, opts, l
	}
	for _, tt := range []struct {
		offset int64
		want   []EpochEntry
	}{
		{0, epochs(0, 5, 2, 15, 5, 30)},
		{5, epochs(0, 5, 2, 15, 5, 30)},
		{7, epochs(0, 7, 2, 15, 5, 30)},
		{15, epochs(2, 15, 5, 30)},
		{33, epochs(5, 33)},
		{40, epochs(5, 40)},
	} {
		t.Run(fmt.Sprintf("delete before %d", tt.offset), func(t *testing.T) {
			fs, opts, l := build(t)
			require.NoError(t, l.DeleteBefore(tt.offset))
			require.Equal(t, tt.want, l.Epochs())
			requireCheckpoint(t, fs, l)
			require.NoError(t, l.Close())
			opts.LogStartOffset = tt.offset
			l = openLog(t, fs, "/p", opts)
			require.Equal(t, tt.want, l.Epochs())
		})
	}
	t.Run("retention", func(t *testing.T) {
		fs, opts, l := build(t)
		l.config.RetentionBytes = l.Size() - l.Segments()[0].Size - 1
		n, err := l.ApplyRetention()
		require.NoError(t, err)
		require.Equal(t, 2, n)
		require.Equal(t, int64(20), l.StartOffset())
		require.Equal(t, epochs(2, 20, 5, 30), l.Epochs())
		requireCheckpoint(t, fs, l)
		require.NoError(t, l.Close())
		l = openLog(t, fs, "/p", opts)
		require.Equal(t, int64(20), l.StartOffset(), "the segments are gone")
		require.Equal(t, epochs(2, 20, 5, 30), l.Epochs())
	})
	t.Run("open at a later log start offset", func(t *testing.T) {
		fs, opts, l := build(t)
		require.NoError(t, l.Close())
		opts.LogStartOffset = 17
		opts.RecoveryPoint = 40
		l = openLog(t, fs, "/p", opts)
		require.Equal(t, epochs(2, 17, 5, 30), l.Epochs())
		requireCheckpoint(t, fs, l)
	})
	t.Run("open past the end keeps the latest epoch at the new start", func(t *testing.T) {
		fs, opts, l := build(t)
		require.NoError(t, l.Close())
		opts.LogStartOffset = 50
		l = openLog(t, fs, "/p", opts)
		require.Equal(t, int64(50), l.EndOffset())
		require.Equal(t, epochs(5, 50), l.Epochs())
		requireCheckpoint(t, fs, l)
	})
}

// requireEpochsMatchBatches checks the cache against the batches: it holds
// the first batch of each epoch above the previous one, from StartOffset
// on, and may end with one epoch that starts at EndOffset and holds none.
func requireEpochsMatchBatches(t testing.TB, l *Log, msg string) {
	t.Helper()
	var want []EpochEntry
	require.NoError(t, l.ScanHeaders(l.StartOffset(), func(h wire.Header) error {
		if h.LeaderEpoch > latestEpoch(want) {
			want = append(want, EpochEntry{Epoch: h.LeaderEpoch, StartOffset: max(h.BaseOffset, l.StartOffset())})
		}
		return nil
	}), msg)
	got := l.Epochs()
	if n := len(got); n > len(want) && got[n-1].StartOffset == l.EndOffset() {
		got = got[:n-1]
	}
	require.Equal(t, len(want), len(got), "%s: %v for batches starting %v", msg, l.Epochs(), want)
	for i := range want {
		require.Equal(t, want[i], got[i], "%s: %v for batches starting %v", msg, l.Epochs(), want)
	}
}

// requireNoBatchAboveCheckpoint checks the invariant recovery relies on,
// on the files of dir as they are (what a killed process leaves): no batch
// carries an epoch above the latest of the checkpoint, when there is one.
func requireNoBatchAboveCheckpoint(t testing.TB, mem *MemFS, dir, msg string) {
	t.Helper()
	requireNoBatchAboveCheckpointBelow(t, mem, dir, math.MaxInt64, msg)
}

// requireNoBatchAboveCheckpointBelow is requireNoBatchAboveCheckpoint for
// the batches that start below offset below only: after an OS crash, what
// a flush made durable, below the recovery point.
func requireNoBatchAboveCheckpointBelow(t testing.TB, mem *MemFS, dir string, below int64, msg string) {
	t.Helper()
	entries, found, err := readEpochCheckpoint(mem, dir)
	require.NoError(t, err, msg)
	if !found {
		return
	}
	names, err := mem.ReadDir(dir)
	require.NoError(t, err, msg)
	for _, name := range names {
		if path.Ext(name) != logExt {
			continue
		}
		b, err := mem.ReadFile(path.Join(dir, name))
		require.NoError(t, err, msg)
		var it wire.BatchIterator
		it.Reset(b)
		for it.Next() {
			h := it.Header()
			if h.BaseOffset >= below {
				break
			}
			require.LessOrEqual(t, h.LeaderEpoch, latestEpoch(entries), "%s: batch at %d of %s", msg, h.BaseOffset, name)
		}
	}
}

// TestEpochsAfterRecovery reopens a follower's log after its tail was
// torn at each batch, after a crash lost its unsynced batches, and after a
// clean close with an epoch that has no batch yet.
func TestEpochsAfterRecovery(t *testing.T) {
	batches, all := followerRun(t)
	size := int64(len(batches[0]))
	tests := []struct {
		name string
		// damage changes the files of the closed log at /p; it returns the
		// recovery point to open with.
		damage  func(t *testing.T, mem *MemFS) int64
		end     int64
		want    []EpochEntry
		written bool // whether recovery rewrote the checkpoint
	}{
		{"clean", func(*testing.T, *MemFS) int64 { return 40 }, 40, all, false},
		{"torn in the last batch", tearAt(7*size + size/2), 35, all, false},
		{"torn in the first batch of epoch 5", tearAt(6*size + 10), 30, epochs(0, 5, 2, 15), true},
		{"torn in a batch of epoch 2", tearAt(4*size + 70), 20, epochs(0, 5, 2, 15), true},
		{"torn in the first batch of epoch 0", tearAt(size + 1), 5, epochs(), true},
		{"torn in the first batch", tearAt(3), 0, epochs(), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := NewMemFS()
			opts := testOptions(newClock(), nil)
			l := openLog(t, mem, "/p", opts)
			for _, b := range batches {
				appendFollower(t, l, b)
			}
			require.NoError(t, l.Close())
			before, err := mem.ReadFile("/p/" + LeaderEpochCheckpointFile)
			require.NoError(t, err)
			opts.RecoveryPoint = tt.damage(t, mem)
			l = openLog(t, mem, "/p", opts)
			require.Equal(t, tt.end, l.EndOffset())
			require.Equal(t, tt.want, l.Epochs())
			requireCheckpoint(t, mem, l)
			after, err := mem.ReadFile("/p/" + LeaderEpochCheckpointFile)
			require.NoError(t, err)
			require.Equal(t, tt.written, !bytes.Equal(before, after))
			got, err := l.Read(0, 1<<20, nil)
			require.NoError(t, err)
			require.True(t, bytes.Equal(bytes.Join(batches[:tt.end/5], nil), got), "the batches before the tear are kept")
			requireEpochsMatchBatches(t, l, tt.name)
		})
	}

	t.Run("an epoch with no batch survives a clean restart", func(t *testing.T) {
		mem := NewMemFS()
		l := openLog(t, mem, "/p", testOptions(newClock(), nil))
		for _, b := range batches {
			appendFollower(t, l, b)
		}
		require.NoError(t, l.AssignEpoch(6, 40))
		require.NoError(t, l.Close())
		opts := testOptions(newClock(), nil)
		opts.RecoveryPoint = 40
		l = openLog(t, mem, "/p", opts)
		require.Equal(t, epochs(0, 5, 2, 15, 5, 30, 6, 40), l.Epochs())
		epoch, end := l.EndOffsetForEpoch(5)
		require.Equal(t, int32(5), epoch)
		require.Equal(t, int64(40), end)
	})
	t.Run("a crash that loses the unsynced batches drops the epochs past the end", func(t *testing.T) {
		mem := NewMemFS()
		opts := testOptions(newClock(), nil)
		l := openLog(t, mem, "/p", opts)
		for i, b := range batches {
			appendFollower(t, l, b)
			if i == 3 {
				require.NoError(t, l.Sync())
			}
		}
		mem.Crash()
		opts.RecoveryPoint = 20
		l = openLog(t, mem, "/p", opts)
		require.Equal(t, int64(20), l.EndOffset())
		require.Zero(t, l.Recovery().BytesTruncated, "nothing torn: the end is whole")
		require.Equal(t, epochs(0, 5, 2, 15), l.Epochs())
		requireCheckpoint(t, mem, l)
	})
}

// tearAt cuts the only segment of /p at byte size and returns recovery
// point 0, so that recovery validates the log and cuts the torn batch.
func tearAt(size int64) func(t *testing.T, mem *MemFS) int64 {
	return func(t *testing.T, mem *MemFS) int64 {
		truncateFile(t, mem, "/p/"+SegmentFileName(0, logExt), size)
		return 0
	}
}

// TestEpochCheckpointMissingOrDamaged opens a follower's log whose
// checkpoint was removed or damaged: the cache is rebuilt from the batch
// headers, every batch is kept, and a warning names the file.
func TestEpochCheckpointMissingOrDamaged(t *testing.T) {
	batches, want := followerRun(t)
	tests := []struct {
		name   string
		damage func(t *testing.T, mem *MemFS, file string)
		warns  bool
	}{
		{"missing", func(t *testing.T, mem *MemFS, file string) { require.NoError(t, mem.Remove(file)) }, false},
		{"junk", func(t *testing.T, mem *MemFS, file string) { require.NoError(t, mem.WriteFile(file, []byte("junk"))) }, true},
		{"torn", func(t *testing.T, mem *MemFS, file string) { truncateFile(t, mem, file, 9) }, true},
		{"out of order", func(t *testing.T, mem *MemFS, file string) {
			require.NoError(t, mem.WriteFile(file, []byte("0\n2\n2 15\n0 5\n")))
		}, true},
		{"empty file", func(t *testing.T, mem *MemFS, file string) { require.NoError(t, mem.WriteFile(file, nil)) }, true},
	}
	for _, tt := range tests {
		for _, rp := range []int64{40, 0} {
			t.Run(fmt.Sprintf("%s/recovery point %d", tt.name, rp), func(t *testing.T) {
				mem := NewMemFS()
				opts := testOptions(newClock(), func(c *Config) { c.SegmentBytes = 700 })
				l := openLog(t, mem, "/p", opts)
				for _, b := range batches {
					appendFollower(t, l, b)
				}
				require.NoError(t, l.AssignEpoch(6, 40), "an epoch without batches, which no header tells of")
				require.NoError(t, l.Close())
				file := "/p/" + LeaderEpochCheckpointFile
				tt.damage(t, mem, file)

				logger, hook := logtest.NewNullLogger()
				opts.Logger = logrus.NewEntry(logger)
				opts.RecoveryPoint = rp
				l = openLog(t, mem, "/p", opts)
				require.Equal(t, want, l.Epochs())
				requireCheckpoint(t, mem, l)
				got, err := l.Read(0, 1<<20, nil)
				require.NoError(t, err)
				require.Equal(t, bytes.Join(batches, nil), got, "no batch lost")
				var warned []string
				for _, e := range hook.AllEntries() {
					if e.Level == logrus.WarnLevel && e.Data["file"] == file {
						warned = append(warned, e.Message)
					}
				}
				require.NotEmpty(t, warned, "a warning names the file")
				if tt.warns {
					require.Contains(t, warned[0], "unreadable")
				}
				_, err = l.Append(leaderBatch(t, 1, 6, 0))
				require.ErrorIs(t, err, wire.ErrLeaderEpoch, "the rebuilt cache's latest epoch is the partition's")
			})
		}
	}

	t.Run("a log without epochs", func(t *testing.T) {
		mem := NewMemFS()
		opts := testOptions(newClock(), nil)
		l := openLog(t, mem, "/p", opts)
		for i := 0; i < 5; i++ {
			appendBatch(t, l, leaderBatch(t, 3, NoLeaderEpoch, 0))
		}
		require.NoError(t, l.Close())
		logger, hook := logtest.NewNullLogger()
		opts.Logger = logrus.NewEntry(logger)
		for _, rp := range []int64{15, 0} {
			opts.RecoveryPoint = rp
			l = openLog(t, mem, "/p", opts)
			require.Empty(t, l.Epochs())
			requireNoCheckpoint(t, mem, "/p")
			require.NoError(t, l.Close())
		}
		for _, e := range hook.AllEntries() {
			require.NotEqual(t, logrus.WarnLevel, e.Level, e.Message)
		}
	})
}

// TestEpochCheckpointWriteFailure fails each write of the calls that
// rewrite the checkpoint, in turn: the call returns the error and fails
// the log, which refuses appends from then on, and after a crash every
// batch appended before is there, with a cache that matches the batches.
func TestEpochCheckpointWriteFailure(t *testing.T) {
	batches, _ := followerRun(t)
	next := leaderBatch(t, 5, 7, 40)
	tests := []struct {
		name string
		do   func(l *Log) error
		// kept is the least number of batches a crash must keep.
		kept int
	}{
		{"follower append of a new epoch", func(l *Log) error {
			h, err := wire.Validate(next)
			if err != nil {
				return err
			}
			_, err = l.AppendAsFollower(bytes.Clone(next), h)
			return err
		}, 8},
		{"leader append of a new epoch", func(l *Log) error {
			l.SetLeaderEpoch(7)
			_, err := l.Append(bytes.Clone(next))
			return err
		}, 8},
		{"assign", func(l *Log) error { return l.AssignEpoch(7, 40) }, 8},
		{"set", func(l *Log) error { return l.SetEpochs(epochs(0, 5, 2, 15, 5, 30, 7, 40)) }, 8},
		{"truncate", func(l *Log) error { return l.TruncateTo(22) }, 4},
		{"delete before", func(l *Log) error { return l.DeleteBefore(17) }, 8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			failures := 0
			for n := int64(1); ; n++ {
				mem := NewMemFS()
				efs := NewErrorFS(mem)
				efs.InjectWritesOnly(true)
				opts := testOptions(newClock(), func(c *Config) { c.SegmentBytes = 700 })
				l := openLog(t, efs, "/p", opts)
				for _, b := range batches {
					appendFollower(t, l, b)
				}
				require.NoError(t, l.Sync())
				efs.InjectAt(n)
				err := tc.do(l)
				if efs.Injected() == 0 {
					require.NoError(t, err)
					requireCheckpoint(t, mem, l)
					break
				}
				msg := fmt.Sprintf("write %d", n)
				failures++
				require.ErrorIs(t, err, ErrInjected, msg)
				require.Error(t, l.failed, msg)
				_, err = l.AppendAsFollower(next, wire.Header{})
				require.ErrorIs(t, err, ErrInjected, "%s: refused with the sticky error", msg)

				requireNoBatchAboveCheckpoint(t, mem, "/p", msg+", killed")
				mem.Crash()
				requireNoBatchAboveCheckpoint(t, mem, "/p", msg+", crashed")
				l = openLog(t, mem, "/p", opts)
				got, err := l.Read(l.StartOffset(), 1<<20, nil)
				require.NoError(t, err, msg)
				all := bytes.Join(batches, nil)
				require.True(t, bytes.HasPrefix(all, got) || bytes.HasSuffix(all, got), msg)
				require.GreaterOrEqual(t, l.EndOffset(), int64(5*tc.kept), msg)
				requireEpochsMatchBatches(t, l, msg)
				require.NoError(t, l.Close())
			}
			require.GreaterOrEqual(t, failures, 5, "each write failed in turn: the checkpoint's open, write and rename, its syncs where it is written durably, the batch's for an append")
		})
	}
}

// TestEpochCheckpointOnAFullFileSystem gives the calls that write the
// checkpoint room for k bytes, for every k up to what they need: each
// short call fails with ErrNoSpace and leaves the log as it was, files and
// cache, and is not a failure; given room, the same call succeeds.
func TestEpochCheckpointOnAFullFileSystem(t *testing.T) {
	batches, _ := followerRun(t)
	next := leaderBatch(t, 5, 7, 40)
	tests := []struct {
		name string
		// setup's batches go in before the capacity is set.
		setup []([]byte)
		do    func(l *Log) (int64, error)
		want  []EpochEntry
	}{
		{"assign", batches, func(l *Log) (int64, error) { return -1, l.AssignEpoch(7, 40) }, epochs(0, 5, 2, 15, 5, 30, 7, 40)},
		{"set", batches, func(l *Log) (int64, error) { return -1, l.SetEpochs(epochs(0, 5, 1, 10, 2, 15, 5, 30)) }, epochs(0, 5, 1, 10, 2, 15, 5, 30)},
		{"follower append of a new epoch", batches, func(l *Log) (int64, error) {
			h, _ := wire.Validate(next)
			res, err := l.AppendAsFollower(bytes.Clone(next), h)
			return res.BaseOffset, err
		}, epochs(0, 5, 2, 15, 5, 30, 7, 40)},
		{"follower append of the first epoch", batches[:1], func(l *Log) (int64, error) {
			b := leaderBatch(t, 5, 7, 5)
			h, _ := wire.Validate(b)
			res, err := l.AppendAsFollower(b, h)
			return res.BaseOffset, err
		}, epochs(7, 5)},
		{"leader append of a new epoch", batches, func(l *Log) (int64, error) {
			res, err := l.Append(bytes.Clone(next))
			return res.BaseOffset, err
		}, epochs(0, 5, 2, 15, 5, 30, 7, 40)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := testOptions(newClock(), func(c *Config) { c.IndexIntervalBytes = 100 })
			opts.LeaderEpoch = 7
			undone := 0
			for k := 0; ; k++ {
				msg := fmt.Sprintf("room for %d bytes", k)
				mem := NewMemFS()
				l := openLog(t, mem, "/p", opts)
				for _, b := range tc.setup {
					appendFollower(t, l, b)
				}
				before := snapshotLog(t, l, mem)
				epochsBefore, capBefore := l.Epochs(), l.leaderEpoch
				end := l.EndOffset()
				mem.SetCapacity(mem.Used() + int64(k))
				base, err := tc.do(l)
				if err == nil {
					if base >= 0 {
						require.Equal(t, end, base, msg)
					}
					require.Equal(t, tc.want, l.Epochs(), msg)
					requireCheckpoint(t, mem, l)
					if base >= 0 {
						require.Positive(t, undone, "some tries found room for the checkpoint only")
					}
					break
				}
				require.ErrorIs(t, err, ErrNoSpace, msg)
				require.ErrorIs(t, err, syscall.ENOSPC, msg)
				require.NoError(t, l.failed, msg)
				requireSameLog(t, before, snapshotLog(t, l, mem), msg)
				require.Equal(t, epochsBefore, l.Epochs(), msg)
				require.Equal(t, capBefore, l.leaderEpoch, msg)
				if k >= len(mustEpochText(t, tc.want)) {
					undone++
				}

				mem.SetCapacity(-1)
				base, err = tc.do(l)
				require.NoError(t, err, "%s: the same call with room", msg)
				if base >= 0 {
					require.Equal(t, end, base, msg)
				}
				require.Equal(t, tc.want, l.Epochs(), msg)
				requireCheckpoint(t, mem, l)
				require.NoError(t, l.Sync())
				mem.Crash()
				o := opts
				o.RecoveryPoint = l.EndOffset()
				l = openLog(t, mem, "/p", o)
				require.Equal(t, tc.want, l.Epochs(), msg)
			}
		})
	}
}

func mustEpochText(t testing.TB, entries []EpochEntry) []byte {
	t.Helper()
	b, err := AppendEpochCheckpoint(nil, entries)
	require.NoError(t, err)
	return b
}

// TestEpochCheckpointStale covers the changes that cannot be undone when
// the file system has no room for the checkpoint after them: the change
// stands, the log does not fail, and no batch goes in before the
// checkpoint is rewritten.
func TestEpochCheckpointStale(t *testing.T) {
	batches, all := followerRun(t)
	for _, tc := range []struct {
		name string
		do   func(l *Log) error
		want []EpochEntry
	}{
		{"truncate", func(l *Log) error { return l.TruncateTo(22) }, epochs(0, 5, 2, 15)},
		{"delete before", func(l *Log) error { return l.DeleteBefore(17) }, epochs(2, 17, 5, 30)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, closeFirst := range []bool{false, true} {
				mem := NewMemFS()
				opts := testOptions(newClock(), nil)
				l := openLog(t, mem, "/p", opts)
				for _, b := range batches {
					appendFollower(t, l, b)
				}
				mem.SetCapacity(0)
				require.NoError(t, tc.do(l))
				require.NoError(t, l.failed)
				require.Equal(t, tc.want, l.Epochs())
				stale, err := ReadFile(mem, "/p/"+LeaderEpochCheckpointFile)
				require.NoError(t, err)
				require.Equal(t, mustEpochText(t, all), stale)

				if closeFirst {
					require.ErrorIs(t, l.Close(), ErrNoSpace)
					mem.SetCapacity(-1)
					mem.Crash()
					opts.RecoveryPoint = l.EndOffset()
					opts.LogStartOffset = l.StartOffset()
					l = openLog(t, mem, "/p", opts)
					require.Equal(t, tc.want, l.Epochs(), "recovery drops what the stale checkpoint has outside the log")
					requireCheckpoint(t, mem, l)
					continue
				}
				end := l.EndOffset()
				b := leaderBatch(t, 1, 5, end)
				h, _ := wire.Validate(b)
				_, err = l.AppendAsFollower(b, h)
				require.ErrorIs(t, err, ErrNoSpace)
				require.Equal(t, end, l.EndOffset(), "nothing appended")
				mem.SetCapacity(-1)
				appendFollower(t, l, b)
				require.Equal(t, end+1, l.EndOffset())
				requireCheckpoint(t, mem, l)
			}
		})
	}
}

// TestEpochModel runs random appends as leader and follower, epoch
// assignments, truncations, start offset raises, retention, flushes and
// flush jobs (run, or covered by a sync of everything as a syncfs would),
// reopens, process kills and OS crashes against the cache's rules applied
// to a model. After every step the log's cache is the model's, its
// checkpoint holds it, it matches the batches, and no batch carries an
// epoch above the checkpoint's. An append writes a new epoch without a
// sync, so an OS crash may lose it: the model keeps what was durable, and
// the epochs of the batches that survived past it are the model's again
// when the partition's epoch, given to Open, covers them, and are cut
// with their batches otherwise.
func TestEpochModel(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4, uint64(time.Now().UnixNano())} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("reproduce with seed %d", seed)
				}
			}()
			runEpochModel(t, seed, 500)
		})
	}
}

func runEpochModel(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 11))
	mem := NewMemFS()
	opts := testOptions(newClock(), func(c *Config) {
		c.SegmentBytes = int64(400 + rng.IntN(1000))
		c.IndexIntervalBytes = rng.IntN(300)
		c.RetentionBytes = int64(1500 + rng.IntN(3000))
		c.RetentionMs = -1
	})
	l := openLog(t, mem, "/p", opts)
	var model []EpochEntry
	// durable is the model as the checkpoint holds it durably; unsynced
	// the epochs appends assigned since, in a checkpoint not synced yet.
	var durable, unsynced []EpochEntry
	// epoch is the epoch of the next batch: -1 until the first epoch.
	epoch := NoLeaderEpoch
	newEpoch := func() int32 {
		epoch = max(epoch, l.LatestEpoch()) + 1 + int32(rng.IntN(2))
		return epoch
	}
	// appended records a batch of epoch appended at start.
	appended := func(start int64) func() {
		if epoch <= latestEpoch(model) {
			return func() {}
		}
		e := EpochEntry{Epoch: epoch, StartOffset: start}
		model, _ = assignEpoch(model, e)
		return func() {
			if l.epochsUnsynced {
				unsynced = append(unsynced, e)
			}
		}
	}
	followerAppend := func() {
		if rng.IntN(5) == 0 {
			newEpoch()
		}
		b := leaderBatch(t, 1+rng.IntN(4), epoch, l.EndOffset())
		done := appended(l.EndOffset())
		appendFollower(t, l, b)
		done()
	}
	reopen := func(recoveryPoint int64, leaderEpoch int32) {
		o := opts
		o.RecoveryPoint = recoveryPoint
		o.LogStartOffset = l.StartOffset()
		o.LeaderEpoch = leaderEpoch
		l = openLog(t, mem, "/p", o)
	}
	// afterRecovery applies to the model what recovery does to the cache.
	afterRecovery := func() {
		if rec := l.Recovery(); (rec.BytesTruncated > 0 || rec.SegmentsDeleted > 0) && l.EndOffset() > l.StartOffset() {
			model, _ = dropEpochsFrom(model, l.EndOffset())
		} else {
			model, _ = dropEpochsFrom(model, l.EndOffset()+1)
		}
		model, _ = startEpochsAt(model, l.StartOffset())
	}
	for step := 0; step < steps; step++ {
		var op string
		switch p := rng.IntN(100); {
		case p < 33:
			op = "follower append"
			followerAppend()
		case p < 48:
			op = "leader append"
			if rng.IntN(5) == 0 {
				newEpoch()
			}
			// The partition's epoch, which a restart does not keep.
			l.SetLeaderEpoch(epoch)
			done := appended(l.EndOffset())
			appendBatch(t, l, leaderBatch(t, 1+rng.IntN(4), epoch, 0))
			done()
		case p < 53:
			op = "assign"
			e := max(l.LatestEpoch(), 0)
			if rng.IntN(2) == 0 {
				e = newEpoch()
			}
			model, _ = assignEpoch(model, EpochEntry{Epoch: e, StartOffset: l.EndOffset()})
			require.NoError(t, l.AssignEpoch(e, l.EndOffset()))
			epoch = e
		case p < 59:
			op = "truncate"
			offset := l.StartOffset() + rng.Int64N(l.EndOffset()-l.StartOffset()+2)
			truncates := offset < l.EndOffset()
			require.NoError(t, l.TruncateTo(offset))
			if truncates {
				model, _ = dropEpochsFrom(model, l.EndOffset())
			}
		case p < 63:
			op = "delete before"
			offset := l.StartOffset() + rng.Int64N(l.EndOffset()-l.StartOffset()+1)
			require.NoError(t, l.DeleteBefore(offset))
			model, _ = startEpochsAt(model, l.StartOffset())
		case p < 67:
			op = "retention"
			_, err := l.ApplyRetention()
			require.NoError(t, err)
			model, _ = startEpochsAt(model, l.StartOffset())
		case p < 73:
			op = "flush"
			require.NoError(t, l.Flush(l.EndOffset()-rng.Int64N(3)))
		case p < 79:
			op = "flush job"
			j, err := l.StartFlush()
			require.NoError(t, err)
			if rng.IntN(2) == 0 {
				op += " beside an append"
				followerAppend()
			}
			if rng.IntN(3) == 0 {
				op += " by a sync of everything"
				mem.SyncAll()
			} else {
				require.NoError(t, j.Run())
			}
			require.NoError(t, l.FinishFlush(j, nil))
			require.Equal(t, j.UpTo(), l.RecoveryPoint())
		case p < 85:
			op = "reopen"
			require.NoError(t, l.Close())
			reopen(l.EndOffset(), NoLeaderEpoch)
		case p < 91:
			// The page cache outlives the process: every epoch is in
			// the checkpoint, synced or not.
			op = "kill"
			abandon(l)
			reopen(l.RecoveryPoint(), NoLeaderEpoch)
			afterRecovery()
		default:
			op = "crash"
			flushed := l.RecoveryPoint()
			requireNoBatchAboveCheckpoint(t, mem, "/p", "before the crash")
			if rng.IntN(2) == 0 {
				mem.Crash()
			} else {
				op = "torn crash"
				mem.CrashTorn(rng)
			}
			requireNoBatchAboveCheckpointBelow(t, mem, "/p", flushed, "after the crash")
			// Without a checkpoint, no epoch is damage (the cache is
			// rebuilt from the batches).
			survived, checkpointed, err := readEpochCheckpoint(mem, "/p")
			require.NoError(t, err)
			// The partition's epoch from the metadata, or none.
			leaderEpoch := NoLeaderEpoch
			if rng.IntN(2) == 0 {
				leaderEpoch = epoch
				op += " with the partition's epoch"
			}
			reopen(flushed, leaderEpoch)
			require.GreaterOrEqual(t, l.EndOffset(), flushed, "step %d: flushed batches survive", step)
			model = slices.Clone(durable)
			for _, e := range unsynced {
				if e.StartOffset < l.EndOffset() {
					// Its batch survived, and its epoch with it.
					if checkpointed && e.Epoch > latestEpoch(survived) {
						require.LessOrEqual(t, e.Epoch, leaderEpoch, "step %d: a batch above the checkpoint and the partition's epoch is cut", step)
					}
					model, _ = assignEpoch(model, e)
				}
			}
			afterRecovery()
		}
		msg := fmt.Sprintf("step %d %s: start %d end %d", step, op, l.StartOffset(), l.EndOffset())
		if len(model) == 0 {
			require.Empty(t, l.Epochs(), msg)
		} else {
			require.Equal(t, model, l.Epochs(), msg)
		}
		if _, err := mem.Stat("/p/" + LeaderEpochCheckpointFile); err == nil || len(model) > 0 {
			requireCheckpoint(t, mem, l)
		}
		requireEpochsMatchBatches(t, l, msg)
		requireNoBatchAboveCheckpoint(t, mem, "/p", msg)
		if !l.epochsUnsynced {
			durable, unsynced = slices.Clone(model), nil
		}
	}
	require.NoError(t, l.Close())
}
