package disk

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/wire"
)

// logSnapshot is everything a change undone for a full file system must
// leave as it was: what the log says of itself, what it holds in memory,
// what it reads, and the bytes of its files.
type logSnapshot struct {
	start, end, recoveryPoint, size int64
	segments                        []SegmentInfo
	marks                           []segmentMark
	dirDirty                        bool
	data                            []byte
	files                           map[string][]byte
}

func snapshotLog(t *testing.T, l *Log, mem *MemFS) logSnapshot {
	t.Helper()
	s := logSnapshot{
		start: l.StartOffset(), end: l.EndOffset(), recoveryPoint: l.RecoveryPoint(), size: l.Size(),
		segments: l.Segments(), dirDirty: l.dirDirty, files: memTreeOf(t, mem, l.Dir()),
	}
	for _, seg := range l.segments {
		s.marks = append(s.marks, seg.mark())
	}
	data, err := l.Read(l.StartOffset(), 1<<30, nil)
	require.NoError(t, err)
	s.data = data
	return s
}

// requireSameLog checks that after is before, field by field, so that a
// difference is told readably.
func requireSameLog(t *testing.T, before, after logSnapshot, msg string) {
	t.Helper()
	require.Equal(t, before.start, after.start, "%s: start offset", msg)
	require.Equal(t, before.end, after.end, "%s: end offset", msg)
	require.Equal(t, before.recoveryPoint, after.recoveryPoint, "%s: recovery point", msg)
	require.Equal(t, before.size, after.size, "%s: size", msg)
	require.Equal(t, before.segments, after.segments, "%s: segments", msg)
	require.Equal(t, before.marks, after.marks, "%s: segment state in memory", msg)
	require.Equal(t, before.dirDirty, after.dirDirty, "%s: directory dirty", msg)
	require.True(t, bytes.Equal(before.data, after.data), "%s: read of the log", msg)
	names := func(files map[string][]byte) []string { return slices.Sorted(maps.Keys(files)) }
	require.Equal(t, names(before.files), names(after.files), "%s: files", msg)
	for name, b := range before.files {
		require.True(t, bytes.Equal(b, after.files[name]), "%s: bytes of %s: %d before, %d after", msg, name, len(b), len(after.files[name]))
	}
}

// memSyncedTree returns the synced bytes of every file of dir by name: what
// a crash keeps.
func memSyncedTree(t *testing.T, mem *MemFS, dir string) map[string][]byte {
	t.Helper()
	mem.mu.Lock()
	defer mem.mu.Unlock()
	d, err := mem.walk(splitPath(dir))
	require.NoError(t, err)
	files := map[string][]byte{}
	for name, n := range d.entries {
		files[name] = bytes.Clone(n.synced)
	}
	return files
}

// requireSyncedKept checks that every .log's synced bytes before are still
// synced after: a change undone touches nothing made durable.
func requireSyncedKept(t *testing.T, before, after map[string][]byte, msg string) {
	t.Helper()
	for name, b := range before {
		if strings.HasSuffix(name, logExt) {
			require.True(t, bytes.HasPrefix(after[name], b), "%s: synced bytes of %s", msg, name)
		}
	}
}

// requireBatchPrefix checks that got is the first n of batches, back to
// back, for some n >= atLeast.
func requireBatchPrefix(t *testing.T, batches [][]byte, atLeast int, got []byte, msg string) {
	t.Helper()
	var want []byte
	for n := 0; n <= len(batches); n++ {
		if n >= atLeast && bytes.Equal(want, got) {
			return
		}
		if n < len(batches) {
			want = append(want, batches[n]...)
		}
	}
	require.Failf(t, "not a prefix of the batches", "%s: %d bytes, at least %d batches wanted", msg, len(got), atLeast)
}

// noSpaceCase is a log set up before an append that is then given room for
// only k bytes, for every k.
type noSpaceCase struct {
	name   string
	config func(c *Config)
	// setup appends and flushes; it returns the batches appended, as
	// stored.
	setup func(t *testing.T, l *Log) [][]byte
	next  []byte // the batch appended under the capacity
	rolls bool   // whether that append rolls
}

