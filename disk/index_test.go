package disk_test

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/depot-dev/depot/disk"
	"github.com/stretchr/testify/require"
)

const testBase = int64(1000)

// newOffsetIndex creates an index with entries (offset, position) given in
// pairs.
func newOffsetIndex(t *testing.T, fsys disk.FS, path string, pairs ...int64) *disk.OffsetIndex {
	t.Helper()
	ix, err := disk.CreateOffsetIndex(fsys, path, testBase)
	require.NoError(t, err)
	for i := 0; i < len(pairs); i += 2 {
		require.NoError(t, ix.Append(pairs[i], pairs[i+1]))
	}
	require.NoError(t, ix.Sync(), "entries reach the file at the latest on Sync")
	return ix
}

func TestOffsetIndexLookup(t *testing.T) {
	none := disk.OffsetEntry{Offset: testBase, Position: 0}
	tests := []struct {
		name    string
		entries []int64
		lookup  int64
		want    disk.OffsetEntry
	}{
		{"empty", nil, 1500, none},
		{"empty below base", nil, 0, none},
		{"before first", []int64{1010, 4096, 1020, 8192}, 1005, none},
		{"exact first", []int64{1010, 4096, 1020, 8192}, 1010, disk.OffsetEntry{Offset: 1010, Position: 4096}},
		{"between", []int64{1010, 4096, 1020, 8192, 1030, 12288}, 1025, disk.OffsetEntry{Offset: 1020, Position: 8192}},
		{"exact middle", []int64{1010, 4096, 1020, 8192, 1030, 12288}, 1020, disk.OffsetEntry{Offset: 1020, Position: 8192}},
		{"exact last", []int64{1010, 4096, 1020, 8192}, 1020, disk.OffsetEntry{Offset: 1020, Position: 8192}},
		{"after last", []int64{1010, 4096, 1020, 8192}, 1 << 40, disk.OffsetEntry{Offset: 1020, Position: 8192}},
		{"one entry, before", []int64{1000, 0}, 999, none},
		{"one entry, at", []int64{1000, 0}, 1000, disk.OffsetEntry{Offset: 1000, Position: 0}},
		{"one entry, after", []int64{1003, 77}, 2000, disk.OffsetEntry{Offset: 1003, Position: 77}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ix := newOffsetIndex(t, disk.NewMemFS(), "/i.index", tc.entries...)
			require.Equal(t, tc.want, ix.Lookup(tc.lookup))
		})
	}
}

func TestOffsetIndexLookupMatchesLinearScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	ix := newOffsetIndex(t, disk.NewMemFS(), "/i.index")
	var entries []disk.OffsetEntry
	off, pos := testBase, int64(0)
	for range 500 {
		off += 1 + rng.Int64N(20)
		pos += 1 + rng.Int64N(5000)
		require.NoError(t, ix.Append(off, pos))
		entries = append(entries, disk.OffsetEntry{Offset: off, Position: pos})
	}
	for range 2000 {
		q := testBase - 5 + rng.Int64N(off-testBase+10)
		want := disk.OffsetEntry{Offset: testBase}
		for _, e := range entries {
			if e.Offset <= q {
				want = e
			}
		}
		require.Equal(t, want, ix.Lookup(q), "lookup %d", q)
	}
}

func TestOffsetIndexAppendRejects(t *testing.T) {
	tests := []struct {
		name             string
		offset, position int64
	}{
		{"same offset", 1010, 5000},
		{"lower offset", 1005, 5000},
		{"same position", 1011, 4096},
		{"lower position", 1011, 4000},
		{"below base offset", 999, 5000},
		{"relative offset beyond uint32", testBase + math.MaxUint32 + 1, 5000},
		{"position beyond uint32", 1011, math.MaxUint32 + 1},
		{"negative position", 1011, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys := disk.NewMemFS()
			ix := newOffsetIndex(t, fsys, "/i.index", 1010, 4096)
			err := ix.Append(tc.offset, tc.position)
			require.ErrorIs(t, err, disk.ErrInvalidEntry)
			require.Equal(t, 1, ix.Entries())
			require.EqualValues(t, 8, ix.SizeBytes())
			b, err := fsys.ReadFile("/i.index")
			require.NoError(t, err)
			require.Len(t, b, 8, "nothing written")
		})
	}
	t.Run("largest fields accepted", func(t *testing.T) {
		ix := newOffsetIndex(t, disk.NewMemFS(), "/i.index")
		require.NoError(t, ix.Append(testBase+math.MaxUint32, math.MaxUint32))
		last, ok := ix.Last()
		require.True(t, ok)
		require.Equal(t, disk.OffsetEntry{Offset: testBase + math.MaxUint32, Position: math.MaxUint32}, last)
	})
}

