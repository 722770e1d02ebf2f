package client

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/actortest"
	depotremote "github.com/depot-dev/depot/actors/remote"
	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

// faults are what a fake partition does wrong. Zero means never.
type faults struct {
	// The three faults below strike at random, about once in n, from a
	// generator seeded per partition: a fault every n-th request exactly
	// can fall in step with the producer's resends (five in flight,
	// resent together), and strike the same batch every time.
	dropProduceEvery int // ignore about one ProduceRequest in n
	loseAnswerEvery  int // append about one batch in n but send no answer
	dropFetchEvery   int // ignore about one FetchRequest in n
	// unavailable, when not NONE, is the error every fetch and list
	// offsets is answered with, as an offline partition answers.
	unavailable  messages.ErrorCode
	produceDelay time.Duration // answer produce requests this late
	// holdProduce is how long a partition works on each produce
	// request, in its turn: its answers keep their order.
	holdProduce    time.Duration
	discard        bool // assign offsets but keep no records (benchmarks)
	skewChunkEvery int  // in every n-th answer in chunks, the second names a wrong offset
	dropChunkEvery int  // in every n-th answer in three chunks or more, the second is not sent
	// maxMessageBytes refuses larger batches with MESSAGE_TOO_LARGE, as a
	// topic's max.message.bytes does, naming the limit in the answer
	// unless hideMaxMessageBytes (as a node that does not say it).
	maxMessageBytes     int
	hideMaxMessageBytes bool
	// dropListOffsets ignores every ListOffsetsRequest.
	dropListOffsets bool
	// createDelay is how late CreateTopicRequests are answered, as by a
	// node creating thousands of partitions.
	createDelay time.Duration
}

// fakeCluster is a metadata actor and partition actors, in memory.
type fakeCluster struct {
	system *actor.ActorSystem

	mu         sync.Mutex
	faults     faults
	topics     map[string][]*fakePartition
	producerID int64
	// refusals are the codes the next produce requests are answered
	// with, one each, in order: NOT_ENOUGH_REPLICAS_AFTER_APPEND after
	// appending the batch, as a leader whose followers fell behind does,
	// any other without.
	refusals []messages.ErrorCode
	// loseCreates is how many next CreateTopicRequests create their
	// topic and send no answer.
	loseCreates int
	// metadataRequests counts the MetadataRequests answered.
	metadataRequests atomic.Int32
	// produceRequests counts the ProduceRequests the partition manager
	// took, and producePartitions the partitions' requests they carried.
	produceRequests, producePartitions atomic.Int32
	// unanswered counts the ProduceRequests awaiting their answer, and
	// maxUnanswered its highest value.
	unanswered, maxUnanswered atomic.Int32
	// fetchesRequests counts the FetchPartitionsRequests the partition
	// manager took, and maxParts the most parts one named.
	fetchesRequests atomic.Int32
	maxParts        atomic.Int32

	// working counts the partitions working on a produce request
	// (with holdProduce), and workingBytes the size of those requests'
	// records; maxWorking and maxWorkingBytes are their highest values.
	working, maxWorking           atomic.Int32
	workingBytes, maxWorkingBytes atomic.Int64
}

// newFakeCluster spawns a fake metadata actor in system.
func newFakeCluster(t testing.TB, system *actor.ActorSystem) *fakeCluster {
	t.Helper()
	fc := &fakeCluster{system: system, topics: map[string][]*fakePartition{}}
	_, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &fakeMetadata{fc: fc} }), actors.MetadataActorName)
	require.NoError(t, err)
	_, err = system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return newFakeManager(fc) }), actors.PartitionManagerName)
	require.NoError(t, err)
	return fc
}

// fakeManager is the node's partition manager: it hands each produce
// request to its partition's leader and answers them together once each
// has answered; a request a partition drops leaves its ProduceRequests
// unanswered. Once a partition's leader has moved, it refuses the
// partition's requests in the next ProduceRequests with
// NOT_LEADER_OR_FOLLOWER, as the node that led it would refuse what was
// sent before the producer knew.
type fakeManager struct {
	fc     *fakeCluster
	nextID int64
	slots  map[int64]fakeSlot // by the manager's correlation id
	// fetchSlots are where the partitions' answers to the parts of
	// FetchPartitionsRequests go, by the manager's correlation id.
	fetchSlots map[int64]fakeFetchSlot
}

// fakeFetches is a FetchPartitionsRequest the fake manager gathers, as the
// Kafka listener gathers a Kafka fetch: each part goes to its partition as
// a FetchRequest without a wait, and once all have answered, the request
// is answered if the parts' records reach min_bytes, or one has an error,
// or it may not wait; otherwise each part is asked again to wait, as its
// partition parks it, for min_bytes of its own, and the first answer with
// records or an error answers the request, as does the last. A second past
// max_wait, or when a request replaces it, it is answered with what it
// has (the parts never answered with REQUEST_TIMED_OUT). Answers that come
// after are dropped.
type fakeFetches struct {
	to      *actor.PID
	req     *messages.FetchPartitionsRequest
	resps   []*messages.FetchResponse
	slots   []int64
	waiting int
	bytes   int
	failed  bool
	waited  bool // asked again to wait
	done    bool
}

// fakeFetchSlot is where a partition's answer goes: part i of g.
type fakeFetchSlot struct {
	g *fakeFetches
	i int
}

// fakeFetchesDeadline answers g with what it has.
type fakeFetchesDeadline struct{ g *fakeFetches }

