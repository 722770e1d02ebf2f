package partition

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/sirupsen/logrus"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/disks"
	"github.com/depot-dev/depot/actors/partition/state"
	"github.com/depot-dev/depot/actors/remote"
	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

const (
	// defaultFetchMaxBytes is used for a fetch that names no limit.
	defaultFetchMaxBytes = 1 << 20
	// maxFramePool bounds the buffer a fetch takes from its transport for
	// its records, whatever max_bytes asks: 4 MiB.
	maxFramePool = 4 << 20
	// partitionTickInterval is how often a partition applies retention,
	// rolls by age and reports its size to its log directory.
	partitionTickInterval = 10 * time.Second
	// reportStepBytes: a partition also reports its size to its log
	// directory whenever it has grown by this much since its last report.
	reportStepBytes = 4 << 20
	// reportDelay bounds how stale a log directory's view of a partition
	// that is written to gets: at most one report per partition per delay.
	reportDelay = time.Second
)

// PartitionConfig is what a partition actor needs to start.
type PartitionConfig struct {
	Topic     string
	Partition int32
	FS        disk.FS
	// Files is the node's file cache, which the partition's logs open
	// their segment files through (disk.Options.Files). Nil: the logs keep
	// their files open.
	Files *disk.FileCache
	// LogDir is the log directory (a disk) that holds the partition's
	// directory <LogDir>/<topic>-<partition>.
	LogDir string
	Config topic.Config
	// RecoveryPoint and LogStartOffset come from the log directory's
	// checkpoints; zero when unknown.
	RecoveryPoint  int64
	LogStartOffset int64
	// Transport is the actor system's remote state: fetch frames come from
	// its pool, and received produce requests are released to it.
	Transport *remote.Transport
	// Dispatcher runs the partition's mailbox: the node's
	// actors.WorkerDispatcher, shared by its partitions. Nil: protoactor's
	// default, a goroutine started for each message that finds the mailbox
	// empty.
	Dispatcher actor.Dispatcher
	// LogDirActor receives the partition's reports (size, recovery point)
	// and its final report when it stops. May be nil.
	LogDirActor *actor.PID
	// Flusher runs the partition's group commits with those of the other
	// partitions of its log dir, in passes (disks.FlusherOf(LogDirActor)).
	// Nil: the partition runs each fsync on a goroutine of its own, as it
	// also does when its flusher is gone.
	Flusher *actor.PID
	// TickInterval overrides partitionTickInterval when positive.
	TickInterval time.Duration
	// TickedByParent: the partition's parent sends it its partitionTicks,
	// and it keeps no timer of its own, as the partition manager does for
	// its children (one timer for all, where a node holds many idle
	// partitions). Default false: the partition ticks itself every
	// TickInterval.
	TickedByParent bool
	// NodeID is the node the replica is on; State is the metadata's state
	// of the partition when the replica starts (nil: the replica is alone,
	// as in tests of one partition).
	NodeID int32
	State  *messages.PartitionState
	// Controller takes the leader's ISR changes (AlterPartitionRequest):
	// the node's metadata actor. Nil: the ISR never changes.
	Controller *actor.PID
	// ReplicaLagMax is replica.lag.time.max.ms; DefaultReplicaLagMax when
	// zero.
	ReplicaLagMax time.Duration
	// Background leaves the log closed as the actor starts: it opens (and
	// recovers) on the partition's first request, which waits for it, or
	// on an openLog from the manager, and the actor then tells its parent
	// (logOpened). Default false: the log opens as the actor starts. An
	// incarnation restarted after a failure opens at once.
	Background bool
	// Now is the partition's clock, and its log's (disk.Options.Now):
	// segment.ms, retention.ms and flush.ms, a move's throttle and
	// duration. Default time.Now.
	Now    func() time.Time
	Logger *logrus.Entry
	// moveHook, when set, is called at each step of a move (moveStepCopy,
	// moveStepS2, moveStepS3, moveStepS4); an error fails the move there,
	// as an I/O error at that step would. Tests use it to stop a move.
	moveHook func(step string) error
	// Metrics take the partition's figures; nil records none.
	Metrics *Metrics
	// flushHook, when set, is called as each group commit's flush starts.
	flushHook func()
}

// deletePartition makes a partition actor remove its log before it stops;
// movedAway says its node no longer holds a replica of it, which a
// reassignment moved elsewhere, rather than that it was deleted.
type deletePartition struct{ movedAway bool }

// partitionTick drives retention, roll by age and reports.
type partitionTick struct{}

// openLog asks a partition started in the background to open its log now
// (see PartitionConfig.Background); one open already has told its parent
// so (logOpened).
type openLog struct{}

// logOpened tells the manager that a partition started in the background
// has opened its log, or failed to and is offline.
type logOpened struct{ tp disk.TopicPartition }

// reconfigure gives a partition its topic's configs after a change.
type reconfigure struct{ config topic.Config }

// reportSoon sends a report of bytes appended since the last one.
type reportSoon struct{}

// syncParked makes the partition start a flush for the acks=all produce
// requests that arrived before this message: a group commit.
type syncParked struct{}

// flushRun is a disk.FlushJob running off the partition's goroutine, so
// that the partition goes on appending during the fsync: in a pass of its
// log dir's flusher, or on a goroutine of its own. The partition learns of
// the end from a disks.Flushed message, and only waitForFlush, for a
// partition that stops, waits for it (disks.Flush.Wait).
type flushRun struct {
	log   *disk.Log // the log the job flushes
	flush *disks.Flush
	// started is when the partition asked for it.
	started time.Time
	// release is what becomes of log when the job ends, for a log the
	// partition let go of while the fsync ran.
	release logRelease
}

// logRelease is what becomes of a log the partition lets go of.
type logRelease int

const (
	releaseNone   logRelease = iota
	releaseClose             // the directory failed: close the files
	releaseRemove            // the partition is deleted: remove its directory
)

// afterFlush is the work that waits for the flush in flight to end,
// because the log refuses to close or remove a segment file while a
// disk.FlushJob runs. onFlushed does it after finishing the flush and
// before starting the next one, so that a stream of acks=all produces, which
// keeps a flush in flight almost all the time, delays it by one fsync at
// most (with a flusher, by the rest of the pass in flight and its own
// fsync). Appends, fetches and rolls do not wait.
type afterFlush struct {
	// swapMove is the id of a move whose future caught up with the log
	// while a flush was in flight: it catches up again and swaps.
	swapMove uint64
	// deleteRecords are DeleteRecordsRequests, answered once done.
	deleteRecords []deferredDeleteRecords
	// retention is a partitionTick's retention and report.
	retention bool
}

// deferredDeleteRecords is a valid DeleteRecordsRequest waiting in
// afterFlush: offset is what the log start offset is raised to.
type deferredDeleteRecords struct {
	sender *actor.PID
	offset int64
}

// fetchExpired ends the wait of a parked fetch.
type fetchExpired struct{ id uint64 }

// parkedProduce is an acks=all answer waiting in state.ParkedProduces.
type parkedProduce struct {
	sender   *actor.PID
	response *messages.ProduceResponse
	// parked is when its batches were appended.
	parked time.Time
}

// parkedFetch is a fetch waiting in state.ParkedFetches; cancel stops the
// timer of its max_wait_ms.
type parkedFetch struct {
	sender  *actor.PID
	request *messages.FetchRequest
	cancel  scheduler.CancelFunc
}

