package kafka

// Fetch, versions 4 to 18, without fetch sessions.
//
// v4 is the oldest Kafka 4.0 takes (KIP-896) and the first with record
// batches and the last stable offset; v5 adds the log start offset, v7
// fetch sessions (KIP-227), v9 the current leader epoch (KIP-320), v11
// the rack (KIP-392), v12 flexible versions, v13 topics named by id
// (KIP-516), v15 to v18 what only followers send. A session is declined
// as a broker out of session slots declines it: the answer's session id
// is 0, so the client sends every partition in each request; a request
// that names a session this node never gave is answered
// FETCH_SESSION_ID_NOT_FOUND.
//
// Each partition becomes a FetchRequest to its partition actor on this
// node, as the actor client's consumer sends it, with the leader epoch the
// client names; the answers carry the stored batch bytes, which go into
// the response as they are. Every partition is first asked without a wait;
// when together they hold less than min bytes, each is asked again to wait
// up to the rest of max wait for a first byte, and the response goes once
// min bytes are there or every partition has answered. A partition's max
// bytes is its own bound; the response's, over the partitions in the
// request's order, lets through the first batch of the first partition
// with data whatever its size, as Kafka does, and drops the batches of a
// later partition that do not fit, which the client fetches next time.
// read_committed reads what read_uncommitted does: without transactions
// the last stable offset is the high watermark.

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/messages"
)

// Fetch session codes and epochs (KIP-227), and the versions that
// brought what a fetch names.
const (
	codeFetchSessionIDNotFound   int16 = 70
	codeInvalidFetchSessionEpoch int16 = 71
	sessionEpochFinal            int32 = -1
	sessionEpochInitial          int32 = 0
	fetchSessionFromVersion            = 7
	fetchCurrentEpochFromVersion       = 9
	fetchTopicIDsFromVersion           = 13
)

// fetchWaitSlack is how long past its wait a partition may take to
// answer a fetch that waits, before the fetch is answered without it;
// maxFetchWait bounds the wait a client asks for.
const (
	fetchWaitSlack = 2 * time.Second
	maxFetchWait   = 5 * time.Minute
)

// fetchPart is one partition of a fetch and its latest answer.
type fetchPart struct {
	topic     string
	partition int32
	offset    int64
	maxBytes  int32
	epoch     *int32
	// code is an error found before asking the partition, or the one of
	// an ask that got no answer; resp is the partition's latest answer.
	code int16
	resp *messages.FetchResponse
}

// fetchState is one fetch request while its partitions answer.
type fetchState struct {
	x        *exchange
	req      *kmsg.FetchRequest
	names    []string // of req.Topics, by index
	parts    [][]*fetchPart
	waiting  int
	bytes    int
	answered bool
}

func handleFetch(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.FetchRequest)
	if req.Version >= fetchSessionFromVersion {
		switch {
		case req.SessionID != 0:
			c.reply(x, fetchError(req, codeFetchSessionIDNotFound))
			return
		case req.SessionEpoch != sessionEpochInitial && req.SessionEpoch != sessionEpochFinal:
			c.reply(x, fetchError(req, codeInvalidFetchSessionEpoch))
			return
		}
	}
	if req.Version < fetchTopicIDsFromVersion {
		startFetch(c, ctx, x, req)
		return
	}
	ids := make([][16]byte, 0, len(req.Topics))
	for _, t := range req.Topics {
		ids = append(ids, t.TopicID)
	}
	c.withTopicIDs(ctx, ids, func(error) { startFetch(c, ctx, x, req) })
}

// startFetch asks every partition of req, without a wait.
func startFetch(c *conn, ctx actor.Context, x *exchange, req *kmsg.FetchRequest) {
	f := &fetchState{x: x, req: req, names: make([]string, len(req.Topics)), parts: make([][]*fetchPart, len(req.Topics))}
	responseMax := req.MaxBytes
	if req.Version < 3 || responseMax <= 0 {
		responseMax = 1<<31 - 1
	}
	for ti, t := range req.Topics {
		name, known := t.Topic, true
		if req.Version >= fetchTopicIDsFromVersion {
			tm := c.topics.byID[t.TopicID]
			if known = tm != nil; known {
				name = tm.GetName()
			}
		}
		f.names[ti] = name
		for _, p := range t.Partitions {
			fp := &fetchPart{topic: name, partition: p.Partition, offset: p.FetchOffset, maxBytes: min(p.PartitionMaxBytes, responseMax)}
			if fp.maxBytes <= 0 {
				fp.maxBytes = 1
			}
			if req.Version >= fetchCurrentEpochFromVersion && p.CurrentLeaderEpoch >= 0 {
				fp.epoch = proto.Int32(p.CurrentLeaderEpoch)
			}
			if !known {
				fp.code = codeUnknownTopicID
			}
			f.parts[ti] = append(f.parts[ti], fp)
		}
	}
	f.ask(c, ctx, 0)
}