// fakeSlot is where a partition's answer goes: answer i of g, for the
// producer's correlation id corrID.
type fakeSlot struct {
	g      *fakeGather
	i      int
	corrID int64
}

type fakeGather struct {
	to      *actor.PID
	resps   []*messages.ProduceResponse
	waiting int
}

func (m *fakeManager) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *messages.ProduceRequests:
		m.route(ctx, msg)
	case *messages.FetchPartitionsRequest:
		m.fetch(ctx, msg)
	case *messages.FetchResponse:
		slot, ok := m.fetchSlots[msg.GetCorrelationId()]
		if !ok {
			return
		}
		delete(m.fetchSlots, msg.GetCorrelationId())
		m.fetched(ctx, slot.g, slot.i, msg)
	case *fakeFetchesDeadline:
		m.answerFetches(ctx, msg.g)
	case *messages.ProduceResponse:
		slot, ok := m.slots[msg.GetCorrelationId()]
		if !ok {
			return
		}
		delete(m.slots, msg.GetCorrelationId())
		msg.CorrelationId = slot.corrID
		slot.g.resps[slot.i] = msg
		if slot.g.waiting--; slot.g.waiting == 0 {
			m.fc.unanswered.Add(-1)
			ctx.Send(slot.g.to, &messages.ProduceResponses{Responses: slot.g.resps})
		}
	}
}

func (m *fakeManager) route(ctx actor.Context, req *messages.ProduceRequests) {
	m.fc.produceRequests.Add(1)
	m.fc.producePartitions.Add(int32(len(req.GetRequests())))
	refused := map[*fakePartition]bool{}
	g := &fakeGather{to: ctx.Sender()}
	for _, r := range req.GetRequests() {
		m.fc.mu.Lock()
		var p *fakePartition
		if parts := m.fc.topics[r.GetTopic()]; r.GetPartition() >= 0 && int(r.GetPartition()) < len(parts) {
			p = parts[r.GetPartition()]
		}
		m.fc.mu.Unlock()
		failed := func(code messages.ErrorCode) *messages.ProduceResponse {
			return &messages.ProduceResponse{Topic: r.GetTopic(), Partition: r.GetPartition(), CorrelationId: r.GetCorrelationId(), Error: code}
		}
		if p == nil {
			g.resps = append(g.resps, failed(messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION))
			continue
		}
		p.mu.Lock()
		refuse := p.moved || refused[p]
		if refuse {
			p.moved = false
			refused[p] = true
			p.stats.notLeader++
		}
		pid := p.pid
		p.mu.Unlock()
		switch {
		case r.GetAcks() == 0:
			if !refuse {
				ctx.Send(pid, r)
			}
		case refuse:
			g.resps = append(g.resps, failed(messages.ErrorCode_NOT_LEADER_OR_FOLLOWER))
		default:
			m.nextID++
			m.slots[m.nextID] = fakeSlot{g: g, i: len(g.resps), corrID: r.GetCorrelationId()}
			g.resps = append(g.resps, nil)
			g.waiting++
			r.CorrelationId = m.nextID
			ctx.Request(pid, r)
		}
	}
	if len(g.resps) > 0 && g.waiting == 0 {
		ctx.Send(g.to, &messages.ProduceResponses{Responses: g.resps})
	}
	if g.waiting > 0 {
		raiseMax(&m.fc.maxUnanswered, m.fc.unanswered.Add(1))
	}
}

// fetch hands each part of req to its partition, without a wait.
func (m *fakeManager) fetch(ctx actor.Context, req *messages.FetchPartitionsRequest) {
	if req.GetReplaces() != 0 {
		for _, slot := range m.fetchSlots {
			if g := slot.g; g.req.GetCorrelationId() == req.GetReplaces() && g.to.Equal(ctx.Sender()) {
				m.answerFetches(ctx, g)
				break
			}
		}
	}
	m.fc.fetchesRequests.Add(1)
	raiseMax(&m.fc.maxParts, int32(len(req.GetPartitions())))
	g := &fakeFetches{to: ctx.Sender(), req: req}
	for _, part := range req.GetPartitions() {
		resp := &messages.FetchResponse{Topic: part.GetTopic(), Partition: part.GetPartition(), Offset: part.GetOffset(), CorrelationId: req.GetCorrelationId(), Error: messages.ErrorCode_REQUEST_TIMED_OUT}
		g.resps = append(g.resps, resp)
		if m.fc.partitionOf(part.GetTopic(), part.GetPartition()) == nil {
			resp.Error = messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION
			g.failed = true
		}
	}
	m.ask(ctx, g, 0)
	if g.waiting == 0 {
		m.answerFetches(ctx, g)
		return
	}
	root, self := ctx.ActorSystem().Root, ctx.Self()
	time.AfterFunc(time.Duration(req.GetMaxWaitMs())*time.Millisecond+time.Second, func() { root.Send(self, &fakeFetchesDeadline{g}) })
}

