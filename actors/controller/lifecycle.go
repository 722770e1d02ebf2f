package controller

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/metadata"
	"github.com/depot-dev/depot/messages"
)

// The node's lifecycle, in Kafka's model (KIP-631): a node registers with
// the active controller when it starts, with an incarnation of its own
// process, and is fenced until it heartbeats having caught up on the
// metadata log. The active controller fences a node whose session lapses,
// or whose connection dropped, or that its watch of the node found
// unreachable (watch.go), and did not come back within a short grace, and
// a node asking for a controlled shutdown. Heartbeats are not records;
// only the changes of state they cause are.
const (
	// registerRetry is how often a node asks to be registered until it is.
	registerRetry = 500 * time.Millisecond
	// lifecycleRequestTimeout bounds a registration or heartbeat request.
	lifecycleRequestTimeout = 2 * time.Second
	// lostGrace is how long a node whose connection dropped, or that is
	// unreachable, has to come back before it is fenced, well under the
	// session timeout.
	lostGrace = time.Second
	// refusedGrace is that grace for a node that, once its connection
	// dropped, cannot be connected to again: a process that died refuses
	// at once. It only covers the failure racing the node's heartbeat.
	refusedGrace = 250 * time.Millisecond
)

// lifecycleAnswer is the answer, or its absence, to one of the node's own
// registration or heartbeat requests.
type lifecycleAnswer struct {
	seq       uint64
	heartbeat bool
	res       any
	err       error
}

// fenceChange fences or unfences a node.
type fenceChange struct {
	node   int32
	fenced bool
}

// lifecycle is the node's own registration and, on the active controller,
// every node's session. Part of the controller's state.
type lifecycle struct {
	incarnation uint64
	registered  bool
	// refused is why the cluster refused this node, nil unless it did.
	refused  error
	waiters  []*actor.PID
	inFlight bool
	lastSent time.Time
	// sent numbers the requests sent: only the last one's answer counts.
	sent uint64
	// voter is the voter asked next while no leader is known.
	voter int
	// caughtUp is set once the partition manager was told that the
	// node's metadata caught up, caughtUpQueued once the word is queued
	// (see caughtUp).
	caughtUp, caughtUpQueued bool
	// duplicateSince is when the registration was first refused for a
	// node id held by a live node.
	duplicateSince time.Time
	// fencedSince is when this node's registration or heartbeats began
	// to fail, or to be answered with the node fenced; zero while it is
	// registered and unfenced. warnedAt is when that was last logged.
	fencedSince, warnedAt time.Time
	// bytes and growth are the node's stored bytes and write rate, as its
	// placement actor last told them, for the next heartbeat.
	bytes  int64
	growth float64

	// sessions are the nodes' sessions, on the active controller.
	sessions map[int32]*session
}

// session is one node's session with the active controller.
type session struct {
	incarnation uint64
	lastSeen    time.Time
	// caughtUp is the index of the metadata log the node must have applied
	// to be unfenced.
	caughtUp uint64
	// lostAt is when the node's connection dropped or its watch found it
	// unreachable, zero while it holds.
	lostAt time.Time
	// refusedAt is when its address first refused a connection since.
	refusedAt time.Time
	// fencedAt is when the node was last fenced by this controller.
	fencedAt time.Time
	// bytes and growth are the node's stored bytes and their growth, as
	// its last heartbeat reported them.
	bytes  int64
	growth float64
}

func newLifecycle() lifecycle {
	return lifecycle{incarnation: rand.Uint64() | 1, sessions: map[int32]*session{}}
}

// becameLeader grants every registered node a full session before anyone is
// fenced; only a node that the new controller's watch finds unreachable
// has the short grace of a lost connection instead.
func (l *lifecycle) becameLeader(image *metadata.Image, now time.Time) {
	l.sessions = map[int32]*session{}
	for _, n := range image.Nodes() {
		l.sessions[n.ID] = &session{incarnation: n.Incarnation, lastSeen: now}
	}
}

