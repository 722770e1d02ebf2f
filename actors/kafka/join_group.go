package kafka

// JoinGroup, versions 2 to 9; 0 and 1 are refused.
//
// Kafka 4.0 no longer takes v0 and v1 (KIP-896): they are answered
// UNSUPPORTED_VERSION. v2 is v1 (which added the rebalance timeout); v4
// answers a dynamic member's first join MEMBER_ID_REQUIRED with the id to
// join again with (KIP-394); v5 adds the group instance id of a static
// member (KIP-345); v6 flexible versions; v7 the protocol type in the
// answer; v8 the reason of the join (KIP-800), written to the group's
// log; v9 skip assignment (KIP-814), set for a static leader that joined
// again in a stable group, which keeps its assignment (before v9 such a
// leader is not named leader in the answer, and so assigns nothing).
//
// A join becomes a JoinGroupRequest of Kafka's classic protocol to the
// node's group coordinator and on to the group's actor (see classic.go in
// actors/group), with the client's id and host. For protocol type
// "consumer", the topics of the member's subscription are read from its
// first protocol's metadata, for describing the group. The answer waits
// for the group's next generation. What the group says of a refusal goes
// to the connection's log, JoinGroup having no error message.

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/actors/group"
	"github.com/depot-dev/depot/messages"
)

// Versions of JoinGroup: the first that asks a new member to join again
// with its id, the first that names the protocol type in the answer, and
// the first that can tell a leader to skip the assignment.
const (
	joinKnownMemberIDVersion  = 4
	joinSkipAssignmentVersion = 9
	joinProtocolTypeVersion   = 7
)

func handleJoinGroup(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.JoinGroupRequest)
	ask := &messages.JoinGroupRequest{
		GroupId: req.Group, MemberId: req.MemberID, GroupInstanceId: orEmpty(req.InstanceID),
		SessionTimeoutMs: req.SessionTimeoutMillis, RebalanceTimeoutMs: req.RebalanceTimeoutMillis,
		ProtocolType: req.ProtocolType, RequireKnownMemberId: req.Version >= joinKnownMemberIDVersion,
		ClientId: clientID(x), ClientHost: c.clientHost(), Reason: orEmpty(req.Reason),
	}
	for _, p := range req.Protocols {
		ask.Protocols = append(ask.Protocols, &messages.GroupProtocol{Name: p.Name, Metadata: p.Metadata})
	}
	if req.ProtocolType == group.ConsumerProtocolType && len(req.Protocols) > 0 {
		ask.Topics = consumerTopics(req.Protocols[0].Metadata)
	}
	c.ask(ctx, c.l.cfg.Groups, ask, maxGroupWait, func(res any, err error) {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.Generation, resp.MemberID = -1, req.MemberID
		r, ok := res.(*messages.JoinGroupResponse)
		if err != nil || !ok {
			resp.ErrorCode = groupAskCode(err)
			c.reply(x, resp)
			return
		}
		resp.ErrorCode = kafkaCode(r.GetError())
		resp.Generation, resp.MemberID, resp.LeaderID = r.GetGeneration(), r.GetMemberId(), r.GetLeader()
		resp.Protocol = kmsg.StringPtr(r.GetProtocolName())
		if req.Version >= joinProtocolTypeVersion {
			resp.ProtocolType = kmsg.StringPtr(r.GetProtocolType())
		}
		for _, m := range r.GetMembers() {
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID, rm.ProtocolMetadata = m.GetMemberId(), m.GetMetadata()
			if m.GetGroupInstanceId() != "" {
				rm.InstanceID = kmsg.StringPtr(m.GetGroupInstanceId())
			}
			resp.Members = append(resp.Members, rm)
		}
		if r.GetSkipAssignment() {
			if req.Version >= joinSkipAssignmentVersion {
				resp.SkipAssignment = true
			} else {
				resp.Members = nil
			}
		}
		if r.GetError() != messages.ErrorCode_NONE && r.GetError() != messages.ErrorCode_MEMBER_ID_REQUIRED {
			c.logger.WithFields(logrus.Fields{"group": req.Group, "member": req.MemberID, "error": r.GetError().String()}).
				Info("JoinGroup refused: " + r.GetErrorMessage())
		}
		c.reply(x, resp)
	})
}

// refuseJoinGroup answers a join with code.
func refuseJoinGroup(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.JoinGroupRequest)
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.ErrorCode, resp.Generation, resp.MemberID = code, -1, req.MemberID
	return resp
}
