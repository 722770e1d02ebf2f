package disk_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/wire"
	"github.com/stretchr/testify/require"
)

// The fuzz targets check that decoders never panic, that they fail only
// with a *CorruptionError inside the input, and that what decodes encodes
// back to the same bytes. Seeds come from f.Add and testdata/fuzz/.

func requireCorruption(t *testing.T, err error, size int) {
	t.Helper()
	var ce *disk.CorruptionError
	require.True(t, errors.As(err, &ce), "not a *CorruptionError: %v", err)
	require.GreaterOrEqual(t, ce.Offset, int64(0))
	require.LessOrEqual(t, ce.Offset, int64(size))
}

func FuzzDecodeOffsetIndex(f *testing.F) {
	f.Add([]byte{}, int64(0))
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0x10, 0, 0, 0, 0, 2, 0, 0, 0x20, 0}, int64(100))
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0x10, 0, 0, 0, 0, 1, 0, 0, 0x20, 0}, int64(0))
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0x10}, int64(5))
	f.Fuzz(func(t *testing.T, b []byte, base int64) {
		if base < 0 || base > 1<<62 {
			base &= 1<<62 - 1
		}
		entries, err := disk.DecodeOffsetIndex(b, base)
		if err != nil {
			requireCorruption(t, err, len(b))
			return
		}
		require.Len(t, entries, len(b)/disk.OffsetIndexEntrySize)
		var out []byte
		for i, e := range entries {
			if i > 0 {
				require.Greater(t, e.Offset, entries[i-1].Offset)
				require.Greater(t, e.Position, entries[i-1].Position)
			}
			out = disk.AppendOffsetEntry(out, e, base)
		}
		require.True(t, bytes.Equal(b, out), "re-encoding differs")
	})
}

func FuzzDecodeTimeIndex(f *testing.F) {
	f.Add([]byte{}, int64(0))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 1}, int64(10))
	f.Add([]byte{0x80, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 1}, int64(0))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 1, 0, 0}, int64(0))
	f.Fuzz(func(t *testing.T, b []byte, base int64) {
		if base < 0 || base > 1<<62 {
			base &= 1<<62 - 1
		}
		entries, err := disk.DecodeTimeIndex(b, base)
		if err != nil {
			requireCorruption(t, err, len(b))
			return
		}
		require.Len(t, entries, len(b)/disk.TimeIndexEntrySize)
		var out []byte
		for i, e := range entries {
			require.GreaterOrEqual(t, e.Timestamp, int64(0))
			if i > 0 {
				require.Greater(t, e.Timestamp, entries[i-1].Timestamp)
				require.GreaterOrEqual(t, e.Offset, entries[i-1].Offset)
			}
			out = disk.AppendTimeEntry(out, e, base)
		}
		require.True(t, bytes.Equal(b, out), "re-encoding differs")
	})
}

func FuzzDecodeCheckpoint(f *testing.F) {
	f.Add([]byte("0\n0\n"))
	f.Add([]byte("0\n2\norders 0 12\norders 1 7\n"))
	f.Add([]byte("0\n2\nb 1 2\na 0 1\n"))
	f.Add([]byte("0\n1\nmy-topic 2147483647 9223372036854775807\n"))
	f.Add([]byte("0\n3\na 0 1\n"))
	f.Add([]byte("0\n1\na 0 1\na 0 2\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		offsets, err := disk.DecodeCheckpoint(b)
		if err != nil {
			requireCorruption(t, err, len(b))
			return
		}
		out, err := disk.AppendCheckpoint(nil, offsets)
		require.NoError(t, err, "what decodes must encode")
		again, err := disk.DecodeCheckpoint(out)
		require.NoError(t, err)
		require.Equal(t, offsets, again)
		require.Len(t, out, len(b), "the encoding only reorders lines")
	})
}

func FuzzParseEpochCheckpoint(f *testing.F) {
	f.Add([]byte("0\n0\n"))
	f.Add([]byte("0\n3\n0 0\n1 5\n3 10\n"))
	f.Add([]byte("0\n2\n2 6\n3 6\n"))
	f.Add([]byte("0\n2\n3 6\n2 7\n"))
	f.Add([]byte("0\n1\n2147483647 9223372036854775807\n"))
	f.Add([]byte("0\n2\n0 0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := disk.ParseEpochCheckpoint(b)
		if err != nil {
			requireCorruption(t, err, len(b))
			return
		}
		for i, e := range entries {
			require.GreaterOrEqual(t, e.Epoch, int32(0))
			require.GreaterOrEqual(t, e.StartOffset, int64(0))
			if i > 0 {
				require.Greater(t, e.Epoch, entries[i-1].Epoch)
				require.GreaterOrEqual(t, e.StartOffset, entries[i-1].StartOffset)
			}
		}
		out, err := disk.AppendEpochCheckpoint(nil, entries)
		require.NoError(t, err, "what parses must encode")
		again, err := disk.ParseEpochCheckpoint(out)
		require.NoError(t, err)
		require.Equal(t, entries, again)
		require.True(t, bytes.Equal(b, out), "the text has one spelling")
	})
}

