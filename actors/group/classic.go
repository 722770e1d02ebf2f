package group

// Kafka's classic group protocol, the one Kafka's consumers speak through
// the Kafka listener, as Kafka's group coordinator runs it (ClassicGroup
// and GroupMetadataManager).
//
// The members assign, not the group. A member joins with a protocol type
// ("consumer" for consumers) and the protocols it supports, each an
// assignor's name with metadata opaque to the group (for consumers, the
// topics it subscribes to). The group waits for every member to join
// (PreparingRebalance), up to the longest rebalance timeout, and drops the
// dynamic members that did not; it then starts the next generation
// (CompletingRebalance): it picks a protocol every member supports (each
// member votes for the first of its own list that all support, the most
// votes win), elects a leader (the first member to join, or one that
// joined again) and answers each join, the leader's with every member's
// metadata for that protocol. The leader computes the assignment and sends
// it in its SyncGroup; the group hands each member its part in the answer
// to the member's own SyncGroup, and is Stable. A member that joins anew,
// changes its protocols, leaves, or lets its session lapse starts the next
// rebalance; a member still to sync when the leader's rebalance timeout is
// up is dropped, and so starts one too.
//
// Member ids: the group gives them. From JoinGroup v4 a dynamic member's
// first join is answered MEMBER_ID_REQUIRED with its id (KIP-394), and
// the group counts it as pending: a rebalance waits for it to join again
// until its session timeout. A static member (with a group instance id,
// KIP-345) joins at once, and when it joins again without its member id
// (a restart) it gets a new one and takes the place of the old, which is
// fenced (FENCED_INSTANCE_ID); in a stable group whose protocol it does
// not change that causes no rebalance, and a static leader is told to
// keep the assignment it has (KIP-814).
//
// Heartbeats keep a member's session: answered REBALANCE_IN_PROGRESS
// while the group prepares a rebalance (join again), ILLEGAL_GENERATION
// for a generation not the group's, UNKNOWN_MEMBER_ID for a member not in
// it. A member waiting for the answer to its join or sync is alive: its
// session runs again once it is answered.
//
// classicGroup is a pure state machine, in etcd-raft's manner: no actor,
// no timer, no clock. Requests come in as calls. One that cannot be
// answered at once (a join until the generation settles, a sync until the
// leader's comes) waits under a waiter, a number its driver chose, and is
// answered later through the effects the machine leaves: replies to
// waiters, timers to start or stop, and lines for the log. Time comes in
// as timers that expire. The group actor drives it and sends what it says
// (group.go). Not safe for concurrent use: its actor serialises access.

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/depot-dev/depot/actors/assign"
	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/messages"
)

// ConsumerProtocolType is the protocol type of Kafka's consumers, whose
// protocol metadata names the topics they subscribe to and whose
// assignments name partitions: the listener reads both, so that a
// "consumer" group is described with its members' topics and partitions.
const ConsumerProtocolType = "consumer"

// waiter identifies a request that waits for its answer; 0 is none.
type waiter uint64

// classicTimerKind says what a timer of a classic group bounds.
type classicTimerKind int

const (
	// timerSession is a member's session, or a pending member's.
	timerSession classicTimerKind = iota
	// timerJoin is the rebalance timeout of the join phase.
	timerJoin
	// timerSync is the rebalance timeout of the sync phase.
	timerSync
	// timerInitialJoin is the wait of an empty group's first rebalance
	// for more members (group.initial.rebalance.delay.ms).
	timerInitialJoin
)

// classicTimer names one timer of a classic group.
type classicTimer struct {
	kind   classicTimerKind
	member string // of a timerSession
}

// classicReply answers a waiting request.
type classicReply struct {
	to  waiter
	msg any // *messages.JoinGroupResponse or *messages.SyncGroupResponse
}

// classicTimerSet starts a timer to expire after after, replacing the one
// running under the same name, or stops it when after is 0.
type classicTimerSet struct {
	timer classicTimer
	after time.Duration
}

// classicEffects are what the machine leaves its driver to do, in order.
type classicEffects struct {
	replies []classicReply
	timers  []classicTimerSet
	// notes are lines for the log, at Info: members joining, leaving and
	// lapsing, generations.
	notes []string
	// store says that the group's generation is to be stored, as
	// generation (nil: the group is empty, and its stored generation is
	// to be deleted), so that the next coordinator of the group takes it
	// over; only the latest counts.
	store      bool
	generation *messages.ClassicGeneration
}

// classicMember is one member of a classic group.
type classicMember struct {
	id, instanceID, clientID, clientHost string
	protocols                            []*messages.GroupProtocol
	// topics are those its metadata subscribes to, in a "consumer" group.
	topics                           []string
	sessionTimeout, rebalanceTimeout time.Duration
	// assignment is the leader's for it; partitions are read from it in a
	// "consumer" group.
	assignment []byte
	partitions []assign.TopicPartition
	// joining and syncing wait for the answer to its JoinGroup and its
	// SyncGroup.
	joining, syncing waiter
}

// classicJoinSettings are a classic join's validated settings.
type classicJoinSettings struct {
	session, rebalance time.Duration
	topics             []string
}

