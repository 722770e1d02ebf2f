package partition

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/depot-dev/depot/actors/partition/state"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

const (
	// DefaultReplicaLagMax is replica.lag.time.max.ms: a follower that has
	// not caught up with its leader for this long leaves the ISR. Kafka's
	// is 30 s; Depot's is shorter because a dead node leaves every ISR as
	// soon as the controller fences it (about a second after it dies), so
	// the lag time only decides how long acks=all waits for a follower
	// that is alive but cut off or stalled, and a follower's fetch, which
	// times out after replicaFetchTimeout, can be lost several times in a
	// row before it costs its place.
	DefaultReplicaLagMax = 10 * time.Second
	// alterPartitionTimeout bounds the wait for the controller's answer to
	// an ISR change; the leader then asks again.
	alterPartitionTimeout = 5 * time.Second
	// isrRetryBackoff is how long a leader whose ISR change was refused or
	// not answered waits before it asks again, unless a new partition
	// state comes first.
	isrRetryBackoff = time.Second
)

// The partition manager, the partitions and the replica fetchers exchange
// these within one node.
type (
	// replicaFetch is one partition's part of a follower's
	// ReplicaFetchRequest, its part-th, for its leader; wake asks the
	// partition to tell the manager of its next append when it has nothing
	// to send now.
	replicaFetch struct {
		gather  uint64
		part    int
		replica int32
		req     *messages.ReplicaFetchPartition
		wake    bool
	}
	// replicaFetched answers a replicaFetch: the response, and the frame
	// its records were read into (see partitionActor.readFramed), nil
	// when none.
	replicaFetched struct {
		gather uint64
		part   int
		resp   *messages.ReplicaFetchedPartition
		frame  []byte
	}
	// replicaWake tells the manager that a partition whose fetch found
	// nothing has appended.
	replicaWake struct {
		tp disk.TopicPartition
		// lingered is set on the wake that onReplicaWake put off.
		lingered bool
	}
	// epochQuery is one partition's part of an OffsetForLeaderEpochRequest.
	epochQuery struct {
		gather uint64
		q      *messages.EpochQuery
	}
	// epochAnswered answers an epochQuery.
	epochAnswered struct {
		gather uint64
		end    *messages.EpochEnd
	}
	// follow asks the manager to have the fetcher of leader fetch for the
	// partition in leader epoch epoch, from its log end logEnd after
	// truncating from latestEpoch (none to truncate when negative);
	// throttled while it catches up as a replica a reassignment adds.
	follow struct {
		tp          disk.TopicPartition
		pid         *actor.PID
		leader      int32
		address     string
		epoch       int32
		latestEpoch int32
		logEnd      int64
		throttled   bool
	}
	// unfollow takes the partition off every fetcher.
	unfollow struct{ tp disk.TopicPartition }
	// throttleFollow tells the fetchers whether the partition catches up
	// as a replica a reassignment adds, throttled, or no longer.
	throttleFollow struct {
		tp        disk.TopicPartition
		throttled bool
	}
	// truncateTo is a fetcher's leader's answer to the partition's epoch
	// query, in the partition's leader epoch epoch.
	truncateTo struct {
		epoch int32
		end   *messages.EpochEnd
	}
	// truncated answers truncateTo: done once the log no longer diverges
	// from the leader's, else ask again from latestEpoch; retry when the
	// partition could not truncate yet.
	truncated struct {
		tp          disk.TopicPartition
		epoch       int32
		done, retry bool
		latestEpoch int32
		logEnd      int64
	}
	// replicaRecords are a fetch answer from the leader for the partition,
	// in leader epoch epoch.
	replicaRecords struct {
		epoch int32
		resp  *messages.ReplicaFetchedPartition
	}
	// appended answers replicaRecords with the log end offset the next
	// fetch starts from; failed when the records were not taken and the
	// fetcher should wait before it fetches again; stale when the
	// partition no longer follows in that epoch.
	appended struct {
		tp            disk.TopicPartition
		epoch         int32
		logEnd        int64
		failed, stale bool
		// truncate asks for the truncation of a log that ends past the
		// leader's, from latestEpoch.
		truncate    bool
		latestEpoch int32
	}
	// isrTick has a leader look at its ISR.
	isrTick struct{}
	// produceExpiry answers the acks=all produces parked past their
	// timeout.
	produceExpiry struct{}
)