// ask asks every partition that has no error, waiting up to wait for a
// first byte, and answers the fetch once they have.
func (f *fetchState) ask(c *conn, ctx actor.Context, wait time.Duration) {
	timeout := c.l.cfg.RequestTimeout
	minBytes := int32(0)
	if wait > 0 {
		timeout, minBytes = wait+fetchWaitSlack, 1
	}
	for _, parts := range f.parts {
		for _, fp := range parts {
			if fp.code != codeNone || (fp.resp != nil && fp.resp.GetError() != messages.ErrorCode_NONE) {
				continue
			}
			f.waiting++
			msg := &messages.FetchRequest{
				Topic: fp.topic, Partition: fp.partition, Offset: fp.offset, MaxBytes: fp.maxBytes,
				MinBytes: minBytes, MaxWaitMs: int32(wait / time.Millisecond), CurrentLeaderEpoch: fp.epoch,
			}
			c.ask(ctx, c.partitionPID(ctx, fp.topic, fp.partition), msg, timeout, func(res any, err error) {
				f.waiting--
				if f.answered {
					return
				}
				r, ok := res.(*messages.FetchResponse)
				switch {
				case err == nil && ok:
					if fp.resp != nil {
						f.bytes -= len(fp.resp.GetRecords())
					}
					fp.resp = r
					f.bytes += len(r.GetRecords())
				case wait == 0 || fp.resp == nil:
					fp.code = askErrorCode(err)
				}
				f.step(c, ctx, wait, fp)
			})
		}
	}
	if f.waiting == 0 {
		f.step(c, ctx, wait, nil)
	}
}

// step decides, after an answer, whether the fetch is answered now: once
// every partition has answered without a wait, when they hold min bytes
// or an error or the client does not wait; when they wait, once min bytes
// are there or a partition answered with an error, or all have answered.
func (f *fetchState) step(c *conn, ctx actor.Context, wait time.Duration, last *fetchPart) {
	enough := f.bytes >= int(f.req.MinBytes) && f.bytes > 0
	if wait > 0 {
		failed := last != nil && (last.code != codeNone || last.resp.GetError() != messages.ErrorCode_NONE)
		if enough || failed || f.waiting == 0 {
			f.answer(c)
		}
		return
	}
	if f.waiting > 0 {
		return
	}
	maxWait := time.Duration(f.req.MaxWaitMillis) * time.Millisecond
	if enough || f.failed() || maxWait <= 0 || f.req.MinBytes <= 0 {
		f.answer(c)
		return
	}
	f.ask(c, ctx, min(maxWait, maxFetchWait))
}

// failed reports whether some partition answered with an error.
func (f *fetchState) failed() bool {
	for _, parts := range f.parts {
		for _, fp := range parts {
			if fp.code != codeNone || (fp.resp != nil && fp.resp.GetError() != messages.ErrorCode_NONE) {
				return true
			}
		}
	}
	return false
}

// answer sends the fetch's response, within its max bytes.
func (f *fetchState) answer(c *conn) {
	f.answered = true
	req := f.req
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	left := int(req.MaxBytes)
	if req.Version < 3 || left <= 0 {
		left = 1<<31 - 1
	}
	first := true
	size := 256
	for ti, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = f.names[ti], t.TopicID
		if req.Version >= fetchTopicIDsFromVersion {
			rt.Topic = ""
		}
		for _, fp := range f.parts[ti] {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = fp.partition
			// Never null: librdkafka reads a null records field as a
			// malformed answer; Kafka writes empty records.
			rp.RecordBatches = []byte{}
			r := fp.resp
			switch {
			case fp.code != codeNone:
				rp.ErrorCode = fp.code
			case r == nil:
				rp.ErrorCode = codeRequestTimedOut
			case r.GetError() != messages.ErrorCode_NONE:
				rp.ErrorCode = kafkaCode(r.GetError())
			default:
				rp.HighWatermark = r.GetHighWatermark()
				rp.LastStableOffset = r.GetHighWatermark()
				rp.LogStartOffset = r.GetLogStartOffset()
				if records := r.GetRecords(); len(records) > 0 && (first || len(records) <= left) {
					rp.RecordBatches = records
					left -= len(records)
					size += len(records)
					first = false
				}
			}
			if rp.ErrorCode != codeNone {
				rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
			}
			rt.Partitions = append(rt.Partitions, rp)
			size += 64
		}
		resp.Topics = append(resp.Topics, rt)
		size += 32 + len(rt.Topic)
	}
	c.replySized(f.x, resp, size)
}

// fetchError is the answer to a fetch refused as a whole, with code.
func fetchError(req *kmsg.FetchRequest, code int16) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.ErrorCode = code
	return resp
}

// refuseFetch answers every partition of a fetch request with code.
func refuseFetch(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.FetchRequest)
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.ErrorCode = code
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
