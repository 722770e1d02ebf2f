package kafka

// FindCoordinator, versions 0 to 6.
//
// v1 adds the key type (0 a group, 1 a transactional id) and an error
// message, v3 flexible versions, v4 several keys in one request (KIP-699),
// v6 key type 2, a share group's partition (KIP-932). A group's
// coordinator is the node that leads the group's partition of
// __consumer_offsets: each group key becomes a FindCoordinatorRequest to
// this node's group coordinator, which passes it on to that node's when
// another node leads the partition, and the answer names the node and its
// Kafka listener; a node without one is answered COORDINATOR_NOT_AVAILABLE.
// Transactions and share groups are not built: a transactional id or a
// share key is answered INVALID_REQUEST, saying so, which no client
// retries; an unknown key type too.

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/messages"
)

// Key types of FindCoordinator.
const (
	coordinatorGroup       int8 = 0
	coordinatorTransaction int8 = 1
	coordinatorShare       int8 = 2
)

// findCoordinatorBatchVersion is the first version with several keys.
const findCoordinatorBatchVersion = 4

func handleFindCoordinator(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < findCoordinatorBatchVersion {
		keys = []string{req.CoordinatorKey}
	}
	resp.Coordinators = make([]kmsg.FindCoordinatorResponseCoordinator, len(keys))
	finish := func() {
		if req.Version < findCoordinatorBatchVersion {
			only := resp.Coordinators[0]
			resp.ErrorCode, resp.ErrorMessage = only.ErrorCode, only.ErrorMessage
			resp.NodeID, resp.Host, resp.Port = only.NodeID, only.Host, only.Port
			resp.Coordinators = nil
		}
		c.reply(x, resp)
	}
	var refusal string
	switch req.CoordinatorType {
	case coordinatorGroup:
	case coordinatorTransaction:
		refusal = "transactions are not supported: Depot has no transaction coordinator"
	case coordinatorShare:
		refusal = "share groups are not supported"
	default:
		refusal = fmt.Sprintf("key type %d is not known", req.CoordinatorType)
	}
	for i, key := range keys {
		rc := kmsg.NewFindCoordinatorResponseCoordinator()
		rc.Key, rc.NodeID, rc.Port = key, -1, -1
		if refusal != "" {
			rc.ErrorCode, rc.ErrorMessage = codeInvalidRequest, kmsg.StringPtr(refusal)
		}
		resp.Coordinators[i] = rc
	}
	if refusal != "" || len(keys) == 0 {
		finish()
		return
	}
	waiting := len(keys)
	for i, key := range keys {
		rc := &resp.Coordinators[i]
		c.ask(ctx, c.l.cfg.Groups, &messages.FindCoordinatorRequest{GroupId: key}, c.l.cfg.RequestTimeout, func(res any, err error) {
			waiting--
			r, ok := res.(*messages.FindCoordinatorResponse)
			switch {
			case err != nil || !ok:
				rc.ErrorCode = groupAskCode(err)
			case r.GetError() != messages.ErrorCode_NONE:
				rc.ErrorCode, rc.ErrorMessage = kafkaCode(r.GetError()), errorText(r.GetErrorMessage())
			default:
				host, port, ok := kafkaHostPort(&messages.Broker{KafkaAddress: r.GetKafkaAddress()})
				if !ok {
					rc.ErrorCode = codeCoordinatorNotAvailable
					rc.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("node %d coordinates group %q and has no Kafka listener", r.GetNodeId(), key))
					break
				}
				rc.NodeID, rc.Host, rc.Port = r.GetNodeId(), host, port
			}
			if waiting == 0 {
				finish()
			}
		})
	}
}
