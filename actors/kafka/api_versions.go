package kafka

// ApiVersions, versions 0 to 5.
//
// Always answered. A version this listener does not take, newer ones
// included, is answered as KIP-511 asks: a v0 response (v0 header, v0
// body) with UNSUPPORTED_VERSION and the whole supported list, which
// clients read to choose the version they ask again with, or to use at
// once. v3 added the client's software name and version, which are not
// checked; v5 (KIP-1242) names the cluster and node the client means to
// reach, and either one wrong answers REBOOTSTRAP_REQUIRED.

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/messages"
)

func handleApiVersions(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = supportedKeys()
	if req.Version < 5 || req.ClusterID == nil {
		c.reply(x, resp)
		return
	}
	if req.NodeID != c.l.cfg.NodeID {
		resp.ErrorCode = codeRebootstrapRequired
		c.reply(x, resp)
		return
	}
	c.ask(ctx, c.l.cfg.Metadata, &messages.ClusterInfoRequest{}, c.l.cfg.RequestTimeout, func(res any, err error) {
		if info, ok := res.(*messages.ClusterInfoResponse); err == nil && ok && info.GetClusterId() != "" && info.GetClusterId() != *req.ClusterID {
			resp.ErrorCode = codeRebootstrapRequired
		}
		c.reply(x, resp)
	})
}

// unsupportedAPIVersions is the answer to an ApiVersions request of a
// version this listener does not take (KIP-511).
func unsupportedAPIVersions() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	resp.ErrorCode = codeUnsupportedVersion
	resp.ApiKeys = supportedKeys()
	return resp
}
