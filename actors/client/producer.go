package client

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/mem"

	"github.com/depot-dev/depot/actors/remote"
	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

// ProducerOpt configures a Producer.
type ProducerOpt func(*producerConfig)

type producerConfig struct {
	linger             time.Duration
	batchBytes         int
	acks               int32
	compression        wire.Compression
	maxBuffered        int64 // when maxBufferedSet; otherwise by partitions
	maxBufferedSet     bool
	requestTimeout     time.Duration
	retries            int
	retryBackoff       time.Duration
	deliveryTimeout    time.Duration
	maxInFlight        int
	maxInFlightPerNode int
	idempotent         bool
	partitioner        Partitioner
}

// Linger is how long a partition's batch waits for more records, while the
// producer has batches on their way, before it is sent. A producer with
// nothing outstanding sends a record at once (with Linger 0, so does a
// partition with nothing outstanding), and a batch that was waiting is
// sent as soon as its partition's last batch is answered, so batches grow
// with load and an idle producer's record does not wait. A batch that
// has lingered while MaxInFlightPerPartition batches are outstanding keeps
// taking records until one of them is answered. Default 5ms (Kafka's
// linger.ms default since 4.0).
func Linger(d time.Duration) ProducerOpt { return func(c *producerConfig) { c.linger = d } }

// BatchBytes is the size at which a partition's batch is sealed and sent.
// Default DefaultBatchBytes, 1 MiB: larger than Kafka's batch.size (16 KiB)
// and equal to franz-go's, because one actor message per batch is the unit
// of cost here and big batches buy throughput. A single record larger than
// this is sent in a batch of its own. A batch that its partition refuses as
// larger than the topic's max.message.bytes is batched again within that
// limit and sent in its place, and the partition's later batches are sealed
// within it; a record that alone exceeds it fails with MESSAGE_TOO_LARGE.
func BatchBytes(n int) ProducerOpt { return func(c *producerConfig) { c.batchBytes = n } }

// DefaultBatchBytes is the default of BatchBytes.
const DefaultBatchBytes = 1 << 20

// Acks is the acknowledgement asked of the partition: 0 none (a record's
// promise fires once its batch is sent, with offset -1), 1 the leader's
// write, -1 all in-sync replicas and an fsync. Default -1, as Kafka since 3.0.
func Acks(n int) ProducerOpt { return func(c *producerConfig) { c.acks = int32(n) } }

// ParseAcks parses an acks setting as Kafka's producers spell it: 0 (no
// answer waited for), 1 (the leader wrote it), -1 or all (every in-sync
// replica has it and the leader fsynced it), for Acks. Case and
// surrounding spaces are ignored; anything else is an error naming the four
// spellings.
func ParseAcks(s string) (int, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "0":
		return 0, nil
	case "1":
		return 1, nil
	case "-1", "all":
		return -1, nil
	}
	return 0, fmt.Errorf("client: acks %q: want 0, 1, -1 or all (all is -1)", s)
}

// FormatAcks is acks as Kafka's tools show it: 0, 1 or all.
func FormatAcks(acks int) string {
	if acks == -1 {
		return "all"
	}
	return strconv.Itoa(acks)
}

// Compression is the codec of produced batches. Default none.
func Compression(codec wire.Compression) ProducerOpt {
	return func(c *producerConfig) { c.compression = codec }
}

// DefaultMaxBufferedBytes is the least of MaxBufferedBytes's default:
// sixteen default batches, more than the requests in flight hold (five,
// or ten with acks=all), so that the next batches fill meanwhile. A larger
// buffer adds no throughput once the node is busy with a few partitions:
// at saturation it is always full, so each record waits in it longer, in
// memory that has gone cold by the time the batch is sent and its buffer
// reused. Four producers in one process at 64 MiB each wrote 8 partitions
// at 428k records/s of 1 KiB; at 16 MiB, 616k. One partition of 100 B
// records went from 3.3M records/s at 16 MiB to 3.1M at 32 MiB, its median
// ack from 27 ms to 65 ms.
const DefaultMaxBufferedBytes = 16 << 20

// DefaultBufferedBytesPerPartition is what MaxBufferedBytes's default
// grows by for each partition the producer writes to, up to
// DefaultMaxBufferedBytesLimit. With many partitions the buffer is what
// bounds a batch: 16 MiB over 10,000 partitions leaves a partition some 13
// records of 100 B, and a node's cost is per batch more than per record.
// With 2 KiB more a partition (36 MiB), 10,000 keyed partitions went from
// 208k-266k records/s to 277k-376k at acks=1, and from 120k-153k to
// 175k-218k at acks=all, the node's CPU per record down by a quarter.
const DefaultBufferedBytesPerPartition = 2 << 10

