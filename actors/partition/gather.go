package partition

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"

	"github.com/depot-dev/depot/actors/partition/state"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
)

// gather is a request that the manager hands to several of its partitions
// and answers once, for them all, as Kafka's fetch purgatory holds one
// fetch for all its partitions: a follower's ReplicaFetchRequest (see
// replicaFetches) or a consumer's FetchPartitionsRequest (see
// partitionFetches). Its core decides when it is answered; its kind holds
// the request and the parts' answers, asks the partitions and sends the
// answer. A gather costs two timers, whatever its parts: that of its wait,
// once parked, and its deadline.
type gather struct {
	id    uint64
	core  *state.Gather
	parts []disk.TopicPartition // in the request's order
	index map[disk.TopicPartition]int
	wait  time.Duration
	// followers says that its parts wait for appends (replicaWake), which
	// a follower fetches up to the log end, rather than for records
	// readable below the high watermark (fetchWake).
	followers bool
	kind      gatherKind
	// cancel stops the timer of its wait, once parked; stopDeadline the
	// timer that answers it whatever its partitions did (see
	// gatherDeadline).
	cancel       scheduler.CancelFunc
	stopDeadline scheduler.CancelFunc
}

// gatherKind is what differs between the requests a gather serves.
type gatherKind interface {
	// ask sends part i of g to its partition, pid.
	ask(ctx actor.Context, g *gather, i int, pid *actor.PID)
	// refuse answers part i with an error, without asking its partition.
	refuse(i int, code messages.ErrorCode, message string)
	// answered reports whether part i has an answer.
	answered(i int) bool
	// answer sends the request's answer from the parts' answers, one for
	// each part.
	answer(ctx actor.Context, m *partitionManager)
}

// gathers are the manager's gathers of replica fetches, consumers' fetches
// and epoch queries. Not shared: owned by the manager.
type gathers struct {
	nextID uint64
	byID   map[uint64]*gather
	epochs map[uint64]*epochGather
}

func newGathers() gathers {
	return gathers{byID: map[uint64]*gather{}, epochs: map[uint64]*epochGather{}}
}

// add returns a new gather of n parts (see state.NewGather) that waits up
// to wait when it may.
func (gs *gathers) add(n, minBytes int, wait time.Duration, kind gatherKind) *gather {
	gs.nextID++
	g := &gather{
		id: gs.nextID, core: state.NewGather(n, minBytes, wait > 0), parts: make([]disk.TopicPartition, n),
		index: make(map[disk.TopicPartition]int, n), wait: wait, kind: kind,
	}
	gs.byID[g.id] = g
	return g
}

// gatherSlack is how long past its wait a gather may wait for its
// partitions before gatherDeadline answers it.
const gatherSlack = time.Second

// gatherExpired ends the wait of a parked gather.
type gatherExpired struct{ id uint64 }

// gatherDeadline answers a gather that some partition has not answered in
// time, that part with what it answered before or else REQUEST_TIMED_OUT:
// a partition that stopped or is stuck must not hold back the others.
type gatherDeadline struct{ id uint64 }

// startGather asks each part of g of its partition, refusing those the
// node has no replica of, and answers or parks g as they make it.
func (m *partitionManager) startGather(ctx actor.Context, g *gather) {
	g.stopDeadline = scheduler.NewTimerScheduler(ctx).SendOnce(g.wait+gatherSlack, ctx.Self(), &gatherDeadline{id: g.id})
	for i, tp := range g.parts {
		pid := m.children[tp]
		if pid == nil || m.stopping {
			g.kind.refuse(i, messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, m.noReplica(tp))
			g.core.Refuse(i)
			continue
		}
		g.core.Ask(i)
		g.kind.ask(ctx, g, i, pid)
	}
	m.stepGather(ctx, g, g.core.Start())
}

// noReplica is the error message of a part the node has no replica of.
func (m *partitionManager) noReplica(tp disk.TopicPartition) string {
	return fmt.Sprintf("%s: node %d has no replica of it running", tp, m.cfg.NodeID)
}

// notAnswered is the error message of a part whose partition did not
// answer in time.
func (m *partitionManager) notAnswered(tp disk.TopicPartition) string {
	return fmt.Sprintf("%s: node %d's replica did not answer in time", tp, m.cfg.NodeID)
}

// stepGather does what g's core said: answer it (also when it would park or
// ask again while the manager stops), park it, or ask parts again.
func (m *partitionManager) stepGather(ctx actor.Context, g *gather, s state.GatherStep) {
	switch {
	case s.Answer, m.stopping && (s.Park || len(s.Ask) > 0):
		m.answerGather(ctx, g)
	case s.Park:
		g.cancel = scheduler.NewTimerScheduler(ctx).SendOnce(g.wait, ctx.Self(), &gatherExpired{id: g.id})
		if m.cfg.gatherParked != nil {
			m.cfg.gatherParked()
		}
	case len(s.Ask) > 0:
		var gone []int
		for _, i := range s.Ask {
			pid := m.children[g.parts[i]]
			if pid == nil {
				gone = append(gone, i)
				continue
			}
			g.kind.ask(ctx, g, i, pid)
		}
		for _, i := range gone {
			g.kind.refuse(i, messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, m.noReplica(g.parts[i]))
			if s := g.core.Answered(i, 0, true); s.Answer {
				m.answerGather(ctx, g)
				return
			}
		}
	}
}

// gatherPart is the gather id names and the number of its part i, if the
// gather is still waiting for that part's answer.
func (m *partitionManager) gatherPart(id uint64, i int) (*gather, bool) {
	g, ok := m.gathers.byID[id]
	if !ok || i < 0 || i >= len(g.parts) || !g.core.Asking(i) {
		return nil, false
	}
	return g, true
}

// wakeGathers takes a partition's word that it has readable more bytes to
// read, or that it changed (see state.Gather.Woke), for the gathers that
// have it: those of followers when it comes for them, the others when not;
// all of them when it changed.
func (m *partitionManager) wakeGathers(ctx actor.Context, tp disk.TopicPartition, readable int, changed, followers bool) {
	for _, g := range m.gathers.byID {
		if g.followers != followers && !changed {
			continue
		}
		if i, ok := g.index[tp]; ok {
			m.stepGather(ctx, g, g.core.Woke(i, readable, changed))
		}
	}
}

// onGatherDeadline answers a gather past its deadline with what it has.
func (m *partitionManager) onGatherDeadline(ctx actor.Context, d *gatherDeadline) {
	if g, ok := m.gathers.byID[d.id]; ok {
		m.answerGather(ctx, g)
	}
}

// onGatherExpired answers a parked gather with what it has, once the
// parts asked again have answered.
func (m *partitionManager) onGatherExpired(ctx actor.Context, e *gatherExpired) {
	if g, ok := m.gathers.byID[e.id]; ok {
		m.stepGather(ctx, g, g.core.Expired())
	}
}

func (m *partitionManager) answerGather(ctx actor.Context, g *gather) {
	delete(m.gathers.byID, g.id)
	if g.cancel != nil {
		g.cancel()
	}
	if g.stopDeadline != nil {
		g.stopDeadline()
	}
	for i, tp := range g.parts {
		if !g.kind.answered(i) {
			// Never answered: the partition stopped or is stuck.
			g.kind.refuse(i, messages.ErrorCode_REQUEST_TIMED_OUT, m.notAnswered(tp))
		}
	}
	g.kind.answer(ctx, m)
}
