package kafka

// ListGroups, versions 0 to 5.
//
// v1 adds the throttle time, v3 flexible versions, v4 a filter of states
// (KIP-518) and each group's state, v5 a filter of group types and each
// group's type (KIP-848). As a Kafka broker does, a node lists the groups
// it coordinates (admin clients ask every node): the node's group
// coordinator answers a ListGroupsRequest. Every group is of the classic
// type (Depot has no KIP-848 groups); a group of Depot's own protocol is
// listed with protocol type "consumer". Filters compare without regard to
// case, as Kafka's do.

import (
	"slices"
	"strings"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/messages"
)

// classicGroupType is the type of every group (KIP-848's name for groups
// of the classic protocol).
const classicGroupType = "classic"

func handleListGroups(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.ListGroupsRequest)
	c.ask(ctx, c.l.cfg.Groups, &messages.ListGroupsRequest{}, c.l.cfg.RequestTimeout, func(res any, err error) {
		resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
		r, ok := res.(*messages.ListGroupsResponse)
		switch {
		case err != nil || !ok:
			resp.ErrorCode = groupAskCode(err)
		case r.GetError() != messages.ErrorCode_NONE:
			resp.ErrorCode = kafkaCode(r.GetError())
		default:
			for _, g := range r.GetGroups() {
				if !matchesFilter(req.StatesFilter, g.GetState()) || !matchesFilter(req.TypesFilter, classicGroupType) {
					continue
				}
				rg := kmsg.NewListGroupsResponseGroup()
				rg.Group, rg.ProtocolType = g.GetGroupId(), groupProtocolType(g.GetProtocolType())
				rg.GroupState, rg.GroupType = g.GetState(), classicGroupType
				resp.Groups = append(resp.Groups, rg)
			}
		}
		c.reply(x, resp)
	})
}

// matchesFilter reports whether value passes filter: an empty filter
// passes everything, another what it names, whatever the case.
func matchesFilter(filter []string, value string) bool {
	return len(filter) == 0 || slices.ContainsFunc(filter, func(f string) bool { return strings.EqualFold(f, value) })
}
