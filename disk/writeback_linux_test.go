package disk

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestOSFileStartsWriteback(t *testing.T) {
	f, err := OS.OpenFile(filepath.Join(t.TempDir(), "00000000000000000000.log"), os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Write(make([]byte, 2<<20))
	require.NoError(t, err)
	w, ok := f.(writebacker)
	require.True(t, ok, "OS files start writeback on Linux")
	require.NoError(t, w.StartWriteback(0, 2<<20))
	require.NoError(t, f.Close())
	require.Error(t, w.StartWriteback(0, 1), "a closed file")
}

// On Linux the bytes KeepWritten lets go of leave the page cache once
// written back, and the newest stay, as mincore sees them.
func TestKeepWrittenLeavesThePageCache(t *testing.T) {
	dir := t.TempDir()
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(dir, &st))
	if st.Type == unix.TMPFS_MAGIC {
		t.Skip("the temporary directory is on tmpfs, whose pages are the file's only copy and are never dropped")
	}
	const bound = 4 << 20
	clock := newClock()
	opts := keepWrittenOptions(clock, bound)
	l := openLog(t, OS, filepath.Join(dir, "t-0"), opts)
	defer l.Close()
	batch := makeBatch(t, 30, 1000, clock.now.UnixMilli())
	appendMiB := func(mib int) {
		for range mib << 20 / len(batch) {
			appendBatch(t, l, batch)
		}
	}
	// The first 4 MiB are synced, so clean, before the next 8 MiB push
	// them out of the bound.
	appendMiB(4)
	require.NoError(t, l.Flush(l.EndOffset()))
	appendMiB(8)
	require.NoError(t, l.Flush(l.EndOffset()))

	resident := residentPages(t, l.segments[0].path)
	head, tail := resident[:len(resident)/4], resident[len(resident)-len(resident)/8:]
	require.Less(t, countTrue(head), len(head)/10, "the oldest written bytes left the page cache")
	require.Greater(t, countTrue(tail), len(tail)*9/10, "the newest written bytes stay in the page cache")
}

// residentPages reports, page by page, whether the file at path is in the
// page cache.
func residentPages(t *testing.T, path string) []bool {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	fi, err := f.Stat()
	require.NoError(t, err)
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (len(m)+page-1)/page)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
	require.Zero(t, errno, "mincore")
	resident := make([]bool, len(vec))
	for i, v := range vec {
		resident[i] = v&1 == 1
	}
	return resident
}

func countTrue(bs []bool) (n int) {
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
