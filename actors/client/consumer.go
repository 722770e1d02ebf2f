package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

// Offset says where a consumer starts reading a partition.
type Offset struct {
	kind  offsetKind
	value int64
}

type offsetKind int8

const (
	offsetStart offsetKind = iota
	offsetEnd
	offsetExact
	offsetTimestamp
)

// AtStart starts at the first offset still stored.
func AtStart() Offset { return Offset{kind: offsetStart} }

// AtEnd starts after the last record: only records produced from now on.
func AtEnd() Offset { return Offset{kind: offsetEnd} }

// AtOffset starts at offset n.
func AtOffset(n int64) Offset { return Offset{kind: offsetExact, value: n} }

// AtTimestamp starts at the first record whose timestamp is at or after t,
// or at the end when there is none.
func AtTimestamp(t time.Time) Offset { return Offset{kind: offsetTimestamp, value: t.UnixMilli()} }

// listTimestamp is the ListOffsetsRequest timestamp that resolves o.
func (o Offset) listTimestamp() int64 {
	switch o.kind {
	case offsetStart:
		return EarliestOffset
	case offsetEnd:
		return LatestOffset
	}
	return o.value
}

// ResetPolicy says what a consumer does when its offset is past the end of
// a partition's log (Kafka's auto.offset.reset). An offset below the log
// start, whose records were deleted, moves to the log start whatever the
// policy.
type ResetPolicy int8

const (
	// ResetEarliest restarts at the first offset still stored (the default).
	ResetEarliest ResetPolicy = iota
	// ResetLatest restarts at the end.
	ResetLatest
	// ResetNone stops the partition and returns ErrOffsetOutOfRange from Poll.
	ResetNone
)

// String is the policy as Kafka's auto.offset.reset spells it.
func (p ResetPolicy) String() string {
	switch p {
	case ResetEarliest:
		return "earliest"
	case ResetLatest:
		return "latest"
	case ResetNone:
		return "none"
	}
	return fmt.Sprintf("ResetPolicy(%d)", int8(p))
}

// ParseResetPolicy parses a policy as Kafka's auto.offset.reset spells it:
// earliest, latest or none.
func ParseResetPolicy(s string) (ResetPolicy, error) {
	for _, p := range []ResetPolicy{ResetEarliest, ResetLatest, ResetNone} {
		if s == p.String() {
			return p, nil
		}
	}
	return 0, fmt.Errorf("client: reset policy %q: want earliest, latest or none", s)
}

// OffsetReset tells that a partition's offset was out of range and where
// the consumer moved it: From is the offset it asked for, To where it reads
// from now; LogStartOffset and HighWatermark are the bounds the partition
// answered with. From is below LogStartOffset when the records there were
// deleted, else past HighWatermark, and then To follows the ResetPolicy.
type OffsetReset struct {
	Topic          string
	Partition      int32
	From, To       int64
	LogStartOffset int64
	HighWatermark  int64
	Policy         ResetPolicy
}

// BelowLogStart reports whether the offset was below the log start, rather
// than past the end.
func (r OffsetReset) BelowLogStart() bool { return r.From < r.LogStartOffset }

// FetchError tells that a partition could not be read and that the
// consumer tries again after its retry backoff: its leader is unknown, or
// the leader answered with a retriable error (an offline partition, a full
// or failed disk, a leader that moved), or gave no answer in time. Err is
// an *Error with the broker's code and message, ErrNoLeader or
// ErrTimeout.
type FetchError struct {
	Topic     string
	Partition int32
	// Offset is the offset the consumer reads from, -1 while it is still
	// resolving where to start.
	Offset int64
	Err    error
}

// ErrNoLeader means the metadata names no leader for a partition.
var ErrNoLeader = errors.New("no leader known for the partition")

// ConsumerOpt configures a Consumer.
type ConsumerOpt func(*consumerConfig)

type consumerConfig struct {
	fetchMaxBytes     int64
	partitionMaxBytes int32
	fetchMinBytes     int32
	fetchMaxWait      time.Duration
	maxPrefetchBytes  int64
	maxPollRecords    int
	requestTimeout    time.Duration
	retryBackoff      time.Duration
	reset             ResetPolicy
	onReset           func(OffsetReset)
	onFetchError      func(FetchError)
}

// FetchMaxBytes bounds the bytes asked for by all fetches in flight
// together. Default 50 MiB, as Kafka's fetch.max.bytes.
func FetchMaxBytes(n int64) ConsumerOpt { return func(c *consumerConfig) { c.fetchMaxBytes = n } }

// PartitionMaxBytes is the max_bytes of each partition's fetch, and the
// size of its chunks while it is caught up. Default 1 MiB, as Kafka's
// max.partition.fetch.bytes. A batch larger than this is still fetched
// whole: the limit doubles for that partition until it fits.
func PartitionMaxBytes(n int32) ConsumerOpt {
	return func(c *consumerConfig) { c.partitionMaxBytes = n }
}

// FetchMinBytes is the min_bytes of each fetch: the node holds a fetch of
// the partitions it leads until that much is available across them or
// FetchMaxWait passes (a partition being caught up, fetched alone, is
// fetched without a wait). Default 1.
func FetchMinBytes(n int32) ConsumerOpt { return func(c *consumerConfig) { c.fetchMinBytes = n } }

// FetchMaxWait is how long a node may hold a fetch. Default 500ms.
func FetchMaxWait(d time.Duration) ConsumerOpt { return func(c *consumerConfig) { c.fetchMaxWait = d } }

