package disk

import "golang.org/x/sys/unix"

// StartWriteback starts writing n bytes at offset to the device and returns
// without waiting for them.
func (f osFile) StartWriteback(offset, n int64) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var werr error
	if err := rc.Control(func(fd uintptr) {
		werr = unix.SyncFileRange(int(fd), offset, n, unix.SYNC_FILE_RANGE_WRITE)
	}); err != nil {
		return err
	}
	return werr
}

// DropPages asks the kernel to drop n bytes at offset from the page cache
// (POSIX_FADV_DONTNEED). It drops clean pages only: a dirty page, or one
// under writeback, stays.
func (f osFile) DropPages(offset, n int64) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var aerr error
	if err := rc.Control(func(fd uintptr) {
		aerr = unix.Fadvise(int(fd), offset, n, unix.FADV_DONTNEED)
	}); err != nil {
		return err
	}
	return aerr
}