// newController drops the registration or heartbeat in flight to a
// controller that lost the lead, for the next tick to send one to the new
// one at once: a request to a node that died waits out its timeout, longer
// than a session, and the new controller would fence this node meanwhile.
func (l *lifecycle) newController() {
	l.inFlight, l.lastSent = false, time.Time{}
}

// lost records that node id's connection dropped, or that its watch
// found it unreachable; refused when a connection to it failed.
func (l *lifecycle) lost(id int32, now time.Time, refused bool) {
	s, ok := l.sessions[id]
	if !ok {
		return
	}
	if s.lostAt.IsZero() {
		s.lostAt = now
	}
	if refused && s.refusedAt.IsZero() {
		s.refusedAt = now
	}
}

// reachable records that node id's watch connected to it again: a node
// back before its grace ended is not fenced for the drop.
func (l *lifecycle) reachable(id int32) {
	if s, ok := l.sessions[id]; ok {
		s.lostAt, s.refusedAt = time.Time{}, time.Time{}
	}
}

// lifecycleTick sends this node's registration or heartbeat when due, and,
// on the active controller, watches the nodes registered since the last
// tick and fences those whose session lapsed or that are unreachable.
func (a *controllerActor) lifecycleTick(ctx actor.Context) {
	now := a.cfg.Now()
	l := &a.life
	if l.refused == nil && !l.inFlight {
		due := registerRetry
		if l.registered {
			due = a.cfg.HeartbeatInterval
		}
		if now.Sub(l.lastSent) >= due {
			a.sendLifecycle(ctx, now)
		}
	}
	a.syncWatches(ctx)
	if !a.isLeader() {
		return
	}
	for _, n := range a.image.Nodes() {
		s, ok := l.sessions[n.ID]
		if n.Fenced || !ok || s.fencedAt.After(s.lastSeen) {
			// Not fenced yet, or being fenced: its change is queued.
			continue
		}
		lapsed := now.Sub(s.lastSeen) > a.cfg.SessionTimeout
		dropped := !s.lostAt.IsZero() && now.Sub(s.lostAt) > lostGrace && s.lastSeen.Before(s.lostAt) ||
			!s.refusedAt.IsZero() && now.Sub(s.refusedAt) > refusedGrace && s.lastSeen.Before(s.refusedAt)
		if lapsed || dropped {
			why := "its session lapsed"
			if !lapsed {
				why = "it is unreachable"
			}
			a.logger.WithFields(logrus.Fields{"fenced": n.ID, "why": why}).Warn("node fenced")
			s.fencedAt, s.lostAt, s.refusedAt = now, time.Time{}, time.Time{}
			a.submit(ctx, &fenceChange{node: n.ID, fenced: true}, nil)
		}
	}
}

// sendLifecycle sends this node's registration, or its heartbeat once it
// is registered, to the active controller, or to a voter while none is
// known.
func (a *controllerActor) sendLifecycle(ctx actor.Context, now time.Time) {
	l := &a.life
	var target *actor.PID
	if a.leader != 0 {
		target = a.controllerOf(int32(a.leader))
	} else {
		ids := slices.Sorted(maps.Keys(a.cfg.Voters))
		target = a.controllerOf(ids[l.voter%len(ids)])
		l.voter++
	}
	if target == nil {
		return
	}
	var req any
	if l.registered {
		req = &messages.NodeHeartbeatRequest{NodeId: a.cfg.NodeID, Incarnation: l.incarnation, Applied: a.applied, Bytes: l.bytes, Growth: l.growth}
		a.refreshLoad(ctx)
	} else {
		dirs := slices.Sorted(maps.Keys(a.dirPaths))
		req = &messages.RegisterNodeRequest{
			NodeId: a.cfg.NodeID, Address: a.cfg.Address, Rack: a.cfg.Rack, Incarnation: l.incarnation,
			ClusterId: a.cfg.ClusterID, KafkaAddress: a.cfg.KafkaAddress, DirIds: dirs,
		}
	}
	l.inFlight, l.lastSent = true, now
	l.sent++
	heartbeat, seq := l.registered, l.sent
	future := a.requestTo(ctx, target, req, lifecycleRequestTimeout)
	ctx.ReenterAfter(future, func(res any, err error) {
		a.onLifecycleAnswer(ctx, &lifecycleAnswer{seq: seq, heartbeat: heartbeat, res: res, err: err})
	})
}

