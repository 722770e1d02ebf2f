package client

import (
	"fmt"
	"math"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/messages"
)

// nodeFetch is a consumer's fetch of several partitions that one node
// leads: one FetchPartitionsRequest in flight at a time to the node's
// partition manager, carrying every partition of that node that may fetch
// and is not being caught up (see fetchPart.lagging), which the node holds
// until min_bytes arrive across them or max_wait passes. Owned by the
// fetcher.
type nodeFetch struct {
	address string
	manager *actor.PID
	// queue are the partitions waiting for the next request, in the order
	// they came; a partition that no longer may fetch from this node by
	// the time it goes is left out then.
	queue []*fetchPart
	// rotate is where the next request starts in its queue, so that no
	// partition is always first to the bytes of max_bytes.
	rotate int
	// What is in flight: the request's correlation id, when it was sent,
	// its max_bytes, and its partitions.
	inflight bool
	corrID   int64
	sentAt   time.Time
	asked    int64
	parts    []*fetchPart
}

// flushNodes has the fetcher send the node fetches that partitions were
// queued for while it handled its messages.
type flushNodes struct{}

// minPartShare is the least max_bytes a partition's part of a node fetch
// asks for when the budget is shared between many partitions.
const minPartShare = 4 << 10

// enqueue queues fp, which may fetch, for the next fetch of its leader's
// node.
func (f *fetcher) enqueue(ctx actor.Context, fp *fetchPart) {
	addr := fp.leader.GetAddress()
	if fp.queued && fp.node.address == addr {
		return
	}
	n := f.nodes[addr]
	if n == nil {
		n = &nodeFetch{address: addr, manager: actor.NewPID(addr, actors.PartitionManagerName)}
		f.nodes[addr] = n
	}
	fp.queued, fp.node = true, n
	n.queue = append(n.queue, fp)
	if (!n.inflight || time.Since(n.sentAt) >= joinAfter) && !f.flushing {
		f.flushing = true
		ctx.Send(ctx.Self(), &flushNodes{})
	}
}

// sendNodes sends each node's fetch that has partitions queued, while the
// byte budget allows: at once when none is in flight, and in place of the
// one in flight, with it partitions and those queued, once that one has
// been out joinAfter (see sendNode).
func (f *fetcher) sendNodes(ctx actor.Context) {
	now := time.Now()
	for _, n := range f.nodes {
		if len(n.queue) > 0 && (!n.inflight || now.Sub(n.sentAt) >= joinAfter) {
			f.sendNode(ctx, n)
		}
	}
}

// joinAfter is how long a node fetch is out before partitions that may
// fetch from the node and are not in it (assigned since, or caught up
// alone) have it replaced by one that names them too, rather than wait for
// its answer, which the node may hold for up to FetchMaxWait: the node
// answers the one replaced, and the fetcher ignores that answer. Those
// that come sooner wait until then, so that a node fetch is replaced at
// most once per joinAfter.
const joinAfter = 20 * time.Millisecond

// sendNode sends n's fetch of the partitions queued that still may fetch
// from it, and of those of its fetch in flight, if any, which it replaces,
// if the budget has room for it: max_bytes is what room the other fetches
// in flight and the bytes not yet polled leave (see FetchMaxBytes and
// MaxPrefetchBytes), up to the node's share of half FetchMaxBytes (but at
// least PartitionMaxBytes), so that the node fetches, which the nodes may
// hold until FetchMaxWait, leave the other half to the partitions being
// caught up; each partition asks its PartitionMaxBytes, or its share of
// max_bytes when less, down to minPartShare. A partition whose records do
// not all fit is caught up alone next.
func (f *fetcher) sendNode(ctx actor.Context, n *nodeFetch) {
	cfg := &f.cons.cfg
	others := f.asked - n.asked // n.asked is 0 with nothing in flight
	room := min(cfg.fetchMaxBytes-others, cfg.maxPrefetchBytes-f.buffered-others, math.MaxInt32)
	if f.buffered+others > 0 && room < int64(cfg.partitionMaxBytes) {
		return // once budget is freed
	}
	room = max(min(room, cfg.fetchMaxBytes/2/f.activeNodes()), int64(cfg.partitionMaxBytes))
	parts := f.takeQueue(n)
	if len(parts) == 0 {
		return
	}
	var replaces int64
	if n.inflight {
		replaces = n.corrID
		for _, fp := range n.parts {
			if fp.inflight && fp.node == n && fp.corrID == n.corrID {
				parts = append(parts, fp)
			}
		}
	}
	start := n.rotate % len(parts)
	n.rotate++
	parts = append(parts[start:], parts[:start]...)
	share := max(room/int64(len(parts)), minPartShare)
	f.corrID++
	req := &messages.FetchPartitionsRequest{
		CorrelationId: f.corrID,
		MinBytes:      cfg.fetchMinBytes,
		MaxWaitMs:     int32(cfg.fetchMaxWait.Milliseconds()),
		MaxBytes:      int32(room),
		Partitions:    make([]*messages.FetchPartition, len(parts)),
		Replaces:      replaces,
	}
	now := time.Now()
	for i, fp := range parts {
		req.Partitions[i] = &messages.FetchPartition{
			Topic: fp.key.topic, Partition: fp.key.partition, Offset: fp.offset,
			MaxBytes: int32(min(int64(fp.maxBytes), share)), CurrentLeaderEpoch: proto.Int32(fp.epoch),
		}
		fp.inflight, fp.node, fp.corrID, fp.sentAt, fp.asked = true, n, f.corrID, now, 0
	}
	f.asked = others + room
	n.inflight, n.corrID, n.sentAt, n.asked, n.parts = true, f.corrID, now, room, parts
	ctx.Request(n.manager, req)
}