func noSpaceCases(t *testing.T) []noSpaceCase {
	small := func(i int) []byte { return makeBatch(t, 1+i%3, 40+30*i, int64(1000+10*i)) }
	appendSome := func(t *testing.T, l *Log, n, flushAfter int) [][]byte {
		var batches [][]byte
		for i := 0; i < n; i++ {
			b := small(i)
			appendBatch(t, l, b)
			wire.SetBaseOffset(b, l.EndOffset()-int64(1+i%3))
			batches = append(batches, b)
			if i+1 == flushAfter {
				require.NoError(t, l.Flush(l.EndOffset()))
			}
		}
		return batches
	}
	next := makeBatch(t, 3, 200, 5000)
	setupSize := 0
	for i := 0; i < 5; i++ {
		setupSize += len(small(i))
	}
	return []noSpaceCase{
		{
			name:   "same segment",
			config: func(c *Config) { c.IndexIntervalBytes = 100 },
			setup:  func(t *testing.T, l *Log) [][]byte { return appendSome(t, l, 5, 3) },
			next:   next,
		},
		{
			name: "roll",
			config: func(c *Config) {
				c.IndexIntervalBytes = 100
				c.SegmentBytes = int64(setupSize + len(next) - 1)
			},
			setup: func(t *testing.T, l *Log) [][]byte { return appendSome(t, l, 5, 3) },
			next:  next,
			rolls: true,
		},
		{
			name: "roll of a durable segment",
			config: func(c *Config) {
				c.IndexIntervalBytes = 250
				c.SegmentBytes = int64(setupSize + len(next) - 1)
			},
			setup: func(t *testing.T, l *Log) [][]byte { return appendSome(t, l, 5, 5) },
			next:  next,
			rolls: true,
		},
		{
			name: "roll and flush.messages",
			config: func(c *Config) {
				c.IndexIntervalBytes = 0
				c.SegmentBytes = int64(setupSize + len(next) - 1)
				c.FlushMessages = 4
			},
			setup: func(t *testing.T, l *Log) [][]byte { return appendSome(t, l, 5, 0) },
			next:  next,
			rolls: true,
		},
		{
			name: "flush.messages",
			config: func(c *Config) {
				c.IndexIntervalBytes = 0
				c.FlushMessages = 1
			},
			setup: func(t *testing.T, l *Log) [][]byte { return appendSome(t, l, 5, 0) },
			next:  next,
		},
	}
}

// TestAppendOutOfSpaceAtEveryByte gives the next append room for k bytes,
// for every k from 0 up to what it needs: batch, index entries, a roll's
// files and sealed index entries, a flush's index writes. Each short append
// must fail with ErrNoSpace and leave the log as it was, files and memory,
// not failed; given room, the same append gets the same offset. Then a
// clean reopen and a crash after a sync recover exactly the batches
// appended, a crash exactly those made durable, and a torn crash a prefix
// of them holding at least those: nothing of the refused tries is left.
func TestAppendOutOfSpaceAtEveryByte(t *testing.T) {
	for _, tc := range noSpaceCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			opts := testOptions(newClock(), tc.config)
			needed := -1
			for k := 0; needed < 0; k++ {
				msg := fmt.Sprintf("room for %d bytes", k)
				mem := NewMemFS()
				l := openLog(t, mem, "/p", opts)
				batches := tc.setup(t, l)
				before := snapshotLog(t, l, mem)
				syncedBefore := memSyncedTree(t, mem, "/p")

				mem.SetCapacity(mem.Used() + int64(k))
				next := bytes.Clone(tc.next)
				var res AppendResult
				var err error
				if k%2 == 0 {
					res, err = l.Append(next)
				} else {
					h, verr := wire.Validate(next)
					require.NoError(t, verr)
					res, err = l.AppendValidated(next, h)
				}
				if err == nil {
					needed = k
					require.Equal(t, before.end, res.BaseOffset, msg)
					wire.SetBaseOffset(next, res.BaseOffset)
				} else {
					require.ErrorIs(t, err, ErrNoSpace, msg)
					require.ErrorIs(t, err, syscall.ENOSPC, msg)
					require.NoError(t, l.failed, msg)
					requireSameLog(t, before, snapshotLog(t, l, mem), msg)
					requireSyncedKept(t, syncedBefore, memSyncedTree(t, mem, "/p"), msg)
					// A second try without room changes nothing either.
					_, err = l.Append(bytes.Clone(tc.next))
					require.ErrorIs(t, err, ErrNoSpace, msg)
					requireSameLog(t, before, snapshotLog(t, l, mem), msg)

					mem.SetCapacity(-1)
					next = bytes.Clone(tc.next)
					res = appendBatch(t, l, next)
					require.Equal(t, before.end, res.BaseOffset, msg)
					wire.SetBaseOffset(next, res.BaseOffset)
				}
				mem.SetCapacity(-1)
				batches = append(batches, next)
				requireReadable(t, l)
				rolled := len(l.Segments()) - len(before.segments)
				require.Equal(t, map[bool]int{false: 0, true: 1}[tc.rolls], rolled, msg)

				// The batches made durable: flushes here go to the end.
				durable := 0
				for end := int64(0); durable < len(batches); durable++ {
					h, err := wire.ParseHeader(batches[durable])
					require.NoError(t, err)
					if end = h.NextOffset(); end > l.RecoveryPoint() {
						break
					}
				}
				o := opts
				want := batches
				switch k % 4 {
				case 0:
					require.NoError(t, l.Close(), msg)
				case 1:
					require.NoError(t, l.Sync(), msg)
					mem.Crash()
				case 2:
					mem.Crash()
					want = batches[:durable]
				case 3:
					mem.CrashTorn(rand.New(rand.NewPCG(uint64(k), 5)))
				}
				o.RecoveryPoint = l.RecoveryPoint()
				l = openLog(t, mem, "/p", o)
				got, err := l.Read(0, 1<<30, nil)
				require.NoError(t, err, msg)
				if k%4 == 3 {
					requireBatchPrefix(t, batches, durable, got, msg)
				} else {
					require.Equal(t, bytes.Join(want, nil), got, msg)
				}
				requireReadable(t, l)
				res = appendBatch(t, l, makeBatch(t, 1, 10, 9000))
				require.Equal(t, l.EndOffset()-1, res.BaseOffset, msg)
				require.NoError(t, l.Close())
			}
			require.Greater(t, needed, len(tc.next)-1, "the batch needs room")
		})
	}
}

