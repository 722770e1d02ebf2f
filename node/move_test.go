package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
)

var errProcessDead = errors.New("process dead")

// crashFS passes every operation to a disk.FS until die returns true for
// one, from then on every mutating operation fails, as if the process had
// died just before it: nothing more reaches the disk. die sees the
// operation ("write", "rename", "removeall", "syncdir", ...) and its path.
type crashFS struct {
	disk.FS
	mu   sync.Mutex
	die  func(op, path string) bool
	dead bool
}

// mutate reports errProcessDead if the process is dead or dies now.
func (c *crashFS) mutate(op, path string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dead && c.die != nil && c.die(op, path) {
		c.dead = true
	}
	if c.dead {
		return fmt.Errorf("%s %s: %w", op, path, errProcessDead)
	}
	return nil
}

func (c *crashFS) isDead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

func (c *crashFS) OpenFile(name string, flag int, perm os.FileMode) (disk.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0 {
		if err := c.mutate("open", name); err != nil {
			return nil, err
		}
	}
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &crashFile{File: f, fs: c}, nil
}

func (c *crashFS) Remove(name string) error {
	if err := c.mutate("remove", name); err != nil {
		return err
	}
	return c.FS.Remove(name)
}

func (c *crashFS) RemoveAll(name string) error {
	if err := c.mutate("removeall", name); err != nil {
		return err
	}
	return c.FS.RemoveAll(name)
}

func (c *crashFS) Rename(oldname, newname string) error {
	if err := c.mutate("rename", oldname); err != nil {
		return err
	}
	return c.FS.Rename(oldname, newname)
}

func (c *crashFS) MkdirAll(name string, perm os.FileMode) error {
	if err := c.mutate("mkdir", name); err != nil {
		return err
	}
	return c.FS.MkdirAll(name, perm)
}

func (c *crashFS) SyncDir(name string) error {
	if err := c.mutate("syncdir", name); err != nil {
		return err
	}
	return c.FS.SyncDir(name)
}

type crashFile struct {
	disk.File
	fs *crashFS
}