// validateClassicJoin checks a classic join on its own: a session timeout
// within bounds (INVALID_SESSION_TIMEOUT), a protocol type and at least
// one protocol (INCONSISTENT_GROUP_PROTOCOL). A rebalance timeout of 0 or
// less is the session timeout, as for JoinGroup v0. Topics that are not
// valid names are left out: they only describe the member.
func validateClassicJoin(m *messages.JoinGroupRequest) (classicJoinSettings, messages.ErrorCode, string) {
	var s classicJoinSettings
	s.session = time.Duration(m.SessionTimeoutMs) * time.Millisecond
	if s.session < MinSessionTimeout || s.session > MaxSessionTimeout {
		return s, messages.ErrorCode_INVALID_SESSION_TIMEOUT,
			fmt.Sprintf("session timeout %d ms: must be between %d and %d ms", m.SessionTimeoutMs, MinSessionTimeout.Milliseconds(), MaxSessionTimeout.Milliseconds())
	}
	s.rebalance = time.Duration(m.RebalanceTimeoutMs) * time.Millisecond
	if m.RebalanceTimeoutMs <= 0 {
		s.rebalance = s.session
	}
	if m.ProtocolType == "" {
		return s, messages.ErrorCode_INCONSISTENT_GROUP_PROTOCOL, "the join names no protocol type"
	}
	if len(m.Protocols) == 0 {
		return s, messages.ErrorCode_INCONSISTENT_GROUP_PROTOCOL, "the join names no protocol"
	}
	for _, p := range m.Protocols {
		if p.GetName() == "" {
			return s, messages.ErrorCode_INCONSISTENT_GROUP_PROTOCOL, "the join names a protocol without a name"
		}
	}
	for _, t := range m.Topics {
		if topic.ValidateName(t) == nil && !slices.Contains(s.topics, t) {
			s.topics = append(s.topics, t)
		}
	}
	sort.Strings(s.topics)
	return s, messages.ErrorCode_NONE, ""
}

// classicGroup is the state of a classic group; see the notes above.
type classicGroup struct {
	id         string
	state      groupState
	generation int32
	// protocolType is the first member's, kept while the group has
	// members; protocol is the one chosen for the generation.
	protocolType string
	protocol     string
	leader       string
	members      map[string]*classicMember
	// pending are the member ids answered MEMBER_ID_REQUIRED and not yet
	// joined again.
	pending map[string]bool
	// static maps group instance ids to member ids.
	static map[string]string
	// awaitingSync are the members of the generation that have not synced.
	awaitingSync map[string]bool
	// initialDelay is group.initial.rebalance.delay.ms: how long the
	// rebalance of an empty group waits for more members before it
	// completes, again after each member that joins meanwhile, up to the
	// rebalance timeout, so that consumers started together make one
	// rebalance rather than one each. 0: none.
	initialDelay time.Duration
	// initialJoin is set while such a wait runs; memberAdded says that a
	// member joined during its current delay, and initialLeft is how much
	// of the rebalance timeout is left to extend it by.
	initialJoin bool
	memberAdded bool
	initialLeft time.Duration
	newMemberID func(prefix string) string
	effects     classicEffects
}

// newClassicGroup returns an empty classic group that names new members
// with newMemberID, given the client id (or group instance id) to start
// the name with; initialDelay is group.initial.rebalance.delay.ms (see
// classicGroup.initialDelay).
func newClassicGroup(id string, initialDelay time.Duration, newMemberID func(prefix string) string) *classicGroup {
	return &classicGroup{
		id:           id,
		members:      map[string]*classicMember{},
		pending:      map[string]bool{},
		static:       map[string]string{},
		awaitingSync: map[string]bool{},
		initialDelay: initialDelay,
		newMemberID:  newMemberID,
	}
}

// active reports whether the group has members, pending ones included.
func (g *classicGroup) active() bool { return len(g.members) > 0 || len(g.pending) > 0 }

// drain returns the effects left since the last drain.
func (g *classicGroup) drain() classicEffects {
	e := g.effects
	g.effects = classicEffects{}
	return e
}

func (g *classicGroup) reply(to waiter, msg any) {
	if to != 0 {
		g.effects.replies = append(g.effects.replies, classicReply{to: to, msg: msg})
	}
}

func (g *classicGroup) setTimer(t classicTimer, after time.Duration) {
	g.effects.timers = append(g.effects.timers, classicTimerSet{timer: t, after: max(after, time.Millisecond)})
}

func (g *classicGroup) stopTimer(t classicTimer) {
	g.effects.timers = append(g.effects.timers, classicTimerSet{timer: t})
}

func (g *classicGroup) note(format string, args ...any) {
	g.effects.notes = append(g.effects.notes, fmt.Sprintf(format, args...))
}

func sessionTimer(member string) classicTimer {
	return classicTimer{kind: timerSession, member: member}
}

// sortedMembers are the members by member id.
func (g *classicGroup) sortedMembers() []*classicMember {
	out := make([]*classicMember, 0, len(g.members))
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		out = append(out, g.members[id])
	}
	return out
}

