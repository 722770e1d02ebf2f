package kafka

// LeaveGroup, versions 0 to 5.
//
// v1 adds the throttle time; v3 several members in one request, each by
// member id or by group instance id (KIP-345), each answered with its own
// error; v4 flexible versions; v5 the reason each leaves (KIP-800),
// written to the group's log. A leave becomes one LeaveGroupRequest to the
// node's group coordinator and on to the group's actor; members that leave
// start a rebalance of the others. Before v3 the one member's error is the
// answer's; from v3 the answer's own error is only the group's
// (NOT_COORDINATOR and the like).

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/messages"
)

// leaveBatchVersion is the first version with several members.
const leaveBatchVersion = 3

func handleLeaveGroup(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.LeaveGroupRequest)
	ask := &messages.LeaveGroupRequest{GroupId: req.Group}
	if req.Version < leaveBatchVersion {
		ask.Members = []*messages.LeavingMember{{MemberId: req.MemberID}}
	}
	for _, m := range req.Members {
		ask.Members = append(ask.Members, &messages.LeavingMember{MemberId: m.MemberID, GroupInstanceId: orEmpty(m.InstanceID), Reason: orEmpty(m.Reason)})
	}
	c.ask(ctx, c.l.cfg.Groups, ask, c.l.cfg.RequestTimeout, func(res any, err error) {
		resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		r, ok := res.(*messages.LeaveGroupResponse)
		switch {
		case err != nil || !ok:
			resp.ErrorCode = groupAskCode(err)
		case r.GetError() != messages.ErrorCode_NONE:
			resp.ErrorCode = kafkaCode(r.GetError())
		case req.Version < leaveBatchVersion:
			if len(r.GetMembers()) > 0 {
				resp.ErrorCode = kafkaCode(r.GetMembers()[0].GetError())
			}
		default:
			for _, m := range r.GetMembers() {
				rm := kmsg.NewLeaveGroupResponseMember()
				rm.MemberID, rm.ErrorCode = m.GetMemberId(), kafkaCode(m.GetError())
				if m.GetGroupInstanceId() != "" {
					rm.InstanceID = kmsg.StringPtr(m.GetGroupInstanceId())
				}
				resp.Members = append(resp.Members, rm)
			}
		}
		c.reply(x, resp)
	})
}
