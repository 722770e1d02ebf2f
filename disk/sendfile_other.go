//go:build !linux

package disk

import (
	"os"
	"syscall"
)

// sendFile writes size bytes of file at position to conn by reading and
// writing them: sendfile(2) with an offset of its own is Linux's.
func sendFile(conn syscall.Conn, file *os.File, position, size int64) (int64, error) {
	w, ok := conn.(interface{ Write([]byte) (int, error) })
	if !ok {
		return 0, syscall.EINVAL
	}
	return copySection(w, file, position, size)
}
