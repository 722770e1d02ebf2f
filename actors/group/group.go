package group

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/sirupsen/logrus"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/assign"
	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/messages"
)

// Session and rebalance timeouts of group members, as Kafka's defaults and
// bounds (group.min.session.timeout.ms, group.max.session.timeout.ms).
const (
	DefaultSessionTimeout   = 10 * time.Second
	MinSessionTimeout       = time.Second
	MaxSessionTimeout       = 5 * time.Minute
	DefaultRebalanceTimeout = time.Minute
	// maxStashedRequests bounds the requests a loading group queues; more
	// are answered COORDINATOR_LOAD_IN_PROGRESS.
	maxStashedRequests = 1000
)

// groupState is a group's state, as Kafka's GroupCoordinator names them.
type groupState int

const (
	groupEmpty groupState = iota
	groupPreparingRebalance
	groupCompletingRebalance
	groupStable
	groupDead
)

func (s groupState) String() string {
	return [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}[s]
}

// groupMode is whether a group actor serves its group.
type groupMode int

const (
	// modeLoading: the coordinator has not handed the group its offsets
	// yet; requests wait.
	modeLoading groupMode = iota
	// modeServing: the group's node coordinates it.
	modeServing
	// modeUnloaded: the node no longer leads the group's offsets
	// partition; every request is answered NOT_COORDINATOR until the actor
	// stops.
	modeUnloaded
)

// groupConfig is what a group actor needs.
type groupConfig struct {
	id               string
	metadata         *actor.PID
	metadataInterval time.Duration
	requestTimeout   time.Duration
	// initialRebalanceDelay is group.initial.rebalance.delay.ms for the
	// group's Kafka classic members (see classicGroup.initialDelay).
	initialRebalanceDelay time.Duration
	now                   func() time.Time
	logger                *logrus.Entry
}

// groupMember is one member of a group.
type groupMember struct {
	id               string
	instanceID       string
	clientID         string
	topics           []string // sorted, each once
	assignors        []string
	owned            []assign.TopicPartition
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	assignment       []assign.TopicPartition
	// assignedGeneration is the generation that gave it assignment.
	assignedGeneration int32
	// pending is the JoinGroup waiting for the rebalance to complete.
	pending *actor.PID
	// mustRejoin: the member got the first phase of a cooperative
	// rebalance and has partitions to give up.
	mustRejoin    bool
	cancelSession scheduler.CancelFunc
	sessionSeq    uint64
}

// Timer messages of a group actor.
type (
	sessionExpired struct {
		member string
		seq    uint64
	}
	rebalanceExpired  struct{ seq uint64 }
	groupMetadataTick struct{}
	// classicTimerFired is a timer of the classic group that expired; seq
	// tells it from one that replaced it meanwhile.
	classicTimerFired struct {
		timer classicTimer
		seq   uint64
	}
)

// waitingRequest is a classic group's JoinGroup or SyncGroup (sync) that
// waits for its answer, to be sent to sender.
type waitingRequest struct {
	sender *actor.PID
	sync   bool
}

// runningTimer is a timer of the classic group that runs.
type runningTimer struct {
	seq    uint64
	cancel scheduler.CancelFunc
}

// stashedRequest is a request that arrived while the group was loading.
type stashedRequest struct {
	msg    any
	sender *actor.PID
}

// groupActor runs one consumer group: membership, generations, heartbeats
// and session timeouts, rebalances, and the group's committed offsets
// (written through the coordinator, its parent). A group of Depot's own
// protocol is assigned here; one of Kafka's classic protocol (classic.go)
// by its leader. While the group has members of one protocol, a join of
// the other is refused with INCONSISTENT_GROUP_PROTOCOL; the committed
// offsets are the group's whatever its protocol. Not shared: all access is
// through its mailbox.
type groupActor struct {
	cfg    groupConfig
	logger *logrus.Entry
	timers *scheduler.TimerScheduler
	self   *actor.PID

	mode  groupMode
	stash []stashedRequest
	// writes are the answers of the offset writes in flight, by number:
	// each is called once, with the write's outcome, or with
	// NOT_COORDINATOR when the group is unloaded first.
	writes    map[uint64]func(messages.ErrorCode, string)
	lastWrite uint64

	state      groupState
	generation int32
	assignor   string
	members    map[string]*groupMember
	static     map[string]string // group instance id -> member id
	offsets    map[assign.TopicPartition]*messages.OffsetValue
	// counts are the partition counts the current assignment used.
	counts map[string]int32

	rebalanceSeq     uint64
	cancelRebalance  scheduler.CancelFunc
	stopMetadataTick scheduler.CancelFunc
	checkingCounts   bool
	listed           *messages.GroupListing
	listedExists     bool

	// classic is the group under Kafka's classic protocol; classicKind is
	// set while its members are the latest to have joined, so that an
	// empty group is described as the protocol it last had.
	classic     *classicGroup
	classicKind bool
	// generationStored is set while __consumer_offsets holds a generation
	// of the group, of either protocol (see generations.go).
	generationStored bool
	// generationSeq counts the generation writes asked for: only the
	// latest is written again when it fails.
	generationSeq uint64
	// waiting are the classic group's requests that wait for an answer,
	// by waiter; classicTimers its timers that run.
	waiting       map[waiter]waitingRequest
	lastWaiter    waiter
	classicTimers map[classicTimer]runningTimer
	timerSeq      uint64
}

