package disk

import (
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"sync/atomic"
)

// FileCache bounds how many descriptors the logs of a node hold open.
// Without it, every segment of every partition keeps its .log, .index and
// .timeindex open, and a node of many partitions runs out of descriptors
// (EMFILE) long before it runs out of anything else.
//
// A log does all its file work through the cache (FS). Each file it opens
// is a handle that stays valid while the cache closes and reopens the
// descriptor under it: an operation on a handle whose descriptor the cache
// closed reopens it (the same path, the same flags but O_CREATE, O_EXCL
// and O_TRUNC, at the same write position) and then takes place; the log
// sees an error of the reopen as the error of its operation. The
// descriptors of its short calls (syncing or listing a directory) count
// too, for as long as the call.
//
// At most the capacity of descriptors are open at once. To open another,
// the cache closes the descriptor of the handle least recently used that
// may be closed, and when every open one is in use, it waits for one to
// be free. It never closes a descriptor:
//
//   - while an operation on it is in progress, on any goroutine (a read, a
//     write, the fsync of a FlushJob);
//   - while it holds unsynced bytes: a writeback error is reported to the
//     descriptors open when it happens, and one closed before its bytes
//     reach the device could take the error with it. Only when no file
//     without unsynced bytes is left to close does the cache fsync the
//     least recently used of those (on the goroutine that needs the room)
//     and then close it; should that fsync fail, the handle keeps its
//     descriptor and its next Sync returns the error, so that its log
//     fails as it would have. Log.Settle syncs a log gone idle, so that
//     this is rare.
//
// A goroutine waits for room only while every descriptor is in an
// operation; a log holds one descriptor at a time, and an operation ends
// without the log, so the wait ends.
//
// The cache is the one type of the package's logs that is safe for
// concurrent use (MemFS and ErrorFS, for tests, are the others), and has
// to be: one cache serves every log of a node, each owned by
// the goroutine of its own actor, and a FlushJob syncs a handle on a
// goroutine of its own while its log appends. A mutex guards the cache
// and the state of its handles; descriptors are opened, synced and closed
// outside it. A handle itself is used as the File it stands for, by the
// log that owns it.
type FileCache struct {
	mu sync.Mutex
	// freed is signalled when a descriptor may have become free, for the
	// goroutines waiting for room (waiting of them).
	freed   sync.Cond
	waiting int
	// capacity is the most descriptors open at once; 0: no bound.
	capacity int
	// Descriptors: of handles (open), of short calls (transient), being
	// opened (opening) and being closed (closing).
	open, transient, opening, closing int
	handles                           int // handles not closed
	// idle holds the open handles that may be closed now: not in use,
	// without unsynced bytes; unsynced those that may be once
	// synced. The most recently used first. The handles of index files
	// are in idleIndexes and unsyncedIndexes instead, and closed before
	// the others of their kind (see isIndexFile).
	idle, unsynced               handleList
	idleIndexes, unsyncedIndexes handleList
	reopens                      int64
	evictions                    int64
	evictionSyncs                int64
	waits                        int64
	// dropBehind bounds the written bytes of its files left in the page
	// cache; nil: no bound (see KeepWritten).
	dropBehind *dropBehind
}

// FileCacheStats is what a FileCache holds and has done.
type FileCacheStats struct {
	// Capacity is the bound on open descriptors; 0: none.
	Capacity int
	// Handles is how many files are open through the cache, whether or not
	// their descriptors are.
	Handles int
	// Open is how many descriptors the cache holds open now, those of
	// short calls included (Transient). Of those of handles, Idle may be
	// closed now, Unsynced once synced, and Pinned not now (in use, or
	// failed to sync).
	Open      int
	Transient int
	Idle      int
	Unsynced  int
	Pinned    int
	// Reopens counts descriptors opened again for a handle whose
	// descriptor the cache had closed; Evictions counts those it closed,
	// EvictionSyncs those of them it had to fsync first; Waits counts the
	// opens that waited for room.
	Reopens       int64
	Evictions     int64
	EvictionSyncs int64
	Waits         int64
}

// NewFileCache returns a cache that holds at most capacity descriptors
// open; capacity <= 0 sets no bound (the cache then never closes a
// descriptor nor waits: what a log opened without a cache gets).
func NewFileCache(capacity int) *FileCache {
	c := &FileCache{capacity: max(capacity, 0)}
	c.freed.L = &c.mu
	return c
}

// KeepWritten bounds the bytes of the newest writes of the cache's files
// that stay in the OS page cache: older written bytes are dropped from it
// once on their way to the device (see dropBehind). bytes <= 0 sets no
// bound, as a new cache has. Call it before any file is opened through
// the cache.
func (c *FileCache) KeepWritten(bytes int64) {
	c.dropBehind = nil
	if bytes > 0 {
		c.dropBehind = &dropBehind{bound: bytes}
	}
}

