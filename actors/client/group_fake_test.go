package client

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/messages"
)

// fakeGroups is a coordinator actor and group actors in memory, beside a
// fakeCluster. Each group answers as a one-member group by default: a join
// gets every partition of its topics in a new generation. Tests script
// joins and heartbeats and read what the groups were sent.
type fakeGroups struct {
	fc *fakeCluster

	mu     sync.Mutex
	groups map[string]*fakeGroup
	finds  int
	events *eventLog // joins are logged here too, when set
}

// fakeGroup is one group's state and script. Guarded by fakeGroups.mu.
type fakeGroup struct {
	id          string
	generation  int32
	nextMember  int
	members     map[string]bool
	assignor    string
	assignments map[string][]*messages.TopicPartition
	committed   map[TopicPartition]int64

	// join, when set, answers a join instead of the one-member default.
	join func(g *fakeGroup, req *messages.JoinGroupRequest) *messages.JoinGroupResponse
	// heartbeat, when set, gives the code of a heartbeat's answer; drop
	// means no answer at all.
	heartbeat func(req *messages.HeartbeatRequest) (code messages.ErrorCode, drop bool)
	// notCoordinator answers this many next requests NOT_COORDINATOR.
	notCoordinator int
	// loseCommitAnswers is how many next commits are taken and not
	// answered.
	loseCommitAnswers int

	joins      []*messages.JoinGroupRequest
	heartbeats int
	commits    []*messages.OffsetCommitRequest
	leaves     []*messages.LeaveGroupRequest
}

// eventLog is an ordered list of what happened, for checking orders.
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) add(format string, args ...any) {
	l.mu.Lock()
	l.events = append(l.events, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *eventLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// newFakeGroups spawns the fake coordinator actor in fc's system.
func newFakeGroups(t *testing.T, fc *fakeCluster) *fakeGroups {
	t.Helper()
	fg := &fakeGroups{fc: fc, groups: map[string]*fakeGroup{}}
	_, err := fc.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &fakeCoordinator{fg} }), GroupsActorName)
	require.NoError(t, err)
	return fg
}

// group returns group id's state, creating it (and its actor) if needed.
// Called with fg.mu held.
func (fg *fakeGroups) group(id string) *fakeGroup {
	g := fg.groups[id]
	if g == nil {
		g = &fakeGroup{id: id, members: map[string]bool{}, assignments: map[string][]*messages.TopicPartition{}, committed: map[TopicPartition]int64{}}
		fg.groups[id] = g
		_, _ = fg.fc.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &fakeGroupActor{fg, id} }), "group-"+id)
	}
	return g
}

// with runs fn on group id's state under the lock.
func (fg *fakeGroups) with(id string, fn func(g *fakeGroup)) {
	fg.mu.Lock()
	defer fg.mu.Unlock()
	fn(fg.group(id))
}

// committed returns group id's committed offsets.
func (fg *fakeGroups) committed(id string) map[TopicPartition]int64 {
	fg.mu.Lock()
	defer fg.mu.Unlock()
	out := map[TopicPartition]int64{}
	for tp, o := range fg.group(id).committed {
		out[tp] = o
	}
	return out
}

// fakeCoordinator answers FindCoordinator and ListGroups.
type fakeCoordinator struct{ fg *fakeGroups }

func (a *fakeCoordinator) Receive(ctx actor.Context) {
	fg := a.fg
	switch m := ctx.Message().(type) {
	case *messages.FindCoordinatorRequest:
		fg.mu.Lock()
		fg.finds++
		fg.group(m.GetGroupId())
		fg.mu.Unlock()
		ctx.Respond(&messages.FindCoordinatorResponse{NodeId: 1, Address: ctx.ActorSystem().Address(), ActorName: "group-" + m.GetGroupId()})
	case *messages.ListGroupsRequest:
		fg.mu.Lock()
		resp := &messages.ListGroupsResponse{}
		for _, g := range fg.groups {
			if len(g.members) == 0 && len(g.committed) == 0 {
				continue
			}
			resp.Groups = append(resp.Groups, &messages.GroupListing{GroupId: g.id, State: g.state(), Members: int32(len(g.members))})
		}
		fg.mu.Unlock()
		ctx.Respond(resp)
	}
}

