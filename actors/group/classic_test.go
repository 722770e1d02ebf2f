package group

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/assign"
	"github.com/depot-dev/depot/messages"
)

// classicHarness drives a classic group as its actor would, keeping what
// its effects say: the answers of waiters and the timers running.
type classicHarness struct {
	t       *testing.T
	g       *classicGroup
	next    waiter
	answers map[waiter]any
	timers  map[classicTimer]time.Duration
	notes   []string
	// stores are the generations the group asked to store, nil for a
	// deletion.
	stores []*messages.ClassicGeneration
}

func newClassicHarness(t *testing.T) *classicHarness {
	t.Helper()
	ids := 0
	return &classicHarness{
		t: t,
		g: newClassicGroup("g", 0, func(prefix string) string {
			ids++
			return fmt.Sprintf("%s-%d", prefix, ids)
		}),
		answers: map[waiter]any{},
		timers:  map[classicTimer]time.Duration{},
	}
}

// apply takes the effects the group left.
func (h *classicHarness) apply() {
	e := h.g.drain()
	for _, r := range e.replies {
		_, dup := h.answers[r.to]
		require.False(h.t, dup, "waiter %d answered twice", r.to)
		h.answers[r.to] = r.msg
	}
	for _, t := range e.timers {
		if t.after > 0 {
			h.timers[t.timer] = t.after
		} else {
			delete(h.timers, t.timer)
		}
	}
	h.notes = append(h.notes, e.notes...)
	if e.store {
		h.stores = append(h.stores, e.generation)
	}
}

// joinRequest is a consumer's join, each protocol's metadata naming the
// client and the protocol.
func joinRequest(member, client string, protocols ...string) *messages.JoinGroupRequest {
	m := &messages.JoinGroupRequest{GroupId: "g", MemberId: member, ClientId: client, SessionTimeoutMs: 10000, RebalanceTimeoutMs: 20000,
		ProtocolType: ConsumerProtocolType, Topics: []string{"t"}}
	for _, p := range protocols {
		m.Protocols = append(m.Protocols, &messages.GroupProtocol{Name: p, Metadata: []byte(client + "/" + p)})
	}
	return m
}

// join sends m and returns its waiter and its answer at once, nil when it
// waits.
func (h *classicHarness) join(m *messages.JoinGroupRequest) (waiter, *messages.JoinGroupResponse) {
	h.t.Helper()
	s, code, text := validateClassicJoin(m)
	require.Equal(h.t, messages.ErrorCode_NONE, code, text)
	h.next++
	w := h.next
	resp := h.g.join(m, s, w)
	h.apply()
	return w, resp
}

func (h *classicHarness) sync(m *messages.SyncGroupRequest) (waiter, *messages.SyncGroupResponse) {
	h.next++
	w := h.next
	resp := h.g.sync(m, w)
	h.apply()
	return w, resp
}

func (h *classicHarness) heartbeat(member string, generation int32) messages.ErrorCode {
	resp := h.g.heartbeat(&messages.HeartbeatRequest{GroupId: "g", MemberId: member, Generation: generation})
	h.apply()
	return resp.Error
}

func (h *classicHarness) expire(t classicTimer) {
	h.t.Helper()
	_, running := h.timers[t]
	require.True(h.t, running, "timer %+v is not running", t)
	delete(h.timers, t)
	h.g.expire(t)
	h.apply()
}

func (h *classicHarness) joinAnswer(w waiter) *messages.JoinGroupResponse {
	h.t.Helper()
	resp, ok := h.answers[w].(*messages.JoinGroupResponse)
	require.True(h.t, ok, "join %d not answered: %T", w, h.answers[w])
	return resp
}

func (h *classicHarness) syncAnswer(w waiter) *messages.SyncGroupResponse {
	h.t.Helper()
	resp, ok := h.answers[w].(*messages.SyncGroupResponse)
	require.True(h.t, ok, "sync %d not answered: %T", w, h.answers[w])
	return resp
}

// joinNew has a new dynamic member join as JoinGroup v4+ does: first for
// its member id, then with it. It returns the member id and the waiter of
// its second join.
func (h *classicHarness) joinNew(client string, protocols ...string) (string, waiter) {
	h.t.Helper()
	m := joinRequest("", client, protocols...)
	m.RequireKnownMemberId = true
	_, resp := h.join(m)
	require.NotNil(h.t, resp)
	require.Equal(h.t, messages.ErrorCode_MEMBER_ID_REQUIRED, resp.Error)
	require.NotEmpty(h.t, resp.MemberId)
	w, again := h.join(joinRequest(resp.MemberId, client, protocols...))
	require.Nil(h.t, again, "the second join waits for the generation")
	return resp.MemberId, w
}

