package kafka

// DescribeACLs, versions 1 to 3.
//
// v1 is the oldest Kafka 4.0 takes (KIP-896) and adds the pattern type;
// v2 flexible versions; v3 nothing new in the request. Depot has no
// authorizer, so every request is answered SECURITY_DISABLED, as a Kafka
// broker without one answers.

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleDescribeACLs(c *conn, _ actor.Context, x *exchange) {
	c.reply(x, refuseDescribeACLs(x.req.Body, codeSecurityDisabled))
}

// refuseDescribeACLs answers a request with code.
func refuseDescribeACLs(r kmsg.Request, code int16) kmsg.Response {
	resp := r.(*kmsg.DescribeACLsRequest).ResponseKind().(*kmsg.DescribeACLsResponse)
	resp.ErrorCode = code
	if code == codeSecurityDisabled {
		resp.ErrorMessage = kmsg.StringPtr("no authorizer is configured: Depot has no ACLs")
	}
	return resp
}
