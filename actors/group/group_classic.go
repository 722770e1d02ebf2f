package group

import (
	"fmt"
	"slices"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/depot-dev/depot/actors/assign"
	"github.com/depot-dev/depot/messages"
)

// The group actor's side of Kafka's classic protocol: it hands requests
// to the classic group (classic.go) and does what the machine leaves it to
// do, answering the requests that waited and running its timers.

// wait registers a request of sender that may wait for its answer.
func (g *groupActor) wait(sender *actor.PID, sync bool) waiter {
	g.lastWaiter++
	g.waiting[g.lastWaiter] = waitingRequest{sender: sender, sync: sync}
	return g.lastWaiter
}

// applyClassic does what the classic group left to do: log, answer the
// requests that waited, start and stop timers.
func (g *groupActor) applyClassic(ctx actor.Context) {
	e := g.classic.drain()
	for _, n := range e.notes {
		g.logger.Info(n)
	}
	for _, r := range e.replies {
		w, ok := g.waiting[r.to]
		if !ok {
			continue
		}
		delete(g.waiting, r.to)
		answer(ctx, w.sender, r.msg)
	}
	for _, t := range e.timers {
		if running, ok := g.classicTimers[t.timer]; ok {
			running.cancel()
			delete(g.classicTimers, t.timer)
		}
		if t.after > 0 {
			g.timerSeq++
			cancel := g.timers.SendOnce(t.after, g.self, &classicTimerFired{timer: t.timer, seq: g.timerSeq})
			g.classicTimers[t.timer] = runningTimer{seq: g.timerSeq, cancel: cancel}
		}
	}
	if g.classic.active() {
		g.classicKind = true
	}
	if e.store {
		var value *messages.OffsetValue
		if e.generation != nil {
			value = &messages.OffsetValue{Classic: e.generation}
		}
		g.storeGeneration(ctx, value)
	}
}

// stopClassicTimers stops every timer of the classic group.
func (g *groupActor) stopClassicTimers() {
	for _, running := range g.classicTimers {
		running.cancel()
	}
	clear(g.classicTimers)
}

func (g *groupActor) onClassicTimer(ctx actor.Context, m *classicTimerFired) {
	running, ok := g.classicTimers[m.timer]
	if !ok || running.seq != m.seq {
		return // stopped or replaced meanwhile
	}
	delete(g.classicTimers, m.timer)
	g.classic.expire(m.timer)
	g.applyClassic(ctx)
	g.report(ctx)
}

func (g *groupActor) onClassicJoin(ctx actor.Context, m *messages.JoinGroupRequest) {
	if len(g.members) > 0 {
		ctx.Respond(joinError(m.MemberId, messages.ErrorCode_INCONSISTENT_GROUP_PROTOCOL,
			fmt.Sprintf("group %q has %s of Depot's own group protocol: a member of Kafka's classic protocol cannot join it", g.cfg.id, activeMembers(len(g.members)))))
		return
	}
	settings, code, text := validateClassicJoin(m)
	if code != messages.ErrorCode_NONE {
		ctx.Respond(joinError(m.MemberId, code, text))
		return
	}
	if g.state == groupDead {
		g.state = groupEmpty
	}
	w := g.wait(ctx.Sender(), false)
	if resp := g.classic.join(m, settings, w); resp != nil {
		delete(g.waiting, w)
		ctx.Respond(resp)
	}
	g.applyClassic(ctx)
}

func (g *groupActor) onSync(ctx actor.Context, m *messages.SyncGroupRequest) {
	w := g.wait(ctx.Sender(), true)
	if resp := g.classic.sync(m, w); resp != nil {
		delete(g.waiting, w)
		ctx.Respond(resp)
	}
	g.applyClassic(ctx)
}

// onLeaveRequest takes a LeaveGroupRequest of either protocol: of one
// member (member_id, group_instance_id), answered with its error, or of
// several (members), each answered in its place.
func (g *groupActor) onLeaveRequest(ctx actor.Context, m *messages.LeaveGroupRequest) *messages.LeaveGroupResponse {
	leaving := m.Members
	single := len(leaving) == 0
	if single {
		if !g.classic.active() {
			return g.onLeave(ctx, m)
		}
		leaving = []*messages.LeavingMember{{MemberId: m.MemberId, GroupInstanceId: m.GroupInstanceId}}
	}
	resp := &messages.LeaveGroupResponse{}
	if g.classic.active() {
		resp.Members = g.classic.leave(leaving)
		g.applyClassic(ctx)
	} else {
		for _, l := range leaving {
			r := g.onLeave(ctx, &messages.LeaveGroupRequest{GroupId: m.GroupId, MemberId: l.GetMemberId(), GroupInstanceId: l.GetGroupInstanceId()})
			resp.Members = append(resp.Members, &messages.LeftMember{MemberId: l.GetMemberId(), GroupInstanceId: l.GetGroupInstanceId(), Error: r.Error, ErrorMessage: r.ErrorMessage})
		}
	}
	if single {
		resp.Error, resp.ErrorMessage = resp.Members[0].Error, resp.Members[0].ErrorMessage
		resp.Members = nil
	}
	return resp
}

