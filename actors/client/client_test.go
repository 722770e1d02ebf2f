package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	depotremote "github.com/depot-dev/depot/actors/remote"
	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

// setup starts a fake cluster and a client sharing one local actor system.
func setup(t *testing.T, opts ...Opt) (*fakeCluster, *Client) {
	t.Helper()
	sys := newLocalSystem(t)
	fc := newFakeCluster(t, sys)
	c, err := New(append([]Opt{ActorSystem(sys, nil), Brokers(sys.Address())}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return fc, c
}

// setupTopic is setup with a topic "t" of one partition, a producer made
// with opts (the caller closes it), and a context of d.
func setupTopic(t *testing.T, d time.Duration, opts ...ProducerOpt) (*fakeCluster, *Client, *Producer, context.Context) {
	t.Helper()
	fc, c := setup(t)
	require.NoError(t, fc.createTopic("t", 1))
	p, err := c.NewProducer(opts...)
	require.NoError(t, err)
	return fc, c, p, testContext(t, d)
}

func testContext(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// produceAll produces n keyed records to topic and waits for every promise.
// It returns the records, their keys being "key-<i>" and values "value-<i>".
func produceAll(t *testing.T, ctx context.Context, p *Producer, topic string, n int) []*Record {
	t.Helper()
	records := make([]*Record, n)
	var wg sync.WaitGroup
	var failed atomic.Int64
	var firstErr atomic.Value
	wg.Add(n)
	for i := range records {
		r := &Record{Topic: topic, Key: []byte("key-" + strconv.Itoa(i)), Value: []byte("value-" + strconv.Itoa(i))}
		if i%10 == 0 {
			r.Headers = []wire.RecordHeader{{Key: "h", Value: []byte(strconv.Itoa(i))}}
		}
		records[i] = r
		p.Produce(ctx, r, func(r *Record, err error) {
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err)
			}
			wg.Done()
		})
	}
	require.NoError(t, p.Flush(ctx))
	wg.Wait()
	if failed.Load() > 0 {
		require.NoError(t, firstErr.Load().(error), "%d records failed", failed.Load())
	}
	return records
}

// consumeAll reads topic from the start until n records arrived, then checks
// that nothing more comes within a short wait.
func consumeAll(t *testing.T, ctx context.Context, c *Client, topic string, n int, opts ...ConsumerOpt) []*Record {
	t.Helper()
	cons, err := c.NewConsumer(opts...)
	require.NoError(t, err)
	defer cons.Close()
	cons.AssignTopic(topic, AtStart())
	var out []*Record
	for len(out) < n {
		rs, err := cons.Poll(ctx)
		require.NoError(t, err, "after %d of %d records", len(out), n)
		out = append(out, rs...)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	more, err := cons.Poll(short)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Empty(t, more)
	return out
}

// numbered is n records to topic, keyed "key-<i>" for i from
// first, with values of about 100 bytes, so that small batches hold few.
func numbered(topic string, first, n int) []*Record {
	rs := make([]*Record, n)
	for i := range rs {
		k := strconv.Itoa(first + i)
		rs[i] = &Record{Topic: topic, Key: []byte("key-" + k), Value: []byte("value-" + k + strings.Repeat(".", 100))}
	}
	return rs
}

// pollUntil polls cons until it has returned n records in all, within
// limit, and returns them.
func pollUntil(t *testing.T, cons *Consumer, got []*Record, n int, limit time.Duration) []*Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	for len(got) < n {
		more, err := cons.Poll(ctx)
		require.NoError(t, err, "after %d of %d records", len(got), n)
		got = append(got, more...)
	}
	return got
}

// requireProducedInOrder checks that the records of one partition have the
// offsets 0, 1, ... in the order they were produced.
func requireProducedInOrder(t *testing.T, rs []*Record) {
	t.Helper()
	for i, r := range rs {
		require.Equal(t, int64(i), r.Offset, "record %s", r.Key)
	}
}

// checkExactlyOnce checks that got holds each produced record once, with
// its key, value and headers, in offset order per partition, offsets dense
// from 0, on the partition the producer reported.
func checkExactlyOnce(t *testing.T, produced, got []*Record, partitions int, checkOffsets bool) {
	t.Helper()
	require.Len(t, got, len(produced))
	byKey := make(map[string]*Record, len(produced))
	for _, r := range produced {
		byKey[string(r.Key)] = r
	}
	next := make([]int64, partitions)
	for _, r := range got {
		require.Equal(t, next[r.Partition], r.Offset, "partition %d out of order", r.Partition)
		next[r.Partition]++
		want, ok := byKey[string(r.Key)]
		require.True(t, ok, "unexpected or duplicate key %q", r.Key)
		delete(byKey, string(r.Key))
		require.Equal(t, want.Value, r.Value)
		require.Equal(t, want.Partition, r.Partition)
		require.Equal(t, want.Timestamp.UnixMilli(), r.Timestamp.UnixMilli())
		require.Equal(t, len(want.Headers), len(r.Headers))
		for i := range want.Headers {
			require.Equal(t, want.Headers[i].Key, r.Headers[i].Key)
			require.Equal(t, want.Headers[i].Value, r.Headers[i].Value)
		}
		if checkOffsets {
			require.Equal(t, want.Offset, r.Offset)
		}
	}
	require.Empty(t, byKey)
}

func TestProduceConsumeEachAcks(t *testing.T) {
	const n, partitions = 50000, 4
	for _, acks := range []int{-1, 1, 0} {
		t.Run(fmt.Sprintf("acks=%d", acks), func(t *testing.T) {
			fc, c := setup(t)
			ctx := testContext(t, 30*time.Second)
			topic := "events"
			md, err := c.CreateTopic(ctx, topic, partitions, nil)
			require.NoError(t, err)
			require.Len(t, md.GetPartitions(), partitions)
			p, err := c.NewProducer(Acks(acks), BatchBytes(64<<10))
			require.NoError(t, err)
			produced := produceAll(t, ctx, p, topic, n)
			require.NoError(t, p.Close())
			require.Zero(t, p.BufferedBytes())
			for _, r := range produced {
				require.Equal(t, int32(KeyPartition(r.Key, partitions)), r.Partition)
				if acks == 0 {
					require.Equal(t, int64(-1), r.Offset)
				}
			}
			got := consumeAll(t, ctx, c, topic, n)
			checkExactlyOnce(t, produced, got, partitions, acks != 0)
			st := fc.stats(topic)
			require.Zero(t, st.duplicates)
			require.Zero(t, st.outOfOrder)
			for i := range partitions {
				status, err := c.PartitionStatus(ctx, topic, int32(i))
				require.NoError(t, err)
				require.Positive(t, status.GetLogEndOffset())
			}
		})
	}
}

// Lost requests and lost answers are retried; idempotence keeps each record
// once; lost fetches are sent again.
func TestProduceRetriesLostRequestsOnce(t *testing.T) {
	const n, partitions = 20000, 4
	for _, acks := range []int{-1, 1} {
		t.Run(fmt.Sprintf("acks=%d", acks), func(t *testing.T) {
			fc, c := setup(t)
			ctx := testContext(t, 40*time.Second)
			require.NoError(t, fc.createTopic("lossy", partitions))
			fc.setFaults(faults{dropProduceEvery: 7, loseAnswerEvery: 5, dropFetchEvery: 4})
			p, err := c.NewProducer(Acks(acks), BatchBytes(16<<10), ProducerRequestTimeout(150*time.Millisecond), RetryBackoff(5*time.Millisecond))
			require.NoError(t, err)
			produced := produceAll(t, ctx, p, "lossy", n)
			require.NoError(t, p.Close())
			st := fc.stats("lossy")
			require.Positive(t, st.dropped)
			require.Positive(t, st.unanswered)
			got := consumeAll(t, ctx, c, "lossy", n, ConsumerRequestTimeout(100*time.Millisecond), FetchMaxWait(50*time.Millisecond), ConsumerRetryBackoff(5*time.Millisecond))
			checkExactlyOnce(t, produced, got, partitions, true)
			require.Positive(t, fc.stats("lossy").fetchDropped)
		})
	}
}

// A producer writing to many partitions of one node keeps about
// MaxInFlightPerNode batches' worth of bytes in flight to it, not that much
// per partition, and still delivers every record once; small batches are
// not held to that many requests. The bound defaults to 5, or 10 with
// acks=all.
func TestProduceBoundsBytesInFlightPerNode(t *testing.T) {
	const n, partitions = 4000, 16
	for _, tc := range []struct {
		name  string
		opts  []ProducerOpt
		bound int
	}{
		{"bound=1", []ProducerOpt{MaxInFlightPerNode(1)}, 1},
		{"bound=3", []ProducerOpt{MaxInFlightPerNode(3)}, 3},
		{"acks=1", []ProducerOpt{Acks(1)}, 5},
		{"acks=all", nil, DefaultMaxInFlightAcksAll},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc, c := setup(t)
			ctx := testContext(t, 30*time.Second)
			require.NoError(t, fc.createTopic("wide", partitions))
			fc.setFaults(faults{holdProduce: 2 * time.Millisecond})
			p, err := c.NewProducer(append([]ProducerOpt{BatchBytes(4 << 10), Linger(0)}, tc.opts...)...)
			require.NoError(t, err)
			produced := produceAll(t, ctx, p, "wide", n)
			require.NoError(t, p.Close())
			// The last batch sent may cross the bound, by less than a batch.
			require.Less(t, fc.maxWorkingBytes.Load(), int64((tc.bound+1)*4<<10), "bytes the partitions work on at once: within the bound")
			require.Greater(t, fc.maxWorking.Load(), int32(1), "requests smaller than a batch share the bound")
			got := consumeAll(t, ctx, c, "wide", n)
			checkExactlyOnce(t, produced, got, partitions, true)
		})
	}
}