// touch restarts the session of a member that waits for no answer.
func (g *classicGroup) touch(mem *classicMember) {
	if mem.joining == 0 && mem.syncing == 0 {
		g.setTimer(sessionTimer(mem.id), mem.sessionTimeout)
	}
}

// supports reports whether a member of protocol type protocolType with
// protocols may join: into a group without members, any; otherwise one of
// the group's type with a protocol every member supports.
func (g *classicGroup) supports(protocolType string, protocols []*messages.GroupProtocol) (bool, string) {
	if len(g.members) == 0 {
		return true, ""
	}
	if protocolType != g.protocolType {
		return false, fmt.Sprintf("protocol type %q is not the group's %q", protocolType, g.protocolType)
	}
	for _, p := range protocols {
		common := true
		for _, mem := range g.members {
			if !mem.supports(p.GetName()) {
				common = false
				break
			}
		}
		if common {
			return true, ""
		}
	}
	return false, fmt.Sprintf("protocols %q: the group's members have none of them in common (they support %q)", protocolNames(protocols), g.commonProtocols())
}

// commonProtocols are the protocols every member supports.
func (g *classicGroup) commonProtocols() []string {
	var out []string
	for i, mem := range g.sortedMembers() {
		if i == 0 {
			out = protocolNames(mem.protocols)
			continue
		}
		out = slices.DeleteFunc(out, func(name string) bool { return !mem.supports(name) })
	}
	return out
}

func (mem *classicMember) supports(name string) bool {
	return slices.ContainsFunc(mem.protocols, func(p *messages.GroupProtocol) bool { return p.GetName() == name })
}

func protocolNames(protocols []*messages.GroupProtocol) []string {
	out := make([]string, len(protocols))
	for i, p := range protocols {
		out[i] = p.GetName()
	}
	return out
}

// sameProtocols reports whether protocols are those the member joined
// with, metadata included, in the same order.
func (mem *classicMember) sameProtocols(protocols []*messages.GroupProtocol) bool {
	return slices.EqualFunc(mem.protocols, protocols, func(a, b *messages.GroupProtocol) bool {
		return a.GetName() == b.GetName() && string(a.GetMetadata()) == string(b.GetMetadata())
	})
}

// metadata is the member's metadata for protocol, nil when it has none.
func (mem *classicMember) metadata(protocol string) []byte {
	for _, p := range mem.protocols {
		if p.GetName() == protocol {
			return p.GetMetadata()
		}
	}
	return nil
}

// update takes a join's protocols and settings.
func (mem *classicMember) update(m *messages.JoinGroupRequest, s classicJoinSettings) {
	mem.protocols = slices.Clone(m.Protocols)
	mem.topics = s.topics
	mem.sessionTimeout, mem.rebalanceTimeout = s.session, s.rebalance
	mem.clientID, mem.clientHost = m.ClientId, m.ClientHost
}

// selectProtocol picks the generation's protocol (assign.Choose: the most
// votes among those every member supports), "" without members.
func (g *classicGroup) selectProtocol() string {
	lists := make([][]string, 0, len(g.members))
	for _, mem := range g.sortedMembers() {
		lists = append(lists, protocolNames(mem.protocols))
	}
	name, err := assign.Choose(lists)
	if err != nil {
		return ""
	}
	return name
}

// maxRebalanceTimeout is the longest rebalance timeout of the members.
func (g *classicGroup) maxRebalanceTimeout() time.Duration {
	var d time.Duration
	for _, mem := range g.members {
		d = max(d, mem.rebalanceTimeout)
	}
	return d
}

// checkMember finds the member a request names, as Kafka's validateMember
// does: by its group instance id when given (UNKNOWN_MEMBER_ID for an
// instance the group does not know, FENCED_INSTANCE_ID for a member id
// not the instance's), else by member id (UNKNOWN_MEMBER_ID).
func (g *classicGroup) checkMember(memberID, instanceID string) (*classicMember, messages.ErrorCode, string) {
	if instanceID != "" {
		current, ok := g.static[instanceID]
		switch {
		case !ok:
			return nil, messages.ErrorCode_UNKNOWN_MEMBER_ID, fmt.Sprintf("group instance %q is not in group %q", instanceID, g.id)
		case current != memberID:
			return nil, messages.ErrorCode_FENCED_INSTANCE_ID, fmt.Sprintf("member %q of group instance %q was replaced by %q", memberID, instanceID, current)
		}
	}
	mem, ok := g.members[memberID]
	if !ok {
		return nil, messages.ErrorCode_UNKNOWN_MEMBER_ID, fmt.Sprintf("member %q is not in group %q", memberID, g.id)
	}
	return mem, messages.ErrorCode_NONE, ""
}

// joinError is a join's answer with an error.
func joinError(memberID string, code messages.ErrorCode, text string) *messages.JoinGroupResponse {
	return &messages.JoinGroupResponse{Error: code, ErrorMessage: text, Generation: -1, MemberId: memberID}
}

