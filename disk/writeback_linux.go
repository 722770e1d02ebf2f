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