// assignmentOf is the state package's view of a partition state.
func assignmentOf(s *messages.PartitionState) state.Assignment {
	return state.Assignment{
		Leader: s.GetLeader(), LeaderEpoch: s.GetLeaderEpoch(), PartitionEpoch: s.GetPartitionEpoch(),
		Replicas: s.GetReplicas(), ISR: s.GetIsr(),
	}
}

// onPartitionState acts on the metadata's state of the partition: it leads
// or follows, in a new leader epoch or the same.
func (a *partitionActor) onPartitionState(ctx actor.Context, s *messages.PartitionState) {
	before := a.core.Role()
	change := a.core.Assign(assignmentOf(s), a.now())
	if change == state.AssignStale {
		return
	}
	a.leaderAddress = s.GetLeaderAddress()
	a.isrRetryAt = time.Time{}
	// An incarnation restarted after a failure starts from the newest
	// state, not the one the partition was spawned with.
	a.home.State = s
	if a.log != nil {
		a.log.SetLeaderEpoch(s.GetLeaderEpoch())
	}
	wasThrottled := a.throttled
	a.throttled = slices.Contains(s.GetAddingReplicas(), a.cfg.NodeID) && !slices.Contains(s.GetIsr(), a.cfg.NodeID)
	role := a.core.Role()
	if role == state.Follower {
		a.behavior.Become(a.following)
	} else {
		a.behavior.Become(a.leading)
	}
	if change == state.AssignNewEpoch || role != before {
		a.logger().WithFields(logrus.Fields{"role": roleName(role), "leader": s.GetLeader(), "leader_epoch": s.GetLeaderEpoch(), "isr": s.GetIsr()}).Debug("partition state")
	}
	switch role {
	case state.Follower:
		switch {
		case change == state.AssignNewEpoch || before != state.Follower:
			a.stopLeading(ctx)
			a.startFollowing(ctx)
		case a.throttled != wasThrottled:
			ctx.Send(ctx.Parent(), &throttleFollow{tp: a.tp, throttled: a.throttled})
		}
	default:
		if before == state.Follower {
			ctx.Send(ctx.Parent(), &unfollow{tp: a.tp})
		}
		if role == state.Leader && a.stopISRTick == nil {
			interval := a.lagMax() / 4
			a.stopISRTick = a.timers.SendRepeatedly(interval, interval, ctx.Self(), &isrTick{})
		}
		if role == state.Alone {
			a.stopISRTicks()
		}
		a.acknowledge(ctx)
	}
}

func roleName(r state.Role) string {
	switch r {
	case state.Leader:
		return "leader"
	case state.Follower:
		return "follower"
	}
	return "alone"
}

// lagMax is the partition's replica.lag.time.max.ms.
func (a *partitionActor) lagMax() time.Duration {
	if a.cfg.ReplicaLagMax > 0 {
		return a.cfg.ReplicaLagMax
	}
	return DefaultReplicaLagMax
}

func (a *partitionActor) stopISRTicks() {
	if a.stopISRTick != nil {
		a.stopISRTick()
		a.stopISRTick = nil
	}
}

// stopLeading answers what a leader had waiting: produces parked for
// acks=all and stashed for an allowance are answered NOT_LEADER_OR_FOLLOWER
// (their producer retries on the new leader, idempotently), and consumers'
// parked fetches with what there is.
func (a *partitionActor) stopLeading(ctx actor.Context) {
	a.stopISRTicks()
	a.wakeArmed = false
	msg := a.refused(fmt.Sprintf("node %d no longer leads the partition", a.cfg.NodeID))
	a.answerStash(ctx, messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, msg)
	for _, p := range a.parkedProduces.TakeAll() {
		p.response.Error, p.response.ErrorMessage = messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, msg
		ctx.Send(p.sender, p.response)
	}
	a.answerParked(ctx)
}

// startFollowing hands the partition to the fetcher of its leader, which
// first truncates it to where its log agrees with the leader's. A log with
// no leader epoch has nothing to ask about: it keeps what is below its high
// watermark, as Kafka's followers did before leader epochs.
func (a *partitionActor) startFollowing(ctx actor.Context) {
	leader := a.core.Assignment().Leader
	if leader < 0 || a.log == nil {
		ctx.Send(ctx.Parent(), &unfollow{tp: a.tp})
		return
	}
	latest := a.log.LatestEpoch()
	if latest < 0 && a.core.HighWatermark() < a.log.EndOffset() {
		if err := a.truncate(ctx, a.core.HighWatermark()); err != nil {
			a.logger().WithError(err).Error("truncation to the high watermark failed")
		}
	}
	ctx.Send(ctx.Parent(), &follow{
		tp: a.tp, pid: ctx.Self(), leader: leader, address: a.leaderAddress,
		epoch: a.core.LeaderEpoch(), latestEpoch: latest, logEnd: a.log.EndOffset(), throttled: a.throttled,
	})
}