// partitionActor owns one partition's log and drives its state.Partition:
// the core decides (validation, idempotence, the high watermark, which
// parked requests to answer) and the actor does the I/O (the disk.Log, the
// sends, the timers). Not shared: all access is through its mailbox.
type partitionActor struct {
	// cfg is home: what the actor changes of its config (a move's new
	// dir, configs, the newest state) is what the next incarnation starts
	// from.
	cfg    *PartitionConfig
	tp     disk.TopicPartition
	log    *disk.Log
	logErr error // why the log is not open, when log is nil
	// recovered is what opening the log recovered, until the first report
	// has told the log dir.
	recovered *disk.Recovery
	// dirFull is why appends are refused while the log dir is full, ""
	// while it has room (see disks.LogDirFull).
	dirFull string
	// allowance is the room the log dir allows the log.
	allowance dirAllowance
	core      *state.Partition
	timers    *scheduler.TimerScheduler
	// stopTick stops the partitionTicks.
	stopTick scheduler.CancelFunc
	// tickEnd is the log end offset at the last partitionTick: a log that
	// has not grown since has gone idle.
	tickEnd int64

	// syncing is set while a syncParked is on its way; flushing is the
	// flush in flight, if any, and after the work waiting for its end.
	syncing        bool
	flushing       *flushRun
	after          afterFlush
	parkedProduces state.ParkedProduces[parkedProduce]
	parkedFetches  state.ParkedFetches[*parkedFetch]
	deleted        bool
	// movedAway is set with deleted when the partition's replica left the
	// node for another (see deletePartition).
	movedAway bool
	// appendedBytes counts the bytes appended since the actor started; the
	// log-dir actor derives the write rate from it.
	appendedBytes int64
	// reportedBytes is the appendedBytes of the last report;
	// reportPending is set while a reportSoon is on its way.
	reportedBytes int64
	reportPending bool

	// move is the running move to another log directory, if any; moveSeq
	// numbers moves so that a stale copyStep is recognised.
	move    *partitionMove
	moveSeq uint64
	// home is the config the next incarnation of the actor starts from,
	// shared with its props; only the live actor writes it.
	home *PartitionConfig

	// behavior is leading or following (see Receive).
	behavior actor.Behavior
	// leaderAddress is the actor address of the leader's node.
	leaderAddress string
	// wakeArmed is set while a follower's fetch found nothing new and its
	// manager waits to hear of the next append.
	wakeArmed bool
	// gatherWakes say when the manager waits to hear of what becomes
	// readable, for consumers' fetches of several partitions.
	gatherWakes gatherWakes
	// throttled is set while the partition follows as a replica a
	// reassignment adds, out of the ISR: its fetches are throttled.
	throttled bool
	// stopISRTick stops a leader's isrTicks; expiryArmed is set while a
	// produceExpiry is on its way.
	stopISRTick scheduler.CancelFunc
	expiryArmed bool
	// isrRetryAt holds back the next ISR change after one was refused.
	isrRetryAt time.Time
}

// NewPartitionProps returns the props of a partition actor.
func NewPartitionProps(cfg PartitionConfig) *actor.Props {
	// home is where the partition lives; a move changes it, so that an
	// actor restarted after a failure opens the log where it now is.
	home := &cfg
	return actors.Props(func() actor.Actor {
		a := &partitionActor{
			cfg:      home,
			home:     home,
			tp:       disk.TopicPartition{Topic: home.Topic, Partition: home.Partition},
			core:     state.NewPartition(home.Config.MaxMessageBytes),
			behavior: actor.NewBehavior(),
		}
		if home.Background {
			a.behavior.Become(a.dormant)
		} else {
			a.behavior.Become(a.leading)
		}
		return a
	}, cfg.Logger, actors.DispatchedBy(cfg.Dispatcher)...) // a panic's line names the actor, and so the partition
}

// logger is the partition's logger, with its topic, partition and log
// dir. It is made for each line, which are few (lifecycle, failures),
// rather than kept: a node holds many idle partitions.
func (a *partitionActor) logger() *logrus.Entry {
	return a.cfg.Logger.WithFields(logrus.Fields{"actor": "partition", "topic": a.cfg.Topic, "partition": a.cfg.Partition, "dir": a.cfg.LogDir})
}

// PartitionDir is the directory of a partition's log in a log directory.
func PartitionDir(logDir, topicName string, partition int32) string {
	return filepath.Join(logDir, disk.PartitionDirName(disk.TopicPartition{Topic: topicName, Partition: partition}))
}

// Receive hands each message to the replica's behaviour: leading (or
// alone) or following, which the metadata's partition state decides (see
// onPartitionState). Both share what any replica does (common).
func (a *partitionActor) Receive(ctx actor.Context) {
	a.behavior.Receive(ctx)
	if m, ok := ctx.Message().(*replicaRecords); ok {
		// Appended, or not to be: in every behaviour, the records
		// received from the leader are done with.
		a.cfg.Transport.ReleaseRecords(m.resp.GetRecords())
	}
}

// leading is the behaviour of a replica that leads its partition, or is
// alone in it: it takes produces, serves consumers and its followers'
// fetches and epoch queries, and keeps its ISR.
func (a *partitionActor) leading(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.ProduceRequest:
		if a.stashProduce(ctx, m) {
			return
		}
		a.onProduce(ctx, ctx.Sender(), m)
		a.cfg.Transport.Release(m)
	case *messages.FetchRequest:
		a.onFetch(ctx, m)
	case *messages.ListOffsetsRequest:
		a.onListOffsets(ctx, m)
	case *messages.DeleteRecordsRequest:
		a.onDeleteRecords(ctx, m)
	case *replicaFetch:
		a.onReplicaFetch(ctx, m)
	case *epochQuery:
		a.onEpochQuery(ctx, m)
	case *isrTick:
		a.onISRTick(ctx)
	case *truncateTo:
		ctx.Respond(&truncated{tp: a.tp, epoch: m.epoch, retry: true})
	case *replicaRecords:
		ctx.Respond(&appended{tp: a.tp, epoch: m.epoch, stale: true})
	default:
		a.common(ctx)
	}
}

// following is the behaviour of a replica that follows its partition's
// leader: it truncates and appends what its fetcher brings, and refuses
// what only a leader answers, naming the leader.
func (a *partitionActor) following(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *truncateTo:
		a.onTruncateTo(ctx, m)
	case *replicaRecords:
		a.onReplicaRecords(ctx, m)
	case *messages.ProduceRequest:
		a.onProduce(ctx, ctx.Sender(), m)
		a.cfg.Transport.Release(m)
	case *messages.FetchRequest:
		a.onFetch(ctx, m)
	case *messages.ListOffsetsRequest:
		a.onListOffsets(ctx, m)
	case *messages.DeleteRecordsRequest:
		resp := &messages.DeleteRecordsResponse{LowWatermark: -1}
		resp.Error, resp.ErrorMessage = a.notLeader()
		ctx.Respond(resp)
	case *replicaFetch:
		a.onReplicaFetch(ctx, m)
	case *epochQuery:
		a.onEpochQuery(ctx, m)
	case *isrTick:
		a.stopISRTicks()
	default:
		a.common(ctx)
	}
}

