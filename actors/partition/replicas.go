package partition

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"

	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
)

// replicaGather collects the partitions' answers to one follower's
// ReplicaFetchRequest, as Kafka's fetch purgatory holds a follower's fetch
// for all its partitions: it is answered once every partition has answered
// and one has records or an error, or, when none has, once one of them
// appends or max_wait_ms passes.
type replicaGather struct {
	id      uint64
	to      *actor.PID
	req     *messages.ReplicaFetchRequest
	resps   []*messages.ReplicaFetchedPartition
	index   map[disk.TopicPartition]int
	waiting int
	// parked is set once every partition answered with nothing: the
	// gather waits for a replicaWake or its expiry. woken are the
	// partitions that appended after they answered and before it parked.
	parked bool
	woken  []int
	cancel scheduler.CancelFunc
	// stopDeadline stops the timer that answers the gather whatever its
	// partitions did (see replicaGatherDeadline).
	stopDeadline scheduler.CancelFunc
}

// replicaGatherDeadline answers a gather that some partition has not
// answered in time, that partition with REQUEST_TIMED_OUT: a partition
// that stopped or is stuck must not hold back the follower's others.
type replicaGatherDeadline struct{ id uint64 }

// replicaGatherSlack is how long past its max_wait_ms a gather may wait
// for its partitions.
const replicaGatherSlack = time.Second

// replicaGatherExpired ends the wait of a parked gather.
type replicaGatherExpired struct{ id uint64 }

// epochGather collects the answers to one OffsetForLeaderEpochRequest.
type epochGather struct {
	to      *actor.PID
	resp    *messages.OffsetForLeaderEpochResponse
	index   map[disk.TopicPartition]int
	waiting int
}

// replicaGathers are the manager's gathers of replica fetches and epoch
// queries. Not shared: owned by the manager.
type replicaGathers struct {
	nextID  uint64
	fetches map[uint64]*replicaGather
	epochs  map[uint64]*epochGather
}

// maxReplicaFetchWait bounds a follower's max_wait_ms.
const maxReplicaFetchWait = 5 * time.Second

// onReplicaFetch hands each partition of a follower's fetch to its
// partition actor.
func (m *partitionManager) onReplicaFetch(ctx actor.Context, req *messages.ReplicaFetchRequest) {
	g := m.replicas.newFetch(ctx.Sender(), req)
	wait := min(time.Duration(req.GetMaxWaitMs())*time.Millisecond, maxReplicaFetchWait)
	g.stopDeadline = scheduler.NewTimerScheduler(ctx).SendOnce(max(wait, 0)+replicaGatherSlack, ctx.Self(), &replicaGatherDeadline{id: g.id})
	for i, p := range req.GetPartitions() {
		tp := disk.TopicPartition{Topic: p.GetTopic(), Partition: p.GetPartition()}
		g.index[tp] = i
		// Until the partition answers, and in the answer if it never does.
		g.resps[i] = &messages.ReplicaFetchedPartition{Topic: tp.Topic, Partition: tp.Partition, FetchOffset: p.GetFetchOffset(),
			Error: messages.ErrorCode_REQUEST_TIMED_OUT, ErrorMessage: fmt.Sprintf("%s: node %d's replica did not answer in time", tp, m.cfg.NodeID)}
		pid := m.children[tp]
		if pid == nil || m.stopping {
			g.resps[i].Error = messages.ErrorCode_NOT_LEADER_OR_FOLLOWER
			g.resps[i].ErrorMessage = fmt.Sprintf("%s: node %d has no replica of it running", tp, m.cfg.NodeID)
			continue
		}
		g.waiting++
		ctx.Request(pid, &replicaFetch{gather: g.id, replica: req.GetReplicaId(), req: p, wake: req.GetMaxWaitMs() > 0})
	}
	m.replicaProgress(ctx, g)
}

func (g *replicaGathers) newFetch(to *actor.PID, req *messages.ReplicaFetchRequest) *replicaGather {
	g.nextID++
	n := len(req.GetPartitions())
	rg := &replicaGather{id: g.nextID, to: to, req: req, resps: make([]*messages.ReplicaFetchedPartition, n), index: make(map[disk.TopicPartition]int, n)}
	g.fetches[rg.id] = rg
	return rg
}

// onReplicaFetched takes a partition's answer for a gather.
func (m *partitionManager) onReplicaFetched(ctx actor.Context, r *replicaFetched) {
	g, ok := m.replicas.fetches[r.gather]
	if !ok {
		return
	}
	i, ok := g.index[disk.TopicPartition{Topic: r.resp.GetTopic(), Partition: r.resp.GetPartition()}]
	if !ok {
		return
	}
	g.resps[i] = r.resp
	g.waiting--
	m.replicaProgress(ctx, g)
}

// replicaProgress answers g once it may be, or parks it.
func (m *partitionManager) replicaProgress(ctx actor.Context, g *replicaGather) {
	if g.waiting > 0 {
		return
	}
	if g.parked || g.req.GetMaxWaitMs() <= 0 || m.stopping || hasNews(g.resps) {
		m.answerReplicaGather(ctx, g)
		return
	}
	g.parked = true
	if len(g.woken) > 0 {
		for _, i := range g.woken {
			m.refetch(ctx, g, i)
		}
		g.woken = nil
		return
	}
	wait := min(time.Duration(g.req.GetMaxWaitMs())*time.Millisecond, maxReplicaFetchWait)
	g.cancel = scheduler.NewTimerScheduler(ctx).SendOnce(wait, ctx.Self(), &replicaGatherExpired{id: g.id})
}

