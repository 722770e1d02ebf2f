package partition

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"

	"github.com/depot-dev/depot/actors/remote"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
)

// replicaFetches is the gather of one follower's ReplicaFetchRequest, as
// Kafka's fetch purgatory holds a follower's fetch for all its partitions:
// it is answered once every partition has answered and one has records or
// an error, or, when none has, once one of them appends or max_wait_ms
// passes (see gather).
type replicaFetches struct {
	t     *remote.Transport // the pool of the frames
	to    *actor.PID
	req   *messages.ReplicaFetchRequest
	resps []*messages.ReplicaFetchedPartition
	// frames are the frames the parts' records lie in, nil where none (see
	// partitionActor.readFramed).
	frames [][]byte
}

// epochGather collects the answers to one OffsetForLeaderEpochRequest.
type epochGather struct {
	to      *actor.PID
	resp    *messages.OffsetForLeaderEpochResponse
	index   map[disk.TopicPartition]int
	waiting int
}

// maxReplicaFetchWait bounds a follower's max_wait_ms.
const maxReplicaFetchWait = 5 * time.Second

// onReplicaFetch hands each partition of a follower's fetch to its
// partition actor.
func (m *partitionManager) onReplicaFetch(ctx actor.Context, req *messages.ReplicaFetchRequest) {
	n := len(req.GetPartitions())
	k := &replicaFetches{t: m.cfg.Transport, to: ctx.Sender(), req: req, resps: make([]*messages.ReplicaFetchedPartition, n), frames: make([][]byte, n)}
	wait := max(min(time.Duration(req.GetMaxWaitMs())*time.Millisecond, maxReplicaFetchWait), 0)
	g := m.gathers.add(n, 1, wait, k)
	g.followers = true
	for i, p := range req.GetPartitions() {
		tp := disk.TopicPartition{Topic: p.GetTopic(), Partition: p.GetPartition()}
		g.parts[i], g.index[tp] = tp, i
	}
	m.startGather(ctx, g)
}

func (k *replicaFetches) ask(ctx actor.Context, g *gather, i int, pid *actor.PID) {
	ctx.Request(pid, &replicaFetch{gather: g.id, part: i, replica: k.req.GetReplicaId(), req: k.req.GetPartitions()[i], wake: g.wait > 0})
}

func (k *replicaFetches) refuse(i int, code messages.ErrorCode, message string) {
	p := k.req.GetPartitions()[i]
	k.take(i, &messages.ReplicaFetchedPartition{
		Topic: p.GetTopic(), Partition: p.GetPartition(), FetchOffset: p.GetFetchOffset(), Error: code, ErrorMessage: message,
	}, nil)
}

func (k *replicaFetches) answered(i int) bool { return k.resps[i] != nil }

// take keeps resp and its frame as part i's answer, and hands the frame of
// the answer it replaces back to the pool: only the manager held it.
func (k *replicaFetches) take(i int, resp *messages.ReplicaFetchedPartition, frame []byte) {
	putFrame(k.t, k.frames[i])
	k.resps[i], k.frames[i] = resp, frame
}

// answer sends the response: to another node, each frame as it lies (see
// remote.Transport.ReplicaFetchMessage).
func (k *replicaFetches) answer(ctx actor.Context, m *partitionManager) {
	resp := &messages.ReplicaFetchResponse{CorrelationId: k.req.GetCorrelationId(), Partitions: k.resps}
	m.outboxes.Send(ctx, k.to, m.cfg.Transport.ReplicaFetchMessage(ctx.ActorSystem(), k.to, resp, k.frames), nil)
	m.lastReplicaAnswer = time.Now()
}

