package actors

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
)

// A send to a node that is gone blocks protoactor's remote for about 10 s
// while it tries to connect, and a send from an actor's Receive would stall
// that actor with it: the controller's elections and heartbeats, a
// partition manager's produces. So such actors send to other nodes through
// an outbox per address, a child actor that does the sending and blocks in
// their place. The bound is there for a peer that is gone, whose messages
// pile up while its connection is tried: it is far above what a live but
// slow peer ever has waiting, since under load an outbox's goroutine may
// wait its turn behind thousands of busy partitions while the answers of a
// thousand partitions' produces queue up. A full outbox drops what it is
// given, as the transport would (delivery is at most once, and every
// request that matters is retried), and says so in the log.
const outboxLimit = 16384

// outboxDropLogInterval is how often an outbox that keeps dropping says so.
const outboxDropLogInterval = 10 * time.Second

// outboxMessage is a message for an actor of another node, and the actor
// its answer goes to (nil for none).
type outboxMessage struct {
	target *actor.PID
	msg    any
	sender *actor.PID
}

// outbox sends to the actors of one address. Not shared: all access is
// through its mailbox; pending is shared with its owner, which counts what
// it gave and the outbox what it sent.
type outbox struct {
	pending *atomic.Int32
}

func (o *outbox) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*outboxMessage); ok {
		if m.sender != nil {
			ctx.RequestWithCustomSender(m.target, m.msg, m.sender)
		} else {
			ctx.Send(m.target, m.msg)
		}
		o.pending.Add(-1)
	}
}

// outboxRef is the owner's handle on an outbox: how many messages it has
// waiting, and what it dropped since it last said so.
type outboxRef struct {
	pid      *actor.PID
	pending  *atomic.Int32
	dropped  int
	loggedAt time.Time
}

// Outboxes are an actor's outboxes, by address, spawned as its children on
// first use. Owned by that actor: use only from its Receive.
type Outboxes struct {
	logger *logrus.Entry
	boxes  map[string]*outboxRef
}

// NewOutboxes returns the outboxes of an actor whose logger is logger.
func NewOutboxes(logger *logrus.Entry) *Outboxes {
	return &Outboxes{logger: logger, boxes: map[string]*outboxRef{}}
}

// Send sends msg to target, with sender for its answer, directly when
// target is in this actor system and through target's outbox otherwise. It
// reports false when the outbox is full and msg was dropped.
func (o *Outboxes) Send(ctx actor.Context, target *actor.PID, msg any, sender *actor.PID) bool {
	if target == nil {
		return false
	}
	if target.Address == ctx.ActorSystem().Address() {
		if sender != nil {
			ctx.RequestWithCustomSender(target, msg, sender)
		} else {
			ctx.Send(target, msg)
		}
		return true
	}
	ref, ok := o.boxes[target.Address]
	if !ok {
		ref = &outboxRef{pending: &atomic.Int32{}}
		pending := ref.pending
		ref.pid = ctx.Spawn(Props(func() actor.Actor { return &outbox{pending: pending} }, o.logger))
		o.boxes[target.Address] = ref
	}
	if ref.pending.Load() >= outboxLimit {
		ref.dropped++
		if now := time.Now(); now.Sub(ref.loggedAt) >= outboxDropLogInterval {
			o.logger.WithFields(logrus.Fields{"address": target.Address, "dropped": ref.dropped, "waiting": outboxLimit}).
				Warn("outbox full: messages to a node that does not take them are dropped")
			ref.loggedAt, ref.dropped = now, 0
		}
		return false
	}
	ref.pending.Add(1)
	ctx.Send(ref.pid, &outboxMessage{target: target, msg: msg, sender: sender})
	return true
}

// Request sends msg to target as Send does and returns the future of its
// answer, which times out after timeout.
func (o *Outboxes) Request(ctx actor.Context, target *actor.PID, msg any, timeout time.Duration) *actor.Future {
	future := actor.NewFuture(ctx.ActorSystem(), timeout)
	o.Send(ctx, target, msg, future.PID())
	return future
}
