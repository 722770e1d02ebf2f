package disk_test

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/depot-dev/depot/disk"
	"github.com/stretchr/testify/require"
)

// fsCase returns a file system and a root directory in it, for tests
// that must hold on every FS.
type fsCase struct {
	name string
	open func(t *testing.T) (disk.FS, string)
}

var everyFS = []fsCase{
	{"os", func(t *testing.T) (disk.FS, string) { return disk.OS, t.TempDir() }},
	{"mem", func(t *testing.T) (disk.FS, string) { return disk.NewMemFS(), "/data" }},
}

func TestFSSemantics(t *testing.T) {
	for _, tc := range everyFS {
		t.Run(tc.name, func(t *testing.T) {
			fsys, root := tc.open(t)
			dir := filepath.Join(root, "orders-0")
			require.NoError(t, fsys.MkdirAll(dir, 0o755))
			require.NoError(t, fsys.MkdirAll(dir, 0o755), "MkdirAll of an existing directory")

			name := filepath.Join(dir, "a.log")
			_, err := fsys.OpenFile(name, os.O_RDONLY, 0)
			require.ErrorIs(t, err, fs.ErrNotExist)
			require.True(t, os.IsNotExist(err))

			f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
			require.NoError(t, err)
			require.Equal(t, name, f.Name())
			_, err = fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
			require.ErrorIs(t, err, fs.ErrExist)

			n, err := f.Write([]byte("hello"))
			require.NoError(t, err)
			require.Equal(t, 5, n)
			_, err = f.Write([]byte(" world"))
			require.NoError(t, err)
			size, err := f.Size()
			require.NoError(t, err)
			require.EqualValues(t, 11, size)

			_, err = f.WriteAt([]byte("J"), 0)
			require.NoError(t, err)
			buf := make([]byte, 5)
			_, err = f.ReadAt(buf, 0)
			require.NoError(t, err)
			require.Equal(t, "Jello", string(buf))

			buf = make([]byte, 8)
			n, err = f.ReadAt(buf, 6)
			require.ErrorIs(t, err, io.EOF)
			require.Equal(t, "world", string(buf[:n]))
			_, err = f.ReadAt(buf, 100)
			require.ErrorIs(t, err, io.EOF)

			require.NoError(t, f.Truncate(5))
			size, err = f.Size()
			require.NoError(t, err)
			require.EqualValues(t, 5, size)
			// The write position is unaffected by Truncate: seek first.
			pos, err := f.Seek(0, io.SeekEnd)
			require.NoError(t, err)
			require.EqualValues(t, 5, pos)
			_, err = f.Write([]byte("!"))
			require.NoError(t, err)
			pos, err = f.Seek(-1, io.SeekCurrent)
			require.NoError(t, err)
			require.EqualValues(t, 5, pos)
			_, err = f.Seek(-100, io.SeekStart)
			require.Error(t, err)

			// WriteAt past the end fills the gap with zeros.
			_, err = f.WriteAt([]byte("x"), 8)
			require.NoError(t, err)
			buf = make([]byte, 9)
			_, err = f.ReadAt(buf, 0)
			require.NoError(t, err)
			require.Equal(t, []byte("Jello!\x00\x00x"), buf)
			require.NoError(t, f.Sync())
			require.NoError(t, f.Close())

			// O_APPEND writes at the end; O_TRUNC empties.
			f, err = fsys.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
			require.NoError(t, err)
			_, err = f.Write([]byte("yz"))
			require.NoError(t, err)
			require.NoError(t, f.Close())
			fi, err := fsys.Stat(name)
			require.NoError(t, err)
			require.EqualValues(t, 11, fi.Size())
			require.False(t, fi.IsDir())
			require.Equal(t, "a.log", fi.Name())

			ro, err := fsys.OpenFile(name, os.O_RDONLY, 0)
			require.NoError(t, err)
			_, err = ro.Write([]byte("no"))
			require.Error(t, err, "write to a read-only file")
			require.NoError(t, ro.Close())

			f, err = fsys.OpenFile(name, os.O_RDWR|os.O_TRUNC, 0)
			require.NoError(t, err)
			size, err = f.Size()
			require.NoError(t, err)
			require.Zero(t, size)
			require.NoError(t, f.Close())

			// Rename replaces the target; ReadDir is sorted.
			other := filepath.Join(dir, "b.log")
			writeFileSynced(t, fsys, other, "bbb")
			writeFileSynced(t, fsys, filepath.Join(dir, "0.log"), "0")
			require.NoError(t, fsys.Rename(other, name))
			names, err := fsys.ReadDir(dir)
			require.NoError(t, err)
			require.Equal(t, []string{"0.log", "a.log"}, names)
			require.Equal(t, "bbb", readFileString(t, fsys, name))

			fi, err = fsys.Stat(dir)
			require.NoError(t, err)
			require.True(t, fi.IsDir())
			require.NoError(t, fsys.SyncDir(dir))

			require.Error(t, fsys.Remove(dir), "removing a non-empty directory")
			require.NoError(t, fsys.Remove(name))
			_, err = fsys.Stat(name)
			require.ErrorIs(t, err, fs.ErrNotExist)
			require.ErrorIs(t, fsys.Remove(name), fs.ErrNotExist)
			require.NoError(t, fsys.RemoveAll(dir))
			_, err = fsys.Stat(dir)
			require.ErrorIs(t, err, fs.ErrNotExist)
			require.NoError(t, fsys.RemoveAll(dir), "RemoveAll of a missing directory")
			_, err = fsys.ReadDir(dir)
			require.ErrorIs(t, err, fs.ErrNotExist)
		})
	}
}