// Batches far smaller than BatchBytes each count as 1/minChargeOf of it
// against the node's window: with many partitions written to at once, no
// more than minChargeOf times MaxInFlightPerNode of them are in flight to
// a node, however small, and every record still arrives once.
func TestProduceBoundsSmallBatchesInFlightPerNode(t *testing.T) {
	const n, partitions = 4000, 200
	fc, c := setup(t)
	ctx := testContext(t, 60*time.Second)
	require.NoError(t, fc.createTopic("many", partitions))
	fc.setFaults(faults{holdProduce: 20 * time.Millisecond})
	p, err := c.NewProducer(BatchBytes(64<<10), MaxInFlightPerNode(1), Acks(1))
	require.NoError(t, err)
	produced := produceAll(t, ctx, p, "many", n)
	require.NoError(t, p.Close())
	require.LessOrEqual(t, fc.maxWorking.Load(), int32(minChargeOf+1), "batches the partitions work on at once: within the window, the last one crossing it")
	require.Greater(t, fc.maxWorking.Load(), int32(1), "small batches share the window")
	got := consumeAll(t, ctx, c, "many", n)
	checkExactlyOnce(t, produced, got, partitions, true)
}

// A batch larger than the topic's max.message.bytes is batched again
// within it and sent in its place, as Kafka's producer splits one, and the
// partition's later batches are sealed within it: every record arrives
// once, in order with idempotence, and no batch taken is larger than the
// limit. When the refusal does not name the limit, the batch is halved
// until its parts fit.
func TestProduceSplitsBatchesLargerThanTheTopicAllows(t *testing.T) {
	const n, limit = 20000, 2000
	for _, tc := range []struct {
		name       string
		idempotent bool
		hide       bool
		refusals   int // at most, when the limit is named: later batches are sealed within it
	}{
		// The first refusal, then those of the batches already in flight.
		{"idempotent", true, false, 1 + DefaultMaxInFlightAcksAll},
		{"not idempotent", false, false, 1 + DefaultMaxInFlightAcksAll},
		{"limit unknown", true, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc, c := setup(t)
			ctx := testContext(t, 30*time.Second)
			require.NoError(t, fc.createTopic("small", 1))
			fc.setFaults(faults{maxMessageBytes: limit, hideMaxMessageBytes: tc.hide})
			p, err := c.NewProducer(Idempotent(tc.idempotent), BatchBytes(16<<10), Linger(20*time.Millisecond))
			require.NoError(t, err)
			produced := produceAll(t, ctx, p, "small", n)
			require.NoError(t, p.Close())
			st := fc.stats("small")
			require.Positive(t, st.tooLarge, "batches were refused as too large")
			require.LessOrEqual(t, st.largest, limit)
			got := consumeAll(t, ctx, c, "small", n)
			checkExactlyOnce(t, produced, got, 1, true)
			if tc.idempotent {
				for i, r := range got {
					require.Equal(t, "key-"+strconv.Itoa(i), string(r.Key), "records keep the order they were produced in")
				}
			}
			if tc.refusals > 0 {
				require.LessOrEqual(t, st.tooLarge, tc.refusals, "later batches are sealed within the limit")
			}
		})
	}
}

// A record larger than max.message.bytes alone fails with
// MESSAGE_TOO_LARGE; the records batched with it still arrive.
func TestProduceFailsARecordLargerThanTheTopicAllows(t *testing.T) {
	fc, c := setup(t)
	ctx := testContext(t, 20*time.Second)
	require.NoError(t, fc.createTopic("small", 1))
	fc.setFaults(faults{maxMessageBytes: 2000})
	p, err := c.NewProducer(Linger(50 * time.Millisecond))
	require.NoError(t, err)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	wg.Add(len(errs))
	for i, size := range []int{100, 5000, 100} {
		r := &Record{Topic: "small", Key: []byte("key-" + strconv.Itoa(i)), Value: make([]byte, size)}
		p.Produce(ctx, r, func(_ *Record, err error) {
			errs[i] = err
			wg.Done()
		})
	}
	require.NoError(t, p.Flush(ctx))
	wg.Wait()
	require.NoError(t, p.Close())
	require.NoError(t, errs[0])
	var cerr *Error
	require.ErrorAs(t, errs[1], &cerr)
	require.Equal(t, messages.ErrorCode_MESSAGE_TOO_LARGE, cerr.Code)
	require.NoError(t, errs[2])
	got := consumeAll(t, ctx, c, "small", 2)
	require.Equal(t, "key-0", string(got[0].Key))
	require.Equal(t, "key-2", string(got[1].Key))
}

// With one request in flight, no later answer stands for a lost one: each
// is resent, and the partition recognises the resend as a duplicate.
func TestProduceResendsRecognisedAsDuplicates(t *testing.T) {
	fc, c := setup(t)
	ctx := testContext(t, 20*time.Second)
	require.NoError(t, fc.createTopic("resent", 1))
	fc.setFaults(faults{loseAnswerEvery: 4})
	p, err := c.NewProducer(BatchBytes(4<<10), MaxInFlightPerPartition(1), ProducerRequestTimeout(100*time.Millisecond), RetryBackoff(time.Millisecond))
	require.NoError(t, err)
	produced := produceAll(t, ctx, p, "resent", 2000)
	require.NoError(t, p.Close())
	st := fc.stats("resent")
	require.Positive(t, st.unanswered)
	require.GreaterOrEqual(t, st.duplicates, st.unanswered, "every lost answer was followed by a resend recognised as a duplicate")
	got := consumeAll(t, ctx, c, "resent", 2000)
	checkExactlyOnce(t, produced, got, 1, true)
}

