package disk

import (
	"errors"
	"io"
	"io/fs"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// errCrashed is returned by a File of a MemFS opened before the last Crash.
var errCrashed = errors.New("disk: file handle invalidated by a crash")

// MemFS is an in-memory FS for tests that models what survives a crash.
//
// Each file has its current bytes and its synced bytes (copied by
// File.Sync). Each directory has its current entries and its synced entries
// (copied by SyncDir). Creating, renaming or removing a file or directory
// (MkdirAll included) is durable only after SyncDir of its parent; a rename
// across directories needs both parents synced. Crash drops everything not
// durable; CrashTorn also keeps a random part of each file's unsynced tail,
// as a torn write would. Files opened before a crash fail every operation
// afterwards but Close, so tests reopen.
//
// Paths are slash-separated; relative paths are taken from the root, so "a"
// and "/a" name the same file. The root directory always exists.
//
// A MemFS may be given a capacity (SetCapacity): the bytes its files may
// hold in all, counted as the sum of the sizes of the files its directories
// name (a hole counts as written). A change that would take that past the
// capacity fails as the OS fails it, with an *fs.PathError wrapping
// syscall.ENOSPC: a Write or WriteAt writes the bytes that fit and returns
// their count with the error, a Truncate that grows a file changes nothing,
// and creating a file or a directory fails when no byte is free (an entry
// takes room). Overwriting bytes, shrinking a file and removing one never
// need room. Sync and SyncDir never fail for lack of room. By default there
// is no capacity.
//
// MemFS is guarded by a mutex, so tests may inspect it from another
// goroutine; the Files it returns are not safe for concurrent use.
type MemFS struct {
	mu    sync.Mutex
	root  *memNode
	epoch uint64
	// capacity is the most bytes the files may hold; < 0: no limit.
	capacity int64
}

// memNode is a file or a directory, shared by every entry that names it.
type memNode struct {
	dir     bool
	mode    os.FileMode
	modTime time.Time

	// Files.
	data   []byte
	synced []byte

	// Directories.
	entries       map[string]*memNode
	syncedEntries map[string]*memNode
}

func newDirNode(perm os.FileMode) *memNode {
	return &memNode{
		dir:           true,
		mode:          fs.ModeDir | perm.Perm(),
		modTime:       time.Now(),
		entries:       map[string]*memNode{},
		syncedEntries: map[string]*memNode{},
	}
}

// NewMemFS returns an empty memory file system holding only its root, with
// no capacity.
func NewMemFS() *MemFS {
	return &MemFS{root: newDirNode(0o755), capacity: -1}
}

// SetCapacity sets the most bytes the files may hold in all; n < 0 removes
// the limit. It may be changed at any time, to below what the files hold
// already: changes that need room then fail until enough is removed or the
// capacity is raised.
func (m *MemFS) SetCapacity(n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.capacity = n
}

// Used returns the bytes the files hold: the sum of the sizes of the files
// the directories name, each counted once.
func (m *MemFS) Used() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.used()
}

// Free returns the bytes that may still be written before the capacity is
// reached, 0 when it is reached or passed, and math.MaxInt64 with no
// capacity.
func (m *MemFS) Free() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.free()
}

// used is Used; the caller holds the lock.
func (m *MemFS) used() int64 {
	var n int64
	seen := map[*memNode]bool{}
	var visit func(d *memNode)
	visit = func(d *memNode) {
		for _, c := range d.entries {
			if seen[c] {
				continue
			}
			seen[c] = true
			if c.dir {
				visit(c)
			} else {
				n += int64(len(c.data))
			}
		}
	}
	visit(m.root)
	return n
}

// free is Free; the caller holds the lock.
func (m *MemFS) free() int64 {
	if m.capacity < 0 {
		return math.MaxInt64
	}
	return max(0, m.capacity-m.used())
}

// errNoRoom is the error of a change the capacity has no room for.
func errNoRoom(op, name string) error {
	return &fs.PathError{Op: op, Path: name, Err: syscall.ENOSPC}
}

