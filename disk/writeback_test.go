package disk

import (
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// writebackFS is a MemFS whose .log files record the ranges they are asked
// to write back.
type writebackFS struct {
	*MemFS
	ranges map[string][][2]int64
	// dropped records the ranges .log files are asked to drop from the
	// page cache (see pageDropper).
	mu      sync.Mutex
	dropped map[string][][2]int64
}

type writebackFile struct {
	File
	fs *writebackFS
}

func (f writebackFile) StartWriteback(offset, n int64) error {
	f.fs.ranges[f.Name()] = append(f.fs.ranges[f.Name()], [2]int64{offset, n})
	return nil
}

func (f writebackFile) DropPages(offset, n int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.fs.dropped == nil {
		f.fs.dropped = map[string][][2]int64{}
	}
	f.fs.dropped[f.Name()] = append(f.fs.dropped[f.Name()], [2]int64{offset, n})
	return nil
}

func (fs *writebackFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := fs.MemFS.OpenFile(name, flag, perm)
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return writebackFile{File: f, fs: fs}, nil
}

// Appends start writeback of a segment's .log in contiguous ranges of at
// least writebackBytes, from its start, never past what was written.
func TestAppendStartsWriteback(t *testing.T) {
	fs := &writebackFS{MemFS: NewMemFS(), ranges: map[string][][2]int64{}}
	clock := newClock()
	l := openLog(t, fs, "/data/t-0", testOptions(clock, func(c *Config) { c.SegmentBytes = 8 << 20 }))
	defer l.Close()
	batch := makeBatch(t, 30, 1000, clock.now.UnixMilli())
	for range 700 { // about 21 MB: three segments
		appendBatch(t, l, batch)
	}
	require.GreaterOrEqual(t, len(l.segments), 3)
	for _, seg := range l.segments {
		ranges := fs.ranges[seg.path]
		var next int64
		for _, r := range ranges {
			require.Equal(t, next, r[0], "%s: ranges follow each other", seg.path)
			require.GreaterOrEqual(t, r[1], int64(writebackBytes))
			next = r[0] + r[1]
		}
		require.LessOrEqual(t, next, seg.size, "%s: nothing past the end", seg.path)
		require.Less(t, seg.size-next, int64(writebackBytes)+int64(len(batch)), "%s: at most one step left behind", seg.path)
	}
}

// keepWrittenOptions are the options, on clock, of logs that share one
// file cache keeping bound written bytes in the page cache (see KeepWritten).
func keepWrittenOptions(clock *testClock, bound int64) Options {
	files := NewFileCache(0)
	files.KeepWritten(bound)
	opts := testOptions(clock, nil)
	opts.Files = files
	return opts
}

// With KeepWritten, the logs of one cache keep their newest written-back
// bytes, up to the bound between them, and have the older ones dropped from
// the page cache, oldest first; a closed log's files are left alone.
func TestKeepWrittenDropsTheOldestWrittenBytes(t *testing.T) {
	fs := &writebackFS{MemFS: NewMemFS(), ranges: map[string][][2]int64{}}
	const bound = 4 << 20
	clock := newClock()
	opts := keepWrittenOptions(clock, bound)
	a := openLog(t, fs, "/data/t-0", opts)
	b := openLog(t, fs, "/data/t-1", opts)
	defer b.Close()
	batch := makeBatch(t, 30, 1000, clock.now.UnixMilli())
	for range 300 { // about 9 MB each
		appendBatch(t, a, batch)
		appendBatch(t, b, batch)
	}
	sum := func(ranges [][2]int64) (n int64) {
		for _, r := range ranges {
			n += r[1]
		}
		return n
	}
	var written, dropped int64
	for _, l := range []*Log{a, b} {
		path := l.segments[0].path
		drops := fs.dropped[path]
		require.NotEmpty(t, drops, "%s: its oldest bytes are dropped", path)
		var next int64
		for _, r := range drops {
			require.Equal(t, next, r[0], "%s: drops follow each other from the start", path)
			next = r[0] + r[1]
		}
		require.LessOrEqual(t, next, sum(fs.ranges[path]), "%s: only written-back bytes are dropped", path)
		written += sum(fs.ranges[path])
		dropped += sum(drops)
	}
	kept := written - dropped
	require.LessOrEqual(t, kept, int64(bound), "no more than the bound is kept")
	require.Greater(t, kept, int64(bound-2*writebackBytes), "the newest bytes up to the bound are kept")

	// Once a is closed, b's writes drop a's ranges from the account without
	// touching its files.
	aPath := a.segments[0].path
	aDrops := len(fs.dropped[aPath])
	require.NoError(t, a.Close())
	for range 150 {
		appendBatch(t, b, batch)
	}
	require.Len(t, fs.dropped[aPath], aDrops, "a closed log's file is not asked to drop pages")
}
