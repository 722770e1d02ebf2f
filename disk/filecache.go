package disk

import (
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
)

// FileCache bounds how many segment files the logs of a node hold open.
// Without it, every segment of every partition keeps its .log, .index and
// .timeindex open, and a node of many partitions runs out of descriptors
// (EMFILE) long before it runs out of anything else.
//
// Each file a log opens through the cache (FS) is a handle that stays
// valid while the cache closes and reopens the descriptor under it: an
// operation on a handle whose descriptor the cache closed reopens it (the
// same path, the same flags but O_CREATE, O_EXCL and O_TRUNC, at the same
// write position) and then takes place; the log sees an error of the
// reopen as the error of its operation. When more than the capacity are
// open, the cache closes the descriptors of the handles least recently
// used, but never one that is pinned:
//
//   - while an operation on it is in progress, on any goroutine (a read, a
//     write, the fsync of a FlushJob);
//   - while it is pinned explicitly: by a FlushJob from StartFlush to
//     FinishFlush, by a Slice until its Release;
//   - while it holds unsynced bytes: from a write (or a truncate) to the
//     fsync that covers it. Writeback errors are reported to the
//     descriptors open when they happen; a descriptor closed before its
//     bytes reach the device could lose the error of their writeback.
//     Log.Settle syncs a log that has gone idle so that none of its files
//     stays pinned for this reason.
//
// So the capacity bounds the open descriptors but for the pinned ones:
// when every open handle is pinned, the cache goes past it rather than
// fail an operation, and comes back under it as the pins go. Stats
// reports both.
//
// The cache is the one type of the package that is safe for concurrent
// use, and has to be: one cache serves every log of a node, each owned by
// the goroutine of its own actor, and a FlushJob syncs a handle on a
// goroutine of its own while its log appends. A mutex guards the cache
// and the state of its handles; descriptors are opened and closed outside
// it. A handle itself is used as the File it stands for: by the log that
// owns it, and by whoever holds a pin on it.
type FileCache struct {
	mu sync.Mutex
	// capacity is the most descriptors open at once, unpinned ones
	// counted; 0: no bound.
	capacity int
	open     int // handles whose descriptor is open
	handles  int // handles not closed
	// idle holds the open handles that may be closed: not in use, not
	// pinned, without unsynced bytes; the most recently used first.
	idle      handleList
	reopens   int64
	evictions int64
}

// FileCacheStats is what a FileCache holds and has done.
type FileCacheStats struct {
	// Capacity is the bound on open descriptors; 0: none.
	Capacity int
	// Handles is how many files are open through the cache, whether or not
	// their descriptors are.
	Handles int
	// Open is how many descriptors the cache holds open now, and Pinned
	// how many of them it may not close now (Open - Pinned are idle).
	Open   int
	Pinned int
	// Reopens counts descriptors opened again for a handle whose
	// descriptor the cache had closed; Evictions counts those it closed.
	Reopens   int64
	Evictions int64
}

// NewFileCache returns a cache that holds at most capacity descriptors
// open beyond the pinned ones; capacity <= 0 sets no bound (the cache then
// never closes a descriptor: what a log opened without a cache gets).
func NewFileCache(capacity int) *FileCache {
	return &FileCache{capacity: max(capacity, 0)}
}

// Stats returns what the cache holds now and has done so far.
func (c *FileCache) Stats() FileCacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return FileCacheStats{
		Capacity:  c.capacity,
		Handles:   c.handles,
		Open:      c.open,
		Pinned:    c.open - c.idle.len,
		Reopens:   c.reopens,
		Evictions: c.evictions,
	}
}

// FS returns inner with every file it opens held through the cache; its
// other methods are inner's. A file removed or renamed while its handle is
// open has no path to be reopened at: the caller closes the handle first
// (the log does).
func (c *FileCache) FS(inner FS) FS { return cachedFS{FS: inner, cache: c} }

type cachedFS struct {
	FS
	cache *FileCache
}

func (c cachedFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	h, err := c.cache.openHandle(c.FS, name, flag, perm)
	if err != nil {
		return nil, err
	}
	return h, nil
}

// openHandle opens name on inner and makes it a handle of the cache.
func (c *FileCache) openHandle(inner FS, name string, flag int, perm os.FileMode) (*cachedFile, error) {
	f, err := inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	h := &cachedFile{cache: c, fs: inner, name: name, flag: flag &^ (os.O_CREATE | os.O_EXCL | os.O_TRUNC), perm: perm}
	var victims [evictBatch]File
	c.mu.Lock()
	h.file = f
	c.handles++
	c.open++
	evicted := c.evictLocked(victims[:0])
	c.idle.pushFront(h)
	c.mu.Unlock()
	closeAll(evicted)
	return h, nil
}

