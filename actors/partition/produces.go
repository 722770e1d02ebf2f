package partition

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/remote"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
)

// gatherTick makes the partition manager answer the gathers that have
// waited past their timeout.
type gatherTick struct{}

const (
	// gatherTickInterval is how often the partition manager looks for
	// gathers past their timeout.
	gatherTickInterval = time.Second
	// defaultGatherTimeout is how long a gather waits when its requests
	// name no timeout.
	defaultGatherTimeout = 30 * time.Second
)

// produceGathers is the partition manager's state for the ProduceRequests
// it has handed to partitions and not yet answered. Each request goes to
// its partition as a copy with a correlation id of the manager's, so that
// answers from partitions find their gather whichever producer sent it;
// the producer's id is put back in the answer. Not shared: the manager's
// mailbox is its only way in.
type produceGathers struct {
	nodeID    int32
	transport *remote.Transport
	// outboxes send the answers: a producer's node that is gone stalls
	// only its outbox, not the manager.
	outboxes *actors.Outboxes
	// now is the clock of the gathers' expiry; time.Now unless a test sets
	// another.
	now    func() time.Time
	nextID int64
	slots  map[int64]gatherSlot // by the manager's correlation id
	// queue holds the gathers in the order they began, for expiry: each
	// is answered when its last partition answers or at its expiry,
	// whichever comes first.
	queue []*produceGather
}

// gatherSlot is where a partition's answer goes.
type gatherSlot struct {
	g      *produceGather
	i      int                      // index of the answer in g.resps
	req    *messages.ProduceRequest // topic and partition, for a timeout
	corrID int64                    // the producer's
}

// produceGather collects the answers to one ProduceRequests.
type produceGather struct {
	to      *actor.PID
	resps   []*messages.ProduceResponse
	ids     []int64 // the manager's ids of its requests handed to partitions
	waiting int
	expires time.Time
	done    bool
}

func newProduceGathers(nodeID int32, transport *remote.Transport, outboxes *actors.Outboxes) produceGathers {
	return produceGathers{nodeID: nodeID, transport: transport, outboxes: outboxes, now: time.Now, slots: map[int64]gatherSlot{}}
}

// route hands each request of req to its partition among children, in
// order, and gathers the answers of those with acks 1 or -1. A partition
// that is not there is answered NOT_LEADER_OR_FOLLOWER, and so is every
// request while refusal, the reason the node takes none, is set.
func (g *produceGathers) route(ctx actor.Context, req *messages.ProduceRequests, children map[disk.TopicPartition]*actor.PID, refusal string) {
	now := g.now()
	g.expire(ctx, now)
	var pg *produceGather
	var timeout time.Duration
	for _, r := range req.Requests {
		var pid *actor.PID
		if refusal == "" {
			pid = children[disk.TopicPartition{Topic: r.Topic, Partition: r.Partition}]
		}
		if r.Acks == 0 {
			if pid != nil {
				ctx.Send(pid, r)
			} else {
				g.transport.Release(r)
			}
			continue
		}
		if pg == nil {
			pg = &produceGather{to: ctx.Sender(), resps: make([]*messages.ProduceResponse, 0, len(req.Requests))}
		}
		if pid == nil {
			g.transport.Release(r)
			msg := refusal
			if msg == "" {
				msg = fmt.Sprintf("partition %d of %q is not on node %d", r.Partition, r.Topic, g.nodeID)
			}
			pg.resps = append(pg.resps, g.failed(r, r.CorrelationId, messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, msg))
			continue
		}
		g.nextID++
		g.slots[g.nextID] = gatherSlot{g: pg, i: len(pg.resps), req: r, corrID: r.CorrelationId}
		pg.ids = append(pg.ids, g.nextID)
		pg.resps = append(pg.resps, nil)
		pg.waiting++
		timeout = max(timeout, time.Duration(r.TimeoutMs)*time.Millisecond)
		// A copy under the manager's id: r may be the producer's own,
		// sent from this actor system. It carries r's records, so the
		// partition's release of it releases them (see Transport.Release).
		sub := &messages.ProduceRequest{
			Topic: r.Topic, Partition: r.Partition, Acks: r.Acks, TimeoutMs: r.TimeoutMs,
			Records: r.Records, CorrelationId: g.nextID,
		}
		ctx.Request(pid, sub)
	}
	if pg == nil {
		return
	}
	if pg.waiting == 0 {
		g.answer(ctx, pg)
		return
	}
	if timeout <= 0 {
		timeout = defaultGatherTimeout
	}
	// The producer gives up on the requests after the same timeout and
	// sends them again: the expiry only lets go of the gather.
	pg.expires = now.Add(2 * timeout)
	g.queue = append(g.queue, pg)
}

// answered takes a partition's answer to a request route handed it, and
// answers its gather if it was the last. An answer after the gather's
// expiry is dropped.
func (g *produceGathers) answered(ctx actor.Context, resp *messages.ProduceResponse) {
	slot, ok := g.slots[resp.CorrelationId]
	if !ok {
		return
	}
	delete(g.slots, resp.CorrelationId)
	resp.CorrelationId = slot.corrID
	pg := slot.g
	pg.resps[slot.i] = resp
	pg.waiting--
	if pg.waiting == 0 {
		g.answer(ctx, pg)
	}
}

// expire answers the gathers past their expiry (twice their requests'
// timeout), those of their partitions that have not answered with
// REQUEST_TIMED_OUT (a partition that stopped or restarted with the
// request in its mailbox never will), and drops the answered gathers at
// the front of the queue.
func (g *produceGathers) expire(ctx actor.Context, now time.Time) {
	for len(g.queue) > 0 {
		pg := g.queue[0]
		if !pg.done && now.Before(pg.expires) {
			return
		}
		g.queue[0] = nil
		g.queue = g.queue[1:]
		if pg.done {
			continue
		}
		for _, id := range pg.ids {
			slot, ok := g.slots[id]
			if !ok {
				continue
			}
			delete(g.slots, id)
			pg.resps[slot.i] = g.failed(slot.req, slot.corrID, messages.ErrorCode_REQUEST_TIMED_OUT,
				fmt.Sprintf("partition %d of %q did not answer in time", slot.req.Partition, slot.req.Topic))
		}
		g.answer(ctx, pg)
	}
}

// answer sends pg's answers to its producer.
func (g *produceGathers) answer(ctx actor.Context, pg *produceGather) {
	pg.done = true
	if pg.to != nil {
		g.outboxes.Send(ctx, pg.to, &messages.ProduceResponses{Responses: pg.resps}, nil)
	}
}

// failed is the answer to r, whose producer named it corrID, that failed
// with code.
func (g *produceGathers) failed(r *messages.ProduceRequest, corrID int64, code messages.ErrorCode, msg string) *messages.ProduceResponse {
	return &messages.ProduceResponse{
		Topic:           r.Topic,
		Partition:       r.Partition,
		CorrelationId:   corrID,
		Error:           code,
		ErrorMessage:    msg,
		BaseOffset:      -1,
		LogAppendTimeMs: -1,
	}
}
