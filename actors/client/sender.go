package client

import (
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/sirupsen/logrus"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/messages"
)

// senderTick wakes the sender to check timeouts and backoffs.
type senderTick struct{}

// senderFlush has the sender send what the batches handed to it since it
// was sent made ready (see sender.flushLater).
type senderFlush struct{}

// partKey names a partition.
type partKey struct {
	topic     string
	partition int32
}

// sender is a producer's actor: it receives sealed batches (one message per
// batch), sends them to partition leaders in sequence order with at most
// MaxInFlightPerPartition awaiting an answer per partition and the bytes
// MaxInFlightPerNode allows per node (the batches a turn of its mailbox
// makes ready for one node go in one message, see flush), matches answers
// by correlation id, and on a lost answer or a retriable error sends the
// partition's batches again from the first unacknowledged one, with the
// same bytes and sequences, after RetryBackoff. When the connection to a
// node drops, the batches in flight there are sent again at once, from the
// first unacknowledged one, to the leader a metadata refresh names. Not
// shared: all access is through its mailbox.
type sender struct {
	p     *Producer
	parts map[partKey]*partSender
	nodes map[string]*nodeSender // by leader address
	ready []*nodeSender          // the nodes with requests in their outbox
	// unanswered are the batches in the outboxes that no answer will
	// complete (acks=0): flush completes them once it has sent them.
	unanswered []*batch
	// refreshing are the metadata requests in flight, by topic; an answer
	// to one no longer there is ignored.
	refreshing map[string]refreshCall
	refreshID  int64
	corrID     int64
	// flushQueued is set while a senderFlush is in the mailbox.
	flushQueued bool
	stopTick    scheduler.CancelFunc
	// backingOff are the partitions that wait for their retryAt to send
	// again: a tick tries them once it has passed.
	backingOff map[*partSender]struct{}
	// checkAt is when a tick next goes through every partition, for
	// requests past their deadline and batches past their delivery
	// timeout: no queued batch reaches either before it, and it is at
	// most fullCheckInterval after the last pass. Between passes a tick
	// looks only at backingOff, so that its cost is not that of the
	// partitions the producer has ever written to.
	checkAt time.Time
	// abandoned is set once the client is closed under the producer (see
	// closedUnder).
	abandoned bool
}

// fullCheckInterval bounds the time between a tick's passes over every
// partition.
const fullCheckInterval = time.Second

// refreshCall is a metadata request in flight: its id, and the address of
// the broker asked.
type refreshCall struct {
	id      int64
	address string
}

// partSender is the sender's state for one partition.
type partSender struct {
	key      partKey
	leader   *actor.PID
	queue    []*batch // unacknowledged batches in sequence order
	inflight int      // batches at the front of queue awaiting an answer
	// inflightBytes is the size of those batches.
	inflightBytes int
	// node is where the batches in flight went; waitingOn is the node in
	// whose waiting list ps waits for room, nil for none. A partition
	// whose leader moves while it waits waits on the new leader's node:
	// the old one, no longer written to, may never wake it, and its entry
	// there is passed over.
	node      *nodeSender
	waitingOn *nodeSender
	// leaderNode is the state of the node leader lives on, when
	// nodeLeader is leader: looked up once per leader, not per send.
	leaderNode *nodeSender
	nodeLeader *actor.PID
	retryAt    time.Time
	// seqShift is subtracted from the sequences of batches sent from now
	// on: the count of records in batches the partition refused outright,
	// whose sequences it never recorded.
	seqShift int32
	// unconfirmed counts the records of batches failed after being sent,
	// just before the queue's head: the partition may or may not have
	// them. An out-of-order answer to the head then means it does not, and
	// they join seqShift.
	unconfirmed int32
	// epochBump is added to the producer's epoch in the batches sent from
	// now on: the partition lost records it had acknowledged, and its
	// batches go on from sequence 0 under a later epoch.
	epochBump int16
}

// stamp is how ps's batches are stamped when sent now.
func (ps *partSender) stamp() stamp {
	return stamp{shift: ps.seqShift, bump: ps.epochBump}
}

// nodeSender is the sender's state for one node: the bytes of its
// requests awaiting an answer, across partitions, the partitions whose
// next batch waits for room, in the order they began to wait, and the
// requests made in this turn, to be sent together to the node's partition
// manager.
type nodeSender struct {
	bytes   int
	waiting partQueue
	manager *actor.PID
	outbox  []*messages.ProduceRequest
	// requests are the ProduceRequests awaiting an answer, by the
	// correlation id of their first batch, with when they were sent.
	requests map[int64]time.Time
}

