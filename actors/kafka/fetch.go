package kafka

// Fetch, versions 4 to 18, with incremental fetch sessions.
//
// v4 is the oldest Kafka 4.0 takes (KIP-896) and the first with record
// batches and the last stable offset; v5 adds the log start offset, v7
// fetch sessions (KIP-227), v9 the current leader epoch (KIP-320), v11
// the rack (KIP-392), v12 flexible versions, v13 topics named by id
// (KIP-516), v15 to v18 what only followers send. Sessions are kept as
// fetch_session.go says, in a cache per listener that every connection
// shares: a full fetch with epoch 0 creates one, an incremental fetch
// fetches every partition of its session and is answered with those that
// have something new.
//
// A fetch of several partitions becomes one FetchPartitionsRequest to the
// node's partition manager, as the actor client's consumer sends it, which
// holds it until its partitions have min bytes or max wait passes, as
// Kafka's fetch purgatory does. Otherwise (one partition, or one named
// twice) each partition becomes a FetchRequest to its partition actor,
// with the leader epoch the client names: each is first asked without a
// wait, and when together they hold less than min bytes, asked again to
// wait up to the rest of max wait for a first byte; the response goes once
// min bytes are there or every partition has answered. The answers carry
// the stored batch bytes, which go into the response as they are. A
// partition's max bytes is its own bound; the response's, over the
// partitions in the fetch's order (the request's, or its session's), lets
// through the first batch of the first partition with data whatever its
// size, as Kafka does, and of a later partition no batch that does not fit
// (the manager keeps those that do, a partition asked on its own none),
// which the client fetches next time.
// read_committed reads what read_uncommitted does: without transactions
// the last stable offset is the high watermark.

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/actors/remote"
	"github.com/depot-dev/depot/messages"
	wirekafka "github.com/depot-dev/depot/wire/kafka"
)

// Fetch session epochs (KIP-227), and the versions that brought what a
// fetch names.
const (
	sessionEpochFinal            int32 = -1
	sessionEpochInitial          int32 = 0
	fetchSessionFromVersion            = 7
	fetchCurrentEpochFromVersion       = 9
	fetchTopicIDsFromVersion           = 13
	fetchReplicaStateFromVersion       = 15
)

// fetchWaitSlack is how long past its wait a partition may take to
// answer a fetch that waits, before the fetch is answered without it;
// maxFetchWait bounds the wait a client asks for.
const (
	fetchWaitSlack = 2 * time.Second
	maxFetchWait   = 5 * time.Minute
)

// spliceRecordsFrom is the bytes of records from which a fetch's answer
// is written with its records as they came from the partitions, not
// copied into its frame (wirekafka.FetchResponseFrame): below it, the copy
// costs less than encoding the rest twice and writing more pieces.
const spliceRecordsFrom = 32 << 10

// fetchPart is one partition of a fetch and its latest answer.
type fetchPart struct {
	key       sessionKey
	topic     string // the topic's name; "" for an id not known
	partition int32
	offset    int64
	maxBytes  int32
	epoch     *int32
	// code is an error found before asking the partition, or the one of
	// an ask that got no answer; resp is the partition's latest answer,
	// and frame the fetch frame its records lie in, handed back once
	// they are written or no longer used.
	code  int16
	resp  *messages.FetchResponse
	frame *remote.FetchFrame
}

// fetchState is one fetch request while its partitions answer.
type fetchState struct {
	x        *exchange
	req      *kmsg.FetchRequest
	session  fetchContext
	parts    []*fetchPart // in session.partitions' order
	waiting  int
	bytes    int
	answered bool
}

func handleFetch(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.FetchRequest)
	fc := c.l.fetchContext(req)
	if fc.kind == contextError {
		c.reply(x, fetchError(req, fc.code))
		return
	}
	if req.Version < fetchTopicIDsFromVersion {
		startFetch(c, ctx, x, req, fc)
		return
	}
	ids := make([][16]byte, 0, len(req.Topics))
	for i, p := range fc.partitions {
		if i == 0 || p.key.topicID != fc.partitions[i-1].key.topicID {
			ids = append(ids, p.key.topicID)
		}
	}
	c.withTopicIDs(ctx, ids, func(error) { startFetch(c, ctx, x, req, fc) })
}