func newGroupProps(cfg groupConfig) *actor.Props {
	return actors.Props(func() actor.Actor {
		return &groupActor{
			cfg:     cfg,
			logger:  cfg.logger,
			members: map[string]*groupMember{},
			static:  map[string]string{},
			offsets: map[assign.TopicPartition]*messages.OffsetValue{},
			writes:  map[uint64]func(messages.ErrorCode, string){},
			classic: newClassicGroup(cfg.id, cfg.initialRebalanceDelay, newMemberID),
			waiting: map[waiter]waitingRequest{},

			classicTimers: map[classicTimer]runningTimer{},
		}
	}, cfg.logger)
}

func (g *groupActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		g.timers = scheduler.NewTimerScheduler(ctx)
		g.self = ctx.Self()
		g.stopMetadataTick = g.timers.SendRepeatedly(g.cfg.metadataInterval, g.cfg.metadataInterval, ctx.Self(), &groupMetadataTick{})
		ctx.Request(ctx.Parent(), &groupStarted{group: g.cfg.id})
	case *groupLoaded:
		g.onLoaded(ctx, m)
	case *groupUnloaded:
		g.onUnloaded(ctx)
	case *messages.JoinGroupRequest, *messages.SyncGroupRequest, *messages.HeartbeatRequest, *messages.LeaveGroupRequest,
		*messages.OffsetCommitRequest, *messages.OffsetFetchRequest, *messages.OffsetDeleteRequest,
		*messages.DescribeGroupRequest, *messages.DeleteGroupRequest:
		g.onRequest(ctx, m)
	case *classicTimerFired:
		if g.mode == modeServing {
			g.onClassicTimer(ctx, m)
		}
	case *sessionExpired:
		if g.mode == modeServing {
			g.onSessionExpired(ctx, m)
		}
	case *rebalanceExpired:
		if g.mode == modeServing {
			g.onRebalanceExpired(ctx, m)
		}
	case *groupMetadataTick:
		g.onMetadataTick(ctx)
	case *storeGenerationAgain:
		g.onStoreGenerationAgain(ctx, m)
	case *actor.Stopping:
		g.onStopping(ctx)
	case *actor.Stopped, *actor.Restarting:
	case actor.AutoReceiveMessage, actor.SystemMessage:
	default:
		g.logger.WithField("type", fmt.Sprintf("%T", m)).Warn("unhandled message")
	}
}

func (g *groupActor) onLoaded(ctx actor.Context, m *groupLoaded) {
	if g.mode != modeLoading {
		return
	}
	g.mode = modeServing
	for k, v := range m.offsets {
		if k.members {
			g.generationStored = true
			if v.Classic != nil {
				g.classic.restore(v.Classic)
				g.applyClassic(ctx)
			} else {
				g.restoreDepot(v.Depot)
			}
			continue
		}
		g.offsets[assign.TopicPartition{Topic: k.topic, Partition: k.partition}] = v
	}
	stash := g.stash
	g.stash = nil
	for _, s := range stash {
		ctx.RequestWithCustomSender(ctx.Self(), s.msg, s.sender)
	}
	g.report(ctx)
}

// onUnloaded gives the group up: the node no longer leads its offsets
// partition. What the group holds (queued requests, joins waiting for a
// rebalance, writes in flight) is answered NOT_COORDINATOR, so that the
// members find the new coordinator; the group's state is dropped, and the
// actor stops once it has answered what its mailbox holds.
func (g *groupActor) onUnloaded(ctx actor.Context) {
	if g.mode == modeUnloaded {
		return
	}
	g.mode = modeUnloaded
	g.release(ctx, "this node no longer coordinates the group: its offsets partition is led elsewhere")
	g.members, g.static = map[string]*groupMember{}, map[string]string{}
	g.offsets = map[assign.TopicPartition]*messages.OffsetValue{}
	g.state, g.generation, g.assignor, g.counts = groupEmpty, 0, "", nil
	g.classic, g.classicKind = newClassicGroup(g.cfg.id, g.cfg.initialRebalanceDelay, newMemberID), false
	g.logger.Info("group unloaded")
	ctx.Poison(ctx.Self())
}

// release answers everything the group holds with NOT_COORDINATOR and text,
// and stops its timers.
func (g *groupActor) release(ctx actor.Context, text string) {
	if g.stopMetadataTick != nil {
		g.stopMetadataTick()
		g.stopMetadataTick = nil
	}
	if g.cancelRebalance != nil {
		g.cancelRebalance()
		g.cancelRebalance = nil
	}
	for _, s := range g.stash {
		answer(ctx, s.sender, groupErrorResponse(s.msg, messages.ErrorCode_NOT_COORDINATOR, text))
	}
	g.stash = nil
	writes := g.writes
	g.writes = map[uint64]func(messages.ErrorCode, string){}
	for _, seq := range slices.Sorted(maps.Keys(writes)) {
		writes[seq](messages.ErrorCode_NOT_COORDINATOR, text)
	}
	for _, mem := range g.members {
		g.stopSession(mem)
		if mem.pending != nil {
			ctx.Send(mem.pending, &messages.JoinGroupResponse{Error: messages.ErrorCode_NOT_COORDINATOR, Generation: -1, MemberId: mem.id, ErrorMessage: text})
			mem.pending = nil
		}
	}
	waiting := g.waiting
	g.waiting = map[waiter]waitingRequest{}
	for _, w := range slices.Sorted(maps.Keys(waiting)) {
		if waiting[w].sync {
			answer(ctx, waiting[w].sender, &messages.SyncGroupResponse{Error: messages.ErrorCode_NOT_COORDINATOR, ErrorMessage: text})
		} else {
			answer(ctx, waiting[w].sender, joinError("", messages.ErrorCode_NOT_COORDINATOR, text))
		}
	}
	g.stopClassicTimers()
}

// answer sends resp to sender, the sender of a request as it came; a
// request sent without one is answered to nobody.
func answer(ctx actor.Context, sender *actor.PID, resp any) {
	if sender != nil {
		ctx.Send(sender, resp)
	}
}