// MaxPrefetchBytes bounds the bytes fetched and not yet returned by Poll
// plus the bytes asked for by fetches in flight; fetching pauses at the
// bound. Default 64 MiB.
func MaxPrefetchBytes(n int64) ConsumerOpt {
	return func(c *consumerConfig) { c.maxPrefetchBytes = n }
}

// MaxPollRecords is the most records one Poll returns; the rest of what
// was fetched waits for the next Poll. Default 500, as Kafka's
// max.poll.records.
func MaxPollRecords(n int) ConsumerOpt { return func(c *consumerConfig) { c.maxPollRecords = n } }

// ConsumerRequestTimeout is how long past FetchMaxWait a fetch may go
// unanswered before it is sent again. Default: the client's RequestTimeout.
func ConsumerRequestTimeout(d time.Duration) ConsumerOpt {
	return func(c *consumerConfig) { c.requestTimeout = d }
}

// ConsumerRetryBackoff is the pause before a failed request is sent again.
// Default 100ms.
func ConsumerRetryBackoff(d time.Duration) ConsumerOpt {
	return func(c *consumerConfig) { c.retryBackoff = d }
}

// Reset sets what happens when a partition's offset is past the end of its
// log. Default ResetEarliest.
func Reset(p ResetPolicy) ConsumerOpt { return func(c *consumerConfig) { c.reset = p } }

// OnOffsetReset has fn told of each partition whose offset was out of range
// and moved, before the records from its new offset are fetched. It is
// called from the consumer's fetcher goroutine and must not block. Default
// none.
func OnOffsetReset(fn func(OffsetReset)) ConsumerOpt {
	return func(c *consumerConfig) { c.onReset = fn }
}

// OnFetchError has fn told of each failure to read a partition that the
// consumer retries (see FetchError), each time it happens, so that a caller
// need not wait in silence for a partition that is unavailable. It is
// called from the consumer's fetcher goroutine and must not block. Default
// none: the consumer retries without telling.
func OnFetchError(fn func(FetchError)) ConsumerOpt {
	return func(c *consumerConfig) { c.onFetchError = fn }
}

// Consumer reads assigned partitions. Its fetcher actor keeps a long-poll
// fetch in flight per node ahead of the caller, for the partitions that
// node leads, and one per partition being caught up (prefetch, bounded by
// MaxPrefetchBytes); Poll decodes what has arrived, up to MaxPollRecords
// records. Assign and AssignTopic are safe for concurrent use; Poll is not
// (one goroutine polls).
type Consumer struct {
	client  *Client
	cfg     consumerConfig
	fetcher *actor.PID
	logger  *logrus.Entry
	decoder wire.Decoder

	mu     sync.Mutex
	ready  []fetched
	spare  []fetched
	errs   []error
	notify chan struct{} // one token when ready or errs grew
	closed bool

	// held are records decoded and not yet returned: the part of the
	// last batch a Poll decoded beyond MaxPollRecords. Owned by the
	// goroutine calling Poll.
	held []*Record
}

// fetched is a run of whole batches fetched from a partition; records
// before from are skipped.
type fetched struct {
	topic     string
	partition int32
	from      int64
	records   []byte
}

