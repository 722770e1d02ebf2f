package disk

import (
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// socketPair is a connected TCP pair on 127.0.0.1: what the Slice is
// written to, and what reads it.
func socketPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	out, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	in, err := ln.Accept()
	require.NoError(t, err)
	t.Cleanup(func() { _ = out.Close(); _ = in.Close() })
	return out.(*net.TCPConn), in.(*net.TCPConn)
}

// sendSlice writes s to a socket and returns what the other end read.
func sendSlice(t *testing.T, s Slice) []byte {
	t.Helper()
	out, in := socketPair(t)
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(in)
		got <- b
	}()
	n, err := s.WriteTo(out)
	require.NoError(t, err)
	require.Equal(t, s.Size, n)
	require.NoError(t, out.CloseWrite())
	b := <-got
	require.NoError(t, out.Close())
	require.NoError(t, in.Close())
	return b
}

// openFDs counts the process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd to count descriptors in")
	}
	return len(entries)
}

// TestSliceWriteTo: a Slice written to a socket (sendfile) and to a
// buffer (read and written) is the bytes Read gives for the same range,
// whatever the offset and bound, and sendfile leaves the active segment's
// write position alone: what is appended afterwards lands at the end.
func TestSliceWriteTo(t *testing.T) {
	cache := NewFileCache(8)
	opts := testOptions(newClock(), func(c *Config) { c.SegmentBytes = 8 << 10 })
	opts.Files = cache
	l := openLog(t, OS, filepath.Join(t.TempDir(), "p-0"), opts)
	defer l.Close()
	for i := range 30 {
		appendBatch(t, l, makeBatch(t, 1+i%3, 300+i*40, int64(1000+i)))
	}
	for _, tc := range []struct {
		name     string
		offset   int64
		maxBytes int
	}{
		{"first batch alone", 0, 1},
		{"from the start", 0, 4 << 10},
		{"a whole segment", 0, 1 << 20},
		{"mid batch", 5, 3 << 10},
		{"the active segment", l.EndOffset() - 1, 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := l.Slice(tc.offset, tc.maxBytes)
			require.NoError(t, err)
			defer s.Release()
			require.Positive(t, s.Size)
			read, err := l.Read(tc.offset, int(s.Size), nil)
			require.NoError(t, err)
			require.Equal(t, read[:s.Size], sendSlice(t, s), "sendfile")
			var b bytes.Buffer
			n, err := s.WriteTo(&b)
			require.NoError(t, err)
			require.Equal(t, s.Size, n)
			require.Equal(t, read[:s.Size], b.Bytes(), "read and written")
		})
	}
	end := l.EndOffset()
	appendBatch(t, l, makeBatch(t, 2, 100, 5000))
	requireReadable(t, l)
	got, err := l.Read(end, 1<<20, nil)
	require.NoError(t, err)
	require.Equal(t, l.EndOffset(), end+2)
	require.Len(t, got, len(makeBatch(t, 2, 100, 5000)))
}

// TestSliceBelow: a Slice stops before the first batch that reaches the
// bound, the first batch included.
func TestSliceBelow(t *testing.T) {
	l := openLog(t, NewMemFS(), "/p", testOptions(newClock(), nil))
	defer l.Close()
	var sizes []int64
	for i := range 4 {
		b := makeBatch(t, 2, 100, int64(1000+i)) // offsets 2i, 2i+1
		appendBatch(t, l, b)
		sizes = append(sizes, int64(len(b)))
	}
	for _, tc := range []struct {
		name          string
		offset, below int64
		want          int64 // bytes
	}{
		{"all", 0, 8, sizes[0] + sizes[1] + sizes[2] + sizes[3]},
		{"two batches", 0, 4, sizes[0] + sizes[1]},
		{"mid batch bound cuts that batch", 0, 5, sizes[0] + sizes[1]},
		{"the first batch reaches it", 2, 3, 0},
		{"from the second batch", 3, 6, sizes[1] + sizes[2]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := l.SliceBelow(tc.offset, 1<<20, tc.below)
			require.NoError(t, err)
			defer s.Release()
			require.Equal(t, tc.want, s.Size)
		})
	}
}

// TestSliceOutlivesItsFile: a Slice's bytes can be sent after retention
// deleted its segment, after its log was deleted (as a partition moved to
// another directory is), and while the file cache needs every descriptor
// it can close; its Release then closes the descriptor, and nothing stays
// pinned or open.
func TestSliceOutlivesItsFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		// meddle reports whether it deleted the log.
		meddle func(t *testing.T, l *Log, cache *FileCache) bool
	}{
		{"segment deleted by retention", func(t *testing.T, l *Log, _ *FileCache) bool {
			require.NoError(t, l.DeleteBefore(l.EndOffset()))
			require.Greater(t, l.Segments()[0].BaseOffset, int64(0))
			return false
		}},
		{"log deleted", func(t *testing.T, l *Log, _ *FileCache) bool {
			require.NoError(t, l.Delete())
			return true
		}},
		{"cache full", func(t *testing.T, l *Log, cache *FileCache) bool {
			cfs := cache.FS(OS)
			for i := range 10 {
				f, err := cfs.OpenFile(filepath.Join(t.TempDir(), "other"), os.O_RDWR|os.O_CREATE, 0o644)
				require.NoError(t, err, "file %d", i)
				_, err = f.ReadAt(make([]byte, 1), 0)
				require.ErrorIs(t, err, io.EOF)
				require.NoError(t, f.Close())
			}
			require.Positive(t, cache.Stats().Evictions)
			return false
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := openFDs(t)
			cache := NewFileCache(3)
			opts := testOptions(newClock(), func(c *Config) { c.SegmentBytes = 4 << 10 })
			opts.Files = cache
			dir := filepath.Join(t.TempDir(), "p-0")
			l := openLog(t, OS, dir, opts)
			for i := range 12 {
				appendBatch(t, l, makeBatch(t, 2, 500, int64(1000+i)))
			}
			require.Greater(t, len(l.Segments()), 2)
			want, err := l.Read(0, 2<<10, nil)
			require.NoError(t, err)
			s, err := l.Slice(0, 2<<10)
			require.NoError(t, err)
			require.Equal(t, int64(len(want)), s.Size)
			path := s.File.Name()

			deleted := tc.meddle(t, l, cache)
			if deleted || tc.name == "segment deleted by retention" {
				_, err := os.Stat(path)
				require.ErrorIs(t, err, os.ErrNotExist, "the slice's file is gone from the directory")
			}
			require.Equal(t, 1, cache.Stats().Pinned, "the slice's file stays open")
			require.Equal(t, want, sendSlice(t, s))

			s.Release()
			require.Equal(t, 0, cache.Stats().Pinned)
			if !deleted {
				require.NoError(t, l.Close())
			}
			require.Equal(t, 0, cache.Stats().Open, "every descriptor closed")
			require.Equal(t, before, openFDs(t), "no descriptor left open")
		})
	}
}
