package kafka

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// setCork sets TCP_CORK on nc, a TCP connection: while it is set, the
// kernel sends only full segments, so that an answer's small pieces
// around records sent with sendfile leave in the records' segments, not
// in segments of their own that wake the client for a few bytes each;
// clearing it sends what waits. It does nothing on other connections.
func setCork(nc net.Conn, on bool) error {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	value := 0
	if on {
		value = 1
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_CORK, value)
	}); err != nil {
		return err
	}
	return serr
}
