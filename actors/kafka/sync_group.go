package kafka

// SyncGroup, versions 0 to 5.
//
// v1 adds the throttle time, v3 the group instance id of a static member
// (KIP-345), v4 flexible versions, v5 the protocol type and name in the
// request, which must be the group's, and in the answer. A sync becomes a
// SyncGroupRequest to the node's group coordinator and on to the group's
// actor, the leader's with every member's assignment; for a "consumer"
// group (or one whose type the request does not say) each assignment's
// partitions are read from it too, for describing the group. The answer
// waits for the leader's assignment.

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/actors/group"
	"github.com/depot-dev/depot/messages"
)

// syncProtocolVersion is the first version that names the protocol.
const syncProtocolVersion = 5

func handleSyncGroup(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.SyncGroupRequest)
	ask := &messages.SyncGroupRequest{
		GroupId: req.Group, MemberId: req.MemberID, Generation: req.Generation, GroupInstanceId: orEmpty(req.InstanceID),
		ProtocolType: orEmpty(req.ProtocolType), ProtocolName: orEmpty(req.Protocol),
	}
	consumer := req.ProtocolType == nil || *req.ProtocolType == group.ConsumerProtocolType
	for _, a := range req.GroupAssignment {
		sa := &messages.SyncGroupAssignment{MemberId: a.MemberID, Assignment: a.MemberAssignment}
		if consumer {
			sa.Partitions = consumerPartitions(a.MemberAssignment)
		}
		ask.Assignments = append(ask.Assignments, sa)
	}
	c.ask(ctx, c.l.cfg.Groups, ask, maxGroupWait, func(res any, err error) {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		r, ok := res.(*messages.SyncGroupResponse)
		if err != nil || !ok {
			resp.ErrorCode = groupAskCode(err)
			c.reply(x, resp)
			return
		}
		resp.ErrorCode = kafkaCode(r.GetError())
		resp.MemberAssignment = r.GetAssignment()
		if req.Version >= syncProtocolVersion && r.GetError() == messages.ErrorCode_NONE {
			resp.ProtocolType, resp.Protocol = kmsg.StringPtr(r.GetProtocolType()), kmsg.StringPtr(r.GetProtocolName())
		}
		c.reply(x, resp)
	})
}