// common is what a replica does whatever its role: its log's lifecycle,
// flushes, retention and reports, its log dir's word, moves between log
// dirs, and the metadata's partition states.
func (a *partitionActor) common(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.onStarted(ctx)
	case *syncParked:
		a.syncing = false
		a.startFlush(ctx)
	case *disks.Flushed:
		a.onFlushed(ctx, m)
	case *actor.DeadLetterResponse:
		a.onDeadLetter(ctx)
	case *fetchExpired:
		a.onFetchExpired(ctx, m)
	case *partFetch:
		a.onPartFetch(ctx, m)
	case *messages.PartitionStatusRequest:
		ctx.Respond(a.status())
	case *partitionTick:
		a.onTick(ctx)
	case *reportSoon:
		a.reportPending = false
		if a.appendedBytes != a.reportedBytes {
			a.report(ctx, false)
		}
	case *disks.DirSpace:
		a.onDirSpace(m)
	case *disks.DirAllowance:
		a.onDirAllowance(ctx, m)
	case *disks.GoOffline:
		a.onOffline(ctx, m)
	case *deletePartition:
		a.movedAway = m.movedAway
		a.onDelete(ctx)
	case *messages.MovePartitionRequest:
		a.onMove(ctx, m)
	case *messages.PartitionState:
		a.onPartitionState(ctx, m)
	case *reconfigure:
		a.onReconfigure(m.config)
	case *produceExpiry:
		a.onProduceExpiry(ctx)
	case *copyStep:
		a.onCopyStep(ctx, m)
	case *actor.Stopping:
		a.onStopping(ctx)
	case *actor.Restarting:
		a.stopTicks()
		a.closeLog(ctx)
	case *actor.Stopped, *actor.Restart, *actor.ReceiveTimeout:
	case *openLog:
		// Opened since the manager asked, and the manager was told.
	case actor.AutoReceiveMessage, actor.SystemMessage:
	default:
		a.logger().WithField("type", fmt.Sprintf("%T", m)).Warn("unhandled message")
	}
}

// dormant is the behaviour of a partition started in the background
// whose log is not open yet (see PartitionConfig.Background). It keeps
// what it is told of its state, its configs and its log dir's room; a
// state that gives it other replicas opens the log at once, as does
// openLog; any other message opens it and is then handled as by an open
// partition, so that a request waits for the recovery instead of failing.
// Stopping, it has nothing to close, and its log dir keeps the
// checkpoints it read for it.
func (a *partitionActor) dormant(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.timers = scheduler.NewTimerScheduler(ctx)
	case *actor.Stopping, *actor.Stopped, *actor.Restarting, *actor.ReceiveTimeout, *partitionTick:
	case actor.AutoReceiveMessage, actor.SystemMessage:
	case *openLog:
		a.open(ctx)
	case *messages.PartitionState:
		if old := a.cfg.State; old != nil && newerState(old, m) {
			return
		}
		a.cfg.State = m
		if replicated(m) {
			a.open(ctx)
		}
	case *reconfigure:
		a.onReconfigure(m.config)
	case *disks.DirSpace:
		a.onDirSpace(m)
	case *disks.GoOffline:
		a.logErr = errors.New(m.Reason)
		a.home.Background = false
		a.behavior.Become(a.leading)
		if a.cfg.State != nil {
			a.onPartitionState(ctx, a.cfg.State)
		}
		if parent := ctx.Parent(); parent != nil {
			ctx.Send(parent, &logOpened{tp: a.tp})
		}
		a.logger().WithField("reason", m.Reason).Error("partition offline")
	default:
		a.open(ctx)
		a.behavior.Receive(ctx)
	}
}

// replicated reports whether s gives the partition more than one replica:
// a leader with followers, or a follower, which start with their node.
func replicated(s *messages.PartitionState) bool {
	return len(s.GetReplicas()) > 1 || len(s.GetAddingReplicas()) > 0
}

func (a *partitionActor) onStarted(ctx actor.Context) {
	a.timers = scheduler.NewTimerScheduler(ctx)
	a.open(ctx)
}

// open opens (and recovers) the partition's log, starts its ticks, rebuilds
// its producer state, reports to its log dir and takes the role its state
// gives it, and then tells its parent (logOpened), which may have been
// waiting for it since a start in the background, whatever incarnation
// opens it. A log that cannot open leaves the partition offline: every
// request is answered with KAFKA_STORAGE_ERROR.
func (a *partitionActor) open(ctx actor.Context) {
	if parent := ctx.Parent(); parent != nil {
		defer ctx.Send(parent, &logOpened{tp: a.tp})
	}
	// An incarnation restarted after a failure opens at once.
	a.home.Background = false
	a.behavior.Become(a.leading)
	if !a.cfg.TickedByParent {
		interval := a.cfg.TickInterval
		if interval <= 0 {
			interval = partitionTickInterval
		}
		a.stopTick = a.timers.SendRepeatedly(interval, interval, ctx.Self(), &partitionTick{})
	}

	started := a.now()
	log, err := disk.Open(a.cfg.FS, PartitionDir(a.cfg.LogDir, a.cfg.Topic, a.cfg.Partition), a.logOptions(a.cfg.RecoveryPoint, a.cfg.LogStartOffset))
	if err != nil {
		a.logErr = err
		a.logger().WithError(err).Error("cannot open partition log; partition offline")
		return
	}
	a.log = log
	a.newAllowance()
	a.core.SetReplica(a.cfg.NodeID, a.cfg.State.GetReplicas())
	a.core.Opened(log.StartOffset(), log.EndOffset(), log.RecoveryPoint())
	if err := log.ScanHeaders(log.StartOffset(), func(h wire.Header) error {
		a.core.Recovered(&h)
		return nil
	}); err != nil {
		a.logger().WithError(err).Warn("producer state rebuilt from a damaged log: idempotence checks may refuse a retry")
	}
	fields := logrus.Fields{
		"start_offset": log.StartOffset(),
		"end_offset":   log.EndOffset(),
		"producers":    a.core.ProducerCount(),
		"took":         a.now().Sub(started).Round(time.Millisecond),
	}
	if rec := log.Recovery(); rec.Recovered() {
		a.recovered = &rec
		fields["segments_validated"], fields["bytes_validated"], fields["bytes_truncated"] = rec.SegmentsValidated, rec.BytesValidated, rec.BytesTruncated
		a.logger().WithFields(fields).Info("partition log recovered")
	} else if a.cfg.Logger.Logger.IsLevelEnabled(logrus.DebugLevel) {
		a.logger().WithFields(fields).Debug("partition log opened")
	}
	a.report(ctx, false)
	if a.cfg.State != nil {
		a.onPartitionState(ctx, a.cfg.State)
	}
}

// onReconfigure applies the topic's configs after a change: the log's
// (segment.bytes and segment.ms from the next roll, retention.ms and
// retention.bytes from the next retention tick, flush.*,
// index.interval.bytes from the next append), max.message.bytes and
// min.insync.replicas from the next produce, and an incarnation restarted
// after a failure starts from them.
func (a *partitionActor) onReconfigure(config topic.Config) {
	a.cfg.Config = config
	a.home.Config = config
	a.core.SetMaxMessageBytes(config.MaxMessageBytes)
	for _, log := range []*disk.Log{a.log, a.futureLog()} {
		if log == nil {
			continue
		}
		if err := log.SetConfig(config.Log); err != nil {
			a.logger().WithError(err).Warn("topic configs not applied to the log")
		}
	}
	a.logger().Debug("topic configs applied")
}

