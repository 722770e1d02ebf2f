package kafka

// ListOffsets, versions 1 to 6.
//
// v1 is the oldest Kafka 4.0 takes (KIP-896); v2 adds the isolation
// level, v4 the current leader epoch and the leader epoch of the answer,
// v6 flexible versions. v7 and later ask for timestamps the partition
// actors do not answer (-3, the largest timestamp; -4, the earliest local
// offset; and so on), so they are not advertised, and are answered
// UNSUPPORTED_VERSION; at the versions taken, a timestamp below -2 is
// answered so too.
//
// Each partition becomes a ListOffsetsRequest to its partition actor on
// this node, as the actor client sends it: -2 the log start offset, -1
// the high watermark (read_committed the same: no transactions), any
// other timestamp the first offset whose record is at or after it. The
// leader epoch given is the one the metadata names.

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/messages"
)

// Timestamps of ListOffsets with a meaning of their own.
const (
	listLatest   int64 = -1
	listEarliest int64 = -2
)

// listOffsetsEpochMaxAge is how old the leader epochs ListOffsets gives
// may be.
const listOffsetsEpochMaxAge = time.Second

func handleListOffsets(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.ListOffsetsRequest)
	c.withTopics(ctx, listOffsetsEpochMaxAge, func(error) { listOffsets(c, ctx, x, req) })
}

func listOffsets(c *conn, ctx actor.Context, x *exchange, req *kmsg.ListOffsetsRequest) {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	waiting := 0
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			if p.Timestamp < listEarliest {
				rp.ErrorCode = codeUnsupportedVersion
			} else {
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
			if p.Timestamp < listEarliest {
				continue
			}
			rp := &resp.Topics[ti].Partitions[pi]
			msg := &messages.ListOffsetsRequest{Topic: t.Topic, Partition: p.Partition, Timestamp: p.Timestamp}
			c.ask(ctx, c.partitionPID(ctx, t.Topic, p.Partition), msg, c.l.cfg.RequestTimeout, func(res any, err error) {
				waiting--
				r, ok := res.(*messages.ListOffsetsResponse)
				switch {
				case err != nil || !ok:
					rp.ErrorCode = askErrorCode(err)
				case r.GetError() != messages.ErrorCode_NONE:
					rp.ErrorCode = kafkaCode(r.GetError())
				default:
					rp.ErrorCode = codeNone
					rp.Offset, rp.Timestamp = r.GetOffset(), r.GetTimestamp()
					rp.LeaderEpoch = c.leaderEpoch(t.Topic, p.Partition)
				}
				if waiting == 0 {
					c.reply(x, resp)
				}
			})
		}
	}
}

// leaderEpoch is the leader epoch the metadata last gave a partition, -1
// when it is not known.
func (c *conn) leaderEpoch(topic string, partition int32) int32 {
	tm := c.topics.byName[topic]
	for _, p := range tm.GetPartitions() {
		if p.GetPartition() == partition {
			return p.GetLeaderEpoch()
		}
	}
	return -1
}

// refuseListOffsets answers every partition of a request with code.
func refuseListOffsets(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
