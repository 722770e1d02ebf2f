package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// lockFile is the file in a data dir and in each log dir that a node holds
// an exclusive lock on (flock) while it runs, as Kafka's .lock, so that two
// nodes never share a directory. It holds "pid=<pid> node=<node id>\n" of
// the holder, for the message of a node refused.
const lockFile = ".lock"

// lockDir takes the lock of dir, what naming it in errors ("data dir",
// "log dir"). Locks are taken only on the OS file system: a node on another
// FS (a test's memory file system) shares no directory with another
// process. The file stays open, and the lock held, until it is closed.
func (n *Node) lockDir(dir, what string) error {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("node: lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder := make([]byte, 64)
		k, _ := f.ReadAt(holder, 0)
		f.Close()
		if h := strings.TrimSpace(string(holder[:k])); h != "" {
			return fmt.Errorf("node: %s %s is in use by another node (%s holds %s)", what, dir, h, path)
		}
		return fmt.Errorf("node: %s %s is in use by another node (lock %s held)", what, dir, path)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt(fmt.Appendf(nil, "pid=%d node=%d\n", os.Getpid(), n.cfg.NodeID), 0)
	}
	n.mu.Lock()
	n.locks = append(n.locks, f)
	n.mu.Unlock()
	return nil
}

// unlock lets go of every lock the node holds.
func (n *Node) unlock() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, f := range n.locks {
		f.Close()
	}
	n.locks = nil
}