func (g *fakeGroup) state() string {
	switch {
	case len(g.members) > 0:
		return "Stable"
	case len(g.committed) > 0:
		return "Empty"
	}
	return "Dead"
}

// fakeGroupActor answers one group's requests.
type fakeGroupActor struct {
	fg *fakeGroups
	id string
}

func (a *fakeGroupActor) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
		return
	}
	fg := a.fg
	fg.mu.Lock()
	g := fg.group(a.id)
	if g.notCoordinator > 0 {
		g.notCoordinator--
		fg.mu.Unlock()
		code := messages.ErrorCode_NOT_COORDINATOR
		switch ctx.Message().(type) {
		case *messages.JoinGroupRequest:
			ctx.Respond(&messages.JoinGroupResponse{Error: code})
		case *messages.HeartbeatRequest:
			ctx.Respond(&messages.HeartbeatResponse{Error: code})
		case *messages.OffsetCommitRequest:
			ctx.Respond(&messages.OffsetCommitResponse{Error: code})
		case *messages.OffsetFetchRequest:
			ctx.Respond(&messages.OffsetFetchResponse{Error: code})
		}
		return
	}
	resp, respond := g.handle(fg, ctx.Message())
	fg.mu.Unlock()
	if respond {
		ctx.Respond(resp)
	}
}

// handle answers one request. Called with fg.mu held.
func (g *fakeGroup) handle(fg *fakeGroups, msg any) (any, bool) {
	switch m := msg.(type) {
	case *messages.JoinGroupRequest:
		g.joins = append(g.joins, m)
		if fg.events != nil {
			fg.events.add("join %s", ownedString(m.GetOwned()))
		}
		var resp *messages.JoinGroupResponse
		if g.join != nil {
			resp = g.join(g, m)
		} else {
			resp = g.defaultJoin(fg, m)
		}
		if resp.GetError() == messages.ErrorCode_NONE {
			g.members[resp.GetMemberId()] = true
			g.generation = resp.GetGeneration()
			g.assignor = resp.GetAssignor()
			g.assignments[resp.GetMemberId()] = resp.GetAssignment()
		}
		return resp, true
	case *messages.HeartbeatRequest:
		g.heartbeats++
		if g.heartbeat != nil {
			code, drop := g.heartbeat(m)
			return &messages.HeartbeatResponse{Error: code}, !drop
		}
		if !g.members[m.GetMemberId()] {
			return &messages.HeartbeatResponse{Error: messages.ErrorCode_UNKNOWN_MEMBER_ID}, true
		}
		if m.GetGeneration() != g.generation {
			return &messages.HeartbeatResponse{Error: messages.ErrorCode_ILLEGAL_GENERATION}, true
		}
		return &messages.HeartbeatResponse{}, true
	case *messages.LeaveGroupRequest:
		g.leaves = append(g.leaves, m)
		delete(g.members, m.GetMemberId())
		delete(g.assignments, m.GetMemberId())
		return &messages.LeaveGroupResponse{}, true
	case *messages.OffsetCommitRequest:
		g.commits = append(g.commits, m)
		resp := &messages.OffsetCommitResponse{}
		switch {
		case m.GetGeneration() == -1 && m.GetMemberId() == "":
			if len(g.members) > 0 {
				resp.Error = messages.ErrorCode_NON_EMPTY_GROUP
				return resp, true
			}
		case !g.members[m.GetMemberId()]:
			resp.Error = messages.ErrorCode_UNKNOWN_MEMBER_ID
			return resp, true
		case m.GetGeneration() != g.generation:
			resp.Error = messages.ErrorCode_ILLEGAL_GENERATION
			return resp, true
		}
		for _, o := range m.GetOffsets() {
			g.committed[TopicPartition{o.GetTopic(), o.GetPartition()}] = o.GetOffset()
			resp.Offsets = append(resp.Offsets, &messages.PartitionOffset{Topic: o.GetTopic(), Partition: o.GetPartition(), Offset: o.GetOffset()})
		}
		if g.loseCommitAnswers > 0 {
			g.loseCommitAnswers--
			return nil, false
		}
		return resp, true
	case *messages.OffsetFetchRequest:
		resp := &messages.OffsetFetchResponse{}
		if len(m.GetPartitions()) == 0 {
			for tp, o := range g.committed {
				resp.Offsets = append(resp.Offsets, &messages.PartitionOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: o})
			}
			return resp, true
		}
		for _, p := range m.GetPartitions() {
			o, ok := g.committed[TopicPartition{p.GetTopic(), p.GetPartition()}]
			if !ok {
				o = -1
			}
			resp.Offsets = append(resp.Offsets, &messages.PartitionOffset{Topic: p.GetTopic(), Partition: p.GetPartition(), Offset: o})
		}
		return resp, true
	case *messages.DescribeGroupRequest:
		resp := &messages.DescribeGroupResponse{GroupId: g.id, State: g.state(), Generation: g.generation, Assignor: g.assignor}
		ids := make([]string, 0, len(g.members))
		for id := range g.members {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			resp.Members = append(resp.Members, &messages.GroupMember{MemberId: id, ClientId: "depot", Assignment: g.assignments[id]})
		}
		for tp, o := range g.committed {
			resp.Offsets = append(resp.Offsets, &messages.PartitionOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: o})
		}
		return resp, true
	case *messages.DeleteGroupRequest:
		switch {
		case len(g.members) > 0:
			return &messages.DeleteGroupResponse{Error: messages.ErrorCode_NON_EMPTY_GROUP}, true
		case len(g.committed) == 0:
			return &messages.DeleteGroupResponse{Error: messages.ErrorCode_GROUP_ID_NOT_FOUND}, true
		}
		g.committed = map[TopicPartition]int64{}
		return &messages.DeleteGroupResponse{}, true
	}
	return nil, false
}