// TestAppendOutOfSpaceWritingIndexEntries sweeps the room left for an
// append whose index entries fill the buffer of both indexes, so that it
// writes 512 entries to each: every short write of them is undone, on the
// same log, which must end as if only the last append had been made.
func TestAppendOutOfSpaceWritingIndexEntries(t *testing.T) {
	mem := NewMemFS()
	opts := testOptions(newClock(), func(c *Config) { c.IndexIntervalBytes = 0 })
	l := openLog(t, mem, "/p", opts)
	var batches [][]byte
	for i := 0; i < indexFlushEntries-1; i++ {
		b := makeBatch(t, 1, 1, int64(1000+i))
		res := appendBatch(t, l, b)
		wire.SetBaseOffset(b, res.BaseOffset)
		batches = append(batches, b)
	}
	require.Equal(t, indexFlushEntries-1, len(l.active().index.entries.tail))
	before := snapshotLog(t, l, mem)
	next := makeBatch(t, 2, 30, 5000)
	want := len(next) + indexFlushEntries*(OffsetIndexEntrySize+TimeIndexEntrySize)
	// Each write is cut short anywhere the same way; the snapshot, which
	// costs more than the append, is compared near the ends of each write
	// and at every 16th byte between.
	offsetIndexEnd := len(next) + indexFlushEntries*OffsetIndexEntrySize
	near := func(k, end int) bool { return k >= end-20 && k <= end+20 }
	for k := 0; k < want; k++ {
		mem.SetCapacity(mem.Used() + int64(k))
		_, err := l.Append(bytes.Clone(next))
		require.ErrorIs(t, err, ErrNoSpace, "room for %d bytes", k)
		if k%16 == 0 || near(k, 0) || near(k, len(next)) || near(k, offsetIndexEnd) || near(k, want) {
			requireSameLog(t, before, snapshotLog(t, l, mem), fmt.Sprintf("room for %d bytes", k))
		}
	}
	mem.SetCapacity(mem.Used() + int64(want))
	res := appendBatch(t, l, next)
	require.Equal(t, before.end, res.BaseOffset)
	require.Zero(t, mem.Free())
	wire.SetBaseOffset(next, res.BaseOffset)
	batches = append(batches, next)
	mem.SetCapacity(-1)
	require.NoError(t, l.Close())
	mem.Crash()
	l = openLog(t, mem, "/p", opts)
	got, err := l.Read(0, 1<<30, nil)
	require.NoError(t, err)
	require.Equal(t, bytes.Join(batches, nil), got)
	requireReadable(t, l)
	require.NoError(t, l.Close())
}

// fill appends batches until the file system has no room for the next,
// and returns them as stored and the one refused.
func fill(t *testing.T, l *Log, ts int64) (appended [][]byte, refused []byte) {
	t.Helper()
	for i := 0; ; i++ {
		b := makeBatch(t, 2, 150, ts+int64(i))
		end := l.EndOffset()
		_, err := l.Append(b)
		if err != nil {
			require.ErrorIs(t, err, ErrNoSpace)
			require.NoError(t, l.failed)
			require.Equal(t, end, l.EndOffset())
			wire.SetBaseOffset(b, end)
			return appended, b
		}
		appended = append(appended, b)
		require.Less(t, i, 10000, "the file system never filled")
	}
}

