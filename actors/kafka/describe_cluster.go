package kafka

// DescribeCluster, versions 0 to 2.
//
// v1 names the endpoints asked for: brokers (1), the only ones a broker
// answers, as Kafka's answer UNSUPPORTED_ENDPOINT_TYPE to controllers (2),
// which admin clients bootstrapping to controllers (KIP-919) ask of
// controller listeners; v2 may ask for fenced brokers too (KIP-1073).
//
// Answered from the metadata actor's ClusterInfoRequest: the cluster's
// id, the active controller (the node leading the controller quorum, -1
// while none is), and the nodes with a Kafka listener, each at its
// advertised Kafka address with its rack; fenced nodes only when asked,
// marked so. Authorized operations are not computed, as Kafka without an
// authorizer.

import (
	"slices"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/messages"
)

// brokerEndpoints is DescribeCluster's endpoint type of brokers.
const brokerEndpoints int8 = 1

func handleDescribeCluster(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if req.Version >= 1 && req.EndpointType != brokerEndpoints {
		resp.EndpointType = req.EndpointType
		resp.ErrorCode = codeUnsupportedEndpointType
		resp.ErrorMessage = kmsg.StringPtr("a Depot node answers for brokers only (endpoint type 1): its controllers have no listener of their own")
		c.reply(x, resp)
		return
	}
	c.ask(ctx, c.l.cfg.Metadata, &messages.ClusterInfoRequest{}, c.l.cfg.RequestTimeout, func(res any, err error) {
		info, ok := res.(*messages.ClusterInfoResponse)
		if err != nil || !ok {
			resp.ErrorCode = askErrorCode(err)
			c.reply(x, resp)
			return
		}
		describeCluster(resp, info, req.IncludeFencedBrokers)
		c.reply(x, resp)
	})
}

// describeCluster fills resp from info: the cluster, the active
// controller and the nodes with a Kafka listener, the fenced ones only
// with fenced.
func describeCluster(resp *kmsg.DescribeClusterResponse, info *messages.ClusterInfoResponse, fenced bool) {
	resp.ClusterID = info.GetClusterId()
	resp.ControllerID = info.GetControllerLeader()
	for _, b := range info.GetNodes() {
		host, port, ok := kafkaHostPort(b)
		if !ok || (b.GetFenced() && !fenced) {
			continue
		}
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port, rb.IsFenced = b.GetNodeId(), host, port, b.GetFenced()
		if b.GetRack() != "" {
			rb.Rack = kmsg.StringPtr(b.GetRack())
		}
		resp.Brokers = append(resp.Brokers, rb)
	}
	slices.SortFunc(resp.Brokers, func(a, b kmsg.DescribeClusterResponseBroker) int { return int(a.NodeID - b.NodeID) })
}
