package partition

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/depot-dev/depot/actors/partition/state"
	"github.com/depot-dev/depot/actors/remote"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
)

// maxFetchesWait bounds a FetchPartitionsRequest's max_wait_ms.
const maxFetchesWait = 5 * time.Minute

// The partition manager and the partitions exchange these within one node
// for a consumer's FetchPartitionsRequest.
type (
	// partFetch is the part-th part of a FetchPartitionsRequest, for its
	// partition: it reads and answers at once, and for wake after tells
	// the manager when it has more to read (see fetchWake): once, when
	// wakeOnce (the request waits for any byte), else each time.
	partFetch struct {
		gather        uint64
		part          int
		req           *messages.FetchPartition
		correlationID int64
		wake          time.Duration
		wakeOnce      bool
	}
	// partFetched answers a partFetch: the response, and the frame its
	// records were read into (see partitionActor.fetchAt), nil when none.
	partFetched struct {
		gather uint64
		part   int
		resp   *messages.FetchResponse
		frame  []byte
	}
	// fetchWake tells the manager that a partition asked a partFetch has
	// readable more bytes that a consumer may read, or, with changed, that
	// its answer changed otherwise: it no longer leads, or went offline.
	fetchWake struct {
		tp       disk.TopicPartition
		readable int
		changed  bool
	}
)

// partitionFetches is the gather of one consumer's FetchPartitionsRequest
// (see gather): the parts' responses in the request's order (nil until the
// partition answers), each with the frame its records lie in, if any. It is answered once its parts' records
// reach min_bytes or one has an error, or its wait passes, with the
// records trimmed to max_bytes (see state.FitResponse).
type partitionFetches struct {
	t      *remote.Transport // the pool of the frames
	to     *actor.PID
	req    *messages.FetchPartitionsRequest
	resps  []*messages.FetchResponse
	frames [][]byte
}

// onFetchPartitions hands each part of a consumer's fetch to its partition.
func (m *partitionManager) onFetchPartitions(ctx actor.Context, req *messages.FetchPartitionsRequest) {
	if refusal := state.ValidateFetchPartitions(req); refusal.Refused() {
		m.outboxes.Send(ctx, ctx.Sender(), &messages.FetchPartitionsResponse{
			CorrelationId: req.GetCorrelationId(), Error: refusal.Code, ErrorMessage: refusal.Message,
		}, nil)
		return
	}
	if req.GetReplaces() != 0 && ctx.Sender() != nil {
		m.endReplaced(ctx, ctx.Sender(), req.GetReplaces())
	}
	n := len(req.GetPartitions())
	m.cfg.Metrics.consumerFetched(n)
	k := &partitionFetches{t: m.cfg.Transport, to: ctx.Sender(), req: req, resps: make([]*messages.FetchResponse, n), frames: make([][]byte, n)}
	wait := max(min(time.Duration(req.GetMaxWaitMs())*time.Millisecond, maxFetchesWait), 0)
	g := m.gathers.add(n, int(req.GetMinBytes()), wait, k)
	for i, p := range req.GetPartitions() {
		tp := disk.TopicPartition{Topic: p.GetTopic(), Partition: p.GetPartition()}
		g.parts[i], g.index[tp] = tp, i
	}
	m.startGather(ctx, g)
}

// endReplaced ends the wait of the fetch of sender's whose correlation id
// is corrID, which a new one replaces: it is answered once its partitions
// have answered.
func (m *partitionManager) endReplaced(ctx actor.Context, sender *actor.PID, corrID int64) {
	for _, g := range m.gathers.byID {
		if k, ok := g.kind.(*partitionFetches); ok && k.req.GetCorrelationId() == corrID && k.to != nil && k.to.Equal(sender) {
			m.stepGather(ctx, g, g.core.Expired())
			return
		}
	}
}

func (k *partitionFetches) ask(ctx actor.Context, g *gather, i int, pid *actor.PID) {
	ctx.Request(pid, &partFetch{
		gather: g.id, part: i, req: k.req.GetPartitions()[i], correlationID: k.req.GetCorrelationId(),
		wake: g.wait, wakeOnce: k.req.GetMinBytes() <= 1,
	})
}

func (k *partitionFetches) refuse(i int, code messages.ErrorCode, message string) {
	p := k.req.GetPartitions()[i]
	k.take(i, &messages.FetchResponse{
		Topic: p.GetTopic(), Partition: p.GetPartition(), Offset: p.GetOffset(),
		CorrelationId: k.req.GetCorrelationId(), Error: code, ErrorMessage: message,
	}, nil)
}

