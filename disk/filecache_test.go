package disk

import (
	"bytes"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// trackFS wraps an FS and keeps count of the descriptors open on each path
// and of every open, with its flags. Safe for concurrent use.
type trackFS struct {
	FS
	mu     sync.Mutex
	open   map[string]int
	opens  []trackedOpen
	closes int
	// closedUnsynced lists the files closed while holding bytes a crash
	// would lose, when the inner FS is a MemFS.
	closedUnsynced []string
}

type trackedOpen struct {
	name string
	flag int
}

func newTrackFS(inner FS) *trackFS { return &trackFS{FS: inner, open: map[string]int{}} }

func (t *trackFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := t.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.open[name]++
	t.opens = append(t.opens, trackedOpen{name, flag})
	return &trackFile{File: f, fs: t, name: name}, nil
}

// openNow returns the paths with a descriptor open, sorted.
func (t *trackFS) openNow() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var names []string
	for name, n := range t.open {
		if n > 0 {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// descriptors returns how many descriptors are open.
func (t *trackFS) descriptors() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, k := range t.open {
		n += k
	}
	return n
}

// opensSince returns the opens after the first n.
func (t *trackFS) opensSince(n int) []trackedOpen {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.opens[n:])
}

func (t *trackFS) openCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.opens)
}

type trackFile struct {
	File
	fs     *trackFS
	name   string
	closed bool
}

func (f *trackFile) Close() error {
	unsyncedBytes := false
	if mem, ok := f.fs.FS.(*MemFS); ok {
		mem.mu.Lock()
		if n, err := mem.walk(splitPath(f.name)); err == nil && !n.dir {
			unsyncedBytes = !bytes.Equal(n.data, n.synced)
		}
		mem.mu.Unlock()
	}
	f.fs.mu.Lock()
	if !f.closed {
		f.closed = true
		f.fs.open[f.name]--
		f.fs.closes++
		if unsyncedBytes {
			f.fs.closedUnsynced = append(f.fs.closedUnsynced, f.name)
		}
	}
	f.fs.mu.Unlock()
	return f.File.Close()
}

// unsyncedCloses returns the files closed with unsynced bytes so far.
func (t *trackFS) unsyncedCloses() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.closedUnsynced)
}

// TestFileCacheLRU: past its capacity, the cache closes the descriptors of
// the handles least recently used, those of index files first, and an
// operation on one of them opens it again, which makes it the most
// recently used.
func TestFileCacheLRU(t *testing.T) {
	for _, tc := range []struct {
		name     string
		capacity int
		use      []int // handles used, in order, after all were opened 0..n-1
		n        int
		want     []int // handles with a descriptor open at the end
		// indexes are the handles of index files; the others are .log
		// files.
		indexes []int
	}{
		{name: "under capacity", capacity: 4, n: 3, want: []int{0, 1, 2}},
		{name: "oldest go first", capacity: 2, n: 4, want: []int{2, 3}},
		{name: "a use refreshes", capacity: 2, n: 3, use: []int{1}, want: []int{1, 2}},
		{name: "a reopen evicts the least recent", capacity: 2, n: 3, use: []int{0}, want: []int{0, 2}},
		{name: "round robin", capacity: 3, n: 5, use: []int{0, 1, 2, 3, 4, 0}, want: []int{0, 3, 4}},
		{name: "capacity one", capacity: 1, n: 3, use: []int{1, 2, 0}, want: []int{0}},
		{name: "no bound", capacity: 0, n: 5, use: []int{4, 3}, want: []int{0, 1, 2, 3, 4}},
		{name: "an index goes before older logs", capacity: 3, n: 4, indexes: []int{2}, want: []int{0, 1, 3}},
		{name: "indexes oldest first", capacity: 3, n: 5, indexes: []int{1, 2}, use: []int{1}, want: []int{1, 3, 4}},
		{name: "logs once no index is open", capacity: 2, n: 4, indexes: []int{0}, use: []int{1, 2, 3}, want: []int{2, 3}},
		{name: "an index in use stays", capacity: 2, n: 3, indexes: []int{1}, use: []int{1, 0, 2}, want: []int{0, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tfs := newTrackFS(NewMemFS())
			cache := NewFileCache(tc.capacity)
			cfs := cache.FS(tfs)
			name := func(i int) string {
				if slices.Contains(tc.indexes, i) {
					return fmt.Sprintf("/f%d.index", i)
				}
				return fmt.Sprintf("/f%d.log", i)
			}
			files := make([]File, tc.n)
			for i := range files {
				f, err := cfs.OpenFile(name(i), os.O_RDWR|os.O_CREATE, 0o644)
				require.NoError(t, err)
				files[i] = f
			}
			for _, i := range tc.use {
				_, err := files[i].Size()
				require.NoError(t, err)
			}
			var want []string
			for _, i := range tc.want {
				want = append(want, name(i))
			}
			require.Equal(t, want, tfs.openNow())
			st := cache.Stats()
			require.Equal(t, len(tc.want), st.Open)
			require.Equal(t, 0, st.Pinned)
			require.Equal(t, tc.n, st.Handles)
			require.Equal(t, int64(tc.n-len(tc.want)), st.Evictions-st.Reopens, "every eviction but those of open handles was reopened")
			for _, f := range files {
				require.NoError(t, f.Close())
			}
			require.Empty(t, tfs.openNow())
			require.Equal(t, FileCacheStats{Capacity: tc.capacity, Reopens: st.Reopens, Evictions: st.Evictions}, cache.Stats())
		})
	}
}