// assignment is a leader's SyncGroup assignment of parts to members.
func assignment(parts map[string]string) []*messages.SyncGroupAssignment {
	var out []*messages.SyncGroupAssignment
	for member, part := range parts {
		out = append(out, &messages.SyncGroupAssignment{MemberId: member, Assignment: []byte(part),
			Partitions: []*messages.TopicPartition{{Topic: "t", Partition: int32(len(part))}}})
	}
	return out
}

// stableOfOne is a group whose one member, a, has synced generation 1.
func stableOfOne(t *testing.T) (*classicHarness, string) {
	h := newClassicHarness(t)
	a, w := h.joinNew("a", "range")
	resp := h.joinAnswer(w)
	require.Equal(t, int32(1), resp.Generation)
	sw, sresp := h.sync(&messages.SyncGroupRequest{GroupId: "g", MemberId: a, Generation: 1, Assignments: assignment(map[string]string{a: "A"})})
	require.Nil(t, sresp)
	require.Equal(t, "A", string(h.syncAnswer(sw).Assignment))
	require.Equal(t, groupStable, h.g.state)
	return h, a
}

func TestValidateClassicJoin(t *testing.T) {
	for _, tc := range []struct {
		name          string
		edit          func(m *messages.JoinGroupRequest)
		want          messages.ErrorCode
		wantRebalance time.Duration
	}{
		{"good", func(*messages.JoinGroupRequest) {}, messages.ErrorCode_NONE, 20 * time.Second},
		{"no rebalance timeout: the session's", func(m *messages.JoinGroupRequest) { m.RebalanceTimeoutMs = -1 }, messages.ErrorCode_NONE, 10 * time.Second},
		{"session too short", func(m *messages.JoinGroupRequest) { m.SessionTimeoutMs = 999 }, messages.ErrorCode_INVALID_SESSION_TIMEOUT, 0},
		{"session too long", func(m *messages.JoinGroupRequest) { m.SessionTimeoutMs = 300001 }, messages.ErrorCode_INVALID_SESSION_TIMEOUT, 0},
		{"no session", func(m *messages.JoinGroupRequest) { m.SessionTimeoutMs = 0 }, messages.ErrorCode_INVALID_SESSION_TIMEOUT, 0},
		{"no protocol type", func(m *messages.JoinGroupRequest) { m.ProtocolType = "" }, messages.ErrorCode_INCONSISTENT_GROUP_PROTOCOL, 0},
		{"no protocols", func(m *messages.JoinGroupRequest) { m.Protocols = nil }, messages.ErrorCode_INCONSISTENT_GROUP_PROTOCOL, 0},
		{"a protocol without a name", func(m *messages.JoinGroupRequest) { m.Protocols[0].Name = "" }, messages.ErrorCode_INCONSISTENT_GROUP_PROTOCOL, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := joinRequest("", "c", "range")
			tc.edit(m)
			s, code, text := validateClassicJoin(m)
			require.Equal(t, tc.want, code, text)
			if tc.want == messages.ErrorCode_NONE {
				require.Equal(t, tc.wantRebalance, s.rebalance)
			} else {
				require.NotEmpty(t, text)
			}
		})
	}
	m := joinRequest("", "c", "range")
	m.Topics = []string{"b", "bad topic", "a", "b"}
	s, _, _ := validateClassicJoin(m)
	require.Equal(t, []string{"a", "b"}, s.topics)
}