// onReplicaFetched takes a partition's answer for a gather.
func (m *partitionManager) onReplicaFetched(ctx actor.Context, r *replicaFetched) {
	g, ok := m.gatherPart(r.gather, r.part)
	k, isReplica := (*replicaFetches)(nil), false
	if ok {
		k, isReplica = g.kind.(*replicaFetches)
	}
	if !isReplica {
		putFrame(m.cfg.Transport, r.frame) // answered already, or given up
		return
	}
	k.take(r.part, r.resp, r.frame)
	m.stepGather(ctx, g, g.core.Answered(r.part, len(r.resp.GetRecords()), r.resp.GetError() != messages.ErrorCode_NONE))
}

// onReplicaWake wakes, in the gathers of followers' fetches that have it,
// the partition that appended. Within ReplicaFetchLinger of the last
// answer to a follower, it waits out the rest of that time first, so that
// the appends meanwhile go in the same answers; another wake of the
// partition meanwhile is dropped, as the one that waits wakes every
// follower's gather that has the partition.
func (m *partitionManager) onReplicaWake(ctx actor.Context, w *replicaWake) {
	if linger := m.cfg.ReplicaFetchLinger; linger > 0 && !w.lingered {
		if m.lingering[w.tp] {
			return
		}
		if wait := time.Until(m.lastReplicaAnswer.Add(linger)); wait > 0 {
			if m.lingering == nil {
				m.lingering = map[disk.TopicPartition]bool{}
			}
			m.lingering[w.tp] = true
			scheduler.NewTimerScheduler(ctx).SendOnce(wait, ctx.Self(), &replicaWake{tp: w.tp, lingered: true})
			return
		}
	}
	delete(m.lingering, w.tp)
	m.wakeGathers(ctx, w.tp, 1, false, true)
}

// onEpochQueries hands each query of a follower's OffsetForLeaderEpoch to
// its partition.
func (m *partitionManager) onEpochQueries(ctx actor.Context, req *messages.OffsetForLeaderEpochRequest) {
	m.gathers.nextID++
	id := m.gathers.nextID
	g := &epochGather{to: ctx.Sender(), resp: &messages.OffsetForLeaderEpochResponse{CorrelationId: req.GetCorrelationId()}, index: map[disk.TopicPartition]int{}}
	for i, q := range req.GetPartitions() {
		tp := disk.TopicPartition{Topic: q.GetTopic(), Partition: q.GetPartition()}
		end := &messages.EpochEnd{Topic: tp.Topic, Partition: tp.Partition, LeaderEpoch: -1, EndOffset: -1,
			Error: messages.ErrorCode_REQUEST_TIMED_OUT, ErrorMessage: m.notAnswered(tp)}
		g.resp.Partitions = append(g.resp.Partitions, end)
		g.index[tp] = i
		pid := m.children[tp]
		if pid == nil || m.stopping {
			end.Error, end.ErrorMessage = messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, m.noReplica(tp)
			continue
		}
		g.waiting++
		ctx.Request(pid, &epochQuery{gather: id, q: q})
	}
	if g.waiting == 0 {
		m.outboxes.Send(ctx, g.to, g.resp, nil)
		return
	}
	m.gathers.epochs[id] = g
	scheduler.NewTimerScheduler(ctx).SendOnce(gatherSlack, ctx.Self(), &epochGatherDeadline{id: id})
}

// epochGatherDeadline answers an epoch gather that some partition has not
// answered in time, as gatherDeadline does a fetch's.
type epochGatherDeadline struct{ id uint64 }

func (m *partitionManager) onEpochGatherDeadline(ctx actor.Context, d *epochGatherDeadline) {
	if g, ok := m.gathers.epochs[d.id]; ok {
		delete(m.gathers.epochs, d.id)
		m.outboxes.Send(ctx, g.to, g.resp, nil)
	}
}

