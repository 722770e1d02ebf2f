package disk

import (
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxSendfile is the most bytes one sendfile(2) call is asked to send; the
// kernel sends at most about 2 GiB a call.
const maxSendfile = 1 << 30

// sendFile writes size bytes of file at position to conn with sendfile(2),
// which reads at an offset of its own and leaves the file's position as it
// is. It waits in the runtime's poller while the socket's buffer is full,
// as a write to conn does, and so honours conn's write deadline.
func sendFile(conn syscall.Conn, file *os.File, position, size int64) (int64, error) {
	out, err := conn.SyscallConn()
	if err != nil {
		return 0, err
	}
	in, err := file.SyscallConn()
	if err != nil {
		return 0, err
	}
	var written int64
	var sendErr error
	offset := position
	controlErr := in.Control(func(src uintptr) {
		writeErr := out.Write(func(dst uintptr) bool {
			for written < size {
				n, err := unix.Sendfile(int(dst), int(src), &offset, int(min(size-written, maxSendfile)))
				if n > 0 {
					written += int64(n)
				}
				switch {
				case err == unix.EINTR:
				case err == unix.EAGAIN:
					return false
				case err != nil:
					sendErr = os.NewSyscallError("sendfile", err)
					return true
				case n == 0:
					sendErr = io.ErrUnexpectedEOF
					return true
				}
			}
			return true
		})
		if sendErr == nil {
			sendErr = writeErr
		}
	})
	if sendErr == nil {
		sendErr = controlErr
	}
	return written, sendErr
}