func newSender(p *Producer) *sender {
	return &sender{
		p: p, parts: map[partKey]*partSender{}, nodes: map[string]*nodeSender{}, refreshing: map[string]refreshCall{},
		backingOff: map[*partSender]struct{}{},
	}
}

// setInFlight sets the count of ps's batches awaiting an answer, and its
// node's bytes with it: the first n batches of its queue are those in
// flight, each counted as at least minChargeOf of BatchBytes.
func (s *sender) setInFlight(ps *partSender, n int) {
	bytes := 0
	least := s.p.cfg.batchBytes / minChargeOf
	for _, b := range ps.queue[:n] {
		bytes += max(len(b.buf), least)
	}
	if ps.node != nil {
		ps.node.bytes += bytes - ps.inflightBytes
	}
	ps.inflight, ps.inflightBytes = n, bytes
}

// minChargeOf makes a batch count in its node's window as at least
// 1/minChargeOf of BatchBytes: at most minChargeOf times
// MaxInFlightPerNode batches are in flight to a node, however small. With
// many partitions each batch is a few records, and a node's per-batch
// costs outweigh its per-record ones; a window of bytes alone would fill
// with thousands of them, while the partitions' open batches, which grow
// while they wait, stayed as small.
const minChargeOf = 64

// nodeWindow is the bytes a node may have in flight: MaxInFlightPerNode
// batches of BatchBytes.
func (s *sender) nodeWindow() int {
	return s.p.cfg.maxInFlightPerNode * s.p.cfg.batchBytes
}

// hasRoom reports whether n can take another batch: while its bytes in
// flight are below the window, so that the last batch sent may cross it,
// by less than a batch, and none waits behind a larger one; and while
// fewer than MaxInFlightPerNode requests await an answer, or this turn has
// begun one, which the batch joins. As a Kafka producer sends a node a
// request only while it has fewer than
// max.in.flight.requests.per.connection, each with every batch ready:
// with many partitions, an answer freeing room for k batches otherwise
// sent k batches in a request, and its answer freed k again, so that
// requests stayed as small as the first ones, 1.3 batches each at 10,000
// partitions.
func (s *sender) hasRoom(n *nodeSender) bool {
	return n.bytes < s.nodeWindow() &&
		(s.p.cfg.acks == 0 || len(n.requests) < s.p.cfg.maxInFlightPerNode || len(n.outbox) > 0)
}

// answered notes that the ProduceRequests whose first batch had
// correlation id corrID was answered.
func (s *sender) answered(corrID int64) {
	for _, n := range s.nodes {
		if _, ok := n.requests[corrID]; ok {
			delete(n.requests, corrID)
			return
		}
	}
}

// forgetRequests stops counting, against their nodes' room, the requests
// older than the request timeout: their answers were lost (remote delivery
// is at most once), and their batches are sent again as theirs time out.
func (s *sender) forgetRequests(now time.Time) {
	for _, n := range s.nodes {
		for id, sent := range n.requests {
			if now.Sub(sent) >= s.p.cfg.requestTimeout {
				delete(n.requests, id)
			}
		}
	}
}

// nodeOf returns the state of the node that pid lives on.
func (s *sender) nodeOf(pid *actor.PID) *nodeSender {
	n := s.nodes[pid.GetAddress()]
	if n == nil {
		n = &nodeSender{manager: actor.NewPID(pid.GetAddress(), actors.PartitionManagerName), requests: map[int64]time.Time{}}
		s.nodes[pid.GetAddress()] = n
	}
	return n
}

// wake lets n's waiting partitions send, in the order they began to wait,
// while n has room.
func (s *sender) wake(ctx actor.Context, n *nodeSender) {
	for n.waiting.len() > 0 && s.hasRoom(n) {
		ps := n.waiting.pop()
		if ps.waitingOn != n {
			continue // it waits elsewhere now, or no longer
		}
		ps.waitingOn = nil
		s.trySend(ctx, ps)
	}
}

// partQueue is a first-in first-out queue of partitions. Taking one off
// costs the same whatever its length: a node's list of partitions waiting
// for room is as long as the partitions written to, and is taken from at
// each answer.
type partQueue struct {
	items []*partSender
	head  int // items before it are taken
}

func (q *partQueue) len() int { return len(q.items) - q.head }