// offsetDeletions decides an OffsetDelete: each partition asked for is
// answered GROUP_SUBSCRIBED_TO_TOPIC when a member consumes its topic
// (subscribed), and is otherwise deleted, when committed (it is among
// committed: those are returned, in the request's order), or left as it
// is. Pure.
func offsetDeletions(partitions []*messages.TopicPartition, subscribed []string, committed func(assign.TopicPartition) bool) ([]*messages.PartitionOffset, []assign.TopicPartition) {
	results := make([]*messages.PartitionOffset, 0, len(partitions))
	var deleted []assign.TopicPartition
	for _, p := range partitions {
		r := &messages.PartitionOffset{Topic: p.GetTopic(), Partition: p.GetPartition(), Offset: -1}
		tp := assign.TopicPartition{Topic: r.Topic, Partition: r.Partition}
		switch {
		case slices.Contains(subscribed, r.Topic):
			r.Error = messages.ErrorCode_GROUP_SUBSCRIBED_TO_TOPIC
		case committed(tp) && !slices.Contains(deleted, tp):
			deleted = append(deleted, tp)
		}
		results = append(results, r)
	}
	return results, deleted
}

// onOffsetDelete removes committed offsets of partitions whose topics no
// member consumes, as Kafka's OffsetDelete: a group that does not exist is
// answered GROUP_ID_NOT_FOUND, and a classic group with members whose
// protocol type is not "consumer" NON_EMPTY_GROUP (its subscriptions
// cannot be read).
func (g *groupActor) onOffsetDelete(ctx actor.Context, m *messages.OffsetDeleteRequest) {
	if !g.exists() {
		ctx.Respond(&messages.OffsetDeleteResponse{Error: messages.ErrorCode_GROUP_ID_NOT_FOUND, ErrorMessage: fmt.Sprintf("group %q does not exist", g.cfg.id)})
		return
	}
	var subscribed []string
	switch {
	case len(g.classic.members) > 0 && g.classic.protocolType != ConsumerProtocolType:
		ctx.Respond(&messages.OffsetDeleteResponse{Error: messages.ErrorCode_NON_EMPTY_GROUP,
			ErrorMessage: fmt.Sprintf("group %q has %s of protocol type %q, whose subscriptions cannot be read", g.cfg.id, activeMembers(len(g.classic.members)), g.classic.protocolType)})
		return
	case len(g.classic.members) > 0:
		subscribed = g.classic.subscribedTopics()
	case len(g.members) > 0:
		subscribed = g.subscribedTopics()
	}
	results, deleted := offsetDeletions(m.Partitions, subscribed, func(tp assign.TopicPartition) bool { _, ok := g.offsets[tp]; return ok })
	if len(deleted) == 0 {
		ctx.Respond(&messages.OffsetDeleteResponse{Partitions: results})
		return
	}
	sender := ctx.Sender()
	req := &appendOffsets{group: g.cfg.id}
	for _, tp := range deleted {
		req.keys = append(req.keys, &messages.OffsetKey{Group: g.cfg.id, Topic: tp.Topic, Partition: tp.Partition})
		req.values = append(req.values, nil)
	}
	g.write(ctx, req, func(code messages.ErrorCode, text string) {
		if code != messages.ErrorCode_NONE {
			for _, r := range results {
				if r.Error == messages.ErrorCode_NONE {
					r.Error = code
				}
			}
			answer(ctx, sender, &messages.OffsetDeleteResponse{Error: code, ErrorMessage: text, Partitions: results})
			return
		}
		for _, tp := range deleted {
			delete(g.offsets, tp)
		}
		g.logger.WithField("partitions", len(deleted)).Info("committed offsets deleted")
		answer(ctx, sender, &messages.OffsetDeleteResponse{Partitions: results})
		g.report(ctx)
	})
}