// Without idempotence a lost answer duplicates records: the test above is
// therefore not vacuous.
func TestProduceWithoutIdempotenceDuplicates(t *testing.T) {
	fc, c := setup(t)
	ctx := testContext(t, 20*time.Second)
	require.NoError(t, fc.createTopic("dups", 1))
	fc.setFaults(faults{loseAnswerEvery: 3})
	p, err := c.NewProducer(Idempotent(false), BatchBytes(4<<10), ProducerRequestTimeout(100*time.Millisecond), RetryBackoff(time.Millisecond))
	require.NoError(t, err)
	produceAll(t, ctx, p, "dups", 2000)
	require.NoError(t, p.Close())
	status, err := c.PartitionStatus(ctx, "dups", 0)
	require.NoError(t, err)
	require.Greater(t, status.GetLogEndOffset(), int64(2000))
}

// Produce blocks at MaxBufferedBytes while a slow partition holds answers.
func TestProduceBackPressure(t *testing.T) {
	const bound = 256 << 10
	fc, c := setup(t)
	ctx := testContext(t, 30*time.Second)
	require.NoError(t, fc.createTopic("slow", 4))
	fc.setFaults(faults{produceDelay: 20 * time.Millisecond})
	p, err := c.NewProducer(MaxBufferedBytes(bound), BatchBytes(32<<10), Linger(time.Millisecond))
	require.NoError(t, err)
	var peak atomic.Int64
	observe := func() {
		b := p.BufferedBytes()
		for {
			old := peak.Load()
			if b <= old || peak.CompareAndSwap(old, b) {
				return
			}
		}
	}
	value := make([]byte, 1024)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 3000 {
				r := &Record{Topic: "slow", Key: []byte(fmt.Sprintf("%d-%d", g, i)), Value: value}
				p.Produce(ctx, r, func(_ *Record, err error) {
					if err != nil {
						failed.Add(1)
					}
					observe()
				})
				observe()
			}
		}()
	}
	wg.Wait()
	require.NoError(t, p.Close())
	require.Zero(t, failed.Load())
	require.LessOrEqual(t, peak.Load(), int64(bound))
	require.Greater(t, peak.Load(), int64(bound/2), "the bound was never approached")

	// A blocked Produce gives up when its context ends.
	fc.setFaults(faults{dropProduceEvery: 1})
	p, err = c.NewProducer(MaxBufferedBytes(4096), Linger(0), ProducerRequestTimeout(time.Hour))
	require.NoError(t, err)
	p.Produce(ctx, &Record{Topic: "slow", Value: make([]byte, 3000)}, nil)
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	var got error
	p.Produce(short, &Record{Topic: "slow", Value: make([]byte, 3000)}, func(_ *Record, err error) { got = err })
	require.ErrorIs(t, got, context.DeadlineExceeded)
}

// Batches that reach the sender together go to their node in one
// request: with its mailbox held, the first batches of 50 partitions of a
// producer that does not linger (each sealed as its record comes, its
// partition having nothing outstanding) queue up in it, one message each,
// and are sent in one ProduceRequests (two if a tick comes between them)
// rather than 50.
func TestBatchesQueuedTogetherGoInOneRequest(t *testing.T) {
	const n = 50
	fc, c := setup(t)
	ctx := testContext(t, 30*time.Second)
	require.NoError(t, fc.createTopic("many", n))
	p, err := c.NewProducer(Linger(0))
	require.NoError(t, err)
	defer p.Close()
	keys := make([][]byte, n)
	for i, found := 0, 0; found < n; i++ {
		k := []byte(strconv.Itoa(i))
		if part := KeyPartition(k, n); keys[part] == nil {
			keys[part] = k
			found++
		}
	}
	require.NoError(t, p.ProduceSync(ctx, &Record{Topic: "many", Key: keys[0], Value: []byte("warm")}))
	before := fc.produceRequests.Load()

	mailbox, ok := c.System().ProcessRegistry.Get(p.sender)
	require.True(t, ok)
	mailbox.SendSystemMessage(p.sender, &actor.SuspendMailbox{})
	var wg sync.WaitGroup
	var failed atomic.Int32
	for _, k := range keys {
		wg.Add(1)
		p.Produce(ctx, &Record{Topic: "many", Key: k, Value: []byte("v")}, func(_ *Record, err error) {
			if err != nil {
				failed.Add(1)
			}
			wg.Done()
		})
	}
	mailbox.SendSystemMessage(p.sender, &actor.ResumeMailbox{})
	wg.Wait()
	require.Zero(t, failed.Load())
	require.LessOrEqual(t, fc.produceRequests.Load()-before, int32(2), "requests for %d partitions' batches", n)
}

// No more than MaxInFlightPerNode requests await their answers at a node:
// while they do, the batches ready meanwhile wait, and go together in the
// next request once one is answered.
func TestRequestsInFlightPerNodeAreBounded(t *testing.T) {
	const n, inFlight = 40, 2
	fc, c := setup(t)
	ctx := testContext(t, 30*time.Second)
	require.NoError(t, fc.createTopic("many", n))
	fc.setFaults(faults{holdProduce: 300 * time.Millisecond})
	p, err := c.NewProducer(MaxInFlightPerNode(inFlight), Linger(time.Millisecond))
	require.NoError(t, err)
	defer p.Close()
	// Half the records, then the other half once a request of the first
	// is held at the node: however the producer batched the first half,
	// the second goes while it waits.
	var first sync.WaitGroup
	var firstErr atomic.Value
	for i := range 1000 {
		first.Add(1)
		p.Produce(ctx, &Record{Topic: "many", Key: []byte("first-" + strconv.Itoa(i)), Value: []byte("v")}, func(_ *Record, err error) {
			if err != nil {
				firstErr.CompareAndSwap(nil, err)
			}
			first.Done()
		})
	}
	require.Eventually(t, func() bool { return fc.working.Load() > 0 }, 10*time.Second, time.Millisecond)
	produceAll(t, ctx, p, "many", 1000)
	first.Wait()
	require.Nil(t, firstErr.Load())
	require.LessOrEqual(t, fc.maxUnanswered.Load(), int32(inFlight))
	require.Equal(t, int32(inFlight), fc.maxUnanswered.Load(), "the bound was never reached")
	st := p.Stats()
	require.Equal(t, int64(fc.produceRequests.Load()), st.Requests)
	require.Equal(t, int64(fc.producePartitions.Load()), st.Batches)
	require.Greater(t, st.Batches, 2*st.Requests, "batches went together: %d in %d requests", st.Batches, st.Requests)
}

// The default buffer bound grows with the partitions written to, up to its
// limit; MaxBufferedBytes fixes it, and must be positive.
func TestDefaultBufferBoundGrowsWithPartitions(t *testing.T) {
	fc, c := setup(t)
	ctx := testContext(t, 10*time.Second)
	require.NoError(t, fc.createTopic("a", 3))
	require.NoError(t, fc.createTopic("b", 5))
	p, err := c.NewProducer()
	require.NoError(t, err)
	defer p.Close()
	require.Equal(t, int64(DefaultMaxBufferedBytes), p.BufferBound())
	require.NoError(t, p.ProduceSync(ctx, &Record{Topic: "a", Value: []byte("x")}))
	require.Equal(t, int64(DefaultMaxBufferedBytes+3*DefaultBufferedBytesPerPartition), p.BufferBound())
	require.NoError(t, p.ProduceSync(ctx, &Record{Topic: "b", Value: []byte("x")}))
	require.NoError(t, p.ProduceSync(ctx, &Record{Topic: "a", Value: []byte("y")}))
	require.Equal(t, int64(DefaultMaxBufferedBytes+8*DefaultBufferedBytesPerPartition), p.BufferBound(), "each topic counts once")
	require.Equal(t, int64(DefaultMaxBufferedBytesLimit), defaultBufferBound(1_000_000))
	require.Equal(t, int64(DefaultMaxBufferedBytesLimit), defaultBufferBound(24_576))
	require.Less(t, defaultBufferBound(24_575), int64(DefaultMaxBufferedBytesLimit))

	fixed, err := c.NewProducer(MaxBufferedBytes(1 << 20))
	require.NoError(t, err)
	defer fixed.Close()
	require.NoError(t, fixed.ProduceSync(ctx, &Record{Topic: "b", Value: []byte("x")}))
	require.Equal(t, int64(1<<20), fixed.BufferBound())

	_, err = c.NewProducer(MaxBufferedBytes(0))
	require.Error(t, err)
}