func (q *partQueue) push(ps *partSender) { q.items = append(q.items, ps) }

// pop takes the first partition off q, which is not empty. The taken
// slots are reclaimed in one copy once they are half of q's slice.
func (q *partQueue) pop() *partSender {
	ps := q.items[q.head]
	q.items[q.head] = nil
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	} else if q.head >= 64 && 2*q.head >= len(q.items) {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	return ps
}

// popFront takes the first element off q, clearing its slot.
func popFront[T any](q []T) (T, []T) {
	first := q[0]
	n := copy(q, q[1:])
	var zero T
	q[n] = zero
	return first, q[:n]
}

// wakeAll wakes every node's waiting partitions.
func (s *sender) wakeAll(ctx actor.Context) {
	for _, n := range s.nodes {
		s.wake(ctx, n)
	}
}

// tickInterval is how often the sender checks timeouts and backoffs.
func (s *sender) tickInterval() time.Duration {
	d := min(s.p.cfg.requestTimeout/4, 50*time.Millisecond)
	if s.p.cfg.retryBackoff > 0 {
		d = min(d, s.p.cfg.retryBackoff)
	}
	return max(d, 5*time.Millisecond)
}

// Receive dispatches the sender's messages.
func (s *sender) Receive(ctx actor.Context) {
	if s.closedUnder(ctx) {
		return
	}
	if _, ok := ctx.Message().(*batch); !ok {
		// What the batches before left in the outboxes goes first:
		// nothing but a batch's turn may change the batches in them.
		s.flush(ctx)
	}
	switch m := ctx.Message().(type) {
	case *actor.Started:
		d := s.tickInterval()
		s.stopTick = scheduler.NewTimerScheduler(ctx.ActorSystem().Root).SendRepeatedly(d, d, ctx.Self(), &senderTick{})
	case *batch:
		s.onBatch(ctx, m)
		s.flushLater(ctx)
		return
	case *senderFlush:
		s.flushQueued = false
	case *messages.ProduceResponses:
		if rs := m.GetResponses(); len(rs) > 0 {
			s.answered(rs[0].GetCorrelationId())
		}
		for _, r := range m.GetResponses() {
			s.onResponse(ctx, r)
		}
	case *messages.ProduceResponse:
		s.answered(m.GetCorrelationId())
		s.onResponse(ctx, m)
	case *senderTick:
		s.onTick(ctx)
	case *connectionLost:
		s.onConnectionLost(ctx, m.address)
	case *actor.Stopping:
		if s.stopTick != nil {
			s.stopTick()
		}
		s.failQueued()
	case *actor.Stopped, *actor.Restarting:
	default:
		s.p.logger.WithField("type", fmt.Sprintf("%T", m)).Warn("unhandled message")
	}
	s.flush(ctx)
}

// failQueued fails every batch the sender holds with ErrClosed.
func (s *sender) failQueued() {
	for _, ps := range s.parts {
		for _, b := range ps.queue {
			s.complete(b, -1, ErrClosed)
		}
		ps.queue, ps.inflight = nil, 0
	}
}

// closedUnder reports whether the client was closed under the producer,
// which nothing the sender sends could then reach: the first message after
// stops its ticks and fails the batches it holds with ErrClosed, as
// Shutdown would, and each batch that comes after fails with ErrClosed on
// arrival, so that every promise is called and Flush returns.
func (s *sender) closedUnder(ctx actor.Context) bool {
	switch ctx.Message().(type) {
	case actor.SystemMessage, actor.AutoReceiveMessage:
		return false
	}
	if !s.p.client.closed.Load() {
		return false
	}
	if !s.abandoned {
		s.abandoned = true
		if s.stopTick != nil {
			s.stopTick()
		}
		s.failQueued()
	}
	if b, ok := ctx.Message().(*batch); ok {
		s.complete(b, -1, ErrClosed)
	}
	return true
}

// flushLater has the requests made in a batch's turn sent once the
// messages already in the mailbox have been handled, so that they go with
// those of the batches after it. An answer frees room for as many batches
// as it answers, and completing them seals as many partitions' next
// batches, which reach the sender one message each: sent at each, every
// one would be a request of its own, and the node's answers as many.
func (s *sender) flushLater(ctx actor.Context) {
	if s.flushQueued || len(s.ready) == 0 && len(s.unanswered) == 0 {
		return
	}
	s.flushQueued = true
	ctx.Send(ctx.Self(), &senderFlush{})
}