var _ FS = (*MemFS)(nil)

// splitPath cleans name and returns its components; the root has none.
func splitPath(name string) []string {
	p := path.Clean("/" + name)
	if p == "/" {
		return nil
	}
	return strings.Split(p[1:], "/")
}

// walk returns the node at parts.
func (m *MemFS) walk(parts []string) (*memNode, error) {
	n := m.root
	for _, p := range parts {
		if !n.dir {
			return nil, syscall.ENOTDIR
		}
		c, ok := n.entries[p]
		if !ok {
			return nil, fs.ErrNotExist
		}
		n = c
	}
	return n, nil
}

// parent returns the directory holding name and name's last component.
// The root has no parent: base is "" for it.
func (m *MemFS) parent(name string) (*memNode, string, error) {
	parts := splitPath(name)
	if len(parts) == 0 {
		return nil, "", nil
	}
	d, err := m.walk(parts[:len(parts)-1])
	if err != nil {
		return nil, "", err
	}
	if !d.dir {
		return nil, "", syscall.ENOTDIR
	}
	return d, parts[len(parts)-1], nil
}

// OpenFile opens name. O_RDONLY, O_WRONLY, O_RDWR, O_CREATE, O_EXCL,
// O_TRUNC and O_APPEND are honoured; directories cannot be opened.
func (m *MemFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parent(name)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	if base == "" {
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EISDIR}
	}
	n, ok := d.entries[base]
	switch {
	case !ok && flag&os.O_CREATE == 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case !ok && m.free() == 0:
		return nil, errNoRoom("open", name)
	case !ok:
		n = &memNode{mode: perm.Perm(), modTime: time.Now()}
		d.entries[base] = n
	case flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	case n.dir:
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EISDIR}
	}
	access := flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	f := &memFile{
		fs:     m,
		node:   n,
		name:   name,
		read:   access == os.O_RDONLY || access == os.O_RDWR,
		write:  access == os.O_WRONLY || access == os.O_RDWR,
		append: flag&os.O_APPEND != 0,
		epoch:  m.epoch,
	}
	if flag&os.O_TRUNC != 0 && f.write {
		n.data = nil
		n.modTime = time.Now()
	}
	return f, nil
}

// Remove deletes a file or an empty directory.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parent(name)
	if err != nil {
		return &fs.PathError{Op: "remove", Path: name, Err: err}
	}
	if base == "" {
		return &fs.PathError{Op: "remove", Path: name, Err: syscall.EBUSY}
	}
	n, ok := d.entries[base]
	if !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	if n.dir && len(n.entries) > 0 {
		return &fs.PathError{Op: "remove", Path: name, Err: syscall.ENOTEMPTY}
	}
	delete(d.entries, base)
	return nil
}

// RemoveAll deletes name and everything in it. A missing name is not an
// error.
func (m *MemFS) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parent(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &fs.PathError{Op: "removeall", Path: name, Err: err}
	}
	if base == "" {
		return &fs.PathError{Op: "removeall", Path: name, Err: syscall.EBUSY}
	}
	delete(d.entries, base)
	return nil
}

// Rename moves oldname to newname, replacing newname if it is a file or
// an empty directory.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	pathErr := func(err error) error {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	od, obase, err := m.parent(oldname)
	if err != nil {
		return pathErr(err)
	}
	nd, nbase, err := m.parent(newname)
	if err != nil {
		return pathErr(err)
	}
	if obase == "" || nbase == "" {
		return pathErr(syscall.EBUSY)
	}
	n, ok := od.entries[obase]
	if !ok {
		return pathErr(fs.ErrNotExist)
	}
	oldParts, newParts := splitPath(oldname), splitPath(newname)
	if slices.Equal(oldParts, newParts) {
		return nil
	}
	if n.dir && len(newParts) > len(oldParts) && slices.Equal(newParts[:len(oldParts)], oldParts) {
		return pathErr(syscall.EINVAL)
	}
	if target, ok := nd.entries[nbase]; ok {
		switch {
		case n.dir && !target.dir:
			return pathErr(syscall.ENOTDIR)
		case !n.dir && target.dir:
			return pathErr(syscall.EISDIR)
		case target.dir && len(target.entries) > 0:
			return pathErr(syscall.ENOTEMPTY)
		}
	}
	delete(od.entries, obase)
	nd.entries[nbase] = n
	return nil
}