// evictBatch is how many descriptors one call usually closes at most
// without allocating: one, unless pins just went.
const evictBatch = 4

// evictLocked takes the descriptors of the least recently used idle
// handles while more than the capacity are open, and appends them to
// victims for the caller to close once it has let go of the mutex.
func (c *FileCache) evictLocked(victims []File) []File {
	for c.capacity > 0 && c.open > c.capacity {
		h := c.idle.back()
		if h == nil {
			break
		}
		c.idle.remove(h)
		victims = append(victims, h.file)
		h.file = nil
		c.open--
		c.evictions++
	}
	return victims
}

// closeAll closes evicted descriptors. They held no unsynced bytes, so an
// error of close loses nothing.
func closeAll(files []File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// cachedFile is a handle of a FileCache: a File whose descriptor the cache
// may close while it is idle and that reopens it on its next operation.
// The fields after the comment are guarded by the cache's mutex.
type cachedFile struct {
	cache *FileCache
	fs    FS
	flag  int // to reopen with
	perm  os.FileMode
	// position is where the next Write goes, restored on a reopen.
	position atomic.Int64
	// reopening is held while the descriptor is opened again, so that two
	// goroutines finding it closed open it once.
	reopening sync.Mutex

	// Guarded by cache.mu.
	name string
	file File // nil while the cache has it closed
	// refs counts the operations in progress and the pins.
	refs int
	// written counts writes; synced is the count an fsync covered: the
	// file holds unsynced bytes while they differ.
	written, synced uint64
	closed          bool
	prev, next      *cachedFile // in cache.idle
	listed          bool
}

// idleLocked reports whether the cache may close h's descriptor.
func (h *cachedFile) idleLocked() bool {
	return h.file != nil && h.refs == 0 && h.written == h.synced && !h.closed
}

// acquire counts an operation (or a pin) on h and returns its descriptor,
// reopening it when the cache had closed it, and the write count it
// covers.
func (h *cachedFile) acquire(op string) (File, uint64, error) {
	c := h.cache
	c.mu.Lock()
	h.refs++
	c.idle.remove(h)
	f, written, closed := h.file, h.written, h.closed
	c.mu.Unlock()
	if f != nil {
		return f, written, nil
	}
	if closed {
		h.release(false)
		return nil, 0, &fs.PathError{Op: op, Path: h.Name(), Err: fs.ErrClosed}
	}
	f, err := h.reopen()
	if err != nil {
		h.release(false)
		return nil, 0, err
	}
	c.mu.Lock()
	written = h.written
	c.mu.Unlock()
	return f, written, nil
}

// reopen opens h's descriptor again, once, and seeks it to the write
// position.
func (h *cachedFile) reopen() (File, error) {
	h.reopening.Lock()
	defer h.reopening.Unlock()
	c := h.cache
	c.mu.Lock()
	f, name := h.file, h.name
	c.mu.Unlock()
	if f != nil {
		return f, nil
	}
	f, err := h.fs.OpenFile(name, h.flag, h.perm)
	if err != nil {
		return nil, fmt.Errorf("disk: reopen %s: %w", name, err)
	}
	if position := h.position.Load(); position != 0 {
		if _, err := f.Seek(position, 0); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("disk: reopen %s: seek to %d: %w", name, position, err)
		}
	}
	var victims [evictBatch]File
	c.mu.Lock()
	h.file = f
	c.open++
	c.reopens++
	evicted := c.evictLocked(victims[:0])
	c.mu.Unlock()
	closeAll(evicted)
	return f, nil
}

// release ends an operation (or a pin) on h; wrote says it changed the
// file.
func (h *cachedFile) release(wrote bool) { h.releaseSynced(wrote, 0, false) }

// releaseSynced is release for an fsync that covered the writes counted
// up to written when it began.
func (h *cachedFile) releaseSynced(wrote bool, written uint64, synced bool) {
	c := h.cache
	var victims [evictBatch]File
	c.mu.Lock()
	h.refs--
	if wrote {
		h.written++
	}
	if synced && written > h.synced {
		h.synced = written
	}
	var last File
	if h.closed && h.refs == 0 && h.file != nil {
		last, h.file = h.file, nil
		c.open--
	}
	if h.idleLocked() {
		c.idle.pushFront(h)
	}
	evicted := c.evictLocked(victims[:0])
	c.mu.Unlock()
	if last != nil {
		_ = last.Close()
	}
	closeAll(evicted)
}