func TestOffsetIndexTruncateTo(t *testing.T) {
	entries := []int64{1010, 100, 1020, 200, 1030, 300}
	tests := []struct {
		name string
		to   int64
		want int
	}{
		{"before all", 1000, 0},
		{"at first", 1010, 0},
		{"between first and second", 1015, 1},
		{"at last", 1030, 2},
		{"after last", 1031, 3},
		{"far after", 1 << 40, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys := disk.NewMemFS()
			ix := newOffsetIndex(t, fsys, "/i.index", entries...)
			require.NoError(t, ix.TruncateTo(tc.to))
			require.Equal(t, tc.want, ix.Entries())
			require.EqualValues(t, tc.want*8, ix.SizeBytes())
			b, err := fsys.ReadFile("/i.index")
			require.NoError(t, err)
			require.Len(t, b, tc.want*8)
			// Appending continues after the kept entries.
			require.NoError(t, ix.Append(1040, 400))
			require.NoError(t, ix.Close())
			ix, err = disk.OpenOffsetIndex(fsys, "/i.index", testBase)
			require.NoError(t, err)
			require.Equal(t, tc.want+1, ix.Entries())
			last, ok := ix.Last()
			require.True(t, ok)
			require.Equal(t, disk.OffsetEntry{Offset: 1040, Position: 400}, last)
		})
	}
}

func TestOffsetIndexReopen(t *testing.T) {
	for _, tc := range everyFS {
		t.Run(tc.name, func(t *testing.T) {
			fsys, root := tc.open(t)
			require.NoError(t, fsys.MkdirAll(root, 0o755))
			path := filepath.Join(root, disk.SegmentFileName(testBase, ".index"))

			ix, err := disk.OpenOffsetIndex(fsys, path, testBase)
			require.NoError(t, err, "a missing index is created")
			require.Zero(t, ix.Entries())
			_, ok := ix.Last()
			require.False(t, ok)
			require.Equal(t, path, ix.Path())
			require.NoError(t, ix.Append(1000, 0))
			require.NoError(t, ix.Append(1007, 4100))
			require.NoError(t, ix.Append(1000+0x01020304, 0x0a0b0c0d))
			require.NoError(t, ix.Sync())
			require.NoError(t, ix.Close())
			require.ErrorIs(t, ix.Append(1<<40, 1), disk.ErrClosed)
			require.ErrorIs(t, ix.Close(), disk.ErrClosed)

			require.Equal(t, "\x00\x00\x00\x00\x00\x00\x00\x00"+
				"\x00\x00\x00\x07\x00\x00\x10\x04"+
				"\x01\x02\x03\x04\x0a\x0b\x0c\x0d", readFileString(t, fsys, path), "Kafka's byte layout")

			ix, err = disk.OpenOffsetIndex(fsys, path, testBase)
			require.NoError(t, err)
			require.Equal(t, 3, ix.Entries())
			require.Equal(t, disk.OffsetEntry{Offset: 1007, Position: 4100}, ix.Entry(1))
			require.Equal(t, disk.OffsetEntry{Offset: 1007, Position: 4100}, ix.Lookup(1008))
			require.NoError(t, ix.Append(1000+0x01020305, 0x0a0b0c0e), "appends continue after reopen")

			moved := filepath.Join(root, "moved.index")
			require.NoError(t, ix.Rename(moved))
			require.Equal(t, moved, ix.Path())
			require.NoError(t, ix.Append(1000+0x01020306, 0x0a0b0c0f), "appends continue after rename")
			require.NoError(t, ix.Close())
			ix, err = disk.OpenOffsetIndex(fsys, moved, testBase)
			require.NoError(t, err)
			require.Equal(t, 5, ix.Entries())
			require.NoError(t, ix.Close())

			ix, err = disk.CreateOffsetIndex(fsys, moved, testBase)
			require.NoError(t, err)
			require.Zero(t, ix.Entries(), "create truncates")
			require.NoError(t, ix.Close())
			require.Equal(t, "", readFileString(t, fsys, moved))
		})
	}
}