// MkdirAll creates name and any missing parents. Each created directory is
// durable only after SyncDir of its parent.
func (m *MemFS) MkdirAll(name string, perm os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.root
	for _, p := range splitPath(name) {
		c, ok := n.entries[p]
		if !ok {
			if m.free() == 0 {
				return errNoRoom("mkdir", name)
			}
			c = newDirNode(perm)
			n.entries[p] = c
		}
		if !c.dir {
			return &fs.PathError{Op: "mkdir", Path: name, Err: syscall.ENOTDIR}
		}
		n = c
	}
	return nil
}

// ReadDir returns the sorted names of the entries of directory name.
func (m *MemFS) ReadDir(name string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.walk(splitPath(name))
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: err}
	}
	if !n.dir {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: syscall.ENOTDIR}
	}
	return slices.Sorted(maps.Keys(n.entries)), nil
}

// Stat describes name.
func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	parts := splitPath(name)
	n, err := m.walk(parts)
	if err != nil {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	base := "/"
	if len(parts) > 0 {
		base = parts[len(parts)-1]
	}
	return memFileInfo{name: base, size: int64(len(n.data)), mode: n.mode, modTime: n.modTime}, nil
}

// SyncDir makes the current entries of directory name durable.
func (m *MemFS) SyncDir(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.walk(splitPath(name))
	if err != nil {
		return &fs.PathError{Op: "syncdir", Path: name, Err: err}
	}
	if !n.dir {
		return &fs.PathError{Op: "syncdir", Path: name, Err: syscall.ENOTDIR}
	}
	n.syncedEntries = maps.Clone(n.entries)
	return nil
}

// SyncAll makes the whole current state durable, as if every file and
// directory had been synced. Tests use it after setting up a tree.
func (m *MemFS) SyncAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	var visit func(d *memNode)
	visit = func(d *memNode) {
		d.syncedEntries = maps.Clone(d.entries)
		for _, c := range d.entries {
			if c.dir {
				visit(c)
			} else {
				c.synced = slices.Clone(c.data)
			}
		}
	}
	visit(m.root)
}

// Crash drops everything not durable: every directory reverts to its synced
// entries and every file to its synced bytes. Files opened before the crash
// become unusable.
func (m *MemFS) Crash() { m.crash(nil) }

// CrashTorn is Crash, except that each file keeps its synced bytes plus a
// prefix of random length of its unsynced tail (bytes past its synced
// length), and in about one case in four some of the kept tail bytes are
// replaced by garbage: a torn write. Changes made since the last sync
// inside the synced length are lost, as with Crash. Files are visited in
// name order, so a seeded rng reproduces the same damage.
func (m *MemFS) CrashTorn(rng *rand.Rand) { m.crash(rng) }

func (m *MemFS) crash(rng *rand.Rand) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.epoch++
	seen := map[*memNode]bool{}
	var visit func(d *memNode)
	visit = func(d *memNode) {
		d.entries = maps.Clone(d.syncedEntries)
		for _, name := range slices.Sorted(maps.Keys(d.entries)) {
			c := d.entries[name]
			if seen[c] {
				continue
			}
			seen[c] = true
			if c.dir {
				visit(c)
				continue
			}
			c.data = tornBytes(c, rng)
			c.synced = slices.Clone(c.data)
		}
	}
	visit(m.root)
}