func (g *groupActor) onRequest(ctx actor.Context, m any) {
	if g.mode == modeUnloaded {
		ctx.Respond(groupErrorResponse(m, messages.ErrorCode_NOT_COORDINATOR, "this node no longer coordinates the group: find its coordinator again"))
		return
	}
	if g.mode == modeLoading {
		if len(g.stash) >= maxStashedRequests {
			ctx.Respond(groupErrorResponse(m, messages.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS, "group offsets are loading"))
			return
		}
		g.stash = append(g.stash, stashedRequest{msg: m, sender: ctx.Sender()})
		return
	}
	if id := requestGroupID(m); id != g.cfg.id {
		code := messages.ErrorCode_NOT_COORDINATOR
		if id == "" {
			code = messages.ErrorCode_INVALID_GROUP_ID
		}
		ctx.Respond(groupErrorResponse(m, code, fmt.Sprintf("this actor runs group %q, not %q", g.cfg.id, id)))
		return
	}
	switch r := m.(type) {
	case *messages.JoinGroupRequest:
		if r.ProtocolType != "" {
			g.onClassicJoin(ctx, r)
		} else {
			g.onJoin(ctx, r)
		}
	case *messages.SyncGroupRequest:
		g.onSync(ctx, r)
	case *messages.HeartbeatRequest:
		if g.classic.active() {
			ctx.Respond(g.classic.heartbeat(r))
			g.applyClassic(ctx)
		} else {
			ctx.Respond(g.onHeartbeat(ctx, r))
		}
	case *messages.LeaveGroupRequest:
		ctx.Respond(g.onLeaveRequest(ctx, r))
	case *messages.OffsetCommitRequest:
		g.onCommit(ctx, r)
	case *messages.OffsetFetchRequest:
		ctx.Respond(g.offsetFetch(r))
	case *messages.OffsetDeleteRequest:
		g.onOffsetDelete(ctx, r)
	case *messages.DescribeGroupRequest:
		ctx.Respond(g.describe())
	case *messages.DeleteGroupRequest:
		g.onDelete(ctx)
	}
	g.report(ctx)
}

// describedClassic reports whether the group is described and listed as
// a classic group: while it has classic members, or has none of either
// protocol and had classic ones last.
func (g *groupActor) describedClassic() bool {
	return g.classic.active() || (g.classicKind && len(g.members) == 0)
}

// report tells the coordinator the group's listing when it changed, while
// the group is served.
func (g *groupActor) report(ctx actor.Context) {
	if g.mode != modeServing {
		return
	}
	l := &messages.GroupListing{GroupId: g.cfg.id, State: g.state.String(), Members: int32(len(g.members))}
	if g.describedClassic() {
		l.State, l.Members, l.ProtocolType = g.classic.state.String(), int32(len(g.classic.members)), g.classic.protocolType
	}
	exists := g.exists()
	if g.listed != nil && g.listedExists == exists && g.listed.State == l.State && g.listed.Members == l.Members && g.listed.ProtocolType == l.ProtocolType {
		return
	}
	g.listed, g.listedExists = l, exists
	ctx.Send(ctx.Parent(), &groupChanged{listing: l, exists: exists})
}

// exists reports whether the group is there to list, describe or delete:
// it has members, committed offsets, or has had a generation.
func (g *groupActor) exists() bool {
	return g.state != groupDead && (len(g.members) > 0 || len(g.offsets) > 0 || g.generation > 0 ||
		g.classic.active() || g.classic.generation > 0)
}

// newMemberID is Kafka's: the client id (or group instance id for a
// static member) followed by a random UUID.
func newMemberID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return prefix + "-" + h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// joinSettings are a JoinGroupRequest's validated settings.
type joinSettings struct {
	session, rebalance time.Duration
	topics, assignors  []string
	owned              []assign.TopicPartition
}

// validateJoin checks a join's settings on their own and against the
// group's members.
func (g *groupActor) validateJoin(m *messages.JoinGroupRequest) (joinSettings, messages.ErrorCode, string) {
	var s joinSettings
	s.session = time.Duration(m.SessionTimeoutMs) * time.Millisecond
	if m.SessionTimeoutMs == 0 {
		s.session = DefaultSessionTimeout
	}
	if s.session < MinSessionTimeout || s.session > MaxSessionTimeout {
		return s, messages.ErrorCode_INVALID_SESSION_TIMEOUT,
			fmt.Sprintf("session timeout %d ms: must be between %d and %d ms", m.SessionTimeoutMs, MinSessionTimeout.Milliseconds(), MaxSessionTimeout.Milliseconds())
	}
	s.rebalance = time.Duration(m.RebalanceTimeoutMs) * time.Millisecond
	if m.RebalanceTimeoutMs == 0 {
		s.rebalance = DefaultRebalanceTimeout
	}
	if m.RebalanceTimeoutMs < 0 {
		return s, messages.ErrorCode_INVALID_REQUEST, fmt.Sprintf("rebalance timeout %d ms is negative", m.RebalanceTimeoutMs)
	}
	for _, t := range m.Topics {
		if err := topic.ValidateName(t); err != nil {
			return s, messages.ErrorCode_INVALID_TOPIC, messages.ErrorText(err)
		}
		if !slices.Contains(s.topics, t) {
			s.topics = append(s.topics, t)
		}
	}
	sort.Strings(s.topics)
	for _, name := range m.Assignors {
		if _, err := assign.ByName(name); err == nil && !slices.Contains(s.assignors, name) {
			s.assignors = append(s.assignors, name)
		}
	}
	if len(s.assignors) == 0 {
		return s, messages.ErrorCode_INCONSISTENT_GROUP_PROTOCOL,
			fmt.Sprintf("assignors %q: none known (want %q, %q or %q)", m.Assignors, assign.CooperativeStickyName, assign.RangeName, assign.RoundRobinName)
	}
	lists := [][]string{s.assignors}
	for id, mem := range g.members {
		if id != m.MemberId && (m.GroupInstanceId == "" || mem.instanceID != m.GroupInstanceId) {
			lists = append(lists, mem.assignors)
		}
	}
	if _, err := assign.Choose(lists); err != nil {
		return s, messages.ErrorCode_INCONSISTENT_GROUP_PROTOCOL, fmt.Sprintf("assignors %q: %s", s.assignors, messages.ErrorText(err))
	}
	for _, tp := range m.Owned {
		s.owned = append(s.owned, assign.TopicPartition{Topic: tp.GetTopic(), Partition: tp.GetPartition()})
	}
	return s, messages.ErrorCode_NONE, ""
}