// futureLog is the log a move in flight copies into, nil without one.
func (a *partitionActor) futureLog() *disk.Log {
	if a.move == nil {
		return nil
	}
	return a.move.future
}

// now reads the partition's clock.
func (a *partitionActor) now() time.Time {
	if a.cfg.Now != nil {
		return a.cfg.Now()
	}
	return time.Now()
}

// logOptions are the options to open one of the partition's logs with.
func (a *partitionActor) logOptions(recoveryPoint, logStartOffset int64) disk.Options {
	return disk.Options{
		Config:         a.cfg.Config.Log,
		RecoveryPoint:  recoveryPoint,
		LogStartOffset: logStartOffset,
		LeaderEpoch:    a.leaderEpochCap(),
		Now:            a.cfg.Now,
		Logger:         a.cfg.Logger,
		Files:          a.cfg.Files,
	}
}

// leaderEpochCap is the highest leader epoch a batch of the partition's
// logs may carry when they open: the one the metadata gave it.
func (a *partitionActor) leaderEpochCap() int32 {
	epoch := a.core.LeaderEpoch()
	if a.cfg.State != nil {
		epoch = max(epoch, a.cfg.State.GetLeaderEpoch())
	}
	return epoch
}

// unavailable returns the error code and message for a request when the
// log is not open.
func (a *partitionActor) unavailable() (messages.ErrorCode, string) {
	if a.movedAway {
		return messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, fmt.Sprintf("node %d no longer holds a replica of partition %s", a.cfg.NodeID, a.tp)
	}
	if a.deleted {
		return messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, fmt.Sprintf("partition %s was deleted", a.tp)
	}
	return messages.ErrorCode_KAFKA_STORAGE_ERROR, fmt.Sprintf("partition %s is offline: %s", a.tp, messages.ErrorText(a.logErr))
}

// refused is the error message of a refusal or a failure of this
// partition: its text, after the partition it is about.
func (a *partitionActor) refused(text string) string {
	return fmt.Sprintf("%s: %s", a.tp, text)
}

// onProduce appends m's batches and answers sender, once the acks asked
// for are met.
func (a *partitionActor) onProduce(ctx actor.Context, sender *actor.PID, m *messages.ProduceRequest) {
	resp := &messages.ProduceResponse{
		Topic:           m.Topic,
		Partition:       m.Partition,
		CorrelationId:   m.CorrelationId,
		BaseOffset:      -1,
		LogAppendTimeMs: -1,
	}
	answer := func() {
		if m.Acks != 0 && sender != nil {
			ctx.Send(sender, resp)
		}
	}
	if a.log == nil {
		resp.Error, resp.ErrorMessage = a.unavailable()
		answer()
		return
	}
	if a.core.Role() == state.Follower {
		resp.Error, resp.ErrorMessage = a.notLeader()
		answer()
		return
	}
	resp.LogStartOffset = a.core.LogStartOffset()
	if refusal := a.core.ValidateProduce(m.Acks, m.Records); refusal.Refused() {
		resp.Error, resp.ErrorMessage = refusal.Code, a.refused(refusal.Message)
		if refusal.Code == messages.ErrorCode_MESSAGE_TOO_LARGE {
			resp.MaxMessageBytes = a.core.MaxMessageBytes()
		}
		answer()
		return
	}
	if m.Acks == -1 && !a.core.EnoughReplicas(a.cfg.Config.MinInsyncReplicas) {
		// Retriable, and nothing was appended.
		resp.Error = messages.ErrorCode_NOT_ENOUGH_REPLICAS
		resp.ErrorMessage = a.refused(fmt.Sprintf("ISR %v is below min.insync.replicas %d", a.core.ISR(), a.cfg.Config.MinInsyncReplicas))
		a.refusedRecords(m.Records)
		answer()
		return
	}
	if a.dirFull != "" {
		// Retriable: the producer's retry is a new append once the dir
		// has room, and nothing of this one changed producer state.
		resp.Error, resp.ErrorMessage = messages.ErrorCode_KAFKA_STORAGE_ERROR, a.dirFull
		a.refusedRecords(m.Records)
		answer()
		return
	}
	if refusal := a.allowanceRefusal(ctx, len(m.Records)); refusal != "" {
		// As retriable, and as harmless to producer state.
		resp.Error, resp.ErrorMessage = messages.ErrorCode_KAFKA_STORAGE_ERROR, refusal
		a.refusedRecords(m.Records)
		answer()
		return
	}
	appended, readable, epoch := false, 0, a.core.LeaderEpoch()
	for rest := m.Records; len(rest) > 0; {
		size, _ := wire.PeekSize(rest) // validated above
		batch := rest[:size]
		rest = rest[size:]
		h, _ := wire.ParseHeader(batch) // validated above, CRC included
		check := a.core.CheckBatch(&h)
		if check.Refused() {
			resp.Error, resp.ErrorMessage = check.Code, a.refused(check.Message)
			break
		}
		if check.Duplicate != nil {
			if resp.BaseOffset < 0 {
				resp.BaseOffset = check.Duplicate.FirstOffset
			}
			continue
		}
		wire.SetLeaderEpoch(batch, epoch)
		h.LeaderEpoch = epoch
		res, err := a.log.AppendValidated(batch, h)
		if err != nil {
			resp.Error, resp.ErrorMessage = a.appendError(ctx, err)
			a.core.Refused(&h)
			break
		}
		appended = true
		a.appendedBytes += int64(len(batch))
		h.BaseOffset = res.BaseOffset
		readable += a.core.Appended(&h, len(batch))
		if resp.BaseOffset < 0 {
			resp.BaseOffset = res.BaseOffset
		}
	}
	if appended {
		a.wakeFetches(ctx, readable)
		a.afterAppend(ctx)
	}
	if m.Acks == -1 && appended && resp.Error == messages.ErrorCode_NONE {
		timeout := time.Duration(m.TimeoutMs) * time.Millisecond
		if timeout <= 0 {
			timeout = defaultGatherTimeout
		}
		a.parkedProduces.Park(a.core.LogEndOffset(), a.now().Add(timeout), parkedProduce{sender: sender, response: resp, parked: a.now()})
		a.scheduleProduceExpiry(ctx)
		if !a.syncing && a.flushing == nil {
			a.syncing = true
			ctx.Send(ctx.Self(), &syncParked{})
		}
		return
	}
	answer()
}

// afterAppend does what follows an append: followers waiting for it hear
// of it, the allowance counts it, and the log dir gets a report soon.
func (a *partitionActor) afterAppend(ctx actor.Context) {
	a.appendedForFollowers(ctx)
	a.appendedUnderAllowance(ctx)
	switch {
	case a.appendedBytes-a.reportedBytes >= reportStepBytes:
		a.report(ctx, false)
	case !a.reportPending:
		a.reportPending = true
		a.timers.SendOnce(reportDelay, ctx.Self(), &reportSoon{})
	}
}

// refusedRecords tells the core of each batch of records, a valid produce
// request's, that it was refused with a retriable error and not appended
// (see state.Partition.Refused).
func (a *partitionActor) refusedRecords(records []byte) {
	for rest := records; len(rest) > 0; {
		size, err := wire.PeekSize(rest) // validated
		if err != nil || size > len(rest) {
			return
		}
		if h, err := wire.ParseHeader(rest[:size]); err == nil {
			a.core.Refused(&h)
		}
		rest = rest[size:]
	}
}