// tornBytes returns what survives of a file: its synced bytes, plus with an
// rng a random prefix of the unsynced tail, sometimes partly garbage.
func tornBytes(n *memNode, rng *rand.Rand) []byte {
	kept := slices.Clone(n.synced)
	if rng == nil || len(n.data) <= len(n.synced) {
		return kept
	}
	tail := n.data[len(n.synced):]
	k := rng.IntN(len(tail) + 1)
	kept = append(kept, tail[:k]...)
	if k > 0 && rng.IntN(4) == 0 {
		start := len(n.synced) + rng.IntN(k)
		end := start + 1 + rng.IntN(min(len(kept)-start, 16))
		for i := start; i < end; i++ {
			kept[i] = byte(rng.Uint32())
		}
	}
	return kept
}

// ReadFile returns a copy of the current bytes of file name.
func (m *MemFS) ReadFile(name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.walk(splitPath(name))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	if n.dir {
		return nil, &fs.PathError{Op: "read", Path: name, Err: syscall.EISDIR}
	}
	return slices.Clone(n.data), nil
}

// WriteFile creates or replaces file name with data and makes both the
// bytes and the directory entry durable. The parent directory must exist.
// Without room for all of data under the capacity it writes nothing.
func (m *MemFS) WriteFile(name string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parent(name)
	if err != nil {
		return &fs.PathError{Op: "write", Path: name, Err: err}
	}
	if base == "" {
		return &fs.PathError{Op: "write", Path: name, Err: syscall.EISDIR}
	}
	n, ok := d.entries[base]
	if ok && n.dir {
		return &fs.PathError{Op: "write", Path: name, Err: syscall.EISDIR}
	}
	growth := int64(len(data))
	if ok {
		growth -= int64(len(n.data))
	}
	if free := m.free(); growth > free || !ok && free == 0 {
		return errNoRoom("write", name)
	}
	if !ok {
		n = &memNode{mode: 0o644}
		d.entries[base] = n
	}
	n.data = slices.Clone(data)
	n.synced = slices.Clone(data)
	n.modTime = time.Now()
	d.syncedEntries[base] = n
	return nil
}

// Corrupt flips the lowest bit of the byte at off of file name, in both its
// current and its synced bytes (where they reach off): damage on the medium.
func (m *MemFS) Corrupt(name string, off int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.walk(splitPath(name))
	if err != nil {
		return &fs.PathError{Op: "corrupt", Path: name, Err: err}
	}
	if n.dir || off < 0 || off >= int64(len(n.data)) {
		return &fs.PathError{Op: "corrupt", Path: name, Err: syscall.EINVAL}
	}
	n.data[off] ^= 1
	if off < int64(len(n.synced)) {
		n.synced[off] ^= 1
	}
	return nil
}

type memFileInfo struct {
	name    string
	size    int64
	mode    os.FileMode
	modTime time.Time
}

func (fi memFileInfo) Name() string       { return fi.name }
func (fi memFileInfo) Size() int64        { return fi.size }
func (fi memFileInfo) Mode() os.FileMode  { return fi.mode }
func (fi memFileInfo) ModTime() time.Time { return fi.modTime }
func (fi memFileInfo) IsDir() bool        { return fi.mode.IsDir() }
func (fi memFileInfo) Sys() any           { return nil }

// memFile is an open file of a MemFS. Not safe for concurrent use.
type memFile struct {
	fs     *MemFS
	node   *memNode
	name   string
	pos    int64
	read   bool
	write  bool
	append bool
	epoch  uint64
	closed bool
}

// check reports whether the handle may be used; the caller holds the lock.
func (f *memFile) check(op string) error {
	if f.closed {
		return &fs.PathError{Op: op, Path: f.name, Err: fs.ErrClosed}
	}
	if f.epoch != f.fs.epoch {
		return &fs.PathError{Op: op, Path: f.name, Err: errCrashed}
	}
	return nil
}

func (f *memFile) checkWrite(op string) error {
	if err := f.check(op); err != nil {
		return err
	}
	if !f.write {
		return &fs.PathError{Op: op, Path: f.name, Err: syscall.EBADF}
	}
	return nil
}

// fit returns how many bytes of p written at off the capacity has room
// for: all of them, or those up to where the file's growth uses the room
// left. The caller holds the lock.
func (f *memFile) fit(p []byte, off int64) int {
	size := int64(len(f.node.data))
	end := off + int64(len(p))
	if end <= size {
		return len(p)
	}
	free := f.fs.free()
	if end-size <= free {
		return len(p)
	}
	return int(max(0, size+free-off))
}

