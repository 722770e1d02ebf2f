package disk

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/wire"
)

// makeBatch builds a batch of count records with values of valueSize bytes
// and timestamps ts, ts+1, ...
func makeBatch(t testing.TB, count, valueSize int, ts int64) []byte {
	t.Helper()
	b := wire.NewBuilder(wire.NoProducer)
	value := make([]byte, valueSize)
	for i := range value {
		value[i] = byte(i)
	}
	for i := 0; i < count; i++ {
		b.Append(ts+int64(i), nil, value, nil)
	}
	out, err := b.AppendTo(nil)
	require.NoError(t, err)
	return out
}

// fsCase is one file system the log tests run on.
type fsCase struct {
	name string
	new  func(t testing.TB) (FS, string)
}

var fsCases = []fsCase{
	{"os", func(t testing.TB) (FS, string) { return OS, path.Join(t.TempDir(), "topic-0") }},
	{"mem", func(t testing.TB) (FS, string) { return NewMemFS(), "/data/topic-0" }},
	{"mem-evicting", func(t testing.TB) (FS, string) {
		return evictingFS{MemFS: NewMemFS(), files: NewFileCache(1)}, "/data/topic-0"
	}},
}

// evictingFS is a MemFS whose logs share a file cache of one descriptor,
// so that nearly every file operation of a log finds its file closed by
// the cache and reopens it: openLog and withFiles give the cache to the
// logs opened on it.
type evictingFS struct {
	*MemFS
	files *FileCache
}

// withFiles gives opts the file cache of an evictingFS.
func withFiles(fs FS, opts Options) Options {
	if e, ok := fs.(evictingFS); ok && opts.Files == nil {
		opts.Files = e.files
	}
	return opts
}

// memOf returns the MemFS under fs, nil on the OS.
func memOf(fs FS) *MemFS {
	switch m := fs.(type) {
	case *MemFS:
		return m
	case evictingFS:
		return m.MemFS
	}
	return nil
}

// testClock is a settable clock for Options.Now.
type testClock struct{ now time.Time }

func (c *testClock) Now() time.Time { return c.now }

func newClock() *testClock { return &testClock{now: time.UnixMilli(1_000_000_000_000)} }

func testOptions(clock *testClock, mutate func(*Config)) Options {
	cfg := DefaultConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	return Options{Config: cfg, LeaderEpoch: NoLeaderEpoch, Now: clock.Now}
}

func openLog(t testing.TB, fs FS, dir string, opts Options) *Log {
	t.Helper()
	l, err := Open(fs, dir, withFiles(fs, opts))
	require.NoError(t, err)
	return l
}

// appendBatch appends a copy of batch and returns the result.
func appendBatch(t testing.TB, l *Log, batch []byte) AppendResult {
	t.Helper()
	res, err := l.Append(append([]byte(nil), batch...))
	require.NoError(t, err)
	return res
}

// requireReadable checks that every offset in [StartOffset, EndOffset)
// resolves, through Read, to the batch holding it.
func requireReadable(t testing.TB, l *Log) {
	t.Helper()
	for off := l.StartOffset(); off < l.EndOffset(); off++ {
		got, err := l.Read(off, 1, nil)
		require.NoError(t, err, "offset %d", off)
		h, err := wire.Validate(got)
		require.NoError(t, err)
		require.Equal(t, h.Size(), len(got), "offset %d: one batch", off)
		require.LessOrEqual(t, h.BaseOffset, off)
		require.GreaterOrEqual(t, h.LastOffset(), off)
	}
}

func TestSegmentForBinarySearch(t *testing.T) {
	segs := []*segment{{baseOffset: 0}, {baseOffset: 10}, {baseOffset: 25}, {baseOffset: 1000}}
	tests := []struct {
		offset int64
		want   int
	}{
		{-1, -1}, {0, 0}, {9, 0}, {10, 1}, {24, 1}, {25, 2}, {999, 2}, {1000, 3}, {1 << 40, 3},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.offset), func(t *testing.T) {
			require.Equal(t, tt.want, segmentFor(segs, tt.offset))
		})
	}
	require.Equal(t, -1, segmentFor(nil, 5))
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		ok     bool
	}{
		{"default", func(*Config) {}, true},
		{"smallest segment", func(c *Config) { c.SegmentBytes = wire.HeaderSize + 14 }, true},
		{"segment too small", func(c *Config) { c.SegmentBytes = wire.HeaderSize + 13 }, false},
		{"segment too large", func(c *Config) { c.SegmentBytes = 1 << 33 }, false},
		{"segment.ms zero", func(c *Config) { c.SegmentMs = 0 }, false},
		{"index interval negative", func(c *Config) { c.IndexIntervalBytes = -1 }, false},
		{"retention.bytes -2", func(c *Config) { c.RetentionBytes = -2 }, false},
		{"retention.ms unlimited", func(c *Config) { c.RetentionMs = -1 }, true},
		{"flush.messages zero", func(c *Config) { c.FlushMessages = 0 }, false},
		{"flush.ms negative", func(c *Config) { c.FlushMs = -1 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.mutate(&c)
			err := c.Validate()
			if tt.ok {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, ErrConfig)
			}
		})
	}
}