func TestUnknownTopic(t *testing.T) {
	fc, c := setup(t)
	ctx := testContext(t, 10*time.Second)
	p, err := c.NewProducer()
	require.NoError(t, err)
	defer p.Close()
	err = p.ProduceSync(ctx, &Record{Topic: "missing", Value: []byte("x")})
	require.ErrorIs(t, err, ErrUnknownTopic)
	var ce *Error
	require.ErrorAs(t, err, &ce)
	require.NotErrorIs(t, err, ErrNotLeader)

	_, err = c.ListOffset(ctx, "missing", 0, LatestOffset)
	require.ErrorIs(t, err, ErrUnknownTopic)

	cons, err := c.NewConsumer()
	require.NoError(t, err)
	defer cons.Close()
	cons.AssignTopic("missing", AtStart())
	_, err = cons.Poll(ctx)
	require.ErrorIs(t, err, ErrUnknownTopic)

	require.NoError(t, fc.createTopic("present", 1))
	_, err = c.CreateTopic(ctx, "present", 1, nil)
	require.ErrorIs(t, err, ErrTopicAlreadyExists)
	require.NoError(t, c.DeleteTopic(ctx, "present"))
	require.ErrorIs(t, c.DeleteTopic(ctx, "present"), ErrUnknownTopic)
}

func TestNodeUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())

	c, err := New(Brokers(addr), FirstContactTimeout(time.Second))
	require.NoError(t, err)
	defer c.Close()
	start := time.Now()
	_, err = c.Metadata(context.Background())
	require.Less(t, time.Since(start), 5*time.Second)
	require.ErrorIs(t, err, ErrUnreachable)
	require.Equal(t, "client: node unreachable: "+addr, err.Error())

	_, err = c.NewProducer()
	require.ErrorIs(t, err, ErrUnreachable)
}

// lateContext has a deadline but does not yet say it passed, as a context
// whose timer has not fired yet.
type lateContext struct {
	context.Context
	deadline time.Time
}

func (l lateContext) Deadline() (time.Time, bool) { return l.deadline, true }

// A request cut short by the caller's deadline ends with the caller's
// context.DeadlineExceeded, also when the request's timer fires before the
// context's: a Poll whose context ends while it resolves an offset returns
// its deadline, not ErrTimeout. A request's own timeout is ErrTimeout.
func TestRequestEndsWithTheCallersDeadline(t *testing.T) {
	_, c := setup(t)
	silent := c.root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	ctx := lateContext{Context: context.Background(), deadline: time.Now().Add(20 * time.Millisecond)}
	_, err := c.request(ctx, silent, &messages.ListOffsetsRequest{}, time.Minute)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, ErrTimeout)

	_, err = c.request(context.Background(), silent, &messages.ListOffsetsRequest{}, 20*time.Millisecond)
	require.ErrorIs(t, err, ErrTimeout)
}

// A client in its own actor system reaches a node's actors over remote.
func TestAcrossTwoActorSystems(t *testing.T) {
	server := newRemoteSystem(t)
	fc := newFakeCluster(t, server)
	c, err := New(Brokers(server.Address()))
	require.NoError(t, err)
	defer c.Close()
	require.NotEqual(t, server.Address(), c.System().Address())
	ctx := testContext(t, 30*time.Second)

	_, err = c.CreateTopic(ctx, "remote", 3, nil)
	require.NoError(t, err)
	md, err := c.Metadata(ctx)
	require.NoError(t, err)
	require.Len(t, md.GetTopics(), 1)

	fc.setFaults(faults{loseAnswerEvery: 9})
	p, err := c.NewProducer(BatchBytes(8<<10), ProducerRequestTimeout(300*time.Millisecond), RetryBackoff(10*time.Millisecond))
	require.NoError(t, err)
	produced := produceAll(t, ctx, p, "remote", 5000)
	require.NoError(t, p.Close())
	got := consumeAll(t, ctx, c, "remote", 5000, PartitionMaxBytes(16<<10))
	checkExactlyOnce(t, produced, got, 3, true)

	end, err := c.ListOffset(ctx, "remote", 0, LatestOffset)
	require.NoError(t, err)
	status, err := c.PartitionStatus(ctx, "remote", 0)
	require.NoError(t, err)
	require.Equal(t, status.GetLogEndOffset(), end)
}

func TestConsumerStartingOffsets(t *testing.T) {
	_, c, p, ctx := setupTopic(t, 20*time.Second, WithPartitioner(ManualPartitioner()), Linger(time.Hour))
	defer p.Close()
	base := time.UnixMilli(1_700_000_000_000)
	var rs []*Record
	for i := range 100 {
		rs = append(rs, &Record{Topic: "t", Partition: 0, Timestamp: base.Add(time.Duration(i) * time.Second), Value: []byte{byte(i)}})
	}
	require.NoError(t, p.ProduceSync(ctx, rs[:50]...)) // one batch: Flush below
	require.NoError(t, p.ProduceSync(ctx, rs[50:]...))

	first := func(at Offset, opts ...ConsumerOpt) (*Record, error) {
		cons, err := c.NewConsumer(opts...)
		require.NoError(t, err)
		defer cons.Close()
		cons.Assign("t", 0, at)
		got, err := cons.Poll(ctx)
		if err != nil {
			return nil, err
		}
		return got[0], nil
	}
	tests := []struct {
		name string
		at   Offset
		want int64
	}{
		{"start", AtStart(), 0},
		{"offset inside a batch", AtOffset(17), 17},
		{"offset in the second batch", AtOffset(73), 73},
		{"timestamp", AtTimestamp(base.Add(42 * time.Second)), 42},
		{"timestamp between records", AtTimestamp(base.Add(42*time.Second + time.Millisecond)), 43},
		{"out of range resets to earliest", AtOffset(1000), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := first(tt.at)
			require.NoError(t, err)
			require.Equal(t, tt.want, r.Offset)
			require.Equal(t, []byte{byte(tt.want)}, r.Value)
		})
	}

	t.Run("out of range without reset", func(t *testing.T) {
		_, err := first(AtOffset(1000), Reset(ResetNone))
		require.ErrorIs(t, err, ErrOffsetOutOfRange)
	})
	t.Run("end waits for new records", func(t *testing.T) {
		cons, err := c.NewConsumer(FetchMaxWait(20 * time.Millisecond))
		require.NoError(t, err)
		defer cons.Close()
		cons.Assign("t", 0, AtEnd())
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		_, err = cons.Poll(short)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		late := &Record{Topic: "t", Partition: 0, Value: []byte("late")}
		require.NoError(t, p.ProduceSync(ctx, late))
		got, err := cons.Poll(ctx)
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, int64(100), got[0].Offset)
		require.Equal(t, "late", string(got[0].Value))
	})
	t.Run("timestamp past the end", func(t *testing.T) {
		off, err := c.ListOffset(ctx, "t", 0, time.Now().Add(time.Hour).UnixMilli())
		require.NoError(t, err)
		require.Equal(t, int64(-1), off)
	})
}