// writeAt writes p at off, growing the file with zeros as needed.
func (f *memFile) writeAt(p []byte, off int64) {
	n := f.node
	if end := off + int64(len(p)); end > int64(len(n.data)) {
		old := int64(len(n.data))
		n.data = slices.Grow(n.data, int(end-old))[:end]
		if off > old {
			clear(n.data[old:off]) // a write past the end leaves a hole of zeros
		}
	}
	copy(n.data[off:], p)
	n.modTime = time.Now()
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkWrite("write"); err != nil {
		return 0, err
	}
	if f.append {
		f.pos = int64(len(f.node.data))
	}
	n := f.fit(p, f.pos)
	if n > 0 {
		f.writeAt(p[:n], f.pos)
		f.pos += int64(n)
	}
	if n < len(p) {
		return n, errNoRoom("write", f.name)
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkWrite("writeat"); err != nil {
		return 0, err
	}
	if f.append {
		return 0, &fs.PathError{Op: "writeat", Path: f.name, Err: errors.New("invalid use of WriteAt on file opened with O_APPEND")}
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "writeat", Path: f.name, Err: syscall.EINVAL}
	}
	n := f.fit(p, off)
	if n > 0 {
		f.writeAt(p[:n], off)
	}
	if n < len(p) {
		return n, errNoRoom("writeat", f.name)
	}
	return n, nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read"); err != nil {
		return 0, err
	}
	if !f.read {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: syscall.EBADF}
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: syscall.EINVAL}
	}
	data := f.node.data
	if off >= int64(len(data)) {
		return 0, io.EOF
	}
	n := copy(p, data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("sync"); err != nil {
		return err
	}
	f.node.synced = slices.Clone(f.node.data)
	return nil
}

// SyncFileSystem makes the whole MemFS durable, as syncfs does a file
// system (see SyncAll).
func (f *memFile) SyncFileSystem() error {
	f.fs.mu.Lock()
	err := f.check("syncfs")
	f.fs.mu.Unlock()
	if err != nil {
		return err
	}
	f.fs.SyncAll()
	return nil
}

// CheckWriteback finds no failed writeback: a MemFS has none.
func (f *memFile) CheckWriteback() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return f.check("check")
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkWrite("truncate"); err != nil {
		return err
	}
	if size < 0 {
		return &fs.PathError{Op: "truncate", Path: f.name, Err: syscall.EINVAL}
	}
	n := f.node
	if size <= int64(len(n.data)) {
		n.data = n.data[:size:size]
	} else {
		if size-int64(len(n.data)) > f.fs.free() {
			return errNoRoom("truncate", f.name)
		}
		n.data = append(n.data, make([]byte, size-int64(len(n.data)))...)
	}
	n.modTime = time.Now()
	return nil
}

func (f *memFile) Seek(offset int64, whence int) (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("seek"); err != nil {
		return 0, err
	}
	var pos int64
	switch whence {
	case io.SeekStart:
		pos = offset
	case io.SeekCurrent:
		pos = f.pos + offset
	case io.SeekEnd:
		pos = int64(len(f.node.data)) + offset
	default:
		return 0, &fs.PathError{Op: "seek", Path: f.name, Err: syscall.EINVAL}
	}
	if pos < 0 {
		return 0, &fs.PathError{Op: "seek", Path: f.name, Err: syscall.EINVAL}
	}
	f.pos = pos
	return pos, nil
}

func (f *memFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("stat"); err != nil {
		return 0, err
	}
	return int64(len(f.node.data)), nil
}

// Close releases the handle. Closing a handle made unusable by a crash
// succeeds, so cleanup code need not care; closing twice fails.
func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return &fs.PathError{Op: "close", Path: f.name, Err: fs.ErrClosed}
	}
	f.closed = true
	return nil
}

func (f *memFile) Name() string { return f.name }