func TestOffsetIndexDamagedFile(t *testing.T) {
	entry := func(rel, pos uint32) []byte {
		return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, rel), pos)
	}
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	tests := []struct {
		name   string
		data   []byte
		offset int64
	}{
		{"odd size", cat(entry(1, 10), []byte{1, 2, 3}), 8},
		{"shorter than an entry", []byte{0, 0, 0}, 0},
		{"same offset", cat(entry(1, 10), entry(1, 20)), 8},
		{"offset goes back", cat(entry(1, 10), entry(2, 20), entry(1, 30)), 16},
		{"same position", cat(entry(1, 10), entry(2, 10)), 8},
		{"position goes back", cat(entry(1, 10), entry(2, 20), entry(3, 30), entry(4, 5)), 24},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys := newMemWithDir(t)
			const path = "/d/00000000000000001000.index"
			require.NoError(t, fsys.WriteFile(path, tc.data))
			_, err := disk.OpenOffsetIndex(fsys, path, testBase)
			var ce *disk.CorruptionError
			require.True(t, errors.As(err, &ce), "got %v", err)
			require.Equal(t, path, ce.Path)
			require.Equal(t, tc.offset, ce.Offset)
			require.Contains(t, err.Error(), path)

			_, err = disk.DecodeOffsetIndex(tc.data, testBase)
			require.True(t, errors.As(err, &ce))
			require.Empty(t, ce.Path)
			require.Equal(t, tc.offset, ce.Offset)

			// The caller rebuilds: create truncates the damaged file.
			ix, err := disk.CreateOffsetIndex(fsys, path, testBase)
			require.NoError(t, err)
			require.NoError(t, ix.Append(1001, 1))
			require.NoError(t, ix.Close())
			ix, err = disk.OpenOffsetIndex(fsys, path, testBase)
			require.NoError(t, err)
			require.Equal(t, 1, ix.Entries())
		})
	}
	t.Run("flipped bit", func(t *testing.T) {
		fsys := newMemWithDir(t)
		ix := newOffsetIndex(t, fsys, "/d/i.index", 1001, 100, 1002, 200)
		require.NoError(t, ix.Close())
		require.NoError(t, fsys.Corrupt("/d/i.index", 3))   // offset 1001 -> 1000, still increasing
		require.NoError(t, fsys.Corrupt("/d/i.index", 8+7)) // position 200 -> 201
		_, err := disk.OpenOffsetIndex(fsys, "/d/i.index", testBase)
		require.NoError(t, err, "damage that keeps the order cannot be told apart")
		require.NoError(t, fsys.Corrupt("/d/i.index", 4)) // position 100 -> 0x01000064
		_, err = disk.OpenOffsetIndex(fsys, "/d/i.index", testBase)
		var ce *disk.CorruptionError
		require.ErrorAs(t, err, &ce)
		require.EqualValues(t, 8, ce.Offset)
	})
}

func TestOffsetIndexCrash(t *testing.T) {
	m := newMemWithDir(t)
	ix := newOffsetIndex(t, m, "/d/i.index", 1001, 100, 1002, 200)
	require.NoError(t, m.SyncDir("/d"))
	require.NoError(t, ix.Sync())
	require.NoError(t, ix.Append(1003, 300))
	m.Crash()
	require.NoError(t, ix.Append(1004, 400), "appends stay in memory until a sync")
	require.Error(t, ix.Sync(), "the handle died with the crash")

	ix, err := disk.OpenOffsetIndex(m, "/d/i.index", testBase)
	require.NoError(t, err)
	require.Equal(t, 2, ix.Entries(), "only synced entries survive")

	// A torn tail is detected (or, cut at an entry boundary, simply short).
	require.NoError(t, ix.Append(1003, 300))
	require.NoError(t, ix.Append(1004, 400))
	for seed := uint64(0); seed < 50; seed++ {
		m2 := newMemWithDir(t)
		ix2 := newOffsetIndex(t, m2, "/d/i.index", 1001, 100)
		require.NoError(t, m2.SyncDir("/d"))
		require.NoError(t, ix2.Sync())
		for i := int64(2); i < 20; i++ {
			require.NoError(t, ix2.Append(1000+i, 100*i))
		}
		m2.CrashTorn(rand.New(rand.NewPCG(seed, 9)))
		got, err := disk.OpenOffsetIndex(m2, "/d/i.index", testBase)
		if err != nil {
			var ce *disk.CorruptionError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, "/d/i.index", ce.Path)
			continue
		}
		require.GreaterOrEqual(t, got.Entries(), 1, "synced entries are kept")
		require.Equal(t, disk.OffsetEntry{Offset: 1001, Position: 100}, got.Entry(0))
	}
}

func TestOffsetIndexWriteErrors(t *testing.T) {
	// Fail each operation of a run of appends and syncs in turn; the index
	// must stay usable and its file must always decode to a prefix of the
	// entries appended successfully.
	for n := int64(1); ; n++ {
		m := newMemWithDir(t)
		efs := disk.NewErrorFS(m)
		efs.TornWrites(rand.New(rand.NewPCG(uint64(n), 0)))
		ix, err := disk.CreateOffsetIndex(efs, "/d/i.index", testBase)
		require.NoError(t, err)
		efs.InjectAt(n)
		var appended []disk.OffsetEntry
		for i := int64(1); i <= 6; i++ {
			if err := ix.Append(testBase+i, 10*i); err != nil {
				require.ErrorIs(t, err, disk.ErrInjected)
				continue
			}
			appended = append(appended, disk.OffsetEntry{Offset: testBase + i, Position: 10 * i})
			if i%2 == 0 {
				if err := ix.Sync(); err != nil {
					require.ErrorIs(t, err, disk.ErrInjected)
				}
			}
		}
		require.Equal(t, len(appended), ix.Entries())
		if err := ix.Close(); err != nil {
			require.ErrorIs(t, err, disk.ErrInjected)
		}
		reopened, err := disk.OpenOffsetIndex(m, "/d/i.index", testBase)
		require.NoError(t, err, "inject at %d", n)
		require.Equal(t, len(appended), reopened.Entries(), "inject at %d", n)
		for i, e := range appended {
			require.Equal(t, e, reopened.Entry(i))
		}
		if efs.Injected() == 0 {
			require.Greater(t, n, int64(5), "every operation was tried")
			break
		}
	}
}