// fetchContext is how req stands to the listener's fetch sessions.
func (l *Listener) fetchContext(req *kmsg.FetchRequest) fetchContext {
	usesTopicIDs := req.Version >= fetchTopicIDsFromVersion
	var fetch []sessionPartition
	for _, t := range req.Topics {
		key := sessionKey{topic: t.Topic}
		if usesTopicIDs {
			key = sessionKey{topicID: t.TopicID}
		}
		for _, p := range t.Partitions {
			key.partition = p.Partition
			sp := sessionPartition{key: key, fetchOffset: p.FetchOffset, maxBytes: p.PartitionMaxBytes, currentLeaderEpoch: -1,
				highWatermark: -1, logStartOffset: -1}
			if req.Version >= fetchCurrentEpochFromVersion {
				sp.currentLeaderEpoch = p.CurrentLeaderEpoch
			}
			fetch = append(fetch, sp)
		}
	}
	if req.Version < fetchSessionFromVersion {
		return fetchContext{kind: contextSessionless, partitions: fetch}
	}
	var forget []sessionKey
	for _, t := range req.ForgottenTopics {
		key := sessionKey{topic: t.Topic}
		if usesTopicIDs {
			key = sessionKey{topicID: t.TopicID}
		}
		for _, p := range t.Partitions {
			key.partition = p
			forget = append(forget, key)
		}
	}
	privileged := req.ReplicaID >= 0
	if req.Version >= fetchReplicaStateFromVersion {
		privileged = req.ReplicaState.ID >= 0
	}
	l.sessionsMu.Lock()
	defer l.sessionsMu.Unlock()
	return l.sessions.newContext(time.Now(), req.SessionID, req.SessionEpoch, privileged, usesTopicIDs, fetch, forget)
}

// finishFetch records the answers of a fetch's partitions in the
// listener's fetch sessions: see fetchSessionCache.finish.
func (l *Listener) finishFetch(fc *fetchContext, results []partitionResult) (sessionID int32, named []bool, code int16) {
	l.sessionsMu.Lock()
	defer l.sessionsMu.Unlock()
	return l.sessions.finish(time.Now(), fc, results)
}

// FetchSessionStats are the counts of the listener's fetch sessions.
func (l *Listener) FetchSessionStats() FetchSessionStats {
	l.sessionsMu.Lock()
	defer l.sessionsMu.Unlock()
	return l.sessions.statsNow()
}

// startFetch asks every partition of fc, without a wait.
func startFetch(c *conn, ctx actor.Context, x *exchange, req *kmsg.FetchRequest, fc fetchContext) {
	f := &fetchState{x: x, req: req, session: fc, parts: make([]*fetchPart, 0, len(fc.partitions))}
	responseMax := req.MaxBytes
	if responseMax <= 0 {
		responseMax = 1<<31 - 1
	}
	for _, p := range fc.partitions {
		fp := &fetchPart{key: p.key, topic: p.key.topic, partition: p.key.partition, offset: p.fetchOffset,
			maxBytes: max(min(p.maxBytes, responseMax), 1)}
		if p.currentLeaderEpoch >= 0 {
			fp.epoch = proto.Int32(p.currentLeaderEpoch)
		}
		if fc.usesTopicIDs {
			fp.topic = ""
			if tm := c.topics.byID[p.key.topicID]; tm != nil {
				fp.topic = tm.GetName()
			} else {
				fp.code = codeUnknownTopicID
			}
		}
		f.parts = append(f.parts, fp)
	}
	f.ask(c, ctx, 0)
}

