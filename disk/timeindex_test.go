package disk_test

import (
	"encoding/binary"
	"errors"
	"math"
	"path/filepath"
	"testing"

	"github.com/depot-dev/depot/disk"
	"github.com/stretchr/testify/require"
)

// newTimeIndex creates a time index with entries (timestamp, offset) given
// in pairs.
func newTimeIndex(t *testing.T, fsys disk.FS, path string, pairs ...int64) *disk.TimeIndex {
	t.Helper()
	ti, err := disk.CreateTimeIndex(fsys, path, testBase)
	require.NoError(t, err)
	for i := 0; i < len(pairs); i += 2 {
		require.NoError(t, ti.Append(pairs[i], pairs[i+1]))
	}
	require.Equal(t, len(pairs)/2, ti.Entries())
	require.NoError(t, ti.Sync(), "entries reach the file at the latest on Sync")
	return ti
}

func TestTimeIndexLookup(t *testing.T) {
	none := disk.TimeEntry{Timestamp: -1, Offset: testBase}
	three := []int64{5000, 1000, 6000, 1010, 7000, 1010}
	tests := []struct {
		name    string
		entries []int64
		lookup  int64
		want    disk.TimeEntry
	}{
		{"empty", nil, 5000, none},
		{"before first", three, 4999, none},
		{"exact first", three, 5000, disk.TimeEntry{Timestamp: 5000, Offset: 1000}},
		{"between", three, 6500, disk.TimeEntry{Timestamp: 6000, Offset: 1010}},
		{"exact last", three, 7000, disk.TimeEntry{Timestamp: 7000, Offset: 1010}},
		{"after last", three, math.MaxInt64, disk.TimeEntry{Timestamp: 7000, Offset: 1010}},
		{"one entry, before", []int64{0, 1000}, -1, none},
		{"one entry, at", []int64{0, 1000}, 0, disk.TimeEntry{Timestamp: 0, Offset: 1000}},
		{"one entry, after", []int64{10, 1005}, 11, disk.TimeEntry{Timestamp: 10, Offset: 1005}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ti := newTimeIndex(t, disk.NewMemFS(), "/t.timeindex", tc.entries...)
			require.Equal(t, tc.want, ti.Lookup(tc.lookup))
		})
	}
}

func TestTimeIndexAppend(t *testing.T) {
	t.Run("timestamps not increasing are ignored", func(t *testing.T) {
		fsys := disk.NewMemFS()
		ti := newTimeIndex(t, fsys, "/t.timeindex", 5000, 1010)
		for _, ts := range []int64{5000, 4000, -1, math.MinInt64} {
			require.NoError(t, ti.Append(ts, 1020))
			require.Equal(t, 1, ti.Entries())
		}
		b, err := fsys.ReadFile("/t.timeindex")
		require.NoError(t, err)
		require.Len(t, b, 12)
	})
	t.Run("negative timestamp on an empty index is ignored", func(t *testing.T) {
		ti := newTimeIndex(t, disk.NewMemFS(), "/t.timeindex")
		require.NoError(t, ti.Append(-1, 1000))
		require.Zero(t, ti.Entries())
	})
	rejects := []struct {
		name   string
		offset int64
	}{
		{"offset goes back", 1009},
		{"offset below base", 999},
		{"relative offset beyond uint32", testBase + math.MaxUint32 + 1},
	}
	for _, tc := range rejects {
		t.Run(tc.name, func(t *testing.T) {
			fsys := disk.NewMemFS()
			ti := newTimeIndex(t, fsys, "/t.timeindex", 5000, 1010)
			require.ErrorIs(t, ti.Append(6000, tc.offset), disk.ErrInvalidEntry)
			require.Equal(t, 1, ti.Entries())
			b, err := fsys.ReadFile("/t.timeindex")
			require.NoError(t, err)
			require.Len(t, b, 12, "nothing written")
		})
	}
	t.Run("same offset, later timestamp", func(t *testing.T) {
		ti := newTimeIndex(t, disk.NewMemFS(), "/t.timeindex", 5000, 1010, 6000, 1010)
		last, ok := ti.Last()
		require.True(t, ok)
		require.Equal(t, disk.TimeEntry{Timestamp: 6000, Offset: 1010}, last)
	})
}