// The first member: MEMBER_ID_REQUIRED, then generation 1 with itself as
// leader, then its own assignment back from its sync.
func TestClassicFirstMember(t *testing.T) {
	h := newClassicHarness(t)
	a, w := h.joinNew("a", "range", "roundrobin")
	require.Equal(t, "a-1", a)
	resp := h.joinAnswer(w)
	require.Equal(t, messages.ErrorCode_NONE, resp.Error)
	require.Equal(t, int32(1), resp.Generation)
	require.Equal(t, a, resp.Leader)
	require.Equal(t, a, resp.MemberId)
	require.Equal(t, "range", resp.ProtocolName)
	require.Equal(t, ConsumerProtocolType, resp.ProtocolType)
	require.Len(t, resp.Members, 1)
	require.Equal(t, "a/range", string(resp.Members[0].Metadata), "the metadata of the chosen protocol")
	require.Equal(t, groupCompletingRebalance, h.g.state)
	require.Contains(t, h.timers, classicTimer{kind: timerSync})
	require.Contains(t, h.timers, sessionTimer(a))

	sw, sresp := h.sync(&messages.SyncGroupRequest{GroupId: "g", MemberId: a, Generation: 1, ProtocolType: ConsumerProtocolType, ProtocolName: "range",
		Assignments: assignment(map[string]string{a: "A", "nobody": "X"})})
	require.Nil(t, sresp)
	got := h.syncAnswer(sw)
	require.Equal(t, messages.ErrorCode_NONE, got.Error)
	require.Equal(t, "A", string(got.Assignment))
	require.Equal(t, "range", got.ProtocolName)
	require.Equal(t, groupStable, h.g.state)
	require.NotContains(t, h.timers, classicTimer{kind: timerSync})
	require.Equal(t, messages.ErrorCode_NONE, h.heartbeat(a, 1))

	var d messages.DescribeGroupResponse
	h.g.describe(&d)
	require.Equal(t, "Stable", d.State)
	require.Len(t, d.Members, 1)
	require.Equal(t, "A", string(d.Members[0].MemberAssignment))
	require.Equal(t, "a/range", string(d.Members[0].ProtocolMetadata))
	require.Equal(t, []*messages.TopicPartition{{Topic: "t", Partition: 1}}, d.Members[0].Assignment)
	require.Equal(t, []string{"t"}, d.Members[0].Topics)
}

// A second member starts a rebalance: the first learns it from its
// heartbeat, joins again, and both get generation 2; the follower's sync
// waits for the leader's.
func TestClassicSecondMemberRebalances(t *testing.T) {
	h, a := stableOfOne(t)
	b, bw := h.joinNew("b", "range")
	require.NotContains(t, h.answers, bw)
	require.Equal(t, groupPreparingRebalance, h.g.state)
	require.Contains(t, h.timers, classicTimer{kind: timerJoin})
	require.Equal(t, messages.ErrorCode_REBALANCE_IN_PROGRESS, h.heartbeat(a, 1))
	require.Equal(t, messages.ErrorCode_ILLEGAL_GENERATION, h.heartbeat(a, 0))
	_, sresp := h.sync(&messages.SyncGroupRequest{GroupId: "g", MemberId: a, Generation: 1})
	require.Equal(t, messages.ErrorCode_REBALANCE_IN_PROGRESS, sresp.Error)

	aw, resp := h.join(joinRequest(a, "a", "range"))
	require.Nil(t, resp)
	require.NotContains(t, h.timers, classicTimer{kind: timerJoin})
	leader, follower := h.joinAnswer(aw), h.joinAnswer(bw)
	require.Equal(t, int32(2), leader.Generation)
	require.Equal(t, int32(2), follower.Generation)
	require.Equal(t, a, leader.Leader, "the leader stays the leader")
	require.Equal(t, a, follower.Leader)
	require.Len(t, leader.Members, 2)
	require.Empty(t, follower.Members, "only the leader gets the members")

	fw, fresp := h.sync(&messages.SyncGroupRequest{GroupId: "g", MemberId: b, Generation: 2})
	require.Nil(t, fresp)
	require.NotContains(t, h.answers, fw, "the follower waits for the leader")
	require.Equal(t, messages.ErrorCode_NONE, h.heartbeat(b, 2), "a heartbeat while completing the rebalance")
	lw, _ := h.sync(&messages.SyncGroupRequest{GroupId: "g", MemberId: a, Generation: 2, Assignments: assignment(map[string]string{a: "A", b: "BB"})})
	require.Equal(t, "A", string(h.syncAnswer(lw).Assignment))
	require.Equal(t, "BB", string(h.syncAnswer(fw).Assignment))
	require.Equal(t, groupStable, h.g.state)

	// A member of a stable group that joins again with the same
	// protocols, and is not the leader, changes nothing.
	_, same := h.join(joinRequest(b, "b", "range"))
	require.NotNil(t, same)
	require.Equal(t, int32(2), same.Generation)
	require.Equal(t, groupStable, h.g.state)
	// The leader joining again rebalances.
	_, again := h.join(joinRequest(a, "a", "range"))
	require.Nil(t, again)
	require.Equal(t, groupPreparingRebalance, h.g.state)
}

