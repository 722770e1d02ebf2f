package kafka

// Heartbeat, versions 0 to 4.
//
// v1 adds the throttle time, v3 the group instance id of a static member
// (KIP-345), v4 flexible versions. A heartbeat becomes a HeartbeatRequest
// to the node's group coordinator and on to the group's actor, which keeps
// the member's session and answers REBALANCE_IN_PROGRESS while the group
// rebalances (join again), ILLEGAL_GENERATION for a generation not the
// group's, UNKNOWN_MEMBER_ID for a member not in it, FENCED_INSTANCE_ID
// for a static member's id replaced by a newer one.

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/messages"
)

func handleHeartbeat(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.HeartbeatRequest)
	ask := &messages.HeartbeatRequest{GroupId: req.Group, MemberId: req.MemberID, Generation: req.Generation, GroupInstanceId: orEmpty(req.InstanceID)}
	c.ask(ctx, c.l.cfg.Groups, ask, c.l.cfg.RequestTimeout, func(res any, err error) {
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		r, ok := res.(*messages.HeartbeatResponse)
		if err != nil || !ok {
			resp.ErrorCode = groupAskCode(err)
		} else {
			resp.ErrorCode = kafkaCode(r.GetError())
		}
		c.reply(x, resp)
	})
}