func writeFileSynced(t *testing.T, fsys disk.FS, name, data string) {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	require.NoError(t, err)
	_, err = f.Write([]byte(data))
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
}

func readFileString(t *testing.T, fsys disk.FS, name string) string {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	require.NoError(t, err)
	defer f.Close()
	size, err := f.Size()
	require.NoError(t, err)
	b := make([]byte, size)
	_, err = f.ReadAt(b, 0)
	if size > 0 {
		require.NoError(t, err)
	}
	return string(b)
}

// memWithDir returns a MemFS holding the durable directory /d.
func newMemWithDir(t *testing.T) *disk.MemFS {
	t.Helper()
	m := disk.NewMemFS()
	require.NoError(t, m.MkdirAll("/d", 0o755))
	require.NoError(t, m.SyncDir("/"))
	return m
}

func TestMemFSCrashKeepsOnlySyncedBytes(t *testing.T) {
	m := newMemWithDir(t)
	f, err := m.OpenFile("/d/f", os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	require.NoError(t, m.SyncDir("/d"))
	_, err = f.Write([]byte("synced"))
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	_, err = f.Write([]byte("-lost"))
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("S"), 0) // an overwrite after the sync is lost too
	require.NoError(t, err)

	m.Crash()
	b, err := m.ReadFile("/d/f")
	require.NoError(t, err)
	require.Equal(t, "synced", string(b))

	// A truncate that was not synced is undone.
	f, err = m.OpenFile("/d/f", os.O_RDWR, 0)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(2))
	m.Crash()
	b, err = m.ReadFile("/d/f")
	require.NoError(t, err)
	require.Equal(t, "synced", string(b))
}

func TestMemFSCrashInvalidatesHandles(t *testing.T) {
	m := newMemWithDir(t)
	require.NoError(t, m.WriteFile("/d/f", []byte("abc")))
	f, err := m.OpenFile("/d/f", os.O_RDWR, 0)
	require.NoError(t, err)
	m.Crash()

	_, err = f.Write([]byte("x"))
	require.Error(t, err)
	_, err = f.WriteAt([]byte("x"), 0)
	require.Error(t, err)
	_, err = f.ReadAt(make([]byte, 1), 0)
	require.Error(t, err)
	require.Error(t, f.Sync())
	require.Error(t, f.Truncate(0))
	_, err = f.Seek(0, io.SeekStart)
	require.Error(t, err)
	_, err = f.Size()
	require.Error(t, err)
	require.NoError(t, f.Close(), "closing a crashed handle releases it")
	require.Error(t, f.Close(), "closing twice")

	b, err := m.ReadFile("/d/f")
	require.NoError(t, err)
	require.Equal(t, "abc", string(b), "the stale handle changed nothing")
}