// ask asks each part of g that has no error of its partition, waiting up
// to wait for a first byte.
func (m *fakeManager) ask(ctx actor.Context, g *fakeFetches, wait int32) {
	for i, part := range g.req.GetPartitions() {
		if g.resps[i].GetError() != messages.ErrorCode_NONE && g.resps[i].GetError() != messages.ErrorCode_REQUEST_TIMED_OUT {
			continue
		}
		p := m.fc.partitionOf(part.GetTopic(), part.GetPartition())
		if p == nil {
			continue
		}
		p.mu.Lock()
		pid := p.pid
		p.mu.Unlock()
		m.nextID++
		m.fetchSlots[m.nextID] = fakeFetchSlot{g: g, i: i}
		g.slots = append(g.slots, m.nextID)
		g.waiting++
		minBytes := int32(0)
		if wait > 0 {
			minBytes = max(g.req.GetMinBytes(), 1)
		}
		ctx.Request(pid, &messages.FetchRequest{
			Topic: part.GetTopic(), Partition: part.GetPartition(), Offset: part.GetOffset(), MaxBytes: part.GetMaxBytes(),
			MinBytes: minBytes, MaxWaitMs: wait, CorrelationId: m.nextID, CurrentLeaderEpoch: part.CurrentLeaderEpoch,
		})
	}
}

// fetched takes part i's answer for g.
func (m *fakeManager) fetched(ctx actor.Context, g *fakeFetches, i int, resp *messages.FetchResponse) {
	if g.done {
		return
	}
	resp.CorrelationId = g.req.GetCorrelationId()
	g.bytes += len(resp.GetRecords()) - len(g.resps[i].GetRecords())
	g.resps[i] = resp
	g.waiting--
	g.failed = g.failed || resp.GetError() != messages.ErrorCode_NONE
	switch {
	case g.waited && (g.waiting == 0 || g.failed || len(resp.GetRecords()) > 0):
		m.answerFetches(ctx, g)
	case g.waiting > 0:
	case g.failed || g.bytes >= int(g.req.GetMinBytes()) || g.req.GetMaxWaitMs() <= 0:
		m.answerFetches(ctx, g)
	default:
		g.waited = true
		m.ask(ctx, g, g.req.GetMaxWaitMs())
	}
}

// answerFetches answers g, once.
func (m *fakeManager) answerFetches(ctx actor.Context, g *fakeFetches) {
	if g.done {
		return
	}
	g.done = true
	for _, id := range g.slots {
		delete(m.fetchSlots, id)
	}
	ctx.Send(g.to, &messages.FetchPartitionsResponse{CorrelationId: g.req.GetCorrelationId(), Partitions: g.resps})
}

// partitionOf is a topic's partition, nil when there is none.
func (fc *fakeCluster) partitionOf(topic string, partition int32) *fakePartition {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if parts := fc.topics[topic]; partition >= 0 && int(partition) < len(parts) {
		return parts[partition]
	}
	return nil
}

// newFakeManager is a fake partition manager of fc.
func newFakeManager(fc *fakeCluster) *fakeManager {
	return &fakeManager{fc: fc, slots: map[int64]fakeSlot{}, fetchSlots: map[int64]fakeFetchSlot{}}
}

// newLocalSystem is an actor system without remote, stopped at the end of t.
func newLocalSystem(t *testing.T) *actor.ActorSystem {
	t.Helper()
	return actortest.System(t)
}

// newRemoteSystem is an actor system with remote on 127.0.0.1, any port.
func newRemoteSystem(t *testing.T) *actor.ActorSystem {
	t.Helper()
	sys := actortest.System(t)
	r := remote.NewRemote(sys, depotremote.NewTransport().Config("127.0.0.1", 0, logrus.NewEntry(actortest.Logger(t, logrus.WarnLevel))))
	r.Start()
	t.Cleanup(func() { r.Shutdown(false) })
	return sys
}

func (fc *fakeCluster) setFaults(f faults) {
	fc.mu.Lock()
	fc.faults = f
	fc.mu.Unlock()
}

func (fc *fakeCluster) getFaults() faults {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.faults
}

// refuseProduces has the next produce requests answered with codes, one
// each (see fakeCluster.refusals).
func (fc *fakeCluster) refuseProduces(codes ...messages.ErrorCode) {
	fc.mu.Lock()
	fc.refusals = append(fc.refusals, codes...)
	fc.mu.Unlock()
}

// nextRefusal takes the code the next produce request is answered with,
// NONE when none is left.
func (fc *fakeCluster) nextRefusal() messages.ErrorCode {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if len(fc.refusals) == 0 {
		return messages.ErrorCode_NONE
	}
	code := fc.refusals[0]
	fc.refusals = fc.refusals[1:]
	return code
}

// loseEndpoint publishes on the cluster's event stream what protoactor
// remote publishes when the connection to addr drops.
func (fc *fakeCluster) loseEndpoint(addr string) {
	fc.system.EventStream.Publish(&remote.EndpointTerminatedEvent{Address: addr})
}

// createTopic makes a topic with n partitions.
func (fc *fakeCluster) createTopic(name string, n int) error {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if _, ok := fc.topics[name]; ok {
		return &Error{Code: messages.ErrorCode_TOPIC_ALREADY_EXISTS, Message: name}
	}
	parts := make([]*fakePartition, n)
	for i := range parts {
		fp := &fakePartition{fc: fc, topic: name, partition: int32(i), producers: map[int64]*fakeProducer{}, rng: rand.New(rand.NewPCG(uint64(i), 1))}
		fp.name = fmt.Sprintf("partition-%s-%d", name, i)
		pid, err := fc.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &fakePartitionActor{fp} }), fp.name)
		if err != nil {
			return err
		}
		fp.pid = pid
		parts[i] = fp
	}
	fc.topics[name] = parts
	return nil
}

func (fc *fakeCluster) partition(topic string, p int) *fakePartition {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.topics[topic][p]
}

