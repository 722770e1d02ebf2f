package kafka

// DeleteGroups, versions 0 to 3.
//
// v1 adds the throttle time, v2 flexible versions, v3 an error message per
// group. Each group becomes a DeleteGroupRequest to the node's group
// coordinator and on to the group's actor, which removes a group without
// members and its committed offsets: NON_EMPTY_GROUP for one with members,
// GROUP_ID_NOT_FOUND for one that does not exist, NOT_COORDINATOR for one
// another node coordinates.

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/messages"
)

// deleteGroupsMessageVersion is the first version with error messages.
const deleteGroupsMessageVersion = 3

func handleDeleteGroups(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	resp.Groups = make([]kmsg.DeleteGroupsResponseGroup, len(req.Groups))
	if len(req.Groups) == 0 {
		c.reply(x, resp)
		return
	}
	waiting := len(req.Groups)
	for i, id := range req.Groups {
		rg := &resp.Groups[i]
		*rg = kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = id
		c.ask(ctx, c.l.cfg.Groups, &messages.DeleteGroupRequest{GroupId: id}, c.l.cfg.RequestTimeout, func(res any, err error) {
			waiting--
			r, ok := res.(*messages.DeleteGroupResponse)
			if err != nil || !ok {
				rg.ErrorCode = groupAskCode(err)
			} else {
				rg.ErrorCode = kafkaCode(r.GetError())
				if req.Version >= deleteGroupsMessageVersion {
					rg.ErrorMessage = errorText(r.GetErrorMessage())
				}
			}
			if waiting == 0 {
				c.reply(x, resp)
			}
		})
	}
}
