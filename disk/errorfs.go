package disk

import (
	"io/fs"
	"math/rand/v2"
	"os"
	"sync"
)

// ErrorFS wraps an FS and fails an operation on demand, for tests that
// inject an error at every n-th file operation (as pebble's vfs/errorfs).
//
// Every call of an FS method and of a method of a File it opened counts as
// one operation (File.Name excepted). InjectAt(n) makes the n-th eligible
// operation from now fail with an *fs.PathError naming the operation and
// the path and wrapping ErrInjected, or the error set by InjectError (such
// as syscall.ENOSPC, for a disk that fills); by default every operation is
// eligible, and with InjectWritesOnly(true) only the mutating ones
// (creating, truncating or writing opens, Write, WriteAt, Truncate, Sync,
// SyncFileSystem, CheckWriteback, Remove, RemoveAll, Rename, MkdirAll,
// SyncDir). The injection fires once
// unless InjectSticky(true), after which every later eligible operation
// fails too, like a dead disk. A failing Write or WriteAt writes nothing,
// or with TornWrites a random prefix of its bytes first.
//
// Safe for concurrent use as far as its inner FS is: a Log's FlushJob syncs
// a file from another goroutine than its appends.
type ErrorFS struct {
	mu         sync.Mutex
	inner      FS
	ops        int64
	eligible   int64
	target     int64 // eligible count at which to fail; 0: none
	injected   int64
	writesOnly bool
	sticky     bool
	dead       bool
	torn       *rand.Rand
	err        error // what an injected failure wraps
}

// NewErrorFS wraps inner. No error is injected until InjectAt.
func NewErrorFS(inner FS) *ErrorFS {
	return &ErrorFS{inner: inner, err: ErrInjected}
}

var _ FS = (*ErrorFS)(nil)

// InjectAt makes the n-th eligible operation from now (1-based) fail. n <= 0
// cancels a pending injection and revives a sticky failure.
func (e *ErrorFS) InjectAt(n int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dead = false
	if n <= 0 {
		e.target = 0
		return
	}
	e.target = e.eligible + n
}

// InjectWritesOnly limits injection, and the counting of InjectAt, to
// mutating operations. Default false.
func (e *ErrorFS) InjectWritesOnly(on bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.writesOnly = on
}

// InjectSticky makes every eligible operation after an injected failure
// fail too. Default false.
func (e *ErrorFS) InjectSticky(on bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sticky = on
}

// InjectError sets the error an injected failure wraps, in an
// *fs.PathError as the OS wraps an errno. nil restores the default,
// ErrInjected.
func (e *ErrorFS) InjectError(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err == nil {
		err = ErrInjected
	}
	e.err = err
}

// TornWrites makes a failing Write or WriteAt write a prefix of random
// length (possibly empty, never whole) of its bytes before failing. A nil
// rng turns it off, the default.
func (e *ErrorFS) TornWrites(rng *rand.Rand) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.torn = rng
}

// Ops returns the number of operations so far, eligible or not.
func (e *ErrorFS) Ops() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ops
}

// Injected returns the number of operations failed by injection so far.
func (e *ErrorFS) Injected() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.injected
}

// op counts one operation and returns the injected error if it must fail.
func (e *ErrorFS) op(name, path string, mutating bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ops++
	if e.writesOnly && !mutating {
		return nil
	}
	e.eligible++
	if e.dead || (e.target != 0 && e.eligible == e.target) {
		e.target = 0
		e.dead = e.sticky
		e.injected++
		return &fs.PathError{Op: name, Path: path, Err: e.err}
	}
	return nil
}

func (e *ErrorFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	mutating := flag&(os.O_CREATE|os.O_TRUNC) != 0
	if err := e.op("open", name, mutating); err != nil {
		return nil, err
	}
	f, err := e.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &errorFile{fs: e, inner: f}, nil
}

func (e *ErrorFS) Remove(name string) error {
	if err := e.op("remove", name, true); err != nil {
		return err
	}
	return e.inner.Remove(name)
}