// unsynced reports whether f is a handle of a FileCache holding unsynced
// bytes.
func unsynced(f File) bool {
	h, ok := f.(*cachedFile)
	if !ok {
		return false
	}
	h.cache.mu.Lock()
	defer h.cache.mu.Unlock()
	return h.written != h.synced
}

// pin keeps h's descriptor open, reopening it if needed, until unpin.
func (h *cachedFile) pin() error {
	_, _, err := h.acquire("pin")
	return err
}

// unpin ends a pin.
func (h *cachedFile) unpin() { h.release(false) }

// setName follows a rename of the file by its owner.
func (h *cachedFile) setName(name string) {
	h.cache.mu.Lock()
	h.name = name
	h.cache.mu.Unlock()
}

func (h *cachedFile) Name() string {
	h.cache.mu.Lock()
	defer h.cache.mu.Unlock()
	return h.name
}

func (h *cachedFile) ReadAt(p []byte, off int64) (int, error) {
	f, _, err := h.acquire("read")
	if err != nil {
		return 0, err
	}
	n, err := f.ReadAt(p, off)
	h.release(false)
	return n, err
}

func (h *cachedFile) Write(p []byte) (int, error) {
	f, _, err := h.acquire("write")
	if err != nil {
		return 0, err
	}
	n, err := f.Write(p)
	h.position.Add(int64(n))
	h.release(true)
	return n, err
}

func (h *cachedFile) WriteAt(p []byte, off int64) (int, error) {
	f, _, err := h.acquire("writeat")
	if err != nil {
		return 0, err
	}
	n, err := f.WriteAt(p, off)
	h.release(true)
	return n, err
}

func (h *cachedFile) Truncate(size int64) error {
	f, _, err := h.acquire("truncate")
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	h.release(true)
	return err
}

func (h *cachedFile) Seek(offset int64, whence int) (int64, error) {
	f, _, err := h.acquire("seek")
	if err != nil {
		return 0, err
	}
	position, err := f.Seek(offset, whence)
	if err == nil {
		h.position.Store(position)
	}
	h.release(false)
	return position, err
}

func (h *cachedFile) Size() (int64, error) {
	f, _, err := h.acquire("stat")
	if err != nil {
		return 0, err
	}
	size, err := f.Size()
	h.release(false)
	return size, err
}

// Sync fsyncs the file. On success the writes that had returned when it
// began no longer pin the handle.
func (h *cachedFile) Sync() error {
	f, written, err := h.acquire("sync")
	if err != nil {
		return err
	}
	err = f.Sync()
	h.releaseSynced(false, written, err == nil)
	return err
}

// StartWriteback passes the hint on to the descriptor when its file can
// take it (see writebacker), and does nothing otherwise.
func (h *cachedFile) StartWriteback(offset, n int64) error {
	f, _, err := h.acquire("writeback")
	if err != nil {
		return err
	}
	if w, ok := f.(writebacker); ok {
		err = w.StartWriteback(offset, n)
	}
	h.release(false)
	return err
}

// Close closes the handle for good: its descriptor at once, or when the
// last pin on it goes. It does not sync. A second Close fails.
func (h *cachedFile) Close() error {
	c := h.cache
	c.mu.Lock()
	if h.closed {
		name := h.name
		c.mu.Unlock()
		return &fs.PathError{Op: "close", Path: name, Err: fs.ErrClosed}
	}
	h.closed = true
	c.handles--
	c.idle.remove(h)
	var f File
	if h.refs == 0 && h.file != nil {
		f, h.file = h.file, nil
		c.open--
	}
	c.mu.Unlock()
	if f != nil {
		return f.Close()
	}
	return nil
}

// handleList is a doubly linked list of handles through their prev and
// next fields, so that moving a handle in and out of it, which each file
// operation does, allocates nothing (container/list allocates an element
// per insertion). Guarded by the cache's mutex.
type handleList struct {
	front, tail *cachedFile
	len         int
}

func (l *handleList) pushFront(h *cachedFile) {
	if h.listed {
		return
	}
	h.listed = true
	h.prev, h.next = nil, l.front
	if l.front != nil {
		l.front.prev = h
	} else {
		l.tail = h
	}
	l.front = h
	l.len++
}

func (l *handleList) remove(h *cachedFile) {
	if !h.listed {
		return
	}
	if h.prev != nil {
		h.prev.next = h.next
	} else {
		l.front = h.next
	}
	if h.next != nil {
		h.next.prev = h.prev
	} else {
		l.tail = h.prev
	}
	h.prev, h.next, h.listed = nil, nil, false
	l.len--
}

// back returns the least recently used handle, nil when the list is empty.
func (l *handleList) back() *cachedFile { return l.tail }