// stats sums the fake partitions' counters of a topic.
func (fc *fakeCluster) stats(topic string) (st fakeStats) {
	fc.mu.Lock()
	parts := fc.topics[topic]
	fc.mu.Unlock()
	for _, p := range parts {
		p.mu.Lock()
		st.batches += len(p.batches)
		st.duplicates += p.stats.duplicates
		st.outOfOrder += p.stats.outOfOrder
		st.dropped += p.stats.dropped
		st.unanswered += p.stats.unanswered
		st.fetchDropped += p.stats.fetchDropped
		st.notLeader += p.stats.notLeader
		st.tooLarge += p.stats.tooLarge
		st.largest = max(st.largest, p.stats.largest)
		st.chunked += p.stats.chunked
		st.chunks += p.stats.chunks
		st.skewed += p.stats.skewed
		st.chunkDropped += p.stats.chunkDropped
		st.refetched += p.stats.refetched
		st.maxTimeoutMs = max(st.maxTimeoutMs, p.stats.maxTimeoutMs)
		st.refused += p.stats.refused
		st.fenced += p.stats.fenced
		st.unknownEpoch += p.stats.unknownEpoch
		st.withoutEpoch += p.stats.withoutEpoch
		st.listsDropped += p.stats.listsDropped
		st.alone += p.stats.alone
		p.mu.Unlock()
	}
	return st
}

type fakeStats struct {
	batches, duplicates, outOfOrder, dropped, unanswered, fetchDropped, notLeader int
	// tooLarge counts batches refused as larger than maxMessageBytes;
	// largest is the size of the largest batch taken.
	tooLarge, largest int
	// chunked counts fetches answered in more than one response, chunks
	// those responses; skewed and chunkDropped the faults injected in them.
	chunked, chunks, skewed, chunkDropped, refetched int
	// maxTimeoutMs is the longest timeout_ms of the produce requests
	// received.
	maxTimeoutMs int32
	// refused counts produce requests answered from fakeCluster.refusals.
	refused int
	// fenced and unknownEpoch count the fetches refused for an older and a
	// newer current_leader_epoch than the partition's, withoutEpoch those
	// that named none.
	fenced, unknownEpoch, withoutEpoch int
	// listsDropped counts the ListOffsetsRequests ignored.
	listsDropped int
	// alone counts the fetches that came from a consumer, not from the
	// partition manager.
	alone int
}

// fakeMetadata answers metadata and admin requests from the fake cluster.
type fakeMetadata struct{ fc *fakeCluster }

func (m *fakeMetadata) Receive(ctx actor.Context) {
	fc := m.fc
	switch req := ctx.Message().(type) {
	case *messages.MetadataRequest:
		fc.metadataRequests.Add(1)
		ctx.Respond(fc.metadata(req.GetTopics()))
	case *messages.ClusterInfoRequest:
		ctx.Respond(&messages.ClusterInfoResponse{})
	case *messages.CreateTopicRequest:
		err := fc.createTopic(req.GetName(), int(req.GetPartitions()))
		fc.mu.Lock()
		lose := fc.loseCreates > 0
		if lose {
			fc.loseCreates--
		}
		fc.mu.Unlock()
		if lose {
			return
		}
		if req.GetRetried() && errors.Is(err, ErrTopicAlreadyExists) {
			err = nil // found as asked
		}
		var resp *messages.CreateTopicResponse
		var e *Error
		switch {
		case err == nil:
			resp = &messages.CreateTopicResponse{Topic: fc.metadata([]string{req.GetName()}).GetTopics()[0]}
		case errors.As(err, &e):
			resp = &messages.CreateTopicResponse{Error: e.Code, ErrorMessage: e.Message}
		default:
			resp = &messages.CreateTopicResponse{Error: messages.ErrorCode_UNKNOWN_SERVER_ERROR, ErrorMessage: err.Error()}
		}
		if d := fc.getFaults().createDelay; d > 0 {
			root, to := ctx.ActorSystem().Root, ctx.Sender()
			time.AfterFunc(d, func() { root.Send(to, resp) })
			return
		}
		ctx.Respond(resp)
	case *messages.DeleteTopicRequest:
		fc.mu.Lock()
		parts, ok := fc.topics[req.GetName()]
		delete(fc.topics, req.GetName())
		fc.mu.Unlock()
		if !ok {
			ctx.Respond(&messages.DeleteTopicResponse{Error: messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION})
			return
		}
		for _, p := range parts {
			ctx.Stop(p.pid)
		}
		ctx.Respond(&messages.DeleteTopicResponse{})
	case *messages.InitProducerIdRequest:
		fc.mu.Lock()
		fc.producerID++
		id := fc.producerID
		fc.mu.Unlock()
		ctx.Respond(&messages.InitProducerIdResponse{ProducerId: id, ProducerEpoch: 0})
	}
}