// A partition that cannot be read is retried, and each failure is told to
// OnFetchError with the broker's error, while resolving the start offset
// and while fetching; once it can be read again, its records come.
func TestConsumerTellsOfUnavailablePartitions(t *testing.T) {
	fc, c, p, ctx := setupTopic(t, 20*time.Second)
	defer p.Close()
	require.NoError(t, p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("first")}))

	errs := make(chan FetchError, 1024)
	cons, err := c.NewConsumer(ConsumerRetryBackoff(10*time.Millisecond), OnFetchError(func(e FetchError) {
		select {
		case errs <- e:
		default:
		}
	}))
	require.NoError(t, err)
	defer cons.Close()
	expect := func(offset int64) {
		t.Helper()
		for range 2 { // the same failure again, after the backoff
			select {
			case e := <-errs:
				require.Equal(t, FetchError{Topic: "t", Partition: 0, Offset: offset, Err: e.Err}, e)
				require.ErrorIs(t, e.Err, ErrKafkaStorageError)
				require.EqualError(t, e.Err, "partition t-0 is offline: disk failed")
			case <-ctx.Done():
				t.Fatal("no fetch error told")
			}
		}
	}

	fc.setFaults(faults{unavailable: messages.ErrorCode_KAFKA_STORAGE_ERROR})
	cons.Assign("t", 0, AtStart())
	expect(-1)
	fc.setFaults(faults{})
	got, err := cons.Poll(ctx)
	require.NoError(t, err)
	require.Equal(t, "first", string(got[0].Value))

	fc.setFaults(faults{unavailable: messages.ErrorCode_KAFKA_STORAGE_ERROR})
	for len(errs) > 0 {
		<-errs
	}
	expect(1)
	fc.setFaults(faults{})
	require.NoError(t, p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("second")}))
	got, err = cons.Poll(ctx)
	require.NoError(t, err)
	require.Equal(t, "second", string(got[0].Value))
}

// An offset past the end of the log moves by the reset policy, one below
// the log start to the log start whatever the policy, and the consumer
// tells of each move.
func TestConsumerOffsetOutOfRange(t *testing.T) {
	fc, c := setup(t)
	ctx := testContext(t, 20*time.Second)
	p, err := c.NewProducer(WithPartitioner(ManualPartitioner()))
	require.NoError(t, err)
	defer p.Close()
	tests := []struct {
		name   string
		at     int64
		policy ResetPolicy
		// want is the first offset read, -1 for none: Poll fails.
		want int64
	}{
		{"past the end, earliest", 1000, ResetEarliest, 0},
		{"past the end, latest", 1000, ResetLatest, 10},
		{"past the end, none", 1000, ResetNone, -1},
		{"below the log start, latest", -3, ResetLatest, 0},
		{"below the log start, none", -3, ResetNone, 0},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topic := fmt.Sprintf("t%d", i)
			require.NoError(t, fc.createTopic(topic, 1))
			for j := range 10 {
				require.NoError(t, p.ProduceSync(ctx, &Record{Topic: topic, Value: []byte{byte(j)}}))
			}
			resets := make(chan OffsetReset, 1)
			cons, err := c.NewConsumer(Reset(tt.policy), OnOffsetReset(func(r OffsetReset) { resets <- r }))
			require.NoError(t, err)
			defer cons.Close()
			cons.Assign(topic, 0, AtOffset(tt.at))
			if tt.want < 0 {
				_, err := cons.Poll(ctx)
				require.ErrorIs(t, err, ErrOffsetOutOfRange)
				require.Empty(t, resets)
				return
			}
			r := <-resets
			require.Equal(t, OffsetReset{Topic: topic, Partition: 0, From: tt.at, To: tt.want, LogStartOffset: 0, HighWatermark: 10, Policy: tt.policy}, r)
			require.Equal(t, tt.at < 0, r.BelowLogStart())
			if tt.want == 10 {
				require.NoError(t, p.ProduceSync(ctx, &Record{Topic: topic, Value: []byte{10}}))
			}
			got, err := cons.Poll(ctx)
			require.NoError(t, err)
			require.Equal(t, tt.want, got[0].Offset)
			require.Equal(t, []byte{byte(tt.want)}, got[0].Value)
		})
	}
}

func TestParseResetPolicy(t *testing.T) {
	for _, p := range []ResetPolicy{ResetEarliest, ResetLatest, ResetNone} {
		got, err := ParseResetPolicy(p.String())
		require.NoError(t, err)
		require.Equal(t, p, got)
	}
	for _, bad := range []string{"", "start", "Latest", "smallest"} {
		_, err := ParseResetPolicy(bad)
		require.ErrorContains(t, err, "want earliest, latest or none", bad)
	}
}

func TestProducerOptionsAndClose(t *testing.T) {
	fc, c := setup(t)
	ctx := testContext(t, 10*time.Second)
	require.NoError(t, fc.createTopic("t", 2))

	for _, opts := range [][]ProducerOpt{
		{Acks(2)}, {BatchBytes(0)}, {MaxInFlightPerPartition(0)}, {MaxInFlightPerNode(0)}, {WithPartitioner(nil)},
		{MaxInFlightPerPartition(topic.ProducerBatchesKept + 1)}, // more than a partition can recognise resends of
	} {
		_, err := c.NewProducer(opts...)
		require.Error(t, err)
	}
	for _, opts := range [][]ProducerOpt{
		{MaxInFlightPerPartition(topic.ProducerBatchesKept)},
		{MaxInFlightPerPartition(topic.ProducerBatchesKept + 1), Idempotent(false)},
		{MaxInFlightPerPartition(topic.ProducerBatchesKept + 1), Acks(0)},
	} {
		p, err := c.NewProducer(opts...)
		require.NoError(t, err)
		require.NoError(t, p.Close())
	}

	p, err := c.NewProducer(WithPartitioner(ManualPartitioner()))
	require.NoError(t, err)
	// A panicking promise does not stop the producer.
	p.Produce(ctx, &Record{Topic: "t", Partition: 0}, func(*Record, error) { panic("promise bug") })
	require.NoError(t, p.ProduceSync(ctx, &Record{Topic: "t", Partition: 0}))
	err = p.ProduceSync(ctx, &Record{Topic: "t", Partition: 2})
	require.ErrorIs(t, err, ErrBadPartition)
	require.NoError(t, p.ProduceSync(ctx, &Record{Topic: "t", Partition: 1, Value: []byte("one")}))
	require.NoError(t, p.Close())
	require.ErrorIs(t, p.ProduceSync(ctx, &Record{Topic: "t", Partition: 1}), ErrClosed)

	p, err = c.NewProducer(Compression(wire.CompressionZstd), WithPartitioner(ManualPartitioner()))
	require.NoError(t, err)
	rs := make([]*Record, 500)
	for i := range rs {
		rs[i] = &Record{Topic: "t", Partition: 0, Key: []byte(strconv.Itoa(i)), Value: []byte("compressible compressible compressible")}
	}
	require.NoError(t, p.ProduceSync(ctx, rs...))
	require.NoError(t, p.Close())
	cons, err := c.NewConsumer()
	require.NoError(t, err)
	defer cons.Close()
	cons.Assign("t", 0, AtOffset(2))
	var got []*Record
	for len(got) < len(rs) {
		more, err := cons.Poll(ctx)
		require.NoError(t, err)
		got = append(got, more...)
	}
	for i, r := range got {
		require.Equal(t, int64(i+2), r.Offset) // after the two records above
		require.Equal(t, strconv.Itoa(i), string(r.Key))
	}
	cons.Close()
	_, err = cons.Poll(ctx)
	require.ErrorIs(t, err, ErrClosed)
}

func TestErrorIs(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", &Error{Code: ErrUnknownTopic.Code, Message: `topic "x" does not exist`})
	require.ErrorIs(t, err, ErrUnknownTopic)
	require.NotErrorIs(t, err, ErrNotLeader)
	require.False(t, errors.Is(ErrClosed, ErrUnknownTopic))
	var coded *Error
	require.ErrorAs(t, err, &coded)
	require.Equal(t, messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, coded.Code, "the code stays for callers that branch on it")
	require.Equal(t, `topic "x" does not exist`, coded.Error(), "the message alone, when the broker gave one")
	require.Equal(t, "UNKNOWN_TOPIC_OR_PARTITION", ErrUnknownTopic.Error(), "the code's name, when it gave none")
}

