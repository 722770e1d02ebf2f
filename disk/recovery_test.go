package disk

import (
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"path"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/wire"
)

// readCountFS wraps an FS and counts the bytes read through ReadAt, by file
// name extension (".log", ".index", ".timeindex").
type readCountFS struct {
	FS
	read map[string]int64
}

func newReadCountFS(inner FS) *readCountFS {
	return &readCountFS{FS: inner, read: map[string]int64{}}
}

func (c *readCountFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &readCountFile{File: f, fs: c, ext: path.Ext(name)}, nil
}

type readCountFile struct {
	File
	fs  *readCountFS
	ext string
}

func (f *readCountFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.fs.read[f.ext] += int64(n)
	return n, err
}

// TestCleanOpenDoesNotRescan opens a cleanly closed log of about 50 MB: with
// the recovery point at its end, Open reads a few batch headers and no
// batch; with the recovery point inside the last batches, it validates only
// from the index entry below it; with no recovery point, everything.
func TestCleanOpenDoesNotRescan(t *testing.T) {
	mem := NewMemFS()
	opts := testOptions(newClock(), func(c *Config) { c.SegmentBytes = 16 << 20 })
	l := openLog(t, mem, "/p", opts)
	batch := makeBatch(t, 64, 1024, 1)
	for l.Size() < 50<<20 {
		appendBatch(t, l, batch)
	}
	end, size, segs := l.EndOffset(), l.Size(), l.Segments()
	require.Len(t, segs, 4)
	require.NoError(t, l.Close())

	tests := []struct {
		name          string
		recoveryPoint int64
		minRead       int64 // bytes of .log files read, at least
		maxRead       int64 // and at most
	}{
		{"clean", end, 1, 1 << 10},
		{"three batches unflushed", end - 3*64, 3 * int64(len(batch)), 5 * int64(len(batch))},
		{"unclean", 0, size, 2 * size},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := newReadCountFS(mem)
			o := opts
			o.RecoveryPoint = tt.recoveryPoint
			l := openLog(t, fs, "/p", o)
			read := fs.read[".log"]
			require.GreaterOrEqual(t, read, tt.minRead)
			require.LessOrEqual(t, read, tt.maxRead)
			require.Equal(t, end, l.EndOffset())
			require.Equal(t, end, l.RecoveryPoint())
			require.Equal(t, segs, l.Segments())
			got, err := l.Read(end-1, 1, nil)
			require.NoError(t, err)
			h, err := wire.Validate(got)
			require.NoError(t, err)
			require.Equal(t, end-64, h.BaseOffset)
			res := appendBatch(t, l, batch)
			require.Equal(t, end, res.BaseOffset)
			require.NoError(t, l.TruncateTo(end))
			require.NoError(t, l.Close())
		})
	}
}