func TestTimeIndexTruncateTo(t *testing.T) {
	entries := []int64{100, 1010, 200, 1020, 300, 1020, 400, 1030}
	tests := []struct {
		name string
		to   int64
		want int
	}{
		{"before all", 1000, 0},
		{"at first", 1010, 0},
		{"between", 1015, 1},
		{"at a repeated offset", 1020, 1},
		{"at last", 1030, 3},
		{"after last", 1031, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys := disk.NewMemFS()
			ti := newTimeIndex(t, fsys, "/t.timeindex", entries...)
			require.NoError(t, ti.TruncateTo(tc.to))
			require.Equal(t, tc.want, ti.Entries())
			require.EqualValues(t, tc.want*12, ti.SizeBytes())
			b, err := fsys.ReadFile("/t.timeindex")
			require.NoError(t, err)
			require.Len(t, b, tc.want*12)
			require.NoError(t, ti.Append(500, 1040))
			require.NoError(t, ti.Close())
			ti, err = disk.OpenTimeIndex(fsys, "/t.timeindex", testBase)
			require.NoError(t, err)
			require.Equal(t, tc.want+1, ti.Entries())
		})
	}
	t.Run("reset", func(t *testing.T) {
		ti := newTimeIndex(t, disk.NewMemFS(), "/t.timeindex", entries...)
		require.NoError(t, ti.Reset())
		require.Zero(t, ti.Entries())
	})
}

func TestTimeIndexReopen(t *testing.T) {
	for _, tc := range everyFS {
		t.Run(tc.name, func(t *testing.T) {
			fsys, root := tc.open(t)
			require.NoError(t, fsys.MkdirAll(root, 0o755))
			path := filepath.Join(root, disk.SegmentFileName(testBase, ".timeindex"))
			ti, err := disk.OpenTimeIndex(fsys, path, testBase)
			require.NoError(t, err)
			require.Zero(t, ti.Entries())
			require.Equal(t, path, ti.Path())
			require.NoError(t, ti.Append(0x0102030405060708, 1000+0x0a0b0c0d))
			require.NoError(t, ti.Append(0x0102030405060709, 1000+0x0a0b0c0e))
			require.NoError(t, ti.Sync())
			require.NoError(t, ti.Close())
			require.ErrorIs(t, ti.Append(math.MaxInt64, 1<<40), disk.ErrClosed)

			require.Equal(t, "\x01\x02\x03\x04\x05\x06\x07\x08\x0a\x0b\x0c\x0d"+
				"\x01\x02\x03\x04\x05\x06\x07\x09\x0a\x0b\x0c\x0e", readFileString(t, fsys, path), "Kafka's byte layout")

			ti, err = disk.OpenTimeIndex(fsys, path, testBase)
			require.NoError(t, err)
			require.Equal(t, 2, ti.Entries())
			require.Equal(t, disk.TimeEntry{Timestamp: 0x0102030405060708, Offset: 1000 + 0x0a0b0c0d}, ti.Entry(0))
			moved := filepath.Join(root, "moved.timeindex")
			require.NoError(t, ti.Rename(moved))
			require.NoError(t, ti.Append(0x010203040506070a, 1000+0x0a0b0c0f))
			require.NoError(t, ti.Close())
			ti, err = disk.OpenTimeIndex(fsys, moved, testBase)
			require.NoError(t, err)
			require.Equal(t, 3, ti.Entries())
			require.NoError(t, ti.Close())
		})
	}
}

func TestTimeIndexDamagedFile(t *testing.T) {
	entry := func(ts int64, rel uint32) []byte {
		return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, uint64(ts)), rel)
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
		{"size not a multiple of 12", cat(entry(1, 1), make([]byte, 8)), 12},
		{"same timestamp", cat(entry(5, 1), entry(5, 2)), 12},
		{"timestamp goes back", cat(entry(5, 1), entry(6, 2), entry(4, 3)), 24},
		{"offset goes back", cat(entry(5, 2), entry(6, 1)), 12},
		{"negative timestamp", cat(entry(5, 1), entry(-7, 2)), 12},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys := newMemWithDir(t)
			const path = "/d/00000000000000001000.timeindex"
			require.NoError(t, fsys.WriteFile(path, tc.data))
			_, err := disk.OpenTimeIndex(fsys, path, testBase)
			var ce *disk.CorruptionError
			require.True(t, errors.As(err, &ce), "got %v", err)
			require.Equal(t, path, ce.Path)
			require.Equal(t, tc.offset, ce.Offset)

			_, err = disk.DecodeTimeIndex(tc.data, testBase)
			require.ErrorAs(t, err, &ce)
			require.Empty(t, ce.Path)
			require.Equal(t, tc.offset, ce.Offset)
		})
	}
}

func TestTimeIndexCrash(t *testing.T) {
	m := newMemWithDir(t)
	ti := newTimeIndex(t, m, "/d/t.timeindex", 100, 1001)
	require.NoError(t, m.SyncDir("/d"))
	require.NoError(t, ti.Sync())
	require.NoError(t, ti.Append(200, 1002))
	m.Crash()
	ti, err := disk.OpenTimeIndex(m, "/d/t.timeindex", testBase)
	require.NoError(t, err)
	require.Equal(t, 1, ti.Entries())
	require.Equal(t, disk.TimeEntry{Timestamp: 100, Offset: 1001}, ti.Entry(0))
}