// DefaultMaxBufferedBytesLimit is the most MaxBufferedBytes's default grows
// to (at 24,576 partitions).
const DefaultMaxBufferedBytesLimit = 64 << 20

// MaxBufferedBytes bounds the bytes of records produced but not yet
// acknowledged, as Kafka's buffer.memory does. Produce blocks (until its
// context ends) while the bound is reached. Default:
// DefaultMaxBufferedBytes, and DefaultBufferedBytesPerPartition more for
// each partition of the topics produced to, up to
// DefaultMaxBufferedBytesLimit (see Producer.BufferBound).
func MaxBufferedBytes(n int64) ProducerOpt {
	return func(c *producerConfig) { c.maxBuffered, c.maxBufferedSet = n, true }
}

// ProducerRequestTimeout bounds each ProduceRequest, and never past its
// records' DeliveryTimeout: the partition is asked to answer within the
// shorter, and a batch not answered in time is sent again. Default: the
// client's RequestTimeout (30s).
func ProducerRequestTimeout(d time.Duration) ProducerOpt {
	return func(c *producerConfig) { c.requestTimeout = d }
}

// Retries bounds how many times a batch is sent again after a failure.
// Default effectively unlimited (math.MaxInt32), bounded by DeliveryTimeout.
func Retries(n int) ProducerOpt { return func(c *producerConfig) { c.retries = n } }

// RetryBackoff is the pause before a partition's batches are sent again
// after a failure. Default 100ms.
func RetryBackoff(d time.Duration) ProducerOpt { return func(c *producerConfig) { c.retryBackoff = d } }

// DeliveryTimeout bounds the time from a batch's sealing to its
// acknowledgement, retries included; records still unacknowledged then fail
// with ErrDeliveryTimeout. Default 2 minutes, as Kafka's delivery.timeout.ms.
func DeliveryTimeout(d time.Duration) ProducerOpt {
	return func(c *producerConfig) { c.deliveryTimeout = d }
}

// MaxInFlightPerPartition bounds the ProduceRequests awaiting an answer per
// partition: at most topic.ProducerBatchesKept (16) with idempotence, the
// batches a partition remembers to recognise a resend. Default 5, as
// Kafka's max.in.flight.requests.per.connection, or
// DefaultMaxInFlightAcksAll with Acks(-1).
func MaxInFlightPerPartition(n int) ProducerOpt {
	return func(c *producerConfig) { c.maxInFlight = n }
}

// DefaultMaxInFlightAcksAll is the default of both in-flight bounds with
// Acks(-1). Such a request waits at the node for the fsync of a group
// commit after its records are appended; it holds no records there, only
// its answer. Five requests of 1 MiB are all waiting for the fsync before
// the node can append more: one producer wrote 520k and 531k records/s of
// 1 KiB to one partition. With ten, the node appends the next ones while
// it syncs: 665k and 655k.
const DefaultMaxInFlightAcksAll = 10

// MaxInFlightPerNode bounds the ProduceRequests awaiting an answer per
// node to n, and their bytes, across its partitions, to about n batches of
// BatchBytes: a batch is sent while less than that is in flight, so the
// last one sent may cross it, and joins the request being made, or makes
// one while fewer than n are unanswered. The batches beyond wait in the
// producer, whose buffer bound holds them back, rather than in the node's
// queues. Default 5, as Kafka's
// max.in.flight.requests.per.connection, or DefaultMaxInFlightAcksAll with
// Acks(-1). A Kafka request carries a batch for each of the node's
// partitions and a Depot request one, so the bound is on bytes: a few full
// batches keep a node busy, and more only lengthen its queues and the
// bytes waiting there, while the small batches of many partitions written
// to at once go together, as in one Kafka request. A batch counts as at
// least 1/64 of BatchBytes, so that at most 64n batches are in flight per
// node: with thousands of partitions, the node's cost per batch would
// otherwise fill the window with batches of a few records each, while the
// batches that wait, and grow, in the producer stayed as small.
func MaxInFlightPerNode(n int) ProducerOpt {
	return func(c *producerConfig) { c.maxInFlightPerNode = n }
}

// Idempotent makes the producer ask for a producer id and number each
// partition's records, so that a batch sent again after a lost answer is
// appended once. Default true; ignored (off) with Acks(0), which never
// resends.
func Idempotent(on bool) ProducerOpt { return func(c *producerConfig) { c.idempotent = on } }

// WithPartitioner sets the partitioner. Default DefaultPartitioner().
func WithPartitioner(p Partitioner) ProducerOpt {
	return func(c *producerConfig) { c.partitioner = p }
}