// TestFullFileSystem fills a log's file system: reads go on, retention and
// DeleteBefore free room, and appends resume, with no reopen.
func TestFullFileSystem(t *testing.T) {
	mem := NewMemFS()
	clock := newClock()
	opts := testOptions(clock, func(c *Config) {
		c.SegmentBytes = 2000
		c.IndexIntervalBytes = 500
		c.RetentionBytes = 5000
		c.RetentionMs = -1
	})
	l := openLog(t, mem, "/p", opts)
	mem.SetCapacity(mem.Used() + 12000)
	batches, refused := fill(t, l, 1000)
	require.Greater(t, len(l.Segments()), 4)

	// Reads, searches and scans need no room.
	got, err := l.Read(0, 1<<30, nil)
	require.NoError(t, err)
	require.Equal(t, bytes.Join(batches, nil), got)
	requireReadable(t, l)
	offset, _, err := l.OffsetForTimestamp(1000 + 5)
	require.NoError(t, err)
	require.Positive(t, offset)
	headers := 0
	require.NoError(t, l.ScanHeaders(0, func(wire.Header) error { headers++; return nil }))
	require.Equal(t, len(batches), headers)
	if err := l.Flush(l.EndOffset()); err != nil {
		require.ErrorIs(t, err, ErrNoSpace, "a flush may find no room for index entries, never fail")
	}
	require.NoError(t, l.failed)

	// Retention frees room, and the refused batch goes in where it would have.
	deleted, err := l.ApplyRetention()
	require.NoError(t, err)
	require.Positive(t, deleted)
	require.Positive(t, mem.Free())
	res := appendBatch(t, l, refused)
	require.Equal(t, l.EndOffset()-2, res.BaseOffset)

	// Full again: DeleteBefore frees it all, the active segment included.
	more, refused := fill(t, l, 2000)
	require.NotEmpty(t, more)
	require.NoError(t, l.DeleteBefore(l.EndOffset()))
	require.Equal(t, l.EndOffset(), l.StartOffset())
	require.Len(t, l.Segments(), 1)
	require.Zero(t, l.Size())
	res = appendBatch(t, l, refused)
	require.Equal(t, l.StartOffset(), res.BaseOffset)
	require.NoError(t, l.Close())
	mem.SetCapacity(-1)
	o := opts
	o.RecoveryPoint = l.RecoveryPoint()
	o.LogStartOffset = res.BaseOffset
	l = openLog(t, mem, "/p", o)
	got, err = l.Read(res.BaseOffset, 1<<30, nil)
	require.NoError(t, err)
	require.Equal(t, refused, got)
	require.NoError(t, l.Close())
}

// TestDeleteBeforeWithoutRoomForASegment deletes everything of a log whose
// only segment fills the file system, so that not even an empty new
// segment finds room: the start offset rises, the segment stays unread,
// and a later roll (by MaybeRoll, once there is room) and retention
// delete it.
func TestDeleteBeforeWithoutRoomForASegment(t *testing.T) {
	mem := NewMemFS()
	opts := testOptions(newClock(), func(c *Config) { c.RetentionMs = -1 })
	l := openLog(t, mem, "/p", opts)
	mem.SetCapacity(mem.Used() + 3000)
	batches, _ := fill(t, l, 1000)
	require.Len(t, l.Segments(), 1)
	mem.SetCapacity(mem.Used()) // not a byte left
	end := l.EndOffset()

	require.NoError(t, l.DeleteBefore(end))
	require.Equal(t, end, l.StartOffset())
	require.Equal(t, end, l.EndOffset())
	require.Len(t, l.Segments(), 1, "no room for the segment that takes the active one's place")
	require.NoError(t, l.DeleteBefore(end), "a second try finds no room either")
	require.ErrorIs(t, l.MaybeRoll(), ErrNoSpace, "nor does MaybeRoll, which is undone")
	require.NoError(t, l.failed)
	require.Len(t, l.Segments(), 1)
	got, err := l.Read(end, 1<<30, nil)
	require.NoError(t, err)
	require.Empty(t, got)
	_, err = l.Read(0, 1, nil)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
	_, _, err = l.OffsetForTimestamp(0)
	require.ErrorIs(t, err, ErrNotFound)
	require.NoError(t, l.ScanHeaders(0, func(wire.Header) error { return fmt.Errorf("no batch is readable") }))

	mem.SetCapacity(mem.Used() + 100) // room for the new files and the old one's last index entries
	require.NoError(t, l.MaybeRoll())
	require.Len(t, l.Segments(), 2)
	deleted, err := l.ApplyRetention()
	require.NoError(t, err)
	require.Equal(t, 1, deleted, "retention deletes a segment below the start offset")
	require.Zero(t, l.Size())
	require.Greater(t, mem.Free(), int64(len(bytes.Join(batches, nil))-1))
	res := appendBatch(t, l, makeBatch(t, 1, 10, 5000))
	require.Equal(t, end, res.BaseOffset)
	require.NoError(t, l.Close())
}