func TestMemFSDirectoryEntryDurability(t *testing.T) {
	tests := []struct {
		name string
		// act changes /d, which holds the durable file "old" ("o") and
		// the durable, empty directory "sub".
		act func(t *testing.T, m *disk.MemFS)
		// want is the content of /d after a crash, name to bytes;
		// directories as "<dir>".
		want map[string]string
	}{
		{
			name: "create without SyncDir disappears",
			act: func(t *testing.T, m *disk.MemFS) {
				writeFileSynced(t, m, "/d/new", "n")
			},
			want: map[string]string{"old": "o", "sub": "<dir>"},
		},
		{
			name: "create with SyncDir survives",
			act: func(t *testing.T, m *disk.MemFS) {
				writeFileSynced(t, m, "/d/new", "n")
				require.NoError(t, m.SyncDir("/d"))
			},
			want: map[string]string{"new": "n", "old": "o", "sub": "<dir>"},
		},
		{
			name: "create with SyncDir but no file sync survives empty",
			act: func(t *testing.T, m *disk.MemFS) {
				f, err := m.OpenFile("/d/new", os.O_WRONLY|os.O_CREATE, 0o644)
				require.NoError(t, err)
				_, err = f.Write([]byte("n"))
				require.NoError(t, err)
				require.NoError(t, m.SyncDir("/d"))
			},
			want: map[string]string{"new": "", "old": "o", "sub": "<dir>"},
		},
		{
			name: "rename without SyncDir is undone",
			act: func(t *testing.T, m *disk.MemFS) {
				require.NoError(t, m.Rename("/d/old", "/d/renamed"))
			},
			want: map[string]string{"old": "o", "sub": "<dir>"},
		},
		{
			name: "rename with SyncDir is durable",
			act: func(t *testing.T, m *disk.MemFS) {
				require.NoError(t, m.Rename("/d/old", "/d/renamed"))
				require.NoError(t, m.SyncDir("/d"))
			},
			want: map[string]string{"renamed": "o", "sub": "<dir>"},
		},
		{
			name: "rename over a file without SyncDir keeps both",
			act: func(t *testing.T, m *disk.MemFS) {
				writeFileSynced(t, m, "/d/tmp", "t")
				require.NoError(t, m.SyncDir("/d"))
				require.NoError(t, m.Rename("/d/tmp", "/d/old"))
			},
			want: map[string]string{"old": "o", "tmp": "t", "sub": "<dir>"},
		},
		{
			name: "remove without SyncDir is undone",
			act: func(t *testing.T, m *disk.MemFS) {
				require.NoError(t, m.Remove("/d/old"))
			},
			want: map[string]string{"old": "o", "sub": "<dir>"},
		},
		{
			name: "remove with SyncDir is durable",
			act: func(t *testing.T, m *disk.MemFS) {
				require.NoError(t, m.RemoveAll("/d/sub"))
				require.NoError(t, m.Remove("/d/old"))
				require.NoError(t, m.SyncDir("/d"))
			},
			want: map[string]string{},
		},
		{
			name: "mkdir without SyncDir of the parent disappears",
			act: func(t *testing.T, m *disk.MemFS) {
				require.NoError(t, m.MkdirAll("/d/p/q", 0o755))
				require.NoError(t, m.SyncDir("/d/p"))
			},
			want: map[string]string{"old": "o", "sub": "<dir>"},
		},
		{
			name: "file in a synced subdirectory",
			act: func(t *testing.T, m *disk.MemFS) {
				writeFileSynced(t, m, "/d/sub/f", "f")
				require.NoError(t, m.SyncDir("/d/sub"))
			},
			want: map[string]string{"old": "o", "sub": "<dir>", "sub/f": "f"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newMemWithDir(t)
			require.NoError(t, m.WriteFile("/d/old", []byte("o")))
			require.NoError(t, m.MkdirAll("/d/sub", 0o755))
			require.NoError(t, m.SyncDir("/d"))
			tc.act(t, m)
			m.Crash()
			require.Equal(t, tc.want, memTree(t, m, "/d"))
		})
	}
}

