package kafka

// ListPartitionReassignments, version 0, flexible (KIP-455).
//
// Answered from the metadata actor's MetadataRequest, which `depot topic
// reassign --status` reads too: every partition with a move in flight, of
// every topic for a null list, else of the topics and partitions named.
// Each gives its replicas during the move (the target, then the replicas
// it removes), the replicas it adds and those it removes. As Kafka does, a
// topic that does not exist and a partition not moving are left out.

import (
	"slices"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/messages"
)

func handleListPartitionReassignments(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.ListPartitionReassignmentsRequest)
	ask := &messages.MetadataRequest{}
	for _, t := range req.Topics {
		ask.Topics = append(ask.Topics, t.Topic)
	}
	if req.Topics != nil && len(ask.Topics) == 0 {
		c.reply(x, req.ResponseKind())
		return
	}
	c.ask(ctx, c.l.cfg.Metadata, ask, c.controllerTimeout(req.TimeoutMillis), func(res any, err error) {
		resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
		md, ok := res.(*messages.MetadataResponse)
		if err != nil || !ok {
			resp.ErrorCode = askErrorCode(err)
			c.reply(x, resp)
			return
		}
		resp.Topics = reassignmentsOf(req, md)
		c.reply(x, resp)
	})
}

// reassignmentsOf lists the moves in flight that req asks for in md, by
// topic and partition as md lists them.
func reassignmentsOf(req *kmsg.ListPartitionReassignmentsRequest, md *messages.MetadataResponse) []kmsg.ListPartitionReassignmentsResponseTopic {
	var asked map[string][]int32
	if req.Topics != nil {
		asked = make(map[string][]int32, len(req.Topics))
		for _, t := range req.Topics {
			asked[t.Topic] = append(asked[t.Topic], t.Partitions...)
		}
	}
	var out []kmsg.ListPartitionReassignmentsResponseTopic
	for _, t := range md.GetTopics() {
		partitions, named := asked[t.GetName()]
		if t.GetError() != messages.ErrorCode_NONE || (asked != nil && !named) {
			continue
		}
		rt := kmsg.NewListPartitionReassignmentsResponseTopic()
		rt.Topic = t.GetName()
		for _, p := range t.GetPartitions() {
			moving := len(p.GetAddingReplicas()) > 0 || len(p.GetRemovingReplicas()) > 0
			if !moving || (asked != nil && !slices.Contains(partitions, p.GetPartition())) {
				continue
			}
			rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			rp.Partition = p.GetPartition()
			rp.Replicas = slices.Clone(p.GetReplicas())
			rp.AddingReplicas = slices.Clone(p.GetAddingReplicas())
			rp.RemovingReplicas = slices.Clone(p.GetRemovingReplicas())
			rt.Partitions = append(rt.Partitions, rp)
		}
		if len(rt.Partitions) > 0 {
			out = append(out, rt)
		}
	}
	return out
}