// TestTruncateToOnAFullFileSystem empties a log on a file system with no
// room: in place when a segment starts where the log is to start again,
// which needs none, else with a new segment that finds none, and then the
// log is left as it was.
func TestTruncateToOnAFullFileSystem(t *testing.T) {
	mem := NewMemFS()
	opts := testOptions(newClock(), func(c *Config) { c.SegmentBytes = 1000 })
	l := openLog(t, mem, "/p", opts)
	mem.SetCapacity(mem.Used() + 4000)
	fill(t, l, 1000)
	require.Greater(t, len(l.Segments()), 2)
	mem.SetCapacity(mem.Used())

	// The first batch holds offsets 0 and 1: truncating to 1 empties the
	// log to start at 1, where no segment starts.
	require.NoError(t, l.DeleteBefore(1))
	before := snapshotLog(t, l, mem)
	err := l.TruncateTo(1)
	require.ErrorIs(t, err, ErrNoSpace)
	require.NoError(t, l.failed)
	requireSameLog(t, before, snapshotLog(t, l, mem), "truncate to 1")

	// Truncating to 0 reuses the first segment in place.
	require.NoError(t, l.TruncateTo(0))
	require.Equal(t, int64(0), l.StartOffset())
	require.Equal(t, int64(0), l.EndOffset())
	require.Len(t, l.Segments(), 1)
	res := appendBatch(t, l, makeBatch(t, 1, 10, 5000))
	require.Zero(t, res.BaseOffset)
	require.NoError(t, l.Close())
	o := opts
	o.RecoveryPoint = l.RecoveryPoint()
	mem.Crash()
	l = openLog(t, mem, "/p", o)
	require.Equal(t, int64(1), l.EndOffset())
	require.NoError(t, l.Close())
}

// TestCloseOnAFullFileSystem closes a log whose index entries find no room:
// Close reports ErrNoSpace but fsyncs the batches, so a crash loses none,
// and the next Open rebuilds the indexes from the recovery point.
func TestCloseOnAFullFileSystem(t *testing.T) {
	mem := NewMemFS()
	opts := testOptions(newClock(), func(c *Config) { c.IndexIntervalBytes = 0 })
	l := openLog(t, mem, "/p", opts)
	var batches [][]byte
	for i := 0; i < 6; i++ {
		b := makeBatch(t, 1, 50, int64(1000+i))
		res := appendBatch(t, l, b)
		wire.SetBaseOffset(b, res.BaseOffset)
		batches = append(batches, b)
		if i == 1 {
			require.NoError(t, l.Flush(l.EndOffset()))
		}
		if i == 3 {
			require.NoError(t, l.Roll()) // a segment the directory does not hold durably yet
		}
	}
	recoveryPoint := l.RecoveryPoint()
	mem.SetCapacity(mem.Used())
	err := l.Close()
	require.ErrorIs(t, err, ErrNoSpace)
	require.NoError(t, l.failed)
	require.Equal(t, recoveryPoint, l.RecoveryPoint(), "the indexes do not cover the batches above it")
	mem.Crash()
	mem.SetCapacity(-1)
	o := opts
	o.RecoveryPoint = l.RecoveryPoint()
	l = openLog(t, mem, "/p", o)
	got, err := l.Read(0, 1<<30, nil)
	require.NoError(t, err)
	require.Equal(t, bytes.Join(batches, nil), got, "every batch was fsynced")
	requireReadable(t, l)
	require.NoError(t, l.Close())
}