// Producer produces records to any topics. Produce, ProduceSync, Flush and
// BufferedBytes are safe for concurrent use. Records are appended to
// per-partition batches by the calling goroutine; the producer's sender actor
// sends sealed batches, retries them and calls the promises, in order per
// partition, from its own goroutine: a promise must not block, and must not
// call Produce when the buffer may be full.
type Producer struct {
	client *Client
	cfg    producerConfig
	sender *actor.PID
	logger *logrus.Entry

	producerID    int64
	producerEpoch int16

	mu     sync.Mutex
	topics map[string]*topicBuffer
	// lastTopic is the topic buffer Produce used last: a producer writes
	// mostly to one topic, and finds it there without the lock and the
	// map.
	lastTopic atomic.Pointer[topicBuffer]
	// buffered is added to under mu and released without it, so that
	// the sender's answers never wait for a producing goroutine; waiters
	// counts the goroutines waiting on space, which a release then closes
	// under mu.
	buffered atomic.Int64
	// bound is MaxBufferedBytes, or its default for the partitions
	// written to, of which there are partitions (both changed under mu).
	bound      atomic.Int64
	partitions int
	waiters    atomic.Int32
	space      chan struct{} // closed when buffered bytes are released
	closed     bool

	batches sync.Pool      // *batch
	bufs    mem.BufferPool // batch buffers (see seal)

	// requests and sentBatches count what the sender sent (see Stats).
	requests, sentBatches atomic.Int64
	// outstanding counts the sealed batches of every partition not yet
	// completed (see addOutstanding). While it is zero a record is sent
	// at once, without waiting for Linger.
	outstanding atomic.Int64
}

// ProducerStats counts what a producer sent to the nodes.
type ProducerStats struct {
	// Requests is the ProduceRequests sent, each to one node.
	Requests int64
	// Batches is the batches those requests carried, resends included:
	// with many partitions a node's and a producer's costs are per batch
	// more than per record.
	Batches int64
}

// Stats returns what the producer has sent so far. Safe for concurrent
// use.
func (p *Producer) Stats() ProducerStats {
	return ProducerStats{Requests: p.requests.Load(), Batches: p.sentBatches.Load()}
}

// topicBuffer is a topic's open batches.
type topicBuffer struct {
	name        string
	partitioner TopicPartitioner
	partitions  []*partitionBuffer
}

// partitionBuffer is a partition's open batch. Guarded by Producer.mu.
type partitionBuffer struct {
	topic     string
	partition int32
	// builder is held by value: with many partitions each record
	// lands in a partition whose buffer is out of the CPU's cache, and
	// every pointer followed is another miss.
	builder  wire.Builder
	pending  []pending
	bytes    int64
	nextSeq  int32
	lingerAt time.Time
	timer    *time.Timer
	// outstanding counts this partition's sealed batches not yet
	// completed (see Producer.addOutstanding). When it drops to zero the
	// open batch is sent without waiting out Linger (see sealReady).
	outstanding atomic.Int32
	// unsent counts this partition's sealed batches the sender has not
	// sent yet; the sender decrements it. While one waits there, the
	// open batch is not sealed at Linger (see holdOpen).
	unsent atomic.Int32
	// held is set while the open batch has lingered and holdOpen keeps
	// it open: only then does a send of the last unsent batch seal it.
	held atomic.Bool
	// sinceMoved is the bytes of the batches sealed at once (see
	// sealAtOnce) since the last that moved the partitioner on.
	sinceMoved int64
	// maxBytes, when not zero, is below BatchBytes: the sender lowered it
	// when the partition refused a batch as larger than its topic's
	// max.message.bytes, so that later batches are sealed smaller.
	maxBytes atomic.Int64
}

// limit is the size at which pb's batch is sealed.
func (pb *partitionBuffer) limit(batchBytes int) int64 {
	if m := pb.maxBytes.Load(); m > 0 {
		return m
	}
	return int64(batchBytes)
}

// lowerLimit makes pb seal its batches at n bytes or less from now on.
func (pb *partitionBuffer) lowerLimit(batchBytes int, n int64) {
	for {
		cur := pb.maxBytes.Load()
		if (cur > 0 && cur <= n) || n >= int64(batchBytes) || pb.maxBytes.CompareAndSwap(cur, n) {
			return
		}
	}
}

// pending is a record waiting for its batch's answer.
type pending struct {
	record  *Record
	promise func(*Record, error)
}

// batch is a sealed record batch on its way to a partition. The facade fills
// it; from then on only the sender actor touches it.
type batch struct {
	topic     string
	partition int32
	buf       []byte
	records   []pending
	bytes     int64
	baseSeq   int32
	err       error // set when sealing failed
	sealed    time.Time
	// unsent says that the batch counts in its owner's unsent, until the
	// sender first sends it or completes it.
	unsent bool

	// owner is the partition buffer that sealed the batch, in topic.
	owner   *partitionBuffer
	inTopic *topicBuffer

	corrID   int64
	sentAt   time.Time
	attempts int
	stamped  stamp // how the batch's producer fields were last written
	lastErr  error
}

