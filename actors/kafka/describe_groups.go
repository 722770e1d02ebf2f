package kafka

// DescribeGroups, versions 0 to 6.
//
// v1 adds the throttle time, v3 the authorized operations (KIP-430), not
// computed, as Kafka without an authorizer; v4 the members' group
// instance ids (KIP-345); v5 flexible versions; v6 an error message, and
// GROUP_ID_NOT_FOUND for a group that does not exist (KIP-1043), which
// before v6 is answered as Kafka does, without error, in state Dead.
//
// Each group becomes a DescribeGroupRequest to the node's group
// coordinator and on to the group's actor. As Kafka does, only a Stable
// group is described with its protocol and its members' metadata and
// assignments; in other states the members are listed without them. A
// group of Depot's own protocol is described as a "consumer" group, its
// assignor as the protocol, its members' topics and partitions encoded as
// a Kafka consumer's subscription and assignment.

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/messages"
)

// describeGroupsNotFoundVersion is the first version that answers a
// group that does not exist GROUP_ID_NOT_FOUND.
const describeGroupsNotFoundVersion = 6

// stateStable is the state in which a group is described in full.
const stateStable = "Stable"

func handleDescribeGroups(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	resp.Groups = make([]kmsg.DescribeGroupsResponseGroup, len(req.Groups))
	if len(req.Groups) == 0 {
		c.reply(x, resp)
		return
	}
	waiting := len(req.Groups)
	for i, id := range req.Groups {
		rg := &resp.Groups[i]
		*rg = kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = id
		c.ask(ctx, c.l.cfg.Groups, &messages.DescribeGroupRequest{GroupId: id}, c.l.cfg.RequestTimeout, func(res any, err error) {
			waiting--
			r, ok := res.(*messages.DescribeGroupResponse)
			if err != nil || !ok {
				rg.ErrorCode = groupAskCode(err)
			} else {
				describedGroup(rg, r, req.Version)
			}
			if waiting == 0 {
				c.reply(x, resp)
			}
		})
	}
}

// describedGroup fills rg from the group's description, at version.
func describedGroup(rg *kmsg.DescribeGroupsResponseGroup, r *messages.DescribeGroupResponse, version int16) {
	switch r.GetError() {
	case messages.ErrorCode_NONE:
	case messages.ErrorCode_GROUP_ID_NOT_FOUND:
		rg.State = "Dead"
		if version >= describeGroupsNotFoundVersion {
			rg.ErrorCode, rg.ErrorMessage = codeGroupIDNotFound, errorText(r.GetErrorMessage())
		}
		return
	default:
		rg.ErrorCode = kafkaCode(r.GetError())
		if version >= describeGroupsNotFoundVersion {
			rg.ErrorMessage = errorText(r.GetErrorMessage())
		}
		return
	}
	rg.State = r.GetState()
	rg.ProtocolType = groupProtocolType(r.GetProtocolType())
	stable := rg.State == stateStable
	if stable {
		rg.Protocol = r.GetAssignor()
	}
	for _, m := range r.GetMembers() {
		rm := kmsg.NewDescribeGroupsResponseGroupMember()
		rm.MemberID, rm.ClientID, rm.ClientHost = m.GetMemberId(), m.GetClientId(), m.GetClientHost()
		if m.GetGroupInstanceId() != "" {
			rm.InstanceID = kmsg.StringPtr(m.GetGroupInstanceId())
		}
		if stable {
			rm.ProtocolMetadata, rm.MemberAssignment = m.GetProtocolMetadata(), m.GetMemberAssignment()
			if r.GetProtocolType() == "" {
				rm.ProtocolMetadata = encodeConsumerMetadata(m.GetTopics())
				rm.MemberAssignment = encodeConsumerAssignment(m.GetAssignment())
			}
		}
		rg.Members = append(rg.Members, rm)
	}
}