func (g *groupActor) onJoin(ctx actor.Context, m *messages.JoinGroupRequest) {
	reply := func(code messages.ErrorCode, text string) {
		ctx.Respond(&messages.JoinGroupResponse{Error: code, ErrorMessage: text, Generation: -1, MemberId: m.MemberId})
	}
	if g.classic.active() {
		reply(messages.ErrorCode_INCONSISTENT_GROUP_PROTOCOL, fmt.Sprintf("group %q has %s of Kafka's classic protocol (protocol type %q): a member of Depot's group protocol cannot join it",
			g.cfg.id, activeMembers(len(g.classic.members)), g.classic.protocolType))
		return
	}
	settings, code, text := g.validateJoin(m)
	if code != messages.ErrorCode_NONE {
		reply(code, text)
		return
	}
	g.classicKind = false
	var mem *groupMember
	switch {
	case m.MemberId == "" && m.GroupInstanceId != "" && g.static[m.GroupInstanceId] != "":
		// A static member back under a new member id: it replaces (fences)
		// the old one and keeps its assignment.
		mem = g.members[g.static[m.GroupInstanceId]]
		old := mem.id
		if mem.pending != nil {
			ctx.Send(mem.pending, &messages.JoinGroupResponse{Error: messages.ErrorCode_FENCED_INSTANCE_ID, Generation: -1, MemberId: old,
				ErrorMessage: fmt.Sprintf("group instance %q joined again as a new member", m.GroupInstanceId)})
			mem.pending = nil
		}
		g.stopSession(mem)
		delete(g.members, old)
		mem.id = newMemberID(m.GroupInstanceId)
		g.members[mem.id] = mem
		g.static[m.GroupInstanceId] = mem.id
		g.logger.WithFields(logrus.Fields{"instance": m.GroupInstanceId, "old_member": old, "member": mem.id}).Info("static member rejoined")
		if g.state == groupStable && mem.sameSubscription(settings) {
			mem.clientID = m.ClientId
			mem.sessionTimeout, mem.rebalanceTimeout = settings.session, settings.rebalance
			g.startSession(mem)
			g.storeDepot(ctx)
			ctx.Respond(g.joinResponse(mem))
			return
		}
	case m.MemberId == "":
		prefix := m.ClientId
		if m.GroupInstanceId != "" {
			prefix = m.GroupInstanceId
		}
		if prefix == "" {
			prefix = "member"
		}
		mem = &groupMember{id: newMemberID(prefix), instanceID: m.GroupInstanceId}
		g.members[mem.id] = mem
		if mem.instanceID != "" {
			g.static[mem.instanceID] = mem.id
		}
		g.logger.WithFields(logrus.Fields{"member": mem.id, "client": m.ClientId}).Info("member joined")
	default:
		var code messages.ErrorCode
		mem, code, text = g.lookupMember(m.MemberId, m.GroupInstanceId)
		if code != messages.ErrorCode_NONE {
			reply(code, text)
			return
		}
		if mem.pending != nil && mem.pending != ctx.Sender() {
			ctx.Send(mem.pending, &messages.JoinGroupResponse{Error: messages.ErrorCode_REBALANCE_IN_PROGRESS, Generation: -1, MemberId: mem.id,
				ErrorMessage: "superseded by a newer join of the same member"})
		}
		if g.state == groupStable && !mem.mustRejoin && mem.sameSubscription(settings) {
			mem.owned = settings.owned
			g.startSession(mem)
			ctx.Respond(g.joinResponse(mem))
			return
		}
	}
	mem.clientID = m.ClientId
	mem.topics, mem.assignors, mem.owned = settings.topics, settings.assignors, settings.owned
	mem.sessionTimeout, mem.rebalanceTimeout = settings.session, settings.rebalance
	mem.pending = ctx.Sender()
	g.stopSession(mem)
	if g.state == groupPreparingRebalance {
		g.maybeCompleteJoin(ctx)
		return
	}
	g.prepareRebalance(ctx, "member "+mem.id+" joined")
}

func (mem *groupMember) sameSubscription(s joinSettings) bool {
	return slices.Equal(mem.topics, s.topics) && slices.Equal(mem.assignors, s.assignors)
}