// NewProducer returns a producer. With idempotence (the default) it first
// asks a broker for a producer id.
func (c *Client) NewProducer(opts ...ProducerOpt) (*Producer, error) {
	cfg := producerConfig{
		linger:             5 * time.Millisecond,
		batchBytes:         DefaultBatchBytes,
		acks:               -1,
		requestTimeout:     c.cfg.requestTimeout,
		retries:            math.MaxInt32,
		retryBackoff:       100 * time.Millisecond,
		deliveryTimeout:    2 * time.Minute,
		maxInFlight:        -1, // by acks, below
		maxInFlightPerNode: -1,
		idempotent:         true,
		partitioner:        DefaultPartitioner(),
	}
	for _, o := range opts {
		o(&cfg)
	}
	inFlight := 5
	if cfg.acks == -1 {
		inFlight = DefaultMaxInFlightAcksAll
	}
	if cfg.maxInFlight == -1 {
		cfg.maxInFlight = inFlight
	}
	if cfg.maxInFlightPerNode == -1 {
		cfg.maxInFlightPerNode = inFlight
	}
	switch {
	case cfg.acks != 0 && cfg.acks != 1 && cfg.acks != -1:
		return nil, fmt.Errorf("client: acks %d (want 0, 1 or -1)", cfg.acks)
	case cfg.batchBytes <= 0 || cfg.maxBufferedSet && cfg.maxBuffered <= 0 || cfg.maxInFlight <= 0 || cfg.maxInFlightPerNode <= 0:
		return nil, errors.New("client: batch bytes, buffered bytes and in-flight requests must be positive")
	case cfg.idempotent && cfg.acks != 0 && cfg.maxInFlight > topic.ProducerBatchesKept:
		return nil, fmt.Errorf("client: %d requests in flight per partition with idempotence (at most %d: the batches a partition remembers to recognise a resend)", cfg.maxInFlight, topic.ProducerBatchesKept)
	case cfg.requestTimeout <= 0 || cfg.deliveryTimeout <= 0 || cfg.linger < 0 || cfg.retryBackoff < 0 || cfg.retries < 0:
		return nil, errors.New("client: negative or zero timeout")
	case cfg.partitioner == nil:
		return nil, errors.New("client: nil partitioner")
	}
	if cfg.acks == 0 {
		cfg.idempotent = false
	}
	p := &Producer{
		client:        c,
		cfg:           cfg,
		logger:        c.logger.WithField("actor", "producer"),
		producerID:    -1,
		producerEpoch: -1,
		topics:        map[string]*topicBuffer{},
		space:         make(chan struct{}),
		bufs:          remote.NewBufferPool(),
	}
	if cfg.maxBufferedSet {
		p.bound.Store(cfg.maxBuffered)
	} else {
		p.bound.Store(defaultBufferBound(0))
	}
	if cfg.idempotent {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.requestTimeout)
		id, epoch, err := c.initProducerID(ctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("client: init producer id: %w", err)
		}
		p.producerID, p.producerEpoch = id, epoch
	}
	p.sender = c.root.Spawn(actor.PropsFromProducer(func() actor.Actor { return newSender(p) }))
	c.root.Send(c.watcher, &watchConnections{pid: p.sender})
	return p, nil
}

// BufferedBytes is the size of the records produced and not yet
// acknowledged. It never exceeds MaxBufferedBytes, except by one record
// larger than the bound, admitted alone.
func (p *Producer) BufferedBytes() int64 { return p.buffered.Load() }

// awaitSpace waits while full reports true of the buffered bytes. p.mu is
// held on entry and on a nil return; on ctx's error it is not.
func (p *Producer) awaitSpace(ctx context.Context, full func(buffered int64) bool) error {
	for full(p.buffered.Load()) {
		space := p.space
		p.waiters.Add(1)
		if !full(p.buffered.Load()) {
			// Released after the check above, by a release that may
			// not have seen this waiter.
			p.waiters.Add(-1)
			return nil
		}
		p.mu.Unlock()
		select {
		case <-space:
			p.waiters.Add(-1)
		case <-ctx.Done():
			p.waiters.Add(-1)
			return ctx.Err()
		}
		p.mu.Lock()
	}
	return nil
}

// defaultBufferBound is MaxBufferedBytes's default for a producer writing
// to the given number of partitions.
func defaultBufferBound(partitions int) int64 {
	return min(DefaultMaxBufferedBytes+int64(partitions)*DefaultBufferedBytesPerPartition, DefaultMaxBufferedBytesLimit)
}

// BufferBound is the bytes of records produced and not yet acknowledged at
// which Produce blocks: MaxBufferedBytes, or its default for the
// partitions of the topics produced to so far.
func (p *Producer) BufferBound() int64 { return p.bound.Load() }

