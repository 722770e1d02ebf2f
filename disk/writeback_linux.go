package disk

import "golang.org/x/sys/unix"

// StartWriteback starts writing n bytes at offset to the device and returns
// without waiting for them.
func (f osFile) StartWriteback(offset, n int64) error {
	return f.control(func(fd int) error { return unix.SyncFileRange(fd, offset, n, unix.SYNC_FILE_RANGE_WRITE) })
}

// DropPages asks the kernel to drop n bytes at offset from the page cache
// (POSIX_FADV_DONTNEED). It drops clean pages only: a dirty page, or one
// under writeback, stays.
func (f osFile) DropPages(offset, n int64) error {
	return f.control(func(fd int) error { return unix.Fadvise(fd, offset, n, unix.FADV_DONTNEED) })
}