func (fc *fakeCluster) metadata(topics []string) *messages.MetadataResponse {
	addr := fc.system.Address()
	md := &messages.MetadataResponse{Brokers: []*messages.Broker{{NodeId: 1, Address: addr}}, ControllerId: 1}
	// The partitions are read under their own locks, not fc.mu: a
	// partition takes fc.mu under its own.
	fc.mu.Lock()
	if len(topics) == 0 {
		for name := range fc.topics {
			topics = append(topics, name)
		}
	}
	found := map[string][]*fakePartition{}
	for _, name := range topics {
		if parts, ok := fc.topics[name]; ok {
			found[name] = parts
		}
	}
	fc.mu.Unlock()
	for _, name := range topics {
		parts, ok := found[name]
		if !ok {
			md.Topics = append(md.Topics, &messages.TopicMetadata{Name: name, Error: messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION})
			continue
		}
		tm := &messages.TopicMetadata{Name: name}
		for _, p := range parts {
			p.mu.Lock()
			tm.Partitions = append(tm.Partitions, &messages.PartitionMetadata{
				Partition: p.partition, Leader: 1, LeaderAddress: p.pid.GetAddress(), ActorName: p.name,
				Replicas: []int32{1}, Isr: []int32{1}, LeaderEpoch: p.announced,
			})
			p.mu.Unlock()
		}
		md.Topics = append(md.Topics, tm)
	}
	return md
}

// fakePartition keeps a partition's batches in memory, assigns offsets,
// checks producer sequences, and parks fetches until data or max wait.
type fakePartition struct {
	fc        *fakeCluster
	topic     string
	partition int32
	name      string
	pid       *actor.PID

	mu        sync.Mutex
	batches   [][]byte // stored with their base offsets
	next      int64
	producers map[int64]*fakeProducer
	parked    []*parkedFetch
	moves     int
	// epoch is the leader's epoch, which fetches naming another are
	// refused for; announced is the epoch the metadata gives, above epoch
	// while the leader has not yet learnt of it, which it does after
	// learnAfter fetches refused as UNKNOWN_LEADER_EPOCH.
	epoch, announced int32
	learnAfter       int
	// lastEpoch is the current_leader_epoch of the last fetch.
	lastEpoch int32
	// moved is set when the partition's leader moves, until the fake
	// partition manager has refused the partition's next requests.
	moved    bool
	produces int
	fetches  int
	stats    fakeStats
	inChunks int        // answers in chunks so far, for the chunk faults
	rng      *rand.Rand // for the random faults; guarded by mu
	// refetchAt is where the records of a skewed chunk start, while
	// refetch is set: a consumer that drops the chunk fetches from there.
	refetchAt int64
	refetch   bool
}

type fakeProducer struct {
	epoch   int16
	lastSeq int32
	recent  []recentBatch // the last topic.ProducerBatchesKept batches
}

type recentBatch struct {
	first, last int32
	baseOffset  int64
}

type parkedFetch struct {
	sender *actor.PID
	req    *messages.FetchRequest
	done   atomic.Bool
}

type fetchExpired struct{ p *parkedFetch }

// moveLeader makes a new actor lead a partition; the old one answers
// NOT_LEADER_OR_FOLLOWER from then on.
func (fc *fakeCluster) moveLeader(topic string, partition int) error {
	p := fc.partition(topic, partition)
	p.mu.Lock()
	p.moves++
	name := fmt.Sprintf("partition-%s-%d-%d", topic, partition, p.moves)
	p.mu.Unlock()
	pid, err := fc.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &fakePartitionActor{p} }), name)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.name, p.pid, p.moved = name, pid, true
	p.epoch++
	p.announced = p.epoch
	p.mu.Unlock()
	return nil
}

// loseTail makes a new actor lead a partition whose log lacks its last n
// batches, as a leader elected without records acknowledged at acks=1
// does; its producers' state is what the rest of the log holds.
func (fc *fakeCluster) loseTail(topic string, partition, n int) error {
	if err := fc.moveLeader(topic, partition); err != nil {
		return err
	}
	p := fc.partition(topic, partition)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.batches = p.batches[:max(len(p.batches)-n, 0)]
	p.next = 0
	clear(p.producers)
	for _, b := range p.batches {
		h, err := wire.Validate(b)
		if err != nil {
			return err
		}
		p.next = h.LastOffset() + 1
		if h.ProducerID < 0 {
			continue
		}
		prod := p.producers[h.ProducerID]
		if prod == nil || h.ProducerEpoch > prod.epoch {
			prod = &fakeProducer{epoch: h.ProducerEpoch}
			p.producers[h.ProducerID] = prod
		}
		prod.lastSeq = h.LastSequence()
		prod.recent = append(prod.recent, recentBatch{h.BaseSequence, h.LastSequence(), h.BaseOffset})
	}
	return nil
}

// bumpEpoch starts a new leader epoch on the same leader, as a leader
// re-elected does: fetches naming the one before are fenced.
func (fc *fakeCluster) bumpEpoch(topic string, partition int) {
	p := fc.partition(topic, partition)
	p.mu.Lock()
	p.epoch++
	p.announced = p.epoch
	p.mu.Unlock()
}

// announceEpoch has the metadata give a partition the next leader epoch
// before its leader knows it: the leader refuses fetches naming it, as
// UNKNOWN_LEADER_EPOCH, learnAfter times, then takes it.
func (fc *fakeCluster) announceEpoch(topic string, partition, learnAfter int) {
	p := fc.partition(topic, partition)
	p.mu.Lock()
	p.announced = p.epoch + 1
	p.learnAfter = learnAfter
	p.mu.Unlock()
}

// fetchEpoch is the current_leader_epoch of the partition's last fetch.
func (fc *fakeCluster) fetchEpoch(topic string, partition int) int32 {
	p := fc.partition(topic, partition)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastEpoch
}

// fakePartitionActor is one actor serving a fake partition: the leader, or
// a former leader that refuses requests.
type fakePartitionActor struct{ p *fakePartition }