// appendError classifies an append failure.
func (a *partitionActor) appendError(ctx actor.Context, err error) (messages.ErrorCode, string) {
	var corrupt *disk.CorruptionError
	switch {
	case errors.Is(err, wire.ErrBadCRC), errors.Is(err, wire.ErrShort), errors.Is(err, wire.ErrBadLength),
		errors.Is(err, wire.ErrBadMagic), errors.Is(err, wire.ErrRecordCount), errors.Is(err, wire.ErrCompression),
		errors.Is(err, wire.ErrLeaderEpoch):
		return messages.ErrorCode_CORRUPT_MESSAGE, a.refused(messages.ErrorText(err))
	case errors.As(err, &corrupt):
		a.logger().WithError(err).Error("log corrupt")
		return messages.ErrorCode_KAFKA_STORAGE_ERROR, a.refused(messages.ErrorText(err))
	}
	if errors.Is(err, disk.ErrNoSpace) {
		a.dirFailed(ctx, err)
		return messages.ErrorCode_KAFKA_STORAGE_ERROR, a.refused(a.dirFull)
	}
	a.logger().WithError(err).Error("append failed")
	a.dirFailed(ctx, err)
	return messages.ErrorCode_KAFKA_STORAGE_ERROR, a.refused(messages.ErrorText(err))
}

// dirFailed reports an I/O error to the log-dir actor, which takes the whole
// directory offline (and this partition with it) as Kafka does. A write
// that found the file system full is no failure: the log undid it, and the
// directory goes full, refusing appends until it has room, while this
// partition refuses them at once.
func (a *partitionActor) dirFailed(ctx actor.Context, err error) {
	if errors.Is(err, disk.ErrNoSpace) {
		if a.dirFull == "" {
			a.dirFull = fmt.Sprintf("log dir %s is full: a write found no room; appends resume once it has room", a.cfg.LogDir)
		}
		if a.cfg.LogDirActor != nil {
			ctx.Send(a.cfg.LogDirActor, &disks.LogDirNoSpace{TP: a.tp, Err: err})
		}
		return
	}
	if a.cfg.LogDirActor != nil {
		ctx.Send(a.cfg.LogDirActor, &disks.LogDirFailed{TP: a.tp, Err: err})
	}
}

// onDirSpace refuses appends while the log dir is full, and takes them
// again once it has room.
func (a *partitionActor) onDirSpace(m *disks.DirSpace) {
	if m.Full {
		a.dirFull = m.Reason
		return
	}
	a.dirFull = ""
}

// onOffline closes the log of a partition whose directory failed: from now
// on every request is answered with KAFKA_STORAGE_ERROR.
func (a *partitionActor) onOffline(ctx actor.Context, m *disks.GoOffline) {
	if a.log == nil {
		return
	}
	a.abortMove(ctx, messages.ErrorCode_KAFKA_STORAGE_ERROR, m.Reason)
	a.logErr = errors.New(m.Reason)
	log := a.log
	a.log = nil
	code, message := a.unavailable()
	a.answerStash(ctx, code, message)
	a.answerParkedProduces(ctx, a.parkedProduces.TakeAll(), nil)
	a.answerParked(ctx)
	a.runDeferred(ctx)
	a.releaseLog(ctx, log, releaseClose)
	a.logger().WithField("reason", m.Reason).Error("partition offline")
}

// startFlush starts the group commit of the acks=all batches parked so
// far: one fsync covers them all. It runs beside the partition, which
// appends the next group meanwhile: in the next pass of the log dir's
// flusher, with the group commits of the dir's other partitions, or on a
// goroutine of its own without a flusher. disks.Flushed brings the result
// back.
func (a *partitionActor) startFlush(ctx actor.Context) {
	if a.flushing != nil || a.parkedProduces.Len() == 0 {
		return
	}
	if a.core.DurableOffset() >= a.core.LogEndOffset() {
		// The disk has it all (a flush policy synced it, or the parked
		// produces wait for the followers): nothing to sync.
		a.acknowledge(ctx)
		return
	}
	if a.log == nil {
		a.answerParkedProduces(ctx, a.parkedProduces.TakeAll(), nil)
		return
	}
	job, err := a.log.StartFlush()
	if err != nil {
		a.flushFailed(ctx, err)
		return
	}
	if a.cfg.flushHook != nil {
		a.cfg.flushHook()
	}
	flush := disks.NewFlush(job, ctx.Self())
	a.flushing = &flushRun{log: a.log, flush: flush, started: time.Now()}
	if a.cfg.Flusher == nil {
		go flush.Run(ctx.ActorSystem().Root)
		return
	}
	// A request, so that a flusher that is gone answers with a dead letter.
	ctx.Request(a.cfg.Flusher, flush)
}

// onDeadLetter takes a message of the partition's that found no one: if
// the flush in flight went to a flusher that is gone and no one has run
// it, the partition runs it on a goroutine of its own (a flush run already
// is not run again).
func (a *partitionActor) onDeadLetter(ctx actor.Context) {
	if run := a.flushing; run != nil && !run.flush.Claimed() {
		a.logger().Warn("the log dir's flusher is gone; the partition syncs its own files")
		go run.flush.Run(ctx.ActorSystem().Root)
	}
}

// onFlushed finishes the flush that ended, does the work that waited for
// it, and starts the next flush if acks=all produces wait for one.
func (a *partitionActor) onFlushed(ctx actor.Context, m *disks.Flushed) {
	run := a.flushing
	if run == nil || run.flush != m.Flush {
		return // finished by waitForFlush, or an earlier incarnation's
	}
	a.cfg.Metrics.flushed(time.Since(run.started))
	a.flushing = nil
	a.finishFlush(ctx, run, m.Err)
	a.runDeferred(ctx)
	a.startFlush(ctx)
}

// waitForFlush blocks until the fsync in flight, if any, returns, then does
// what onFlushed does but start another. Only closeLog calls it: a
// partition that stops or restarts gets no later message to finish the
// flush in, and its log cannot close with a flush in flight. A flush still
// waiting for its flusher's pass runs here and now, so the wait is bounded
// by that one fsync.
func (a *partitionActor) waitForFlush(ctx actor.Context) {
	run := a.flushing
	if run == nil {
		return
	}
	err := run.flush.Wait()
	a.flushing = nil
	a.finishFlush(ctx, run, err)
	a.runDeferred(ctx)
}

// finishFlush ends run, whose fsync returned err: the recovery point rises
// and the parked produces it acknowledges are answered, or the failure is
// reported. A log let go of during the fsync is closed or removed now.
func (a *partitionActor) finishFlush(ctx actor.Context, run *flushRun, err error) {
	err = run.log.FinishFlush(run.flush.Job, err)
	if run.release != releaseNone {
		a.releaseLog(ctx, run.log, run.release)
		return
	}
	if err != nil {
		a.flushFailed(ctx, err)
		return
	}
	a.flushed(ctx, run.flush.Job.UpTo())
}

// runDeferred does the work in afterFlush. It is called when no flush is in
// flight on a.log: after one ended, or once a.log is gone (and then the
// work finds it gone).
func (a *partitionActor) runDeferred(ctx actor.Context) {
	after := a.after
	a.after = afterFlush{}
	if after.swapMove != 0 && a.move != nil && a.move.id == after.swapMove {
		a.catchUpAndSwap(ctx)
	}
	for _, d := range after.deleteRecords {
		resp := a.deleteRecords(ctx, d.offset)
		if d.sender != nil {
			ctx.Send(d.sender, resp)
		}
	}
	if after.retention {
		a.applyRetention(ctx)
	}
}