// truncate cuts the log, and the future log of a move, to offset, and
// rebuilds producer state from what is left.
func (a *partitionActor) truncate(ctx actor.Context, offset int64) error {
	if offset >= a.log.EndOffset() {
		return nil
	}
	before := a.log.EndOffset()
	if err := a.log.TruncateTo(offset); err != nil {
		a.dirFailed(ctx, err)
		return err
	}
	if err := a.truncateFuture(offset); err != nil {
		a.abortMove(ctx, messages.ErrorCode_KAFKA_STORAGE_ERROR, fmt.Sprintf("truncating the future log: %v", err))
	}
	a.core.Truncated(a.log.EndOffset())
	a.core.ResetProducers()
	if err := a.log.ScanHeaders(a.log.StartOffset(), func(h wire.Header) error {
		a.core.Recovered(&h)
		return nil
	}); err != nil {
		a.logger().WithError(err).Warn("producer state rebuilt from a damaged log: idempotence checks may refuse a retry")
	}
	a.logger().WithFields(logrus.Fields{"from": before, "to": a.log.EndOffset(), "leader_epoch": a.core.LeaderEpoch()}).Info("log truncated to the leader's")
	a.report(ctx, false)
	return nil
}

// epochRefusal refuses a request that names a leader epoch other than the
// partition's: an older one is fenced, a newer one not known yet.
func (a *partitionActor) epochRefusal(epoch int32) (messages.ErrorCode, string) {
	switch mine := a.core.LeaderEpoch(); {
	case epoch < mine:
		return messages.ErrorCode_FENCED_LEADER_EPOCH, a.refused(fmt.Sprintf("leader epoch %d is older than the partition's %d", epoch, mine))
	case epoch > mine:
		return messages.ErrorCode_UNKNOWN_LEADER_EPOCH, a.refused(fmt.Sprintf("leader epoch %d is newer than the partition's %d", epoch, mine))
	}
	return messages.ErrorCode_NONE, ""
}

// notLeader refuses what only a leader answers.
func (a *partitionActor) notLeader() (messages.ErrorCode, string) {
	leader := a.core.Assignment().Leader
	if leader < 0 {
		return messages.ErrorCode_LEADER_NOT_AVAILABLE, a.refused("the partition has no leader")
	}
	return messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, a.refused(fmt.Sprintf("node %d follows; node %d leads in epoch %d", a.cfg.NodeID, leader, a.core.LeaderEpoch()))
}

// onReplicaFetch answers a follower's fetch: the leader takes the offset
// it fetches from as its log end, which may move the high watermark and
// the ISR, and sends it the batches from there, up to the log end.
func (a *partitionActor) onReplicaFetch(ctx actor.Context, m *replicaFetch) {
	req := m.req
	resp := &messages.ReplicaFetchedPartition{Topic: a.tp.Topic, Partition: a.tp.Partition, FetchOffset: req.GetFetchOffset()}
	answer := &replicaFetched{gather: m.gather, part: m.part, resp: resp}
	defer func() { ctx.Respond(answer) }()
	switch {
	case a.log == nil:
		resp.Error, resp.ErrorMessage = a.unavailable()
		return
	case a.core.Role() != state.Leader:
		resp.Error, resp.ErrorMessage = a.notLeader()
		return
	}
	if code, msg := a.epochRefusal(req.GetCurrentLeaderEpoch()); code != messages.ErrorCode_NONE {
		resp.Error, resp.ErrorMessage = code, msg
		return
	}
	offset := req.GetFetchOffset()
	resp.LogStartOffset = a.core.LogStartOffset()
	if offset < a.core.LogStartOffset() || offset > a.core.LogEndOffset() {
		resp.HighWatermark = a.core.HighWatermark()
		resp.Error = messages.ErrorCode_OFFSET_OUT_OF_RANGE
		resp.ErrorMessage = a.refused(fmt.Sprintf("replica fetch from %d outside [%d, %d]", offset, a.core.LogStartOffset(), a.core.LogEndOffset()))
		return
	}
	readable := a.core.FollowerFetch(m.replica, offset, a.now())
	a.wakeFetches(ctx, readable)
	a.acknowledge(ctx)
	a.maybeAlterISR(ctx)
	resp.HighWatermark = a.core.HighWatermark()
	if offset < a.core.LogEndOffset() {
		maxBytes := int(req.GetMaxBytes())
		if maxBytes <= 0 {
			maxBytes = defaultFetchMaxBytes
		}
		records, frame, err := a.readFramed(offset, maxBytes, nil)
		if err != nil {
			resp.Error, resp.ErrorMessage = messages.ErrorCode_KAFKA_STORAGE_ERROR, a.refused(messages.ErrorText(err))
			a.logger().WithError(err).Error("read for a follower failed")
			return
		}
		resp.Records, answer.frame = records, frame
	}
	if len(resp.Records) == 0 && m.wake {
		a.wakeArmed = true
	}
}