// recordSize is what a record counts against MaxBufferedBytes and
// BatchBytes: its encoded size with room for the deltas.
func recordSize(r *Record) int64 {
	return int64(wire.RecordSize(0, 0, r.Key, r.Value, r.Headers)) + 12
}

// Produce appends r to its partition's batch and returns; promise (may be
// nil) is called once with r and nil when r is acknowledged (r.Partition and
// r.Offset set), or with the error that failed it. Produce blocks while the
// buffered bytes are at MaxBufferedBytes, and fails r with ctx's error if
// ctx ends first. The producer keeps r, its key, value and headers until the
// promise: do not change them before.
func (p *Producer) Produce(ctx context.Context, r *Record, promise func(*Record, error)) {
	if promise == nil {
		promise = func(*Record, error) {}
	}
	tb := p.lastTopic.Load()
	if tb == nil || tb.name != r.Topic {
		p.mu.Lock()
		tb = p.topics[r.Topic]
		p.mu.Unlock()
		if tb != nil {
			p.lastTopic.Store(tb)
		}
	}
	if tb == nil {
		route, err := p.client.topicRoute(ctx, r.Topic)
		if err != nil {
			promise(r, err)
			return
		}
		p.mu.Lock()
		if tb = p.topics[r.Topic]; tb == nil {
			tb = p.newTopicBuffer(r.Topic, len(route.leaders))
			p.topics[r.Topic] = tb
		}
		p.mu.Unlock()
		p.lastTopic.Store(tb)
	}
	if len(tb.partitions) == 0 {
		promise(r, &Error{Code: messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, Message: r.Topic + " has no partitions"})
		return
	}
	size := recordSize(r)

	p.mu.Lock()
	full := func(b int64) bool { return !p.closed && b > 0 && b+size > p.bound.Load() }
	if err := p.awaitSpace(ctx, full); err != nil {
		promise(r, err)
		return
	}
	if p.closed || p.client.closed.Load() {
		p.mu.Unlock()
		promise(r, ErrClosed)
		return
	}
	n := len(tb.partitions)
	part := tb.partitioner.Partition(r, n)
	if err := checkPartition(r.Topic, part, n); err != nil {
		p.mu.Unlock()
		promise(r, err)
		return
	}
	r.Partition = int32(part)
	if r.Timestamp.IsZero() {
		r.Timestamp = time.Now()
	}
	pb := tb.partitions[part]
	if pb.builder.Len() > 0 && int64(pb.builder.Size())+size > pb.limit(p.cfg.batchBytes) {
		p.seal(tb, pb)
		part = tb.partitioner.Partition(r, n)
		if err := checkPartition(r.Topic, part, n); err != nil {
			p.mu.Unlock()
			promise(r, err)
			return
		}
		r.Partition = int32(part)
		pb = tb.partitions[part]
	}
	if need := pb.builder.Size() + int(size); need > pb.builder.Cap() {
		p.putBuffer(pb.builder.Grow(p.getBuffer(max(need, 2*pb.builder.Cap()))))
	}
	pb.builder.Append(r.Timestamp.UnixMilli(), r.Key, r.Value, r.Headers)
	pb.pending = append(pb.pending, pending{record: r, promise: promise})
	pb.bytes += size
	p.buffered.Add(size)
	batchFull := int64(pb.builder.Size()) >= pb.limit(p.cfg.batchBytes)
	sealed := batchFull || pb.outstanding.Load() == 0 && (p.outstanding.Load() == 0 || p.cfg.linger == 0)
	switch {
	case batchFull:
		p.seal(tb, pb)
	case sealed:
		p.sealAtOnce(tb, pb)
	case pb.builder.Len() == 1:
		pb.lingerAt = time.Now().Add(p.cfg.linger)
		if pb.timer == nil {
			pb.timer = time.AfterFunc(p.cfg.linger, func() { p.lingerExpired(tb, pb) })
		} else {
			pb.timer.Reset(p.cfg.linger)
		}
	}
	p.mu.Unlock()
	if sealed {
		// Produce runs on the caller's goroutine, and a caller producing
		// in a loop keeps its P for up to the scheduler's time slice
		// (10 ms) while the goroutines that carry its batch on (the
		// sender, the remote stream, an embedded node's actors) wait
		// behind it. Having handed the sender a batch, it lets them run.
		runtime.Gosched()
	}
}

// newTopicBuffer makes the open batches of a topic with n partitions, and
// grows the default buffer bound for them. Called with p.mu held.
func (p *Producer) newTopicBuffer(topic string, n int) *topicBuffer {
	if !p.cfg.maxBufferedSet {
		p.partitions += n
		p.bound.Store(defaultBufferBound(p.partitions))
	}
	tb := &topicBuffer{name: topic, partitioner: p.cfg.partitioner.ForTopic(topic), partitions: make([]*partitionBuffer, n)}
	for i := range tb.partitions {
		pb := &partitionBuffer{topic: topic, partition: int32(i)}
		pb.builder.Reset(p.batchOptions(pb))
		tb.partitions[i] = pb
	}
	return tb
}