// BenchmarkProduce produces 1 KiB records into a fake that acks at once.
func BenchmarkProduce(b *testing.B) {
	for _, acks := range []int{-1, 0} {
		b.Run(fmt.Sprintf("acks=%d", acks), func(b *testing.B) {
			sys := actor.NewActorSystem()
			defer sys.Shutdown()
			fc := newFakeCluster(b, sys)
			c, err := New(ActorSystem(sys, nil), Brokers(sys.Address()))
			require.NoError(b, err)
			defer c.Close()
			require.NoError(b, fc.createTopic("bench", 4))
			fc.setFaults(faults{discard: true})
			p, err := c.NewProducer(Acks(acks))
			require.NoError(b, err)
			ctx := context.Background()
			value := make([]byte, 1024)
			// More records than MaxBufferedBytes holds, so none is reused
			// while still pending.
			records := make([]Record, 1<<17)
			for i := range records {
				records[i] = Record{Topic: "bench", Value: value}
			}
			b.SetBytes(int64(len(value)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r := &records[i%len(records)]
				r.Timestamp = time.Time{}
				p.Produce(ctx, r, nil)
			}
			require.NoError(b, p.Flush(ctx))
			b.StopTimer()
			require.NoError(b, p.Close())
		})
	}
}

// When a partition's leader moves, producer and consumer refresh metadata
// and carry on, each record once.
func TestLeaderMoves(t *testing.T) {
	const n = 6000
	fc, c := setup(t)
	ctx := testContext(t, 30*time.Second)
	require.NoError(t, fc.createTopic("moving", 2))
	p, err := c.NewProducer(BatchBytes(4<<10), RetryBackoff(5*time.Millisecond))
	require.NoError(t, err)
	cons, err := c.NewConsumer(ConsumerRetryBackoff(5*time.Millisecond), PartitionMaxBytes(8<<10))
	require.NoError(t, err)
	defer cons.Close()
	cons.AssignTopic("moving", AtStart())

	var produced, got []*Record
	for round := range 3 {
		rs := make([]*Record, n/3)
		for i := range rs {
			k := strconv.Itoa(round*len(rs) + i)
			rs[i] = &Record{Topic: "moving", Key: []byte("key-" + k), Value: []byte("value-" + k)}
		}
		require.NoError(t, p.ProduceSync(ctx, rs...))
		produced = append(produced, rs...)
		for len(got) < len(produced)/2 {
			more, err := cons.Poll(ctx)
			require.NoError(t, err)
			got = append(got, more...)
		}
		require.NoError(t, fc.moveLeader("moving", 0))
		require.NoError(t, fc.moveLeader("moving", 1))
	}
	require.NoError(t, p.Close())
	for len(got) < n {
		more, err := cons.Poll(ctx)
		require.NoError(t, err)
		got = append(got, more...)
	}
	checkExactlyOnce(t, produced, got, 2, true)
	require.Positive(t, fc.stats("moving").notLeader)
	status, err := c.PartitionStatus(ctx, "moving", 1)
	require.NoError(t, err)
	require.Positive(t, status.GetLogEndOffset())
}

// A new leader that lacks records its partition acknowledged at acks=1
// refuses the producer's next sequence as out of order: the producer goes
// on under the next producer epoch from sequence 0, at once, instead of
// resending until the delivery timeout, and writes nothing twice.
func TestProducerGoesOnAfterAcknowledgedRecordsLost(t *testing.T) {
	fc, c := setup(t)
	ctx := testContext(t, 20*time.Second)
	require.NoError(t, fc.createTopic("lossy", 1))
	p, err := c.NewProducer(Acks(1), RetryBackoff(5*time.Millisecond), DeliveryTimeout(10*time.Second))
	require.NoError(t, err)
	defer p.Close()
	produce := func(v string) *Record {
		r := &Record{Topic: "lossy", Value: []byte(v)}
		require.NoError(t, p.ProduceSync(ctx, r), v)
		return r
	}
	for _, v := range []string{"kept", "lost-1", "lost-2"} {
		produce(v)
	}
	require.NoError(t, fc.loseTail("lossy", 0, 2))
	start := time.Now()
	after := produce("after")
	require.Equal(t, int64(1), after.Offset, "the first record after the loss follows what the new leader holds")
	require.Less(t, time.Since(start), 5*time.Second, "went on without waiting for the delivery timeout")
	require.Equal(t, int64(2), produce("next").Offset)

	part := fc.partition("lossy", 0)
	part.mu.Lock()
	defer part.mu.Unlock()
	var values []string
	var epochs []int16
	for _, b := range part.batches {
		h, err := wire.Validate(b)
		require.NoError(t, err)
		epochs = append(epochs, h.ProducerEpoch)
		require.NoError(t, wire.Records(b, func(r wire.Record) error {
			values = append(values, string(r.Value))
			return nil
		}))
	}
	require.Equal(t, []string{"kept", "after", "next"}, values)
	require.Equal(t, epochs[0]+1, epochs[1], "a new epoch after the loss")
	require.Equal(t, epochs[1], epochs[2])
}

// A batch no partition answers fails after DeliveryTimeout, and the
// buffer is released.
func TestDeliveryTimeout(t *testing.T) {
	fc, c := setup(t)
	ctx := testContext(t, 10*time.Second)
	require.NoError(t, fc.createTopic("void", 1))
	fc.setFaults(faults{dropProduceEvery: 1})
	p, err := c.NewProducer(DeliveryTimeout(300*time.Millisecond), ProducerRequestTimeout(50*time.Millisecond), RetryBackoff(10*time.Millisecond))
	require.NoError(t, err)
	start := time.Now()
	err = p.ProduceSync(ctx, &Record{Topic: "void", Value: []byte("lost")})
	require.ErrorIs(t, err, ErrDeliveryTimeout)
	require.ErrorIs(t, err, ErrTimeout)
	require.Less(t, time.Since(start), 3*time.Second)
	require.Zero(t, p.BufferedBytes())
	require.Positive(t, fc.stats("void").dropped)

	// The lost batch left a gap in the sequence: the next one is
	// renumbered and lands.
	fc.setFaults(faults{})
	first := &Record{Topic: "void", Value: []byte("first")}
	require.NoError(t, p.ProduceSync(ctx, first))
	require.Equal(t, int64(0), first.Offset)
	// A batch whose answers were lost is in the log: the next one follows
	// it without renumbering.
	fc.setFaults(faults{loseAnswerEvery: 1})
	require.ErrorIs(t, p.ProduceSync(ctx, &Record{Topic: "void", Value: []byte("second")}), ErrDeliveryTimeout)
	fc.setFaults(faults{})
	third := &Record{Topic: "void", Value: []byte("third")}
	require.NoError(t, p.ProduceSync(ctx, third))
	require.Equal(t, int64(2), third.Offset)
	require.Positive(t, fc.stats("void").duplicates, "resends of the second batch were recognised")

	fc.setFaults(faults{dropProduceEvery: 1})
	p2, err := c.NewProducer(Retries(2), ProducerRequestTimeout(50*time.Millisecond), RetryBackoff(time.Millisecond))
	require.NoError(t, err)
	err = p2.ProduceSync(ctx, &Record{Topic: "void", Value: []byte("lost")})
	require.ErrorIs(t, err, ErrTimeout)
	require.NotErrorIs(t, err, ErrDeliveryTimeout)
	require.NoError(t, p.Close())
	require.NoError(t, p2.Close())
}

// A request is never waited for past its records' delivery timeout: a
// request timeout longer than it does not hold the failure back, and the
// partition is asked to answer within the time left.
func TestDeliveryTimeoutCutsTheRequestShort(t *testing.T) {
	fc, c := setup(t)
	ctx := testContext(t, 10*time.Second)
	require.NoError(t, fc.createTopic("void", 1))
	fc.setFaults(faults{dropProduceEvery: 1})
	p, err := c.NewProducer(DeliveryTimeout(300*time.Millisecond), ProducerRequestTimeout(20*time.Second))
	require.NoError(t, err)
	defer p.Close()
	start := time.Now()
	err = p.ProduceSync(ctx, &Record{Topic: "void", Value: []byte("lost")})
	require.ErrorIs(t, err, ErrDeliveryTimeout)
	require.Less(t, time.Since(start), 3*time.Second, "failed at the delivery timeout, not the request timeout")
	require.Zero(t, p.BufferedBytes())
	st := fc.stats("void")
	require.Positive(t, st.dropped)
	require.Positive(t, st.maxTimeoutMs)
	require.LessOrEqual(t, st.maxTimeoutMs, int32(300))
}

// Shutdown with an ended context gives up on the records not acknowledged
// at once, and every promise has been called when it returns.
func TestShutdownGivesUpOnUnacknowledgedRecords(t *testing.T) {
	fc, c, p, ctx := setupTopic(t, 10*time.Second)
	acked := &Record{Topic: "t", Value: []byte("acked")}
	require.NoError(t, p.ProduceSync(ctx, acked))

	fc.setFaults(faults{dropProduceEvery: 1})
	var failed atomic.Int32
	const n = 100
	for i := range n {
		p.Produce(ctx, &Record{Topic: "t", Value: fmt.Appendf(nil, "lost-%d", i)}, func(_ *Record, err error) {
			if errors.Is(err, ErrClosed) {
				failed.Add(1)
			}
		})
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	start := time.Now()
	require.ErrorIs(t, p.Shutdown(ended), context.Canceled)
	require.Less(t, time.Since(start), 3*time.Second, "no wait for the delivery timeout of two minutes")
	require.Equal(t, int32(n), failed.Load())
	require.Zero(t, p.BufferedBytes())
	require.NoError(t, p.Shutdown(ctx), "shut down already")
	require.NoError(t, p.Close())
	late := make(chan error, 1)
	p.Produce(ctx, &Record{Topic: "t", Value: []byte("late")}, func(_ *Record, err error) { late <- err })
	require.ErrorIs(t, <-late, ErrClosed)

	// With nothing outstanding, an ended context is no error.
	p2, err := c.NewProducer()
	require.NoError(t, err)
	fc.setFaults(faults{})
	require.NoError(t, p2.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("x")}))
	require.NoError(t, p2.Shutdown(ended))
}