// TestReopenMatchesContinuousRun reopens a log half-way through a run of
// appends under each kind of recovery point and checks that the files at
// the end are byte for byte those of the same run without a reopen: the
// state a clean open takes from the indexes (index spacing, largest
// timestamp) is the state appends left.
func TestReopenMatchesContinuousRun(t *testing.T) {
	cfg := func(c *Config) {
		c.SegmentBytes = 4000
		c.IndexIntervalBytes = 300
	}
	batches := make([][]byte, 80)
	now := newClock().now.UnixMilli()
	for i := range batches {
		// Timestamps go up and down, so the largest is not always the last;
		// all are recent, so segment.ms rolls nothing.
		batches[i] = makeBatch(t, 1+i%4, 20+(i*37)%250, now-int64(400-(i*53)%400))
	}
	run := func(fs FS, from, to int, opts Options) *Log {
		l := openLog(t, fs, "/p", opts)
		for _, b := range batches[from:to] {
			appendBatch(t, l, b)
		}
		return l
	}
	want := NewMemFS()
	require.NoError(t, run(want, 0, len(batches), testOptions(newClock(), cfg)).Close())

	tests := []struct {
		name          string
		recoveryPoint func(end, lastBase int64) int64
	}{
		{"clean", func(end, _ int64) int64 { return end }},
		{"end of the last batch unflushed", func(end, _ int64) int64 { return end - 1 }},
		{"middle of the last segment", func(end, lastBase int64) int64 { return (end + lastBase) / 2 }},
		{"base of the last segment", func(_, lastBase int64) int64 { return lastBase }},
		{"none", func(int64, int64) int64 { return 0 }},
		{"stale, past the end", func(end, _ int64) int64 { return end + 50 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := NewMemFS()
			opts := testOptions(newClock(), cfg)
			l := run(fs, 0, len(batches)/2, opts)
			end, segs := l.EndOffset(), l.Segments()
			require.Greater(t, len(segs), 2)
			require.NoError(t, l.Close())
			opts.RecoveryPoint = tt.recoveryPoint(end, segs[len(segs)-1].BaseOffset)
			l = openLog(t, fs, "/p", opts)
			require.Equal(t, segs, l.Segments())
			for _, b := range batches[len(batches)/2:] {
				appendBatch(t, l, b)
			}
			require.NoError(t, l.Close())
			wantFiles, got := memTreeOf(t, want, "/p"), memTreeOf(t, fs, "/p")
			require.Equal(t, slices.Sorted(maps.Keys(wantFiles)), slices.Sorted(maps.Keys(got)))
			for name, b := range wantFiles {
				require.Equal(t, b, got[name], name)
			}
		})
	}
}

// memTreeOf returns the bytes of every file of dir by name.
func memTreeOf(t *testing.T, fs *MemFS, dir string) map[string][]byte {
	t.Helper()
	names, err := fs.ReadDir(dir)
	require.NoError(t, err)
	files := map[string][]byte{}
	for _, name := range names {
		b, err := fs.ReadFile(dir + "/" + name)
		require.NoError(t, err)
		files[name] = b
	}
	return files
}