// releaseLog closes or removes log, which the partition has let go of: now,
// or when the fsync in flight on it ends.
func (a *partitionActor) releaseLog(ctx actor.Context, log *disk.Log, release logRelease) {
	if run := a.flushing; run != nil && run.log == log {
		run.release = release
		return
	}
	switch release {
	case releaseClose:
		_ = log.Close()
	case releaseRemove:
		if err := log.Delete(); err != nil {
			a.logger().WithError(err).Error("deleting partition log failed")
		}
		if a.cfg.LogDirActor != nil {
			ctx.Send(a.cfg.LogDirActor, &disks.PartitionReport{TP: a.tp, Deleted: true})
		}
		a.logger().Info("partition deleted")
	}
}

// flushParkedNow makes every parked produce durable with a flush on the
// partition's own goroutine and answers them; for a log about to close,
// with no flush in flight.
func (a *partitionActor) flushParkedNow(ctx actor.Context) {
	if a.parkedProduces.Len() == 0 {
		return
	}
	if a.log == nil {
		a.answerParkedProduces(ctx, a.parkedProduces.TakeAll(), nil)
		return
	}
	if err := a.log.Sync(); err != nil {
		a.flushFailed(ctx, err)
		return
	}
	a.flushed(ctx, a.log.EndOffset())
}

// flushFailed answers every parked produce with a storage error and takes
// the directory offline, as Kafka does on a failed fsync.
func (a *partitionActor) flushFailed(ctx actor.Context, err error) {
	if errors.Is(err, disk.ErrNoSpace) {
		a.logger().WithError(err).Warn("flush found the file system full; acks=all answered with a retriable error")
	} else {
		a.logger().WithError(err).Error("fsync failed")
	}
	a.answerParkedProduces(ctx, a.parkedProduces.TakeAll(), err)
	a.dirFailed(ctx, err)
}

// flushed takes an fsync that made the log durable below upTo, and answers
// the parked produces it acknowledges.
func (a *partitionActor) flushed(ctx actor.Context, upTo int64) {
	a.core.Flushed(upTo)
	a.acknowledge(ctx)
}

// answerParkedProduces sends the answers of parked produces: with err when
// it is not nil, with the partition's state when the log is gone, and as
// they are otherwise.
func (a *partitionActor) answerParkedProduces(ctx actor.Context, parked []parkedProduce, err error) {
	now := a.now()
	for _, p := range parked {
		a.cfg.Metrics.ackWaited(now.Sub(p.parked))
		switch {
		case err != nil:
			p.response.Error, p.response.ErrorMessage = messages.ErrorCode_KAFKA_STORAGE_ERROR, a.refused(messages.ErrorText(err))
		case a.log == nil:
			p.response.Error, p.response.ErrorMessage = a.unavailable()
		}
		ctx.Send(p.sender, p.response)
	}
}

func (a *partitionActor) onFetch(ctx actor.Context, m *messages.FetchRequest) {
	resp, frame, ok := a.fetch(m)
	if !ok && state.FetchMayWait(m.MaxWaitMs, m.MinBytes, len(resp.Records)) {
		p := &parkedFetch{sender: ctx.Sender(), request: m}
		id := a.parkedFetches.Park(len(resp.Records), int(m.MinBytes), p)
		p.cancel = a.timers.SendOnce(time.Duration(m.MaxWaitMs)*time.Millisecond, ctx.Self(), &fetchExpired{id: id})
		return
	}
	a.answerFetch(ctx, ctx.Sender(), m, resp, frame)
}

// answerFetch sends resp, the first answer to m, and when m asks for chunks
// reads and sends the rest of max_bytes one chunk at a time: each chunk is
// on its way to the consumer while the next is read. frame is what resp's
// records were read into (see fetchAt); a consumer of this actor system
// that asks to hand it back gets it with the answer (see
// remote.FetchFrame).
func (a *partitionActor) answerFetch(ctx actor.Context, to *actor.PID, m *messages.FetchRequest, resp *messages.FetchResponse, frame []byte) {
	if to == nil {
		ctx.Respond(resp) // to the dead letters, as any answer to nobody
		return
	}
	left := int(m.MaxBytes) - len(resp.Records)
	for m.ChunkBytes > 0 && m.ChunkBytes < m.MaxBytes && resp.Error == messages.ErrorCode_NONE && len(resp.Records) > 0 && left > 0 {
		next, ok := nextOffset(resp.Records)
		if !ok || next >= a.core.HighWatermark() {
			break
		}
		resp.More = true
		ctx.Send(to, a.cfg.Transport.FetchAnswer(ctx.ActorSystem(), to, m.HandBackFrame, resp, frame))
		resp, frame, _ = a.fetchAt(m, next, min(int(m.ChunkBytes), left))
		if len(resp.Records) > left {
			// Only the first batch of a fetch may go over max_bytes: this
			// one waits for the next fetch, which starts at resp.Offset.
			resp.Records, frame = nil, nil
		}
		left -= len(resp.Records)
	}
	resp.More = false
	ctx.Send(to, a.cfg.Transport.FetchAnswer(ctx.ActorSystem(), to, m.HandBackFrame, resp, frame))
}

// answerParkedFetch answers p with what the log holds now.
func (a *partitionActor) answerParkedFetch(ctx actor.Context, p *parkedFetch) {
	resp, frame, _ := a.fetch(p.request)
	a.answerFetch(ctx, p.sender, p.request, resp, frame)
}

// nextOffset is the offset after the last whole batch in records.
func nextOffset(records []byte) (int64, bool) {
	var it wire.BatchIterator
	it.SkipCRC = true // read back from the log, which checked its structure
	it.Reset(records)
	next, ok := int64(0), false
	for it.Next() {
		next, ok = it.Header().NextOffset(), true
	}
	return next, ok && it.Err() == nil
}

// fetch reads for m. ok is false when the answer may be parked: no error,
// just not enough bytes yet.
func (a *partitionActor) fetch(m *messages.FetchRequest) (*messages.FetchResponse, []byte, bool) {
	maxBytes := int(m.MaxBytes)
	if m.ChunkBytes > 0 && m.ChunkBytes < m.MaxBytes {
		maxBytes = int(m.ChunkBytes)
	}
	return a.fetchAt(m, m.Offset, maxBytes)
}

