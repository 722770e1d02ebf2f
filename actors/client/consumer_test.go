package client

import (
	"fmt"
	"math"
	"slices"
	"strings"
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
		got, rest, n, err := c.decode([]fetched{{topic: "t", partition: 1, from: tt.from, records: data}}, math.MaxInt)
		require.NoError(t, err)
		require.Empty(t, rest)
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
	_, _, _, err := (&Consumer{}).decode([]fetched{{topic: "t", records: bad}}, math.MaxInt)
	require.ErrorIs(t, err, wire.ErrBadCRC)
}

// decode starts no batch once it has the records asked for, and hands back
// the rest: the run it stopped in from the batch it stopped at, with the
// offset to go on from, and the runs after it. Decoding the rest then
// gives every record once.
func TestConsumerDecodeStopsAtLimit(t *testing.T) {
	data := seedBatches(t)
	first, err := wire.PeekSize(data)
	require.NoError(t, err)
	tests := []struct {
		name     string
		from     int64
		limit    int
		want     []int64
		restFrom int64 // of the first run left, when one is
		restRuns int
		decoded  int // bytes
	}{
		{"limit inside the first batch", 0, 1, []int64{0, 1, 2}, 3, 2, first},
		{"limit at the first batch's end", 0, 3, []int64{0, 1, 2}, 3, 2, first},
		{"limit inside the second batch", 0, 4, []int64{0, 1, 2, 3, 4, 5}, 0, 1, len(data)},
		{"first batch partly before from", 2, 1, []int64{2}, 3, 2, first},
		{"everything", 0, 6, []int64{0, 1, 2, 3, 4, 5}, 0, 1, len(data)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Consumer{}
			runs := []fetched{
				{topic: "t", partition: 1, from: tt.from, records: data},
				{topic: "t", partition: 2, records: data},
			}
			got, rest, n, err := c.decode(runs, tt.limit)
			require.NoError(t, err)
			require.Equal(t, int64(tt.decoded), n)
			var offsets []int64
			for _, r := range got {
				require.Equal(t, int32(1), r.Partition)
				offsets = append(offsets, r.Offset)
			}
			require.Equal(t, tt.want, offsets)
			require.Len(t, rest, tt.restRuns)
			if tt.restRuns == 2 {
				require.Equal(t, int32(1), rest[0].partition)
				require.Equal(t, tt.restFrom, rest[0].from)
				require.Equal(t, data[first:], rest[0].records)
			}
			require.Equal(t, int32(2), rest[len(rest)-1].partition)
			require.Equal(t, data, rest[len(rest)-1].records)

			more, left, m, err := c.decode(rest, math.MaxInt)
			require.NoError(t, err)
			require.Empty(t, left)
			require.Equal(t, int64(len(data)*2), n+m, "every byte decoded once")
			got = append(got, more...)
			seen := map[int32][]int64{}
			for _, r := range got {
				seen[r.Partition] = append(seen[r.Partition], r.Offset)
			}
			var all []int64
			for o := tt.from; o < 6; o++ {
				all = append(all, o)
			}
			require.Equal(t, map[int32][]int64{1: all, 2: {0, 1, 2, 3, 4, 5}}, seen)
		})
	}
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
		got, _, n, _ := c.decode([]fetched{{topic: "t", from: from, records: b}}, math.MaxInt)
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

// waitPrefetched waits until every partition of topic holds a fetch parked
// at its end: the consumer has everything before it.
func waitPrefetched(t *testing.T, fc *fakeCluster, topic string, partitions int) {
	t.Helper()
	require.Eventually(t, func() bool {
		for i := range partitions {
			p := fc.partition(topic, i)
			p.mu.Lock()
			parked := slices.ContainsFunc(p.parked, func(pf *parkedFetch) bool {
				return !pf.done.Load() && pf.req.GetOffset() == p.next
			})
			p.mu.Unlock()
			if !parked {
				return false
			}
		}
		return true
	}, 10*time.Second, time.Millisecond, "%s", parkedState{fc, topic, partitions})
}

// parkedState describes, when a test fails, where each partition of a
// topic ends and the fetches parked at it.
type parkedState struct {
	fc         *fakeCluster
	topic      string
	partitions int
}

func (d parkedState) String() string {
	var b strings.Builder
	for i := range d.partitions {
		p := d.fc.partition(d.topic, i)
		p.mu.Lock()
		fmt.Fprintf(&b, "partition %d: end %d, %d fetches, parked at:", i, p.next, p.fetches)
		for _, pf := range p.parked {
			fmt.Fprintf(&b, " %d (answered %v)", pf.req.GetOffset(), pf.done.Load())
		}
		b.WriteString("\n")
		p.mu.Unlock()
	}
	return b.String()
}