// TestRecoveryPointDistrust covers recovery points and indexes that do not
// match the log: each must end in a log of whole valid batches that keeps
// everything intact below the damage.
func TestRecoveryPointDistrust(t *testing.T) {
	b := makeBatch(t, 4, 100, 0)
	size := int64(len(b))
	// Ten batches of 4 records, 40 offsets, in one segment; an index entry
	// every intervalBatches batches, not at the first.
	build := func(t *testing.T, intervalBatches int) (*MemFS, Options) {
		interval := intervalBatches * int(size)
		fs := NewMemFS()
		opts := testOptions(newClock(), func(c *Config) { c.IndexIntervalBytes = interval })
		l := openLog(t, fs, "/p", opts)
		for i := 0; i < 10; i++ {
			appendBatch(t, l, b)
		}
		require.NoError(t, l.Close())
		return fs, opts
	}
	logPath := "/p/" + SegmentFileName(0, ".log")
	tests := []struct {
		name            string
		intervalBatches int // 0: 1
		recoveryPoint   int64
		damage          func(t *testing.T, fs *MemFS)
		end             int64
	}{
		{
			name: "log shorter than the checkpoint", recoveryPoint: 40,
			damage: func(t *testing.T, fs *MemFS) { truncateFile(t, fs, logPath, 7*size) },
			end:    28,
		},
		{
			name: "log cut mid-batch below the checkpoint", recoveryPoint: 40,
			damage: func(t *testing.T, fs *MemFS) { truncateFile(t, fs, logPath, 7*size+30) },
			end:    28,
		},
		{
			name: "record damaged below a stale checkpoint", recoveryPoint: 100,
			damage: func(t *testing.T, fs *MemFS) { require.NoError(t, fs.Corrupt(logPath, 3*size+80)) },
			end:    12,
		},
		{
			name: "stale checkpoint, indexes consistent with the log", recoveryPoint: 40,
			damage: func(t *testing.T, fs *MemFS) {
				truncateFile(t, fs, logPath, 7*size)
				truncateFile(t, fs, "/p/"+SegmentFileName(0, ".index"), 6*OffsetIndexEntrySize)
			},
			end: 28,
		},
		{
			name: "record damaged at the index entry below the recovery point", recoveryPoint: 34,
			damage: func(t *testing.T, fs *MemFS) { require.NoError(t, fs.Corrupt(logPath, 8*size+80)) },
			end:    32,
		},
		{
			name: "record damaged after the index entry below the recovery point", intervalBatches: 2, recoveryPoint: 38,
			damage: func(t *testing.T, fs *MemFS) { require.NoError(t, fs.Corrupt(logPath, 9*size+80)) },
			end:    36,
		},
		{
			name: "record damaged above the recovery point", recoveryPoint: 34,
			damage: func(t *testing.T, fs *MemFS) { require.NoError(t, fs.Corrupt(logPath, 9*size+80)) },
			end:    36,
		},
		{
			name: "index entry pointing inside a batch", intervalBatches: 100, recoveryPoint: 36,
			damage: func(t *testing.T, fs *MemFS) {
				var ix []byte
				ix = binary.BigEndian.AppendUint32(ix, 36)
				ix = binary.BigEndian.AppendUint32(ix, uint32(8*size+20))
				require.NoError(t, fs.WriteFile("/p/"+SegmentFileName(0, ".index"), ix))
			},
			end: 40,
		},
		{
			name: "index entry past the log", recoveryPoint: 40,
			damage: func(t *testing.T, fs *MemFS) {
				var ix []byte
				ix = binary.BigEndian.AppendUint32(ix, 36)
				ix = binary.BigEndian.AppendUint32(ix, uint32(10*size))
				require.NoError(t, fs.WriteFile("/p/"+SegmentFileName(0, ".index"), ix))
				require.NoError(t, fs.Corrupt(logPath, 9*size+80))
			},
			end: 36,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs, opts := build(t, max(tt.intervalBatches, 1))
			tt.damage(t, fs)
			opts.RecoveryPoint = tt.recoveryPoint
			l := openLog(t, fs, "/p", opts)
			require.Equal(t, tt.end, l.EndOffset())
			require.Equal(t, tt.end, l.RecoveryPoint(), "recovered and synced")
			all, err := l.Read(0, 1<<20, nil)
			require.NoError(t, err)
			require.Len(t, all, int(tt.end/4*size))
			_, err = wire.Batches(all, func([]byte, wire.Header) error { return nil })
			require.NoError(t, err, "every batch kept is valid, CRC included")
			requireReadable(t, l)
			require.NoError(t, l.Close())
			// What recovery rebuilt is what a full validation finds.
			opts.RecoveryPoint = 0
			l = openLog(t, fs, "/p", opts)
			require.Equal(t, tt.end, l.EndOffset())
			require.NoError(t, l.Close())
		})
	}
}

func truncateFile(t *testing.T, fs *MemFS, name string, size int64) {
	t.Helper()
	b, err := fs.ReadFile(name)
	require.NoError(t, err)
	require.NoError(t, fs.WriteFile(name, b[:size]))
}

// TestCleanOpenKeepsState checks what a clean open takes from the indexes
// and headers without reading batches: the largest timestamp (for
// retention and the time index), the roll time of the active segment, and
// the index spacing, across index intervals.
func TestCleanOpenKeepsState(t *testing.T) {
	for _, interval := range []int{0, 1, 200, 1 << 20} {
		t.Run(fmt.Sprint(interval), func(t *testing.T) {
			fs := NewMemFS()
			opts := testOptions(newClock(), func(c *Config) { c.IndexIntervalBytes = interval })
			l := openLog(t, fs, "/p", opts)
			for _, ts := range []int64{500, 900, 700, 800} {
				appendBatch(t, l, makeBatch(t, 2, 60, ts))
			}
			before := l.Segments()
			require.Equal(t, int64(901), before[0].MaxTimestamp)
			require.NoError(t, l.Close())
			opts.RecoveryPoint = 8
			l = openLog(t, fs, "/p", opts)
			require.Equal(t, before, l.Segments())
			require.Equal(t, int64(501), l.active().rollTimestamp, "the first batch's largest timestamp")
			off, ts, err := l.OffsetForTimestamp(901)
			require.NoError(t, err)
			require.Equal(t, int64(3), off)
			require.Equal(t, int64(901), ts)
			require.NoError(t, l.Close())
		})
	}
}