// Stats returns what the cache holds now and has done so far.
func (c *FileCache) Stats() FileCacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return FileCacheStats{
		Capacity:      c.capacity,
		Handles:       c.handles,
		Open:          c.used(),
		Transient:     c.transient,
		Idle:          c.idle.len + c.idleIndexes.len,
		Unsynced:      c.unsynced.len + c.unsyncedIndexes.len,
		Pinned:        c.open - c.idle.len - c.idleIndexes.len - c.unsynced.len - c.unsyncedIndexes.len,
		Reopens:       c.reopens,
		Evictions:     c.evictions,
		EvictionSyncs: c.evictionSyncs,
		Waits:         c.waits,
	}
}

// used is how many descriptors are open or about to be.
func (c *FileCache) used() int { return c.open + c.transient + c.opening + c.closing }

// FS returns inner with its files opened through the cache, and its
// directory syncs, listings and removals counted in it; Stat, Rename,
// Remove and MkdirAll are inner's. A file removed or renamed while its
// handle is open has no path to be reopened at: the caller closes the
// handle first (the log does).
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

func (c cachedFS) SyncDir(name string) error {
	return c.cache.transientCall(func() error { return c.FS.SyncDir(name) })
}

func (c cachedFS) RemoveAll(name string) error {
	return c.cache.transientCall(func() error { return c.FS.RemoveAll(name) })
}

func (c cachedFS) ReadDir(name string) (names []string, err error) {
	err = c.cache.transientCall(func() error {
		names, err = c.FS.ReadDir(name)
		return err
	})
	return names, err
}

// transientCall runs fn, a call that holds a descriptor while it runs, in
// room made for one.
func (c *FileCache) transientCall(fn func() error) error {
	c.mu.Lock()
	c.reserveLocked()
	c.transient++
	c.mu.Unlock()
	err := fn()
	c.mu.Lock()
	c.transient--
	c.signalLocked()
	c.mu.Unlock()
	return err
}

// openHandle opens name on inner and makes it a handle of the cache.
func (c *FileCache) openHandle(inner FS, name string, flag int, perm os.FileMode) (*cachedFile, error) {
	c.mu.Lock()
	c.reserveLocked()
	c.opening++
	c.mu.Unlock()
	f, err := inner.OpenFile(name, flag, perm)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.opening--
	if err != nil {
		c.signalLocked()
		return nil, err
	}
	h := &cachedFile{cache: c, fs: inner, name: name, flag: flag &^ (os.O_CREATE | os.O_EXCL | os.O_TRUNC), perm: perm, file: f, index: isIndexFile(name)}
	c.handles++
	c.open++
	h.listLocked()
	return h, nil
}

// reserveLocked returns once a descriptor more may be opened: at once
// under the capacity; else once it has closed an idle handle's
// descriptor, or synced and closed an unsynced one's, or once another
// goroutine has freed one. The caller holds the mutex, which it lets go
// of meanwhile, and takes the room (opening, transient) before letting
// go of it.
func (c *FileCache) reserveLocked() {
	waited := false
	for c.capacity > 0 && c.used() >= c.capacity {
		if h := c.idleIndexes.back(); h != nil {
			c.evictLocked(h)
			continue
		}
		if h := c.idle.back(); h != nil {
			c.evictLocked(h)
			continue
		}
		if h := c.unsyncedIndexes.back(); h != nil {
			c.syncLocked(h)
			continue
		}
		if h := c.unsynced.back(); h != nil {
			c.syncLocked(h)
			continue
		}
		if !waited {
			waited = true
			c.waits++
		}
		c.waiting++
		c.freed.Wait()
		c.waiting--
	}
}

// evictLocked closes the descriptor of h, an idle handle.
func (c *FileCache) evictLocked(h *cachedFile) {
	h.list.remove(h)
	f := h.file
	h.file = nil
	c.open--
	c.evictions++
	c.closeLocked(f)
}

// closeLocked closes f, a descriptor counted until then, letting go of
// the mutex meanwhile. An error of close is dropped: f held no unsynced
// bytes, or its handle was closed without sync by its owner.
func (c *FileCache) closeLocked(f File) {
	c.closing++
	c.mu.Unlock()
	_ = f.Close()
	c.mu.Lock()
	c.closing--
	c.signalLocked()
}