// appendedForFollowers tells the manager of an append that a follower's
// fetch waits for.
func (a *partitionActor) appendedForFollowers(ctx actor.Context) {
	if a.wakeArmed {
		a.wakeArmed = false
		ctx.Send(ctx.Parent(), &replicaWake{tp: a.tp})
	}
}

// onEpochQuery answers a follower's OffsetForLeaderEpoch for the partition.
func (a *partitionActor) onEpochQuery(ctx actor.Context, m *epochQuery) {
	end := &messages.EpochEnd{Topic: a.tp.Topic, Partition: a.tp.Partition, LeaderEpoch: state.NoLeaderEpoch, EndOffset: -1}
	defer ctx.Respond(&epochAnswered{gather: m.gather, end: end})
	switch {
	case a.log == nil:
		end.Error, end.ErrorMessage = a.unavailable()
		return
	case a.core.Role() != state.Leader && a.core.Role() != state.Alone:
		end.Error, end.ErrorMessage = a.notLeader()
		return
	}
	if code, msg := a.epochRefusal(m.q.GetCurrentLeaderEpoch()); code != messages.ErrorCode_NONE {
		end.Error, end.ErrorMessage = code, msg
		return
	}
	end.LeaderEpoch, end.EndOffset = a.endOffsetForEpoch(m.q.GetLeaderEpoch())
}

// endOffsetForEpoch is the leader's answer to an epoch query: the log's,
// as if its cache held its own epoch from its log end. A leader records
// its epoch with its first batch, not when it is elected (one checkpoint
// write per partition per election saved), so until it appends, an epoch
// a follower has between the log's latest and the leader's own ends at the
// log end, as it would with the entry Kafka writes on election.
func (a *partitionActor) endOffsetForEpoch(epoch int32) (int32, int64) {
	mine, latest, end := a.core.LeaderEpoch(), a.log.LatestEpoch(), a.log.EndOffset()
	switch {
	case epoch < 0 || epoch > mine:
		return state.NoLeaderEpoch, -1
	case epoch == mine:
		return mine, end
	case latest < mine && epoch > latest && latest >= 0:
		return latest, end
	case latest < 0:
		return epoch, end
	}
	return a.log.EndOffsetForEpoch(epoch)
}

// onTruncateTo truncates a follower's log where the leader's answer to its
// epoch query says it diverges.
func (a *partitionActor) onTruncateTo(ctx actor.Context, m *truncateTo) {
	resp := &truncated{tp: a.tp, epoch: m.epoch}
	defer ctx.Respond(resp)
	if a.log == nil || a.core.Role() != state.Follower || a.core.LeaderEpoch() != m.epoch {
		resp.retry = true
		return
	}
	if code := m.end.GetError(); code != messages.ErrorCode_NONE {
		resp.retry, resp.latestEpoch, resp.logEnd = true, a.log.LatestEpoch(), a.log.EndOffset()
		return
	}
	offset, done := state.TruncationOffset(m.end.GetLeaderEpoch(), m.end.GetEndOffset(), a.log.EndOffsetForEpoch, a.log.EndOffset(), a.core.HighWatermark())
	if offset < a.log.EndOffset() {
		if a.flushing != nil {
			// A flush from the partition's days as leader is still running:
			// the log cuts no file under it.
			resp.retry, resp.latestEpoch, resp.logEnd = true, a.log.LatestEpoch(), a.log.EndOffset()
			return
		}
		if err := a.truncate(ctx, offset); err != nil {
			resp.retry = true
			return
		}
	}
	resp.done, resp.latestEpoch, resp.logEnd = done, a.log.LatestEpoch(), a.log.EndOffset()
}