// TestFileCacheReopen: a handle whose descriptor was closed reopens it at
// the same write position, without O_CREATE or O_TRUNC, and reads and
// writes go on as if it had never closed.
func TestFileCacheReopen(t *testing.T) {
	mem := NewMemFS()
	tfs := newTrackFS(mem)
	cache := NewFileCache(1)
	cfs := cache.FS(tfs)
	a, err := cfs.OpenFile("/a", os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	require.NoError(t, err)
	_, err = a.Write([]byte("hello "))
	require.NoError(t, err)
	require.NoError(t, a.Sync())
	b, err := cfs.OpenFile("/b", os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	require.Equal(t, []string{"/b"}, tfs.openNow(), "a is evicted")

	before := tfs.openCount()
	_, err = a.Write([]byte("world"))
	require.NoError(t, err)
	require.Equal(t, []trackedOpen{{"/a", os.O_RDWR}}, tfs.opensSince(before), "reopened without create or truncate")
	got := make([]byte, 11)
	_, err = a.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, "hello world", string(got))
	require.Equal(t, "/a", a.Name())

	// Seek moves the position the next reopen goes back to.
	_, err = a.Seek(5, 0)
	require.NoError(t, err)
	require.NoError(t, a.Sync())
	_, err = b.Size() // evicts a
	require.NoError(t, err)
	_, err = a.Write([]byte("!"))
	require.NoError(t, err)
	data, err := mem.ReadFile("/a")
	require.NoError(t, err)
	require.Equal(t, "hello!world", string(data))
	require.Equal(t, int64(3), cache.Stats().Reopens, "a twice, b once")

	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	_, err = a.ReadAt(got, 0)
	require.ErrorIs(t, err, fs.ErrClosed, "a closed handle does not reopen")
	require.ErrorIs(t, a.Close(), fs.ErrClosed)
}

// hold counts an operation in progress on h, as a read or a sync on
// another goroutine does, until letGo.
func hold(h *cachedFile) error {
	_, _, err := h.acquire("hold")
	return err
}

// letGo ends an operation counted by hold.
func letGo(h *cachedFile) { h.release(false) }

// TestFileCacheInUse: the cache holds at most its capacity of descriptors.
// To open one more it closes an idle one; failing that it syncs an
// unsynced one and closes it; failing that, every descriptor being in
// use, it waits for one. It never closes one in use or unsynced. A handle
// closed while in use keeps its descriptor until the operation ends.
func TestFileCacheInUse(t *testing.T) {
	mem := NewMemFS()
	tfs := newTrackFS(mem)
	cache := NewFileCache(2)
	cfs := cache.FS(tfs)
	open := func(name string) *cachedFile {
		f, err := cfs.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
		require.NoError(t, err)
		return f.(*cachedFile)
	}
	dirty := open("/dirty")
	_, err := dirty.Write([]byte("unsynced"))
	require.NoError(t, err)
	held := open("/used")
	require.NoError(t, hold(held))
	require.Equal(t, FileCacheStats{Capacity: 2, Handles: 2, Open: 2, Unsynced: 1, Pinned: 1}, cache.Stats())

	// No idle one to close: the unsynced one is synced, then closed.
	idle := open("/idle")
	require.Equal(t, []string{"/idle", "/used"}, tfs.openNow())
	data, synced := memSynced(t, mem, "/dirty")
	require.Equal(t, 8, data)
	require.Equal(t, 8, synced, "synced before it was closed")
	require.Equal(t, int64(1), cache.Stats().EvictionSyncs)

	// Every descriptor in use: an open waits until one is let go of.
	require.NoError(t, hold(idle))
	opened := make(chan *cachedFile)
	go func() {
		f, err := cfs.OpenFile("/other", os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			close(opened)
			return
		}
		opened <- f.(*cachedFile)
	}()
	require.Eventually(t, func() bool { return cache.Stats().Waits == 1 }, 10*time.Second, time.Millisecond)
	require.Equal(t, []string{"/idle", "/used"}, tfs.openNow(), "in use: neither is closed")
	letGo(idle)
	other := <-opened
	require.NotNil(t, other)
	require.Equal(t, []string{"/other", "/used"}, tfs.openNow())

	// Closed while in use: the descriptor stays for the operation, and
	// goes when it ends.
	require.NoError(t, held.Close())
	require.Equal(t, []string{"/other", "/used"}, tfs.openNow())
	_, err = held.Write([]byte("still open"))
	require.NoError(t, err)
	letGo(held)
	require.Equal(t, []string{"/other"}, tfs.openNow())

	// A truncate is a change to sync, as a write is: an idle file goes
	// first.
	require.NoError(t, other.Truncate(0))
	open("/next")
	open("/last")
	require.Equal(t, []string{"/last", "/other"}, tfs.openNow(), "the truncated file stays, the idle one goes")
	require.Equal(t, []string{"/used"}, tfs.unsyncedCloses(), "no descriptor was closed holding unsynced bytes but by its owner")
	st := cache.Stats()
	require.Equal(t, 2, st.Open)
	require.Equal(t, 1, st.Unsynced)
}

// TestFileCacheFailedSync: when the fsync the cache makes to close an
// unsynced file fails, the file keeps its descriptor and its next Sync
// returns the error, so that its owner learns of it as of any fsync of
// its own; the cache makes room with another file.
func TestFileCacheFailedSync(t *testing.T) {
	mem := NewMemFS()
	efs := NewErrorFS(mem)
	cache := NewFileCache(2)
	cfs := cache.FS(efs)
	var files []File
	for _, name := range []string{"/a", "/b"} {
		f, err := cfs.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
		require.NoError(t, err)
		_, err = f.Write([]byte(name))
		require.NoError(t, err)
		files = append(files, f)
	}
	efs.InjectAt(1)
	c, err := cfs.OpenFile("/c", os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	st := cache.Stats()
	require.Equal(t, int64(2), st.EvictionSyncs, "a's failed, b's made room")
	require.Equal(t, 1, st.Pinned, "a keeps its descriptor")
	require.ErrorIs(t, files[0].Sync(), ErrInjected)
	require.ErrorContains(t, files[0].Sync(), "sync /a to close it", "and keeps returning it")
	require.NoError(t, files[1].Sync())
	require.NoError(t, files[0].Close())
	require.NoError(t, c.Close())
	require.NoError(t, files[1].Close())
	require.Equal(t, 0, cache.Stats().Open)
}

// TestFileCacheReopenError: an error of a reopen is the error of the
// operation that needed it, wrapping the file system's, and the next
// operation tries again.
func TestFileCacheReopenError(t *testing.T) {
	efs := NewErrorFS(NewMemFS())
	cache := NewFileCache(1)
	cfs := cache.FS(efs)
	a, err := cfs.OpenFile("/a", os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	b, err := cfs.OpenFile("/b", os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	require.NoError(t, b.Close())
	efs.InjectAt(1)
	_, err = a.Size()
	require.ErrorIs(t, err, ErrInjected)
	require.ErrorContains(t, err, "disk: reopen /a")
	require.Equal(t, FileCacheStats{Capacity: 1, Handles: 1, Evictions: 1}, cache.Stats())
	_, err = a.Size()
	require.NoError(t, err)
	require.Equal(t, FileCacheStats{Capacity: 1, Handles: 1, Open: 1, Idle: 1, Reopens: 1, Evictions: 1}, cache.Stats())
}

// TestFileCacheConcurrentUse runs several owners, each with files of its
// own, on a cache far smaller than their files, while another goroutine
// syncs their files (as a FlushJob does): every byte written reads back,
// and the cache ends within its capacity. Run under -race.
func TestFileCacheConcurrentUse(t *testing.T) {
	const owners, filesEach, writes = 8, 4, 200
	mem := NewMemFS()
	cache := NewFileCache(3)
	cfs := cache.FS(mem)
	files := make([][]File, owners)
	for o := range files {
		for i := 0; i < filesEach; i++ {
			f, err := cfs.OpenFile(fmt.Sprintf("/o%d-%d", o, i), os.O_RDWR|os.O_CREATE, 0o644)
			require.NoError(t, err)
			files[o] = append(files[o], f)
		}
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	syncErrs := make(chan error, 1)
	go func() {
		defer close(syncErrs)
		for k := 0; ; k++ {
			select {
			case <-stop:
				return
			default:
			}
			f := files[k%owners][k%filesEach]
			if h := f.(*cachedFile); hold(h) == nil {
				if err := f.Sync(); err != nil {
					syncErrs <- err
					letGo(h)
					return
				}
				letGo(h)
			}
		}
	}()
	errs := make(chan error, owners)
	for o := range owners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range writes {
				f := files[o][k%filesEach]
				record := fmt.Sprintf("%d-%d;", o, k)
				if _, err := f.Write([]byte(record)); err != nil {
					errs <- err
					return
				}
				if k%7 == 0 {
					if err := f.Sync(); err != nil {
						errs <- err
						return
					}
				}
				got := make([]byte, len(record))
				size, err := f.Size()
				if err == nil {
					_, err = f.ReadAt(got, size-int64(len(record)))
				}
				if err != nil || string(got) != record {
					errs <- fmt.Errorf("owner %d write %d: read %q, %v", o, k, got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, <-syncErrs)
	for o := range files {
		for i, f := range files[o] {
			require.NoError(t, f.Sync())
			data, err := mem.ReadFile(fmt.Sprintf("/o%d-%d", o, i))
			require.NoError(t, err)
			var want strings.Builder
			for k := i; k < writes; k += filesEach {
				fmt.Fprintf(&want, "%d-%d;", o, k)
			}
			require.Equal(t, want.String(), string(data))
		}
	}
	st := cache.Stats()
	require.LessOrEqual(t, st.Open, 3)
	require.Equal(t, 0, st.Pinned)
	require.Greater(t, st.Reopens, int64(0))
}

// segmentFilesOf returns the segment files of a log directory on mem, with
// their bytes.
func segmentFilesOf(t *testing.T, mem *MemFS, dir string) map[string][]byte {
	t.Helper()
	names, err := mem.ReadDir(dir)
	require.NoError(t, err)
	files := map[string][]byte{}
	for _, name := range names {
		if _, _, err := ParseSegmentFileName(name); err != nil {
			continue
		}
		data, err := mem.ReadFile(dir + "/" + name)
		require.NoError(t, err)
		files[name] = data
	}
	return files
}

// TestLogReadsThroughEvictedFiles: a log of several segments whose files
// the cache closed reads every offset back, and finds timestamps, by
// reopening them: with the same flags and nothing created, truncated or
// rebuilt, its index files as they were. A read opens no more than the
// files it reads.
func TestLogReadsThroughEvictedFiles(t *testing.T) {
	mem := NewMemFS()
	tfs := newTrackFS(mem)
	cache := NewFileCache(2)
	opts := testOptions(newClock(), func(c *Config) { c.SegmentBytes = 4096; c.IndexIntervalBytes = 256 })
	opts.Files = cache
	l := openLog(t, tfs, "/p", opts)
	var batches [][]byte
	for i := range 60 {
		b := makeBatch(t, 3, 100, int64(1000+10*i))
		appendBatch(t, l, b)
		batches = append(batches, b)
	}
	require.NoError(t, l.Settle())
	require.Greater(t, len(l.Segments()), 4)
	before := segmentFilesOf(t, mem, "/p")
	st := cache.Stats()
	require.LessOrEqual(t, st.Open, 2, "a settled log holds no more than the capacity")
	require.Equal(t, 0, st.Pinned)
	require.Equal(t, 3*len(l.Segments()), st.Handles)

	opens := tfs.openCount()
	requireReadable(t, l)
	all, err := l.Read(0, 1<<20, nil)
	require.NoError(t, err)
	require.Len(t, all, len(batches)*len(batches[0]))
	for i := range batches {
		offset, ts, err := l.OffsetForTimestamp(int64(1000 + 10*i))
		require.NoError(t, err)
		require.Equal(t, int64(3*i), offset)
		require.Equal(t, int64(1000+10*i), ts)
	}
	reopened := tfs.opensSince(opens)
	require.NotEmpty(t, reopened)
	for _, o := range reopened {
		require.Equal(t, os.O_RDWR, o.flag, "%s reopened as it is", o.name)
	}
	require.Equal(t, before, segmentFilesOf(t, mem, "/p"), "reads rebuild nothing")
	require.LessOrEqual(t, tfs.descriptors(), 2)

	// Appends reopen the active segment's files and go on at the end.
	res := appendBatch(t, l, makeBatch(t, 1, 10, 5000))
	require.Equal(t, int64(3*len(batches)), res.BaseOffset)
	requireReadable(t, l)
	require.NoError(t, l.Close())
	require.Equal(t, 0, tfs.descriptors())
	require.Equal(t, 0, cache.Stats().Handles)

	// A clean reopen trusts the indexes: nothing is validated.
	opts.RecoveryPoint = l.EndOffset()
	l = openLog(t, tfs, "/p", opts)
	require.False(t, l.Recovery().Recovered())
	requireReadable(t, l)
	require.NoError(t, l.Close())
}

// TestLogUnderAFullCache: a log whose unsynced files the cache needs room
// for has them synced before they are closed, a FlushJob's file included
// (the job then reopens it to sync). Nothing is closed with unsynced
// bytes, and a crash keeps what the flushes made durable.
func TestLogUnderAFullCache(t *testing.T) {
	mem := NewMemFS()
	tfs := newTrackFS(mem)
	cache := NewFileCache(2)
	opts := testOptions(newClock(), func(c *Config) { c.IndexIntervalBytes = 0; c.SegmentBytes = 2048 })
	opts.Files = cache
	l := openLog(t, tfs, "/p", opts)
	cfs := cache.FS(tfs)
	other := func(name string) {
		f, err := cfs.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	for i := range 20 {
		appendBatch(t, l, makeBatch(t, 2, 100, int64(1000+i)))
		other(fmt.Sprintf("/x%d", i))
	}
	require.Greater(t, cache.Stats().EvictionSyncs, int64(0), "unsynced files were synced to make room")
	logPath := l.Segments()[len(l.Segments())-1].Path

	j, err := l.StartFlush()
	require.NoError(t, err)
	appendBatch(t, l, makeBatch(t, 2, 100, 2000))
	// Two files in use at once leave no room for the log's.
	var held []File
	for _, name := range []string{"/y1", "/y2"} {
		f, err := cfs.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
		require.NoError(t, err)
		require.NoError(t, hold(f.(*cachedFile)))
		held = append(held, f)
	}
	for _, f := range held {
		letGo(f.(*cachedFile))
		require.NoError(t, f.Close())
	}
	require.NotContains(t, tfs.openNow(), logPath, "the job's file was synced and closed")
	require.NoError(t, j.Run())
	require.NoError(t, l.FinishFlush(j, nil))
	require.Equal(t, int64(40), l.RecoveryPoint())

	require.Empty(t, tfs.unsyncedCloses(), "no descriptor was closed holding unsynced bytes")
	requireReadable(t, l)

	mem.Crash()
	abandon(l)
	opts.RecoveryPoint = 40
	l = openLog(t, mem, "/p", opts)
	require.GreaterOrEqual(t, l.EndOffset(), int64(40))
	requireReadable(t, l)
	require.NoError(t, l.Close())
}

// TestLogReopenFailure: an I/O error of a reopen is the error of the log's
// call that needed the file: a read returns it, an append fails the log
// with it; nothing panics and no batch is lost.
func TestLogReopenFailure(t *testing.T) {
	mem := NewMemFS()
	efs := NewErrorFS(mem)
	cache := NewFileCache(1)
	opts := testOptions(newClock(), nil)
	opts.Files = cache
	l := openLog(t, efs, "/p", opts)
	b := makeBatch(t, 2, 10, 1000)
	appendBatch(t, l, b)
	require.NoError(t, l.Settle())
	evict := func() {
		f, err := cache.FS(mem).OpenFile("/other", os.O_RDWR|os.O_CREATE, 0o644)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		require.Equal(t, 0, cache.Stats().Open)
	}
	evict()
	efs.InjectAt(1)
	_, err := l.Read(0, 1<<20, nil)
	require.ErrorIs(t, err, ErrInjected)
	require.ErrorContains(t, err, "reopen")
	require.NoError(t, l.failed, "a read does not fail the log")
	got, err := l.Read(0, 1<<20, nil)
	require.NoError(t, err)
	require.Equal(t, b, got)

	evict()
	efs.InjectSticky(true)
	efs.InjectAt(1)
	_, err = l.Append(makeBatch(t, 1, 10, 2000))
	require.ErrorIs(t, err, ErrInjected)
	require.ErrorIs(t, l.failed, ErrInjected, "an append that cannot reopen its file fails the log")
	_, err = l.Append(makeBatch(t, 1, 10, 2000))
	require.ErrorContains(t, err, "failed earlier")
	_ = l.Close()

	efs.InjectAt(0)
	l = openLog(t, mem, "/p", testOptions(newClock(), nil))
	require.Equal(t, int64(2), l.EndOffset(), "the appended batch is kept")
	got, err = l.Read(0, 1<<20, nil)
	require.NoError(t, err)
	require.Equal(t, len(b), len(got))
	require.NoError(t, l.Close())
}

// TestFileCacheStatsAfterLogs: logs closed and deleted leave no handle and
// no descriptor in their cache.
func TestFileCacheStatsAfterLogs(t *testing.T) {
	tfs := newTrackFS(NewMemFS())
	cache := NewFileCache(4)
	opts := testOptions(newClock(), func(c *Config) { c.SegmentBytes = 1024 })
	opts.Files = cache
	logs := map[string]*Log{}
	for i := range 5 {
		dir := fmt.Sprintf("/t-%d", i)
		logs[dir] = openLog(t, tfs, dir, opts)
		for range 5 {
			appendBatch(t, logs[dir], makeBatch(t, 2, 200, 1000))
		}
	}
	require.Greater(t, cache.Stats().Handles, 15)
	for _, dir := range slices.Sorted(maps.Keys(logs)) {
		if dir == "/t-0" {
			require.NoError(t, logs[dir].Delete())
			continue
		}
		require.NoError(t, logs[dir].Close())
	}
	st := cache.Stats()
	require.Equal(t, FileCacheStats{Capacity: 4, Reopens: st.Reopens, Evictions: st.Evictions, EvictionSyncs: st.EvictionSyncs}, st)
	require.Equal(t, 0, tfs.descriptors())
}
