package kafka

// Produce, versions 3 to 13; 0 to 2 are advertised and refused.
//
// Kafka 4.0 removed v0 to v2 (KIP-896) but still advertises them, because
// librdkafka turns compression off against a broker whose Produce range
// leaves them out (KAFKA-18659); this listener does the same, and answers
// them UNSUPPORTED_VERSION. v3 is the first with record batches (magic
// 2) and a transactional id; v5 adds the log start offset, v8 per-record
// errors and an error message, v9 flexible versions, v13 topics named by
// id (KIP-516).
//
// A request becomes one ProduceRequests to the node's partition manager,
// as the actor client's producer sends it, each partition's record batch
// as the bytes it came in, where the connection read them: the partition
// validates them and assigns their offsets, and once every partition has
// appended its batch the buffer serves the connection's next requests
// (remote.HeldBuffer). acks 1 and -1 (all) are Depot's own; acks 0 is handed on and
// answered with nothing, taking no place among the connection's answers.
// Transactions are not built: a request with a transactional id is
// refused, each partition with INVALID_REQUEST.

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/messages"
)

// minProduceVersion is the oldest Produce version taken.
const minProduceVersion = 3

func handleProduce(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.ProduceRequest)
	switch {
	case req.Version < minProduceVersion:
		c.reply(x, refuseProduce(req, codeUnsupportedVersion))
		return
	case req.TransactionID != nil:
		c.reply(x, refuseProduce(req, codeInvalidRequest))
		return
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		c.reply(x, refuseProduce(req, codeInvalidRequiredAcks))
		return
	}
	if req.Version < 13 {
		produce(c, ctx, x, req)
		return
	}
	ids := make([][16]byte, 0, len(req.Topics))
	for _, t := range req.Topics {
		ids = append(ids, t.TopicID)
	}
	c.withTopicIDs(ctx, ids, func(error) { produce(c, ctx, x, req) })
}

// produce hands req's batches to the partition manager and answers with
// what the partitions answer.
func produce(c *conn, ctx actor.Context, x *exchange, req *kmsg.ProduceRequest) {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	// slots are where each partition's answer goes in resp, by the
	// correlation id of its ProduceRequest.
	type slot struct{ topic, partition int }
	var slots []slot
	batches := &messages.ProduceRequests{}
	for ti, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		name := t.Topic
		known := true
		if req.Version >= 13 {
			tm := c.topics.byID[t.TopicID]
			known = tm != nil
			if known {
				name = tm.GetName()
			}
		}
		for pi, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			if !known {
				rp.ErrorCode = codeUnknownTopicID
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			rp.ErrorCode = codeRequestTimedOut
			rt.Partitions = append(rt.Partitions, rp)
			x.buffer.Lend(p.Records)
			batches.Requests = append(batches.Requests, &messages.ProduceRequest{
				Topic: name, Partition: p.Partition, Acks: int32(req.Acks), TimeoutMs: req.TimeoutMillis,
				Records: p.Records, CorrelationId: int64(len(slots)),
			})
			slots = append(slots, slot{ti, pi})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if req.Acks == 0 {
		if len(batches.Requests) > 0 {
			ctx.Send(c.l.cfg.PartitionManager, batches)
		}
		c.noReply(x)
		return
	}
	if len(batches.Requests) == 0 {
		c.reply(x, resp)
		return
	}
	// The manager answers within twice the request's timeout.
	timeout := max(c.l.cfg.RequestTimeout, 2*time.Duration(req.TimeoutMillis)*time.Millisecond+time.Second)
	c.ask(ctx, c.l.cfg.PartitionManager, batches, timeout, func(res any, err error) {
		answers, ok := res.(*messages.ProduceResponses)
		if err != nil || !ok {
			code := askErrorCode(err)
			for _, s := range slots {
				resp.Topics[s.topic].Partitions[s.partition].ErrorCode = code
			}
			c.reply(x, resp)
			return
		}
		for _, a := range answers.GetResponses() {
			i := a.GetCorrelationId()
			if i < 0 || i >= int64(len(slots)) {
				continue
			}
			s := slots[i]
			rp := &resp.Topics[s.topic].Partitions[s.partition]
			rp.ErrorCode = kafkaCode(a.GetError())
			rp.BaseOffset = a.GetBaseOffset()
			rp.LogAppendTime = a.GetLogAppendTimeMs()
			rp.LogStartOffset = a.GetLogStartOffset()
			rp.ErrorMessage = errorText(a.GetErrorMessage())
		}
		c.reply(x, resp)
	})
	// Nothing here reads the records again: the buffer they lie in is
	// the partitions' until they have appended them.
	x.buffer.Release()
}

// refuseProduce answers every partition of a produce request with code.
func refuseProduce(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// askErrorCode is the Kafka error code of a request to an actor that got
// no answer: err is the future's, nil when the answer was of another type.
func askErrorCode(err error) int16 {
	switch err {
	case actor.ErrTimeout:
		return codeRequestTimedOut
	case actor.ErrDeadLetter:
		// The actor is not on this node (any more): a partition moved
		// away, or the node is stopping.
		return codeNotLeaderOrFollower
	}
	return codeUnknownServerError
}
