package client

import (
	"testing"
	"time"

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

// chunkedTopic makes a topic of many small batches and produces n records
// to it.
func chunkedTopic(t *testing.T, fc *fakeCluster, c *Client, topic string, n, partitions int) []*Record {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	require.NoError(t, fc.createTopic(topic, partitions))
	p, err := c.NewProducer(BatchBytes(1<<10), Linger(time.Millisecond))
	require.NoError(t, err)
	produced := produceAll(t, ctx, p, topic, n)
	require.NoError(t, p.Close())
	require.Greater(t, fc.stats(topic).batches, 10*partitions)
	return produced
}

// When the node answers fetches in chunks, the consumer reads everything
// once and in order, a fetch parked at the log end included.
func TestConsumerReadsChunks(t *testing.T) {
	const n, partitions = 6000, 2
	for _, tt := range []struct {
		name     string
		maxBytes int32
	}{
		{"chunks of a few batches", 4 << 10},
		{"chunks of one batch", 600}, // below a batch's size
	} {
		t.Run(tt.name, func(t *testing.T) {
			fc, c := setup(t)
			ctx := testContext(t, 30*time.Second)
			produced := chunkedTopic(t, fc, c, "chunky", n, partitions)
			got := consumeAll(t, ctx, c, "chunky", n, PartitionMaxBytes(tt.maxBytes), FetchMaxWait(50*time.Millisecond))
			checkExactlyOnce(t, produced, got, partitions, true)
			st := fc.stats("chunky")
			require.Positive(t, st.chunked, "no fetch was answered in chunks")
			require.Greater(t, st.chunks, 2*st.chunked)
		})
	}
	t.Run("parked then woken", func(t *testing.T) {
		fc, c := setup(t)
		ctx := testContext(t, 30*time.Second)
		require.NoError(t, fc.createTopic("later", 1))
		// min_bytes of two chunks: woken, the fetch is answered in chunks.
		cons, err := c.NewConsumer(PartitionMaxBytes(2<<10), FetchMinBytes(4<<10), FetchMaxWait(2*time.Second))
		require.NoError(t, err)
		defer cons.Close()
		cons.AssignTopic("later", AtStart())
		// The fetch is parked once the partition has it.
		require.Eventually(t, func() bool {
			p := fc.partition("later", 0)
			p.mu.Lock()
			defer p.mu.Unlock()
			return len(p.parked) > 0
		}, 10*time.Second, time.Millisecond)
		p, err := c.NewProducer(BatchBytes(1 << 10))
		require.NoError(t, err)
		produced := produceAll(t, ctx, p, "later", 300)
		require.NoError(t, p.Close())
		var got []*Record
		for len(got) < len(produced) {
			rs, err := cons.Poll(ctx)
			require.NoError(t, err)
			got = append(got, rs...)
		}
		checkExactlyOnce(t, produced, got, 1, true)
		require.Positive(t, fc.stats("later").chunked)
	})
}

// A chunk that does not start where the one before ended (a chunk lost on
// the way, or misnamed) makes the consumer drop the rest of that fetch and
// fetch again from where its records end: nothing lost, nothing twice.
func TestConsumerDropsChunkOutOfStep(t *testing.T) {
	const n, partitions = 6000, 2
	for _, tt := range []struct {
		name   string
		faults faults
		check  func(t *testing.T, st fakeStats)
	}{
		{"wrong offset", faults{skewChunkEvery: 2}, requireRefetched},
		{"every answer wrong", faults{skewChunkEvery: 1}, requireRefetched},
		{"chunk lost", faults{dropChunkEvery: 2}, func(t *testing.T, st fakeStats) { require.Positive(t, st.chunkDropped) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fc, c := setup(t)
			ctx := testContext(t, 30*time.Second)
			produced := chunkedTopic(t, fc, c, "skewed", n, partitions)
			fc.setFaults(tt.faults)
			got := consumeAll(t, ctx, c, "skewed", n, PartitionMaxBytes(4<<10), FetchMaxWait(50*time.Millisecond))
			checkExactlyOnce(t, produced, got, partitions, true)
			tt.check(t, fc.stats("skewed"))
		})
	}
}

// requireRefetched checks that chunks were skewed and that each time the
// consumer fetched again from where the skewed chunk's records start.
func requireRefetched(t *testing.T, st fakeStats) {
	t.Helper()
	require.Positive(t, st.skewed)
	require.Equal(t, st.skewed, st.refetched, "a skewed chunk was taken, not dropped")
}

// A consumer of more partitions than its byte budget lets it fetch at once
// reads them all: the partitions whose long polls return do not take the
// budget back ahead of those that waited for it. Before they queued for
// it, 16 of the 24 partitions here were never fetched.
func TestConsumeFetchesEveryPartitionWhenBudgetIsSpent(t *testing.T) {
	const n, partitions = 4800, 24
	fc, c := setup(t)
	ctx := testContext(t, 20*time.Second)
	require.NoError(t, fc.createTopic("many", partitions))
	p, err := c.NewProducer()
	require.NoError(t, err)
	produced := produceAll(t, ctx, p, "many", n)
	require.NoError(t, p.Close())
	got := consumeAll(t, ctx, c, "many", n, FetchMaxWait(100*time.Millisecond))
	checkExactlyOnce(t, produced, got, partitions, true)
}