// batchOptions are the header fields of pb's next batch.
func (p *Producer) batchOptions(pb *partitionBuffer) wire.BatchOptions {
	if !p.cfg.idempotent {
		opts := wire.NoProducer
		opts.Compression = p.cfg.compression
		return opts
	}
	return wire.BatchOptions{
		Compression:   p.cfg.compression,
		ProducerID:    p.producerID,
		ProducerEpoch: p.producerEpoch,
		BaseSequence:  pb.nextSeq,
	}
}

// lingerExpired seals pb's batch when it has waited Linger.
func (p *Producer) lingerExpired(tb *topicBuffer, pb *partitionBuffer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pb.builder.Len() == 0 {
		return
	}
	if wait := time.Until(pb.lingerAt); wait > 0 {
		pb.timer.Reset(wait)
		return
	}
	// held is set before holdOpen looks at unsent, and the sender
	// looks at held after taking a batch out of unsent: one of the two
	// sees the other's change, so a held batch is never left behind.
	pb.held.Store(true)
	if p.holdOpen(pb) {
		return // sealed by sealReady when an answer or a send makes room
	}
	p.seal(tb, pb)
}

// holdOpen reports whether pb's open batch, having lingered, stays open
// and keeps taking records: while the partition has as many batches in
// flight as it may (see inFlightFull), or a sealed batch that the sender
// has not sent yet, as its node has no room for it. Sealed, the batch
// would only wait in the sender behind that one. With many partitions a
// node's window fills with their small batches, and this is what makes
// the batches waiting for room grow rather than queue up behind each
// other a few records each.
func (p *Producer) holdOpen(pb *partitionBuffer) bool {
	return p.inFlightFull(pb) || pb.unsent.Load() > 0
}

// inFlightFull reports whether pb has as many sealed batches outstanding
// as MaxInFlightPerPartition lets the sender have in flight: a batch
// sealed now would only wait in the sender, so it stays open and keeps
// taking records, as a Kafka producer's batch stays in its accumulator
// until the sender can take it. With many partitions each gets a few
// records per Linger, and this is what makes their batches grow with load
// rather than queue up, one record each, at the sender and the node.
func (p *Producer) inFlightFull(pb *partitionBuffer) bool {
	return p.cfg.acks != 0 && int(pb.outstanding.Load()) >= p.cfg.maxInFlight
}

// sealReady seals pb's open batch when pb has nothing outstanding, or a
// batch that has lingered and nothing that holds it open (see holdOpen):
// called by the sender when a batch of the partition completes, or when
// it sends the partition's last unsent batch.
func (p *Producer) sealReady(tb *topicBuffer, pb *partitionBuffer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pb.builder.Len() == 0 {
		return
	}
	if pb.outstanding.Load() == 0 || !p.holdOpen(pb) && !time.Now().Before(pb.lingerAt) {
		p.seal(tb, pb)
	}
}

// seal closes pb's open batch and hands it to the sender. Called with p.mu
// held, which keeps each partition's batches in sequence order in the
// sender's mailbox.
func (p *Producer) seal(tb *topicBuffer, pb *partitionBuffer) { p.sealBatch(tb, pb, false) }

// addOutstanding adds n to the sealed batches of pb not yet completed, and
// to the producer's, and returns pb's count.
//
// A record is sent at once, alone, only while the producer has nothing
// outstanding, not whenever its partition has nothing outstanding (unless
// Linger is 0, when nothing waits anyway): with many partitions the
// partitioner moves on to such a partition at nearly every batch, and each
// such record cost the nodes what a full batch costs. Three local nodes,
// RF 3 acks=all, twelve partitions, two producers, against the
// per-partition rule, in alternated pairs: at 10k records/s, 750-800
// batches a second against 1,310-1,340, the nodes' CPU 0.91-0.94 cores
// against 1.14-1.15, ack p50 3.5-3.7 ms against 3.8-3.9; at 150k, 380-430
// batches a second against 630-840, 1.09-1.16 cores against 1.21-1.33; at
// saturation 278k and 281k records/s against 271k and 267k.
func (p *Producer) addOutstanding(pb *partitionBuffer, n int) int32 {
	p.outstanding.Add(int64(n))
	return pb.outstanding.Add(int32(n))
}