func TestAppendRead(t *testing.T) {
	for _, fc := range fsCases {
		t.Run(fc.name, func(t *testing.T) {
			fs, dir := fc.new(t)
			l := openLog(t, fs, dir, testOptions(newClock(), nil))
			require.Equal(t, int64(0), l.EndOffset())
			got, err := l.Read(0, 100, nil)
			require.NoError(t, err)
			require.Empty(t, got)

			b := makeBatch(t, 3, 10, 100)
			res := appendBatch(t, l, b)
			require.Equal(t, AppendResult{BaseOffset: 0, LastOffset: 2, MaxTimestamp: 102, Position: 0}, res)
			res = appendBatch(t, l, b)
			require.Equal(t, int64(3), res.BaseOffset)
			require.Equal(t, int64(len(b)), res.Position)
			require.Equal(t, int64(6), l.EndOffset())

			// One batch at least, even past maxBytes; both when they fit.
			got, err = l.Read(1, 1, nil)
			require.NoError(t, err)
			require.Len(t, got, len(b))
			got, err = l.Read(0, 2*len(b), []byte("x"))
			require.NoError(t, err)
			require.Len(t, got, 1+2*len(b))
			h, err := wire.Validate(got[1+len(b):])
			require.NoError(t, err)
			require.Equal(t, int64(3), h.BaseOffset)

			_, err = l.Read(7, 1, nil)
			require.ErrorIs(t, err, ErrOffsetOutOfRange)
			_, err = l.Read(-1, 1, nil)
			require.ErrorIs(t, err, ErrOffsetOutOfRange)

			// Not exactly one batch, or a damaged one.
			_, err = l.Append(append(append([]byte(nil), b...), 0))
			require.ErrorIs(t, err, ErrNotOneBatch)
			bad := append([]byte(nil), b...)
			bad[len(bad)-1] ^= 1
			_, err = l.Append(bad)
			require.ErrorIs(t, err, wire.ErrBadCRC)
			require.Equal(t, int64(6), l.EndOffset())

			require.NoError(t, l.Close())
			_, err = l.Read(0, 1, nil)
			require.ErrorIs(t, err, ErrClosed)
			_, err = l.Append(b)
			require.ErrorIs(t, err, ErrClosed)
			require.ErrorIs(t, l.Close(), ErrClosed)

			l = openLog(t, fs, dir, Options{Config: DefaultConfig(), RecoveryPoint: 6})
			require.Equal(t, int64(6), l.EndOffset())
			requireReadable(t, l)
			require.NoError(t, l.Delete())
			_, err = fs.Stat(dir)
			require.Error(t, err)
		})
	}
}

// TestReadWithAsksForWhatTheReadMayBring checks that ReadWith asks for a
// buffer of the bytes from the batch holding the offset up to maxBytes or
// the log's end, whichever is nearer (the whole batch at least), and a
// header more, across segments; and that it reads what Read reads, after
// the buffer's prefix.
func TestReadWithAsksForWhatTheReadMayBring(t *testing.T) {
	b := makeBatch(t, 2, 100, 0)
	size := len(b)
	// Two batches a segment, three segments: offsets 0-11.
	l := openLog(t, NewMemFS(), "/p", testOptions(newClock(), func(c *Config) { c.SegmentBytes = int64(2 * size) }))
	for range 6 {
		appendBatch(t, l, b)
	}
	require.Len(t, l.Segments(), 3)
	tests := []struct {
		name     string
		offset   int64
		maxBytes int
		most     int
	}{
		{"the last batch, with room for more", 10, 1 << 20, size},
		{"in the last batch", 11, 1 << 20, size},
		{"to the end, across segments", 1, 1 << 20, 6 * size},
		{"from the middle of a segment", 3, 1 << 20, 5 * size},
		{"up to maxBytes", 0, 3*size + 1, 3*size + 1},
		{"a batch larger than maxBytes", 4, 1, size},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			asked := -1
			got, err := l.ReadWith(tt.offset, tt.maxBytes, func(most int) []byte {
				asked = most
				return append(make([]byte, 0, 3+most), "pre"...)
			})
			require.NoError(t, err)
			require.Equal(t, tt.most+wire.HeaderSize, asked)
			want, err := l.Read(tt.offset, tt.maxBytes, nil)
			require.NoError(t, err)
			require.Equal(t, "pre", string(got[:3]))
			require.Equal(t, want, got[3:])
		})
	}
	called := false
	got, err := l.ReadWith(12, 1<<20, func(int) []byte { called = true; return nil })
	require.NoError(t, err)
	require.Nil(t, got)
	require.False(t, called, "nothing to read at the log's end")
	_, err = l.ReadWith(13, 1<<20, func(int) []byte { called = true; return nil })
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
	require.False(t, called)
}