// flush sends each node the requests made for it in this turn, in the
// order they were made, in ProduceRequests of at most BatchBytes of
// records (a larger batch goes alone), as a Kafka producer sends one
// request per node with a batch for each of its partitions: with many
// partitions, their small batches cost the node one message, not one each.
// Requests travel to a node in order, through one stream and one mailbox,
// so a partition's batches reach it in sequence.
func (s *sender) flush(ctx actor.Context) {
	limit := s.p.cfg.batchBytes
	var now time.Time
	if len(s.ready) > 0 {
		now = time.Now()
	}
	for _, n := range s.ready {
		for reqs := n.outbox; len(reqs) > 0; {
			k, size := 1, len(reqs[0].Records)
			for k < len(reqs) && size+len(reqs[k].Records) <= limit {
				size += len(reqs[k].Records)
				k++
			}
			// Taken before the send: a local receiver holds the very
			// requests, and may change them.
			first := reqs[0].CorrelationId
			ctx.Request(n.manager, s.p.client.transport.OutgoingProduces(ctx.ActorSystem(), n.manager, reqs[:k]))
			if s.p.cfg.acks != 0 {
				n.requests[first] = now
			}
			s.p.requests.Add(1)
			s.p.sentBatches.Add(int64(k))
			reqs = reqs[k:]
		}
		clear(n.outbox)
		n.outbox = n.outbox[:0]
	}
	clear(s.ready)
	s.ready = s.ready[:0]
	for _, b := range s.unanswered {
		s.complete(b, -1, nil)
	}
	clear(s.unanswered)
	s.unanswered = s.unanswered[:0]
}

func (s *sender) part(topic string, partition int32) *partSender {
	k := partKey{topic, partition}
	ps := s.parts[k]
	if ps == nil {
		ps = &partSender{key: k}
		s.parts[k] = ps
	}
	return ps
}

func (s *sender) onBatch(ctx actor.Context, b *batch) {
	if b.err != nil {
		s.complete(b, -1, fmt.Errorf("client: seal batch: %w", b.err))
		return
	}
	ps := s.part(b.topic, b.partition)
	ps.queue = append(ps.queue, b)
	s.noteDeadline(b.sealed.Add(s.p.cfg.deliveryTimeout))
	if b.owner != nil {
		if limit := b.owner.limit(s.p.cfg.batchBytes); int64(len(b.buf)) > limit {
			s.splitLarger(ps, ps.inflight, limit, false) // sealed before the partition's limit was lowered
		}
	}
	s.trySend(ctx, ps)
}

// trySend sends the partition's unsent batches while the in-flight bounds
// allow, unless it is backing off or waiting for metadata. A partition
// whose leader has moved sends nothing more until its batches in flight to
// the old leader are answered or time out. One that only its node's bound
// holds back joins the node's waiting list.
func (s *sender) trySend(ctx actor.Context, ps *partSender) {
	if _, refreshing := s.refreshing[ps.key.topic]; len(ps.queue) == ps.inflight || refreshing {
		return
	}
	now := time.Now()
	if now.Before(ps.retryAt) {
		return
	}
	if ps.leader == nil {
		ps.leader = s.p.client.leader(ps.key.topic, ps.key.partition)
		if ps.leader == nil {
			s.refresh(ctx, ps.key.topic)
			return
		}
	}
	if ps.nodeLeader != ps.leader {
		ps.nodeLeader, ps.leaderNode = ps.leader, s.nodeOf(ps.leader)
	}
	node := ps.leaderNode
	if ps.inflight > 0 && ps.node != node {
		return
	}
	ps.node = node
	cfg := &s.p.cfg
	for ps.inflight < len(ps.queue) && (cfg.acks == 0 || ps.inflight < cfg.maxInFlight) {
		if cfg.acks != 0 && !s.hasRoom(node) {
			if ps.waitingOn != node {
				ps.waitingOn = node
				node.waiting.push(ps)
			}
			return
		}
		b := ps.queue[ps.inflight]
		if cfg.idempotent && b.stamped != ps.stamp() {
			if b.attempts > 0 {
				// A stream may still be about to write the bytes sent
				// before (see remote.OutgoingProduces).
				b.buf = slices.Clone(b.buf)
			}
			b.stamped = ps.stamp()
			stampProducer(b.buf, s.p.epoch(b.stamped), subSeq(b.baseSeq, b.stamped.shift))
		}
		s.corrID++
		b.corrID = s.corrID
		b.sentAt = now
		b.attempts++
		s.leaveUnsent(b)
		deadline := s.requestDeadline(b)
		s.noteDeadline(deadline)
		// Sent by flush, at the end of this turn. The stream writes
		// b.buf where it is, so a resend stamps new sequence numbers
		// into a copy, and only a batch answered on its first send goes
		// back to the pool (see complete). A batch is sent at most once
		// in a turn: one sent in it cannot time out in it.
		if len(node.outbox) == 0 {
			s.ready = append(s.ready, node)
		}
		node.outbox = append(node.outbox, &messages.ProduceRequest{
			Topic:         ps.key.topic,
			Partition:     ps.key.partition,
			Acks:          cfg.acks,
			TimeoutMs:     int32(min(max(deadline.Sub(now).Milliseconds(), 1), 1<<31-1)),
			Records:       b.buf,
			CorrelationId: b.corrID,
		})
		if cfg.acks == 0 {
			// Done once handed to the stream, which flush does.
			ps.queue = ps.queue[1:]
			s.unanswered = append(s.unanswered, b)
			continue
		}
		s.setInFlight(ps, ps.inflight+1)
	}
}