// sealAtOnce is seal for the batch of a record that Produce sends at once,
// alone, as the producer has nothing outstanding. Unlike other batches,
// it does not move a sticky partitioner on, until such batches add up to
// a batch's worth of bytes: otherwise every switch to a partition with
// nothing outstanding would send one record there and switch again, and
// with many partitions at moderate rates a third of the batches were
// single records, each costing the nodes what a full batch costs
// (messages, appends, fetches, fsyncs). The next records join the
// partition's next batch, which grows while the first is on its way, as
// a Kafka producer's partitioner sticks to a partition for batch.size
// bytes (KIP-794).
func (p *Producer) sealAtOnce(tb *topicBuffer, pb *partitionBuffer) { p.sealBatch(tb, pb, true) }

func (p *Producer) sealBatch(tb *topicBuffer, pb *partitionBuffer, atOnce bool) {
	b, _ := p.batches.Get().(*batch)
	if b == nil {
		b = &batch{}
	}
	b.topic, b.partition = pb.topic, pb.partition
	b.owner, b.inTopic = pb, tb
	p.addOutstanding(pb, 1)
	pb.unsent.Add(1)
	pb.held.Store(false)
	b.unsent = true
	// The builder continues in a pooled buffer the size of this batch,
	// and Produce moves it to one twice as large as it fills: a producer
	// writing to many partitions holds buffers near the bytes it
	// buffers, not a full batch's worth per partition, while a partition
	// whose batches fill keeps full-size buffers and never moves.
	spare := p.getBuffer(pb.builder.Size())
	b.buf, b.err = pb.builder.Take(spare)
	b.records, pb.pending = pb.pending, b.records[:0]
	b.bytes, pb.bytes = pb.bytes, 0
	b.baseSeq = pb.nextSeq
	b.sealed = time.Now()
	b.corrID, b.attempts, b.stamped, b.lastErr = 0, 0, stamp{}, nil
	if p.cfg.idempotent {
		pb.nextSeq = addSeq(pb.nextSeq, int32(len(b.records)))
	}
	pb.builder.Reset(p.batchOptions(pb))
	if pb.timer != nil {
		pb.timer.Stop()
	}
	if !atOnce || pb.sinceMoved+int64(len(b.buf)) >= pb.limit(p.cfg.batchBytes) {
		pb.sinceMoved = 0
		tb.partitioner.OnBatchSealed(int(pb.partition))
	} else {
		pb.sinceMoved += int64(len(b.buf))
	}
	p.client.root.Send(p.sender, b)
}

// addSeq adds n to a sequence number, wrapping at 2^31 as Kafka does.
func addSeq(seq, n int32) int32 {
	return int32((int64(seq) + int64(n)) % (1 << 31))
}

// subSeq subtracts n from a sequence number, wrapping at 2^31.
func subSeq(seq, n int32) int32 {
	return int32((int64(seq) - int64(n) + 1<<31) % (1 << 31))
}

// release returns n bytes to the buffer and wakes blocked producers.
func (p *Producer) release(n int64) {
	p.buffered.Add(-n)
	if p.waiters.Load() > 0 {
		p.mu.Lock()
		close(p.space)
		p.space = make(chan struct{})
		p.mu.Unlock()
	}
}

// getBuffer returns an empty pooled buffer of at least n bytes.
func (p *Producer) getBuffer(n int) []byte {
	return (*p.bufs.Get(n))[:0]
}

// putBuffer hands b back to the pool; nil is ignored.
func (p *Producer) putBuffer(b []byte) {
	if cap(b) > 0 {
		p.bufs.Put(&b)
	}
}

// recycle keeps b's buffers for another batch.
func (p *Producer) recycle(b *batch) {
	p.putBuffer(b.buf)
	b.buf = nil
	clear(b.records)
	b.records = b.records[:0]
	b.err, b.lastErr = nil, nil
	b.owner, b.inTopic = nil, nil
	p.batches.Put(b)
}

// split rebuilds b's records as batches of at most limit bytes each (a
// record larger than limit alone in its own), in order and with the
// sequences they had in b; when that would leave them in one batch, as two
// halves. Sequences are stamped as b's were (see batch.stamped). Each new
// batch counts as outstanding for b's partition, as b did, and as unsent
// if b did.
func (p *Producer) split(b *batch, limit int64) ([]*batch, error) {
	var groups [][]pending
	size := int64(0)
	for i, pd := range b.records {
		n := recordSize(pd.record)
		if i == 0 || size+n > limit {
			groups = append(groups, nil)
			size = wire.HeaderSize
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], pd)
		size += n
	}
	if len(groups) < 2 {
		half := len(b.records) / 2
		groups = [][]pending{
			append([]pending(nil), b.records[:half]...),
			append([]pending(nil), b.records[half:]...),
		}
	}
	out := make([]*batch, 0, len(groups))
	seq := b.baseSeq
	for _, records := range groups {
		opts := wire.NoProducer
		if p.cfg.idempotent {
			opts = wire.BatchOptions{
				ProducerID:    p.producerID,
				ProducerEpoch: p.epoch(b.stamped),
				BaseSequence:  subSeq(seq, b.stamped.shift),
			}
		}
		opts.Compression = p.cfg.compression
		builder := wire.NewBuilder(opts)
		var bytes int64
		for _, pd := range records {
			r := pd.record
			builder.Append(r.Timestamp.UnixMilli(), r.Key, r.Value, r.Headers)
			bytes += recordSize(r)
		}
		buf, err := builder.Take(nil)
		if err != nil {
			return nil, err
		}
		out = append(out, &batch{
			topic: b.topic, partition: b.partition, buf: buf,
			records: records, bytes: bytes, baseSeq: seq,
			sealed: b.sealed, owner: b.owner, inTopic: b.inTopic,
			stamped: b.stamped,
		})
		seq = addSeq(seq, int32(len(records)))
	}
	if b.owner != nil {
		p.addOutstanding(b.owner, len(out)-1)
		if b.unsent {
			b.owner.unsent.Add(int32(len(out) - 1))
			for _, part := range out {
				part.unsent = true
			}
		}
	}
	return out, nil
}