func TestRollBoundaries(t *testing.T) {
	b := makeBatch(t, 1, 100, 0)
	size := int64(len(b))
	tests := []struct {
		name         string
		segmentBytes int64
		segments     int
	}{
		{"two fit exactly", 2 * size, 2},
		{"one byte short of two", 2*size - 1, 4},
		{"one byte over two", 2*size + 1, 2},
		{"one fits", size, 4},
		{"batch larger than segment", size - 1, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := openLog(t, NewMemFS(), "/p", testOptions(newClock(), func(c *Config) { c.SegmentBytes = tt.segmentBytes }))
			for i := 0; i < 4; i++ {
				appendBatch(t, l, b)
			}
			require.Len(t, l.Segments(), tt.segments)
			for _, s := range l.Segments() {
				require.True(t, s.Size <= max(tt.segmentBytes, size), "segment %+v", s)
			}
			requireReadable(t, l)
		})
	}
}

func TestRollByAge(t *testing.T) {
	clock := newClock()
	l := openLog(t, NewMemFS(), "/p", testOptions(clock, func(c *Config) { c.SegmentMs = time.Hour }))
	ts := clock.now.UnixMilli()
	appendBatch(t, l, makeBatch(t, 1, 10, ts))
	require.NoError(t, l.MaybeRoll())
	require.Len(t, l.Segments(), 1)
	clock.now = clock.now.Add(time.Hour)
	require.NoError(t, l.MaybeRoll())
	require.Len(t, l.Segments(), 1, "exactly segment.ms old is not yet expired")
	clock.now = clock.now.Add(time.Millisecond)
	require.NoError(t, l.MaybeRoll())
	require.Len(t, l.Segments(), 2)
	require.NoError(t, l.MaybeRoll(), "an empty active segment does not roll")
	require.Len(t, l.Segments(), 2)
	appendBatch(t, l, makeBatch(t, 1, 10, ts))
	clock.now = clock.now.Add(2 * time.Hour)
	appendBatch(t, l, makeBatch(t, 1, 10, clock.now.UnixMilli()))
	require.Len(t, l.Segments(), 3, "an append rolls an old segment first")
	require.NoError(t, l.Roll())
	require.Len(t, l.Segments(), 4)
	require.NoError(t, l.Roll())
	require.Len(t, l.Segments(), 4)
	requireReadable(t, l)
}

func TestRetentionBytes(t *testing.T) {
	b := makeBatch(t, 1, 100, 0)
	size := int64(len(b))
	// Four segments of one batch each, the last one active.
	tests := []struct {
		name    string
		limit   int64
		deleted int
	}{
		{"unlimited", -1, 0},
		{"exactly at the limit", 4 * size, 0},
		{"one over", 4*size - 1, 1},
		{"room for two", 2 * size, 2},
		{"zero keeps the active", 0, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := openLog(t, NewMemFS(), "/p", testOptions(newClock(), func(c *Config) {
				c.SegmentBytes = size
				c.RetentionBytes = tt.limit
				c.RetentionMs = -1
			}))
			for i := 0; i < 4; i++ {
				appendBatch(t, l, b)
			}
			n, err := l.ApplyRetention()
			require.NoError(t, err)
			require.Equal(t, tt.deleted, n)
			require.Len(t, l.Segments(), 4-tt.deleted)
			require.Equal(t, int64(tt.deleted), l.StartOffset())
			requireReadable(t, l)
			_, err = l.Read(int64(tt.deleted)-1, 1, nil)
			if tt.deleted > 0 {
				require.ErrorIs(t, err, ErrOffsetOutOfRange)
			}
		})
	}
}