// onLifecycleAnswer takes the answer to this node's registration or
// heartbeat.
func (a *controllerActor) onLifecycleAnswer(ctx actor.Context, m *lifecycleAnswer) {
	l := &a.life
	if m.seq != l.sent {
		return // sent to a controller that lost the lead since
	}
	l.inFlight = false
	if m.err != nil {
		a.logger.WithError(m.err).Debug("the active controller did not answer")
		a.noteFenced(m.err.Error())
		return
	}
	code, msg := errorOf(m.res)
	switch r, ok := m.res.(*messages.NodeHeartbeatResponse); {
	case code != messages.ErrorCode_NONE:
		a.noteFenced(code.String() + ": " + msg)
	case !m.heartbeat:
		a.noteFenced("registered, not yet unfenced")
	case ok && r.GetFenced():
		a.noteFenced("heartbeats answered with the node fenced")
	default:
		l.fencedSince = time.Time{}
	}
	switch {
	case code == messages.ErrorCode_DUPLICATE_BROKER_REGISTRATION && !m.heartbeat:
		// Held by a live node, or by this node's own process before a
		// restart, whose session lapses within a session timeout: retry
		// until then.
		now := a.cfg.Now()
		if l.duplicateSince.IsZero() {
			l.duplicateSince = now
		}
		if now.Sub(l.duplicateSince) <= a.cfg.SessionTimeout+a.cfg.HeartbeatInterval {
			a.logger.WithField("reason", msg).Warn("registration refused; retrying until the other session lapses")
			return
		}
		fallthrough
	case code == messages.ErrorCode_INCONSISTENT_CLUSTER_ID:
		l.refused = fmt.Errorf("node %d not registered: %s", a.cfg.NodeID, msg)
		a.logger.WithError(l.refused).Error("the cluster refused this node")
		a.answerWaiters(ctx)
	case code == messages.ErrorCode_BROKER_NOT_AVAILABLE && m.heartbeat:
		// The active controller does not know this incarnation: register
		// again.
		l.registered = false
	case code != messages.ErrorCode_NONE:
		a.logger.WithFields(logrus.Fields{"error": code.String(), "message": msg}).Debug("registration or heartbeat not taken; retrying")
	case !m.heartbeat:
		l.registered = true
		if r, ok := m.res.(*messages.RegisterNodeResponse); ok && a.cfg.ClusterID == "" && r.GetClusterId() != "" {
			a.cfg.ClusterID = r.GetClusterId()
			if a.cfg.SaveClusterID != nil {
				if err := a.cfg.SaveClusterID(r.GetClusterId()); err != nil {
					a.logger.WithError(err).Error("cluster id not recorded in the data dir")
				}
			}
		}
		a.logger.WithField("cluster", a.cfg.ClusterID).Info("node registered")
		// Heartbeat at once: it unfences the node once it caught up.
		a.sendLifecycle(ctx, a.cfg.Now())
	}
}

// fencedWarnAfter is how long this node may stay unregistered or fenced
// before it says so at warning level, and then how often it says it again.
const fencedWarnAfter = 10 * time.Second

// noteFenced notes that the answer to this node's registration or
// heartbeat leaves it out of service, for why, and logs a warning once
// that has lasted fencedWarnAfter: the refusals themselves are logged at
// debug level, and a node kept fenced holds no partition.
func (a *controllerActor) noteFenced(why string) {
	l := &a.life
	now := a.cfg.Now()
	if l.fencedSince.IsZero() {
		l.fencedSince = now
	}
	if now.Sub(l.fencedSince) < fencedWarnAfter || now.Sub(l.warnedAt) < fencedWarnAfter {
		return
	}
	l.warnedAt = now
	a.logger.WithFields(logrus.Fields{"for": now.Sub(l.fencedSince).Round(time.Second).String(), "last": why, "applied": a.applied, "controller": a.leader}).
		Warn("this node is not yet registered and unfenced")
}