// memTree lists the files and directories under dir, relative to it.
func memTree(t *testing.T, m *disk.MemFS, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	var visit func(rel string)
	visit = func(rel string) {
		names, err := m.ReadDir(dir + "/" + rel)
		require.NoError(t, err)
		for _, n := range names {
			r := strings.TrimPrefix(rel+"/"+n, "/")
			fi, err := m.Stat(dir + "/" + r)
			require.NoError(t, err)
			if fi.IsDir() {
				out[r] = "<dir>"
				visit(r)
				continue
			}
			b, err := m.ReadFile(dir + "/" + r)
			require.NoError(t, err)
			out[r] = string(b)
		}
	}
	visit("")
	return out
}

func TestMemFSCrashTorn(t *testing.T) {
	synced := []byte("0123456789")
	tail := bytes.Repeat([]byte("abcdefgh"), 8)
	lengths := map[int]bool{}
	garbage := 0
	for seed := uint64(0); seed < 200; seed++ {
		m := newMemWithDir(t)
		f, err := m.OpenFile("/d/f", os.O_WRONLY|os.O_CREATE, 0o644)
		require.NoError(t, err)
		require.NoError(t, m.SyncDir("/d"))
		_, err = f.Write(synced)
		require.NoError(t, err)
		require.NoError(t, f.Sync())
		_, err = f.Write(tail)
		require.NoError(t, err)
		writeFileSynced(t, m, "/d/never-dir-synced", "x")

		m.CrashTorn(rand.New(rand.NewPCG(seed, 1)))
		b, err := m.ReadFile("/d/f")
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(b), len(synced))
		require.LessOrEqual(t, len(b), len(synced)+len(tail))
		require.Equal(t, synced, b[:len(synced)], "synced bytes are always kept")
		lengths[len(b)] = true
		if !bytes.Equal(b[len(synced):], tail[:len(b)-len(synced)]) {
			garbage++
		}
		_, err = m.Stat("/d/never-dir-synced")
		require.ErrorIs(t, err, fs.ErrNotExist)

		// What survived a crash is durable: a second crash keeps it.
		m.Crash()
		again, err := m.ReadFile("/d/f")
		require.NoError(t, err)
		require.Equal(t, b, again)
	}
	require.Greater(t, len(lengths), 10, "torn lengths vary")
	require.Greater(t, garbage, 0, "some torn tails hold garbage")
	require.Less(t, garbage, 200, "most torn tails are a clean prefix")
}

func TestMemFSCrashTornIsReproducible(t *testing.T) {
	run := func() []byte {
		m := newMemWithDir(t)
		f, err := m.OpenFile("/d/f", os.O_WRONLY|os.O_CREATE, 0o644)
		require.NoError(t, err)
		require.NoError(t, m.SyncDir("/d"))
		_, err = f.Write(bytes.Repeat([]byte{7}, 1000))
		require.NoError(t, err)
		m.CrashTorn(rand.New(rand.NewPCG(42, 42)))
		b, err := m.ReadFile("/d/f")
		require.NoError(t, err)
		return b
	}
	require.Equal(t, run(), run())
}