func (a *fakePartitionActor) Receive(ctx actor.Context) {
	p := a.p
	p.mu.Lock()
	leader := p.name == ctx.Self().GetId()
	p.mu.Unlock()
	if !leader {
		notLeader := messages.ErrorCode_NOT_LEADER_OR_FOLLOWER
		switch m := ctx.Message().(type) {
		case *messages.ProduceRequest:
			p.mu.Lock()
			p.stats.notLeader++
			p.mu.Unlock()
			ctx.Respond(&messages.ProduceResponse{Topic: p.topic, Partition: p.partition, CorrelationId: m.GetCorrelationId(), Error: notLeader})
		case *messages.FetchRequest:
			ctx.Respond(&messages.FetchResponse{Topic: p.topic, Partition: p.partition, CorrelationId: m.GetCorrelationId(), Error: notLeader})
		case *messages.ListOffsetsRequest:
			ctx.Respond(&messages.ListOffsetsResponse{Error: notLeader})
		case *messages.PartitionStatusRequest:
			ctx.Respond(&messages.PartitionStatusResponse{Error: notLeader})
		}
		return
	}
	p.Receive(ctx)
}

func (p *fakePartition) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.ProduceRequest:
		p.onProduce(ctx, m)
	case *messages.FetchRequest:
		p.onFetch(ctx, m)
	case *fetchExpired:
		if m.p.done.CompareAndSwap(false, true) {
			p.answerFetch(ctx, m.p.sender, m.p.req)
		}
	case *messages.ListOffsetsRequest:
		if p.fc.getFaults().dropListOffsets {
			p.mu.Lock()
			p.stats.listsDropped++
			p.mu.Unlock()
			return
		}
		ctx.Respond(p.listOffsets(m))
	case *messages.PartitionStatusRequest:
		p.mu.Lock()
		ctx.Respond(&messages.PartitionStatusResponse{Topic: p.topic, Partition: p.partition, LogEndOffset: p.next, HighWatermark: p.next, Segments: 1})
		p.mu.Unlock()
	}
}

// strikes reports whether a fault of rate one in n strikes now; with p.mu.
func (p *fakePartition) strikes(n int) bool {
	return n > 0 && p.rng.IntN(n) == 0
}

func (p *fakePartition) onProduce(ctx actor.Context, m *messages.ProduceRequest) {
	f := p.fc.getFaults()
	p.mu.Lock()
	p.produces++
	p.stats.maxTimeoutMs = max(p.stats.maxTimeoutMs, m.GetTimeoutMs())
	if p.strikes(f.dropProduceEvery) {
		p.stats.dropped++
		p.mu.Unlock()
		return
	}
	var resp *messages.ProduceResponse
	switch code := p.fc.nextRefusal(); code {
	case messages.ErrorCode_NONE:
		resp = p.append(m)
	case messages.ErrorCode_NOT_ENOUGH_REPLICAS_AFTER_APPEND:
		p.stats.refused++
		resp = p.append(m)
		if resp.GetError() == messages.ErrorCode_NONE {
			resp.Error, resp.BaseOffset = code, -1
		}
	default:
		p.stats.refused++
		resp = &messages.ProduceResponse{Topic: p.topic, Partition: p.partition, CorrelationId: m.GetCorrelationId(), Error: code}
	}
	lose := p.strikes(f.loseAnswerEvery)
	if lose {
		p.stats.unanswered++
	}
	p.mu.Unlock()
	p.wakeParked(ctx)
	if m.GetAcks() == 0 || lose {
		return
	}
	if f.holdProduce > 0 {
		size := int64(len(m.GetRecords()))
		n, bytes := p.fc.working.Add(1), p.fc.workingBytes.Add(size)
		raiseMax(&p.fc.maxWorking, n)
		raiseMax(&p.fc.maxWorkingBytes, bytes)
		time.Sleep(f.holdProduce)
		p.fc.working.Add(-1)
		p.fc.workingBytes.Add(-size)
	}
	if f.produceDelay > 0 {
		sender, root := ctx.Sender(), ctx.ActorSystem().Root
		time.AfterFunc(f.produceDelay, func() { root.Send(sender, resp) })
		return
	}
	ctx.Respond(resp)
}