// staleTimeIndexLog returns a log in a MemFS, indexing every batch, whose
// first batch (offsets 0 and 1) is at ts, and the path of its time index.
func staleTimeIndexLog(t *testing.T) (mem *MemFS, l *Log, opts Options, ts int64, path string) {
	t.Helper()
	mem = NewMemFS()
	clock := newClock()
	opts = testOptions(clock, func(c *Config) { c.IndexIntervalBytes = 0 })
	l = openLog(t, mem, "/p", opts)
	ts = clock.now.UnixMilli()
	appendBatch(t, l, makeBatch(t, 2, 10, ts))
	return mem, l, opts, ts, "/p/" + SegmentFileName(0, ".timeindex")
}

// writeStaleTimeIndex replaces the time index at path with an entry for
// the first batch and one at ts+1000 for offset 3, synced.
func writeStaleTimeIndex(t *testing.T, mem *MemFS, path string, ts int64) {
	t.Helper()
	f, err := mem.OpenFile(path, os.O_RDWR|os.O_TRUNC, 0)
	require.NoError(t, err)
	_, err = f.Write(AppendTimeEntry(AppendTimeEntry(nil, TimeEntry{Timestamp: ts, Offset: 0}, 0), TimeEntry{Timestamp: ts + 1000, Offset: 3}, 0))
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
}

// requireTimesAfterStale checks a log that holds offsets 0 to 6 (2 to 6 at
// ts+2000) after a stale time index: it takes appends, reads, and finds
// offsets by time from its batches.
func requireTimesAfterStale(t *testing.T, l *Log, ts int64) {
	t.Helper()
	require.Equal(t, int64(7), l.EndOffset())
	appendBatch(t, l, makeBatch(t, 1, 10, ts+1500))
	appendBatch(t, l, makeBatch(t, 1, 10, ts+3000))
	requireReadable(t, l)
	off, got, err := l.OffsetForTimestamp(ts + 1001)
	require.NoError(t, err)
	require.Equal(t, int64(2), off, "the first record at or after the time")
	require.Equal(t, ts+2000, got)
	require.NoError(t, l.Close())
}

// An index that recovery rebuilt must stay rebuilt: a later crash that
// finds the log durable (the recovery point at its end) trusts the indexes
// as they are on disk, so what recovery cut from them must be cut there
// too, not only in the page cache. Here a crash left the time index an
// entry for a batch that did not survive; recovery dropped it, the log
// grew and was flushed, and a second crash brought the entry back: its
// offset was past the segment's largest timestamp, and every later append
// was refused.
func TestRecoveryCutsIndexesDurably(t *testing.T) {
	mem, l, opts, ts, path := staleTimeIndexLog(t)
	require.NoError(t, l.Flush(l.EndOffset()))
	// What a torn crash can leave: a synced time index entry for offset 3,
	// a batch that never reached the .log.
	writeStaleTimeIndex(t, mem, path, ts)
	mem.Crash()

	opts.RecoveryPoint = l.RecoveryPoint()
	l = openLog(t, mem, "/p", opts)
	require.Equal(t, int64(2), l.EndOffset())
	// The cut is on disk once Open returns: a crash now keeps it.
	mem.Crash()
	b, err := mem.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, AppendTimeEntry(nil, TimeEntry{Timestamp: ts + 1, Offset: 0}, 0), b, "the first batch's largest timestamp, rebuilt")
	l = openLog(t, mem, "/p", opts)
	appendBatch(t, l, makeBatch(t, 5, 10, ts+2000)) // offsets 2 to 6
	require.NoError(t, l.Flush(l.EndOffset()))
	mem.Crash()

	opts.RecoveryPoint = l.RecoveryPoint()
	requireTimesAfterStale(t, openLog(t, mem, "/p", opts), ts)
}