func TestMemFSHelpers(t *testing.T) {
	m := newMemWithDir(t)
	require.NoError(t, m.WriteFile("/d/f", []byte{0x10, 0x20}))
	require.NoError(t, m.Corrupt("/d/f", 1))
	b, err := m.ReadFile("/d/f")
	require.NoError(t, err)
	require.Equal(t, []byte{0x10, 0x21}, b)
	m.Crash()
	b, err = m.ReadFile("/d/f")
	require.NoError(t, err)
	require.Equal(t, []byte{0x10, 0x21}, b, "WriteFile is durable and corruption is on the medium")

	require.Error(t, m.Corrupt("/d/f", 2))
	require.Error(t, m.Corrupt("/d/missing", 0))
	_, err = m.ReadFile("/d/missing")
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.Error(t, m.WriteFile("/nodir/f", nil))

	// SyncAll makes a whole tree durable.
	require.NoError(t, m.MkdirAll("/x/y", 0o755))
	f, err := m.OpenFile("/x/y/z", os.O_WRONLY|os.O_CREATE, 0o644)
	require.NoError(t, err)
	_, err = f.Write([]byte("z"))
	require.NoError(t, err)
	m.SyncAll()
	m.Crash()
	b, err = m.ReadFile("/x/y/z")
	require.NoError(t, err)
	require.Equal(t, "z", string(b))
}

func TestMemFSCapacity(t *testing.T) {
	m := newMemWithDir(t)
	require.Equal(t, int64(math.MaxInt64), m.Free(), "no capacity by default")
	f, err := m.OpenFile("/d/f", os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	require.NoError(t, m.SyncDir("/d"))
	_, err = f.Write([]byte("abcd"))
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.EqualValues(t, 4, m.Used())

	m.SetCapacity(10)
	require.EqualValues(t, 6, m.Free())
	// A write that runs out of room writes what fits, as the OS does.
	n, err := f.Write([]byte("efghijkl"))
	require.Equal(t, 6, n)
	require.ErrorIs(t, err, syscall.ENOSPC)
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "/d/f", pe.Path)
	require.Equal(t, "abcdefghij", readFileString(t, m, "/d/f"))
	require.Zero(t, m.Free())

	// Full: nothing grows, but overwrites, syncs, shrinks and removals go on.
	n, err = f.Write([]byte("k"))
	require.Zero(t, n)
	require.ErrorIs(t, err, syscall.ENOSPC)
	n, err = f.WriteAt([]byte("JK"), 9)
	require.Equal(t, 1, n, "the byte inside the file is overwritten")
	require.ErrorIs(t, err, syscall.ENOSPC)
	_, err = f.WriteAt([]byte("AB"), 0)
	require.NoError(t, err)
	require.ErrorIs(t, f.Truncate(11), syscall.ENOSPC)
	size, err := f.Size()
	require.NoError(t, err)
	require.EqualValues(t, 10, size, "a truncate that cannot grow changes nothing")
	_, err = m.OpenFile("/d/g", os.O_RDWR|os.O_CREATE, 0o644)
	require.ErrorIs(t, err, syscall.ENOSPC, "a new file needs room")
	_, err = m.Stat("/d/g")
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.ErrorIs(t, m.MkdirAll("/d/sub", 0o755), syscall.ENOSPC)
	require.ErrorIs(t, m.WriteFile("/d/h", nil), syscall.ENOSPC)
	again, err := m.OpenFile("/d/f", os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err, "opening an existing file needs no room")
	require.NoError(t, again.Close())
	require.NoError(t, f.Sync())
	require.Equal(t, "ABcdefghiJ", readFileString(t, m, "/d/f"))

	// Room comes back by shrinking, removing or a larger capacity.
	require.NoError(t, f.Truncate(8))
	require.EqualValues(t, 2, m.Free())
	_, err = f.WriteAt([]byte("xy"), 8)
	require.NoError(t, err)
	require.ErrorIs(t, m.WriteFile("/d/h", []byte("z")), syscall.ENOSPC)
	m.SetCapacity(12)
	require.ErrorIs(t, m.WriteFile("/d/h", []byte("zzz")), syscall.ENOSPC, "WriteFile writes all or nothing")
	_, err = m.Stat("/d/h")
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.NoError(t, m.WriteFile("/d/h", []byte("zz")))
	require.EqualValues(t, 12, m.Used())
	require.NoError(t, m.Remove("/d/h"))
	require.EqualValues(t, 2, m.Free())
	o, err := m.OpenFile("/d/f", os.O_RDWR|os.O_TRUNC, 0)
	require.NoError(t, err)
	require.EqualValues(t, 12, m.Free(), "O_TRUNC frees")
	require.NoError(t, o.Close())

	// The capacity may drop below what is held; a crash keeps the synced bytes.
	_, err = f.WriteAt([]byte("0123456789"), 0)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	m.SetCapacity(4)
	require.Zero(t, m.Free())
	n, err = f.Write([]byte("more"))
	require.Zero(t, n)
	require.ErrorIs(t, err, syscall.ENOSPC)
	m.SetCapacity(-1)
	_, err = f.WriteAt([]byte("unsynced"), 10)
	require.NoError(t, err)
	m.SetCapacity(18)
	m.Crash()
	require.Equal(t, "0123456789", readFileString(t, m, "/d/f"))
	require.EqualValues(t, 12, m.Used(), "/d/h is back: its removal was never made durable")
	require.EqualValues(t, 6, m.Free())
}