func TestClassicRefusals(t *testing.T) {
	h, a := stableOfOne(t)
	for _, tc := range []struct {
		name string
		code func() messages.ErrorCode
		want messages.ErrorCode
	}{
		{"heartbeat of an unknown member", func() messages.ErrorCode { return h.heartbeat("nobody", 1) }, messages.ErrorCode_UNKNOWN_MEMBER_ID},
		{"heartbeat of another generation", func() messages.ErrorCode { return h.heartbeat(a, 7) }, messages.ErrorCode_ILLEGAL_GENERATION},
		{"heartbeat of a known member", func() messages.ErrorCode { return h.heartbeat(a, 1) }, messages.ErrorCode_NONE},
		{"sync of another generation", func() messages.ErrorCode {
			_, r := h.sync(&messages.SyncGroupRequest{GroupId: "g", MemberId: a, Generation: 2})
			return r.Error
		}, messages.ErrorCode_ILLEGAL_GENERATION},
		{"sync of another protocol", func() messages.ErrorCode {
			_, r := h.sync(&messages.SyncGroupRequest{GroupId: "g", MemberId: a, Generation: 1, ProtocolName: "roundrobin"})
			return r.Error
		}, messages.ErrorCode_INCONSISTENT_GROUP_PROTOCOL},
		{"sync of another protocol type", func() messages.ErrorCode {
			_, r := h.sync(&messages.SyncGroupRequest{GroupId: "g", MemberId: a, Generation: 1, ProtocolType: "connect"})
			return r.Error
		}, messages.ErrorCode_INCONSISTENT_GROUP_PROTOCOL},
		{"sync of an unknown member", func() messages.ErrorCode {
			_, r := h.sync(&messages.SyncGroupRequest{GroupId: "g", MemberId: "nobody", Generation: 1})
			return r.Error
		}, messages.ErrorCode_UNKNOWN_MEMBER_ID},
		{"join of an unknown member", func() messages.ErrorCode {
			_, r := h.join(joinRequest("nobody", "x", "range"))
			return r.Error
		}, messages.ErrorCode_UNKNOWN_MEMBER_ID},
		{"join with no protocol in common", func() messages.ErrorCode {
			_, r := h.join(joinRequest("", "x", "roundrobin"))
			return r.Error
		}, messages.ErrorCode_INCONSISTENT_GROUP_PROTOCOL},
		{"join of another protocol type", func() messages.ErrorCode {
			m := joinRequest("", "x", "range")
			m.ProtocolType = "connect"
			_, r := h.join(m)
			return r.Error
		}, messages.ErrorCode_INCONSISTENT_GROUP_PROTOCOL},
		{"join of a static member under a member id not its own", func() messages.ErrorCode {
			m := joinRequest(a, "a", "range")
			m.GroupInstanceId = "never-joined"
			_, r := h.join(m)
			return r.Error
		}, messages.ErrorCode_UNKNOWN_MEMBER_ID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.code())
			require.Equal(t, groupStable, h.g.state, "a refusal changes nothing")
			require.Equal(t, int32(1), h.g.generation)
		})
	}
}

func TestClassicProtocolChoice(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members [][]string
		want    string
	}{
		{"the only one", [][]string{{"range"}, {"range"}}, "range"},
		{"the one all support", [][]string{{"range", "roundrobin"}, {"roundrobin"}}, "roundrobin"},
		{"the most votes", [][]string{{"roundrobin", "range"}, {"range", "roundrobin"}, {"range", "roundrobin"}}, "range"},
		{"a tie goes to the first member's choice", [][]string{{"cooperative-sticky", "range"}, {"range", "cooperative-sticky"}}, "cooperative-sticky"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newClassicHarness(t)
			var waiters []waiter
			for i, protocols := range tc.members {
				m := joinRequest("", fmt.Sprintf("m%d", i), protocols...)
				if i == 0 {
					w, _ := h.join(m)
					waiters = append(waiters, w)
					continue
				}
				// The group prepares a rebalance from the second on: the
				// earlier members join again.
				w, resp := h.join(m)
				require.Nil(t, resp)
				waiters = append(waiters, w)
				for j := range i {
					w, _ := h.join(joinRequest(fmt.Sprintf("m%d-%d", j, j+1), fmt.Sprintf("m%d", j), tc.members[j]...))
					waiters[j] = w
				}
			}
			resp := h.joinAnswer(waiters[len(waiters)-1])
			require.Equal(t, messages.ErrorCode_NONE, resp.Error)
			require.Equal(t, tc.want, resp.ProtocolName)
		})
	}
}