// fetchStart is the start of every answer to m from offset: resp with the
// partition's state, and below, the offset a consumer reads up to (the high
// watermark). done says that resp is the whole answer (an error, or
// nothing to read yet), and ok is then fetchAt's.
func (a *partitionActor) fetchStart(m *messages.FetchRequest, offset int64) (resp *messages.FetchResponse, below int64, done, ok bool) {
	resp = &messages.FetchResponse{
		Topic:         m.Topic,
		Partition:     m.Partition,
		CorrelationId: m.CorrelationId,
		Offset:        offset,
	}
	if a.log == nil {
		resp.Error, resp.ErrorMessage = a.unavailable()
		return resp, 0, true, true
	}
	resp.LeaderEpoch = a.core.LeaderEpoch()
	if a.core.Role() == state.Follower {
		resp.Error, resp.ErrorMessage = a.notLeader()
		return resp, 0, true, true
	}
	if m.CurrentLeaderEpoch != nil {
		if code, msg := a.epochRefusal(*m.CurrentLeaderEpoch); code != messages.ErrorCode_NONE {
			resp.Error, resp.ErrorMessage = code, msg
			return resp, 0, true, true
		}
	}
	resp.HighWatermark = a.core.HighWatermark()
	resp.LogStartOffset = a.core.LogStartOffset()
	if refusal := state.ValidateFetchSize(m.MaxBytes, m.ChunkBytes); refusal.Refused() {
		resp.Error, resp.ErrorMessage = refusal.Code, a.refused(refusal.Message)
		return resp, 0, true, true
	}
	below, readable, refusal := a.core.FetchFrom(offset)
	if refusal.Refused() {
		resp.Error, resp.ErrorMessage = refusal.Code, a.refused(refusal.Message)
		return resp, 0, true, true
	}
	if !readable {
		return resp, 0, true, false
	}
	return resp, below, false, false
}

// readFailed sets resp's error for err, an error of reading the log from
// offset.
func (a *partitionActor) readFailed(resp *messages.FetchResponse, offset int64, err error) {
	if errors.Is(err, disk.ErrOffsetOutOfRange) {
		resp.Error = messages.ErrorCode_OFFSET_OUT_OF_RANGE
		resp.ErrorMessage = a.refused(fmt.Sprintf("offset %d outside [%d, %d]", offset, resp.LogStartOffset, resp.HighWatermark))
		return
	}
	resp.Error, resp.ErrorMessage = messages.ErrorCode_KAFKA_STORAGE_ERROR, a.refused(messages.ErrorText(err))
	a.logger().WithError(err).Error("read failed")
}

// fetchAt is fetch from offset, up to maxBytes, of the records below the
// high watermark. The records are read into a frame: a buffer of the
// transport's pool holding remote.FetchRecordsReserve bytes of room and
// then the records, which remote.FetchMessage turns into the response's
// wire form in place. frame is nil when there are no records.
func (a *partitionActor) fetchAt(m *messages.FetchRequest, offset int64, maxBytes int) (*messages.FetchResponse, []byte, bool) {
	resp, below, done, ok := a.fetchStart(m, offset)
	if done {
		return resp, nil, ok
	}
	if maxBytes == 0 {
		maxBytes = defaultFetchMaxBytes
	}
	// The response owns the frame, since it may cross to another node or
	// stay with a client: it goes back to the pool only from a stream that
	// has written it, or from a local consumer that asked to hand it back
	// once it has (remote.FetchFrame).
	var keep func([]byte) []byte
	if below < a.core.LogEndOffset() {
		keep = func(records []byte) []byte { return state.RecordsBelow(records, below) }
	}
	records, frame, err := a.readFramed(offset, maxBytes, keep)
	if err != nil {
		a.readFailed(resp, offset, err)
		return resp, nil, true
	}
	resp.Records = records
	return resp, frame, false
}

// readFramed reads the batches from offset, up to maxBytes, into a frame
// of the transport's pool: remote.FetchRecordsReserve bytes of room, then
// the records, which the transport writes to another node as they lie
// (see remote.Transport.FetchMessage) and then takes back. keep, when not
// nil, cuts the records read to those it returns. frame is nil when there
// are no records, or too few to travel as a buffer of their own (under
// remote.InlineData): the stream would copy them and drop the frame, so
// they are copied now and the frame goes back, as a tailing reader's are.
func (a *partitionActor) readFramed(offset int64, maxBytes int, keep func([]byte) []byte) (records, frame []byte, err error) {
	// The frame is the size of what the read may bring (at the tail, what
	// was appended since the reader's last fetch), up to maxFramePool; the
	// read grows it past that when the data does.
	var buf *[]byte
	frame, err = a.log.ReadWith(offset, maxBytes, func(most int) []byte {
		buf = a.cfg.Transport.Frame(remote.FetchRecordsReserve + min(most, maxFramePool))
		return (*buf)[:remote.FetchRecordsReserve]
	})
	if buf == nil {
		return nil, nil, err
	}
	if err != nil {
		a.cfg.Transport.PutFrame(buf)
		return nil, nil, err
	}
	records = frame[remote.FetchRecordsReserve:]
	if keep != nil {
		records = keep(records)
	}
	switch {
	case len(records) == 0:
		a.cfg.Transport.PutFrame(buf)
		return nil, nil, nil
	case len(records) < remote.InlineData:
		records = bytes.Clone(records)
		a.cfg.Transport.PutFrame(buf)
		return records, nil, nil
	}
	return records, frame[:remote.FetchRecordsReserve+len(records)], nil
}

// wakeFetches answers the parked fetches that have their min_bytes now
// that readable more bytes can be read, and tells the manager for its
// gathers.
func (a *partitionActor) wakeFetches(ctx actor.Context, readable int) {
	a.wakeGathers(ctx, readable, false)
	for _, p := range a.parkedFetches.Readable(readable) {
		p.cancel()
		a.answerParkedFetch(ctx, p)
	}
}

func (a *partitionActor) onFetchExpired(ctx actor.Context, m *fetchExpired) {
	if p, ok := a.parkedFetches.Expire(m.id); ok {
		a.answerParkedFetch(ctx, p)
	}
}

func (a *partitionActor) onListOffsets(ctx actor.Context, m *messages.ListOffsetsRequest) {
	resp := &messages.ListOffsetsResponse{Offset: -1, Timestamp: -1}
	defer ctx.Respond(resp)
	if a.log == nil {
		resp.Error, resp.ErrorMessage = a.unavailable()
		return
	}
	if a.core.Role() == state.Follower {
		resp.Error, resp.ErrorMessage = a.notLeader()
		return
	}
	if offset, ok, refusal := a.core.ListOffset(m.Timestamp); ok {
		if refusal.Refused() {
			resp.Error, resp.ErrorMessage = refusal.Code, a.refused(refusal.Message)
			return
		}
		resp.Offset = offset
		return
	}
	offset, ts, err := a.log.OffsetForTimestamp(m.Timestamp)
	switch {
	case errors.Is(err, disk.ErrNotFound):
		// No record at or after the timestamp: -1, as Kafka answers.
	case err != nil:
		resp.Error, resp.ErrorMessage = messages.ErrorCode_KAFKA_STORAGE_ERROR, a.refused(messages.ErrorText(err))
	default:
		// A record past the high watermark is not readable yet.
		offset, refusal := a.core.TimestampOffset(offset)
		switch {
		case refusal.Refused():
			resp.Error, resp.ErrorMessage = refusal.Code, a.refused(refusal.Message)
		case offset >= 0:
			resp.Offset, resp.Timestamp = offset, ts
		}
	}
}

// onDeleteRecords raises the log start offset (Kafka's DeleteRecords):
// offset -1 means the high watermark; an offset past it is refused and
// changes nothing. A valid request is answered once its segments are
// deleted, after the flush in flight, if any.
func (a *partitionActor) onDeleteRecords(ctx actor.Context, m *messages.DeleteRecordsRequest) {
	if a.log == nil {
		resp := &messages.DeleteRecordsResponse{LowWatermark: -1}
		resp.Error, resp.ErrorMessage = a.unavailable()
		ctx.Respond(resp)
		return
	}
	offset, refusal := a.core.DeleteRecordsOffset(m.Offset)
	if refusal.Refused() {
		ctx.Respond(&messages.DeleteRecordsResponse{LowWatermark: a.core.LogStartOffset(), Error: refusal.Code, ErrorMessage: a.refused(refusal.Message)})
		return
	}
	if a.flushing != nil {
		a.after.deleteRecords = append(a.after.deleteRecords, deferredDeleteRecords{sender: ctx.Sender(), offset: offset})
		return
	}
	ctx.Respond(a.deleteRecords(ctx, offset))
}