// refreshLoad asks the placement actor for the node's bytes and write rate,
// for the next heartbeat.
func (a *controllerActor) refreshLoad(ctx actor.Context) {
	if a.cfg.Placement == nil {
		return
	}
	future := ctx.RequestFuture(a.cfg.Placement, &messages.DescribeLogDirsRequest{}, lifecycleRequestTimeout)
	ctx.ReenterAfter(future, func(res any, err error) {
		r, ok := res.(*messages.DescribeLogDirsResponse)
		if err != nil || !ok {
			return
		}
		var bytes int64
		var growth float64
		for _, d := range r.GetDirs() {
			bytes += d.GetBytes()
			growth += d.GetWriteBytesPerS()
		}
		a.life.bytes, a.life.growth = bytes, growth
	})
}

// onClusterNamed checks the cluster's id against the node's data dir.
func (a *controllerActor) onClusterNamed(id string) {
	if a.cfg.ClusterID != "" && a.cfg.ClusterID != id {
		a.life.refused = fmt.Errorf("node %d: its data dir belongs to cluster %s, the quorum's cluster is %s", a.cfg.NodeID, a.cfg.ClusterID, id)
		a.logger.WithError(a.life.refused).Error("wrong cluster")
	}
}

// onAwaitRegistration answers once the node is registered and unfenced.
func (a *controllerActor) onAwaitRegistration(ctx actor.Context) {
	a.life.waiters = append(a.life.waiters, ctx.Sender())
	a.answerWaiters(ctx)
}

// answerWaiters answers AwaitRegistration once there is an answer.
func (a *controllerActor) answerWaiters(ctx actor.Context) {
	l := &a.life
	var answer *actors.Registration
	if l.refused != nil {
		answer = &actors.Registration{Err: l.refused}
	} else if a.failed != nil {
		answer = &actors.Registration{Err: a.failed}
	} else if n, ok := a.image.Node(a.cfg.NodeID); ok && !n.Fenced && n.Incarnation == l.incarnation {
		if !a.caughtUp(ctx) {
			return
		}
		answer = &actors.Registration{}
	}
	if answer == nil {
		return
	}
	for _, w := range l.waiters {
		if w != nil {
			ctx.Send(w, answer)
		}
	}
	l.waiters = nil
}

// caughtUp reports whether the partition manager was told that the
// node's metadata caught up with the cluster's (actors.MetadataCaughtUp),
// and has it told if not: the image has the node unfenced in this
// incarnation, so it holds every change the active controller made before
// it unfenced the node, the leaderships its registration moved away
// included. The word goes after the steps queued for those changes, so
// that the manager has them first, and the node counts as registered
// (AwaitRegistration) once it went, so that a produce sent after that is
// taken.
func (a *controllerActor) caughtUp(ctx actor.Context) bool {
	l := &a.life
	if l.caughtUp || a.cfg.PartitionManager == nil {
		return true
	}
	if !l.caughtUpQueued {
		l.caughtUpQueued = true
		manager := a.cfg.PartitionManager
		a.acts = append(a.acts, act{outcome: &actOutcome{}, direct: true, reply: func(messages.ErrorCode, string) {
			ctx.Send(manager, &actors.MetadataCaughtUp{})
			l.caughtUp = true
			a.answerWaiters(ctx)
		}})
		a.runActs(ctx)
	}
	return l.caughtUp
}