// A member that lets its session lapse is removed and the group
// rebalances; one that does not join again within the rebalance timeout
// is dropped from the generation.
func TestClassicSessionAndRebalanceTimeouts(t *testing.T) {
	h, a := stableOfOne(t)
	b, bw := h.joinNew("b", "range")
	aw, _ := h.join(joinRequest(a, "a", "range"))
	require.Equal(t, int32(2), h.joinAnswer(bw).Generation)
	h.sync(&messages.SyncGroupRequest{GroupId: "g", MemberId: b, Generation: 2})
	h.sync(&messages.SyncGroupRequest{GroupId: "g", MemberId: a, Generation: 2, Assignments: assignment(map[string]string{a: "A", b: "B"})})
	require.Equal(t, int32(2), h.joinAnswer(aw).Generation)
	require.Equal(t, groupStable, h.g.state)

	h.expire(sessionTimer(b))
	require.NotContains(t, h.g.members, b)
	require.Equal(t, groupPreparingRebalance, h.g.state)
	require.Equal(t, messages.ErrorCode_UNKNOWN_MEMBER_ID, h.heartbeat(b, 2))
	require.Equal(t, messages.ErrorCode_REBALANCE_IN_PROGRESS, h.heartbeat(a, 2))
	aw, _ = h.join(joinRequest(a, "a", "range"))
	require.Equal(t, int32(3), h.joinAnswer(aw).Generation)
	h.sync(&messages.SyncGroupRequest{GroupId: "g", MemberId: a, Generation: 3, Assignments: assignment(map[string]string{a: "AB"})})

	// c joins; a never joins again: at the rebalance timeout a is dropped
	// and c leads generation 4.
	c, cw := h.joinNew("c", "range")
	require.NotContains(t, h.answers, cw)
	h.expire(classicTimer{kind: timerJoin})
	resp := h.joinAnswer(cw)
	require.Equal(t, int32(4), resp.Generation)
	require.Equal(t, c, resp.Leader)
	require.NotContains(t, h.g.members, a)
	require.Equal(t, messages.ErrorCode_UNKNOWN_MEMBER_ID, h.heartbeat(a, 3))

	// A member that is answered and never syncs is dropped at the
	// rebalance timeout of the sync, and the group rebalances without it.
	require.Contains(t, h.timers, classicTimer{kind: timerSync})
	h.expire(classicTimer{kind: timerSync})
	require.Empty(t, h.g.members)
	require.Equal(t, groupEmpty, h.g.state)
	require.Equal(t, int32(5), h.g.generation, "an empty group's generation goes on")
}

// A member waiting for its join or sync to be answered is alive: its
// session lapsing then removes nothing.
func TestClassicWaitingMemberKeepsItsSession(t *testing.T) {
	h, a := stableOfOne(t)
	b, bw := h.joinNew("b", "range")
	h.g.expire(sessionTimer(b))
	h.apply()
	require.Contains(t, h.g.members, b)
	require.NotContains(t, h.answers, bw)
	require.Contains(t, h.g.members, a)
}

// A member given its id with MEMBER_ID_REQUIRED holds the rebalance until
// it joins again or its session lapses.
func TestClassicPendingMemberHoldsTheRebalance(t *testing.T) {
	h, a := stableOfOne(t)
	m := joinRequest("", "b", "range")
	m.RequireKnownMemberId = true
	_, resp := h.join(m)
	require.Equal(t, messages.ErrorCode_MEMBER_ID_REQUIRED, resp.Error)
	pending := resp.MemberId
	require.Contains(t, h.timers, sessionTimer(pending))
	require.Equal(t, groupStable, h.g.state, "a pending member does not rebalance the group")
	require.Equal(t, messages.ErrorCode_NONE, h.heartbeat(a, 1))

	// The leader joins again (say, its metadata changed): the rebalance
	// waits for the pending member.
	m = joinRequest(a, "a", "range")
	m.Protocols[0].Metadata = []byte("new")
	aw, _ := h.join(m)
	require.NotContains(t, h.answers, aw)
	h.expire(sessionTimer(pending))
	resp = h.joinAnswer(aw)
	require.Equal(t, int32(2), resp.Generation)
	require.Len(t, resp.Members, 1)
	require.Equal(t, "new", string(resp.Members[0].Metadata))
	_, late := h.join(joinRequest(pending, "b", "range"))
	require.Equal(t, messages.ErrorCode_UNKNOWN_MEMBER_ID, late.Error, "its id lapsed")
}