// A clean open takes the last segment's state from its indexes and the
// headers after the last offset index entry. A time index entry that the
// batches contradict (a larger timestamp after it at a lower offset) makes
// it rebuild the indexes rather than refuse every later append.
func TestCleanOpenRebuildsAContradictedTimeIndex(t *testing.T) {
	mem, l, opts, ts, path := staleTimeIndexLog(t)
	appendBatch(t, l, makeBatch(t, 5, 10, ts+2000)) // offsets 2 to 6
	require.NoError(t, l.Close())
	writeStaleTimeIndex(t, mem, path, ts)

	opts.RecoveryPoint = 7
	requireTimesAfterStale(t, openLog(t, mem, "/p", opts), ts)
}

// Recovery says what Open did: nothing for a clean open, the segments and
// bytes validated for an unclean one, and the bytes cut for a torn tail.
func TestRecoveryReport(t *testing.T) {
	mem := NewMemFS()
	opts := testOptions(newClock(), func(c *Config) { c.SegmentBytes = 1 << 20 })
	l := openLog(t, mem, "/p", opts)
	batch := makeBatch(t, 16, 1024, 1)
	for l.Size() < 3<<20 {
		appendBatch(t, l, batch)
	}
	end, size := l.EndOffset(), l.Size()
	require.False(t, l.Recovery().Recovered(), "a new log")
	require.NoError(t, l.Close())

	clean := opts
	clean.RecoveryPoint = end
	l = openLog(t, mem, "/p", clean)
	require.False(t, l.Recovery().Recovered(), "a clean open: %+v", l.Recovery())
	require.NoError(t, l.Close())

	l = openLog(t, mem, "/p", opts) // no recovery point: every segment validated
	r := l.Recovery()
	require.True(t, r.Recovered())
	require.Equal(t, len(l.Segments()), r.SegmentsValidated)
	require.Equal(t, size, r.BytesValidated)
	require.Zero(t, r.BytesTruncated)
	require.Positive(t, r.Took)
	segs := l.Segments()
	require.NoError(t, l.Close())

	last := segs[len(segs)-1].Path
	f, err := mem.OpenFile(last, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte("torn tail"))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	l = openLog(t, mem, "/p", clean)
	r = l.Recovery()
	require.Equal(t, int64(len("torn tail")), r.BytesTruncated)
	require.Equal(t, end, l.EndOffset())
	require.NoError(t, l.Close())
}

// TestOpenAfterAKillMakesTheLogDurable kills a process (its unsynced bytes
// and directory entries stay in the page cache) after appends that rolled
// new segments, reopens the log, which validates and syncs what it finds,
// and then crashes the OS: everything the Open after the kill reported
// durable (RecoveryPoint) survives, segments created by the killed
// process included.
func TestOpenAfterAKillMakesTheLogDurable(t *testing.T) {
	for _, withEpochs := range []bool{false, true} {
		t.Run(fmt.Sprintf("epochs=%v", withEpochs), func(t *testing.T) {
			mem := NewMemFS()
			opts := testOptions(newClock(), func(c *Config) { c.SegmentBytes = 700 })
			l := openLog(t, mem, "/p", opts)
			epoch := NoLeaderEpoch
			for i := range 12 {
				if withEpochs && i%4 == 0 {
					epoch++
				}
				appendFollower(t, l, leaderBatch(t, 5, epoch, l.EndOffset()))
			}
			require.Greater(t, len(l.Segments()), 2, "the appends roll")
			abandon(l)

			l = openLog(t, mem, "/p", opts)
			durable := l.RecoveryPoint()
			require.Equal(t, int64(60), durable)
			want := l.Epochs()
			mem.Crash()

			opts.RecoveryPoint = durable
			l = openLog(t, mem, "/p", opts)
			require.Equal(t, durable, l.EndOffset(), "what Open synced survives the crash")
			require.Equal(t, want, l.Epochs())
			requireReadable(t, l)
			requireEpochsMatchBatches(t, l, "after the crash")
			require.NoError(t, l.Close())
		})
	}
}