// A config set on an open log applies from the next decision: a smaller
// segment.bytes rolls at the next append, retention.bytes applies at the
// next ApplyRetention; an invalid one changes nothing.
func TestSetConfig(t *testing.T) {
	b := makeBatch(t, 1, 100, 0)
	size := int64(len(b))
	l := openLog(t, NewMemFS(), "/p", testOptions(newClock(), nil))
	for i := 0; i < 3; i++ {
		appendBatch(t, l, b)
	}
	require.Len(t, l.Segments(), 1)
	n, err := l.ApplyRetention()
	require.NoError(t, err)
	require.Zero(t, n)

	bad := l.Config()
	bad.SegmentBytes = 1
	require.ErrorIs(t, l.SetConfig(bad), ErrConfig)
	require.Equal(t, DefaultConfig(), l.Config(), "an invalid config changes nothing")

	c := l.Config()
	c.SegmentBytes, c.RetentionBytes = size, size
	require.NoError(t, l.SetConfig(c))
	require.Equal(t, c, l.Config())
	appendBatch(t, l, b)
	appendBatch(t, l, b)
	require.Len(t, l.Segments(), 3, "rolled at the appends that would pass segment.bytes")
	n, err = l.ApplyRetention()
	require.NoError(t, err)
	require.Equal(t, 2, n, "the log is cut to retention.bytes, keeping the active segment")
	require.Equal(t, int64(4), l.StartOffset())
	requireReadable(t, l)
}

func TestRetentionTime(t *testing.T) {
	clock := newClock()
	now := clock.now.UnixMilli()
	retention := time.Hour.Milliseconds()
	// Segment max timestamps; the last segment is active.
	tests := []struct {
		name    string
		maxTs   []int64
		deleted int
	}{
		{"all fresh", []int64{now, now, now}, 0},
		{"exactly at the limit", []int64{now - retention, now, now}, 0},
		{"one ms over", []int64{now - retention - 1, now, now}, 1},
		{"prefix only", []int64{now - 2*retention, now, now - 2*retention, now}, 1},
		{"active kept", []int64{now - 2*retention, now - 2*retention}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := openLog(t, NewMemFS(), "/p", testOptions(clock, func(c *Config) { c.RetentionMs = time.Hour }))
			for _, ts := range tt.maxTs {
				require.NoError(t, l.Roll())
				appendBatch(t, l, makeBatch(t, 2, 10, ts-1))
			}
			require.Len(t, l.Segments(), len(tt.maxTs))
			n, err := l.ApplyRetention()
			require.NoError(t, err)
			require.Equal(t, tt.deleted, n)
			require.Equal(t, int64(2*tt.deleted), l.StartOffset())
			requireReadable(t, l)
		})
	}
}

func TestSizesSweep(t *testing.T) {
	const interval = 256
	for _, fc := range fsCases {
		t.Run(fc.name, func(t *testing.T) {
			for _, valueSize := range []int{1, interval / 2, interval - 70, interval, interval + 1, 2 * interval, 3*interval - 1, 3 * interval} {
				for _, records := range []int{1, 3} {
					t.Run(fmt.Sprintf("value%d-records%d", valueSize, records), func(t *testing.T) {
						fs, dir := fc.new(t)
						opts := testOptions(newClock(), func(c *Config) {
							c.SegmentBytes = 2048
							c.IndexIntervalBytes = interval
						})
						l := openLog(t, fs, dir, opts)
						var batches [][]byte
						for i := 0; i < 50; i++ {
							b := makeBatch(t, records, valueSize+i%3, int64(i))
							res := appendBatch(t, l, b)
							wire.SetBaseOffset(b, res.BaseOffset)
							batches = append(batches, b)
						}
						check := func() {
							for i, b := range batches {
								for off := int64(i * records); off < int64((i+1)*records); off++ {
									got, err := l.Read(off, 1, nil)
									require.NoError(t, err)
									require.Equal(t, b, got, "offset %d", off)
								}
							}
							// One Read of everything crosses every segment.
							all, err := l.Read(0, 1<<20, nil)
							require.NoError(t, err)
							var want []byte
							for _, b := range batches {
								want = append(want, b...)
							}
							require.Equal(t, want, all)
						}
						check()
						require.Greater(t, len(l.Segments()), 1)
						require.NoError(t, l.Close())
						opts.RecoveryPoint = int64(len(batches) * records)
						l = openLog(t, fs, dir, opts)
						check()
						require.NoError(t, l.Close())
					})
				}
			}
		})
	}
}