func TestClassicLeave(t *testing.T) {
	h, a := stableOfOne(t)
	s := joinRequest("", "s", "range")
	s.GroupInstanceId = "instance-s"
	sw, resp := h.join(s)
	require.Nil(t, resp, "a static member joins at once, without MEMBER_ID_REQUIRED")
	aw, _ := h.join(joinRequest(a, "a", "range"))
	static := h.joinAnswer(sw).MemberId
	require.Equal(t, int32(2), h.joinAnswer(aw).Generation)
	h.sync(&messages.SyncGroupRequest{GroupId: "g", MemberId: a, Generation: 2, Assignments: assignment(map[string]string{a: "A", static: "S"})})

	left := h.g.leave([]*messages.LeavingMember{
		{MemberId: "nobody"},
		{GroupInstanceId: "unknown-instance"},
		{MemberId: a, GroupInstanceId: "instance-s"},
		{GroupInstanceId: "instance-s", Reason: "shutting down"},
	})
	h.apply()
	require.Len(t, left, 4)
	require.Equal(t, messages.ErrorCode_UNKNOWN_MEMBER_ID, left[0].Error)
	require.Equal(t, messages.ErrorCode_UNKNOWN_MEMBER_ID, left[1].Error)
	require.Equal(t, messages.ErrorCode_FENCED_INSTANCE_ID, left[2].Error)
	require.Equal(t, messages.ErrorCode_NONE, left[3].Error)
	require.Equal(t, static, left[3].MemberId, "the member id of the instance")
	require.NotContains(t, h.g.members, static)
	require.Equal(t, groupPreparingRebalance, h.g.state)

	aw, _ = h.join(joinRequest(a, "a", "range"))
	require.Equal(t, int32(3), h.joinAnswer(aw).Generation)
	left = h.g.leave([]*messages.LeavingMember{{MemberId: a}})
	h.apply()
	require.Equal(t, messages.ErrorCode_NONE, left[0].Error)
	require.Equal(t, groupEmpty, h.g.state)
	require.Equal(t, int32(4), h.g.generation)
	require.False(t, h.g.active())
	require.Empty(t, h.timers, "no timer runs for an empty group")
}

// A static member back under a new member id (a restart) takes the old
// one's place without a rebalance, fencing the old id; a static leader is
// told to keep its assignment.
func TestClassicStaticMemberRejoins(t *testing.T) {
	h := newClassicHarness(t)
	s := joinRequest("", "s", "range")
	s.GroupInstanceId = "instance-s"
	s.RequireKnownMemberId = true
	w, _ := h.join(s)
	first := h.joinAnswer(w)
	old := first.MemberId
	require.Equal(t, old, first.Leader)
	h.sync(&messages.SyncGroupRequest{GroupId: "g", MemberId: old, GroupInstanceId: "instance-s", Generation: 1, Assignments: assignment(map[string]string{old: "S"})})
	require.Equal(t, groupStable, h.g.state)

	_, resp := h.join(s)
	require.NotNil(t, resp, "answered at once")
	require.Equal(t, messages.ErrorCode_NONE, resp.Error)
	require.NotEqual(t, old, resp.MemberId)
	require.Equal(t, int32(1), resp.Generation, "no rebalance")
	require.Equal(t, old, resp.Leader, "the leader as it was")
	require.True(t, resp.SkipAssignment)
	require.Equal(t, groupStable, h.g.state)

	fenced := h.g.heartbeat(&messages.HeartbeatRequest{GroupId: "g", MemberId: old, GroupInstanceId: "instance-s", Generation: 1})
	require.Equal(t, messages.ErrorCode_FENCED_INSTANCE_ID, fenced.Error)
	_, sresp := h.sync(&messages.SyncGroupRequest{GroupId: "g", MemberId: resp.MemberId, GroupInstanceId: "instance-s", Generation: 1})
	require.Equal(t, "S", string(sresp.Assignment), "the assignment it had")
	_, code, _ := h.g.validateCommit(old, "instance-s", 1)
	require.Equal(t, messages.ErrorCode_FENCED_INSTANCE_ID, code)
	_, code, _ = h.g.validateCommit(resp.MemberId, "instance-s", 1)
	require.Equal(t, messages.ErrorCode_NONE, code)
}