// join takes a JoinGroupRequest that validateClassicJoin passed, with its
// settings; w waits for its answer. It returns the answer, or nil when the
// join is answered through the effects (at once or later).
func (g *classicGroup) join(m *messages.JoinGroupRequest, s classicJoinSettings, w waiter) *messages.JoinGroupResponse {
	if m.MemberId == "" {
		if ok, text := g.supports(m.ProtocolType, m.Protocols); !ok {
			return joinError("", messages.ErrorCode_INCONSISTENT_GROUP_PROTOCOL, text)
		}
		if m.GroupInstanceId != "" {
			if old := g.members[g.static[m.GroupInstanceId]]; old != nil {
				return g.rejoinStatic(old, m, s, w)
			}
			return g.add(g.newMember(g.newMemberID(m.GroupInstanceId), m, s), m.ProtocolType, w)
		}
		prefix := m.ClientId
		if prefix == "" {
			prefix = "member"
		}
		id := g.newMemberID(prefix)
		if m.RequireKnownMemberId {
			g.pending[id] = true
			g.setTimer(sessionTimer(id), s.session)
			return joinError(id, messages.ErrorCode_MEMBER_ID_REQUIRED, "join again with the member id given")
		}
		return g.add(g.newMember(id, m, s), m.ProtocolType, w)
	}
	if g.pending[m.MemberId] {
		if ok, text := g.supports(m.ProtocolType, m.Protocols); !ok {
			return joinError(m.MemberId, messages.ErrorCode_INCONSISTENT_GROUP_PROTOCOL, text)
		}
		delete(g.pending, m.MemberId)
		g.stopTimer(sessionTimer(m.MemberId))
		return g.add(g.newMember(m.MemberId, m, s), m.ProtocolType, w)
	}
	mem, code, text := g.checkMember(m.MemberId, m.GroupInstanceId)
	if code != messages.ErrorCode_NONE {
		return joinError(m.MemberId, code, text)
	}
	if ok, text := g.supports(m.ProtocolType, m.Protocols); !ok {
		return joinError(m.MemberId, messages.ErrorCode_INCONSISTENT_GROUP_PROTOCOL, text)
	}
	switch g.state {
	case groupCompletingRebalance:
		if mem.sameProtocols(m.Protocols) {
			g.touch(mem)
			return g.joinAnswer(mem)
		}
	case groupStable:
		if mem.id != g.leader && mem.sameProtocols(m.Protocols) {
			g.touch(mem)
			return g.joinAnswer(mem)
		}
	}
	g.updateAndRebalance(mem, m, s, w)
	return nil
}

func (g *classicGroup) newMember(id string, m *messages.JoinGroupRequest, s classicJoinSettings) *classicMember {
	mem := &classicMember{id: id, instanceID: m.GroupInstanceId}
	mem.update(m, s)
	return mem
}

// add puts a new member in the group, waiting in w for its join's
// answer, and rebalances.
func (g *classicGroup) add(mem *classicMember, protocolType string, w waiter) *messages.JoinGroupResponse {
	if len(g.members) == 0 {
		g.protocolType = protocolType
	}
	g.members[mem.id] = mem
	if mem.instanceID != "" {
		g.static[mem.instanceID] = mem.id
	}
	if g.leader == "" {
		g.leader = mem.id
	}
	mem.joining = w
	g.memberAdded = g.initialJoin
	g.note("member %s joined (client %q, host %s, protocols %q)", mem.id, mem.clientID, mem.clientHost, protocolNames(mem.protocols))
	g.rebalance(fmt.Sprintf("member %s joined", mem.id))
	return nil
}

// updateAndRebalance takes a known member's new join and rebalances.
func (g *classicGroup) updateAndRebalance(mem *classicMember, m *messages.JoinGroupRequest, s classicJoinSettings, w waiter) {
	if mem.joining != 0 && mem.joining != w {
		g.reply(mem.joining, joinError(mem.id, messages.ErrorCode_REBALANCE_IN_PROGRESS, "superseded by a newer join of the same member"))
	}
	changed := !mem.sameProtocols(m.Protocols)
	mem.update(m, s)
	mem.joining = w
	g.stopTimer(sessionTimer(mem.id))
	reason := fmt.Sprintf("member %s joined again", mem.id)
	if changed {
		reason = fmt.Sprintf("member %s joined again with other protocols", mem.id)
	}
	g.rebalance(reason)
}

// rebalance prepares a rebalance, or, during one, completes the join
// phase if every member has joined.
func (g *classicGroup) rebalance(reason string) {
	if g.state == groupPreparingRebalance {
		g.tryCompleteJoin()
		return
	}
	g.prepareRebalance(reason)
}