// TestOpenOnAFullFileSystem recovers a log after a crash, with a damaged
// index to rebuild below the recovery point and a tail to validate above
// it, on a file system with room for k bytes, for every k up to what the
// rebuilt indexes take. An Open without room fails with ErrNoSpace, not a
// corruption, and leaves the batches as they were and no index it only
// began; given room, Open recovers every synced batch. A clean open needs
// no room at all.
func TestOpenOnAFullFileSystem(t *testing.T) {
	opts := testOptions(newClock(), func(c *Config) {
		c.SegmentBytes = 1200
		c.IndexIntervalBytes = 0
	})
	// setup leaves a crashed log, its recovery point, and its batches up
	// to it.
	setup := func() (*MemFS, Options, [][]byte) {
		mem := NewMemFS()
		l := openLog(t, mem, "/p", opts)
		var batches [][]byte
		for i := 0; i < 14; i++ {
			b := makeBatch(t, 1+i%2, 100+20*i, int64(1000+i))
			res := appendBatch(t, l, b)
			wire.SetBaseOffset(b, res.BaseOffset)
			batches = append(batches, b)
			if i == 10 {
				require.NoError(t, l.Flush(l.EndOffset()))
			}
		}
		require.Greater(t, len(l.Segments()), 3)
		o := opts
		o.RecoveryPoint = l.Segments()[2].NextOffset
		segs := l.Segments()
		mem.Crash()
		// A torn index, and indexes lost, below the recovery point and above.
		indexOf := func(i int, ext string) string { return strings.TrimSuffix(segs[i].Path, logExt) + ext }
		truncateFile(t, mem, indexOf(0, indexExt), OffsetIndexEntrySize+3)
		for _, i := range []int{1, 2, len(segs) - 1} {
			for _, ext := range []string{indexExt, timeIndexExt} {
				if err := mem.Remove(indexOf(i, ext)); !errors.Is(err, fs.ErrNotExist) {
					require.NoError(t, err)
				}
			}
		}
		return mem, o, batches[:11]
	}
	// What an Open with room makes of the files.
	mem, o, _ := setup()
	l := openLog(t, mem, "/p", o)
	wantSegments, wantFiles := l.Segments(), memTreeOf(t, mem, "/p")
	require.NoError(t, l.Close())

	needed := -1
	for k := 0; needed < 0; k++ {
		msg := fmt.Sprintf("room for %d bytes", k)
		mem, o, want := setup()
		before := memTreeOf(t, mem, "/p")
		mem.SetCapacity(mem.Used() + int64(k))
		l, err := Open(mem, "/p", o)
		if err == nil {
			needed = k
		} else {
			require.ErrorIs(t, err, ErrNoSpace, msg)
			var ce *CorruptionError
			require.False(t, errors.As(err, &ce), "%s: %v", msg, err)
			after := memTreeOf(t, mem, "/p")
			for name, b := range before {
				if strings.HasSuffix(name, logExt) {
					require.True(t, bytes.Equal(b, after[name]), "%s: %s untouched", msg, name)
				}
			}
			for name := range after {
				_, ok := before[name]
				require.True(t, ok || !strings.HasSuffix(name, logExt) && !strings.HasSuffix(name, ".tmp"), "%s: %s was not there before", msg, name)
			}
			mem.SetCapacity(-1)
			l = openLog(t, mem, "/p", o)
		}
		// Nothing the failed Open left is trusted that a full rebuild
		// would not have made.
		require.Equal(t, wantSegments, l.Segments(), msg)
		require.Equal(t, wantFiles, memTreeOf(t, mem, "/p"), msg)
		got, err := l.Read(0, 1<<30, nil)
		require.NoError(t, err, msg)
		require.Equal(t, bytes.Join(want, nil), got, msg)
		requireReadable(t, l)
		mem.SetCapacity(-1)
		require.NoError(t, l.Close())

		// Closed cleanly, it opens on a file system with no room left.
		mem.SetCapacity(mem.Used())
		o.RecoveryPoint = l.RecoveryPoint()
		l = openLog(t, mem, "/p", o)
		require.Equal(t, int64(0), l.Recovery().BytesValidated, msg)
		got, err = l.Read(0, 1<<30, nil)
		require.NoError(t, err, msg)
		require.Equal(t, bytes.Join(want, nil), got, msg)
		_, err = l.Append(makeBatch(t, 1, 10, 9000))
		require.ErrorIs(t, err, ErrNoSpace, msg)
		mem.SetCapacity(-1)
		require.NoError(t, l.Close())
	}
	require.Greater(t, needed, 50, "the indexes take room")
}