func (f *crashFile) Write(p []byte) (int, error) {
	if err := f.fs.mutate("write", f.Name()); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f *crashFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.mutate("write", f.Name()); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *crashFile) Sync() error {
	if err := f.fs.mutate("sync", f.Name()); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *crashFile) Truncate(size int64) error {
	if err := f.fs.mutate("truncate", f.Name()); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

// moveTestConfig is a node on fsys with two log dirs and no HTTP.
func moveTestConfig(t testing.TB, dir string, fsys disk.FS) Config {
	t.Helper()
	cfg := testConfig(t, dir)
	cfg.HTTP = ""
	cfg.FS = fsys
	cfg.LogDirs = []LogDir{{Path: filepath.Join(dir, "logs-0")}, {Path: filepath.Join(dir, "logs-1")}}
	return cfg
}

// logDirActorID is the id of the log-dir actor of path on n.
func logDirActorID(t testing.TB, n *Node, path string) string {
	t.Helper()
	for i, d := range n.cfg.LogDirs {
		if d.Path == path {
			return n.logDirs[i].Id
		}
	}
	t.Fatalf("no log dir %s", path)
	return ""
}

// produceAll produces count records of about size bytes to orders-0 with
// acks, one record per batch, and returns their values.
func produceAll(t *testing.T, n *Node, pid *actor.PID, acks int32, first, count, size int) []string {
	t.Helper()
	var values []string
	for i := first; i < first+count; i++ {
		v := fmt.Sprintf("v%06d-%s", i, strings.Repeat("x", size))
		resp := request[*messages.ProduceResponse](t, n, pid, &messages.ProduceRequest{Topic: "orders", Acks: acks, Records: actortest.Batch(t, v)})
		require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
		require.Equal(t, int64(i), resp.BaseOffset)
		values = append(values, fmt.Sprintf("%d:%s", i, v))
	}
	return values
}

// fetchAll reads partition 0 of topic, whose actor is pid, from offset 0
// to its end.
func fetchAll(t *testing.T, n *Node, pid *actor.PID, topic string) []string {
	t.Helper()
	var all []string
	for {
		values := fetchValues(t, n, pid, topic, int64(len(all)))
		if len(values) == 0 {
			return all
		}
		all = append(all, values...)
	}
}

// partitionCopies lists every entry of the log dirs that belongs to orders-0.
func partitionCopies(t *testing.T, fsys disk.FS, dirs ...string) []string {
	t.Helper()
	var copies []string
	for _, d := range dirs {
		names, err := fsys.ReadDir(d)
		require.NoError(t, err)
		for _, name := range names {
			if strings.HasPrefix(name, "orders-0") {
				copies = append(copies, filepath.Join(d, name))
			}
		}
	}
	return copies
}

func TestNodeMoveCrashAtEveryStep(t *testing.T) {
	type crashPoint struct {
		name string
		// die is built from the source and target log dirs.
		die func(src, dst string) func(op, path string) bool
		// moved: after the restart the partition lives in the target.
		moved bool
	}
	// after returns a trigger that fires on the first op matching second
	// once an op matching first has passed.
	after := func(first, second func(op, path string) bool) func(op, path string) bool {
		seen := false
		return func(op, path string) bool {
			if seen && second(op, path) {
				return true
			}
			if first(op, path) {
				seen = true
			}
			return false
		}
	}
	is := func(wantOp, wantPath string) func(op, path string) bool {
		return func(op, path string) bool { return op == wantOp && path == wantPath }
	}
	points := []crashPoint{
		{name: "none", die: func(_, _ string) func(string, string) bool { return nil }, moved: true},
		{name: "S1 mid-copy", die: func(_, dst string) func(string, string) bool {
			writes := 0
			return func(op, path string) bool {
				if op == "write" && strings.HasPrefix(path, filepath.Join(dst, "orders-0.future")+"/") {
					writes++
				}
				return writes > 100
			}
		}},
		{name: "S1 copied, before the source is renamed", die: func(src, _ string) func(string, string) bool {
			return is("rename", filepath.Join(src, "orders-0"))
		}},
		{name: "S2 renamed, not synced", die: func(src, _ string) func(string, string) bool {
			return after(is("rename", filepath.Join(src, "orders-0")), is("syncdir", src))
		}},
		{name: "S2 durable, before the future is renamed", die: func(_, dst string) func(string, string) bool {
			return is("rename", filepath.Join(dst, "orders-0.future"))
		}, moved: true},
		{name: "S3 renamed, not synced", die: func(_, dst string) func(string, string) bool {
			return after(is("rename", filepath.Join(dst, "orders-0.future")), is("syncdir", dst))
		}, moved: true},
		{name: "S3 durable, before the old copy is removed", die: func(src, _ string) func(string, string) bool {
			return is("removeall", filepath.Join(src, "orders-0.delete"))
		}, moved: true},
		{name: "S4 removed, not synced", die: func(src, _ string) func(string, string) bool {
			return after(is("removeall", filepath.Join(src, "orders-0.delete")), is("syncdir", src))
		}, moved: true},
	}
	for _, cp := range points {
		t.Run(cp.name, func(t *testing.T) {
			mem := disk.NewMemFS()
			cfs := &crashFS{FS: mem}
			cfg := moveTestConfig(t, "/data", cfs)
			n := startNode(t, cfg)
			created := request[*messages.CreateTopicResponse](t, n, n.Metadata(), &messages.CreateTopicRequest{Name: "orders", Partitions: 1, Configs: map[string]string{"segment.bytes": "65536"}})
			require.Equal(t, messages.ErrorCode_NONE, created.Error, created.ErrorMessage)
			pid := partitionPID(t, n, "orders", 0)
			acked := produceAll(t, n, pid, -1, 0, 400, 500)
			st := request[*messages.PartitionStatusResponse](t, n, pid, &messages.PartitionStatusRequest{})
			src := st.LogDir
			dst := cfg.LogDirs[0].Path
			if src == dst {
				dst = cfg.LogDirs[1].Path
			}

			cfs.mu.Lock()
			cfs.die = cp.die(src, dst)
			cfs.mu.Unlock()
			resp := request[*messages.MovePartitionResponse](t, n, pid, &messages.MovePartitionRequest{TargetDir: dst, TargetLogDirActor: logDirActorID(t, n, dst)})
			if cp.name == "none" {
				require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
				require.NoError(t, n.Stop())
			} else {
				require.True(t, cfs.isDead(), "the crash point was reached")
				_ = n.Stop() // fails: the process is dead
				mem.Crash()
			}

			n2 := startNode(t, moveTestConfig(t, "/data", mem))
			pid = partitionPID(t, n2, "orders", 0)
			want := dst
			if !cp.moved {
				want = src
			}
			st = request[*messages.PartitionStatusResponse](t, n2, pid, &messages.PartitionStatusRequest{})
			require.Equal(t, messages.ErrorCode_NONE, st.Error, st.ErrorMessage)
			require.Equal(t, want, st.LogDir)
			require.Equal(t, []string{filepath.Join(want, "orders-0")}, partitionCopies(t, mem, src, dst), "exactly one copy")
			require.Equal(t, acked, fetchAll(t, n2, pid, "orders"), "every acknowledged record, once, in order")
			// It takes produce where it left off.
			acked = append(acked, produceAll(t, n2, pid, -1, len(acked), 3, 10)...)
			require.Equal(t, acked, fetchAll(t, n2, pid, "orders"))
		})
	}
}

func TestNodeRefusesTwoCopies(t *testing.T) {
	mem := disk.NewMemFS()
	cfg := moveTestConfig(t, "/data", mem)
	for _, d := range cfg.LogDirs {
		require.NoError(t, mem.MkdirAll(filepath.Join(d.Path, "orders-0"), 0o755))
	}
	_, err := Start(cfg)
	require.ErrorContains(t, err, "/data/logs-0/orders-0 and /data/logs-1/orders-0")
}