func FuzzParsePartitionDirName(f *testing.F) {
	for _, s := range []string{"orders-0", "my-topic-12", "a--1", "orders-03", "orders-", "-1", "x-2147483648", "..-1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		tp, err := disk.ParsePartitionDirName(name)
		if err != nil {
			require.ErrorIs(t, err, disk.ErrInvalidName)
			return
		}
		require.True(t, disk.ValidTopicName(tp.Topic))
		require.GreaterOrEqual(t, tp.Partition, int32(0))
		require.Equal(t, name, disk.PartitionDirName(tp))
	})
}

func FuzzParseSegmentFileName(f *testing.F) {
	for _, s := range []string{"00000000000000000000.log", "00000000000000000042.log.deleted", "99999999999999999999.log", "0.log", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		base, ext, err := disk.ParseSegmentFileName(name)
		if err != nil {
			require.ErrorIs(t, err, disk.ErrInvalidName)
			return
		}
		require.GreaterOrEqual(t, base, int64(0))
		require.Equal(t, name, disk.SegmentFileName(base, ext))
	})
}

// FuzzOpenSegment writes arbitrary bytes as the .log (and, when given, the
// .index) of a partition's only segment and opens it as after a crash
// (recovery point 0) or a clean stop (recovery point > 0), as recovery
// does. Open must neither panic nor fail. After a crash, what it keeps must
// be valid batches, CRC included, with dense offsets from 0 to EndOffset,
// each readable at every offset it holds. After a clean stop Open trusts
// the log below the recovery point, so only reads are checked: whatever they
// return is whole batches with sound headers and dense offsets, and damage
// is a *CorruptionError.
func FuzzOpenSegment(f *testing.F) {
	f.Add([]byte{}, []byte{}, uint16(0))
	f.Add(make([]byte, 100), []byte{}, uint16(0))
	f.Add(make([]byte, 100), []byte{0, 0, 0, 1, 0, 0, 0, 10}, uint16(3))
	f.Fuzz(checkOpenSegment)
}

func checkOpenSegment(t *testing.T, log, index []byte, recoveryPoint uint16) {
	{
		fs := disk.NewMemFS()
		require.NoError(t, fs.MkdirAll("/p", 0o755))
		logPath := "/p/" + disk.SegmentFileName(0, ".log")
		require.NoError(t, fs.WriteFile(logPath, log))
		if len(index) > 0 {
			require.NoError(t, fs.WriteFile("/p/"+disk.SegmentFileName(0, ".index"), index))
		}
		cfg := disk.DefaultConfig()
		cfg.IndexIntervalBytes = 100
		l, err := disk.Open(fs, "/p", disk.Options{Config: cfg, RecoveryPoint: int64(recoveryPoint)})
		require.NoError(t, err)
		defer func() { require.NoError(t, l.Close()) }()
		kept, err := fs.ReadFile(logPath)
		require.NoError(t, err)
		require.Equal(t, int64(len(kept)), l.Size())
		require.True(t, bytes.HasPrefix(log, kept), "recovery only cuts")
		require.Equal(t, int64(0), l.StartOffset())

		if recoveryPoint == 0 {
			var next int64
			rest, err := wire.Batches(kept, func(_ []byte, h wire.Header) error {
				require.Equal(t, next, h.BaseOffset)
				next = h.NextOffset()
				return nil
			})
			require.NoError(t, err)
			require.Empty(t, rest)
			require.Equal(t, next, l.EndOffset())
			all, err := l.Read(0, 1<<30, nil)
			require.NoError(t, err)
			require.True(t, bytes.Equal(kept, all), "Read returns the log as kept")
			for off := int64(0); off < l.EndOffset() && off < 1000; off++ {
				got, err := l.Read(off, 1, nil)
				require.NoError(t, err)
				h, err := wire.Validate(got)
				require.NoError(t, err)
				require.Len(t, got, h.Size())
				require.LessOrEqual(t, h.BaseOffset, off)
				require.Greater(t, h.NextOffset(), off)
			}
			return
		}
		for off := int64(0); off < l.EndOffset() && off < 1000; off++ {
			got, err := l.Read(off, 1<<30, nil)
			if err != nil {
				var ce *disk.CorruptionError
				require.ErrorAs(t, err, &ce)
				require.Equal(t, logPath, ce.Path)
				require.Empty(t, got)
				continue
			}
			var it wire.BatchIterator
			it.SkipCRC = true
			it.Reset(got)
			first := true
			var next int64
			for it.Next() {
				h := it.Header()
				if first {
					require.LessOrEqual(t, h.BaseOffset, off)
					require.Greater(t, h.NextOffset(), off)
				} else {
					require.Equal(t, next, h.BaseOffset)
				}
				first = false
				next = h.NextOffset()
			}
			require.NoError(t, it.Err())
			require.Empty(t, it.Rest())
			require.False(t, first, "at least one batch")
			require.LessOrEqual(t, next, l.EndOffset())
		}
	}
}