// rejoinStatic takes the join of a static member that joined again
// without its member id: it gets a new one and takes the old one's place,
// fencing it.
func (g *classicGroup) rejoinStatic(old *classicMember, m *messages.JoinGroupRequest, s classicJoinSettings, w waiter) *messages.JoinGroupResponse {
	oldID, newID := old.id, g.newMemberID(m.GroupInstanceId)
	fenced := fmt.Sprintf("group instance %q joined again as member %s", m.GroupInstanceId, newID)
	if old.joining != 0 {
		g.reply(old.joining, joinError(oldID, messages.ErrorCode_FENCED_INSTANCE_ID, fenced))
		old.joining = 0
	}
	if old.syncing != 0 {
		g.reply(old.syncing, &messages.SyncGroupResponse{Error: messages.ErrorCode_FENCED_INSTANCE_ID, ErrorMessage: fenced})
		old.syncing = 0
	}
	g.stopTimer(sessionTimer(oldID))
	delete(g.members, oldID)
	old.id = newID
	g.members[newID] = old
	g.static[m.GroupInstanceId] = newID
	if g.awaitingSync[oldID] {
		delete(g.awaitingSync, oldID)
		g.awaitingSync[newID] = true
	}
	leaderBefore := g.leader
	if g.leader == oldID {
		g.leader = newID
	}
	old.update(m, s)
	g.note("static member %s of group instance %q joined again as %s", oldID, m.GroupInstanceId, newID)
	switch g.state {
	case groupStable:
		if g.selectProtocol() == g.protocol {
			// Nothing changes: no rebalance. The answer names the leader
			// as it was, so that a static leader back under a new id does
			// not take itself for the leader and compute an assignment
			// that a stable group would not hand out; it is told to keep
			// the one it has.
			g.touch(old)
			g.storeGeneration()
			resp := g.joinAnswer(old)
			resp.Leader = leaderBefore
			resp.SkipAssignment = g.leader == newID
			return resp
		}
		old.joining = w
		g.prepareRebalance(fmt.Sprintf("static member %s joined again with other protocols", newID))
	case groupCompletingRebalance:
		// The leader may be assigning to the old member id.
		old.joining = w
		g.prepareRebalance(fmt.Sprintf("static member %s joined again during the sync", newID))
	default:
		old.joining = w
		g.rebalance(fmt.Sprintf("static member %s joined again", newID))
	}
	return nil
}

// prepareRebalance starts a rebalance: every member is to join again
// within the longest rebalance timeout. Syncs waiting for the leader's
// assignment are answered REBALANCE_IN_PROGRESS.
func (g *classicGroup) prepareRebalance(reason string) {
	if g.state == groupCompletingRebalance {
		for _, mem := range g.sortedMembers() {
			mem.assignment, mem.partitions = nil, nil
			if mem.syncing != 0 {
				g.reply(mem.syncing, &messages.SyncGroupResponse{Error: messages.ErrorCode_REBALANCE_IN_PROGRESS, ErrorMessage: "the group is rebalancing again: join again"})
				mem.syncing = 0
				g.touch(mem)
			}
		}
	}
	clear(g.awaitingSync)
	g.stopTimer(classicTimer{kind: timerSync})
	wasEmpty := g.state == groupEmpty
	g.state = groupPreparingRebalance
	g.note("preparing rebalance of generation %d: %s", g.generation, reason)
	if wasEmpty && g.initialDelay > 0 {
		// As Kafka's InitialDelayedJoin: the first delay is
		// initialDelay, and the rest of the rebalance timeout is left
		// for the delays that members joining meanwhile add.
		g.initialJoin, g.memberAdded = true, false
		g.initialLeft = max(g.maxRebalanceTimeout()-g.initialDelay, 0)
		g.setTimer(classicTimer{kind: timerInitialJoin}, g.initialDelay)
		return
	}
	g.setTimer(classicTimer{kind: timerJoin}, g.maxRebalanceTimeout())
	g.tryCompleteJoin()
}

// tryCompleteJoin completes the join phase once every member, pending ones
// included, has joined, unless an empty group's first rebalance waits
// for more (initialDelay).
func (g *classicGroup) tryCompleteJoin() {
	if g.state != groupPreparingRebalance || len(g.pending) > 0 || g.initialJoin {
		return
	}
	for _, mem := range g.members {
		if mem.joining == 0 {
			return
		}
	}
	g.completeJoin()
}

// completeJoin ends the join phase: the dynamic members that did not join
// again are dropped, and the next generation starts, answering every join.
func (g *classicGroup) completeJoin() {
	if g.state != groupPreparingRebalance {
		return
	}
	g.stopTimer(classicTimer{kind: timerJoin})
	g.stopTimer(classicTimer{kind: timerInitialJoin})
	g.initialJoin = false
	for _, mem := range g.sortedMembers() {
		if mem.joining == 0 && mem.instanceID == "" {
			g.note("member %s did not join again within the rebalance timeout; removed", mem.id)
			g.remove(mem, "it did not join again in time")
		}
	}
	if len(g.members) == 0 {
		g.generation++
		g.state, g.protocol, g.leader = groupEmpty, "", ""
		g.note("generation %d: the group is empty", g.generation)
		g.storeGeneration()
		return
	}
	if leader := g.members[g.leader]; leader == nil || leader.joining == 0 {
		g.leader = ""
		for _, mem := range g.sortedMembers() {
			if mem.joining != 0 {
				g.leader = mem.id
				break
			}
		}
		if g.leader == "" {
			// Only static members are left and none joined again: wait
			// for them, or for their sessions to lapse.
			g.setTimer(classicTimer{kind: timerJoin}, g.maxRebalanceTimeout())
			return
		}
	}
	g.generation++
	g.protocol = g.selectProtocol()
	g.state = groupCompletingRebalance
	for _, mem := range g.sortedMembers() {
		g.awaitingSync[mem.id] = true
		if mem.joining != 0 {
			g.reply(mem.joining, g.joinAnswer(mem))
			mem.joining = 0
		}
		g.touch(mem)
	}
	g.setTimer(classicTimer{kind: timerSync}, g.maxRebalanceTimeout())
	g.note("generation %d: protocol %q, leader %s, %d members", g.generation, g.protocol, g.leader, len(g.members))
}

