package kafka

// OffsetDelete, version 0 (KIP-496).
//
// Deletes committed offsets of a group: those of partitions whose topics
// no member of the group subscribes to; a partition of a topic a member
// consumes is answered GROUP_SUBSCRIBED_TO_TOPIC, and a group that does
// not exist GROUP_ID_NOT_FOUND. As Kafka's broker does, a partition of a
// topic this node does not know is answered UNKNOWN_TOPIC_OR_PARTITION.
// The request becomes one OffsetDeleteRequest to the node's group
// coordinator and on to the group's actor, which writes the deletions to
// __consumer_offsets.

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/messages"
)

func handleOffsetDelete(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.OffsetDeleteRequest)
	partitions := make(map[string][]int32, len(req.Topics))
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			partitions[t.Topic] = append(partitions[t.Topic], p.Partition)
		}
	}
	c.withPartitions(ctx, partitions, func(error) { offsetDelete(c, ctx, x, req) })
}

// offsetDelete hands req's partitions that the node knows to the group.
func offsetDelete(c *conn, ctx actor.Context, x *exchange, req *kmsg.OffsetDeleteRequest) {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	ask := &messages.OffsetDeleteRequest{GroupId: req.Group}
	type slot struct{ topic, partition int }
	var slots []slot
	for ti, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for pi, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			if c.partitionKnown(t.Topic, p.Partition) {
				ask.Partitions = append(ask.Partitions, &messages.TopicPartition{Topic: t.Topic, Partition: p.Partition})
				slots = append(slots, slot{ti, pi})
			} else {
				rp.ErrorCode = codeUnknownTopicOrPartition
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	c.ask(ctx, c.l.cfg.Groups, ask, c.l.cfg.RequestTimeout, func(res any, err error) {
		r, ok := res.(*messages.OffsetDeleteResponse)
		switch {
		case err != nil || !ok:
			resp.ErrorCode = groupAskCode(err)
		case r.GetError() != messages.ErrorCode_NONE:
			resp.ErrorCode = kafkaCode(r.GetError())
		default:
			for i, s := range slots {
				if i < len(r.GetPartitions()) {
					resp.Topics[s.topic].Partitions[s.partition].ErrorCode = kafkaCode(r.GetPartitions()[i].GetError())
				}
			}
		}
		c.reply(x, resp)
	})
}