// append checks and stores a produced batch. Called with p.mu held.
func (p *fakePartition) append(m *messages.ProduceRequest) *messages.ProduceResponse {
	resp := &messages.ProduceResponse{Topic: p.topic, Partition: p.partition, CorrelationId: m.GetCorrelationId()}
	h, err := wire.Validate(m.GetRecords())
	if err != nil {
		resp.Error = messages.ErrorCode_CORRUPT_MESSAGE
		resp.ErrorMessage = err.Error()
		return resp
	}
	if f := p.fc.getFaults(); f.maxMessageBytes > 0 && h.Size() > f.maxMessageBytes {
		p.stats.tooLarge++
		resp.Error = messages.ErrorCode_MESSAGE_TOO_LARGE
		resp.ErrorMessage = fmt.Sprintf("batch of %d bytes exceeds max.message.bytes %d", h.Size(), f.maxMessageBytes)
		if !f.hideMaxMessageBytes {
			resp.MaxMessageBytes = int32(f.maxMessageBytes)
		}
		return resp
	}
	var prod *fakeProducer
	if h.ProducerID >= 0 {
		prod = p.producers[h.ProducerID]
		switch {
		case prod != nil && h.ProducerEpoch < prod.epoch:
			resp.Error = messages.ErrorCode_INVALID_PRODUCER_EPOCH
			return resp
		case prod != nil && h.ProducerEpoch > prod.epoch:
			// A later epoch starts the producer over, from sequence 0.
			prod = nil
		}
		if prod == nil {
			if h.BaseSequence != 0 {
				p.stats.outOfOrder++
				resp.Error = messages.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER
				return resp
			}
			prod = &fakeProducer{epoch: h.ProducerEpoch, lastSeq: -1}
			p.producers[h.ProducerID] = prod
		}
		for _, r := range prod.recent {
			if r.first == h.BaseSequence && r.last == h.LastSequence() {
				p.stats.duplicates++
				resp.BaseOffset = r.baseOffset
				return resp
			}
		}
		if h.BaseSequence != prod.lastSeq+1 {
			p.stats.outOfOrder++
			resp.Error = messages.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER
			return resp
		}
	}
	if !p.fc.getFaults().discard {
		stored := append([]byte(nil), m.GetRecords()[:h.Size()]...)
		wire.SetBaseOffset(stored, p.next)
		p.batches = append(p.batches, stored)
	}
	p.stats.largest = max(p.stats.largest, h.Size())
	resp.BaseOffset = p.next
	if prod != nil {
		prod.lastSeq = h.LastSequence()
		prod.recent = append(prod.recent, recentBatch{h.BaseSequence, h.LastSequence(), p.next})
		if len(prod.recent) > topic.ProducerBatchesKept {
			prod.recent = prod.recent[1:]
		}
	}
	p.next += int64(h.RecordCount)
	return resp
}

func (p *fakePartition) onFetch(ctx actor.Context, m *messages.FetchRequest) {
	f := p.fc.getFaults()
	p.mu.Lock()
	p.fetches++
	if ctx.Sender().GetId() != actors.PartitionManagerName {
		p.stats.alone++
	}
	if p.refetch && m.GetOffset() == p.refetchAt {
		p.refetch = false
		p.stats.refetched++
	}
	if p.strikes(f.dropFetchEvery) {
		p.stats.fetchDropped++
		p.mu.Unlock()
		return
	}
	if f.unavailable != messages.ErrorCode_NONE {
		p.mu.Unlock()
		ctx.Respond(&messages.FetchResponse{Topic: p.topic, Partition: p.partition, CorrelationId: m.GetCorrelationId(), Error: f.unavailable, ErrorMessage: p.unavailableText()})
		return
	}
	if code := p.checkEpoch(m); code != messages.ErrorCode_NONE {
		epoch := p.epoch
		p.mu.Unlock()
		ctx.Respond(&messages.FetchResponse{Topic: p.topic, Partition: p.partition, CorrelationId: m.GetCorrelationId(), Error: code, LeaderEpoch: epoch})
		return
	}
	available := p.next - m.GetOffset()
	enough := p.bytesFrom(m.GetOffset()) >= max(m.GetMinBytes(), 1)
	p.mu.Unlock()
	if enough || m.GetMaxWaitMs() <= 0 || m.GetOffset() < 0 || available < 0 {
		p.answerFetch(ctx, ctx.Sender(), m)
		return
	}
	pf := &parkedFetch{sender: ctx.Sender(), req: m}
	p.mu.Lock()
	p.parked = append(p.parked, pf)
	p.mu.Unlock()
	scheduler.NewTimerScheduler(ctx.ActorSystem().Root).SendOnce(time.Duration(m.GetMaxWaitMs())*time.Millisecond, ctx.Self(), &fetchExpired{pf})
}

// checkEpoch checks a fetch's current_leader_epoch against the leader's,
// as a partition does: an older one is fenced, a newer one unknown (until
// the leader learns it, see announceEpoch). Called with p.mu held.
func (p *fakePartition) checkEpoch(m *messages.FetchRequest) messages.ErrorCode {
	if m.CurrentLeaderEpoch == nil {
		p.stats.withoutEpoch++
		return messages.ErrorCode_NONE
	}
	e := m.GetCurrentLeaderEpoch()
	p.lastEpoch = e
	switch {
	case e < p.epoch:
		p.stats.fenced++
		return messages.ErrorCode_FENCED_LEADER_EPOCH
	case e > p.epoch:
		p.stats.unknownEpoch++
		if p.learnAfter--; p.learnAfter <= 0 && e <= p.announced {
			p.epoch = p.announced
		}
		return messages.ErrorCode_UNKNOWN_LEADER_EPOCH
	}
	return messages.ErrorCode_NONE
}

// wakeParked answers the parked fetches that have their min_bytes now, as a
// node does.
func (p *fakePartition) wakeParked(ctx actor.Context) {
	p.mu.Lock()
	var woken []*parkedFetch
	waiting := p.parked[:0]
	for _, pf := range p.parked {
		if pf.done.Load() {
			continue // expired
		}
		if p.bytesFrom(pf.req.GetOffset()) >= max(pf.req.GetMinBytes(), 1) {
			woken = append(woken, pf)
		} else {
			waiting = append(waiting, pf)
		}
	}
	p.parked = waiting
	p.mu.Unlock()
	for _, pf := range woken {
		if pf.done.CompareAndSwap(false, true) {
			p.answerFetch(ctx, pf.sender, pf.req)
		}
	}
}