func (s *sender) onResponse(ctx actor.Context, m *messages.ProduceResponse) {
	ps := s.parts[partKey{m.GetTopic(), m.GetPartition()}]
	if ps == nil {
		return
	}
	i := 0
	for i < ps.inflight && ps.queue[i].corrID != m.GetCorrelationId() {
		i++
	}
	if i == ps.inflight {
		return // an answer to a request sent before a resend
	}
	b := ps.queue[i]
	node := ps.node
	defer s.wake(ctx, node)
	code := m.GetError()
	switch {
	case code == messages.ErrorCode_NONE || code == messages.ErrorCode_DUPLICATE_SEQUENCE_NUMBER:
		ps.unconfirmed = 0
		if i > 0 && s.p.cfg.idempotent {
			s.completeBefore(ps, i, m.GetBaseOffset())
			i = 0
		}
		s.remove(ps, i)
		s.setInFlight(ps, ps.inflight-1)
		s.complete(b, m.GetBaseOffset(), nil)
		s.trySend(ctx, ps)
	case code == messages.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER && i == 0 && ps.unconfirmed != 0 && b.stamped == ps.stamp():
		// The batches failed before the head never reached the log:
		// renumber from the partition's last sequence and resend.
		ps.seqShift = addSeq(ps.seqShift, ps.unconfirmed)
		ps.unconfirmed = 0
		b.lastErr = codeError(code, m.GetErrorMessage())
		s.backoff(ps)
	case code == messages.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER && i == 0 && b.stamped == ps.stamp() &&
		s.p.epoch(ps.stamp()) < math.MaxInt16:
		// Everything before the head was acknowledged, yet the partition
		// expects another sequence: it lost records it had acknowledged
		// (acks=1 and a new leader without them, or an unclean election),
		// or its state of this producer. As Kafka's producer does
		// (KIP-360), the partition's batches go on from sequence 0 under
		// the next epoch, which it takes as a new start. The head was
		// refused, so nothing is written twice.
		ps.epochBump++
		ps.seqShift = b.baseSeq
		b.lastErr = codeError(code, m.GetErrorMessage())
		s.p.logger.WithFields(logrus.Fields{"topic": ps.key.topic, "partition": ps.key.partition, "epoch": s.p.epoch(ps.stamp())}).
			Warn("the partition lost records it had acknowledged, or this producer's state: its batches go on under a new producer epoch")
		s.backoff(ps)
	case retriable(code) || code == messages.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER:
		// An out-of-order sequence after the first batch means an earlier
		// request was lost: resend from the first unacknowledged batch.
		b.lastErr = codeError(code, m.GetErrorMessage())
		if needsMetadata(code) {
			ps.leader = nil
			s.p.client.forget(ps.key.topic)
		}
		s.backoff(ps)
	case code == messages.ErrorCode_MESSAGE_TOO_LARGE && len(b.records) > 1 && s.splitTooLarge(ps, i, m.GetMaxMessageBytes()):
		s.trySend(ctx, ps)
	default:
		s.remove(ps, i)
		s.setInFlight(ps, ps.inflight-1)
		if s.p.cfg.idempotent {
			ps.seqShift = addSeq(ps.seqShift, int32(len(b.records)))
			s.backoff(ps) // later batches in flight will be refused: resend them renumbered
		}
		s.complete(b, -1, codeError(code, m.GetErrorMessage()))
		s.trySend(ctx, ps)
	}
}

