package disk

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// writebackFS is a MemFS whose .log files record the ranges they are asked
// to write back.
type writebackFS struct {
	*MemFS
	ranges map[string][][2]int64
}

type writebackFile struct {
	File
	fs *writebackFS
}

func (f writebackFile) StartWriteback(offset, n int64) error {
	f.fs.ranges[f.Name()] = append(f.fs.ranges[f.Name()], [2]int64{offset, n})
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