// ask asks every partition that has no error, waiting up to wait for a
// first byte, and answers the fetch once they have. A first ask of more
// than one partition goes to the partition manager as one request instead
// (see askManager).
func (f *fetchState) ask(c *conn, ctx actor.Context, wait time.Duration) {
	if wait == 0 && f.byManager(c) {
		f.askManager(c, ctx)
		return
	}
	timeout := c.l.cfg.RequestTimeout
	minBytes := int32(0)
	if wait > 0 {
		timeout, minBytes = wait+fetchWaitSlack, 1
	}
	for _, fp := range f.parts {
		if fp.failed() {
			continue
		}
		f.waiting++
		msg := &messages.FetchRequest{
			Topic: fp.topic, Partition: fp.partition, Offset: fp.offset, MaxBytes: fp.maxBytes,
			MinBytes: minBytes, MaxWaitMs: int32(wait / time.Millisecond), CurrentLeaderEpoch: fp.epoch,
			HandBackFrame: true,
		}
		c.ask(ctx, c.partitionPID(ctx, fp.topic, fp.partition), msg, timeout, func(res any, err error) {
			f.waiting--
			r, frame := fetchAnswer(res)
			if f.answered {
				frame.Release()
				return
			}
			switch {
			case err == nil && r != nil:
				if fp.resp != nil {
					f.bytes -= len(fp.resp.GetRecords())
				}
				fp.frame.Release()
				fp.resp, fp.frame = r, frame
				f.bytes += len(r.GetRecords())
			case wait == 0 || fp.resp == nil:
				fp.code = askErrorCode(err)
			}
			f.step(c, ctx, wait, fp)
		})
	}
	if f.waiting == 0 {
		f.step(c, ctx, wait, nil)
	}
}

// byManager reports whether the fetch's partitions are asked through the
// partition manager, in one FetchPartitionsRequest: when there is a
// manager, more than one partition to ask, and none named twice.
func (f *fetchState) byManager(c *conn) bool {
	if c.l.cfg.PartitionManager == nil {
		return false
	}
	type key struct {
		topic     string
		partition int32
	}
	asked := make(map[key]bool, len(f.parts))
	for _, fp := range f.parts {
		if fp.failed() {
			continue
		}
		k := key{fp.topic, fp.partition}
		if asked[k] {
			return false
		}
		asked[k] = true
	}
	return len(asked) > 1
}

// askManager asks the partition manager for every partition that has no
// error, in one FetchPartitionsRequest with the fetch's min bytes, max
// wait and max bytes, as Kafka's fetch purgatory holds one fetch for all
// its partitions, and answers the fetch with what it answers.
func (f *fetchState) askManager(c *conn, ctx actor.Context) {
	wait := max(min(time.Duration(f.req.MaxWaitMillis)*time.Millisecond, maxFetchWait), 0)
	timeout := c.l.cfg.RequestTimeout
	if wait > 0 {
		timeout = wait + fetchWaitSlack
	}
	msg := &messages.FetchPartitionsRequest{
		MinBytes: max(f.req.MinBytes, 0), MaxWaitMs: int32(wait / time.Millisecond), MaxBytes: max(f.req.MaxBytes, 0),
		HandBackFrames: true,
	}
	var asked []*fetchPart
	for _, fp := range f.parts {
		if fp.failed() {
			continue
		}
		asked = append(asked, fp)
		msg.Partitions = append(msg.Partitions, &messages.FetchPartition{
			Topic: fp.topic, Partition: fp.partition, Offset: fp.offset, MaxBytes: fp.maxBytes, CurrentLeaderEpoch: fp.epoch,
		})
	}
	f.waiting++
	c.ask(ctx, c.l.cfg.PartitionManager, msg, timeout, func(res any, err error) {
		f.waiting--
		resp, frames := fetchesAnswer(res)
		switch {
		case err != nil:
			for _, fp := range asked {
				fp.code = askErrorCode(err)
			}
		case resp == nil || (resp.GetError() == messages.ErrorCode_NONE && len(resp.GetPartitions()) != len(asked)):
			frames.Release()
			for _, fp := range asked {
				fp.code = codeUnknownServerError
			}
		case resp.GetError() != messages.ErrorCode_NONE:
			frames.Release()
			for _, fp := range asked {
				fp.code = kafkaCode(resp.GetError())
			}
		default:
			for i, fp := range asked {
				fp.resp = resp.GetPartitions()[i]
				if frames != nil {
					fp.frame = frames.Parts[i]
				}
			}
		}
		f.answer(c)
	})
}

// fetchesAnswer is the partition manager's answer to a
// FetchPartitionsRequest, as it comes: the response, and its frames when
// the manager handed them. Both are nil for anything else.
func fetchesAnswer(res any) (*messages.FetchPartitionsResponse, *remote.FetchesFrame) {
	switch r := res.(type) {
	case *remote.FetchesFrame:
		return r.Response, r
	case *messages.FetchPartitionsResponse:
		return r, nil
	}
	return nil, nil
}

