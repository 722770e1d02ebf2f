package kafka

// AlterPartitionReassignments (kmsg's AlterPartitionAssignments), versions
// 0 and 1.
//
// v0 is flexible from the start (KIP-455); v1 adds
// AllowReplicationFactorChange, which, false, refuses a target with more
// or fewer replicas than the partition had before any move
// (INVALID_REPLICATION_FACTOR), and is given back in the answer.
//
// The request becomes one ReassignPartitionsRequest to the metadata actor,
// which hands it to the active controller, as `depot topic reassign` does:
// a partition with replicas starts a move to them, or replaces the move in
// flight; one with null replicas cancels its move (KIP-455). The replicas
// a move adds catch up under their nodes' replication throttle, and the
// move completes once they are all in the ISR; ListPartitionReassignments
// shows it until then. Each partition answers the controller's decision:
// INVALID_REPLICA_ASSIGNMENT for a target that is empty, names a node
// twice or one not registered, adds a fenced node, or is already the
// partition's replicas; NO_REASSIGNMENT_IN_PROGRESS for a cancel with no
// move; UNKNOWN_TOPIC_OR_PARTITION; INVALID_REQUEST for a partition named
// twice.

import (
	"slices"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/messages"
)

func handleAlterPartitionAssignments(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.AlterPartitionAssignmentsRequest)
	ask := reassignAsk(req)
	if len(ask.Partitions) == 0 {
		c.reply(x, reassignResponse(req, nil))
		return
	}
	c.ask(ctx, c.l.cfg.Metadata, ask, c.controllerTimeout(req.TimeoutMillis), func(res any, err error) {
		r, ok := res.(*messages.ReassignPartitionsResponse)
		switch {
		case err != nil || !ok:
			c.reply(x, refuseAlterPartitionAssignments(req, askErrorCode(err), ""))
		case r.GetError() != messages.ErrorCode_NONE:
			c.reply(x, refuseAlterPartitionAssignments(req, kafkaCode(r.GetError()), r.GetErrorMessage()))
		default:
			c.reply(x, reassignResponse(req, r.GetResults()))
		}
	})
}

// reassignAsk is the controller's request for req, a partition for each
// one req names, in its order.
func reassignAsk(req *kmsg.AlterPartitionAssignmentsRequest) *messages.ReassignPartitionsRequest {
	ask := &messages.ReassignPartitionsRequest{KeepReplicationFactor: req.Version >= 1 && !req.AllowReplicationFactorChange}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			ask.Partitions = append(ask.Partitions, &messages.PartitionReassignment{
				Topic: t.Topic, Partition: p.Partition, Replicas: slices.Clone(p.Replicas), Cancel: p.Replicas == nil,
			})
		}
	}
	return ask
}

// reassignResponse is the answer to req from the controller's results,
// which answer its partitions in the order it names them; a partition
// without its result answers UNKNOWN_SERVER_ERROR.
func reassignResponse(req *kmsg.AlterPartitionAssignmentsRequest, results []*messages.ReassignmentResult) *kmsg.AlterPartitionAssignmentsResponse {
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codeUnknownServerError
			if i < len(results) && results[i].GetTopic() == t.Topic && results[i].GetPartition() == p.Partition {
				rp.ErrorCode, rp.ErrorMessage = kafkaCode(results[i].GetError()), errorText(results[i].GetErrorMessage())
			}
			i++
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// refuseAlterPartitionAssignments answers req with code, at the top and
// for each partition, and msg at the top.
func refuseAlterPartitionAssignments(req *kmsg.AlterPartitionAssignmentsRequest, code int16, msg string) *kmsg.AlterPartitionAssignmentsResponse {
	resp := reassignResponse(req, nil)
	resp.ErrorCode, resp.ErrorMessage = code, errorText(msg)
	for ti := range resp.Topics {
		for pi := range resp.Topics[ti].Partitions {
			resp.Topics[ti].Partitions[pi].ErrorCode = code
		}
	}
	return resp
}