func TestOffsetIndexOnAFullFileSystem(t *testing.T) {
	m := newMemWithDir(t)
	efs := disk.NewErrorFS(m)
	ix, err := disk.CreateOffsetIndex(efs, "/d/i.index", testBase)
	require.NoError(t, err)
	for i := int64(1); i <= 3; i++ {
		require.NoError(t, ix.Append(testBase+i, 10*i))
	}
	for k := int64(0); k < 3*disk.OffsetIndexEntrySize; k++ {
		m.SetCapacity(k) // the index is the only file
		err := ix.Sync()
		require.ErrorIs(t, err, disk.ErrNoSpace, "room for %d bytes", k)
		require.Equal(t, 3, ix.Entries(), "the entries wait in memory")
	}
	m.SetCapacity(-1)
	require.NoError(t, ix.Sync(), "what a short write left is cut first")

	// An ENOSPC from fsync is not a full disk: it is a failure.
	require.NoError(t, ix.Append(testBase+4, 40))
	efs.InjectError(syscall.ENOSPC)
	efs.InjectWritesOnly(true)
	efs.InjectAt(2) // the write of the entry, then the sync
	err = ix.Sync()
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.NotErrorIs(t, err, disk.ErrNoSpace)
	require.NoError(t, ix.Close())
	reopened, err := disk.OpenOffsetIndex(m, "/d/i.index", testBase)
	require.NoError(t, err)
	require.Equal(t, 4, reopened.Entries())
	require.Equal(t, disk.OffsetEntry{Offset: testBase + 3, Position: 30}, reopened.Entry(2))
}

func BenchmarkOffsetIndexAppend(b *testing.B) {
	for _, bc := range []struct {
		name string
		fs   func() (disk.FS, string)
	}{
		{"os", func() (disk.FS, string) { return disk.OS, b.TempDir() }},
		{"mem", func() (disk.FS, string) { return disk.NewMemFS(), "/" }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			fsys, dir := bc.fs()
			ix, err := disk.CreateOffsetIndex(fsys, filepath.Join(dir, "i.index"), 0)
			require.NoError(b, err)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if i%100_000 == 0 && i > 0 {
					require.NoError(b, ix.Reset())
				}
				off := int64(i%100_000) + 1
				require.NoError(b, ix.Append(off, off*4096))
			}
			require.NoError(b, ix.Close())
		})
	}
}

func BenchmarkOffsetIndexLookup(b *testing.B) {
	ix, err := disk.CreateOffsetIndex(disk.NewMemFS(), "/i.index", 0)
	require.NoError(b, err)
	for i := int64(1); i <= 100_000; i++ {
		require.NoError(b, ix.Append(i*10, i*4096))
	}
	b.ReportAllocs()
	var sink int64
	for i := int64(0); b.Loop(); i++ {
		sink += ix.Lookup(i % 1_000_000).Position
	}
	_ = sink
}

func TestOffsetIndexWritesInBulk(t *testing.T) {
	m := newMemWithDir(t)
	ix, err := disk.CreateOffsetIndex(m, "/d/i.index", testBase)
	require.NoError(t, err)
	const appended = 600
	for i := int64(1); i <= appended; i++ {
		require.NoError(t, ix.Append(testBase+i, 10*i))
	}
	b, err := m.ReadFile("/d/i.index")
	require.NoError(t, err)
	require.Len(t, b, 512*disk.OffsetIndexEntrySize, "a full block of entries is written without waiting for a sync")
	require.NoError(t, ix.Sync())
	b, err = m.ReadFile("/d/i.index")
	require.NoError(t, err)
	require.Len(t, b, appended*disk.OffsetIndexEntrySize)
	// Truncating below what is in the file cuts the file too.
	require.NoError(t, ix.TruncateTo(testBase+101))
	require.NoError(t, ix.Sync())
	b, err = m.ReadFile("/d/i.index")
	require.NoError(t, err)
	require.Len(t, b, 100*disk.OffsetIndexEntrySize)
}