// However much has been fetched ahead, one Poll returns at most
// MaxPollRecords records (500 by default); the rest comes with the next
// Polls, every record once and in order.
func TestConsumerPollReturnsAtMostMaxPollRecords(t *testing.T) {
	const n, partitions = 4000, 4
	for _, tt := range []struct {
		name  string
		opts  []ConsumerOpt
		limit int
	}{
		{"default", nil, 500},
		{"set", []ConsumerOpt{MaxPollRecords(7)}, 7},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fc, c := setup(t)
			ctx := testContext(t, 20*time.Second)
			require.NoError(t, fc.createTopic("held", partitions))
			p, err := c.NewProducer()
			require.NoError(t, err)
			produced := produceAll(t, ctx, p, "held", n)
			require.NoError(t, p.Close())
			cons, err := c.NewConsumer(append([]ConsumerOpt{FetchMaxWait(10 * time.Second)}, tt.opts...)...)
			require.NoError(t, err)
			defer cons.Close()
			cons.AssignTopic("held", AtStart())
			waitPrefetched(t, fc, "held", partitions)

			var got []*Record
			for polls := 0; len(got) < n; polls++ {
				rs, err := cons.Poll(ctx)
				require.NoError(t, err)
				require.NotEmpty(t, rs)
				require.LessOrEqual(t, len(rs), tt.limit)
				if polls == 0 {
					require.Len(t, rs, tt.limit, "the first Poll has more than enough")
				}
				got = append(got, rs...)
			}
			checkExactlyOnce(t, produced, got, partitions, true)
		})
	}
}

// Records decoded beyond MaxPollRecords and not yet returned belong to
// their partition's assignment: once it is unassigned they are dropped, so
// a partition assigned again reads from where it is assigned, each record
// once.
func TestConsumerUnassignDropsHeldRecords(t *testing.T) {
	const n = 1000
	fc, c := setup(t)
	ctx := testContext(t, 20*time.Second)
	require.NoError(t, fc.createTopic("held", 1))
	p, err := c.NewProducer()
	require.NoError(t, err)
	produced := produceAll(t, ctx, p, "held", n)
	require.NoError(t, p.Close())
	cons, err := c.NewConsumer(MaxPollRecords(1), FetchMaxWait(10*time.Second))
	require.NoError(t, err)
	defer cons.Close()
	cons.Assign("held", 0, AtOffset(0))
	waitPrefetched(t, fc, "held", 1)
	// Polled one at a time until a batch of several records was decoded.
	for read := 0; len(cons.held) == 0; read++ {
		require.Less(t, read, n, "no batch of more than one record")
		rs, err := cons.Poll(ctx)
		require.NoError(t, err)
		require.Len(t, rs, 1)
	}

	require.NoError(t, cons.unassign(ctx, map[TopicPartition]bool{{"held", 0}: true}))
	require.Zero(t, len(cons.held))
	cons.Assign("held", 0, AtOffset(0))
	var got []*Record
	for len(got) < n {
		rs, err := cons.Poll(ctx)
		require.NoError(t, err)
		got = append(got, rs...)
	}
	checkExactlyOnce(t, produced, got, 1, true)
}

// Every fetch names the leader epoch the metadata gives its partition. A
// fetch fenced for an older epoch than the leader's, or refused for a
// newer one the leader has yet to learn, makes the consumer refresh its
// metadata and fetch again from the same offset: no record skipped or
// read twice.
func TestConsumerFetchesWithTheLeaderEpoch(t *testing.T) {
	fc, c := setup(t)
	ctx := testContext(t, 20*time.Second)
	require.NoError(t, fc.createTopic("t", 1))
	for range 3 {
		fc.bumpEpoch("t", 0)
	}
	p, err := c.NewProducer(Linger(0))
	require.NoError(t, err)
	defer p.Close()
	cons, err := c.NewConsumer(ConsumerRetryBackoff(5*time.Millisecond), FetchMaxWait(50*time.Millisecond))
	require.NoError(t, err)
	defer cons.Close()
	cons.Assign("t", 0, AtStart())
	produced := numbered("t", 0, 100)
	require.NoError(t, p.ProduceSync(ctx, produced...))
	got := pollUntil(t, cons, nil, 100, 10*time.Second)
	require.Equal(t, int32(3), fc.fetchEpoch("t", 0))

	// Re-elected: the consumer's epoch is fenced.
	fc.bumpEpoch("t", 0)
	more := numbered("t", 100, 100)
	require.NoError(t, p.ProduceSync(ctx, more...))
	produced = append(produced, more...)
	got = pollUntil(t, cons, got, 200, 10*time.Second)
	require.Positive(t, fc.stats("t").fenced)
	// A fetch parked before the election may have brought the records;
	// the next names the new epoch.
	require.Eventually(t, func() bool { return fc.fetchEpoch("t", 0) == 4 }, 5*time.Second, 5*time.Millisecond)

	// Fenced again, and the metadata now gives an epoch the leader has
	// yet to learn.
	fc.bumpEpoch("t", 0)
	fc.announceEpoch("t", 0, 3)
	more = numbered("t", 200, 100)
	require.NoError(t, p.ProduceSync(ctx, more...))
	produced = append(produced, more...)
	got = pollUntil(t, cons, got, 300, 10*time.Second)
	st := fc.stats("t")
	require.Equal(t, 3, st.unknownEpoch)
	require.Equal(t, int32(6), fc.fetchEpoch("t", 0))
	require.Zero(t, st.withoutEpoch, "every fetch named an epoch")
	checkExactlyOnce(t, produced, got, 1, true)
}

