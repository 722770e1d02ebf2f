package kafka

// OffsetForLeaderEpoch, versions 2 to 4.
//
// v2 is the oldest Kafka 4.0 takes (KIP-896) and the first with the
// current leader epoch (KIP-320); v3 adds the replica id, -1 for a
// consumer; v4 flexible versions. A consumer asks it to find where its
// log and the leader's part after a leader change (KIP-320).
//
// The request becomes one OffsetForLeaderEpochRequest to the node's
// partition manager, the message a follower's fetcher sends its leader,
// which asks each partition for the end offset of the epoch named: the
// start of the next epoch, or the log end offset for the leader's own.

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/messages"
)

func handleOffsetForLeaderEpoch(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	ask := &messages.OffsetForLeaderEpochRequest{ReplicaId: req.ReplicaID}
	type slot struct{ topic, partition int }
	var slots []slot
	for ti, t := range req.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		for pi, p := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.LeaderEpoch, rp.EndOffset = p.Partition, codeRequestTimedOut, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
			ask.Partitions = append(ask.Partitions, &messages.EpochQuery{
				Topic: t.Topic, Partition: p.Partition, CurrentLeaderEpoch: p.CurrentLeaderEpoch, LeaderEpoch: p.LeaderEpoch,
			})
			slots = append(slots, slot{ti, pi})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(slots) == 0 {
		c.reply(x, resp)
		return
	}
	c.ask(ctx, c.l.cfg.PartitionManager, ask, c.l.cfg.RequestTimeout, func(res any, err error) {
		answer, ok := res.(*messages.OffsetForLeaderEpochResponse)
		if err != nil || !ok {
			code := askErrorCode(err)
			for _, s := range slots {
				resp.Topics[s.topic].Partitions[s.partition].ErrorCode = code
			}
			c.reply(x, resp)
			return
		}
		// The manager answers each query in its place.
		for i, end := range answer.GetPartitions() {
			if i >= len(slots) {
				break
			}
			rp := &resp.Topics[slots[i].topic].Partitions[slots[i].partition]
			if end.GetTopic() != ask.Partitions[i].Topic || end.GetPartition() != rp.Partition {
				continue
			}
			rp.ErrorCode = kafkaCode(end.GetError())
			rp.LeaderEpoch, rp.EndOffset = end.GetLeaderEpoch(), end.GetEndOffset()
		}
		c.reply(x, resp)
	})
}

// refuseOffsetForLeaderEpoch answers every partition of a request with
// code.
func refuseOffsetForLeaderEpoch(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.LeaderEpoch, rp.EndOffset = p.Partition, code, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