func TestMemFSRenameErrors(t *testing.T) {
	m := newMemWithDir(t)
	require.NoError(t, m.MkdirAll("/d/a/b", 0o755))
	require.NoError(t, m.WriteFile("/d/f", nil))
	require.ErrorIs(t, m.Rename("/d/missing", "/d/x"), fs.ErrNotExist)
	require.Error(t, m.Rename("/d/a", "/d/a/b/c"), "a directory into itself")
	require.Error(t, m.Rename("/d/f", "/d/a"), "a file over a directory")
	require.Error(t, m.Rename("/d/f", "/d/nodir/f"))
	require.NoError(t, m.Rename("/d/f", "/d/f"))
	require.NoError(t, m.Rename("/d/a", "/d/c"))
	names, err := m.ReadDir("/d/c")
	require.NoError(t, err)
	require.Equal(t, []string{"b"}, names)
}

func TestErrorFSInjectAt(t *testing.T) {
	efs := disk.NewErrorFS(newMemWithDir(t))
	f, err := efs.OpenFile("/d/f", os.O_RDWR|os.O_CREATE, 0o644) // op 1
	require.NoError(t, err)
	require.EqualValues(t, 1, efs.Ops())

	efs.InjectAt(3)
	_, err = f.Write([]byte("a")) // 1st from now
	require.NoError(t, err)
	_, err = f.Size() // 2nd
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("b"), 1) // 3rd: fails
	require.ErrorIs(t, err, disk.ErrInjected)
	require.Contains(t, err.Error(), "writeat")
	require.Contains(t, err.Error(), "/d/f")
	require.EqualValues(t, 1, efs.Injected())
	_, err = f.WriteAt([]byte("b"), 1) // fires once only
	require.NoError(t, err)
	require.EqualValues(t, 5, efs.Ops())
	require.Equal(t, "ab", readFileString(t, efs, "/d/f"))

	// Every kind of operation counts and can fail.
	ops := []struct {
		name string
		do   func() error
	}{
		{"open", func() error { _, err := efs.OpenFile("/d/f", os.O_RDONLY, 0); return err }},
		{"remove", func() error { return efs.Remove("/d/none") }},
		{"removeall", func() error { return efs.RemoveAll("/d/none") }},
		{"rename", func() error { return efs.Rename("/d/none", "/d/x") }},
		{"mkdir", func() error { return efs.MkdirAll("/d/e", 0o755) }},
		{"readdir", func() error { _, err := efs.ReadDir("/d"); return err }},
		{"stat", func() error { _, err := efs.Stat("/d"); return err }},
		{"syncdir", func() error { return efs.SyncDir("/d") }},
		{"write", func() error { _, err := f.Write([]byte("c")); return err }},
		{"read", func() error { _, err := f.ReadAt(make([]byte, 1), 0); return err }},
		{"sync", func() error { return f.Sync() }},
		{"truncate", func() error { return f.Truncate(1) }},
		{"seek", func() error { _, err := f.Seek(0, io.SeekStart); return err }},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			before := efs.Ops()
			efs.InjectAt(1)
			err := op.do()
			require.ErrorIs(t, err, disk.ErrInjected)
			require.Contains(t, err.Error(), op.name)
			require.Equal(t, before+1, efs.Ops())
		})
	}
	efs.InjectAt(1)
	require.ErrorIs(t, f.Close(), disk.ErrInjected)
}