// splitTooLarge replaces the batch in flight at i, which its partition
// refused whole as larger than the topic's max.message.bytes (maxBytes,
// or unknown when 0), with batches of its records that fit, or with two
// halves of them when the limit is unknown, as Kafka's producer splits
// such a batch; the partition's later batches are sealed within the same
// bound. With idempotence the new batches take its place in sequence and
// everything in flight is sent again after them in order: the partition
// refuses what follows a missing sequence, and recognises a resend of
// what it took. Without, they are sent after the batches in flight, which
// it may have taken. It reports false, leaving the batch to fail, when the
// records cannot be batched again.
func (s *sender) splitTooLarge(ps *partSender, i int, maxBytes int32) bool {
	b := ps.queue[i]
	limit := int64(maxBytes)
	if limit <= 0 {
		limit = int64(len(b.buf) / 2)
	}
	parts, err := s.p.split(b, limit)
	if err != nil {
		s.p.logger.WithError(err).Warn("could not split a batch refused as too large")
		return false
	}
	if b.owner != nil {
		b.owner.lowerLimit(s.p.cfg.batchBytes, limit)
	}
	if s.p.cfg.idempotent {
		ps.queue = slices.Replace(ps.queue, i, i+1, parts...)
		s.backoff(ps)
		s.retryAfter(ps, time.Time{})
		// Nothing after the refused batch is in the log: the partition
		// takes a producer's batches only in sequence.
		s.splitLarger(ps, i+len(parts), limit, true)
		return true
	}
	s.remove(ps, i)
	s.setInFlight(ps, ps.inflight-1)
	ps.queue = slices.Insert(ps.queue, ps.inflight, parts...)
	s.splitLarger(ps, ps.inflight, limit, false)
	return true
}

// splitLarger batches again, within limit, the batches of ps at from and
// after, not in flight, that were sealed larger, rather than have the
// partition refuse each. It leaves a batch sent before unless sent is set
// (the caller knows the partition has not taken it): one it may have taken
// keeps its sequences, as it recognises a resend only as the same batch.
func (s *sender) splitLarger(ps *partSender, from int, limit int64, sent bool) {
	for j := max(from, ps.inflight); j < len(ps.queue); j++ {
		b := ps.queue[j]
		if (b.attempts > 0 && !sent) || int64(len(b.buf)) <= limit || len(b.records) < 2 {
			continue
		}
		parts, err := s.p.split(b, limit)
		if err != nil {
			continue // sent as it is, to be refused and failed
		}
		ps.queue = slices.Replace(ps.queue, j, j+1, parts...)
		j += len(parts) - 1
	}
}

// completeBefore completes the i batches in flight before one the partition
// took at baseOffset. A partition takes an idempotent producer's batches
// only in sequence, so they are in the log, just before it: their answers
// were lost. Resent, each would be refused as out of order once its
// sequence is no longer among the last topic.ProducerBatchesKept batches
// the partition remembers, and the producer would resend it until its
// delivery timeout.
func (s *sender) completeBefore(ps *partSender, i int, baseOffset int64) {
	done := make([]*batch, i)
	copy(done, ps.queue[:i])
	offsets := make([]int64, i)
	next := baseOffset
	for j := i - 1; j >= 0; j-- {
		next -= int64(len(done[j].records))
		offsets[j] = -1
		if baseOffset >= 0 {
			offsets[j] = next
		}
	}
	n := copy(ps.queue, ps.queue[i:])
	clear(ps.queue[n:])
	ps.queue = ps.queue[:n]
	s.setInFlight(ps, ps.inflight-i)
	for j, b := range done {
		s.complete(b, offsets[j], nil)
	}
}

// backoff marks every in-flight batch of ps as unsent, to be sent again
// after RetryBackoff, and fails those out of retries or time.
func (s *sender) backoff(ps *partSender) {
	s.setInFlight(ps, 0)
	s.retryAfter(ps, time.Now().Add(s.p.cfg.retryBackoff))
	s.expire(ps, time.Now())
}