func TestOffsetForTimestamp(t *testing.T) {
	for _, fc := range fsCases {
		t.Run(fc.name, func(t *testing.T) {
			fs, dir := fc.new(t)
			l := openLog(t, fs, dir, testOptions(newClock(), func(c *Config) {
				c.SegmentBytes = 1024
				c.IndexIntervalBytes = 100
			}))
			// Batch i holds 4 records with timestamps 10i, 10i+1, 10i+2, 10i+3.
			for i := 0; i < 40; i++ {
				appendBatch(t, l, makeBatch(t, 4, 20, int64(10*i)))
			}
			require.Greater(t, len(l.Segments()), 3)
			for ts := int64(-5); ts < 400; ts++ {
				off, got, err := l.OffsetForTimestamp(ts)
				i, d := ts/10, ts%10
				switch {
				case ts < 0:
					require.NoError(t, err)
					require.Equal(t, int64(0), off)
				case d < 4:
					require.NoError(t, err)
					require.Equal(t, 4*i+d, off, "ts %d", ts)
					require.Equal(t, ts, got)
				case i < 39:
					require.NoError(t, err)
					require.Equal(t, 4*(i+1), off, "ts %d", ts)
					require.Equal(t, 10*(i+1), got)
				default:
					require.ErrorIs(t, err, ErrNotFound, "ts %d", ts)
				}
			}
			require.NoError(t, l.DeleteBefore(6))
			off, got, err := l.OffsetForTimestamp(0)
			require.NoError(t, err)
			require.Equal(t, int64(6), off)
			require.Equal(t, int64(12), got)
			require.NoError(t, l.Close())
		})
	}
}

func TestTruncateTo(t *testing.T) {
	for _, fc := range fsCases {
		t.Run(fc.name, func(t *testing.T) {
			fs, dir := fc.new(t)
			opts := testOptions(newClock(), func(c *Config) { c.SegmentBytes = 600; c.IndexIntervalBytes = 1 })
			l := openLog(t, fs, dir, opts)
			// 20 batches of 5 records: batch i holds [5i, 5i+4].
			for i := 0; i < 20; i++ {
				appendBatch(t, l, makeBatch(t, 5, 20, int64(i)))
			}
			require.NoError(t, l.Sync())
			segs := len(l.Segments())
			require.Greater(t, segs, 3)
			require.NoError(t, l.TruncateTo(200))
			require.Equal(t, int64(100), l.EndOffset())
			require.NoError(t, l.TruncateTo(73))
			require.Equal(t, int64(70), l.EndOffset(), "the batch holding 73 goes")
			require.Equal(t, int64(70), l.RecoveryPoint())
			require.Less(t, len(l.Segments()), segs)
			requireReadable(t, l)
			res := appendBatch(t, l, makeBatch(t, 5, 20, 0))
			require.Equal(t, int64(70), res.BaseOffset)
			require.NoError(t, l.TruncateTo(75))
			require.Equal(t, int64(75), l.EndOffset())
			require.NoError(t, l.DeleteBefore(12))
			require.NoError(t, l.TruncateTo(14))
			require.Equal(t, int64(12), l.EndOffset(), "nothing visible remains: empty at the start")
			require.Equal(t, int64(12), l.StartOffset())
			require.Len(t, l.Segments(), 1)
			res = appendBatch(t, l, makeBatch(t, 5, 20, 0))
			require.Equal(t, int64(12), res.BaseOffset)
			require.NoError(t, l.TruncateTo(3))
			require.Equal(t, int64(3), l.StartOffset())
			require.Equal(t, int64(3), l.EndOffset())
			require.NoError(t, l.Close())
			l = openLog(t, fs, dir, Options{Config: opts.Config, LogStartOffset: 3})
			require.Equal(t, int64(3), l.StartOffset())
			require.Equal(t, int64(3), l.EndOffset())
			require.NoError(t, l.Close())
		})
	}
}

func TestDeleteBefore(t *testing.T) {
	l := openLog(t, NewMemFS(), "/p", testOptions(newClock(), func(c *Config) { c.SegmentBytes = 300 }))
	for i := 0; i < 10; i++ {
		appendBatch(t, l, makeBatch(t, 2, 50, 0))
	}
	require.ErrorIs(t, l.DeleteBefore(21), ErrOffsetOutOfRange)
	before := len(l.Segments())
	require.NoError(t, l.DeleteBefore(3))
	require.Equal(t, int64(3), l.StartOffset())
	_, err := l.Read(2, 1, nil)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
	got, err := l.Read(3, 1, nil)
	require.NoError(t, err)
	h, err := wire.Validate(got)
	require.NoError(t, err)
	require.Equal(t, int64(2), h.BaseOffset, "the batch holding the start offset")
	require.NoError(t, l.DeleteBefore(1), "lower does nothing")
	require.Equal(t, int64(3), l.StartOffset())
	require.NoError(t, l.DeleteBefore(20))
	require.Len(t, l.Segments(), 1)
	require.Less(t, 1, before)
	require.Equal(t, int64(20), l.Segments()[0].BaseOffset)
	require.Equal(t, int64(0), l.Size())
	res := appendBatch(t, l, makeBatch(t, 2, 50, 0))
	require.Equal(t, int64(20), res.BaseOffset)
}

