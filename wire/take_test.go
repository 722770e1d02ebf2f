package wire

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTakeMatchesAppendToAndHandsOverTheBuffer(t *testing.T) {
	for _, c := range []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd} {
		t.Run(c.String(), func(t *testing.T) {
			opts := BatchOptions{Compression: c, ProducerID: 7, ProducerEpoch: 1, BaseSequence: 0}
			b := NewBuilder(opts)
			var spare []byte
			var taken [][]byte
			var want [][]byte
			for batch := 0; batch < 3; batch++ {
				for i := 0; i < 50; i++ {
					b.Append(int64(1000+i), []byte(fmt.Sprint("k", i)), []byte(fmt.Sprintf("batch %d value %d", batch, i)), nil)
				}
				expected, err := b.AppendTo(nil)
				require.NoError(t, err)
				got, err := b.Take(spare)
				require.NoError(t, err)
				require.Equal(t, expected, got)
				require.Zero(t, b.Len(), "the builder is empty after Take")
				require.Equal(t, HeaderSize, b.Size())
				taken = append(taken, got)
				want = append(want, expected)
				spare = nil
			}
			// Later batches never overwrite a taken one.
			for i := range taken {
				require.Equal(t, want[i], taken[i])
				_, err := Validate(taken[i])
				require.NoError(t, err)
			}
		})
	}
}

func TestTakeReusesSpare(t *testing.T) {
	b := NewBuilder(NoProducer)
	b.Append(1, nil, []byte("a"), nil)
	first, err := b.Take(make([]byte, 0, 8192))
	require.NoError(t, err)
	require.Equal(t, 8192, cap(b.buf), "the builder continues in the spare buffer")
	b.Append(2, nil, []byte("b"), nil)
	second, err := b.Take(first)
	require.NoError(t, err)
	var values []string
	require.NoError(t, Records(second, func(r Record) error {
		values = append(values, string(r.Value))
		return nil
	}))
	require.Equal(t, []string{"b"}, values)
}

// Grow moves the records into a larger buffer and hands back the old one;
// the batch is the same as one built without it.
func TestGrowMovesTheRecords(t *testing.T) {
	plain, grown := NewBuilder(NoProducer), NewBuilder(NoProducer)
	require.Nil(t, grown.Grow(make([]byte, 0, 16)), "a smaller buffer is refused")
	for i := 0; i < 100; i++ {
		value := []byte(fmt.Sprint("value ", i))
		plain.Append(int64(i), nil, value, nil)
		if i%10 == 0 {
			old := grown.Grow(make([]byte, 0, grown.Cap()*2))
			require.NotNil(t, old)
			require.Less(t, cap(old), grown.Cap())
		}
		grown.Append(int64(i), nil, value, nil)
	}
	want, err := plain.AppendTo(nil)
	require.NoError(t, err)
	got, err := grown.Take(nil)
	require.NoError(t, err)
	require.Equal(t, want, got)
}

func BenchmarkTake(b *testing.B) {
	value := make([]byte, 1024)
	builder := NewBuilder(NoProducer)
	var spare []byte
	b.SetBytes(64 * 1024)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		for j := 0; j < 64; j++ {
			builder.Append(int64(j), nil, value, nil)
		}
		batch, err := builder.Take(spare)
		if err != nil {
			b.Fatal(err)
		}
		spare = batch
	}
}