// syncLocked fsyncs h, an unsynced handle not in use, so that it may be
// closed, letting go of the mutex meanwhile; h stays open, listed as
// what it is then. A failed fsync sticks to h (see cachedFile.failed).
func (c *FileCache) syncLocked(h *cachedFile) {
	h.list.remove(h)
	h.refs++
	written, f := h.written, h.file
	c.evictionSyncs++
	c.mu.Unlock()
	err := f.Sync()
	c.mu.Lock()
	h.refs--
	if err != nil {
		h.failed = fmt.Errorf("disk: sync %s to close it: %w", h.name, err)
	} else if written > h.synced {
		h.synced = written
	}
	h.listLocked()
	c.signalLocked()
}

// isIndexFile reports whether name is a segment's offset or time index,
// whose descriptors the cache closes before those of other files of their
// kind (idle, or holding unsynced bytes): a partition's .log is written at
// each append and read at each fetch, its indexes once every
// index.interval.bytes appended and at a lookup that misses the entries in
// memory. With more segments than the cache holds descriptors for (10,000
// partitions have 30,000 files), the .log files of the partitions in use
// then keep theirs, while plain LRU order closed them for their indexes and
// each append reopened its .log.
func isIndexFile(name string) bool {
	return strings.HasSuffix(name, indexExt) || strings.HasSuffix(name, timeIndexExt)
}