func TestScanHeaders(t *testing.T) {
	l := openLog(t, NewMemFS(), "/p", testOptions(newClock(), func(c *Config) { c.SegmentBytes = 300 }))
	for i := 0; i < 10; i++ {
		appendBatch(t, l, makeBatch(t, 3, 50, int64(i)))
	}
	var bases []int64
	require.NoError(t, l.ScanHeaders(7, func(h wire.Header) error {
		bases = append(bases, h.BaseOffset)
		return nil
	}))
	require.Equal(t, []int64{6, 9, 12, 15, 18, 21, 24, 27}, bases)
	stop := errors.New("stop")
	require.ErrorIs(t, l.ScanHeaders(0, func(wire.Header) error { return stop }), stop)
	require.NoError(t, l.ScanHeaders(30, func(wire.Header) error { return stop }))
}

func TestFlushPolicy(t *testing.T) {
	clock := newClock()
	l := openLog(t, NewMemFS(), "/p", testOptions(clock, func(c *Config) { c.FlushMessages = 5 }))
	appendBatch(t, l, makeBatch(t, 3, 1, 0))
	require.Equal(t, int64(0), l.RecoveryPoint())
	appendBatch(t, l, makeBatch(t, 2, 1, 0))
	require.Equal(t, int64(5), l.RecoveryPoint())

	l = openLog(t, NewMemFS(), "/p", testOptions(clock, func(c *Config) { c.FlushMs = time.Second }))
	appendBatch(t, l, makeBatch(t, 3, 1, 0))
	require.Equal(t, int64(0), l.RecoveryPoint())
	clock.now = clock.now.Add(time.Second)
	appendBatch(t, l, makeBatch(t, 3, 1, 0))
	require.Equal(t, int64(6), l.RecoveryPoint())
}

func TestStrayFiles(t *testing.T) {
	fs := NewMemFS()
	l := openLog(t, fs, "/p", testOptions(newClock(), nil))
	appendBatch(t, l, makeBatch(t, 1, 1, 0))
	require.NoError(t, l.Close())
	for _, name := range []string{"x.tmp", SegmentFileName(5, ".log.deleted"), SegmentFileName(9, ".index"), "leader-epoch-checkpoint"} {
		require.NoError(t, fs.WriteFile("/p/"+name, []byte("junk")))
	}
	// Indexes are derived: a log without them reopens.
	require.NoError(t, fs.Remove("/p/"+SegmentFileName(0, ".index")))
	l = openLog(t, fs, "/p", Options{Config: DefaultConfig(), RecoveryPoint: 1})
	names, err := fs.ReadDir("/p")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{SegmentFileName(0, ".log"), SegmentFileName(0, ".index"), SegmentFileName(0, ".timeindex"), "leader-epoch-checkpoint"}, names)
	requireReadable(t, l)
}

// A batch whose partition leader epoch is past the partition's is refused
// and changes nothing; one at it or below is appended as it is.
func TestAppendRefusesLeaderEpochPastThePartitions(t *testing.T) {
	for _, tt := range []struct {
		partition, batch int32
		ok               bool
	}{
		{NoLeaderEpoch, NoLeaderEpoch, true},
		{NoLeaderEpoch, 0, false},
		{3, 2, true},
		{3, 3, true},
		{3, 4, false},
	} {
		t.Run(fmt.Sprintf("partition %d batch %d", tt.partition, tt.batch), func(t *testing.T) {
			opts := testOptions(newClock(), nil)
			opts.LeaderEpoch = tt.partition
			l := openLog(t, NewMemFS(), "/p", opts)
			appendBatch(t, l, makeBatch(t, 1, 10, 1))
			b := makeBatch(t, 2, 10, 2)
			wire.SetLeaderEpoch(b, tt.batch)
			_, err := l.Append(b)
			if !tt.ok {
				require.ErrorIs(t, err, wire.ErrLeaderEpoch)
				require.Equal(t, int64(1), l.EndOffset(), "nothing appended")
				appendBatch(t, l, makeBatch(t, 1, 10, 3))
				require.Equal(t, int64(2), l.EndOffset(), "the log goes on")
				return
			}
			require.NoError(t, err)
			got, err := l.Read(1, 1, nil)
			require.NoError(t, err)
			h, err := wire.ParseHeader(got)
			require.NoError(t, err)
			require.Equal(t, tt.batch, h.LeaderEpoch)
		})
	}
}

