package wire

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// The CRC of a concatenation combined from its parts is the CRC of the
// whole, for empty parts and parts of every size up to a megabyte.
func TestCRCCombine(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	whole := make([]byte, 1<<20)
	for i := range whole {
		whole[i] = byte(rng.Uint32())
	}
	for _, n := range []int{0, 1, 2, 3, 7, 8, 61, 100, 4096, 65537, len(whole)} {
		for range 8 {
			data := whole[:n]
			cut := 0
			if n > 0 {
				cut = rng.IntN(n + 1)
			}
			a, b := data[:cut], data[cut:]
			got := crcCombine(crc32.Checksum(a, castagnoli), crc32.Checksum(b, castagnoli), len(b))
			require.Equal(t, crc32.Checksum(data, castagnoli), got, "length %d cut at %d", n, cut)
		}
	}
}

func BenchmarkCRCCombine(b *testing.B) {
	for b.Loop() {
		crcCombine(0x12345678, 0x9abcdef0, 1<<20-61)
	}
}

// A batch's CRC, combined from its header's and that of its records taken
// a block at a time, validates: across block boundaries, after the builder
// moves to a larger buffer, after a Reset, and for a copy by AppendTo.
func TestBuilderCRCAcrossBlocks(t *testing.T) {
	value := make([]byte, 3000)
	for i := range value {
		value[i] = byte(i)
	}
	b := NewBuilder(NoProducer)
	for _, n := range []int{1, 10, 11, 12, 50, 200} { // 3 KB records: 11 cross the first block
		b.Reset(NoProducer)
		for i := range n {
			if i == n/2 {
				b.Grow(make([]byte, 0, 2*b.Cap()))
			}
			b.Append(int64(i), nil, value[:1000+i], nil)
		}
		copied, err := b.AppendTo(nil)
		require.NoError(t, err)
		_, err = Validate(copied)
		require.NoError(t, err, "copy of %d records", n)
		taken, err := b.Take(nil)
		require.NoError(t, err)
		_, err = Validate(taken)
		require.NoError(t, err, "%d records", n)
		require.Equal(t, copied, taken)
	}
}
