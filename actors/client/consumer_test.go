package client

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/wire"
)

// seedBatches is two batches at offsets 0 and 3, the second compressed.
func seedBatches(t testing.TB) []byte {
	t.Helper()
	var out []byte
	for i, codec := range []wire.Compression{wire.CompressionNone, wire.CompressionLZ4} {
		b := wire.NewBuilder(wire.BatchOptions{Compression: codec, ProducerID: 7, ProducerEpoch: 0, BaseSequence: int32(3 * i)})
		for j := range 3 {
			b.Append(int64(1000+j), []byte{'k', byte(j)}, []byte("value"), []wire.RecordHeader{{Key: "h", Value: []byte{byte(j)}}})
		}
		start := len(out)
		var err error
		out, err = b.AppendTo(out)
		require.NoError(t, err)
		wire.SetBaseOffset(out[start:], int64(3*i))
	}
	return out
}

func TestConsumerDecodeSkipsBeforeOffset(t *testing.T) {
	data := seedBatches(t)
	tests := []struct {
		from int64
		want []int64
	}{
		{0, []int64{0, 1, 2, 3, 4, 5}},
		{2, []int64{2, 3, 4, 5}},
		{3, []int64{3, 4, 5}},
		{5, []int64{5}},
		{6, nil},
	}
	for _, tt := range tests {
		c := &Consumer{}
		got, n, err := c.decode([]fetched{{topic: "t", partition: 1, from: tt.from, records: data}})
		require.NoError(t, err)
		require.Equal(t, int64(len(data)), n)
		var offsets []int64
		for _, r := range got {
			offsets = append(offsets, r.Offset)
			require.Equal(t, "t", r.Topic)
			require.Equal(t, int32(1), r.Partition)
			require.Equal(t, []byte("value"), r.Value)
			require.Len(t, r.Headers, 1)
			require.Equal(t, []byte{byte(r.Offset % 3)}, r.Headers[0].Value)
		}
		require.Equal(t, tt.want, offsets, "from %d", tt.from)
	}
	// A flipped bit is reported, not decoded.
	bad := append([]byte(nil), data...)
	bad[len(bad)-1] ^= 1
	_, _, err := (&Consumer{}).decode([]fetched{{topic: "t", records: bad}})
	require.ErrorIs(t, err, wire.ErrBadCRC)
}

// Fetched bytes come from the network: decoding them never panics, and what
// decodes is in offset order from the requested offset.
func FuzzConsumerDecode(f *testing.F) {
	data := seedBatches(f)
	f.Add(data, int64(0))
	f.Add(data, int64(4))
	f.Add(data[:len(data)-5], int64(1))
	f.Add([]byte{}, int64(0))
	f.Add(make([]byte, 70), int64(0))
	f.Fuzz(func(t *testing.T, b []byte, from int64) {
		c := &Consumer{}
		got, n, _ := c.decode([]fetched{{topic: "t", from: from, records: b}})
		require.Equal(t, int64(len(b)), n)
		for i, r := range got {
			require.GreaterOrEqual(t, r.Offset, from)
			if i > 0 {
				require.Greater(t, r.Offset, got[i-1].Offset)
			}
		}
	})
}