func TestCorruptionOnRecoveryAndRead(t *testing.T) {
	b := makeBatch(t, 2, 100, 0)
	size := int64(len(b))
	build := func(t *testing.T) (*MemFS, Options) {
		fs := NewMemFS()
		opts := testOptions(newClock(), func(c *Config) { c.SegmentBytes = 3 * size })
		l := openLog(t, fs, "/p", opts)
		for i := 0; i < 9; i++ {
			appendBatch(t, l, b)
		}
		require.NoError(t, l.Close())
		require.Len(t, l.Segments(), 3)
		opts.RecoveryPoint = 18
		return fs, opts
	}
	t.Run("tail segment cut", func(t *testing.T) {
		fs, opts := build(t)
		require.NoError(t, fs.Corrupt("/p/"+SegmentFileName(12, ".log"), size+70))
		opts.RecoveryPoint = 13 // an unclean stop: the tail is validated
		l := openLog(t, fs, "/p", opts)
		require.Equal(t, int64(14), l.EndOffset(), "cut at the second batch of the tail")
		requireReadable(t, l)
	})
	t.Run("tail segment cut at a leader epoch below -1", func(t *testing.T) {
		fs, opts := build(t)
		require.NoError(t, fs.Corrupt("/p/"+SegmentFileName(12, ".log"), size+13))
		opts.RecoveryPoint = 13
		l := openLog(t, fs, "/p", opts)
		require.Equal(t, int64(14), l.EndOffset(), "the CRC does not cover the epoch; its range does")
		requireReadable(t, l)
	})
	t.Run("tail segment cut at a leader epoch past the partition's", func(t *testing.T) {
		fs, opts := build(t)
		// The checkpoint of a partition whose leader epochs were all
		// truncated away: it has none.
		require.NoError(t, fs.WriteFile("/p/"+LeaderEpochCheckpointFile, []byte("0\n0\n")))
		f, err := fs.OpenFile("/p/"+SegmentFileName(12, ".log"), os.O_RDWR, 0)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte{0x7f}, size+12) // epoch 0x7fffffff, where the partition has none
		require.NoError(t, err)
		require.NoError(t, f.Close())
		opts.RecoveryPoint = 13
		l := openLog(t, fs, "/p", opts)
		require.Equal(t, int64(14), l.EndOffset())
		requireReadable(t, l)
		require.Empty(t, l.Epochs())
		b, err := fs.ReadFile("/p/" + LeaderEpochCheckpointFile)
		require.NoError(t, err)
		require.Equal(t, "0\n0\n", string(b))
	})
	t.Run("tail segment kept at a leader epoch past the partition's without a checkpoint", func(t *testing.T) {
		fs, opts := build(t)
		f, err := fs.OpenFile("/p/"+SegmentFileName(12, ".log"), os.O_RDWR, 0)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte{0x7f}, 2*size+12) // the last batch's epoch: 0x7fffffff
		require.NoError(t, err)
		require.NoError(t, f.Close())
		opts.RecoveryPoint = 13
		l := openLog(t, fs, "/p", opts)
		require.Equal(t, int64(18), l.EndOffset(), "without a checkpoint no epoch is damage")
		requireReadable(t, l)
		require.Equal(t, []EpochEntry{{math.MaxInt32, 16}}, l.Epochs(), "rebuilt from the headers")
		b, err := fs.ReadFile("/p/" + LeaderEpochCheckpointFile)
		require.NoError(t, err)
		require.Equal(t, "0\n1\n2147483647 16\n", string(b))
	})
	t.Run("clean tail trusted", func(t *testing.T) {
		fs, opts := build(t)
		require.NoError(t, fs.Corrupt("/p/"+SegmentFileName(12, ".log"), size+70))
		l := openLog(t, fs, "/p", opts)
		require.Equal(t, int64(18), l.EndOffset(), "a clean open reads no record")
		got, err := l.Read(14, 1, nil)
		require.NoError(t, err)
		_, err = wire.Validate(got)
		require.ErrorIs(t, err, wire.ErrBadCRC, "the consumer catches it")
	})
	t.Run("stale recovery point validates the tail", func(t *testing.T) {
		fs, opts := build(t)
		require.NoError(t, fs.Corrupt("/p/"+SegmentFileName(12, ".log"), size+70))
		opts.RecoveryPoint = 30 // past the end: the checkpoint is stale
		l := openLog(t, fs, "/p", opts)
		require.Equal(t, int64(14), l.EndOffset())
		require.Equal(t, int64(14), l.RecoveryPoint())
		requireReadable(t, l)
	})
	// A bit flipped in a header field that the structure check sees makes
	// reads of that batch fail; one in a record is returned as stored, and
	// the consumer's CRC check catches it.
	seg6 := "/p/" + SegmentFileName(6, ".log")
	for _, tt := range []struct {
		name string
		at   int64 // byte of the second batch of segment 6 (offsets 8, 9)
	}{
		{"base offset", 7},
		{"length", 11},
		{"leader epoch", 13},
		{"magic", 16},
		{"record count", 60},
	} {
		t.Run("older segment "+tt.name+" fails reads", func(t *testing.T) {
			fs, opts := build(t)
			require.NoError(t, fs.Corrupt(seg6, size+tt.at))
			l := openLog(t, fs, "/p", opts)
			require.Equal(t, int64(18), l.EndOffset())
			for _, off := range []int64{8, 9} {
				got, err := l.Read(off, 1, nil)
				var ce *CorruptionError
				require.ErrorAs(t, err, &ce, "offset %d", off)
				require.Equal(t, seg6, ce.Path)
				require.Equal(t, size, ce.Offset)
				require.Empty(t, got)
			}
			got, err := l.Read(0, 1<<20, nil)
			require.NoError(t, err, "a read stops before the damaged batch")
			require.Len(t, got, int(4*size))
			got, err = l.Read(6, 1<<20, nil)
			require.NoError(t, err)
			require.Len(t, got, int(size))
			_, err = wire.Validate(got)
			require.NoError(t, err)
			got, err = l.Read(12, 1, nil)
			require.NoError(t, err, "later segments read")
			require.Len(t, got, int(size))
		})
	}
	t.Run("older segment record returned as stored", func(t *testing.T) {
		fs, opts := build(t)
		require.NoError(t, fs.Corrupt(seg6, size+70))
		l := openLog(t, fs, "/p", opts)
		require.Equal(t, int64(18), l.EndOffset())
		got, err := l.Read(8, 1, nil)
		require.NoError(t, err)
		require.Len(t, got, int(size))
		h, err := wire.ParseHeader(got)
		require.NoError(t, err)
		require.Equal(t, int64(8), h.BaseOffset)
		_, err = wire.Validate(got)
		require.ErrorIs(t, err, wire.ErrBadCRC, "the consumer catches it")
		require.ErrorIs(t, wire.Records(got, func(wire.Record) error { return nil }), wire.ErrBadCRC)
		all, err := l.Read(0, 1<<20, nil)
		require.NoError(t, err)
		require.Len(t, all, int(9*size))
		stored, err := fs.ReadFile(seg6)
		require.NoError(t, err)
		require.Equal(t, stored[size:2*size], got)
	})
	t.Run("older segment header fails scans", func(t *testing.T) {
		fs, opts := build(t)
		require.NoError(t, fs.Corrupt("/p/"+SegmentFileName(6, ".log"), size+16)) // magic
		l := openLog(t, fs, "/p", opts)
		var ce *CorruptionError
		require.ErrorAs(t, l.ScanHeaders(0, func(wire.Header) error { return nil }), &ce)
		require.Equal(t, size, ce.Offset)
		_, _, err := l.OffsetForTimestamp(1)
		require.NoError(t, err)
	})
}