func (k *partitionFetches) answered(i int) bool { return k.resps[i] != nil }

// take keeps resp and its frame as part i's answer, and hands the frame of
// the answer it replaces back to the pool: only the manager held it.
func (k *partitionFetches) take(i int, resp *messages.FetchResponse, frame []byte) {
	putFrame(k.t, k.frames[i])
	k.resps[i], k.frames[i] = resp, frame
}

// answer trims the parts' records to the request's max_bytes, whole
// batches at a time, and sends the response: to another node, each frame
// as it lies (see remote.Transport.FetchesMessage).
func (k *partitionFetches) answer(ctx actor.Context, m *partitionManager) {
	sizes := make([]int, len(k.resps))
	for i, r := range k.resps {
		sizes[i] = len(r.GetRecords())
	}
	for i, keep := range state.FitResponse(sizes, int(k.req.GetMaxBytes())) {
		r := k.resps[i]
		if keep >= len(r.Records) {
			continue
		}
		r.Records = state.WholeBatchesWithin(r.Records, keep)
		switch {
		case len(r.Records) == 0:
			r.Records = nil
			putFrame(k.t, k.frames[i])
			k.frames[i] = nil
		case k.frames[i] != nil:
			k.frames[i] = k.frames[i][:len(k.frames[i])-sizes[i]+len(r.Records)]
		}
	}
	resp := &messages.FetchPartitionsResponse{CorrelationId: k.req.GetCorrelationId(), Partitions: k.resps}
	m.outboxes.Send(ctx, k.to, m.cfg.Transport.FetchesAnswer(ctx.ActorSystem(), k.to, k.req.GetHandBackFrames(), resp, k.frames), nil)
}

// putFrame hands a fetch frame no message took back to t's pool.
func putFrame(t *remote.Transport, frame []byte) {
	if frame != nil {
		t.PutFrame(&frame)
	}
}

// onPartFetched takes a partition's answer for a consumer's fetch.
func (m *partitionManager) onPartFetched(ctx actor.Context, r *partFetched) {
	g, ok := m.gatherPart(r.gather, r.part)
	k, isFetches := (*partitionFetches)(nil), false
	if ok {
		k, isFetches = g.kind.(*partitionFetches)
	}
	if !isFetches {
		putFrame(m.cfg.Transport, r.frame) // answered already, or given up
		return
	}
	k.take(r.part, r.resp, r.frame)
	m.stepGather(ctx, g, g.core.Answered(r.part, len(r.resp.GetRecords()), r.resp.GetError() != messages.ErrorCode_NONE))
}

// gatherWakes are a partition's promises to tell the manager of what
// becomes readable (see fetchWake): once, at the next append, for the
// fetches that wait for any byte, which the next append answers; and each
// time until a moment, for those that wait for more, which appends may
// only make up together.
type gatherWakes struct {
	armed bool
	until time.Time
}

// onPartFetch answers one part of a consumer's fetch of several
// partitions with what the partition has now, as a FetchRequest without a
// wait or chunks, and promises to tell the manager of what it appends for
// the fetch's wait (see gatherWakes).
func (a *partitionActor) onPartFetch(ctx actor.Context, m *partFetch) {
	req := &messages.FetchRequest{
		Topic: a.tp.Topic, Partition: a.tp.Partition, Offset: m.req.GetOffset(), MaxBytes: m.req.GetMaxBytes(),
		CorrelationId: m.correlationID, CurrentLeaderEpoch: m.req.CurrentLeaderEpoch,
	}
	resp, frame, _ := a.fetch(req)
	w := &a.gatherWakes
	switch {
	case m.wake <= 0:
	case m.wakeOnce:
		w.armed = true
	default:
		if until := a.now().Add(m.wake); until.After(w.until) {
			w.until = until
		}
	}
	ctx.Respond(&partFetched{gather: m.gather, part: m.part, resp: resp, frame: frame})
}

// wakeGathers tells the manager, as the partition promised (see
// gatherWakes), that readable more bytes can be read, or that its answers
// changed otherwise (changed).
func (a *partitionActor) wakeGathers(ctx actor.Context, readable int, changed bool) {
	w := &a.gatherWakes
	if readable <= 0 && !changed {
		return
	}
	wake := w.armed
	if !w.until.IsZero() {
		if a.now().After(w.until) {
			w.until = time.Time{}
		} else {
			wake = true
		}
	}
	if !wake {
		return
	}
	w.armed = false
	if parent := ctx.Parent(); parent != nil {
		ctx.Send(parent, &fetchWake{tp: a.tp, readable: readable, changed: changed})
	}
}