// joinAnswer is a member's answer to its join in the current generation:
// the leader's lists every member with its metadata for the protocol.
func (g *classicGroup) joinAnswer(mem *classicMember) *messages.JoinGroupResponse {
	resp := &messages.JoinGroupResponse{
		Generation: g.generation, MemberId: mem.id, Leader: g.leader,
		ProtocolType: g.protocolType, ProtocolName: g.protocol,
	}
	if mem.id == g.leader {
		for _, other := range g.sortedMembers() {
			resp.Members = append(resp.Members, &messages.JoinGroupMember{
				MemberId: other.id, GroupInstanceId: other.instanceID, Metadata: other.metadata(g.protocol),
			})
		}
	}
	return resp
}

// remove drops a member, answering what it waits for UNKNOWN_MEMBER_ID.
// It does not rebalance (see memberGone).
func (g *classicGroup) remove(mem *classicMember, why string) {
	text := fmt.Sprintf("member %s was removed from group %q: %s", mem.id, g.id, why)
	if mem.joining != 0 {
		g.reply(mem.joining, joinError(mem.id, messages.ErrorCode_UNKNOWN_MEMBER_ID, text))
		mem.joining = 0
	}
	if mem.syncing != 0 {
		g.reply(mem.syncing, &messages.SyncGroupResponse{Error: messages.ErrorCode_UNKNOWN_MEMBER_ID, ErrorMessage: text})
		mem.syncing = 0
	}
	g.stopTimer(sessionTimer(mem.id))
	delete(g.members, mem.id)
	delete(g.awaitingSync, mem.id)
	if mem.instanceID != "" && g.static[mem.instanceID] == mem.id {
		delete(g.static, mem.instanceID)
	}
	if g.leader == mem.id {
		g.leader = ""
		if ids := slices.Sorted(maps.Keys(g.members)); len(ids) > 0 {
			g.leader = ids[0]
		}
	}
}

// memberGone rebalances after a member left or lapsed.
func (g *classicGroup) memberGone(reason string) {
	switch g.state {
	case groupStable, groupCompletingRebalance:
		g.prepareRebalance(reason)
	case groupPreparingRebalance:
		g.tryCompleteJoin()
	}
}

// sync takes a SyncGroupRequest; w waits for its answer. It returns the
// answer, or nil when the sync is answered through the effects.
func (g *classicGroup) sync(m *messages.SyncGroupRequest, w waiter) *messages.SyncGroupResponse {
	fail := func(code messages.ErrorCode, text string) *messages.SyncGroupResponse {
		return &messages.SyncGroupResponse{Error: code, ErrorMessage: text}
	}
	mem, code, text := g.checkMember(m.MemberId, m.GroupInstanceId)
	switch {
	case code != messages.ErrorCode_NONE:
		return fail(code, text)
	case m.Generation != g.generation:
		return fail(messages.ErrorCode_ILLEGAL_GENERATION, fmt.Sprintf("generation %d is not the group's generation %d", m.Generation, g.generation))
	case m.ProtocolType != "" && m.ProtocolType != g.protocolType:
		return fail(messages.ErrorCode_INCONSISTENT_GROUP_PROTOCOL, fmt.Sprintf("protocol type %q is not the group's %q", m.ProtocolType, g.protocolType))
	case m.ProtocolName != "" && m.ProtocolName != g.protocol:
		return fail(messages.ErrorCode_INCONSISTENT_GROUP_PROTOCOL, fmt.Sprintf("protocol %q is not the generation's %q", m.ProtocolName, g.protocol))
	}
	switch g.state {
	case groupPreparingRebalance:
		return fail(messages.ErrorCode_REBALANCE_IN_PROGRESS, "the group is rebalancing: join again")
	case groupCompletingRebalance:
		if mem.syncing != 0 && mem.syncing != w {
			g.reply(mem.syncing, fail(messages.ErrorCode_REBALANCE_IN_PROGRESS, "superseded by a newer sync of the same member"))
		}
		mem.syncing = w
		g.synced(mem.id)
		if mem.id == g.leader {
			g.assign(m.Assignments)
		}
		return nil
	case groupStable:
		g.synced(mem.id)
		g.touch(mem)
		return &messages.SyncGroupResponse{ProtocolType: g.protocolType, ProtocolName: g.protocol, Assignment: mem.assignment}
	}
	return fail(messages.ErrorCode_UNKNOWN_MEMBER_ID, fmt.Sprintf("member %q is not in group %q", m.MemberId, g.id))
}

// synced takes a member off those the generation waits to sync.
func (g *classicGroup) synced(member string) {
	delete(g.awaitingSync, member)
	if len(g.awaitingSync) == 0 {
		g.stopTimer(classicTimer{kind: timerSync})
	}
}