// BenchmarkProduceRemote produces 1 KiB records from a client in its own
// actor system to a fake node in another, over remote on loopback.
func BenchmarkProduceRemote(b *testing.B) {
	server := actor.NewActorSystem()
	r := remote.NewRemote(server, depotremote.NewTransport().Config("127.0.0.1", 0, logrus.NewEntry(logrus.StandardLogger())))
	r.Start()
	defer func() {
		r.Shutdown(false)
		server.Shutdown()
	}()
	fc := newFakeCluster(b, server)
	require.NoError(b, fc.createTopic("bench", 4))
	fc.setFaults(faults{discard: true})
	c, err := New(Brokers(server.Address()))
	require.NoError(b, err)
	defer c.Close()
	p, err := c.NewProducer()
	require.NoError(b, err)
	ctx := context.Background()
	value := make([]byte, 1024)
	records := make([]Record, 1<<17)
	for i := range records {
		records[i] = Record{Topic: "bench", Value: value}
	}
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := &records[i%len(records)]
		r.Timestamp = time.Time{}
		p.Produce(ctx, r, nil)
	}
	require.NoError(b, p.Flush(ctx))
	b.StopTimer()
	require.NoError(b, p.Close())
}

func TestParseAcks(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{"0", 0},
		{"1", 1},
		{"-1", -1},
		{"all", -1},
		{"ALL", -1},
		{" all ", -1},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseAcks(tt.in)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
	for _, in := range []string{"2", "-2", "", "none", "acks=all", "1.0"} {
		t.Run("bad "+in, func(t *testing.T) {
			_, err := ParseAcks(in)
			require.ErrorContains(t, err, "want 0, 1, -1 or all")
		})
	}
}

func TestFormatAcks(t *testing.T) {
	for acks, want := range map[int]string{0: "0", 1: "1", -1: "all"} {
		require.Equal(t, want, FormatAcks(acks))
		got, err := ParseAcks(want)
		require.NoError(t, err)
		require.Equal(t, acks, got)
	}
}

// The codes of replication are retriable; those that say the client's
// routing or leader epoch is stale make it refresh its metadata first.
func TestReplicationCodes(t *testing.T) {
	for _, tc := range []struct {
		code          messages.ErrorCode
		sentinel      error
		needsMetadata bool
	}{
		{messages.ErrorCode_NOT_ENOUGH_REPLICAS, ErrNotEnoughReplicas, false},
		{messages.ErrorCode_NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrNotEnoughReplicasAfterAppend, false},
		{messages.ErrorCode_FENCED_LEADER_EPOCH, ErrFencedLeaderEpoch, true},
		{messages.ErrorCode_UNKNOWN_LEADER_EPOCH, ErrUnknownLeaderEpoch, true},
		{messages.ErrorCode_LEADER_NOT_AVAILABLE, ErrLeaderNotAvailable, true},
	} {
		t.Run(tc.code.String(), func(t *testing.T) {
			require.True(t, retriable(tc.code))
			require.Equal(t, tc.needsMetadata, needsMetadata(tc.code))
			require.ErrorIs(t, codeError(tc.code, "detail"), tc.sentinel)
		})
	}
}

// A produce refused with a replication code is sent again until it is
// taken, each record once and in order: NOT_ENOUGH_REPLICAS (nothing
// written), NOT_ENOUGH_REPLICAS_AFTER_APPEND (written, and recognised when
// sent again), and, after a metadata refresh, FENCED_LEADER_EPOCH,
// UNKNOWN_LEADER_EPOCH and LEADER_NOT_AVAILABLE.
func TestProduceRetriesReplicationCodes(t *testing.T) {
	for _, tc := range []struct {
		code          messages.ErrorCode
		written       bool
		needsMetadata bool
	}{
		{messages.ErrorCode_NOT_ENOUGH_REPLICAS, false, false},
		{messages.ErrorCode_NOT_ENOUGH_REPLICAS_AFTER_APPEND, true, false},
		{messages.ErrorCode_FENCED_LEADER_EPOCH, false, true},
		{messages.ErrorCode_UNKNOWN_LEADER_EPOCH, false, true},
		{messages.ErrorCode_LEADER_NOT_AVAILABLE, false, true},
	} {
		t.Run(tc.code.String(), func(t *testing.T) {
			fc, c, p, ctx := setupTopic(t, 20*time.Second, RetryBackoff(5*time.Millisecond), MaxInFlightPerPartition(1), BatchBytes(1<<10), Linger(0))
			defer p.Close()
			produced := numbered("t", 0, 20)
			require.NoError(t, p.ProduceSync(ctx, produced[:10]...))
			asked := fc.metadataRequests.Load()
			fc.refuseProduces(tc.code, tc.code)
			require.NoError(t, p.ProduceSync(ctx, produced[10:]...))
			st := fc.stats("t")
			require.Equal(t, 2, st.refused)
			if tc.written {
				require.Positive(t, st.duplicates, "the batch written was recognised when sent again")
			} else {
				require.Zero(t, st.duplicates)
			}
			if tc.needsMetadata {
				require.Greater(t, fc.metadataRequests.Load(), asked, "metadata refreshed")
			}
			requireProducedInOrder(t, produced)
			checkExactlyOnce(t, produced, consumeAll(t, ctx, c, "t", len(produced)), 1, true)
		})
	}
}