// TestSyncErrorsAreFailures injects ENOSPC into an fsync: Linux reports it
// so on some file systems when writeback finds no room, and written data
// may be lost. It is a failure, never ErrNoSpace: the log fails.
func TestSyncErrorsAreFailures(t *testing.T) {
	tests := []struct {
		name  string
		flush func(l *Log) error
	}{
		{"flush", func(l *Log) error { return l.Flush(l.EndOffset()) }},
		{"flush job", func(l *Log) error {
			j, err := l.StartFlush()
			if err != nil {
				return err
			}
			return l.FinishFlush(j, j.Run())
		}},
		{"close", func(l *Log) error { return l.Close() }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			efs := NewErrorFS(NewMemFS())
			efs.InjectError(syscall.ENOSPC)
			efs.InjectWritesOnly(true)
			// No index entries: the first write the flush makes is the fsync.
			l := openLog(t, efs, "/p", testOptions(newClock(), func(c *Config) { c.IndexIntervalBytes = 1 << 20 }))
			for i := 0; i < 3; i++ {
				appendBatch(t, l, makeBatch(t, 1, 50, int64(i)))
			}
			efs.InjectAt(1)
			err := tc.flush(l)
			require.ErrorIs(t, err, syscall.ENOSPC)
			require.NotErrorIs(t, err, ErrNoSpace)
			require.Contains(t, err.Error(), "sync")
			require.EqualValues(t, 1, efs.Injected())
			require.Error(t, l.failed, "an fsync error fails the log")
			require.Zero(t, l.RecoveryPoint())
			if tc.name != "close" {
				_, err = l.Append(makeBatch(t, 1, 50, 9))
				require.ErrorIs(t, err, syscall.ENOSPC, "refused with the sticky error")
				require.NotErrorIs(t, err, ErrNoSpace)
			}
		})
	}
}

// TestNoSpaceAtEveryWrite fails each write of a run of opens, appends,
// rolls, flushes and a close in turn with ENOSPC (a torn write in the
// second pass). A write, create or growing truncate so refused gives
// ErrNoSpace, leaves the log as it was and usable, and the same call made
// again succeeds; an fsync so refused, or a cut that undoing needs, fails
// the log. Either way, a crash then keeps everything flushed.
func TestNoSpaceAtEveryWrite(t *testing.T) {
	opts := testOptions(newClock(), func(c *Config) {
		c.SegmentBytes = 700
		c.IndexIntervalBytes = 0
		c.FlushMessages = 10
	})
	batches := make([][]byte, 24)
	for i := range batches {
		batches[i] = makeBatch(t, 1+i%3, 40*(i%5), int64(i))
	}
	// run returns what was appended and flushed before the first failure,
	// whether it failed, and whether it ended in a Close that found no
	// room, which still fsyncs every batch.
	run := func(t *testing.T, mem *MemFS, efs *ErrorFS, msg string) (appended [][]byte, flushed int64, failed, closeFull bool) {
		var l *Log
		var err error
		for {
			if l, err = Open(efs, "/p", opts); !errors.Is(err, ErrNoSpace) {
				break
			}
		}
		if err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC, msg)
			return nil, 0, true, false
		}
		// step runs op, again when a full file system refused it, which
		// must have left the log as it was (a flush may have synced
		// part of the log, and made no other change). It reports whether
		// the log failed.
		step := func(op func() error, whole bool) bool {
			before := snapshotLog(t, l, mem)
			err := op()
			if err == nil {
				return false
			}
			require.ErrorIs(t, err, syscall.ENOSPC, msg)
			if !errors.Is(err, ErrNoSpace) {
				require.Error(t, l.failed, "%s: %v", msg, err)
				return true
			}
			require.NoError(t, l.failed, msg)
			after := snapshotLog(t, l, mem)
			if whole {
				// An append's flush may have synced sealed segments'
				// indexes before it found no room: progress, kept.
				for _, s := range []logSnapshot{before, after} {
					for i := range s.marks[:len(s.marks)-1] {
						s.marks[i].state.indexesDirty = false
					}
				}
				requireSameLog(t, before, after, msg)
			} else {
				// A flush may have written index entries, and synced, before
				// it found no room: progress, kept. The batches are as they
				// were, and the recovery point has not moved.
				require.Equal(t, before.recoveryPoint, after.recoveryPoint, msg)
				require.Equal(t, before.data, after.data, msg)
				for name, b := range before.files {
					if strings.HasSuffix(name, logExt) {
						require.True(t, bytes.Equal(b, after.files[name]), "%s: %s", msg, name)
					}
				}
			}
			require.NoError(t, op(), "%s: the same call again", msg)
			return false
		}
		for i, b := range batches {
			var res AppendResult
			if step(func() (err error) {
				res, err = l.Append(bytes.Clone(b))
				return err
			}, true) {
				return appended, flushed, true, false
			}
			b = bytes.Clone(b)
			wire.SetBaseOffset(b, res.BaseOffset)
			appended = append(appended, b)
			if l.RecoveryPoint() > flushed {
				flushed = l.RecoveryPoint()
			}
			if i%4 == 2 {
				if step(func() error { return l.Flush(l.EndOffset()) }, false) {
					return appended, flushed, true, false
				}
				flushed = l.EndOffset()
			}
			if i%7 == 6 && step(l.Roll, true) {
				return appended, flushed, true, false
			}
		}
		err = l.Close()
		if err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC, msg)
			return appended, flushed, !errors.Is(err, ErrNoSpace), errors.Is(err, ErrNoSpace)
		}
		return appended, l.EndOffset(), false, false
	}
	probe := NewErrorFS(NewMemFS())
	probe.InjectWritesOnly(true)
	_, _, failed, _ := run(t, probe.inner.(*MemFS), probe, "probe")
	require.False(t, failed)
	writes := probe.eligible
	require.Greater(t, writes, int64(60))
	outcomes := map[string]int{}
	for n := int64(1); n <= 2*writes; n++ {
		msg := fmt.Sprintf("write %d of %d", (n-1)%writes+1, writes)
		if n > writes {
			msg += ", torn"
		}
		mem := NewMemFS()
		efs := NewErrorFS(mem)
		efs.InjectError(syscall.ENOSPC)
		efs.InjectWritesOnly(true)
		if n > writes {
			efs.TornWrites(rand.New(rand.NewPCG(uint64(n), 3)))
		}
		efs.InjectAt((n-1)%writes + 1)
		appended, flushed, failed, closeFull := run(t, mem, efs, msg)
		require.EqualValues(t, 1, efs.Injected(), msg)
		switch {
		case failed:
			outcomes["failed"]++
		case closeFull:
			outcomes["close found no room"]++
		default:
			outcomes["undone"]++
		}
		mem.Crash()
		l, err := Open(mem, "/p", opts)
		require.NoError(t, err, msg)
		got, err := l.Read(0, 1<<30, nil)
		require.NoError(t, err, msg)
		requireBatchPrefix(t, appended, 0, got, msg)
		require.GreaterOrEqual(t, l.EndOffset(), flushed, msg)
		if closeFull {
			require.Equal(t, bytes.Join(appended, nil), got, "%s: Close fsyncs every batch", msg)
		}
		requireReadable(t, l)
		require.NoError(t, l.Close())
	}
	t.Logf("outcomes: %v", outcomes)
	require.Positive(t, outcomes["failed"])
	require.Positive(t, outcomes["undone"])
	require.Positive(t, outcomes["close found no room"])
}

