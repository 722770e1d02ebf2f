package controller

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/depot-dev/depot/actors"
)

// A send to a node that is gone blocks protoactor's remote for about 10 s
// while it tries to connect, and a send from the controller's Receive would
// stall the controller with it: elections, every other node's heartbeats,
// metadata answers. So the controller sends to other nodes through an
// outbox per address, a child actor that does the sending and blocks in its
// place; a full outbox drops what it is given, as the transport would
// (delivery is at most once, and raft and every request retry).
const outboxLimit = 1024

// outboxMessage is a message for an actor of another node, and the actor
// its answer goes to (nil for none).
type outboxMessage struct {
	target *actor.PID
	msg    any
	sender *actor.PID
}

// outbox sends to the actors of one address. Not shared: all access is
// through its mailbox; pending is shared with the controller, which counts
// what it gave and the outbox what it sent.
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

// outboxRef is the controller's handle on an outbox.
type outboxRef struct {
	pid     *actor.PID
	pending *atomic.Int32
}

// sendTo sends msg to target, with sender for its answer, directly when
// target is in this actor system and through target's outbox otherwise. It
// reports false when the outbox is full and msg was dropped.
func (a *controllerActor) sendTo(ctx actor.Context, target *actor.PID, msg any, sender *actor.PID) bool {
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
	ref, ok := a.outboxes[target.Address]
	if !ok {
		ref = outboxRef{pending: &atomic.Int32{}}
		pending := ref.pending
		ref.pid = ctx.Spawn(actors.Props(func() actor.Actor { return &outbox{pending: pending} }, a.logger))
		a.outboxes[target.Address] = ref
	}
	if ref.pending.Load() >= outboxLimit {
		return false
	}
	ref.pending.Add(1)
	ctx.Send(ref.pid, &outboxMessage{target: target, msg: msg, sender: sender})
	return true
}

// requestTo sends msg to target and returns the future of its answer,
// which times out after timeout.
func (a *controllerActor) requestTo(ctx actor.Context, target *actor.PID, msg any, timeout time.Duration) *actor.Future {
	future := actor.NewFuture(ctx.ActorSystem(), timeout)
	a.sendTo(ctx, target, msg, future.PID())
	return future
}