// fetchAnswer is a partition's answer to a FetchRequest, as it comes: the
// response, and its frame when the partition handed one. Both are nil for
// anything else.
func fetchAnswer(res any) (*messages.FetchResponse, *remote.FetchFrame) {
	switch r := res.(type) {
	case *remote.FetchFrame:
		return r.Response, r
	case *messages.FetchResponse:
		return r, nil
	}
	return nil, nil
}

// step decides, after an answer, whether the fetch is answered now: once
// every partition has answered without a wait, when they hold min bytes
// or an error or the client does not wait; when they wait, once min bytes
// are there or a partition answered with an error, or all have answered.
func (f *fetchState) step(c *conn, ctx actor.Context, wait time.Duration, last *fetchPart) {
	enough := f.bytes >= int(f.req.MinBytes) && f.bytes > 0
	if wait > 0 {
		if enough || (last != nil && last.failed()) || f.waiting == 0 {
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
	for _, fp := range f.parts {
		if fp.failed() {
			return true
		}
	}
	return false
}

// failed reports whether the partition has an error, its own or one of
// asking it.
func (fp *fetchPart) failed() bool {
	return fp.code != codeNone || (fp.resp != nil && fp.resp.GetError() != messages.ErrorCode_NONE)
}

// answer sends the fetch's response, within its max bytes, with the
// partitions its session context names.
func (f *fetchState) answer(c *conn) {
	f.answered = true
	req := f.req
	left := int(req.MaxBytes)
	if left <= 0 {
		left = 1<<31 - 1
	}
	first := true
	parts := make([]kmsg.FetchResponseTopicPartition, len(f.parts))
	results := make([]partitionResult, len(f.parts))
	for i, fp := range f.parts {
		rp := &parts[i]
		rp.Default()
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
				first = false
			}
		}
		if rp.ErrorCode != codeNone {
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
		}
		results[i] = partitionResult{key: fp.key, recordBytes: len(rp.RecordBatches), highWatermark: rp.HighWatermark,
			logStartOffset: rp.LogStartOffset, code: rp.ErrorCode}
	}
	// The answer takes the partitions' frames: nothing of the fetch reads
	// their records any more.
	var fetched []*remote.FetchFrame
	for _, fp := range f.parts {
		if fp.frame != nil {
			fetched = append(fetched, fp.frame)
		}
		fp.resp, fp.frame = nil, nil
	}
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	sessionID, named, code := c.l.finishFetch(&f.session, results)
	resp.SessionID = sessionID
	if code != codeNone {
		resp.ErrorCode = code
		c.reply(f.x, resp)
		answerFrame{fetched: fetched}.releaseFetched()
		return
	}
	// Partitions of one topic in a row are one topic of the answer.
	var prev *fetchPart
	recordBytes := 0
	for i, fp := range f.parts {
		if !named[i] {
			continue
		}
		if prev == nil || prev.key.topicID != fp.key.topicID || prev.key.topic != fp.key.topic {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = fp.key.topic, fp.key.topicID
			resp.Topics = append(resp.Topics, rt)
		}
		rt := &resp.Topics[len(resp.Topics)-1]
		rt.Partitions = append(rt.Partitions, parts[i])
		recordBytes += len(parts[i].RecordBatches)
		prev = fp
	}
	if recordBytes < spliceRecordsFrom {
		c.reply(f.x, resp)
		answerFrame{fetched: fetched}.releaseFetched()
		return
	}
	c.replyFrame(f.x, answerFrame{pieces: wirekafka.FetchResponseFrame(f.x.req.CorrelationID, resp), fetched: fetched})
}

// fetchError is the answer to a fetch refused as a whole, with code.
func fetchError(req *kmsg.FetchRequest, code int16) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.ErrorCode = code
	return resp
}

// refuseFetch answers every partition of a fetch request with code, and
// empty records, never null ones: Kafka writes empty records for a
// partition in error, and sarama fails to decode the whole response on a
// null one.
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
			rp.RecordBatches = []byte{}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