func TestClassicValidateCommit(t *testing.T) {
	empty := newClassicHarness(t)
	h, a := stableOfOne(t)
	completing := newClassicHarness(t)
	c, w := completing.joinNew("c", "range")
	completing.joinAnswer(w)
	for _, tc := range []struct {
		name       string
		g          *classicGroup
		member     string
		generation int32
		want       messages.ErrorCode
	}{
		{"an admin's, to an empty group", empty.g, "", -1, messages.ErrorCode_NONE},
		{"an admin's, to a group with members", h.g, "", -1, messages.ErrorCode_UNKNOWN_MEMBER_ID},
		{"a member of the generation", h.g, a, 1, messages.ErrorCode_NONE},
		{"a member of another generation", h.g, a, 0, messages.ErrorCode_ILLEGAL_GENERATION},
		{"a member not in the group", h.g, "nobody", 1, messages.ErrorCode_UNKNOWN_MEMBER_ID},
		{"a member of a group that has none", empty.g, "gone", 3, messages.ErrorCode_UNKNOWN_MEMBER_ID},
		{"while the group completes a rebalance", completing.g, c, 1, messages.ErrorCode_REBALANCE_IN_PROGRESS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, code, text := tc.g.validateCommit(tc.member, "", tc.generation)
			require.Equal(t, tc.want, code, text)
		})
	}
}

// The leader's sync never comes: the members that did not sync are
// dropped at the rebalance timeout, and the others join again.
func TestClassicLeaderNeverSyncs(t *testing.T) {
	h, a := stableOfOne(t)
	b, bw := h.joinNew("b", "range")
	aw, _ := h.join(joinRequest(a, "a", "range"))
	require.Equal(t, a, h.joinAnswer(aw).Leader)
	fw, _ := h.sync(&messages.SyncGroupRequest{GroupId: "g", MemberId: b, Generation: 2})
	require.Equal(t, int32(2), h.joinAnswer(bw).Generation)
	h.expire(classicTimer{kind: timerSync})
	require.NotContains(t, h.g.members, a)
	require.Equal(t, messages.ErrorCode_REBALANCE_IN_PROGRESS, h.syncAnswer(fw).Error)
	require.Equal(t, groupPreparingRebalance, h.g.state)
	bw, _ = h.join(joinRequest(b, "b", "range"))
	resp := h.joinAnswer(bw)
	require.Equal(t, int32(3), resp.Generation)
	require.Equal(t, b, resp.Leader)
}

func TestOffsetDeletions(t *testing.T) {
	committed := map[assign.TopicPartition]bool{{Topic: "a", Partition: 0}: true, {Topic: "b", Partition: 1}: true}
	has := func(tp assign.TopicPartition) bool { return committed[tp] }
	for _, tc := range []struct {
		name        string
		subscribed  []string
		want        []messages.ErrorCode
		wantDeleted []assign.TopicPartition
	}{
		{"nobody subscribes", nil, []messages.ErrorCode{0, 0, 0}, []assign.TopicPartition{{Topic: "a"}, {Topic: "b", Partition: 1}}},
		{"a subscribed topic is kept", []string{"a"},
			[]messages.ErrorCode{messages.ErrorCode_GROUP_SUBSCRIBED_TO_TOPIC, 0, 0}, []assign.TopicPartition{{Topic: "b", Partition: 1}}},
		{"all subscribed", []string{"a", "b"},
			[]messages.ErrorCode{messages.ErrorCode_GROUP_SUBSCRIBED_TO_TOPIC, messages.ErrorCode_GROUP_SUBSCRIBED_TO_TOPIC, messages.ErrorCode_GROUP_SUBSCRIBED_TO_TOPIC}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			results, deleted := offsetDeletions([]*messages.TopicPartition{{Topic: "a"}, {Topic: "b", Partition: 1}, {Topic: "b", Partition: 2}}, tc.subscribed, has)
			require.Len(t, results, 3)
			for i, r := range results {
				require.Equal(t, tc.want[i], r.Error, "partition %d", i)
			}
			require.Equal(t, tc.wantDeleted, deleted)
		})
	}
}