// onReplicaRecords appends the leader's batches as they are, when they
// start at the log end, and takes the leader's high watermark and log
// start.
func (a *partitionActor) onReplicaRecords(ctx actor.Context, m *replicaRecords) {
	resp := &appended{tp: a.tp, epoch: m.epoch}
	defer ctx.Respond(resp)
	if a.log == nil || a.core.Role() != state.Follower || a.core.LeaderEpoch() != m.epoch {
		resp.stale = true
		return
	}
	r := m.resp
	resp.logEnd = a.log.EndOffset()
	switch r.GetError() {
	case messages.ErrorCode_NONE:
	case messages.ErrorCode_OFFSET_OUT_OF_RANGE:
		if r.GetLogStartOffset() > a.log.EndOffset() {
			// The leader no longer has what follows our end: start again
			// at its log start, as Kafka's follower does.
			if a.flushing == nil {
				a.restartAt(ctx, r.GetLogStartOffset())
			}
			resp.logEnd = a.log.EndOffset()
			resp.failed = a.log.EndOffset() != r.GetLogStartOffset()
			return
		}
		resp.truncate, resp.latestEpoch = true, a.log.LatestEpoch()
		return
	default:
		resp.failed = true
		return
	}
	if r.GetFetchOffset() != a.log.EndOffset() {
		return // an answer to an older fetch: the next starts at our end
	}
	if refusal := a.allowanceRefusal(ctx, len(r.GetRecords())); refusal != "" || a.dirFull != "" {
		resp.failed = true
		return
	}
	readable := 0
	for rest := r.GetRecords(); len(rest) > 0; {
		size, err := wire.PeekSize(rest)
		if err == nil && size > len(rest) && len(rest) < len(r.GetRecords()) {
			break // a partial batch at the end of max_bytes
		}
		var h wire.Header
		if err == nil {
			h, err = wire.Validate(rest[:min(size, len(rest))])
		}
		if err != nil {
			a.logger().WithError(err).Error("a batch from the leader does not validate; fetching it again")
			resp.failed = true
			break
		}
		batch := rest[:h.Size()]
		rest = rest[h.Size():]
		if _, err := a.log.AppendAsFollower(batch, h); err != nil {
			code, msg := a.appendError(ctx, err)
			a.logger().WithFields(logrus.Fields{"error": code.String(), "offset": h.BaseOffset}).Warn("follower append failed: " + msg)
			resp.failed = true
			break
		}
		a.appendedBytes += int64(len(batch))
		readable += a.core.Appended(&h, len(batch))
	}
	readable += a.core.LeaderHighWatermark(r.GetHighWatermark())
	a.wakeFetches(ctx, readable)
	if start := r.GetLogStartOffset(); start > a.log.StartOffset() && start <= a.core.HighWatermark() && a.flushing == nil {
		if err := a.log.DeleteBefore(start); err != nil {
			a.dirFailed(ctx, err)
		} else {
			a.core.StartMoved(a.log.StartOffset())
		}
	}
	a.afterAppend(ctx)
	resp.logEnd = a.log.EndOffset()
}

// restartAt empties the log and has it start at offset.
func (a *partitionActor) restartAt(ctx actor.Context, offset int64) {
	if err := a.log.TruncateFullyAndStartAt(offset); err != nil {
		if !errors.Is(err, disk.ErrNoSpace) {
			a.dirFailed(ctx, err)
		}
		return
	}
	a.abortMove(ctx, messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, "the log was emptied to start at its leader's log start")
	a.core.Opened(a.log.StartOffset(), a.log.EndOffset(), a.log.RecoveryPoint())
	a.core.ResetProducers()
	a.logger().WithField("start_offset", offset).Info("log emptied to start at the leader's log start")
	a.report(ctx, false)
}

