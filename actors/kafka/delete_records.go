package kafka

// DeleteRecords, versions 0 to 2.
//
// v1 is the same as v0, v2 flexible versions.
//
// Each partition becomes a DeleteRecordsRequest to its partition actor on
// this node, as the actor client sends it to the partition's leader: the
// log start offset is raised to the offset given (-1, the high
// watermark), the segments wholly below it deleted, and the answer is the
// log start offset after it (the low watermark). An offset past the high
// watermark is answered OFFSET_OUT_OF_RANGE, a partition this node does
// not lead NOT_LEADER_OR_FOLLOWER, one that does not exist
// UNKNOWN_TOPIC_OR_PARTITION.

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/messages"
)

func handleDeleteRecords(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.DeleteRecordsRequest)
	partitions := make(map[string][]int32, len(req.Topics))
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			partitions[t.Topic] = append(partitions[t.Topic], p.Partition)
		}
	}
	c.withPartitions(ctx, partitions, func(error) { deleteRecords(c, ctx, x, req) })
}

func deleteRecords(c *conn, ctx actor.Context, x *exchange, req *kmsg.DeleteRecordsRequest) {
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	waiting := 0
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition, rp.LowWatermark = p.Partition, -1
			rp.ErrorCode = codeUnknownTopicOrPartition
			if c.partitionKnown(t.Topic, p.Partition) {
				rp.ErrorCode = codeRequestTimedOut
				waiting++
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if waiting == 0 {
		c.reply(x, resp)
		return
	}
	for ti, t := range req.Topics {
		for pi, p := range t.Partitions {
			rp := &resp.Topics[ti].Partitions[pi]
			if rp.ErrorCode != codeRequestTimedOut {
				continue
			}
			msg := &messages.DeleteRecordsRequest{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset}
			c.ask(ctx, c.partitionPID(ctx, t.Topic, p.Partition), msg, c.l.cfg.RequestTimeout, func(res any, err error) {
				waiting--
				r, ok := res.(*messages.DeleteRecordsResponse)
				switch {
				case err != nil || !ok:
					rp.ErrorCode = askErrorCode(err)
				default:
					rp.ErrorCode, rp.LowWatermark = kafkaCode(r.GetError()), r.GetLowWatermark()
				}
				if waiting == 0 {
					c.reply(x, resp)
				}
			})
		}
	}
}
