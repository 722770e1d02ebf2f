package disk

import "golang.org/x/sys/unix"

// SyncData makes the file's written bytes, and its size, durable with
// fdatasync.
func (f osFile) SyncData() error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = unix.Fdatasync(int(fd))
			if serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return serr
}