// A batch that lingers while its partition has MaxInFlightPerPartition
// batches outstanding keeps taking records until one is answered, rather
// than being sealed with the few records of one Linger to wait in the
// sender: with many partitions, that is what lets batches grow with load.
func TestProduceBatchGrowsWhileInFlightIsFull(t *testing.T) {
	for _, tc := range []struct {
		name     string
		inFlight int
	}{{"one in flight", 1}, {"two in flight", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			fc, c := setup(t)
			ctx := testContext(t, 20*time.Second)
			require.NoError(t, fc.createTopic("slow", 1))
			fc.setFaults(faults{produceDelay: 300 * time.Millisecond})
			p, err := c.NewProducer(Linger(time.Millisecond), MaxInFlightPerPartition(tc.inFlight), MaxInFlightPerNode(tc.inFlight))
			require.NoError(t, err)
			var acked sync.WaitGroup
			var failed atomic.Int64
			produce := func(i int) {
				acked.Add(1)
				p.Produce(ctx, &Record{Topic: "slow", Key: []byte("k"), Value: []byte(strconv.Itoa(i))}, func(_ *Record, err error) {
					if err != nil {
						failed.Add(1)
					}
					acked.Done()
				})
			}
			// Fill the partition's in-flight slots, one batch each.
			for i := range tc.inFlight {
				produce(i)
				time.Sleep(10 * time.Millisecond)
			}
			// Then 20 records spread over ten lingers, while every slot
			// waits for its answer.
			const later = 20
			for i := range later {
				produce(tc.inFlight + i)
				time.Sleep(time.Millisecond / 2)
			}
			acked.Wait()
			require.Zero(t, failed.Load())
			require.NoError(t, p.Close())
			st := fc.stats("slow")
			require.Equal(t, tc.inFlight+1, st.batches, "the later records went in one batch")
			got := consumeAll(t, ctx, c, "slow", tc.inFlight+later)
			for i, r := range got {
				require.Equal(t, strconv.Itoa(i), string(r.Value))
			}
		})
	}
}

// While a partition's node has no room for another batch, the partition's
// open batch is sealed at most once more and then keeps taking records
// until that batch is sent, rather than being sealed at each linger, a
// few records each, to wait in the producer behind the others.
func TestProduceBatchGrowsWhileItsNodeIsFull(t *testing.T) {
	fc, c := setup(t)
	ctx := testContext(t, 20*time.Second)
	require.NoError(t, fc.createTopic("slow", 1))
	fc.setFaults(faults{produceDelay: 300 * time.Millisecond})
	// One batch of 1 KiB fills the node's window.
	p, err := c.NewProducer(Linger(time.Millisecond), BatchBytes(1<<10), MaxInFlightPerNode(1), MaxInFlightPerPartition(5))
	require.NoError(t, err)
	var acked sync.WaitGroup
	var failed atomic.Int64
	produce := func(value string) {
		acked.Add(1)
		p.Produce(ctx, &Record{Topic: "slow", Key: []byte("k"), Value: []byte(value)}, func(_ *Record, err error) {
			if err != nil {
				failed.Add(1)
			}
			acked.Done()
		})
	}
	produce(strings.Repeat("x", 1000))
	time.Sleep(10 * time.Millisecond)
	// 20 records spread over ten lingers, while the first batch waits
	// for its answer and holds the node's window.
	const later = 20
	for i := range later {
		produce(strconv.Itoa(i))
		time.Sleep(time.Millisecond / 2)
	}
	acked.Wait()
	require.Zero(t, failed.Load())
	require.NoError(t, p.Close())
	require.Equal(t, 3, fc.stats("slow").batches, "the full batch, one sealed at its linger, then one of the records after it")
	got := consumeAll(t, ctx, c, "slow", 1+later)
	for i, r := range got[1:] {
		require.Equal(t, strconv.Itoa(i), string(r.Value))
	}
}

// A node that answers at first contact and then takes longer than the
// first-contact timeout over a request (a topic of many partitions) is
// waited for within the request timeout; one that takes longer still is
// reported as timed out, not unreachable.
func TestCreateTopicOnABusyNodeIsNotUnreachable(t *testing.T) {
	fc, c := setup(t, FirstContactTimeout(100*time.Millisecond), RequestTimeout(2*time.Second))
	ctx := testContext(t, 10*time.Second)
	fc.setFaults(faults{createDelay: 500 * time.Millisecond})
	_, err := c.CreateTopic(ctx, "busy", 3, nil)
	require.NoError(t, err)
	require.NotNil(t, fc.partition("busy", 2))

	fc.setFaults(faults{createDelay: 3 * time.Second})
	_, err = c.CreateTopic(ctx, "slower", 3, nil)
	require.ErrorIs(t, err, ErrTimeout)
	require.NotErrorIs(t, err, ErrUnreachable)
}

// A record goes at once, alone, only from a producer with nothing
// outstanding. While another partition's batch awaits its answer, a record
// to a partition with nothing outstanding waits out Linger, and the records
// produced meanwhile go with it: with many partitions the partitioner moves
// on to an idle one at nearly every batch, and sending each first record
// alone doubled the batches.
func TestOnlyAnIdleProducerSendsARecordAtOnce(t *testing.T) {
	const linger, answerDelay = 300 * time.Millisecond, 900 * time.Millisecond
	fc, c := setup(t)
	ctx := testContext(t, 20*time.Second)
	require.NoError(t, fc.createTopic("busy", 1))
	require.NoError(t, fc.createTopic("idle", 1))
	fc.setFaults(faults{produceDelay: answerDelay})
	p, err := c.NewProducer(Linger(linger))
	require.NoError(t, err)
	defer p.Close()
	var acked sync.WaitGroup
	produce := func(topic, value string) {
		acked.Add(1)
		p.Produce(ctx, &Record{Topic: topic, Value: []byte(value)}, func(_ *Record, err error) {
			assert.NoError(t, err)
			acked.Done()
		})
	}
	batches := func(topic string) func() bool {
		return func() bool { return fc.stats(topic).batches > 0 }
	}

	start := time.Now()
	produce("busy", "first")
	require.Eventually(t, batches("busy"), linger/2, time.Millisecond, "an idle producer's record goes at once")
	produce("idle", "a")
	produce("idle", "b")
	require.Never(t, batches("idle"), linger/2, time.Millisecond, "with a batch outstanding, the record waits out its linger")
	require.Eventually(t, batches("idle"), answerDelay/2, time.Millisecond, "sealed at its linger, before the outstanding batch is answered")
	require.Less(t, time.Since(start), answerDelay)
	acked.Wait()
	require.Equal(t, 1, fc.stats("idle").batches, "the records produced while it lingered went with it")

	// The sender counts a batch done after calling its records' promises.
	require.Eventually(t, func() bool { return p.outstanding.Load() == 0 }, 5*time.Second, time.Millisecond)
	produce("idle", "c")
	require.Eventually(t, func() bool { return fc.stats("idle").batches == 2 }, linger/2, time.Millisecond, "idle again, the producer sends at once")
	acked.Wait()
}

// A record sent at once, alone, because its partition had nothing
// outstanding, does not move the sticky partitioner on: the records after
// it stay on that partition, where they would make its next batch, until
// a batch's worth of bytes went there alone, and only then move on.
func TestStickyPartitionerStaysAfterARecordSentAtOnce(t *testing.T) {
	fc, c := setup(t)
	ctx := testContext(t, 20*time.Second)
	require.NoError(t, fc.createTopic("spread", 4))
	const batchBytes = 4 << 10
	p, err := c.NewProducer(BatchBytes(batchBytes))
	require.NoError(t, err)
	defer p.Close()
	value := make([]byte, 1000)
	var parts []int32
	for range 40 {
		r := &Record{Topic: "spread", Value: value}
		require.NoError(t, p.ProduceSync(ctx, r)) // answered before the next: each goes alone
		parts = append(parts, r.Partition)
	}
	var runs []int
	for i, part := range parts {
		if i == 0 || part != parts[i-1] {
			runs = append(runs, 0)
		}
		runs[len(runs)-1]++
	}
	// Four batches of one record and its framing pass 4 KiB.
	for i, n := range runs[:len(runs)-1] {
		require.Equal(t, 4, n, "run %d of %v", i, runs)
	}
	require.GreaterOrEqual(t, len(runs), 9, "the partitioner moves on: %v", parts)
}