// assign takes the leader's assignment: the group is Stable, and every
// waiting sync gets its member's part (nothing for a member the leader
// left out; what it names of others is ignored).
func (g *classicGroup) assign(assignments []*messages.SyncGroupAssignment) {
	for _, mem := range g.members {
		mem.assignment, mem.partitions = nil, nil
	}
	for _, a := range assignments {
		mem := g.members[a.GetMemberId()]
		if mem == nil {
			continue
		}
		mem.assignment = a.GetAssignment()
		if g.protocolType == ConsumerProtocolType {
			mem.partitions = fromMessagePartitions(a.GetPartitions())
		}
	}
	g.state = groupStable
	g.storeGeneration()
	for _, mem := range g.sortedMembers() {
		if mem.syncing != 0 {
			g.reply(mem.syncing, &messages.SyncGroupResponse{ProtocolType: g.protocolType, ProtocolName: g.protocol, Assignment: mem.assignment})
			mem.syncing = 0
			g.touch(mem)
		}
	}
	g.note("generation %d is stable", g.generation)
}

// heartbeat takes a HeartbeatRequest.
func (g *classicGroup) heartbeat(m *messages.HeartbeatRequest) *messages.HeartbeatResponse {
	mem, code, text := g.checkMember(m.MemberId, m.GroupInstanceId)
	switch {
	case code != messages.ErrorCode_NONE:
		return &messages.HeartbeatResponse{Error: code, ErrorMessage: text}
	case m.Generation != g.generation:
		return &messages.HeartbeatResponse{Error: messages.ErrorCode_ILLEGAL_GENERATION,
			ErrorMessage: fmt.Sprintf("generation %d is not the group's generation %d", m.Generation, g.generation)}
	}
	g.touch(mem)
	if g.state == groupPreparingRebalance {
		return &messages.HeartbeatResponse{Error: messages.ErrorCode_REBALANCE_IN_PROGRESS, ErrorMessage: "the group is rebalancing: join again"}
	}
	return &messages.HeartbeatResponse{}
}

// leave takes the members of a LeaveGroupRequest, answering each: by
// group instance id (UNKNOWN_MEMBER_ID for one the group does not know,
// FENCED_INSTANCE_ID when the member id given is not the instance's) or
// member id (UNKNOWN_MEMBER_ID). Each member that leaves starts a
// rebalance, or lets the one under way complete.
func (g *classicGroup) leave(leaving []*messages.LeavingMember) []*messages.LeftMember {
	out := make([]*messages.LeftMember, 0, len(leaving))
	for _, l := range leaving {
		r := &messages.LeftMember{MemberId: l.GetMemberId(), GroupInstanceId: l.GetGroupInstanceId()}
		out = append(out, r)
		id := l.GetMemberId()
		if instance := l.GetGroupInstanceId(); instance != "" {
			current, ok := g.static[instance]
			switch {
			case !ok:
				r.Error, r.ErrorMessage = messages.ErrorCode_UNKNOWN_MEMBER_ID, fmt.Sprintf("group instance %q is not in group %q", instance, g.id)
				continue
			case id != "" && id != current:
				r.Error, r.ErrorMessage = messages.ErrorCode_FENCED_INSTANCE_ID, fmt.Sprintf("member %q of group instance %q was replaced by %q", id, instance, current)
				continue
			}
			id, r.MemberId = current, current
		}
		if g.pending[id] {
			delete(g.pending, id)
			g.stopTimer(sessionTimer(id))
			g.tryCompleteJoin()
			continue
		}
		mem := g.members[id]
		if mem == nil {
			r.Error, r.ErrorMessage = messages.ErrorCode_UNKNOWN_MEMBER_ID, fmt.Sprintf("member %q is not in group %q", id, g.id)
			continue
		}
		why := "it left"
		if reason := l.GetReason(); reason != "" {
			why = "it left: " + reason
		}
		g.note("member %s %s", id, strings.TrimPrefix(why, "it "))
		g.remove(mem, why)
		g.memberGone(fmt.Sprintf("member %s left", id))
	}
	return out
}

// expire takes a timer that expired.
func (g *classicGroup) expire(t classicTimer) {
	switch t.kind {
	case timerSession:
		if g.pending[t.member] {
			delete(g.pending, t.member)
			g.note("pending member %s did not join again within its session timeout", t.member)
			g.tryCompleteJoin()
			return
		}
		mem := g.members[t.member]
		if mem == nil || mem.joining != 0 || mem.syncing != 0 {
			return
		}
		g.note("member %s session expired after %s; removed", mem.id, mem.sessionTimeout)
		g.remove(mem, "its session expired")
		g.memberGone(fmt.Sprintf("member %s session expired", t.member))
	case timerJoin:
		g.completeJoin()
	case timerInitialJoin:
		if !g.initialJoin {
			return
		}
		if g.memberAdded && g.initialLeft > 0 {
			delay := min(g.initialDelay, g.initialLeft)
			g.initialLeft -= delay
			g.memberAdded = false
			g.setTimer(t, delay)
			return
		}
		g.completeJoin()
	case timerSync:
		if (g.state != groupCompletingRebalance && g.state != groupStable) || len(g.awaitingSync) == 0 {
			return
		}
		for _, id := range slices.Sorted(maps.Keys(g.awaitingSync)) {
			if mem := g.members[id]; mem != nil {
				g.note("member %s did not sync within the rebalance timeout; removed", id)
				g.remove(mem, "it did not sync in time")
			}
		}
		clear(g.awaitingSync)
		g.prepareRebalance("members did not sync in time")
	}
}