// bytesFrom is the size of the batches that hold offset and what follows
// it. p.mu is held.
func (p *fakePartition) bytesFrom(offset int64) int32 {
	var n int
	for _, b := range p.batches {
		if h, _ := wire.ParseHeader(b); h.NextOffset() > offset {
			n += len(b)
		}
	}
	return int32(min(n, math.MaxInt32))
}

// fetchResponse reads whole batches from the request's offset, at least one,
// then up to max_bytes.
func (p *fakePartition) fetchResponse(m *messages.FetchRequest) *messages.FetchResponse {
	p.mu.Lock()
	defer p.mu.Unlock()
	resp := &messages.FetchResponse{Topic: p.topic, Partition: p.partition, CorrelationId: m.GetCorrelationId(), HighWatermark: p.next, Offset: m.GetOffset(), LeaderEpoch: p.epoch}
	if m.GetOffset() < 0 || m.GetOffset() > p.next {
		resp.Error = messages.ErrorCode_OFFSET_OUT_OF_RANGE
		return resp
	}
	var out []byte
	for _, b := range p.batches {
		h, _ := wire.ParseHeader(b)
		if h.NextOffset() <= m.GetOffset() {
			continue
		}
		if len(out) > 0 && len(out)+len(b) > int(m.GetMaxBytes()) {
			break
		}
		out = append(out, b...)
	}
	resp.Records = out
	return resp
}

// unavailableText is the error message of the unavailable fault.
func (p *fakePartition) unavailableText() string {
	return fmt.Sprintf("partition %s-%d is offline: disk failed", p.topic, p.partition)
}

func (p *fakePartition) listOffsets(m *messages.ListOffsetsRequest) *messages.ListOffsetsResponse {
	if code := p.fc.getFaults().unavailable; code != messages.ErrorCode_NONE {
		return &messages.ListOffsetsResponse{Error: code, ErrorMessage: p.unavailableText()}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch m.GetTimestamp() {
	case EarliestOffset:
		return &messages.ListOffsetsResponse{Offset: 0}
	case LatestOffset:
		return &messages.ListOffsetsResponse{Offset: p.next}
	}
	for _, b := range p.batches {
		var found int64 = -1
		_ = wire.Records(b, func(r wire.Record) error {
			if found < 0 && r.Timestamp >= m.GetTimestamp() {
				found = r.Offset
			}
			return nil
		})
		if found >= 0 {
			return &messages.ListOffsetsResponse{Offset: found}
		}
	}
	return &messages.ListOffsetsResponse{Offset: -1, Timestamp: -1}
}

// answerFetch sends the answer to m. With chunk_bytes below max_bytes it
// answers as a node does: several responses in offset order, each of whole
// batches within chunk_bytes (at least one batch), together within
// max_bytes (the first batch excepted), every one but the last with More.
// The chunk faults then apply.
func (p *fakePartition) answerFetch(ctx actor.Context, to *actor.PID, m *messages.FetchRequest) {
	chunk := m.GetChunkBytes()
	if chunk <= 0 || chunk >= m.GetMaxBytes() {
		ctx.Send(to, p.fetchResponse(m))
		return
	}
	var answer []*messages.FetchResponse
	offset, left := m.GetOffset(), m.GetMaxBytes()
	for {
		r := p.fetchResponse(&messages.FetchRequest{
			Topic: m.GetTopic(), Partition: m.GetPartition(), CorrelationId: m.GetCorrelationId(),
			Offset: offset, MaxBytes: min(chunk, left),
		})
		if len(answer) > 0 && (r.GetError() != messages.ErrorCode_NONE || len(r.GetRecords()) == 0 || len(r.GetRecords()) > int(left)) {
			break // what is left waits for the next fetch
		}
		answer = append(answer, r)
		left -= int32(len(r.GetRecords()))
		if r.GetError() != messages.ErrorCode_NONE || len(r.GetRecords()) == 0 || left <= 0 {
			break
		}
		if offset = nextOffsetOf(r.GetRecords()); offset >= r.GetHighWatermark() {
			break
		}
	}
	f := p.fc.getFaults()
	p.mu.Lock()
	skew, drop := false, false
	if len(answer) > 1 {
		p.inChunks++
		p.stats.chunked++
		p.stats.chunks += len(answer)
		skew = f.skewChunkEvery > 0 && p.inChunks%f.skewChunkEvery == 0
		drop = f.dropChunkEvery > 0 && p.inChunks%f.dropChunkEvery == 0 && len(answer) > 2
		if skew {
			p.stats.skewed++
			p.refetchAt, p.refetch = answer[1].GetOffset(), true
		}
		if drop {
			p.stats.chunkDropped++
		}
	}
	p.mu.Unlock()
	for i, r := range answer {
		r.More = i < len(answer)-1
		if i == 1 && drop {
			continue
		}
		if i == 1 && skew {
			r.Offset++
		}
		ctx.Send(to, r)
	}
}

// nextOffsetOf is the offset after the last batch in records.
func nextOffsetOf(records []byte) int64 {
	var next int64
	_, _ = wire.Batches(records, func(_ []byte, h wire.Header) error {
		next = h.NextOffset()
		return nil
	})
	return next
}

// raiseMax raises highest to n when n is larger, as counters' highest values
// are kept.
func raiseMax[T int32 | int64](highest interface {
	Load() T
	CompareAndSwap(old, new T) bool
}, n T) {
	for old := highest.Load(); n > old && !highest.CompareAndSwap(old, n); old = highest.Load() {
	}
}