// activeNodes is how many nodes have partitions to fetch, in flight or
// queued.
func (f *fetcher) activeNodes() int64 {
	var n int64
	for _, node := range f.nodes {
		if node.inflight || len(node.queue) > 0 {
			n++
		}
	}
	return max(n, 1)
}

// takeQueue empties n's queue and returns the partitions in it that still
// may fetch from n.
func (f *fetcher) takeQueue(n *nodeFetch) []*fetchPart {
	var parts []*fetchPart
	for _, fp := range n.queue {
		if fp.node != n || !fp.queued {
			continue // queued for another node since, or given up
		}
		fp.queued = false
		if f.parts[fp.key] != fp || fp.stopped || fp.inflight || fp.resolve || fp.lagging || fp.leader.GetAddress() != n.address {
			fp.node = nil
			continue
		}
		parts = append(parts, fp)
	}
	clear(n.queue)
	n.queue = n.queue[:0]
	return parts
}

// onFetchesResponse takes a node's answer for several partitions: each
// part as a partition's last answer to a fetch (see onAnswer). A partition
// the answer leaves out fetches again.
func (f *fetcher) onFetchesResponse(ctx actor.Context, m *messages.FetchPartitionsResponse) {
	var n *nodeFetch
	for _, candidate := range f.nodes {
		if candidate.inflight && candidate.corrID == m.GetCorrelationId() {
			n = candidate
		}
	}
	if n == nil {
		return // given up, or not ours
	}
	parts := n.parts
	f.endNodeFetch(n)
	if code := m.GetError(); code != messages.ErrorCode_NONE {
		// Refused whole, which this fetcher's requests never are: told,
		// and asked again after a while.
		err := fmt.Errorf("client: fetch of %d partitions from %s: %w", len(parts), n.address, codeError(code, m.GetErrorMessage()))
		f.cons.pushErr(err)
		for _, fp := range parts {
			fp.retryAt = time.Now().Add(f.cons.cfg.retryBackoff)
		}
	}
	for _, r := range m.GetPartitions() {
		fp := f.parts[partKey{r.GetTopic(), r.GetPartition()}]
		if fp == nil || fp.stopped || fp.inflight || fp.corrID != m.GetCorrelationId() || r.GetError() == messages.ErrorCode_NONE && r.GetOffset() != fp.offset {
			continue // unassigned or assigned again meanwhile
		}
		fp.corrID = 0 // a part named twice is taken once
		f.onAnswer(fp, r)
	}
	f.feed(ctx)
	for _, fp := range parts {
		f.step(ctx, fp)
	}
	f.sendNodes(ctx)
}

// endNodeFetch ends n's fetch in flight, if any: its partitions may fetch
// again, and its bytes are off the budget.
func (f *fetcher) endNodeFetch(n *nodeFetch) {
	if !n.inflight {
		return
	}
	for _, fp := range n.parts {
		if fp.node == n && fp.inflight && fp.corrID == n.corrID {
			fp.inflight, fp.node = false, nil
		}
	}
	f.asked -= n.asked
	n.inflight, n.asked, n.parts = false, 0, nil
}

// abandonNodeFetch ends n's fetch in flight and returns the partitions it
// carried that no fetch since has taken, their correlation ids reset: an
// answer to it is ignored, and they fetch again from the same offsets.
func (f *fetcher) abandonNodeFetch(n *nodeFetch) []*fetchPart {
	parts, corrID := n.parts, n.corrID
	f.endNodeFetch(n)
	abandoned := parts[:0]
	for _, fp := range parts {
		if !fp.inflight && fp.corrID == corrID {
			fp.corrID = 0
			abandoned = append(abandoned, fp)
		}
	}
	return abandoned
}

// expireNodes gives up the node fetches unanswered past their max wait and
// the request timeout: their partitions fetch again, from the same
// offsets, and OnFetchError hears of each.
func (f *fetcher) expireNodes(now time.Time) {
	cfg := &f.cons.cfg
	limit := cfg.fetchMaxWait + cfg.requestTimeout
	for _, n := range f.nodes {
		if !n.inflight || now.Sub(n.sentAt) <= limit {
			continue
		}
		for _, fp := range f.abandonNodeFetch(n) {
			f.fetchFailed(fp, fp.offset, fmt.Errorf("%w: no answer to a fetch in %v", ErrTimeout, limit))
		}
	}
}