// NewConsumer returns a consumer with nothing assigned.
func (c *Client) NewConsumer(opts ...ConsumerOpt) (*Consumer, error) {
	cfg := consumerConfig{
		fetchMaxBytes:     50 << 20,
		partitionMaxBytes: 1 << 20,
		fetchMinBytes:     1,
		fetchMaxWait:      500 * time.Millisecond,
		maxPrefetchBytes:  64 << 20,
		maxPollRecords:    500,
		requestTimeout:    c.cfg.requestTimeout,
		retryBackoff:      100 * time.Millisecond,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.fetchMaxBytes <= 0 || cfg.partitionMaxBytes <= 0 || cfg.maxPrefetchBytes <= 0 || cfg.maxPollRecords <= 0 ||
		cfg.fetchMaxWait < 0 || cfg.requestTimeout <= 0 || cfg.retryBackoff < 0 {
		return nil, errors.New("client: consumer sizes and timeouts must be positive")
	}
	cons := &Consumer{
		client: c,
		cfg:    cfg,
		logger: c.logger.WithField("actor", "consumer"),
		notify: make(chan struct{}, 1),
	}
	cons.fetcher = c.root.Spawn(actor.PropsFromProducer(func() actor.Actor { return newFetcher(cons) }))
	c.root.Send(c.watcher, &watchConnections{pid: cons.fetcher})
	return cons, nil
}

// assignPartition asks the fetcher to read a partition (all of the topic's
// when partition is -1).
type assignPartition struct {
	topic     string
	partition int32
	at        Offset
}

// unassignPartitions asks the fetcher to forget partitions; it answers
// with an unassigned once they are gone.
type unassignPartitions struct{ parts []partKey }

// unassigned answers unassignPartitions. The fetcher and its asker share an
// actor system, so it never crosses the wire.
type unassigned struct{}

// consumed tells the fetcher that Poll took bytes off the prefetch buffer.
type consumed struct{ bytes int64 }

// fetcherTick wakes the fetcher to check timeouts and backoffs.
type fetcherTick struct{}

// Assign starts reading topic's partition at at. Errors (an unknown topic, an
// offset that cannot be resolved) come out of Poll.
func (c *Consumer) Assign(topic string, partition int32, at Offset) {
	c.client.root.Send(c.fetcher, &assignPartition{topic: topic, partition: partition, at: at})
}

// AssignTopic starts reading every partition of topic at at.
func (c *Consumer) AssignTopic(topic string, at Offset) {
	c.Assign(topic, -1, at)
}

// push hands fetched bytes to Poll. Called by the fetcher.
func (c *Consumer) push(f fetched) {
	c.mu.Lock()
	c.ready = append(c.ready, f)
	c.mu.Unlock()
	c.wake()
}

// pushErr hands an error to Poll. Called by the fetcher.
func (c *Consumer) pushErr(err error) {
	c.mu.Lock()
	c.errs = append(c.errs, err)
	c.mu.Unlock()
	c.wake()
}

func (c *Consumer) wake() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// Poll waits until records or an error are available, or ctx ends, and
// returns the records fetched so far, at most MaxPollRecords of them, in
// offset order within each partition. An error from the fetcher is returned
// alone, after the records that arrived before it.
func (c *Consumer) Poll(ctx context.Context) ([]*Record, error) {
	return c.poll(ctx, nil)
}

// poll is Poll that also returns (nil, nil) when, with nothing ready,
// interrupted reports true; whoever makes it true calls wake.
func (c *Consumer) poll(ctx context.Context, interrupted func() bool) ([]*Record, error) {
	for {
		c.mu.Lock()
		if c.closed || c.client.closed.Load() {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		if len(c.held) > 0 {
			c.mu.Unlock()
			return c.takeHeld(), nil
		}
		if len(c.ready) > 0 {
			batch := c.ready
			c.ready, c.spare = c.spare[:0], nil
			c.mu.Unlock()
			out, rest, n, err := c.decode(batch, c.cfg.maxPollRecords)
			// What was not decoded goes back ahead of what arrived
			// meanwhile, so each partition's records stay in order.
			c.mu.Lock()
			pushed := c.ready
			kept := copy(batch, rest)
			clear(batch[kept:])
			c.ready = append(batch[:kept], pushed...)
			clear(pushed)
			c.spare = pushed[:0]
			c.mu.Unlock()
			if n > 0 {
				c.client.root.Send(c.fetcher, &consumed{bytes: n})
			}
			if len(out) > c.cfg.maxPollRecords {
				c.held = out[c.cfg.maxPollRecords:]
				out = out[:c.cfg.maxPollRecords:c.cfg.maxPollRecords]
			}
			if err != nil {
				return out, err
			}
			if len(out) > 0 {
				return out, nil
			}
			continue
		}
		if len(c.errs) > 0 {
			err := c.errs[0]
			c.errs = c.errs[1:]
			c.mu.Unlock()
			return nil, err
		}
		c.mu.Unlock()
		if interrupted != nil && interrupted() {
			return nil, nil
		}
		select {
		case <-c.notify:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// takeHeld returns up to MaxPollRecords of the held records.
func (c *Consumer) takeHeld() []*Record {
	n := min(len(c.held), c.cfg.maxPollRecords)
	out := c.held[:n:n]
	c.held = c.held[n:]
	if len(c.held) == 0 {
		c.held = nil
	}
	return out
}

// minRecordSize is the smallest encoded record: length, attributes, two
// deltas, null key, null value, no headers.
const minRecordSize = 7

// decode turns fetched runs of batches into records, skipping those before
// each run's starting offset and control batches. It decodes whole batches
// and starts none once it has limit records, so it returns at most one
// batch's records beyond limit. It returns the records, the runs not
// decoded (the one it stopped in, from the batch it stopped at, and those
// after it; they alias runs), the bytes decoded, and the first decoding
// error.
func (c *Consumer) decode(runs []fetched, limit int) ([]*Record, []fetched, int64, error) {
	var out []*Record
	var n int64
	var firstErr error
	var it wire.BatchIterator
	it.SkipCRC = true // the decoders check it
	for i := range runs {
		f := &runs[i]
		from := f.from // advanced past each record returned, so none repeats
		it.Reset(f.records)
		for it.Next() {
			if len(out) >= limit {
				at := it.Pos()
				n += int64(at)
				f.records, f.from = f.records[at:], from
				return out, runs[i:], n, firstErr
			}
			h := it.Header()
			if h.NextOffset() <= from || h.Control() {
				continue
			}
			// Records are allocated a slab at a time; the header's count is
			// trusted only as far as the batch's size allows.
			var slab []Record
			left := int(h.RecordCount)
			emit := func(r wire.Record) error {
				if len(slab) == cap(slab) {
					slab = make([]Record, 0, max(1, min(left, len(it.Batch())/minRecordSize, 4096)))
				}
				left--
				if r.Offset < from {
					return nil
				}
				from = r.Offset + 1
				rec := Record{
					Topic:     f.topic,
					Partition: f.partition,
					Offset:    r.Offset,
					Timestamp: time.UnixMilli(r.Timestamp),
					Key:       r.Key,
					Value:     r.Value,
				}
				if len(r.Headers) > 0 {
					rec.Headers = append([]wire.RecordHeader(nil), r.Headers...)
				}
				slab = append(slab, rec)
				out = append(out, &slab[len(slab)-1])
				return nil
			}
			var err error
			if h.Compression() == wire.CompressionNone {
				err = c.decoder.Records(it.Batch(), emit)
			} else {
				err = wire.Records(it.Batch(), emit) // records keep their own buffer
			}
			if err != nil && firstErr == nil {
				firstErr = fmt.Errorf("client: %s-%d batch at offset %d: %w", f.topic, f.partition, h.BaseOffset, err)
			}
		}
		if err := it.Err(); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("client: %s-%d fetched at offset %d: %w", f.topic, f.partition, f.from, err)
		}
		n += int64(len(f.records))
	}
	return out, nil, n, firstErr
}

// unassign stops fetching the partitions in drop and discards what was
// fetched (or decoded) from them and not yet returned by Poll. When it
// returns, Poll returns no record of those partitions until they are
// assigned again. Not to be called while Poll runs.
func (c *Consumer) unassign(ctx context.Context, drop map[TopicPartition]bool) error {
	if len(drop) == 0 {
		return nil
	}
	parts := make([]partKey, 0, len(drop))
	for tp := range drop {
		parts = append(parts, partKey{tp.Topic, tp.Partition})
	}
	// The fetcher answers after removing the partitions, so nothing of
	// theirs is pushed after the answer.
	if _, err := c.client.request(ctx, c.fetcher, &unassignPartitions{parts: parts}, c.cfg.requestTimeout); err != nil {
		return fmt.Errorf("client: stop fetching: %w", err)
	}
	c.mu.Lock()
	kept := c.ready[:0]
	var dropped int64
	for _, f := range c.ready {
		if drop[TopicPartition{f.topic, f.partition}] {
			dropped += int64(len(f.records))
			continue
		}
		kept = append(kept, f)
	}
	clear(c.ready[len(kept):])
	c.ready = kept
	c.mu.Unlock()
	c.held = slices.DeleteFunc(c.held, func(r *Record) bool { return drop[TopicPartition{r.Topic, r.Partition}] })
	if dropped > 0 {
		c.client.root.Send(c.fetcher, &consumed{bytes: dropped})
	}
	return nil
}

// Close stops fetching. Poll then returns ErrClosed.
func (c *Consumer) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.mu.Unlock()
	c.wake()
	_ = c.client.root.PoisonFuture(c.fetcher).Wait()
	c.client.root.Send(c.client.watcher, &unwatchConnections{pid: c.fetcher})
}

// fetcher is a consumer's actor. It resolves starting offsets, keeps one
// long-poll FetchPartitionsRequest in flight per leader node for the
// partitions it leads (see nodeFetch), and one FetchRequest in chunks per
// partition being caught up (see fetchPart.lagging), while the prefetch
// bound allows, each partition's naming the leader epoch the metadata gave
// it, resends fetches that go unanswered, refreshes metadata when a leader
// moves or its epoch is not the partition's, and resets out-of-range
// offsets. When the connection to a node drops, what was in flight there is
// asked again at once, from the same offsets, of the leaders a metadata
// refresh names. Not shared: all access is through its mailbox.
type fetcher struct {
	cons  *Consumer
	parts map[partKey]*fetchPart
	order []*fetchPart
	// refreshing are the metadata requests in flight, by topic; an answer
	// to one no longer there is ignored.
	refreshing  map[string]refreshCall
	refreshID   int64
	waiting     map[string]Offset // topics assigned whole, awaiting metadata
	waitRetryAt time.Time
	corrID      int64
	buffered    int64 // bytes handed to Poll and not yet consumed
	asked       int64 // max_bytes of fetches in flight
	// starved are the partitions that found the byte budget spent, in
	// the order they found it so. While any waits, budget freed goes to
	// them first: otherwise the partitions whose fetches return re-ask
	// at once and take it back, and the rest are never fetched.
	starved  []*fetchPart
	stopTick scheduler.CancelFunc
	// nodes are the fetches of several partitions, one per leader node,
	// by its address (see nodeFetch); flushing is set while a
	// flushNodes is on its way.
	nodes    map[string]*nodeFetch
	flushing bool
}

// fetchPart is the fetcher's state for one partition.
type fetchPart struct {
	key    partKey
	leader *actor.PID
	// epoch is the leader epoch the metadata gave with leader.
	epoch     int32
	offset    int64 // next offset to fetch
	at        Offset
	resolve   bool // offset must be resolved from at first
	resolving bool
	// resolveID names the resolve in flight; an answer to another is
	// ignored.
	resolveID int64
	stopped   bool
	inflight  bool
	corrID    int64
	sentAt    time.Time
	maxBytes  int32
	asked     int32
	retryAt   time.Time
	starved   bool // in fetcher.starved
	turn      bool // being served from fetcher.starved
	// lagging is set while the partition's last answer left it far behind
	// (see behind): it is fetched alone, in chunks, until it catches up;
	// otherwise with the other partitions of its leader's node. node is the node fetch it is
	// in flight in, or queued for when queued.
	lagging bool
	node    *nodeFetch
	queued  bool
}

func newFetcher(c *Consumer) *fetcher {
	return &fetcher{cons: c, parts: map[partKey]*fetchPart{}, refreshing: map[string]refreshCall{}, waiting: map[string]Offset{}, nodes: map[string]*nodeFetch{}}
}

// Receive dispatches the fetcher's messages. Once the client is closed
// under the consumer, it stops at its next message (its ticks go on until
// then), and Poll says so.
func (f *fetcher) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case actor.SystemMessage, actor.AutoReceiveMessage:
	default:
		if f.cons.client.closed.Load() {
			ctx.Stop(ctx.Self())
			f.cons.wake()
			return
		}
	}
	switch m := ctx.Message().(type) {
	case *actor.Started:
		d := max(min(f.cons.cfg.retryBackoff, 50*time.Millisecond), 5*time.Millisecond)
		f.stopTick = scheduler.NewTimerScheduler(ctx.ActorSystem().Root).SendRepeatedly(d, d, ctx.Self(), &fetcherTick{})
	case *assignPartition:
		f.onAssign(ctx, m)
	case *messages.FetchResponse:
		f.onFetchResponse(ctx, m)
	case *messages.FetchPartitionsResponse:
		f.onFetchesResponse(ctx, m)
	case *flushNodes:
		f.flushing = false
		f.sendNodes(ctx)
	case *unassignPartitions:
		f.onUnassign(m)
		ctx.Respond(&unassigned{})
	case *consumed:
		f.buffered -= m.bytes
		f.feed(ctx)
		f.stepAll(ctx)
		f.sendNodes(ctx)
	case *fetcherTick:
		f.onTick(ctx)
	case *connectionLost:
		f.onConnectionLost(ctx, m.address)
	case *actor.DeadLetterResponse:
		f.onDeadLetter(ctx, m.Target)
	case *actor.Stopping:
		if f.stopTick != nil {
			f.stopTick()
		}
	case *actor.Stopped, *actor.Restarting:
	default:
		f.cons.logger.WithField("type", fmt.Sprintf("%T", m)).Warn("unhandled message")
	}
}

func (f *fetcher) onAssign(ctx actor.Context, m *assignPartition) {
	if m.partition >= 0 {
		f.assign(ctx, m.topic, m.partition, m.at)
		return
	}
	r := f.cons.client.route(m.topic)
	if r == nil {
		f.waiting[m.topic] = m.at
		f.refresh(ctx, m.topic)
		return
	}
	for i := range r.leaders {
		f.assign(ctx, m.topic, int32(i), m.at)
	}
}

// onUnassign forgets partitions: answers to their fetches in flight are
// ignored from now on, and a resolve in flight finds them stopped.
func (f *fetcher) onUnassign(m *unassignPartitions) {
	for _, k := range m.parts {
		fp := f.parts[k]
		if fp == nil {
			continue
		}
		delete(f.parts, k)
		fp.stopped = true
		if fp.inflight {
			fp.inflight = false
			f.asked -= int64(fp.asked)
		}
		f.order = slices.DeleteFunc(f.order, func(o *fetchPart) bool { return o == fp })
		if fp.starved {
			fp.starved = false
			f.starved = slices.DeleteFunc(f.starved, func(o *fetchPart) bool { return o == fp })
		}
	}
}

func (f *fetcher) assign(ctx actor.Context, topic string, partition int32, at Offset) {
	k := partKey{topic, partition}
	fp := f.parts[k]
	if fp == nil {
		fp = &fetchPart{key: k, maxBytes: f.cons.cfg.partitionMaxBytes}
		f.parts[k] = fp
		f.order = append(f.order, fp)
	}
	fp.at, fp.stopped = at, false
	fp.corrID, fp.node = 0, nil // answers to earlier fetches are ignored
	fp.lagging = false          // until an answer tells it is far behind
	if fp.inflight {
		fp.inflight = false
		f.asked -= int64(fp.asked)
	}
	if at.kind == offsetExact {
		fp.offset, fp.resolve = at.value, false
	} else {
		fp.resolve = true
	}
	f.step(ctx, fp)
}

func (f *fetcher) stepAll(ctx actor.Context) {
	for _, fp := range f.order {
		f.step(ctx, fp)
	}
}

// starve queues fp for the byte budget.
func (f *fetcher) starve(fp *fetchPart) {
	if !fp.starved {
		fp.starved = true
		f.starved = append(f.starved, fp)
	}
}

// feed steps the starved partitions in turn while the budget lets them
// fetch. One that still finds it spent keeps its place at the head.
func (f *fetcher) feed(ctx actor.Context) {
	for len(f.starved) > 0 {
		var fp *fetchPart
		fp, f.starved = popFront(f.starved)
		fp.starved, fp.turn = false, true
		f.step(ctx, fp)
		fp.turn = false
		if fp.starved {
			f.starved = slices.Insert(f.starved[:len(f.starved)-1], 0, fp)
			return
		}
	}
}

// step moves a partition on: find its leader, resolve its offset, or fetch.
func (f *fetcher) step(ctx actor.Context, fp *fetchPart) {
	if _, refreshing := f.refreshing[fp.key.topic]; fp.stopped || fp.inflight || fp.resolving || refreshing {
		return
	}
	if time.Now().Before(fp.retryAt) {
		return
	}
	c := f.cons.client
	if fp.leader == nil {
		if fp.leader, fp.epoch = c.leaderOf(fp.key.topic, fp.key.partition); fp.leader == nil {
			f.refresh(ctx, fp.key.topic)
			return
		}
	}
	if fp.resolve {
		f.resolve(ctx, fp)
		return
	}
	if !fp.lagging {
		f.enqueue(ctx, fp)
		return
	}
	cfg := &f.cons.cfg
	if len(f.starved) > 0 && !fp.turn {
		f.starve(fp) // behind those that waited first
		return
	}
	ask := min(int64(fp.maxBytes)*chunksPerFetch, max(cfg.fetchMaxBytes, int64(fp.maxBytes)), math.MaxInt32)
	if f.buffered+f.asked > 0 && (f.buffered+f.asked+ask > cfg.maxPrefetchBytes || f.asked+ask > cfg.fetchMaxBytes) {
		ask = int64(fp.maxBytes) // a single chunk, if the budget allows that
		if f.buffered+f.asked+ask > cfg.maxPrefetchBytes || f.asked+ask > cfg.fetchMaxBytes {
			f.starve(fp)
			return
		}
	}
	f.corrID++
	fp.corrID, fp.inflight, fp.sentAt, fp.asked = f.corrID, true, time.Now(), int32(ask)
	f.asked += ask
	// Without a wait: a partition being caught up has records to read, or,
	// answered with none, has caught up and waits in its node's fetch.
	ctx.Request(fp.leader, &messages.FetchRequest{
		Topic:              fp.key.topic,
		Partition:          fp.key.partition,
		Offset:             fp.offset,
		MaxBytes:           int32(ask),
		ChunkBytes:         fp.maxBytes,
		CorrelationId:      fp.corrID,
		CurrentLeaderEpoch: proto.Int32(fp.epoch),
	})
}

// chunksPerFetch is how many partition-max-bytes chunks one fetch asks for:
// the node streams them back, reading each while the one before travels,
// so a partition being caught up never waits on a round trip per chunk.
const chunksPerFetch = 8

// resolve asks the leader for the offset fp.at names.
func (f *fetcher) resolve(ctx actor.Context, fp *fetchPart) {
	fp.resolving = true
	fp.resolveID++
	at, id := fp.at, fp.resolveID
	req := &messages.ListOffsetsRequest{Topic: fp.key.topic, Partition: fp.key.partition, Timestamp: at.listTimestamp()}
	fut := ctx.RequestFuture(fp.leader, req, f.cons.cfg.requestTimeout)
	ctx.ReenterAfter(fut, func(res any, err error) {
		if fp.resolveID != id {
			return // given up when the leader's connection dropped
		}
		fp.resolving = false
		if f.parts[fp.key] != fp {
			return // unassigned meanwhile
		}
		if fp.at != at || !fp.resolve {
			f.step(ctx, fp) // reassigned meanwhile
			return
		}
		r, ok := res.(*messages.ListOffsetsResponse)
		switch {
		case err != nil || !ok:
			failure := fmt.Errorf("%w: %T to a %T", ErrBadResponse, res, req)
			switch {
			case errors.Is(err, actor.ErrTimeout):
				failure = fmt.Errorf("%w: no answer to where to start reading in %v", ErrTimeout, f.cons.cfg.requestTimeout)
			case err != nil:
				failure = err
			}
			f.fetchFailed(fp, -1, failure)
			fp.retryAt = time.Now().Add(f.cons.cfg.retryBackoff)
			fp.leader = nil
			return
		case needsMetadata(r.GetError()):
			f.fetchFailed(fp, -1, codeError(r.GetError(), r.GetErrorMessage()))
			fp.leader = nil
			f.cons.client.forget(fp.key.topic)
			fp.retryAt = time.Now().Add(f.cons.cfg.retryBackoff)
			return
		case r.GetError() == messages.ErrorCode_OFFSET_NOT_AVAILABLE:
			// A new leader whose high watermark has yet to catch up.
			fp.retryAt = time.Now().Add(f.cons.cfg.retryBackoff)
			return
		case r.GetError() != messages.ErrorCode_NONE:
			f.cons.pushErr(fmt.Errorf("client: list offsets of %s-%d: %w", fp.key.topic, fp.key.partition, codeError(r.GetError(), r.GetErrorMessage())))
			fp.retryAt = time.Now().Add(f.cons.cfg.retryBackoff)
			return
		case r.GetOffset() < 0 && at.kind == offsetTimestamp:
			fp.at = AtEnd() // no record that recent: start at the end
		default:
			fp.offset, fp.resolve = r.GetOffset(), false
		}
		f.step(ctx, fp)
	})
}

func (f *fetcher) onFetchResponse(ctx actor.Context, m *messages.FetchResponse) {
	fp := f.parts[partKey{m.GetTopic(), m.GetPartition()}]
	if fp == nil || !fp.inflight || fp.corrID != m.GetCorrelationId() {
		return
	}
	// Records must start where the previous chunk ended; an error names
	// no offset.
	inStep := m.GetError() != messages.ErrorCode_NONE || m.GetOffset() == fp.offset
	if m.GetMore() && inStep && m.GetError() == messages.ErrorCode_NONE {
		fp.sentAt = time.Now()
		f.onRecords(fp, m.GetRecords())
		return
	}
	fp.inflight = false
	if !inStep {
		// A chunk that does not follow the last one (never sent by a
		// node, which streams chunks in order): the fetch is abandoned
		// and the next starts where the records returned so far end.
		f.asked -= int64(fp.asked)
		f.feed(ctx)
		f.step(ctx, fp)
		return
	}
	f.asked -= int64(fp.asked)
	f.feed(ctx)
	f.onAnswer(fp, m)
	f.step(ctx, fp)
	f.sendNodes(ctx)
}

// onAnswer acts on a partition's last answer to a fetch: hands its records
// to Poll, resets an offset out of range, or backs off and tells of an
// error, refreshing the metadata when the leader moved or its epoch is not
// the partition's.
func (f *fetcher) onAnswer(fp *fetchPart, m *messages.FetchResponse) {
	cfg := &f.cons.cfg
	switch code := m.GetError(); {
	case code == messages.ErrorCode_NONE:
		from := fp.offset
		read := f.onRecords(fp, m.GetRecords())
		fp.lagging = behind(read, from, fp.offset, m.GetHighWatermark(), fp.maxBytes)
	case code == messages.ErrorCode_OFFSET_OUT_OF_RANGE:
		f.onOutOfRange(fp, m)
	case needsMetadata(code) || retriable(code):
		f.fetchFailed(fp, fp.offset, codeError(code, m.GetErrorMessage()))
		if needsMetadata(code) {
			fp.leader = nil
			f.cons.client.forget(fp.key.topic)
		}
		fp.retryAt = time.Now().Add(cfg.retryBackoff)
	default:
		f.cons.pushErr(fmt.Errorf("client: fetch %s-%d at offset %d: %w", fp.key.topic, fp.key.partition, fp.offset, codeError(code, m.GetErrorMessage())))
		fp.retryAt = time.Now().Add(cfg.retryBackoff)
	}
}

// fetchFailed tells OnFetchError that fp could not be read from offset
// (-1 while resolving) and will be tried again.
func (f *fetcher) fetchFailed(fp *fetchPart, offset int64, err error) {
	if fn := f.cons.cfg.onFetchError; fn != nil {
		if fp.resolve {
			offset = -1
		}
		fn(FetchError{Topic: fp.key.topic, Partition: fp.key.partition, Offset: offset, Err: err})
	}
}

// onOutOfRange moves a partition whose fetch offset is outside its log, as
// Kafka's consumer does: to the log start when the offset is below it (its
// records were deleted), and by the reset policy when it is past the end;
// ResetNone stops the partition and fails Poll.
func (f *fetcher) onOutOfRange(fp *fetchPart, m *messages.FetchResponse) {
	cfg := &f.cons.cfg
	r := OffsetReset{
		Topic: fp.key.topic, Partition: fp.key.partition, From: fp.offset,
		LogStartOffset: m.GetLogStartOffset(), HighWatermark: m.GetHighWatermark(), Policy: cfg.reset,
	}
	switch {
	case r.BelowLogStart() || cfg.reset == ResetEarliest:
		r.To = r.LogStartOffset
	case cfg.reset == ResetLatest:
		r.To = r.HighWatermark
	default:
		fp.stopped = true
		f.cons.pushErr(fmt.Errorf("client: fetch %s-%d at offset %d: %w", fp.key.topic, fp.key.partition, fp.offset, codeError(m.GetError(), m.GetErrorMessage())))
		return
	}
	fp.offset = r.To
	if cfg.onReset != nil {
		cfg.onReset(r)
	}
}

// onRecords hands the whole batches of a fetch to Poll, advances the
// partition's offset past them, and returns their size.
func (f *fetcher) onRecords(fp *fetchPart, records []byte) int {
	var it wire.BatchIterator
	it.SkipCRC = true // Poll's decoder checks it
	it.Reset(records)
	next := fp.offset
	for it.Next() {
		h := it.Header()
		next = max(next, h.NextOffset())
	}
	end := it.Pos()
	if err := it.Err(); err != nil {
		f.cons.pushErr(fmt.Errorf("client: fetch %s-%d at offset %d: %w", fp.key.topic, fp.key.partition, fp.offset, err))
		fp.retryAt = time.Now().Add(f.cons.cfg.retryBackoff)
	}
	if end == 0 {
		if len(records) > 0 && it.Err() == nil && fp.maxBytes < 1<<30 {
			fp.maxBytes *= 2 // a batch larger than max_bytes: ask for more
		}
		return 0
	}
	fp.maxBytes = f.cons.cfg.partitionMaxBytes
	f.cons.push(fetched{topic: fp.key.topic, partition: fp.key.partition, from: fp.offset, records: records[:end]})
	f.buffered += int64(end)
	fp.offset = next
	return end
}

// behind reports whether a partition is still more than maxBytes behind
// its high watermark hw after an answer that brought read bytes of records
// and moved it from offset from to next, as far as their size tells: it is
// then caught up alone, in chunks, rather than with its node's others. An
// answer that brought nothing while there is more leaves it behind.
func behind(read int, from, next, hw int64, maxBytes int32) bool {
	switch {
	case next >= hw:
		return false
	case read <= 0 || next <= from:
		return true
	}
	return float64(hw-next)*float64(read)/float64(next-from) > float64(maxBytes)
}

func (f *fetcher) onTick(ctx actor.Context) {
	cfg := &f.cons.cfg
	now := time.Now()
	f.expireNodes(now)
	for _, fp := range f.order {
		if fp.inflight && fp.node == nil && now.Sub(fp.sentAt) > cfg.fetchMaxWait+cfg.requestTimeout {
			f.fetchFailed(fp, fp.offset, fmt.Errorf("%w: no answer to a fetch in %v", ErrTimeout, cfg.fetchMaxWait+cfg.requestTimeout))
			f.dropFetch(fp)
		}
	}
	f.feed(ctx)
	for _, fp := range f.order {
		f.step(ctx, fp)
	}
	f.sendNodes(ctx)
	if len(f.waiting) > 0 && now.After(f.waitRetryAt) {
		for topic := range f.waiting {
			f.refresh(ctx, topic)
		}
	}
}

// refresh asks for topic's metadata, then assigns partitions of a topic
// assigned whole and moves on the topic's partitions.
func (f *fetcher) refresh(ctx actor.Context, topic string) {
	if _, ok := f.refreshing[topic]; ok {
		return
	}
	f.refreshID++
	c := f.cons.client
	pid, addr := c.metadataPID()
	call := refreshCall{id: f.refreshID, address: addr}
	f.refreshing[topic] = call
	fut := ctx.RequestFuture(pid, &messages.MetadataRequest{Topics: []string{topic}}, c.contactTimeout())
	ctx.ReenterAfter(fut, func(res any, err error) {
		if f.refreshing[topic] != call {
			return // given up when the broker's connection dropped
		}
		delete(f.refreshing, topic)
		md, ok := res.(*messages.MetadataResponse)
		c.answered(addr, err == nil && ok)
		if err != nil || !ok {
			f.retryLater(topic)
			return
		}
		c.contacted.Store(true)
		c.updateRoutes(md)
		for _, t := range md.GetTopics() {
			if t.GetName() != topic || t.GetError() == messages.ErrorCode_NONE {
				continue
			}
			// The topic does not exist (or cannot be served): stop its
			// partitions and tell Poll.
			delete(f.waiting, topic)
			for _, fp := range f.order {
				if fp.key.topic == topic {
					fp.stopped = true
				}
			}
			f.cons.pushErr(fmt.Errorf("client: consume %s: %w", topic, codeError(t.GetError(), t.GetErrorMessage())))
			return
		}
		if at, ok := f.waiting[topic]; ok {
			r := c.route(topic)
			if r == nil {
				f.retryLater(topic)
				return
			}
			delete(f.waiting, topic)
			for i := range r.leaders {
				f.assign(ctx, topic, int32(i), at)
			}
		}
		for _, fp := range f.order {
			if fp.key.topic == topic {
				if fp.leader, fp.epoch = c.leaderOf(topic, fp.key.partition); fp.leader == nil {
					f.fetchFailed(fp, fp.offset, ErrNoLeader)
					fp.retryAt = time.Now().Add(f.cons.cfg.retryBackoff)
				}
				f.step(ctx, fp)
			}
		}
	})
}

// onConnectionLost asks again, at once, what the partitions led from addr
// had in flight there, which will not be answered: fetches from the offset
// the partition has reached (the chunks of a fetch that did arrive
// advanced it), and where to start reading. Their leaders come from a
// metadata refresh; one in flight to addr is given up and asked of another
// broker.
func (f *fetcher) onConnectionLost(ctx actor.Context, addr string) {
	lost := fmt.Errorf("%w: %s", ErrConnectionLost, addr)
	topics := map[string]bool{}
	for topic, call := range f.refreshing {
		if call.address == addr {
			delete(f.refreshing, topic)
			topics[topic] = true
		}
	}
	for _, fp := range f.order {
		if fp.leader == nil || fp.leader.GetAddress() != addr {
			continue
		}
		fp.leader = nil
		topics[fp.key.topic] = true
		switch {
		case fp.inflight:
			f.dropFetch(fp)
			f.fetchFailed(fp, fp.offset, lost)
		case fp.resolving:
			fp.resolving = false
			fp.resolveID++
			f.fetchFailed(fp, -1, lost)
		}
	}
	if n := f.nodes[addr]; n != nil {
		f.endNodeFetch(n)
	}
	f.feed(ctx)
	for topic := range topics {
		f.refresh(ctx, topic)
	}
}

// dropFetch gives up fp's fetch in flight: an answer to it is ignored, and
// its bytes are off the budget.
func (f *fetcher) dropFetch(fp *fetchPart) {
	fp.inflight, fp.corrID, fp.node = false, 0, nil
	f.asked -= int64(fp.asked)
}

// onDeadLetter fails at once the fetches sent to target, an actor that is
// not there (its node stopped it, or has yet to start it again), rather
// than wait out the request timeout for answers that will not come: their
// partitions fetch again from the same offsets after the retry backoff,
// from the leaders the metadata names then. protoactor names the target
// only when its connection failed; otherwise which fetch went nowhere
// cannot be told, and every fetch in flight is asked again (the answers to
// those it replaces are ignored).
func (f *fetcher) onDeadLetter(ctx actor.Context, target *actor.PID) {
	sentTo := func(pid *actor.PID) bool { return target == nil || pid.Equal(target) }
	var failed []*fetchPart
	for _, n := range f.nodes {
		if n.inflight && sentTo(n.manager) {
			failed = append(failed, f.abandonNodeFetch(n)...)
		}
	}
	for _, fp := range f.order {
		if fp.inflight && fp.node == nil && fp.leader != nil && sentTo(fp.leader) {
			f.dropFetch(fp)
			failed = append(failed, fp)
		}
	}
	gone := actor.ErrDeadLetter
	if target != nil {
		gone = fmt.Errorf("%w: %s", actor.ErrDeadLetter, target)
	}
	retryAt := time.Now().Add(f.cons.cfg.retryBackoff)
	for _, fp := range failed {
		f.fetchFailed(fp, fp.offset, gone)
		fp.leader, fp.retryAt = nil, retryAt
		f.cons.client.forget(fp.key.topic)
	}
	f.feed(ctx)
}

// retryLater backs off the partitions of topic; a topic awaiting its first
// metadata is asked for again on the next tick.
func (f *fetcher) retryLater(topic string) {
	at := time.Now().Add(f.cons.cfg.retryBackoff)
	for _, fp := range f.order {
		if fp.key.topic == topic {
			fp.retryAt = at
		}
	}
	if _, ok := f.waiting[topic]; ok {
		f.waitRetryAt = at
	}
}