// signalLocked wakes the goroutines waiting for room.
func (c *FileCache) signalLocked() {
	if c.waiting > 0 {
		c.freed.Broadcast()
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
	// index is set for an index file (see isIndexFile).
	index bool
	// position is where the next Write goes, restored on a reopen.
	position atomic.Int64
	// reopening is held while the descriptor is opened again, so that two
	// goroutines finding it closed open it once.
	reopening sync.Mutex

	// Guarded by cache.mu.
	name string
	file File // nil while the cache has it closed
	// refs counts the operations in progress.
	refs int
	// written counts writes; synced is the count an fsync covered: the
	// file holds unsynced bytes while they differ.
	written, synced uint64
	// failed is the error of an fsync the cache made to close the
	// descriptor: it keeps the descriptor open, and Sync returns it.
	failed     error
	closed     bool
	prev, next *cachedFile // in list
	list       *handleList // cache.idle, cache.unsynced or nil
}

// listLocked puts h in the list of what it is now, if any.
func (h *cachedFile) listLocked() {
	c := h.cache
	if h.list != nil {
		h.list.remove(h)
	}
	switch {
	case h.file == nil || h.refs > 0 || h.closed || h.failed != nil:
	case h.written == h.synced && h.index:
		c.idleIndexes.pushFront(h)
	case h.written == h.synced:
		c.idle.pushFront(h)
	case h.index:
		c.unsyncedIndexes.pushFront(h)
	default:
		c.unsynced.pushFront(h)
	}
}

// acquire counts an operation on h and returns its descriptor,
// reopening it when the cache had closed it, and the write count it
// covers.
func (h *cachedFile) acquire(op string) (File, uint64, error) {
	c := h.cache
	c.mu.Lock()
	h.refs++
	if h.list != nil {
		h.list.remove(h)
	}
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

// reopen opens h's descriptor again, once, in room the cache makes for
// it, and seeks it to the write position.
func (h *cachedFile) reopen() (File, error) {
	h.reopening.Lock()
	defer h.reopening.Unlock()
	c := h.cache
	c.mu.Lock()
	if h.file != nil {
		f := h.file
		c.mu.Unlock()
		return f, nil
	}
	c.reserveLocked()
	c.opening++
	name := h.name
	c.mu.Unlock()
	f, err := h.fs.OpenFile(name, h.flag, h.perm)
	if err != nil {
		err = fmt.Errorf("disk: reopen %s: %w", name, err)
	} else if position := h.position.Load(); position != 0 {
		if _, serr := f.Seek(position, 0); serr != nil {
			_ = f.Close()
			f, err = nil, fmt.Errorf("disk: reopen %s: seek to %d: %w", name, position, serr)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.opening--
	if err != nil {
		c.signalLocked()
		return nil, err
	}
	h.file = f
	c.open++
	c.reopens++
	return f, nil
}

// release ends an operation on h; wrote says it changed the
// file.
func (h *cachedFile) release(wrote bool) { h.releaseSynced(wrote, 0, false) }

// releaseSynced is release for an fsync that covered the writes counted
// up to written when it began.
func (h *cachedFile) releaseSynced(wrote bool, written uint64, synced bool) {
	c := h.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	h.refs--
	if wrote {
		h.written++
	}
	if synced && written > h.synced {
		h.synced = written
	}
	if h.closed && h.refs == 0 && h.file != nil {
		f := h.file
		h.file = nil
		c.open--
		c.closeLocked(f)
		return
	}
	h.listLocked()
	if h.refs == 0 {
		c.signalLocked()
	}
}

// unsynced reports whether f is a handle of a FileCache holding unsynced
// bytes, or the error of a failed fsync.
func unsynced(f File) bool {
	h, ok := f.(*cachedFile)
	if !ok {
		return false
	}
	h.cache.mu.Lock()
	defer h.cache.mu.Unlock()
	return h.written != h.synced || h.failed != nil
}

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
// began no longer keep the descriptor open. It returns the error of an
// fsync the cache made to close the descriptor, if one failed.
func (h *cachedFile) Sync() error { return h.syncWith(File.Sync) }

// SyncData is Sync with fdatasync where the descriptor's file can (see
// dataSyncer).
func (h *cachedFile) SyncData() error { return h.syncWith(syncData) }

// syncWith is Sync with sync doing the descriptor's sync.
func (h *cachedFile) syncWith(sync func(File) error) error {
	f, written, err := h.acquire("sync")
	if err != nil {
		return err
	}
	return h.endSync(f, written, sync)
}

// writes returns the count of the writes that have returned: those a
// sync of the file system that starts now covers (see confirmSync).
func (h *cachedFile) writes() uint64 {
	h.cache.mu.Lock()
	defer h.cache.mu.Unlock()
	return h.written
}

// confirmSync ends a sync of the file's whole file system that began when
// writes returned written (see RunFlushJobs): it checks the descriptor for
// a failed writeback of the file's own, and on success the writes up to
// written count as synced. A descriptor the cache closed meanwhile was
// synced first, and is reopened to be checked.
func (h *cachedFile) confirmSync(written uint64) error {
	f, _, err := h.acquire("sync")
	if err != nil {
		return err
	}
	return h.endSync(f, written, checkWriteback)
}

// endSync runs sync on f, the descriptor acquired for it, unless an fsync
// the cache made to close the descriptor failed, whose error it returns
// then; on success the writes up to written count as synced.
func (h *cachedFile) endSync(f File, written uint64, sync func(File) error) error {
	h.cache.mu.Lock()
	failed := h.failed
	h.cache.mu.Unlock()
	if failed != nil {
		h.release(false)
		return failed
	}
	err := sync(f)
	h.releaseSynced(false, written, err == nil)
	return err
}

// SyncFileSystem syncs the file system of the descriptor's file where it
// can (see fileSystemSyncer).
func (h *cachedFile) SyncFileSystem() error { return h.call("syncfs", syncFileSystem) }

// CheckWriteback checks the descriptor's file for a failed writeback
// where it can (see fileSystemSyncer).
func (h *cachedFile) CheckWriteback() error { return h.call("check", checkWriteback) }

// call runs fn, an operation named op that changes nothing of the file's
// bytes, on the descriptor.
func (h *cachedFile) call(op string, fn func(File) error) error {
	f, _, err := h.acquire(op)
	if err != nil {
		return err
	}
	err = fn(f)
	h.release(false)
	return err
}

// StartWriteback passes the hint on to the descriptor when its file can
// take it (see writebacker), and does nothing otherwise. The range then
// counts towards the cache's bound on written bytes kept in the page
// cache (see KeepWritten).
func (h *cachedFile) StartWriteback(offset, n int64) error {
	err := h.call("writeback", func(f File) error {
		if w, ok := f.(writebacker); ok {
			return w.StartWriteback(offset, n)
		}
		return nil
	})
	if err == nil {
		h.cache.dropBehind.written(h, offset, n)
	}
	return err
}

// dropPages asks the OS to drop a range of the file from the page cache
// (see pageDropper), when the handle's descriptor is open and its file can
// take it: it does not reopen a descriptor for it. A failure is left
// alone: the pages stay cached, which is what the kernel would do anyway.
func (h *cachedFile) dropPages(offset, n int64) {
	c := h.cache
	c.mu.Lock()
	f := h.file
	if f == nil || h.closed {
		c.mu.Unlock()
		return
	}
	h.refs++
	if h.list != nil {
		h.list.remove(h)
	}
	c.mu.Unlock()
	if d, ok := f.(pageDropper); ok {
		_ = d.DropPages(offset, n)
	}
	h.release(false)
}

// Close closes the handle for good: its descriptor at once, or when the
// last operation in progress on it ends. It does not sync. A second Close fails.
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
	if h.list != nil {
		h.list.remove(h)
	}
	if h.refs > 0 || h.file == nil {
		c.mu.Unlock()
		return nil
	}
	f := h.file
	h.file = nil
	c.open--
	c.closing++
	c.mu.Unlock()
	err := f.Close()
	c.mu.Lock()
	c.closing--
	c.signalLocked()
	c.mu.Unlock()
	return err
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
	h.list = l
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
	if h.list != l {
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
	h.prev, h.next, h.list = nil, nil, nil
	l.len--
}

// back returns the least recently used handle, nil when the list is empty.
func (l *handleList) back() *cachedFile { return l.tail }