// ProduceSync produces rs, sends the open batches at once rather than after
// Linger, and waits until each record is acknowledged or failed. It returns
// the first error.
func (p *Producer) ProduceSync(ctx context.Context, rs ...*Record) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	wg.Add(len(rs))
	for _, r := range rs {
		p.Produce(ctx, r, func(_ *Record, err error) {
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
			wg.Done()
		})
	}
	p.mu.Lock()
	p.sealAll()
	p.mu.Unlock()
	wg.Wait()
	return first
}

// sealAll seals every open batch. Called with p.mu held.
func (p *Producer) sealAll() {
	for _, tb := range p.topics {
		for _, pb := range tb.partitions {
			if pb.builder.Len() > 0 {
				p.seal(tb, pb)
			}
		}
	}
}

// Flush sends every open batch at once and waits until every record
// produced so far (and any produced meanwhile) is acknowledged or failed, or
// ctx ends.
func (p *Producer) Flush(ctx context.Context) error {
	p.mu.Lock()
	p.sealAll()
	if err := p.awaitSpace(ctx, func(b int64) bool { return b > 0 }); err != nil {
		return err
	}
	p.mu.Unlock()
	return nil
}

// Close flushes, waiting at most DeliveryTimeout, then stops the producer:
// Shutdown with that bound.
func (p *Producer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.deliveryTimeout)
	defer cancel()
	return p.Shutdown(ctx)
}

// Shutdown flushes until every record is acknowledged or failed, or ctx
// ends, then stops the producer: records still unacknowledged fail with
// ErrClosed (those already sent may have been written), and records
// produced afterwards fail with ErrClosed. When it returns, every record's
// promise has been called. It returns the error that ended the flush, as
// Flush does; a producer already shut down returns nil at once. With an
// ended ctx it gives up on the unacknowledged records without waiting, as
// Kafka's close with a zero timeout does.
func (p *Producer) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil
	}
	err := p.Flush(ctx)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	// Records produced since the flush began go to the sender before it
	// stops, which fails them with the rest.
	p.sealAll()
	close(p.space)
	p.space = make(chan struct{})
	for _, tb := range p.topics {
		for _, pb := range tb.partitions {
			if pb.timer != nil {
				pb.timer.Stop()
			}
		}
	}
	p.mu.Unlock()
	if werr := p.client.root.PoisonFuture(p.sender).Wait(); werr != nil && err == nil {
		err = fmt.Errorf("client: stop producer: %w", werr)
	}
	p.client.root.Send(p.client.watcher, &unwatchConnections{pid: p.sender})
	return err
}

// Byte positions of the producer fields in a record batch header (see
// package wire); the CRC covers them from attributesPos on.
const (
	attributesPos    = 21
	crcPos           = 17
	producerIDPos    = 43
	producerEpochPos = 51
	baseSequencePos  = 53
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// stamp is how a batch's producer fields are written, relative to how it
// was sealed: its sequences less shift (see partSender.seqShift), and its
// producer epoch plus bump (see partSender.epochBump).
type stamp struct {
	shift int32
	bump  int16
}

// epoch is the producer epoch a batch stamped st carries.
func (p *Producer) epoch(st stamp) int16 { return p.producerEpoch + st.bump }

// stampProducer rewrites a sealed batch's producer epoch, base sequence and
// CRC.
func stampProducer(b []byte, epoch int16, seq int32) {
	binary.BigEndian.PutUint16(b[producerEpochPos:], uint16(epoch))
	binary.BigEndian.PutUint32(b[baseSequencePos:], uint32(seq))
	binary.BigEndian.PutUint32(b[crcPos:], crc32.Checksum(b[attributesPos:], castagnoli))
}