// deleteRecords raises the log start offset to offset, valid when the
// request came, with no flush in flight.
func (a *partitionActor) deleteRecords(ctx actor.Context, offset int64) *messages.DeleteRecordsResponse {
	resp := &messages.DeleteRecordsResponse{LowWatermark: -1}
	if a.log == nil {
		resp.Error, resp.ErrorMessage = a.unavailable()
		return resp
	}
	if err := a.log.DeleteBefore(offset); err != nil {
		a.logger().WithError(err).Error("delete records failed")
		resp.Error, resp.ErrorMessage = messages.ErrorCode_KAFKA_STORAGE_ERROR, a.refused(messages.ErrorText(err))
		a.dirFailed(ctx, err)
		return resp
	}
	a.core.StartMoved(a.log.StartOffset())
	resp.LowWatermark = a.core.LogStartOffset()
	a.report(ctx, false)
	return resp
}

func (a *partitionActor) status() *messages.PartitionStatusResponse {
	resp := &messages.PartitionStatusResponse{Topic: a.cfg.Topic, Partition: a.cfg.Partition, LogDir: a.cfg.LogDir}
	if a.log == nil {
		resp.Error, resp.ErrorMessage = a.unavailable()
		return resp
	}
	resp.LogStartOffset = a.core.LogStartOffset()
	resp.LogEndOffset = a.core.LogEndOffset()
	resp.HighWatermark = a.core.HighWatermark()
	resp.SizeBytes = a.log.Size()
	resp.Segments = int32(len(a.log.Segments()))
	resp.RecoveryPoint = a.log.RecoveryPoint()
	if a.move != nil {
		resp.MovingTo = a.move.toDir
		resp.MoveCopiedBytes = a.move.copied
		resp.MoveFutureEndOffset = a.move.future.EndOffset()
		resp.MoveFutureBytes = a.move.future.Size()
	}
	return resp
}

// onTick rolls the active segment by age, and applies retention and
// reports, after the flush in flight if any: a roll may happen during a
// flush, a segment's deletion may not.
func (a *partitionActor) onTick(ctx actor.Context) {
	if a.log == nil {
		return
	}
	a.expireStash(ctx)
	if err := a.log.MaybeRoll(); err != nil {
		a.logger().WithError(err).Error("roll failed")
	}
	if a.flushing != nil {
		a.after.retention = true
		return
	}
	a.settleIfIdle(ctx)
	a.applyRetention(ctx)
}

// settleIfIdle syncs all that the log has written, index entries
// included, once it has gone a tick without an append: a file holding
// unsynced bytes stays open, pinned in the node's file cache, and an idle
// partition should hold no descriptor (see disk.Log.Settle). It costs
// nothing when all is synced.
func (a *partitionActor) settleIfIdle(ctx actor.Context) {
	end := a.log.EndOffset()
	idle := end == a.tickEnd
	a.tickEnd = end
	if !idle {
		return
	}
	if err := a.log.Settle(); err != nil {
		a.flushFailed(ctx, err)
		return
	}
	a.flushed(ctx, a.log.RecoveryPoint())
}

// applyRetention deletes the segments past retention and reports the
// partition's size, with no flush in flight. The report asks again for an
// allowance that has not come (see dirAllowance).
func (a *partitionActor) applyRetention(ctx actor.Context) {
	if a.log == nil {
		return
	}
	deleted, err := a.log.ApplyRetention()
	if err != nil {
		a.logger().WithError(err).Error("retention failed")
	}
	a.core.StartMoved(a.log.StartOffset())
	if deleted > 0 {
		a.logger().WithFields(logrus.Fields{"segments": deleted, "start_offset": a.core.LogStartOffset()}).Info("retention deleted segments")
	}
	a.report(ctx, false)
}

// report tells the log-dir actor the partition's size and recovery point.
func (a *partitionActor) report(ctx actor.Context, closed bool) {
	if a.cfg.LogDirActor == nil || a.log == nil {
		return
	}
	a.reportedBytes = a.appendedBytes
	recovered := a.recovered
	a.recovered = nil
	ctx.Send(a.cfg.LogDirActor, &disks.PartitionReport{
		Recovered:      recovered,
		TP:             a.tp,
		PID:            ctx.Self(),
		SizeBytes:      a.log.Size(),
		RecoveryPoint:  a.log.RecoveryPoint(),
		LogStartOffset: a.log.StartOffset(),
		AppendedBytes:  a.appendedBytes,
		RetentionBytes: a.cfg.Config.Log.RetentionBytes,
		RetentionMs:    topic.RetentionMillis(a.cfg.Config.Log.RetentionMs),
		Closed:         closed,
		Token:          a.allowance.token,
		AllowanceSeq:   a.allowance.last.Seq,
		Awaiting:       a.allowance.awaiting,
		Wanted:         a.allowance.wanted,
	})
}

func (a *partitionActor) onDelete(ctx actor.Context) {
	a.deleted = true
	a.abortMove(ctx, messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "partition deleted")
	if a.log == nil {
		return
	}
	a.answerParked(ctx)
	code, message := a.unavailable()
	a.answerStash(ctx, code, message)
	for _, p := range a.parkedProduces.TakeAll() {
		p.response.Error, p.response.ErrorMessage = a.unavailable()
		ctx.Send(p.sender, p.response)
	}
	log := a.log
	a.log = nil
	a.runDeferred(ctx)
	a.releaseLog(ctx, log, releaseRemove)
}

func (a *partitionActor) onStopping(ctx actor.Context) {
	a.stopTicks()
	a.closeLog(ctx)
}

// stopTicks stops the partition's own ticks and a leader's ISR ticks: an
// incarnation restarted after a failure starts its own.
func (a *partitionActor) stopTicks() {
	if a.stopTick != nil {
		a.stopTick()
		a.stopTick = nil
	}
	a.stopISRTicks()
}

// closeLog answers what is parked, closes the log cleanly (it syncs) and
// sends the final report with the recovery point for the checkpoint. It
// waits for the flush in flight, if any: the one wait in the actor (see
// waitForFlush).
func (a *partitionActor) closeLog(ctx actor.Context) {
	a.abortMove(ctx, messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, "partition stopped during the move")
	a.answerStash(ctx, messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, a.refused("partition stopped"))
	a.waitForFlush(ctx)
	if a.log == nil {
		return
	}
	a.flushParkedNow(ctx)
	a.answerParked(ctx)
	if err := a.log.Close(); err != nil {
		a.logger().WithError(err).Error("closing partition log failed")
		a.log = nil
		return
	}
	a.report(ctx, true)
	a.log = nil
}

// answerParked answers every parked fetch with what is there now, and
// has the manager ask its gathers' parts again.
func (a *partitionActor) answerParked(ctx actor.Context) {
	a.wakeGathers(ctx, 0, true)
	for _, p := range a.parkedFetches.TakeAll() {
		p.cancel()
		a.answerParkedFetch(ctx, p)
	}
}