// buildRegister generates the records that register a node, after checking
// its cluster and that its id is not held by another live process.
func (a *controllerActor) buildRegister(m *messages.RegisterNodeRequest) ([]*messages.MetadataRecord, func(), messages.ErrorCode, string) {
	finish := func() {}
	id := m.GetNodeId()
	if id <= 0 {
		return nil, finish, messages.ErrorCode_INVALID_REQUEST, fmt.Sprintf("node id %d: node ids are positive", id)
	}
	if cluster := a.image.ClusterID(); m.GetClusterId() != "" && cluster != "" && m.GetClusterId() != cluster {
		return nil, finish, messages.ErrorCode_INCONSISTENT_CLUSTER_ID,
			fmt.Sprintf("node %d's data dir belongs to cluster %s, not to this cluster %s", id, m.GetClusterId(), cluster)
	}
	now := a.cfg.Now()
	if n, ok := a.image.Node(id); ok {
		if n.Incarnation == m.GetIncarnation() {
			return nil, a.registered(id, m, now), messages.ErrorCode_NONE, ""
		}
		// The active controller's own node registering again is its own
		// restart; so is a node at the address the old one held.
		if s, live := a.life.sessions[id]; live && id != a.cfg.NodeID && !n.Fenced && n.Address != m.GetAddress() && now.Sub(s.lastSeen) < a.cfg.SessionTimeout {
			return nil, finish, messages.ErrorCode_DUPLICATE_BROKER_REGISTRATION,
				fmt.Sprintf("node id %d is held by a live node at %s", id, n.Address)
		}
	}
	if id != a.cfg.NodeID {
		// Another node's new incarnation fences its old one, leaderships
		// and ISR places included (metadata.Image.Register).
		return a.image.Register(m), a.registered(id, m, now), messages.ErrorCode_NONE, ""
	}
	// The active controller's own node has caught up by definition: it is
	// unfenced at once, keeping what it led.
	recs := []*messages.MetadataRecord{metadata.RegisterNode(m)}
	delta := metadata.NewDelta(a.image, nil)
	_ = delta.Replay(recs[0])
	recs = append(recs, delta.Apply().Unfence(id)...)
	return recs, a.registered(id, m, now), messages.ErrorCode_NONE, ""
}

// registered starts node id's session once its registration is applied,
// and makes it a member of the raft group, as a learner unless it is a
// voter.
func (a *controllerActor) registered(id int32, m *messages.RegisterNodeRequest, now time.Time) func() {
	return func() {
		a.life.sessions[id] = &session{incarnation: m.GetIncarnation(), lastSeen: now, caughtUp: a.applied}
		a.ensureMember(id)
	}
}

// ensureMember proposes node id as a raft learner when it is not a member.
func (a *controllerActor) ensureMember(id int32) {
	if a.peer == nil || a.peer.IsMember(uint64(id)) {
		return
	}
	if err := a.peer.AddLearner(uint64(id)); err != nil {
		a.logger.WithError(err).WithField("learner", id).Warn("learner not proposed")
	}
}

// onHeartbeat takes a node's heartbeat on the active controller; another
// node forwards it.
func (a *controllerActor) onHeartbeat(ctx actor.Context, m *messages.NodeHeartbeatRequest) {
	switch {
	case a.isLeader():
	case a.leader != 0:
		a.sendTo(ctx, a.controllerOf(int32(a.leader)), m, ctx.Sender())
		return
	default:
		ctx.Respond(&messages.NodeHeartbeatResponse{Error: messages.ErrorCode_NOT_CONTROLLER, ErrorMessage: "no active controller"})
		return
	}
	id := m.GetNodeId()
	n, ok := a.image.Node(id)
	s := a.life.sessions[id]
	if !ok || n.Incarnation != m.GetIncarnation() || s == nil {
		ctx.Respond(&messages.NodeHeartbeatResponse{Error: messages.ErrorCode_BROKER_NOT_AVAILABLE, ErrorMessage: fmt.Sprintf("node %d is not registered with this incarnation", id)})
		return
	}
	now := a.cfg.Now()
	s.lastSeen, s.lostAt, s.refusedAt = now, time.Time{}, time.Time{}
	s.bytes, s.growth = m.GetBytes(), m.GetGrowth()
	a.ensureMember(id)
	sender := ctx.Sender()
	reply := func(code messages.ErrorCode, msg string) {
		fenced := true
		if n, ok := a.image.Node(id); ok {
			fenced = n.Fenced
		}
		a.answer(ctx, sender, &messages.NodeHeartbeatResponse{Error: code, ErrorMessage: msg, Fenced: fenced})
	}
	switch {
	case m.GetShuttingDown() && !n.Fenced:
		a.logger.WithField("node", id).Info("controlled shutdown: node fenced")
		a.submit(ctx, &fenceChange{node: id, fenced: true}, reply)
	case n.Fenced && !m.GetShuttingDown() && m.GetApplied() >= s.caughtUp && now.Sub(s.fencedAt) >= a.cfg.HeartbeatInterval:
		// Fenced for a lapse a moment ago: it waits a heartbeat interval,
		// so that a flapping node is not fenced and unfenced in a loop.
		a.logger.WithField("node", id).Info("node unfenced")
		a.submit(ctx, &fenceChange{node: id, fenced: false}, reply)
	default:
		reply(messages.ErrorCode_NONE, "")
	}
}