// hasNews reports whether a follower should hear of resps now.
func hasNews(resps []*messages.ReplicaFetchedPartition) bool {
	for _, r := range resps {
		if len(r.GetRecords()) > 0 || r.GetError() != messages.ErrorCode_NONE {
			return true
		}
	}
	return false
}

// onReplicaWake fetches again, for the parked gathers that have tp, the
// partition that appended.
func (m *partitionManager) onReplicaWake(ctx actor.Context, w *replicaWake) {
	for _, g := range m.replicas.fetches {
		i, ok := g.index[w.tp]
		switch {
		case !ok:
		case !g.parked:
			g.woken = append(g.woken, i)
		case g.waiting == 0:
			m.refetch(ctx, g, i)
		}
	}
}

// refetch asks partition i of a parked gather again.
func (m *partitionManager) refetch(ctx actor.Context, g *replicaGather, i int) {
	p := g.req.GetPartitions()[i]
	pid := m.children[disk.TopicPartition{Topic: p.GetTopic(), Partition: p.GetPartition()}]
	if pid == nil {
		return
	}
	g.waiting++
	ctx.Request(pid, &replicaFetch{gather: g.id, replica: g.req.GetReplicaId(), req: p})
}

// onReplicaGatherDeadline answers a gather past its deadline with what it
// has.
func (m *partitionManager) onReplicaGatherDeadline(ctx actor.Context, d *replicaGatherDeadline) {
	if g, ok := m.replicas.fetches[d.id]; ok {
		m.answerReplicaGather(ctx, g)
	}
}

// onReplicaGatherExpired answers a parked gather with what it has.
func (m *partitionManager) onReplicaGatherExpired(ctx actor.Context, e *replicaGatherExpired) {
	if g, ok := m.replicas.fetches[e.id]; ok && g.waiting == 0 {
		m.answerReplicaGather(ctx, g)
	}
}

func (m *partitionManager) answerReplicaGather(ctx actor.Context, g *replicaGather) {
	delete(m.replicas.fetches, g.id)
	if g.cancel != nil {
		g.cancel()
	}
	if g.stopDeadline != nil {
		g.stopDeadline()
	}
	m.outboxes.Send(ctx, g.to, &messages.ReplicaFetchResponse{CorrelationId: g.req.GetCorrelationId(), Partitions: g.resps}, nil)
}

// onEpochQueries hands each query of a follower's OffsetForLeaderEpoch to
// its partition.
func (m *partitionManager) onEpochQueries(ctx actor.Context, req *messages.OffsetForLeaderEpochRequest) {
	m.replicas.nextID++
	id := m.replicas.nextID
	g := &epochGather{to: ctx.Sender(), resp: &messages.OffsetForLeaderEpochResponse{CorrelationId: req.GetCorrelationId()}, index: map[disk.TopicPartition]int{}}
	for i, q := range req.GetPartitions() {
		tp := disk.TopicPartition{Topic: q.GetTopic(), Partition: q.GetPartition()}
		end := &messages.EpochEnd{Topic: tp.Topic, Partition: tp.Partition, LeaderEpoch: -1, EndOffset: -1,
			Error: messages.ErrorCode_REQUEST_TIMED_OUT, ErrorMessage: fmt.Sprintf("%s: node %d's replica did not answer in time", tp, m.cfg.NodeID)}
		g.resp.Partitions = append(g.resp.Partitions, end)
		g.index[tp] = i
		pid := m.children[tp]
		if pid == nil || m.stopping {
			end.Error, end.ErrorMessage = messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, fmt.Sprintf("%s: node %d has no replica of it running", tp, m.cfg.NodeID)
			continue
		}
		g.waiting++
		ctx.Request(pid, &epochQuery{gather: id, q: q})
	}
	if g.waiting == 0 {
		m.outboxes.Send(ctx, g.to, g.resp, nil)
		return
	}
	m.replicas.epochs[id] = g
	scheduler.NewTimerScheduler(ctx).SendOnce(replicaGatherSlack, ctx.Self(), &epochGatherDeadline{id: id})
}

// epochGatherDeadline answers an epoch gather that some partition has not
// answered in time, as replicaGatherDeadline does a fetch's.
type epochGatherDeadline struct{ id uint64 }

func (m *partitionManager) onEpochGatherDeadline(ctx actor.Context, d *epochGatherDeadline) {
	if g, ok := m.replicas.epochs[d.id]; ok {
		delete(m.replicas.epochs, d.id)
		m.outboxes.Send(ctx, g.to, g.resp, nil)
	}
}

// onEpochAnswered takes a partition's answer to an epoch query.
func (m *partitionManager) onEpochAnswered(ctx actor.Context, r *epochAnswered) {
	g, ok := m.replicas.epochs[r.gather]
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
		delete(m.replicas.epochs, r.gather)
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
			NodeID: m.cfg.NodeID, Leader: f.leader, Address: f.address, Throttle: m.cfg.ReplicaThrottle, Metrics: m.cfg.Metrics, Logger: m.cfg.Logger,
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
