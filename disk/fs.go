package disk

import (
	"errors"
	"io"
	"os"
)

// File is an open file of an FS. Logs append with Write and read with ReadAt;
// index files are rewritten with WriteAt and cut with Truncate.
type File interface {
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Closer
	// Sync makes the file's written bytes durable (fsync).
	Sync() error
	// Truncate changes the file's size. The write position is unaffected:
	// callers that append after a truncate Seek first.
	Truncate(size int64) error
	// Seek sets the position of the next Write.
	Seek(offset int64, whence int) (int64, error)
	// Size is the file's current size.
	Size() (int64, error)
	// Name is the path the file was opened with.
	Name() string
}

// writebacker is a File that can start writing a range of itself to its
// device without waiting for it (on Linux, sync_file_range with
// SYNC_FILE_RANGE_WRITE). It makes nothing durable; Sync still does.
type writebacker interface {
	StartWriteback(offset, n int64) error
}

// FS is the file system a log lives on: the OS, or a memory file system in
// tests that can crash and lose what was not synced, and fail on demand.
// Paths are slash-separated as for package os.
type FS interface {
	// OpenFile opens name with os.O_* flags (O_RDONLY, O_RDWR, O_CREATE,
	// O_EXCL, O_TRUNC, O_APPEND are honoured).
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Remove deletes a file or an empty directory.
	Remove(name string) error
	// RemoveAll deletes a directory and everything in it.
	RemoveAll(name string) error
	// Rename moves oldname to newname, replacing newname if it exists.
	Rename(oldname, newname string) error
	// MkdirAll creates a directory and its parents.
	MkdirAll(name string, perm os.FileMode) error
	// ReadDir returns the names of the entries of a directory, sorted.
	ReadDir(name string) ([]string, error)
	// Stat returns information about a file or directory.
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes the directory's entries (creates, renames, removes) durable.
	SyncDir(name string) error
}

// ReadFile returns the whole content of the file name on fsys.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, size)
	if n, err := f.ReadAt(b, 0); err != nil && !(errors.Is(err, io.EOF) && n == len(b)) {
		return nil, err
	}
	return b, nil
}