// ControlledShutdown asks the controller, before the node stops, to move
// the node's leaderships away, as Kafka's controlled shutdown does: the
// active controller hands the quorum's lead to another voter first, then
// the node is fenced. It is answered with a *ShutdownDone once that is
// done, or after Timeout.
type ControlledShutdown struct {
	Timeout time.Duration
}

// ShutdownDone answers ControlledShutdown. Err is why leadership could not
// be moved in time; the node stops anyway.
type ShutdownDone struct {
	Err error
}

// shutdownStep retries a controlled shutdown until it is done.
type shutdownStep struct {
	sender   *actor.PID
	deadline time.Time
	// noLeaderSince is when the step first found no active controller.
	noLeaderSince time.Time
}

// onControlledShutdown moves the quorum's lead away from this node, if it
// has it, and then has the node fenced by the active controller.
func (a *controllerActor) onControlledShutdown(ctx actor.Context, s *shutdownStep) {
	now := a.cfg.Now()
	done := func(err error) {
		if s.sender != nil {
			ctx.Send(s.sender, &ShutdownDone{Err: err})
		}
	}
	if a.peer == nil || a.failed != nil || len(a.cfg.Voters) == 1 && a.isLeader() {
		done(nil)
		return
	}
	if now.After(s.deadline) {
		done(fmt.Errorf("node %d: leadership not moved away before the shutdown timeout", a.cfg.NodeID))
		return
	}
	retry := func() {
		ctx.ReenterAfter(actor.NewFuture(ctx.ActorSystem(), a.cfg.TickInterval), func(any, error) { a.onControlledShutdown(ctx, s) })
	}
	if a.isLeader() {
		if to := a.transferTarget(); to != 0 {
			a.peer.TransferLeadership(uint64(to))
			a.ready(ctx)
		}
		retry()
		return
	}
	if a.leader == 0 {
		if s.noLeaderSince.IsZero() {
			s.noLeaderSince = now
		}
		if now.Sub(s.noLeaderSince) > 2*time.Duration(a.cfg.ElectionTicks)*a.cfg.TickInterval {
			// The rest of the quorum is gone: there is no one to hand
			// anything to.
			done(fmt.Errorf("node %d: no active controller to hand leaderships to", a.cfg.NodeID))
			return
		}
		retry()
		return
	}
	s.noLeaderSince = time.Time{}
	req := &messages.NodeHeartbeatRequest{NodeId: a.cfg.NodeID, Incarnation: a.life.incarnation, Applied: a.applied, ShuttingDown: true}
	future := a.requestTo(ctx, a.controllerOf(int32(a.leader)), req, lifecycleRequestTimeout)
	ctx.ReenterAfter(future, func(res any, err error) {
		if r, ok := res.(*messages.NodeHeartbeatResponse); ok && err == nil && r.GetFenced() {
			a.logger.Info("controlled shutdown: this node is fenced")
			done(nil)
			return
		}
		retry()
	})
}

// transferTarget is the voter to hand the lead to: the one whose log is
// furthest along, 0 when there is none.
func (a *controllerActor) transferTarget() int32 {
	st := a.peer.Status()
	var best int32
	var bestMatch uint64
	for id, pr := range st.Progress {
		if int32(id) == a.cfg.NodeID || pr.IsLearner {
			continue
		}
		if _, voter := a.cfg.Voters[int32(id)]; !voter {
			continue
		}
		if best == 0 || pr.Match > bestMatch {
			best, bestMatch = int32(id), pr.Match
		}
	}
	return best
}