func TestErrorFSWritesOnlyAndSticky(t *testing.T) {
	efs := disk.NewErrorFS(newMemWithDir(t))
	efs.InjectWritesOnly(true)
	efs.InjectSticky(true)
	efs.InjectAt(2)
	require.NoError(t, efs.MkdirAll("/d/a", 0o755)) // 1st mutating op
	_, err := efs.Stat("/d/a")                      // reads neither count nor fail
	require.NoError(t, err)
	_, err = efs.ReadDir("/d")
	require.NoError(t, err)
	require.ErrorIs(t, efs.SyncDir("/d"), disk.ErrInjected) // 2nd mutating op
	require.ErrorIs(t, efs.MkdirAll("/d/b", 0o755), disk.ErrInjected, "sticky: the disk stays dead")
	_, err = efs.Stat("/d/b")
	require.ErrorIs(t, err, fs.ErrNotExist, "reads still work and the failed mkdir did nothing")
	require.EqualValues(t, 6, efs.Ops())
	require.EqualValues(t, 2, efs.Injected())

	efs.InjectAt(0)
	require.NoError(t, efs.MkdirAll("/d/b", 0o755), "InjectAt(0) revives the disk")
}

func TestErrorFSInjectError(t *testing.T) {
	efs := disk.NewErrorFS(newMemWithDir(t))
	efs.InjectError(syscall.ENOSPC)
	efs.InjectAt(1)
	_, err := efs.OpenFile("/d/f", os.O_RDWR|os.O_CREATE, 0o644)
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.NotErrorIs(t, err, disk.ErrInjected)
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "/d/f", pe.Path)
	efs.InjectError(nil)
	efs.InjectAt(1)
	_, err = efs.OpenFile("/d/f", os.O_RDWR|os.O_CREATE, 0o644)
	require.ErrorIs(t, err, disk.ErrInjected, "nil restores the default")
}

func TestErrorFSTornWrites(t *testing.T) {
	m := newMemWithDir(t)
	efs := disk.NewErrorFS(m)
	efs.TornWrites(rand.New(rand.NewPCG(1, 2)))
	f, err := efs.OpenFile("/d/f", os.O_WRONLY|os.O_CREATE, 0o644)
	require.NoError(t, err)
	data := bytes.Repeat([]byte("x"), 1000)
	efs.InjectAt(1)
	n, err := f.Write(data)
	require.ErrorIs(t, err, disk.ErrInjected)
	require.Greater(t, n, 0, "a torn write keeps a prefix")
	require.Less(t, n, len(data))
	b, err := m.ReadFile("/d/f")
	require.NoError(t, err)
	require.Len(t, b, n)

	torn := n

	efs.TornWrites(nil)
	efs.InjectAt(1)
	n, err = f.Write(data)
	require.ErrorIs(t, err, disk.ErrInjected)
	require.Zero(t, n)
	b, err = m.ReadFile("/d/f")
	require.NoError(t, err)
	require.Len(t, b, torn, "nothing written without TornWrites")
	require.NoError(t, f.Close())
}

func TestOSSyncDirMissing(t *testing.T) {
	err := disk.OS.SyncDir(filepath.Join(t.TempDir(), "missing"))
	require.True(t, errors.Is(err, fs.ErrNotExist))
}