// defaultJoin makes the joiner the only member, with every partition of its
// topics, in a new generation, with the first assignor it names.
func (g *fakeGroup) defaultJoin(fg *fakeGroups, m *messages.JoinGroupRequest) *messages.JoinGroupResponse {
	member := m.GetMemberId()
	if member == "" {
		g.nextMember++
		member = fmt.Sprintf("member-%d", g.nextMember)
	} else if !g.members[member] {
		return &messages.JoinGroupResponse{Error: messages.ErrorCode_UNKNOWN_MEMBER_ID}
	}
	resp := &messages.JoinGroupResponse{Generation: g.generation + 1, MemberId: member, Assignor: m.GetAssignors()[0]}
	fg.fc.mu.Lock()
	for _, topic := range m.GetTopics() {
		for p := range fg.fc.topics[topic] {
			resp.Assignment = append(resp.Assignment, &messages.TopicPartition{Topic: topic, Partition: int32(p)})
		}
	}
	fg.fc.mu.Unlock()
	return resp
}

// assignment is a JoinGroupResponse's partitions.
func assignment(topic string, partitions ...int32) []*messages.TopicPartition {
	out := make([]*messages.TopicPartition, len(partitions))
	for i, p := range partitions {
		out[i] = &messages.TopicPartition{Topic: topic, Partition: p}
	}
	return out
}

func ownedString(tps []*messages.TopicPartition) string {
	parts := make([]TopicPartition, len(tps))
	for i, tp := range tps {
		parts[i] = TopicPartition{tp.GetTopic(), tp.GetPartition()}
	}
	return fmt.Sprint(sortPartitions(parts))
}