// An empty group's first rebalance waits group.initial.rebalance.delay.ms
// for more members, again after each that joins meanwhile, within the
// rebalance timeout, so that members started together make one generation;
// the next rebalance of a group with members does not wait.
func TestClassicInitialRebalanceDelay(t *testing.T) {
	h := newClassicHarness(t)
	h.g.initialDelay = 3 * time.Second
	initial := classicTimer{kind: timerInitialJoin}

	a, wa := h.joinNew("a", "range")
	require.NotContains(t, h.answers, wa, "the first member waits for others")
	require.Equal(t, 3*time.Second, h.timers[initial])
	require.NotContains(t, h.timers, classicTimer{kind: timerJoin})
	b, wb := h.joinNew("b", "range")
	require.NotContains(t, h.answers, wb, "both joined, but the delay has not passed")

	// b joined during the delay: another delay, taken from the 17 s the
	// rebalance timeout (20 s) leaves after the first.
	h.expire(initial)
	require.Equal(t, 3*time.Second, h.timers[initial])
	require.NotContains(t, h.answers, wa)
	h.expire(initial)
	ra, rb := h.joinAnswer(wa), h.joinAnswer(wb)
	require.Equal(t, int32(1), ra.Generation, "one generation for both")
	require.Equal(t, int32(1), rb.Generation)
	require.Len(t, ra.Members, 2, "the leader learns both members")
	require.Equal(t, groupCompletingRebalance, h.g.state)

	// With members, a rebalance completes once every member has joined.
	h.sync(&messages.SyncGroupRequest{GroupId: "g", MemberId: a, Generation: 1, Assignments: assignment(map[string]string{a: "A", b: "B"})})
	h.sync(&messages.SyncGroupRequest{GroupId: "g", MemberId: b, Generation: 1})
	require.Equal(t, groupStable, h.g.state)
	_, wc := h.joinNew("c", "range")
	require.NotContains(t, h.timers, initial)
	_, again := h.join(joinRequest(a, "a", "range"))
	require.Nil(t, again)
	_, again = h.join(joinRequest(b, "b", "range"))
	require.Nil(t, again)
	require.Equal(t, int32(2), h.joinAnswer(wc).Generation)
}

// The extensions of the initial delay end with the rebalance timeout:
// members that keep joining do not hold the group back for ever.
func TestClassicInitialRebalanceDelayBoundedByRebalanceTimeout(t *testing.T) {
	h := newClassicHarness(t)
	h.g.initialDelay = 8 * time.Second // the rebalance timeout, 20 s, leaves 12 s
	initial := classicTimer{kind: timerInitialJoin}
	_, first := h.joinNew("m0", "range")
	var delays []time.Duration
	for i := 1; h.timers[initial] > 0; i++ {
		delays = append(delays, h.timers[initial])
		h.joinNew(fmt.Sprintf("m%d", i), "range")
		h.expire(initial)
		require.Less(t, i, 10, "the delay never ends")
	}
	require.Equal(t, []time.Duration{8 * time.Second, 8 * time.Second, 4 * time.Second}, delays)
	require.Equal(t, int32(1), h.joinAnswer(first).Generation)
}

// A synced generation is stored with its members, and an empty group's
// stored generation deleted; a new coordinator restores the stored one:
// stable, its members heartbeating and committing in their generation
// with their sessions running from the restore, and those that do not
// heartbeat lapse.
func TestClassicGenerationStoredAndRestored(t *testing.T) {
	h := newClassicHarness(t)
	a, wa := h.joinNew("a", "range")
	require.Equal(t, int32(1), h.joinAnswer(wa).Generation)
	require.Empty(t, h.stores, "nothing to store before the sync")
	h.sync(&messages.SyncGroupRequest{GroupId: "g", MemberId: a, Generation: 1, Assignments: assignment(map[string]string{a: "A"})})
	require.Len(t, h.stores, 1)
	gen := h.stores[0]
	require.NoError(t, validateClassicGeneration(gen))
	require.Equal(t, int32(1), gen.Generation)
	require.Equal(t, a, gen.Leader)
	require.Len(t, gen.Members, 1)
	require.Equal(t, []byte("A"), gen.Members[0].Assignment)

	moved := newClassicHarness(t)
	moved.g.restore(gen)
	moved.apply()
	require.Equal(t, groupStable, moved.g.state)
	require.Contains(t, moved.timers, sessionTimer(a), "its session runs from the restore")
	require.Equal(t, messages.ErrorCode_NONE, moved.heartbeat(a, 1))
	require.Equal(t, messages.ErrorCode_ILLEGAL_GENERATION, moved.heartbeat(a, 0))
	mem, code, _ := moved.g.validateCommit(a, "", 1)
	require.Equal(t, messages.ErrorCode_NONE, code)
	require.Equal(t, a, mem.id)
	sw, resp := moved.sync(&messages.SyncGroupRequest{GroupId: "g", MemberId: a, Generation: 1})
	require.Nil(t, moved.answers[sw])
	require.Equal(t, "A", string(resp.Assignment), "a stable group's sync hands out the stored assignment")

	// Its session lapses: the group is empty, and the stored generation
	// goes.
	moved.expire(sessionTimer(a))
	require.Equal(t, groupEmpty, moved.g.state)
	require.Equal(t, int32(2), moved.g.generation)
	require.Equal(t, []*messages.ClassicGeneration{nil}, moved.stores)
}