// validateCommit checks who commits to the group, as Kafka's
// ClassicGroup.validateOffsetCommit does: anyone while the group has no
// member and the generation is negative (an admin's commit); otherwise a
// member of the current generation, and not while the group completes a
// rebalance. It returns the member, nil for an admin.
func (g *classicGroup) validateCommit(memberID, instanceID string, generation int32) (*classicMember, messages.ErrorCode, string) {
	if generation < 0 && len(g.members) == 0 {
		return nil, messages.ErrorCode_NONE, ""
	}
	if generation < 0 && memberID == "" && instanceID == "" {
		return nil, messages.ErrorCode_UNKNOWN_MEMBER_ID,
			fmt.Sprintf("group %q has %s: only they commit", g.id, activeMembers(len(g.members)))
	}
	mem, code, text := g.checkMember(memberID, instanceID)
	switch {
	case code != messages.ErrorCode_NONE:
		return nil, code, text
	case generation != g.generation:
		return nil, messages.ErrorCode_ILLEGAL_GENERATION, fmt.Sprintf("generation %d is not the group's generation %d", generation, g.generation)
	case g.state == groupCompletingRebalance:
		return nil, messages.ErrorCode_REBALANCE_IN_PROGRESS, "the group is completing a rebalance"
	}
	return mem, messages.ErrorCode_NONE, ""
}

// subscribedTopics are the topics the members subscribe to, sorted.
func (g *classicGroup) subscribedTopics() []string {
	var out []string
	for _, mem := range g.members {
		for _, t := range mem.topics {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	sort.Strings(out)
	return out
}

// describe fills a description with the group's state and members.
func (g *classicGroup) describe(resp *messages.DescribeGroupResponse) {
	resp.State, resp.Generation = g.state.String(), g.generation
	resp.ProtocolType, resp.Assignor = g.protocolType, g.protocol
	for _, mem := range g.sortedMembers() {
		resp.Members = append(resp.Members, &messages.GroupMember{
			MemberId: mem.id, GroupInstanceId: mem.instanceID, ClientId: mem.clientID, ClientHost: mem.clientHost,
			Topics: slices.Clone(mem.topics), Assignment: toMessagePartitions(mem.partitions),
			ProtocolMetadata: mem.metadata(g.protocol), MemberAssignment: mem.assignment,
		})
	}
}

// storeGeneration asks the driver to store the group's generation: its
// members, or, for an empty group, none (see classicEffects.store).
func (g *classicGroup) storeGeneration() {
	g.effects.store = true
	g.effects.generation = nil
	if len(g.members) == 0 {
		return
	}
	gen := &messages.ClassicGeneration{ProtocolType: g.protocolType, Generation: g.generation, Protocol: g.protocol, Leader: g.leader}
	for _, mem := range g.sortedMembers() {
		gen.Members = append(gen.Members, &messages.ClassicMember{
			MemberId: mem.id, GroupInstanceId: mem.instanceID, ClientId: mem.clientID, ClientHost: mem.clientHost,
			SessionTimeoutMs: int32(mem.sessionTimeout.Milliseconds()), RebalanceTimeoutMs: int32(mem.rebalanceTimeout.Milliseconds()),
			Protocols: mem.protocols, Topics: mem.topics, Assignment: mem.assignment, Partitions: toMessagePartitions(mem.partitions),
		})
	}
	g.effects.generation = gen
}

// restore takes a stored generation (validateClassicGeneration's) into a group
// that has no members yet, as Kafka's coordinator loads a group: it is
// stable, and each member's session starts now, so that members keep
// heartbeating and committing in their generation with the new
// coordinator, and those gone meanwhile lapse.
func (g *classicGroup) restore(gen *messages.ClassicGeneration) {
	if g.active() {
		return
	}
	g.protocolType, g.generation, g.protocol, g.leader = gen.ProtocolType, gen.Generation, gen.Protocol, gen.Leader
	for _, stored := range gen.Members {
		mem := &classicMember{
			id: stored.MemberId, instanceID: stored.GroupInstanceId, clientID: stored.ClientId, clientHost: stored.ClientHost,
			protocols: stored.Protocols, topics: stored.Topics, assignment: stored.Assignment,
			partitions:       fromMessagePartitions(stored.Partitions),
			sessionTimeout:   time.Duration(stored.SessionTimeoutMs) * time.Millisecond,
			rebalanceTimeout: time.Duration(stored.RebalanceTimeoutMs) * time.Millisecond,
		}
		g.members[mem.id] = mem
		if mem.instanceID != "" {
			g.static[mem.instanceID] = mem.id
		}
		g.touch(mem)
	}
	g.state = groupStable
	g.note("generation %d restored: protocol %q, leader %s, %d members", g.generation, g.protocol, g.leader, len(g.members))
}
