//go:build !linux

package kafka

import "net"

// setCork does nothing: TCP_CORK is Linux's.
func setCork(net.Conn, bool) error { return nil }
