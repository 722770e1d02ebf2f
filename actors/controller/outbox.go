package controller

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// sendTo sends msg to target, with sender for its answer, through the
// controller's outboxes (see actors.Outboxes): a node that is gone never
// stalls the controller. It reports false when msg was dropped.
func (a *controllerActor) sendTo(ctx actor.Context, target *actor.PID, msg any, sender *actor.PID) bool {
	return a.outboxes.Send(ctx, target, msg, sender)
}

// requestTo sends msg to target and returns the future of its answer,
// which times out after timeout.
func (a *controllerActor) requestTo(ctx actor.Context, target *actor.PID, msg any, timeout time.Duration) *actor.Future {
	return a.outboxes.Request(ctx, target, msg, timeout)
}
