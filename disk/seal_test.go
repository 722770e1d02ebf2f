package disk

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/wire"
)

// An index keeps in memory only the entries not yet in its file (none once
// its segment is sealed) and one entry in sparseEvery: a log's memory does
// not grow with the data it holds, in its active segment or the sealed
// ones, and every offset is still found through the files, before and
// after a reopen and a truncation.
func TestIndexesKeepLittleInMemory(t *testing.T) {
	for _, fsys := range []FS{NewMemFS(), OS} {
		dir := "/p/t-0"
		if fsys == OS {
			dir = t.TempDir() + "/t-0"
		}
		cfg := DefaultConfig()
		cfg.SegmentBytes = 512 << 10
		cfg.IndexIntervalBytes = 1 // an entry for every batch
		l, err := Open(fsys, dir, Options{Config: cfg})
		require.NoError(t, err)
		const batches = 4000
		for i := 0; i < batches; i++ {
			b := wire.NewBuilder(wire.NoProducer)
			b.Append(int64(1000+i), nil, make([]byte, 300), nil)
			batch, err := b.AppendTo(nil)
			require.NoError(t, err)
			_, err = l.Append(batch)
			require.NoError(t, err)
		}
		check := func(l *Log) {
			require.Greater(t, len(l.segments), 2)
			for i, s := range l.segments {
				n := s.index.Entries()
				require.Greater(t, n, 2*indexFlushEntries, "segment %d has entries in its file", s.baseOffset)
				require.LessOrEqual(t, len(s.index.entries.tail), indexFlushEntries)
				require.Len(t, s.index.entries.sparse, (n+sparseEvery-1)/sparseEvery)
				require.LessOrEqual(t, len(s.timeIndex.entries.tail), indexFlushEntries)
				require.Len(t, s.timeIndex.entries.sparse, (s.timeIndex.Entries()+sparseEvery-1)/sparseEvery)
				if i < len(l.segments)-1 {
					require.Nil(t, s.index.entries.tail, "segment %d sealed", s.baseOffset)
					require.Nil(t, s.timeIndex.entries.tail, "segment %d sealed", s.baseOffset)
				}
			}
			for offset := int64(0); offset < batches; offset++ {
				data, err := l.Read(offset, 1, nil)
				require.NoError(t, err)
				h, err := wire.ParseHeader(data)
				require.NoError(t, err)
				require.Equal(t, offset, h.BaseOffset)
				ts, at, err := l.OffsetForTimestamp(1000 + offset)
				require.NoError(t, err)
				require.Equal(t, offset, ts)
				require.Equal(t, 1000+offset, at)
			}
		}
		check(l)
		require.NoError(t, l.Close())
		l, err = Open(fsys, dir, Options{Config: cfg, RecoveryPoint: batches})
		require.NoError(t, err)
		check(l)
		// Truncating into a sealed segment makes it active again, and
		// what is left of it is found.
		require.NoError(t, l.TruncateTo(1500))
		require.Equal(t, int64(1500), l.EndOffset())
		for offset := int64(0); offset < 1500; offset += 7 {
			data, err := l.Read(offset, 1, nil)
			require.NoError(t, err)
			h, err := wire.ParseHeader(data)
			require.NoError(t, err)
			require.Equal(t, offset, h.BaseOffset)
		}
		require.NoError(t, l.Close())
	}
}

// memSynced reports how many bytes of the file at name mem holds, and how
// many of them a crash keeps.
func memSynced(t *testing.T, mem *MemFS, name string) (data, synced int) {
	t.Helper()
	mem.mu.Lock()
	defer mem.mu.Unlock()
	n, err := mem.walk(splitPath(name))
	require.NoError(t, err)
	return len(n.data), len(n.synced)
}

// A segment whose batches were made durable while it was active, its index
// entries written but not synced, has its indexes synced when a roll seals
// it: later flushes start at the recovery point's segment and do not come
// back to it, and a clean open trusts the indexes of the segments below the
// recovery point but the last. Torn, they sent reads into the middle of a
// batch.
func TestRollSyncsIndexesOfADurableSegment(t *testing.T) {
	mem := NewMemFS()
	dir := "/p/t-0"
	cfg := DefaultConfig()
	cfg.IndexIntervalBytes = 1 // an entry for every batch
	l, err := Open(mem, dir, Options{Config: cfg})
	require.NoError(t, err)
	for i := range 50 {
		b := wire.NewBuilder(wire.NoProducer)
		b.Append(int64(1000+i), nil, make([]byte, 100), nil)
		batch, err := b.AppendTo(nil)
		require.NoError(t, err)
		_, err = l.Append(batch)
		require.NoError(t, err)
	}
	require.NoError(t, l.Flush(l.EndOffset()))
	old := l.active()
	data, synced := memSynced(t, mem, old.index.Path())
	require.Greater(t, data, synced, "a group commit leaves the active segment's index unsynced")

	require.NoError(t, l.Roll())
	for _, name := range []string{old.index.Path(), old.timeIndex.Path()} {
		data, synced := memSynced(t, mem, name)
		require.Equal(t, data, synced, "%s synced by the roll", name)
	}
}