// lookupMember finds a member by id, fencing a stale id of a static member.
func (g *groupActor) lookupMember(memberID, instanceID string) (*groupMember, messages.ErrorCode, string) {
	if instanceID != "" {
		if current, ok := g.static[instanceID]; ok && current != memberID {
			return nil, messages.ErrorCode_FENCED_INSTANCE_ID,
				fmt.Sprintf("member %q of group instance %q was replaced by %q", memberID, instanceID, current)
		}
	}
	mem, ok := g.members[memberID]
	if !ok {
		return nil, messages.ErrorCode_UNKNOWN_MEMBER_ID, fmt.Sprintf("member %q is not in group %q", memberID, g.cfg.id)
	}
	if mem.instanceID != "" && instanceID != "" && mem.instanceID != instanceID {
		return nil, messages.ErrorCode_FENCED_INSTANCE_ID, fmt.Sprintf("member %q belongs to group instance %q", memberID, mem.instanceID)
	}
	return mem, messages.ErrorCode_NONE, ""
}

// joinResponse is a member's answer: its assignment in this generation.
func (g *groupActor) joinResponse(mem *groupMember) *messages.JoinGroupResponse {
	resp := &messages.JoinGroupResponse{Generation: g.generation, MemberId: mem.id, Assignor: g.assignor, Rejoin: mem.mustRejoin}
	resp.Assignment = toMessagePartitions(mem.assignment)
	return resp
}

func toMessagePartitions(tps []assign.TopicPartition) []*messages.TopicPartition {
	out := make([]*messages.TopicPartition, len(tps))
	for i, tp := range tps {
		out[i] = &messages.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}
	}
	return out
}

// startSession (re)starts a member's session timer.
func (g *groupActor) startSession(mem *groupMember) {
	g.stopSession(mem)
	mem.sessionSeq++
	mem.cancelSession = g.timers.SendOnce(mem.sessionTimeout, g.self, &sessionExpired{member: mem.id, seq: mem.sessionSeq})
}

func (g *groupActor) stopSession(mem *groupMember) {
	if mem.cancelSession != nil {
		mem.cancelSession()
		mem.cancelSession = nil
	}
	mem.sessionSeq++
}

// prepareRebalance moves the group to PreparingRebalance: it waits for
// every member to join again, up to the longest rebalance timeout.
func (g *groupActor) prepareRebalance(ctx actor.Context, reason string) {
	g.state = groupPreparingRebalance
	g.rebalanceSeq++
	if g.cancelRebalance != nil {
		g.cancelRebalance()
	}
	timeout := time.Duration(0)
	for _, mem := range g.members {
		timeout = max(timeout, mem.rebalanceTimeout)
	}
	g.cancelRebalance = g.timers.SendOnce(timeout, ctx.Self(), &rebalanceExpired{seq: g.rebalanceSeq})
	g.logger.WithFields(logrus.Fields{"reason": reason, "generation": g.generation, "members": len(g.members)}).Info("preparing rebalance")
	g.maybeCompleteJoin(ctx)
}

// maybeCompleteJoin completes the rebalance once every member has joined.
func (g *groupActor) maybeCompleteJoin(ctx actor.Context) {
	if g.state != groupPreparingRebalance {
		return
	}
	for _, mem := range g.members {
		if mem.pending == nil {
			return
		}
	}
	g.completeRebalance(ctx)
}

func (g *groupActor) onRebalanceExpired(ctx actor.Context, m *rebalanceExpired) {
	if m.seq != g.rebalanceSeq || g.state != groupPreparingRebalance {
		return
	}
	for _, mem := range g.sortedMembers() {
		if mem.pending == nil {
			g.logger.WithField("member", mem.id).Info("member did not rejoin within the rebalance timeout; removed")
			g.removeMember(ctx, mem)
		}
	}
	g.completeRebalance(ctx)
	g.report(ctx)
}

// completeRebalance asks for the partition counts of the members' topics,
// then computes the assignment and answers every pending join.
func (g *groupActor) completeRebalance(ctx actor.Context) {
	if g.cancelRebalance != nil {
		g.cancelRebalance()
		g.cancelRebalance = nil
	}
	if len(g.members) == 0 {
		g.generation++
		g.state, g.assignor, g.counts = groupEmpty, "", nil
		g.logger.WithField("generation", g.generation).Info("group empty")
		g.storeDepot(ctx)
		return
	}
	g.state = groupCompletingRebalance
	seq := g.rebalanceSeq
	topics := g.subscribedTopics()
	future := ctx.RequestFuture(g.cfg.metadata, &messages.MetadataRequest{Topics: topics}, g.cfg.requestTimeout)
	ctx.ReenterAfter(future, func(res any, err error) {
		if g.mode != modeServing || g.state != groupCompletingRebalance || seq != g.rebalanceSeq {
			return
		}
		md, ok := res.(*messages.MetadataResponse)
		if err != nil || !ok {
			g.logger.WithField("error", fmt.Sprint(err)).Warn("metadata did not answer; assigning again")
			g.completeRebalance(ctx)
			return
		}
		counts := partitionCounts(md)
		if !slices.Equal(topics, g.subscribedTopics()) {
			// Someone joined with other topics meanwhile.
			g.completeRebalance(ctx)
			return
		}
		g.assign(ctx, counts)
		g.report(ctx)
	})
}

// partitionCounts maps each topic of md that exists to its partition count.
func partitionCounts(md *messages.MetadataResponse) map[string]int32 {
	counts := map[string]int32{}
	for _, t := range md.Topics {
		if t.Error == messages.ErrorCode_NONE {
			counts[t.Name] = int32(len(t.Partitions))
		}
	}
	return counts
}

// subscribedTopics is the union of the members' topics, sorted.
func (g *groupActor) subscribedTopics() []string {
	var topics []string
	for _, mem := range g.members {
		for _, t := range mem.topics {
			if !slices.Contains(topics, t) {
				topics = append(topics, t)
			}
		}
	}
	sort.Strings(topics)
	return topics
}