// expire fails the unsent batches of ps that are out of retries or past the
// delivery timeout. Only a prefix of the queue is failed, so that the rest
// keeps its order.
func (s *sender) expire(ps *partSender, now time.Time) {
	cfg := &s.p.cfg
	for ps.inflight < len(ps.queue) {
		b := ps.queue[ps.inflight]
		var err error
		switch {
		case b.attempts > cfg.retries:
			err = b.lastErr
			if err == nil {
				err = ErrTimeout
			}
		case now.Sub(b.sealed) > cfg.deliveryTimeout:
			err = ErrDeliveryTimeout
			if b.lastErr != nil {
				err = fmt.Errorf("%w (last error: %w)", ErrDeliveryTimeout, b.lastErr)
			}
		}
		if err == nil {
			return
		}
		s.remove(ps, ps.inflight)
		if s.p.cfg.idempotent {
			if b.attempts > 0 {
				ps.unconfirmed = addSeq(ps.unconfirmed, int32(len(b.records)))
			} else {
				ps.seqShift = addSeq(ps.seqShift, int32(len(b.records)))
			}
		}
		s.complete(b, -1, err)
	}
}

// requestDeadline is when the request carrying b, sent at b.sentAt, is
// given up on: after ProducerRequestTimeout, but never past b's delivery
// deadline, so that a record is failed at its DeliveryTimeout and not up
// to a request timeout later.
func (s *sender) requestDeadline(b *batch) time.Time {
	cfg := &s.p.cfg
	return minTime(b.sentAt.Add(cfg.requestTimeout), b.sealed.Add(cfg.deliveryTimeout))
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// retryAfter makes ps wait until at (none when zero) before it sends again.
func (s *sender) retryAfter(ps *partSender, at time.Time) {
	ps.retryAt = at
	if at.IsZero() {
		delete(s.backingOff, ps)
	} else {
		s.backingOff[ps] = struct{}{}
	}
}

// noteDeadline brings the next pass over every partition forward to t.
func (s *sender) noteDeadline(t time.Time) {
	if t.Before(s.checkAt) {
		s.checkAt = t
	}
}

// onTick sends what waited for a backoff to end and, when a deadline may
// have passed (see checkAt), goes through every partition.
func (s *sender) onTick(ctx actor.Context) {
	now := time.Now()
	s.forgetRequests(now)
	if !now.Before(s.checkAt) {
		s.checkAll(ctx, now)
	} else {
		for ps := range s.backingOff {
			if !now.Before(ps.retryAt) {
				delete(s.backingOff, ps)
				s.trySend(ctx, ps)
			}
		}
	}
	s.wakeAll(ctx)
}

// checkAll fails the requests past their deadline and the batches past
// their delivery timeout, sends what each partition may, and sets checkAt
// to the earliest deadline left, at most fullCheckInterval away.
func (s *sender) checkAll(ctx actor.Context, now time.Time) {
	s.checkAt = now.Add(fullCheckInterval)
	clear(s.backingOff)
	for _, ps := range s.parts {
		for i := 0; i < ps.inflight; i++ {
			b := ps.queue[i]
			if now.After(s.requestDeadline(b)) {
				b.lastErr = ErrTimeout
				s.backoff(ps)
				break
			}
		}
		if ps.inflight == 0 {
			s.expire(ps, now)
		}
		s.trySend(ctx, ps)
		if now.Before(ps.retryAt) {
			s.backingOff[ps] = struct{}{}
		}
		for i, b := range ps.queue {
			if i < ps.inflight {
				s.noteDeadline(s.requestDeadline(b))
			} else {
				s.noteDeadline(b.sealed.Add(s.p.cfg.deliveryTimeout))
			}
		}
	}
}

// refresh asks for topic's metadata, then sends what waits for it.
func (s *sender) refresh(ctx actor.Context, topic string) {
	if _, ok := s.refreshing[topic]; ok {
		return
	}
	s.refreshID++
	c := s.p.client
	pid, addr := c.metadataPID()
	call := refreshCall{id: s.refreshID, address: addr}
	s.refreshing[topic] = call
	f := ctx.RequestFuture(pid, &messages.MetadataRequest{Topics: []string{topic}}, c.contactTimeout())
	ctx.ReenterAfter(f, func(res any, err error) {
		if s.refreshing[topic] != call {
			return // given up when the broker's connection dropped
		}
		delete(s.refreshing, topic)
		md, ok := res.(*messages.MetadataResponse)
		c.answered(addr, err == nil && ok)
		if err == nil && ok {
			c.contacted.Store(true)
			c.updateRoutes(md)
		}
		now := time.Now()
		for k, ps := range s.parts {
			if k.topic != topic {
				continue
			}
			ps.leader = c.leader(k.topic, k.partition)
			if ps.leader == nil {
				s.setInFlight(ps, 0) // sent to a leader that is gone
				s.retryAfter(ps, now.Add(s.p.cfg.retryBackoff))
				for _, b := range ps.queue[ps.inflight:] {
					if b.lastErr == nil || errors.Is(b.lastErr, ErrTimeout) {
						b.lastErr = &Error{Code: messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, Message: "no leader for " + topic}
					}
				}
				s.expire(ps, now)
				continue
			}
			s.trySend(ctx, ps)
		}
		s.wakeAll(ctx)
		s.flush(ctx)
	})
}

// onConnectionLost sends again, at once, the batches in flight to the node
// at addr, which will not be answered: every partition that had some there
// marks them unsent, in their sequence order at the head of its queue, and
// waits for a metadata refresh to name its leader. A metadata request in
// flight to addr is given up and asked of another broker.
func (s *sender) onConnectionLost(ctx actor.Context, addr string) {
	lost := fmt.Errorf("%w: %s", ErrConnectionLost, addr)
	now := time.Now()
	topics := map[string]bool{}
	for topic, call := range s.refreshing {
		if call.address == addr {
			delete(s.refreshing, topic)
			topics[topic] = true
		}
	}
	node := s.nodes[addr]
	if node != nil {
		clear(node.requests) // their answers will not come
	}
	for _, ps := range s.parts {
		inflight := node != nil && ps.node == node && ps.inflight > 0
		if !inflight && (ps.leader == nil || ps.leader.GetAddress() != addr) {
			continue
		}
		ps.leader = nil
		topics[ps.key.topic] = true
		if inflight {
			for _, b := range ps.queue[:ps.inflight] {
				b.lastErr = lost
			}
			s.setInFlight(ps, 0)
			s.retryAfter(ps, time.Time{})
			s.expire(ps, now)
		}
	}
	if node != nil {
		s.wake(ctx, node) // its waiting partitions look for their leader
	}
	for topic := range topics {
		s.refresh(ctx, topic)
	}
}

// remove takes the batch at i out of the queue.
func (s *sender) remove(ps *partSender, i int) {
	copy(ps.queue[i:], ps.queue[i+1:])
	ps.queue[len(ps.queue)-1] = nil
	ps.queue = ps.queue[:len(ps.queue)-1]
}

// complete returns b's bytes to the buffer, calls the promises of its
// records, and recycles it when no broker can still hold its bytes.
func (s *sender) complete(b *batch, baseOffset int64, err error) {
	// The bytes are released first, and the batch no longer counted
	// outstanding: a caller woken by a promise finds them no longer
	// buffered, and, producing again, finds the producer idle if it is, so
	// that its record is sent at once as the one before was.
	s.p.release(b.bytes)
	owner, topic := b.owner, b.inTopic
	if owner != nil {
		// An open batch may wait for the partition to be idle, or for
		// room in flight after lingering (see Producer.inFlightFull).
		if n := s.p.addOutstanding(owner, -1); n == 0 || int(n) == s.p.cfg.maxInFlight-1 {
			s.p.sealReady(topic, owner)
		}
	}
	for i, pd := range b.records {
		if err == nil {
			if baseOffset >= 0 {
				pd.record.Offset = baseOffset + int64(i)
			} else {
				pd.record.Offset = -1
			}
		}
		s.callPromise(pd, err)
	}
	s.leaveUnsent(b)
	if s.p.cfg.acks != 0 && b.attempts == 1 && err == nil {
		s.p.recycle(b)
	}
}

// leaveUnsent takes b, sent or completed, out of its partition's unsent
// batches; when it was the last, the open batch may be sealed if it was
// held open (see Producer.holdOpen).
func (s *sender) leaveUnsent(b *batch) {
	if !b.unsent {
		return
	}
	b.unsent = false
	if b.owner != nil && b.owner.unsent.Add(-1) == 0 && b.owner.held.Load() {
		s.p.sealReady(b.inTopic, b.owner)
	}
}

// callPromise calls a record's promise; a panic in it is logged with its
// stack rather than allowed to restart the sender and lose its state.
func (s *sender) callPromise(pd pending, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.p.logger.WithField("panic", r).WithField("stack", string(debug.Stack())).Error("produce promise panicked")
		}
	}()
	pd.promise(pd.record, err)
}