// A consumer fetches the partitions of a node in one request to it, every
// one of them in it, and a partition alone only while it is far behind:
// once it has read everything, it fetches nothing but that request, whose
// answers bring what is produced next, each record once and in order.
func TestConsumerFetchesPartitionsOfANodeTogether(t *testing.T) {
	const n, partitions = 3000, 30
	fc, c := setup(t)
	ctx := testContext(t, 30*time.Second)
	require.NoError(t, fc.createTopic("many", partitions))
	p, err := c.NewProducer()
	require.NoError(t, err)
	defer p.Close()
	produced := produceAll(t, ctx, p, "many", n)
	cons, err := c.NewConsumer(FetchMaxWait(50 * time.Millisecond))
	require.NoError(t, err)
	defer cons.Close()
	cons.AssignTopic("many", AtStart())
	got := pollUntil(t, cons, nil, n, 10*time.Second)
	require.Eventually(t, func() bool { return fc.maxParts.Load() == partitions }, 10*time.Second, time.Millisecond,
		"a request names every partition")

	// Idle: only the node's fetch, again and again.
	alone := fc.stats("many").alone
	requests := fc.fetchesRequests.Load()
	require.Eventually(t, func() bool { return fc.fetchesRequests.Load() >= requests+5 }, 10*time.Second, time.Millisecond)
	require.Equal(t, alone, fc.stats("many").alone, "no partition fetched alone")

	more := numbered("many", n, n)
	require.NoError(t, p.ProduceSync(ctx, more...))
	produced = append(produced, more...)
	got = pollUntil(t, cons, got, 2*n, 10*time.Second)
	checkExactlyOnce(t, produced, got, partitions, true)
}

// A partition is caught up alone while what is left to read, estimated
// from the size of the records its answer brought, exceeds its
// PartitionMaxBytes, and with its node's others once it does not.
func TestBehind(t *testing.T) {
	for _, tc := range []struct {
		name           string
		read           int
		from, next, hw int64
		want           bool
	}{
		{"at the high watermark", 500, 0, 10, 10, false},
		{"nothing to read", 0, 10, 10, 10, false},
		{"a little left", 1000, 0, 10, 20, false},           // about 1000 bytes left
		{"more than max_bytes left", 1000, 0, 10, 30, true}, // about 2000
		{"nothing read, more there", 0, 10, 10, 11, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, behind(tc.read, tc.from, tc.next, tc.hw, 1500))
		})
	}
}

// A consumer whose client is closed under it stops fetching, and a Poll
// waiting for records returns ErrClosed.
func TestConsumerStopsWithItsClient(t *testing.T) {
	fc, c := setup(t)
	ctx := testContext(t, 30*time.Second)
	require.NoError(t, fc.createTopic("t", 2))
	p, err := c.NewProducer()
	require.NoError(t, err)
	defer p.Close()
	produced := produceAll(t, ctx, p, "t", 100)
	cons, err := c.NewConsumer(FetchMaxWait(20 * time.Millisecond))
	require.NoError(t, err)
	defer cons.Close()
	cons.AssignTopic("t", AtStart())
	got := pollUntil(t, cons, nil, len(produced), 10*time.Second)
	checkExactlyOnce(t, produced, got, 2, true)

	polled := make(chan error, 1)
	go func() {
		_, err := cons.Poll(ctx)
		polled <- err
	}()
	c.Close()
	select {
	case err := <-polled:
		require.ErrorIs(t, err, ErrClosed)
	case <-time.After(promptly):
		t.Fatalf("Poll still waiting %v after the client closed", promptly)
	}
	requests := fc.fetchesRequests.Load()
	time.Sleep(200 * time.Millisecond) // ten times the fetch's max wait
	require.LessOrEqual(t, fc.fetchesRequests.Load(), requests+1, "fetches after the client closed")
}
