package wire

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// run builds three batches of different codecs and sizes, with base offsets
// 0, 10 and 20, concatenated as a fetch returns them.
func run(t *testing.T) (all []byte, batches [][]byte) {
	t.Helper()
	for i, c := range []Compression{CompressionNone, CompressionZstd, CompressionGzip} {
		b := build(t, BatchOptions{Compression: c, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, sampleRecords()[:2+i])
		SetBaseOffset(b, int64(10*i))
		batches = append(batches, b)
		all = append(all, b...)
	}
	return all, batches
}

func TestBatchesEveryCut(t *testing.T) {
	all, batches := run(t)
	ends := []int{len(batches[0]), len(batches[0]) + len(batches[1]), len(all)}
	for cut := 0; cut <= len(all); cut++ {
		var seen []int64
		rest, err := Batches(all[:cut], func(batch []byte, h Header) error {
			require.Equal(t, h.Size(), len(batch))
			require.Equal(t, batches[len(seen)], batch)
			seen = append(seen, h.BaseOffset)
			return nil
		})
		require.NoError(t, err, "cut at %d", cut)
		complete := 0
		for _, end := range ends {
			if end <= cut {
				complete++
			}
		}
		require.Len(t, seen, complete, "cut at %d", cut)
		consumed := 0
		if complete > 0 {
			consumed = ends[complete-1]
		}
		require.Equal(t, all[consumed:cut], rest, "cut at %d", cut)
		for i, off := range seen {
			require.Equal(t, int64(10*i), off)
		}
	}
}

func TestBatchesDamage(t *testing.T) {
	all, batches := run(t)
	second := len(batches[0])
	tests := []struct {
		name    string
		edit    func(b []byte) []byte
		want    error
		failAt  int // byte position of the batch that fails
		batches int // batches fn sees before the failure
	}{
		{"flipped bit in second", func(b []byte) []byte { b[second+HeaderSize+3] ^= 4; return b }, ErrBadCRC, second, 1},
		{"bad magic in second", func(b []byte) []byte { b[second+magicPos] = 1; return b }, ErrBadMagic, second, 1},
		{"bad magic in partial tail", func(b []byte) []byte {
			b = b[:second+magicPos+1]
			b[second+magicPos] = 0
			return b
		}, ErrBadMagic, second, 1},
		{"length too small in second", func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[second+batchLengthPos:], 10)
			return b
		}, ErrBadLength, second, 1},
		{"negative length in partial tail", func(b []byte) []byte {
			b = b[:second+LogOverhead]
			binary.BigEndian.PutUint32(b[second+batchLengthPos:], 0xfffffff0)
			return b
		}, ErrBadLength, second, 1},
		{"garbage first", func(b []byte) []byte { b[crcPos] ^= 0xff; return b }, ErrBadCRC, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.edit(append([]byte{}, all...))
			n := 0
			rest, err := Batches(b, func([]byte, Header) error { n++; return nil })
			require.ErrorIs(t, err, tt.want)
			require.Equal(t, tt.batches, n)
			require.Equal(t, b[tt.failAt:], rest, "rest starts at the damaged batch")

			var it BatchIterator
			it.Reset(b)
			for it.Next() {
			}
			require.ErrorIs(t, it.Err(), tt.want)
			require.Equal(t, tt.failAt, it.Pos())
			require.False(t, it.Next(), "the iterator stays stopped")
		})
	}
}

func TestBatchesCallbackError(t *testing.T) {
	all, batches := run(t)
	stop := errors.New("stop")
	n := 0
	rest, err := Batches(all, func([]byte, Header) error {
		n++
		if n == 2 {
			return stop
		}
		return nil
	})
	require.Equal(t, stop, err)
	require.Equal(t, all[len(batches[0]):], rest, "rest starts at the refused batch")
}

func TestBatchIteratorSkipCRC(t *testing.T) {
	all, batches := run(t)
	b := append([]byte{}, all...)
	b[len(batches[0])+HeaderSize+3] ^= 4 // damage the second batch's records
	it := BatchIterator{SkipCRC: true}
	it.Reset(b)
	var offsets []int64
	var positions []int
	for it.Next() {
		offsets = append(offsets, it.Header().BaseOffset)
		positions = append(positions, it.Pos())
		require.Len(t, it.Batch(), it.Header().Size())
	}
	require.NoError(t, it.Err())
	require.Equal(t, []int64{0, 10, 20}, offsets)
	require.Equal(t, []int{0, len(batches[0]), len(batches[0]) + len(batches[1])}, positions)
	require.Empty(t, it.Rest())
	require.True(t, it.SkipCRC, "Reset keeps SkipCRC")

	// A Decoder that trusts the iterator's validation decodes the batches;
	// one that checks the CRC catches the damage.
	trusting := Decoder{SkipCRC: true}
	it.Reset(all)
	for it.Next() {
		require.NoError(t, trusting.Records(it.Batch(), func(Record) error { return nil }))
	}
	var checking Decoder
	require.ErrorIs(t, checking.Records(b[len(batches[0]):], func(Record) error { return nil }), ErrBadCRC)
}

func TestBatchIteratorEmpty(t *testing.T) {
	var it BatchIterator
	require.False(t, it.Next())
	require.NoError(t, it.Err())
	require.Empty(t, it.Rest())
	rest, err := Batches(nil, func([]byte, Header) error { t.Fatal("no batch"); return nil })
	require.NoError(t, err)
	require.Empty(t, rest)
}