// TestAppendAllocatesNothing appends in-memory batches on a MemFS with an
// index entry at every batch and a rising timestamp, so both indexes are
// written each time: Append itself allocates nothing (the files' and index
// entries' amortised growth stays well below one allocation per append).
func TestAppendAllocatesNothing(t *testing.T) {
	const runs = 2000
	batches := make([][]byte, runs+1)
	for i := range batches {
		batches[i] = makeBatch(t, 4, 100, int64(1000+i))
	}
	l := openLog(t, NewMemFS(), "/p", testOptions(newClock(), func(c *Config) { c.IndexIntervalBytes = 0 }))
	i := 0
	allocs := testing.AllocsPerRun(runs, func() {
		if _, err := l.Append(batches[i]); err != nil {
			t.Fatal(err)
		}
		i++
	})
	require.Equal(t, 0.0, allocs)
	require.Equal(t, int64(4*(runs+1)), l.EndOffset())
	ix := l.active().index
	require.Equal(t, runs+1, ix.Entries(), "an index entry per append")
	require.Equal(t, runs+1, l.active().timeIndex.Entries(), "a time index entry per append")
	require.NoError(t, l.Close())
}

func TestTruncateFullyAndStartAt(t *testing.T) {
	fs := NewMemFS()
	opts := testOptions(newClock(), nil)
	opts.LeaderEpoch = 3
	l := openLog(t, fs, "/p", opts)
	for i := range 3 {
		b := makeBatch(t, 2, 10, 1)
		wire.SetLeaderEpoch(b, int32(i))
		appendBatch(t, l, b)
	}
	require.Equal(t, int32(2), l.LatestEpoch())
	require.Error(t, l.TruncateFullyAndStartAt(-1))
	require.NoError(t, l.TruncateFullyAndStartAt(100))
	require.Equal(t, int64(100), l.StartOffset())
	require.Equal(t, int64(100), l.EndOffset())
	require.Empty(t, l.Epochs(), "the epochs of what was emptied go with it")
	require.NoError(t, l.Close())
	opts.LogStartOffset = 100
	l = openLog(t, fs, "/p", opts)
	require.Equal(t, int64(100), l.EndOffset())
	require.Empty(t, l.Epochs())
	require.NoError(t, l.Close())
}