// maybeAlterISR asks the controller for the ISR change the leader's view of
// its followers calls for, if any, one at a time.
func (a *partitionActor) maybeAlterISR(ctx actor.Context) {
	if a.cfg.Controller == nil || a.now().Before(a.isrRetryAt) {
		return
	}
	isr, ok := a.core.ISRProposal(a.now(), a.lagMax())
	if !ok {
		return
	}
	as := a.core.Assignment()
	req := &messages.AlterPartitionRequest{
		Topic: a.tp.Topic, Partition: a.tp.Partition, Leader: a.cfg.NodeID,
		LeaderEpoch: as.LeaderEpoch, PartitionEpoch: as.PartitionEpoch, Isr: isr,
	}
	a.logger().WithFields(logrus.Fields{"isr": as.ISR, "to": isr}).Info("asking for an ISR change")
	future := ctx.RequestFuture(a.cfg.Controller, req, alterPartitionTimeout)
	ctx.ReenterAfter(future, func(res any, err error) {
		a.core.ISRAnswered()
		resp, _ := res.(*messages.AlterPartitionResponse)
		switch {
		case err != nil:
			a.isrRetryAt = a.now().Add(isrRetryBackoff)
			a.logger().WithError(err).Warn("ISR change not answered; asking again")
		case resp.GetError() != messages.ErrorCode_NONE:
			// Asked again only after a while, or once the metadata says
			// more: a follower the controller will not take (fenced), asked
			// for on every fetch, would flood its change queue.
			a.isrRetryAt = a.now().Add(isrRetryBackoff)
			a.logger().WithFields(logrus.Fields{"error": resp.GetError().String(), "reason": resp.GetErrorMessage()}).Warn("ISR change refused")
		case resp.GetLeader() != a.cfg.NodeID || resp.GetLeaderEpoch() != a.core.LeaderEpoch():
			// The change made another leader (a reassignment completed
			// without this node), or one came since: the metadata brings
			// the partition's new state.
		default:
			a.cfg.Metrics.isrChanged(as.ISR, resp.GetIsr())
			a.core.Assign(state.Assignment{
				Leader: a.cfg.NodeID, LeaderEpoch: resp.GetLeaderEpoch(), PartitionEpoch: resp.GetPartitionEpoch(),
				Replicas: resp.GetReplicas(), ISR: resp.GetIsr(),
			}, a.now())
		}
		a.acknowledge(ctx)
	})
}

// acknowledge answers the acks=all produces whose batches every member of
// the ISR has and an fsync covers; those answered while the ISR is below
// min.insync.replicas get NOT_ENOUGH_REPLICAS_AFTER_APPEND, as Kafka's.
func (a *partitionActor) acknowledge(ctx actor.Context) {
	ready := a.parkedProduces.Ready(a.core.AcknowledgedOffset())
	if len(ready) == 0 {
		return
	}
	if !a.core.EnoughReplicas(a.cfg.Config.MinInsyncReplicas) {
		msg := a.refused(fmt.Sprintf("ISR %v is below min.insync.replicas %d", a.core.ISR(), a.cfg.Config.MinInsyncReplicas))
		for i := range ready {
			ready[i].response.Error, ready[i].response.ErrorMessage = messages.ErrorCode_NOT_ENOUGH_REPLICAS_AFTER_APPEND, msg
		}
	}
	a.answerParkedProduces(ctx, ready, nil)
}

// onISRTick has a leader drop the followers that lag, and take back those
// that caught up.
func (a *partitionActor) onISRTick(ctx actor.Context) {
	if a.core.Role() != state.Leader {
		a.stopISRTicks()
		return
	}
	a.maybeAlterISR(ctx)
}

// scheduleProduceExpiry sets the timer of the earliest timeout of the
// parked produces, unless one is set.
func (a *partitionActor) scheduleProduceExpiry(ctx actor.Context) {
	at, ok := a.parkedProduces.NextExpiry()
	if !ok || a.expiryArmed {
		return
	}
	a.expiryArmed = true
	a.timers.SendOnce(max(at.Sub(a.now()), time.Millisecond), ctx.Self(), &produceExpiry{})
}

// onProduceExpiry answers the acks=all produces whose batches the ISR did
// not acknowledge within their timeout with REQUEST_TIMED_OUT, as Kafka's
// delayed produce does: they may yet be replicated, and the producer's
// retry is idempotent.
func (a *partitionActor) onProduceExpiry(ctx actor.Context) {
	a.expiryArmed = false
	expired := a.parkedProduces.Expired(a.now())
	if len(expired) > 0 {
		msg := a.refused(fmt.Sprintf("not acknowledged by the ISR %v within the request's timeout", a.core.ISR()))
		for _, p := range expired {
			p.response.Error, p.response.ErrorMessage = messages.ErrorCode_REQUEST_TIMED_OUT, msg
			ctx.Send(p.sender, p.response)
		}
	}
	a.scheduleProduceExpiry(ctx)
}
