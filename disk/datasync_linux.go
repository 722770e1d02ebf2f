package disk

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// SyncData makes the file's written bytes, and its size, durable with
// fdatasync.
func (f osFile) SyncData() error {
	return f.control(func(fd int) error { return unix.Fdatasync(fd) })
}

// SyncFileSystem syncs the whole file system of the file with syncfs.
// Before Linux 5.8 syncfs reported no writeback error at all, so there it
// returns errNoFileSystemSync and syncs nothing.
func (f osFile) SyncFileSystem() error {
	if !syncfsReportsErrors() {
		return fmt.Errorf("%w: syncfs reports writeback errors from Linux 5.8", errNoFileSystemSync)
	}
	return f.control(unix.Syncfs)
}

// CheckWriteback waits for the writeback of the whole file
// (sync_file_range with SYNC_FILE_RANGE_WAIT_BEFORE, _WRITE and
// _WAIT_AFTER), which reports a writeback error of the file that its
// descriptor has not reported yet. It syncs no metadata.
func (f osFile) CheckWriteback() error {
	const wait = unix.SYNC_FILE_RANGE_WAIT_BEFORE | unix.SYNC_FILE_RANGE_WRITE | unix.SYNC_FILE_RANGE_WAIT_AFTER
	return f.control(func(fd int) error { return unix.SyncFileRange(fd, 0, 0, wait) })
}

// control runs call on the file's descriptor, again while it is
// interrupted.
func (f osFile) control(call func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = call(int(fd))
			if serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return serr
}

// syncfsReportsErrors reports whether the running kernel's syncfs returns
// writeback errors, which it does from Linux 5.8.
var syncfsReportsErrors = sync.OnceValue(func() bool {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return false
	}
	return kernelAtLeast(unix.ByteSliceToString(u.Release[:]), 5, 8)
})

// kernelAtLeast reports whether the kernel release string release (such
// as "6.1.0-18-amd64") is major.minor or later; false when it does not
// parse.
func kernelAtLeast(release string, major, minor int) bool {
	fields := strings.SplitN(release, ".", 3)
	if len(fields) < 2 {
		return false
	}
	gotMajor, err := strconv.Atoi(fields[0])
	if err != nil {
		return false
	}
	end := strings.IndexFunc(fields[1], func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(fields[1])
	}
	gotMinor, err := strconv.Atoi(fields[1][:end])
	if err != nil {
		return false
	}
	return gotMajor > major || gotMajor == major && gotMinor >= minor
}