func TestNoSpaceClassifies(t *testing.T) {
	pathErr := func(errno error) error { return &fs.PathError{Op: "write", Path: "/p/x.log", Err: errno} }
	tests := []struct {
		name string
		err  error
		full bool
	}{
		{"nil", nil, false},
		{"ENOSPC", pathErr(syscall.ENOSPC), true},
		{"EDQUOT", pathErr(syscall.EDQUOT), true},
		{"wrapped ENOSPC", fmt.Errorf("disk: append: %w", pathErr(syscall.ENOSPC)), true},
		{"EIO", pathErr(syscall.EIO), false},
		{"injected", pathErr(ErrInjected), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := noSpace(tc.err)
			require.Equal(t, tc.full, errors.Is(err, ErrNoSpace))
			require.ErrorIs(t, err, tc.err, "the cause is kept")
			if tc.err != nil {
				require.Equal(t, tc.err.Error(), err.Error(), "the message is the cause's")
			}
			require.Equal(t, err, noSpace(err), "marking twice changes nothing")
		})
	}
}

// TestStartFlushOnAFullFileSystem starts a flush whose index entries, enough
// for it to write them, find no room: no job starts, the log stays
// usable, and the next start, given room, goes through.
func TestStartFlushOnAFullFileSystem(t *testing.T) {
	mem := NewMemFS()
	l := openLog(t, mem, "/p", testOptions(newClock(), func(c *Config) { c.IndexIntervalBytes = 0 }))
	for i := 0; i < groupCommitIndexEntries; i++ {
		appendBatch(t, l, makeBatch(t, 1, 50, int64(i)))
	}
	mem.SetCapacity(mem.Used())
	_, err := l.StartFlush()
	require.ErrorIs(t, err, ErrNoSpace)
	require.NoError(t, l.failed)
	require.Nil(t, l.flushing)
	require.Zero(t, l.RecoveryPoint())
	mem.SetCapacity(-1)
	j, err := l.StartFlush()
	require.NoError(t, err)
	require.NoError(t, l.FinishFlush(j, j.Run()))
	require.Equal(t, l.EndOffset(), l.RecoveryPoint())
	require.NoError(t, l.Close())
}
