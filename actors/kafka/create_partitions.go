package kafka

// CreatePartitions, versions 0 to 3.
//
// v1 is the same as v0, v2 flexible versions, v3 nothing new here.
//
// Each topic becomes a CreatePartitionsRequest to the metadata actor,
// which hands it to the active controller: the topic's partition count is
// raised to the count asked, the new partitions placed as a new topic's
// are, or on the replicas the request names for each, and started on
// their nodes; validate_only changes nothing. A count below the topic's,
// or equal to it, is answered INVALID_PARTITIONS, as Kafka does (a
// topic's partitions are never removed); replicas of another count than
// the topic's, or on nodes not registered or fenced,
// INVALID_REPLICA_ASSIGNMENT; a topic that does not exist
// UNKNOWN_TOPIC_OR_PARTITION; a topic named twice, and the internal
// topic __consumer_offsets, whose groups are found by hashing among its
// partitions, INVALID_REQUEST.

import (
	"fmt"
	"slices"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/messages"
)

func handleCreatePartitions(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	names := make([]string, len(req.Topics))
	for i, t := range req.Topics {
		names[i] = t.Topic
	}
	twice := namedTwice(names)
	waiting := 0
	for i, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		resp.Topics = append(resp.Topics, rt)
		if twice[t.Topic] {
			resp.Topics[i].ErrorCode = codeInvalidRequest
			resp.Topics[i].ErrorMessage = kmsg.StringPtr(fmt.Sprintf("topic %q is named more than once in the request", t.Topic))
			continue
		}
		m := &messages.CreatePartitionsRequest{Topic: t.Topic, Count: t.Count, ValidateOnly: req.ValidateOnly}
		for _, a := range t.Assignment {
			m.Assignments = append(m.Assignments, &messages.ReplicaAssignment{Replicas: slices.Clone(a.Replicas)})
		}
		waiting++
		slot := &resp.Topics[i]
		c.ask(ctx, c.l.cfg.Metadata, m, c.l.cfg.RequestTimeout, func(res any, err error) {
			waiting--
			r, ok := res.(*messages.CreatePartitionsResponse)
			switch {
			case err != nil || !ok:
				slot.ErrorCode = askErrorCode(err)
			default:
				slot.ErrorCode, slot.ErrorMessage = kafkaCode(r.GetError()), errorText(r.GetErrorMessage())
			}
			if waiting == 0 {
				c.reply(x, resp)
			}
		})
	}
	if waiting == 0 {
		c.reply(x, resp)
	}
}