func (e *ErrorFS) RemoveAll(name string) error {
	if err := e.op("removeall", name, true); err != nil {
		return err
	}
	return e.inner.RemoveAll(name)
}

func (e *ErrorFS) Rename(oldname, newname string) error {
	if err := e.op("rename", oldname, true); err != nil {
		return err
	}
	return e.inner.Rename(oldname, newname)
}

func (e *ErrorFS) MkdirAll(name string, perm os.FileMode) error {
	if err := e.op("mkdir", name, true); err != nil {
		return err
	}
	return e.inner.MkdirAll(name, perm)
}

func (e *ErrorFS) ReadDir(name string) ([]string, error) {
	if err := e.op("readdir", name, false); err != nil {
		return nil, err
	}
	return e.inner.ReadDir(name)
}

func (e *ErrorFS) Stat(name string) (os.FileInfo, error) {
	if err := e.op("stat", name, false); err != nil {
		return nil, err
	}
	return e.inner.Stat(name)
}

func (e *ErrorFS) SyncDir(name string) error {
	if err := e.op("syncdir", name, true); err != nil {
		return err
	}
	return e.inner.SyncDir(name)
}

// errorFile counts and fails the operations of a File of an ErrorFS.
type errorFile struct {
	fs    *ErrorFS
	inner File
}

// tornPrefix returns how many bytes of p a failing write keeps.
func (f *errorFile) tornPrefix(p []byte) int {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.fs.torn == nil || len(p) == 0 {
		return 0
	}
	return f.fs.torn.IntN(len(p))
}

func (f *errorFile) Write(p []byte) (int, error) {
	if err := f.fs.op("write", f.inner.Name(), true); err != nil {
		n := 0
		if k := f.tornPrefix(p); k > 0 {
			n, _ = f.inner.Write(p[:k])
		}
		return n, err
	}
	return f.inner.Write(p)
}

func (f *errorFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.op("writeat", f.inner.Name(), true); err != nil {
		n := 0
		if k := f.tornPrefix(p); k > 0 {
			n, _ = f.inner.WriteAt(p[:k], off)
		}
		return n, err
	}
	return f.inner.WriteAt(p, off)
}

func (f *errorFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.op("read", f.inner.Name(), false); err != nil {
		return 0, err
	}
	return f.inner.ReadAt(p, off)
}

func (f *errorFile) Sync() error {
	if err := f.fs.op("sync", f.inner.Name(), true); err != nil {
		return err
	}
	return f.inner.Sync()
}

// SyncFileSystem syncs the inner file's file system where it can (see
// fileSystemSyncer); it counts as a mutating operation.
func (f *errorFile) SyncFileSystem() error {
	if err := f.fs.op("syncfs", f.inner.Name(), true); err != nil {
		return err
	}
	return syncFileSystem(f.inner)
}

// CheckWriteback checks the inner file where it can (see
// fileSystemSyncer); it counts as a mutating operation, as a sync does.
func (f *errorFile) CheckWriteback() error {
	if err := f.fs.op("check", f.inner.Name(), true); err != nil {
		return err
	}
	return checkWriteback(f.inner)
}

func (f *errorFile) Truncate(size int64) error {
	if err := f.fs.op("truncate", f.inner.Name(), true); err != nil {
		return err
	}
	return f.inner.Truncate(size)
}

func (f *errorFile) Seek(offset int64, whence int) (int64, error) {
	if err := f.fs.op("seek", f.inner.Name(), false); err != nil {
		return 0, err
	}
	return f.inner.Seek(offset, whence)
}

func (f *errorFile) Size() (int64, error) {
	if err := f.fs.op("stat", f.inner.Name(), false); err != nil {
		return 0, err
	}
	return f.inner.Size()
}

// Close closes the inner file even when the failure is injected, so no
// handle leaks; the injected error is still returned.
func (f *errorFile) Close() error {
	if err := f.fs.op("close", f.inner.Name(), false); err != nil {
		_ = f.inner.Close()
		return err
	}
	return f.inner.Close()
}

func (f *errorFile) Name() string { return f.inner.Name() }