// onEpochAnswered takes a partition's answer to an epoch query.
func (m *partitionManager) onEpochAnswered(ctx actor.Context, r *epochAnswered) {
	g, ok := m.gathers.epochs[r.gather]
	if !ok {
		return
	}
	i, ok := g.index[disk.TopicPartition{Topic: r.end.GetTopic(), Partition: r.end.GetPartition()}]
	if !ok {
		return
	}
	g.resp.Partitions[i] = r.end
	g.waiting--
	if g.waiting == 0 {
		delete(m.gathers.epochs, r.gather)
		m.outboxes.Send(ctx, g.to, g.resp, nil)
	}
}

// onFollow hands a partition to the fetcher of its leader, spawned on
// first use, and takes it off any other.
func (m *partitionManager) onFollow(ctx actor.Context, f *follow) {
	for id, ref := range m.fetchers {
		if id != f.leader {
			ctx.Send(ref.pid, &unfollow{tp: f.tp})
		}
	}
	ref, ok := m.fetchers[f.leader]
	if !ok || ref.address != f.address {
		if ok {
			ctx.Stop(ref.pid)
		}
		ref = &fetcherRef{address: f.address}
		ref.pid = ctx.Spawn(newFetcherProps(fetcherConfig{
			NodeID: m.cfg.NodeID, Leader: f.leader, Address: f.address, Throttle: m.cfg.ReplicaThrottle, Metrics: m.cfg.Metrics,
			Transport: m.cfg.Transport, Dispatcher: m.cfg.Dispatcher, Logger: m.cfg.Logger,
		}))
		m.fetchers[f.leader] = ref
	}
	ctx.Send(ref.pid, f)
}

// onUnfollow takes a partition off every fetcher.
func (m *partitionManager) onUnfollow(ctx actor.Context, u *unfollow) {
	for _, ref := range m.fetchers {
		ctx.Send(ref.pid, u)
	}
}

// fetcherRef is the manager's handle on the fetcher of one leader node.
type fetcherRef struct {
	pid     *actor.PID
	address string
}

// onUpdate hands each partition state to its partition, and keeps it for
// a partition not started yet, which starts from it.
func (m *partitionManager) onUpdate(ctx actor.Context, req *messages.UpdatePartitionsRequest) {
	for _, s := range req.GetPartitions() {
		tp := disk.TopicPartition{Topic: s.GetTopic(), Partition: s.GetPartition()}
		if old, ok := m.states[tp]; ok && newerState(old, s) {
			continue
		}
		m.states[tp] = s
		if pid := m.children[tp]; pid != nil {
			ctx.Send(pid, s)
		}
	}
	ctx.Respond(&messages.UpdatePartitionsResponse{})
}

// newerState reports whether a is newer than b, by leader then partition
// epoch.
func newerState(a, b *messages.PartitionState) bool {
	return a.GetLeaderEpoch() > b.GetLeaderEpoch() ||
		a.GetLeaderEpoch() == b.GetLeaderEpoch() && a.GetPartitionEpoch() > b.GetPartitionEpoch()
}

// startState is the state a partition starts from: the newest of what its
// assignment says and what an update brought before it started.
func (m *partitionManager) startState(p *messages.PartitionAssignment) *messages.PartitionState {
	s := &messages.PartitionState{
		Topic: p.GetTopic(), Partition: p.GetPartition(), Leader: p.GetLeader(), LeaderEpoch: p.GetLeaderEpoch(),
		PartitionEpoch: p.GetPartitionEpoch(), Replicas: p.GetReplicas(), Isr: p.GetIsr(), LeaderAddress: p.GetLeaderAddress(),
		AddingReplicas: p.GetAddingReplicas(),
	}
	if len(s.Replicas) == 0 {
		// Assignments from before replication name the node alone.
		s.Leader, s.Replicas, s.Isr = p.GetNodeId(), []int32{p.GetNodeId()}, []int32{p.GetNodeId()}
	}
	tp := disk.TopicPartition{Topic: p.GetTopic(), Partition: p.GetPartition()}
	if kept, ok := m.states[tp]; ok && !newerState(s, kept) {
		s = kept
	}
	return s
}