func (g *groupActor) sortedMembers() []*groupMember {
	out := make([]*groupMember, 0, len(g.members))
	for _, mem := range g.members {
		out = append(out, mem)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// assign completes the rebalance with counts: the next generation, the
// chosen assignor's plan (for cooperative-sticky its first phase when
// partitions change owner) answered to every member that waits.
func (g *groupActor) assign(ctx actor.Context, counts map[string]int32) {
	members := g.sortedMembers()
	lists := make([][]string, len(members))
	in := make([]assign.Member, len(members))
	for i, mem := range members {
		lists[i] = mem.assignors
		in[i] = assign.Member{ID: mem.id, InstanceID: mem.instanceID, Topics: mem.topics, Owned: mem.owned, Generation: mem.assignedGeneration}
	}
	name, err := assign.Choose(lists)
	var assignor assign.Assignor
	if err == nil {
		assignor, err = assign.ByName(name)
	}
	if err != nil {
		for _, mem := range members {
			if mem.pending != nil {
				ctx.Send(mem.pending, &messages.JoinGroupResponse{Error: messages.ErrorCode_INCONSISTENT_GROUP_PROTOCOL, ErrorMessage: messages.ErrorText(err), Generation: -1, MemberId: mem.id})
			}
			g.removeMember(ctx, mem)
		}
		g.generation++
		g.state, g.assignor, g.counts = groupEmpty, "", nil
		g.storeDepot(ctx)
		return
	}
	plan := assignor.Assign(in, counts)
	revoking := map[string][]assign.TopicPartition{}
	if name == assign.CooperativeStickyName {
		revoking = assign.Revocations(in, plan)
		if len(revoking) > 0 {
			plan = assign.Withhold(in, plan)
		}
	}
	g.generation++
	g.assignor = name
	g.counts = counts
	g.state = groupStable
	for _, mem := range members {
		mem.assignment = plan[mem.id]
		mem.assignedGeneration = g.generation
		_, mem.mustRejoin = revoking[mem.id]
		if mem.pending != nil {
			ctx.Send(mem.pending, g.joinResponse(mem))
			mem.pending = nil
		}
		g.startSession(mem)
	}
	g.logger.WithFields(logrus.Fields{"generation": g.generation, "assignor": name, "members": len(members), "revoking": len(revoking)}).Info("rebalance completed")
	g.storeDepot(ctx)
}

// removeMember drops a member, answering its waiting join.
func (g *groupActor) removeMember(ctx actor.Context, mem *groupMember) {
	g.stopSession(mem)
	if mem.pending != nil {
		ctx.Send(mem.pending, &messages.JoinGroupResponse{Error: messages.ErrorCode_UNKNOWN_MEMBER_ID, Generation: -1, MemberId: mem.id,
			ErrorMessage: "member removed from the group"})
		mem.pending = nil
	}
	delete(g.members, mem.id)
	if mem.instanceID != "" && g.static[mem.instanceID] == mem.id {
		delete(g.static, mem.instanceID)
	}
}

func (g *groupActor) onSessionExpired(ctx actor.Context, m *sessionExpired) {
	mem, ok := g.members[m.member]
	if !ok || mem.sessionSeq != m.seq || mem.pending != nil {
		return
	}
	g.logger.WithFields(logrus.Fields{"member": mem.id, "session_timeout": mem.sessionTimeout}).Info("member session expired; removed")
	g.removeMember(ctx, mem)
	g.memberGone(ctx, "member "+mem.id+" session expired")
	g.report(ctx)
}

// memberGone rebalances after a member left or expired.
func (g *groupActor) memberGone(ctx actor.Context, reason string) {
	switch g.state {
	case groupPreparingRebalance:
		g.maybeCompleteJoin(ctx)
	default:
		g.prepareRebalance(ctx, reason)
	}
}

func (g *groupActor) onHeartbeat(ctx actor.Context, m *messages.HeartbeatRequest) *messages.HeartbeatResponse {
	mem, code, text := g.lookupMember(m.MemberId, m.GroupInstanceId)
	if code != messages.ErrorCode_NONE {
		return &messages.HeartbeatResponse{Error: code, ErrorMessage: text}
	}
	if mem.pending == nil {
		g.startSession(mem)
	}
	switch {
	case g.state == groupPreparingRebalance || g.state == groupCompletingRebalance:
		return &messages.HeartbeatResponse{Error: messages.ErrorCode_REBALANCE_IN_PROGRESS, ErrorMessage: "the group is rebalancing: join again"}
	case m.Generation != g.generation:
		return &messages.HeartbeatResponse{Error: messages.ErrorCode_ILLEGAL_GENERATION,
			ErrorMessage: fmt.Sprintf("generation %d is not the group's generation %d", m.Generation, g.generation)}
	case mem.mustRejoin:
		return &messages.HeartbeatResponse{Error: messages.ErrorCode_REBALANCE_IN_PROGRESS, ErrorMessage: "revoke the partitions no longer assigned and join again"}
	}
	return &messages.HeartbeatResponse{}
}

func (g *groupActor) onLeave(ctx actor.Context, m *messages.LeaveGroupRequest) *messages.LeaveGroupResponse {
	memberID := m.MemberId
	if memberID == "" && m.GroupInstanceId != "" {
		memberID = g.static[m.GroupInstanceId]
	}
	mem, code, text := g.lookupMember(memberID, m.GroupInstanceId)
	if code != messages.ErrorCode_NONE {
		return &messages.LeaveGroupResponse{Error: code, ErrorMessage: text}
	}
	g.logger.WithField("member", mem.id).Info("member left")
	g.removeMember(ctx, mem)
	g.memberGone(ctx, "member "+mem.id+" left")
	return &messages.LeaveGroupResponse{}
}

func (g *groupActor) onMetadataTick(ctx actor.Context) {
	if g.mode != modeServing || g.state != groupStable || len(g.members) == 0 || g.checkingCounts {
		return
	}
	g.checkingCounts = true
	generation := g.generation
	topics := g.subscribedTopics()
	future := ctx.RequestFuture(g.cfg.metadata, &messages.MetadataRequest{Topics: topics}, g.cfg.requestTimeout)
	ctx.ReenterAfter(future, func(res any, err error) {
		g.checkingCounts = false
		md, ok := res.(*messages.MetadataResponse)
		if err != nil || !ok || g.mode != modeServing || g.state != groupStable || g.generation != generation {
			return
		}
		counts := partitionCounts(md)
		for _, t := range topics {
			if counts[t] != g.counts[t] {
				g.prepareRebalance(ctx, fmt.Sprintf("topic %s has %d partitions, was %d", t, counts[t], g.counts[t]))
				g.report(ctx)
				return
			}
		}
	})
}

// validateCommit checks who commits: a member of the current generation,
// or an admin (generation -1, no member id) while the group has no member.
func (g *groupActor) validateCommit(m *messages.OffsetCommitRequest) (*groupMember, messages.ErrorCode, string) {
	if m.MemberId == "" && m.Generation < 0 {
		if len(g.members) > 0 {
			return nil, messages.ErrorCode_NON_EMPTY_GROUP,
				fmt.Sprintf("group %q has %s: only they commit", g.cfg.id, activeMembers(len(g.members)))
		}
		return nil, messages.ErrorCode_NONE, ""
	}
	mem, ok := g.members[m.MemberId]
	if !ok {
		return nil, messages.ErrorCode_UNKNOWN_MEMBER_ID, fmt.Sprintf("member %q is not in group %q", m.MemberId, g.cfg.id)
	}
	if g.state == groupCompletingRebalance {
		return nil, messages.ErrorCode_REBALANCE_IN_PROGRESS, "the group is completing a rebalance"
	}
	if m.Generation != g.generation {
		return nil, messages.ErrorCode_ILLEGAL_GENERATION,
			fmt.Sprintf("generation %d is not the group's generation %d", m.Generation, g.generation)
	}
	return mem, messages.ErrorCode_NONE, ""
}

// validateOffsets checks every entry of a commit; with any bad entry the
// whole commit is refused. A negative offset is not bad: Kafka stores a
// committed offset as given, and clients commit -1 and -2 (kafkajs's
// resetOffsets does) and read a negative committed offset back as none.
func validateOffsets(offsets []*messages.PartitionOffset) ([]*messages.PartitionOffset, bool) {
	out := make([]*messages.PartitionOffset, len(offsets))
	ok := true
	for i, o := range offsets {
		r := &messages.PartitionOffset{Topic: o.GetTopic(), Partition: o.GetPartition(), Offset: o.GetOffset(), Metadata: o.GetMetadata()}
		switch {
		case topic.ValidateName(r.Topic) != nil:
			r.Error = messages.ErrorCode_INVALID_TOPIC
		case r.Partition < 0:
			r.Error = messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION
		case len(r.Metadata) > MaxOffsetMetadataBytes:
			r.Error = messages.ErrorCode_INVALID_REQUEST
		}
		if r.Error != messages.ErrorCode_NONE {
			ok = false
		}
		out[i] = r
	}
	return out, ok
}

func (g *groupActor) onCommit(ctx actor.Context, m *messages.OffsetCommitRequest) {
	var code messages.ErrorCode
	var text string
	if g.classic.active() {
		var mem *classicMember
		mem, code, text = g.classic.validateCommit(m.MemberId, m.GroupInstanceId, m.Generation)
		if mem != nil {
			g.classic.touch(mem)
			g.applyClassic(ctx)
		}
	} else {
		var mem *groupMember
		mem, code, text = g.validateCommit(m)
		if mem != nil && mem.pending == nil {
			g.startSession(mem)
		}
	}
	if code != messages.ErrorCode_NONE {
		ctx.Respond(&messages.OffsetCommitResponse{Error: code, ErrorMessage: text})
		return
	}
	sender := ctx.Sender()
	results, ok := validateOffsets(m.Offsets)
	if !ok {
		ctx.Respond(&messages.OffsetCommitResponse{Error: messages.ErrorCode_INVALID_REQUEST,
			ErrorMessage: "commit refused: an entry has a bad topic, partition, offset or metadata (see each entry)", Offsets: results})
		return
	}
	if len(results) == 0 {
		ctx.Respond(&messages.OffsetCommitResponse{})
		return
	}
	now := g.cfg.now().UnixMilli()
	req := &appendOffsets{group: g.cfg.id}
	for _, r := range results {
		r.CommitTimestampMs = now
		req.keys = append(req.keys, &messages.OffsetKey{Group: g.cfg.id, Topic: r.Topic, Partition: r.Partition})
		req.values = append(req.values, &messages.OffsetValue{Offset: r.Offset, Metadata: r.Metadata, CommitTimestampMs: now})
	}
	g.write(ctx, req, func(code messages.ErrorCode, text string) {
		if code == messages.ErrorCode_NONE {
			for i, k := range req.keys {
				g.offsets[assign.TopicPartition{Topic: k.Topic, Partition: k.Partition}] = req.values[i]
			}
			if g.state == groupDead {
				g.state = groupEmpty
			}
		}
		for _, r := range results {
			r.Error = code
		}
		answer(ctx, sender, &messages.OffsetCommitResponse{Error: code, ErrorMessage: text, Offsets: results})
		g.report(ctx)
	})
}

// write has the coordinator append offset records, then calls done, which
// answers with its explicit sender: it may run while another message is
// handled (see release).
func (g *groupActor) write(ctx actor.Context, req *appendOffsets, done func(messages.ErrorCode, string)) {
	g.lastWrite++
	seq := g.lastWrite
	g.writes[seq] = done
	future := ctx.RequestFuture(ctx.Parent(), req, 2*g.cfg.requestTimeout)
	ctx.ReenterAfter(future, func(res any, err error) {
		done, ok := g.writes[seq]
		if !ok {
			return // answered when the group was released
		}
		delete(g.writes, seq)
		r, ok := res.(*appendOffsetsResult)
		switch {
		case err != nil:
			done(messages.ErrorCode_COORDINATOR_NOT_AVAILABLE, fmt.Sprintf("offsets not written in time: %v", err))
		case !ok:
			done(messages.ErrorCode_UNKNOWN_SERVER_ERROR, fmt.Sprintf("coordinator answered %T", res))
		default:
			done(r.code, r.message)
		}
	})
}

func (g *groupActor) offsetFetch(m *messages.OffsetFetchRequest) *messages.OffsetFetchResponse {
	resp := &messages.OffsetFetchResponse{}
	if len(m.Partitions) == 0 {
		resp.Offsets = g.sortedOffsets()
		return resp
	}
	for _, tp := range m.Partitions {
		o := &messages.PartitionOffset{Topic: tp.GetTopic(), Partition: tp.GetPartition(), Offset: -1}
		if v, ok := g.offsets[assign.TopicPartition{Topic: o.Topic, Partition: o.Partition}]; ok {
			o.Offset, o.Metadata, o.CommitTimestampMs = v.Offset, v.Metadata, v.CommitTimestampMs
		}
		resp.Offsets = append(resp.Offsets, o)
	}
	return resp
}

func (g *groupActor) sortedOffsets() []*messages.PartitionOffset {
	out := make([]*messages.PartitionOffset, 0, len(g.offsets))
	for tp, v := range g.offsets {
		out = append(out, &messages.PartitionOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: v.Offset, Metadata: v.Metadata, CommitTimestampMs: v.CommitTimestampMs})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

func (g *groupActor) describe() *messages.DescribeGroupResponse {
	resp := &messages.DescribeGroupResponse{GroupId: g.cfg.id, State: g.state.String(), Generation: g.generation, Assignor: g.assignor}
	if !g.exists() {
		resp.Error, resp.ErrorMessage, resp.State = messages.ErrorCode_GROUP_ID_NOT_FOUND, fmt.Sprintf("group %q does not exist", g.cfg.id), groupDead.String()
		return resp
	}
	if g.describedClassic() {
		g.classic.describe(resp)
		resp.Offsets = g.sortedOffsets()
		return resp
	}
	for _, mem := range g.sortedMembers() {
		resp.Members = append(resp.Members, &messages.GroupMember{
			MemberId: mem.id, GroupInstanceId: mem.instanceID, ClientId: mem.clientID,
			Topics: slices.Clone(mem.topics), Assignment: toMessagePartitions(mem.assignment),
		})
	}
	resp.Offsets = g.sortedOffsets()
	return resp
}

// activeMembers is "1 active member", "2 active members".
func activeMembers(n int) string {
	if n == 1 {
		return "1 active member"
	}
	return fmt.Sprintf("%d active members", n)
}

func (g *groupActor) onDelete(ctx actor.Context) {
	switch {
	case !g.exists():
		ctx.Respond(&messages.DeleteGroupResponse{Error: messages.ErrorCode_GROUP_ID_NOT_FOUND, ErrorMessage: fmt.Sprintf("group %q does not exist", g.cfg.id)})
		return
	case len(g.members) > 0 || len(g.classic.members) > 0:
		ctx.Respond(&messages.DeleteGroupResponse{Error: messages.ErrorCode_NON_EMPTY_GROUP,
			ErrorMessage: fmt.Sprintf("group %q has %s", g.cfg.id, activeMembers(len(g.members)+len(g.classic.members)))})
		return
	}
	sender := ctx.Sender()
	req := &appendOffsets{group: g.cfg.id}
	if g.generationStored {
		req.keys = append(req.keys, membersKey(g.cfg.id))
		req.values = append(req.values, nil)
	}
	for _, o := range g.sortedOffsets() {
		req.keys = append(req.keys, &messages.OffsetKey{Group: g.cfg.id, Topic: o.Topic, Partition: o.Partition})
		req.values = append(req.values, nil)
	}
	finish := func() {
		g.state, g.generation, g.assignor, g.counts = groupDead, 0, "", nil
		g.stopClassicTimers()
		g.classic, g.classicKind = newClassicGroup(g.cfg.id, g.cfg.initialRebalanceDelay, newMemberID), false
		g.logger.Info("group deleted")
		answer(ctx, sender, &messages.DeleteGroupResponse{})
		g.report(ctx)
	}
	if len(req.keys) == 0 {
		finish()
		return
	}
	g.write(ctx, req, func(code messages.ErrorCode, text string) {
		if code != messages.ErrorCode_NONE {
			answer(ctx, sender, &messages.DeleteGroupResponse{Error: code, ErrorMessage: text})
			return
		}
		for _, k := range req.keys {
			delete(g.offsets, assign.TopicPartition{Topic: k.Topic, Partition: k.Partition})
		}
		if len(g.members) > 0 || g.classic.active() || len(g.offsets) > 0 {
			// A member joined or an admin committed while the tombstones
			// were written: the group lives on without the deleted offsets.
			answer(ctx, sender, &messages.DeleteGroupResponse{})
			g.report(ctx)
			return
		}
		finish()
	})
}

func (g *groupActor) onStopping(ctx actor.Context) {
	g.release(ctx, "group coordinator stopping")
}
