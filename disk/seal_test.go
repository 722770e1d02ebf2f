package disk

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/wire"
)

// Only the active segment keeps index entries in memory: a log's memory
// does not grow with the segments it holds, and every offset is still found
// through the sealed indexes, before and after a reopen.
func TestSealedSegmentsKeepNoIndexInMemory(t *testing.T) {
	for _, fsys := range []FS{NewMemFS(), OS} {
		dir := "/p/t-0"
		if fsys == OS {
			dir = t.TempDir() + "/t-0"
		}
		cfg := DefaultConfig()
		cfg.SegmentBytes = 16 << 10
		cfg.IndexIntervalBytes = 512
		l, err := Open(fsys, dir, Options{Config: cfg})
		require.NoError(t, err)
		const batches = 200
		for i := 0; i < batches; i++ {
			b := wire.NewBuilder(wire.NoProducer)
			b.Append(int64(1000+i), nil, make([]byte, 300), nil)
			batch, err := b.AppendTo(nil)
			require.NoError(t, err)
			_, err = l.Append(batch)
			require.NoError(t, err)
		}
		check := func(l *Log) {
			require.Greater(t, len(l.segments), 3)
			for _, s := range l.segments[:len(l.segments)-1] {
				require.True(t, s.index.sealed && s.timeIndex.sealed, "segment %d sealed", s.baseOffset)
				require.Nil(t, s.index.entries)
				require.Positive(t, s.index.Entries(), "its entries are in the file")
			}
			require.False(t, l.active().index.sealed)
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
		// Truncating into a sealed segment makes it active again, with its
		// entries back in memory.
		require.NoError(t, l.TruncateTo(5))
		require.Equal(t, int64(5), l.EndOffset())
		require.False(t, l.active().index.sealed)
		require.NoError(t, l.Close())
	}
}
