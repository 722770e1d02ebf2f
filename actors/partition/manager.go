package partition

import (
	"fmt"
	"runtime"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/disks"
	"github.com/depot-dev/depot/actors/remote"
	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
)

// PartitionManagerConfig is what the partition manager needs.
type PartitionManagerConfig struct {
	FS disk.FS
	// Files is the node's file cache, which every partition's logs open
	// their segment files through (disk.Options.Files). Nil: each log
	// keeps its files open.
	Files  *disk.FileCache
	NodeID int32
	// Transport is the actor system's remote state (see PartitionConfig).
	Transport *remote.Transport
	// LogDirs maps each log directory's path to its log-dir actor.
	LogDirs map[string]*actor.PID
	// DirIDs maps each log directory's path to its id.
	DirIDs map[string]string
	// Placement chooses the directory of each partition that is started
	// with none (a new one): the node's placement actor.
	Placement *actor.PID
	// PlacementTimeout bounds the wait for Placement. Default 10 s.
	PlacementTimeout time.Duration
	// Checkpoints maps each log directory's path to the checkpoints read at
	// start-up; a partition's entry is used when it is first started.
	Checkpoints map[string]disks.Checkpoints
	// TickInterval is how often the manager ticks its partitions with
	// open logs (retention, roll, reports), all from one timer; default
	// 10 s.
	TickInterval time.Duration
	// Controller takes the leaders' ISR changes: the node's metadata
	// actor. ReplicaLagMax is replica.lag.time.max.ms (see
	// DefaultReplicaLagMax).
	Controller    *actor.PID
	ReplicaLagMax time.Duration
	// ReplicaThrottle is the most bytes a second that the fetcher of one
	// leader node fetches, together, for the replicas a reassignment adds
	// to this node while they catch up, out of the ISR: the rate of a move
	// between log dirs (--move-throttle). 0 is unlimited.
	ReplicaThrottle int64
	// ReplicaFetchLinger is how long a follower's parked fetch that an
	// append woke waits for more appends before it is answered, when the
	// manager answered a follower's fetch less than that long ago (see
	// partitionManager.onReplicaWake). 0 answers at once.
	ReplicaFetchLinger time.Duration
	// Metrics take the partitions' and fetchers' figures; nil records
	// none.
	Metrics *Metrics
	// BackgroundOpens is how many logs of the partitions started in the
	// background (StartPartitionsRequest.background) the manager has
	// opening at a time, after its answer. Default 64: a recovery ends in
	// fsyncs, which overlap.
	BackgroundOpens int
	// AwaitMetadata has the manager refuse produces, with
	// NOT_LEADER_OR_FOLLOWER, until the node's metadata has caught up with
	// the cluster's (actors.MetadataCaughtUp). A node starts its
	// partitions from the metadata it had when it stopped; until it has
	// caught up, a partition it led then may since have a new leader, and
	// taking writes as the old one would acknowledge at acks=1 records that
	// the new leader's log truncates away, or refuse an idempotent
	// producer's next sequence as out of order.
	AwaitMetadata bool
	// Dispatcher runs the mailboxes of the manager and of its replica
	// fetchers (the partitions run on a pool of their own); nil:
	// protoactor's default (see actors.DispatchedBy).
	Dispatcher actor.Dispatcher
	Logger     *logrus.Entry
	// gatherParked, when set, is called as each gather parks (see
	// gather). Tests use it to act on a fetch that waits.
	gatherParked func()
}

// partitionManager starts and stops the node's partition actors, its
// children, and supervises them: a partition actor that panics is restarted
// (its log reopened and recovered), up to a few times a minute. Producers
// send it their requests for the node's partitions together, and it hands
// each to its partition and answers them together (see produceGathers);
// followers and consumers send it their fetches of several partitions,
// which it answers as Kafka's fetch purgatory does (see gather).
type partitionManager struct {
	cfg PartitionManagerConfig
	// dispatcher runs the mailboxes of the node's partitions (see
	// PartitionConfig.Dispatcher).
	dispatcher actor.Dispatcher
	children   map[disk.TopicPartition]*actor.PID
	// lingering are the partitions whose wake of followers' fetches
	// waits for ReplicaFetchLinger, and lastReplicaAnswer is when a
	// follower's fetch was last answered.
	lingering         map[disk.TopicPartition]bool
	lastReplicaAnswer time.Time
	// starting are the partitions waiting for the placement actor to
	// choose their directory.
	starting     map[disk.TopicPartition]bool
	pendingStops []*pendingStop
	stopping     bool // the manager itself is stopping, and its children with it
	// caughtUp is set once the node's metadata caught up with the
	// cluster's, when the manager waits for it (AwaitMetadata); shared by
	// the manager's incarnations.
	caughtUp *bool
	produces produceGathers
	stopTick scheduler.CancelFunc
	// stopPartitionsTick stops the ticks of the partitions.
	stopPartitionsTick scheduler.CancelFunc
	logger             *logrus.Entry

	// states are the newest partition states the metadata gave, kept for
	// partitions that start after them.
	states map[disk.TopicPartition]*messages.PartitionState
	// fetchers fetch for this node's followers, one per leader node.
	fetchers map[int32]*fetcherRef
	gathers  gathers
	// outboxes answer other nodes' followers: a node that is gone must
	// not stall the produces of this one.
	outboxes *actors.Outboxes
	// dormant are the partitions started in the background whose logs
	// are not open yet (see wakeDormant).
	dormant dormantPartitions
	// flushers are the flushers of the log dirs, by path, one PID each
	// for all the dir's partitions (see flusherOf).
	flushers map[string]*actor.PID
}

// dormantPartitions are the partitions started in the background whose
// logs are not open yet: the manager asks them to open, a few at a time,
// in the order they started; each that opens on its first request meanwhile
// is crossed off.
type dormantPartitions struct {
	waiting map[disk.TopicPartition]bool
	// queue holds them in start order, from next on; an entry no longer
	// waiting is skipped.
	queue []disk.TopicPartition
	next  int
	// opening are those asked to open, by actor id.
	opening map[string]disk.TopicPartition
	// since is when the first of them started, for the log line once all
	// are open; total counts them.
	since time.Time
	total int
}

// pendingStop is a StopPartitionsRequest waiting for its partitions to stop.
type pendingStop struct {
	sender  *actor.PID
	waiting map[string]bool // child ids
}

// NewPartitionManagerProps returns the props of the partition manager.
func NewPartitionManagerProps(cfg PartitionManagerConfig) *actor.Props {
	logger := cfg.Logger.WithField("actor", "partitions")
	if cfg.DirIDs == nil {
		cfg.DirIDs = map[string]string{}
	}
	if cfg.PlacementTimeout <= 0 {
		cfg.PlacementTimeout = 10 * time.Second
	}
	if cfg.BackgroundOpens <= 0 {
		cfg.BackgroundOpens = 64
	}
	supervisor := actor.NewOneForOneStrategy(3, time.Minute, func(reason any) actor.Directive {
		logger.WithField("reason", fmt.Sprint(reason)).Error("partition actor failed; restarting it")
		return actor.RestartDirective
	})
	// The node's partitions run on a pool of goroutines (see
	// actors.WorkerDispatcher): each append goes deep, and a node of many
	// partitions appends a few records at a time to each.
	dispatcher := actors.NewWorkerDispatcher(300, partitionWorkers(), 5*time.Second)
	// The word that the metadata caught up comes once: a manager restarted
	// after a panic keeps it.
	caughtUp := new(bool)
	return actors.Props(func() actor.Actor {
		outboxes := actors.NewOutboxes(logger)
		return &partitionManager{
			cfg: cfg, dispatcher: dispatcher, caughtUp: caughtUp, children: map[disk.TopicPartition]*actor.PID{}, starting: map[disk.TopicPartition]bool{},
			produces: newProduceGathers(cfg.NodeID, cfg.Transport, outboxes), logger: logger,
			states: map[disk.TopicPartition]*messages.PartitionState{}, fetchers: map[int32]*fetcherRef{},
			gathers:  newGathers(),
			outboxes: outboxes,
			dormant:  dormantPartitions{waiting: map[disk.TopicPartition]bool{}, opening: map[string]disk.TopicPartition{}},
		}
	}, logger, append(actors.DispatchedBy(cfg.Dispatcher), actor.WithSupervisor(supervisor))...)
}

func (m *partitionManager) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *messages.StartPartitionsRequest:
		m.onStart(ctx, msg)
	case *messages.StopPartitionsRequest:
		m.onStop(ctx, msg)
	case *StopAllPartitions:
		m.onStopAll(ctx)
	case *logOpened:
		m.onLogOpened(ctx, msg)
	case *messages.ProduceRequests:
		m.produces.route(ctx, msg, m.children, m.produceRefusal())
	case *actors.MetadataCaughtUp:
		if m.cfg.AwaitMetadata && !*m.caughtUp {
			m.logger.Info("metadata caught up with the cluster's: taking produces")
			*m.caughtUp = true
		}
	case *messages.ProduceResponse:
		m.produces.answered(ctx, msg)
	case *gatherTick:
		m.produces.expire(ctx, time.Now())
	case *messages.UpdatePartitionsRequest:
		m.onUpdate(ctx, msg)
	case *messages.UpdateTopicConfigsRequest:
		m.onUpdateConfigs(ctx, msg)
	case *messages.ReplicaFetchRequest:
		m.onReplicaFetch(ctx, msg)
	case *replicaFetched:
		m.onReplicaFetched(ctx, msg)
	case *replicaWake:
		m.onReplicaWake(ctx, msg)
	case *messages.FetchPartitionsRequest:
		m.onFetchPartitions(ctx, msg)
	case *partFetched:
		m.onPartFetched(ctx, msg)
	case *fetchWake:
		m.wakeGathers(ctx, msg.tp, msg.readable, msg.changed, false)
	case *gatherExpired:
		m.onGatherExpired(ctx, msg)
	case *gatherDeadline:
		m.onGatherDeadline(ctx, msg)
	case *epochGatherDeadline:
		m.onEpochGatherDeadline(ctx, msg)
	case *messages.OffsetForLeaderEpochRequest:
		m.onEpochQueries(ctx, msg)
	case *epochAnswered:
		m.onEpochAnswered(ctx, msg)
	case *follow:
		m.onFollow(ctx, msg)
	case *unfollow:
		m.onUnfollow(ctx, msg)
	case *throttleFollow:
		for _, ref := range m.fetchers {
			ctx.Send(ref.pid, msg)
		}
	case *actor.Terminated:
		m.onTerminated(ctx, msg)
	case *actor.DeadLetterResponse:
		// A part asked of a partition that had just stopped: its gather's
		// deadline answers it.
	case *disks.LogDirAdded:
		m.cfg.LogDirs[msg.Path] = msg.PID
		m.cfg.DirIDs[msg.Path] = msg.ID
		delete(m.flushers, msg.Path)
	case *disks.LogDirRemoved:
		delete(m.cfg.LogDirs, msg.Path)
		delete(m.cfg.DirIDs, msg.Path)
		delete(m.flushers, msg.Path)
	case *partitionsTick:
		m.onPartitionsTick(ctx)
	case *actor.Started:
		m.startTicks(ctx)
		if m.cfg.Transport != nil {
			m.cfg.Transport.ServeReplicaFetches(ctx.ActorSystem(), ctx.Self(), m.logger)
		}
	case *actor.Stopping:
		m.stopping = true
		m.stopTicks()
		if m.cfg.Transport != nil {
			m.cfg.Transport.ServeReplicaFetches(nil, nil, nil)
		}
	case *actor.Restarting:
		m.stopTicks() // the new incarnation starts its own
	case *actor.Stopped:
	case actor.AutoReceiveMessage, actor.SystemMessage:
	default:
		m.logger.WithField("type", fmt.Sprintf("%T", msg)).Warn("unhandled message")
	}
}

// produceRefusal is why the node takes no produce now, or "".
func (m *partitionManager) produceRefusal() string {
	switch {
	case m.stopping:
		return fmt.Sprintf("node %d is stopping", m.cfg.NodeID)
	case m.cfg.AwaitMetadata && !*m.caughtUp:
		return fmt.Sprintf("node %d is catching up with the cluster's metadata", m.cfg.NodeID)
	}
	return ""
}

// partitionsTick makes the manager tick its partitions.
type partitionsTick struct{}

// startTicks starts the ticks that expire produce gathers, and those of
// the partitions.
func (m *partitionManager) startTicks(ctx actor.Context) {
	timers := scheduler.NewTimerScheduler(ctx.ActorSystem().Root)
	m.stopTick = timers.SendRepeatedly(gatherTickInterval, gatherTickInterval, ctx.Self(), &gatherTick{})
	interval := m.cfg.TickInterval
	if interval <= 0 {
		interval = partitionTickInterval
	}
	m.stopPartitionsTick = timers.SendRepeatedly(interval, interval, ctx.Self(), &partitionsTick{})
}

// stopTicks stops the manager's ticks.
func (m *partitionManager) stopTicks() {
	for _, stop := range []*scheduler.CancelFunc{&m.stopTick, &m.stopPartitionsTick} {
		if *stop != nil {
			(*stop)()
			*stop = nil
		}
	}
}

// onPartitionsTick ticks every partition whose log is open.
func (m *partitionManager) onPartitionsTick(ctx actor.Context) {
	for tp, pid := range m.children {
		if !m.dormant.waiting[tp] {
			ctx.Send(pid, &partitionTick{})
		}
	}
}

// onStart starts the partitions of req that this node holds and are not
// running yet, each in the directory the request names by path or by id, or
// in one the placement actor chooses when it names none. It answers with
// the directories chosen.
func (m *partitionManager) onStart(ctx actor.Context, req *messages.StartPartitionsRequest) {
	cfg, err := topic.ParseConfig(req.Configs)
	if err != nil {
		ctx.Respond(&messages.StartPartitionsResponse{Error: messages.ErrorCode_INVALID_CONFIG, ErrorMessage: messages.ErrorText(err)})
		return
	}
	var placed, unplaced []*messages.PartitionAssignment
	for _, p := range req.Partitions {
		tp := disk.TopicPartition{Topic: p.Topic, Partition: p.Partition}
		if p.NodeId != m.cfg.NodeID || m.children[tp] != nil || m.starting[tp] {
			continue
		}
		path, ok := m.dirOf(p)
		switch {
		case !ok:
			ctx.Respond(&messages.StartPartitionsResponse{
				Error:        messages.ErrorCode_LOG_DIR_NOT_FOUND,
				ErrorMessage: fmt.Sprintf("%s: log dir %s is not configured on this node", tp, dirName(p)),
			})
			return
		case path == "":
			unplaced = append(unplaced, p)
		default:
			placed = append(placed, inDir(p, path, m.cfg.DirIDs[path]))
		}
	}
	if len(unplaced) == 0 {
		ctx.Respond(m.spawn(ctx, cfg, placed, nil))
		m.wakeDormant(ctx)
		return
	}
	for _, p := range unplaced {
		m.starting[disk.TopicPartition{Topic: p.Topic, Partition: p.Partition}] = true
	}
	choose := &disks.ChooseLogDirs{
		Topic:          unplaced[0].Topic,
		RetentionBytes: cfg.Log.RetentionBytes,
		RetentionMs:    topic.RetentionMillis(cfg.Log.RetentionMs),
	}
	for _, p := range unplaced {
		choose.Partitions = append(choose.Partitions, p.Partition)
	}
	answer := func(dirs []string, err error) {
		for _, p := range unplaced {
			delete(m.starting, disk.TopicPartition{Topic: p.Topic, Partition: p.Partition})
		}
		if err == nil && len(dirs) != len(unplaced) {
			err = fmt.Errorf("placement chose %d dirs for %d partitions", len(dirs), len(unplaced))
		}
		if err != nil {
			ctx.Respond(&messages.StartPartitionsResponse{Error: messages.ErrorCode_KAFKA_STORAGE_ERROR, ErrorMessage: fmt.Sprintf("choosing log dirs: %v", err)})
			return
		}
		chosen := make([]*messages.PartitionAssignment, len(unplaced))
		for i, p := range unplaced {
			chosen[i] = inDir(p, dirs[i], m.cfg.DirIDs[dirs[i]])
		}
		ctx.Respond(m.spawn(ctx, cfg, placed, chosen))
		m.wakeDormant(ctx)
	}
	future := ctx.RequestFuture(m.cfg.Placement, choose, m.cfg.PlacementTimeout)
	ctx.ReenterAfter(future, func(res any, err error) {
		if err != nil {
			answer(nil, err)
			return
		}
		r, ok := res.(*disks.ChooseLogDirsResult)
		if !ok {
			answer(nil, fmt.Errorf("placement answered %T", res))
			return
		}
		answer(r.Dirs, r.Err)
	})
}

// inDir is p placed in the directory of path and id.
func inDir(p *messages.PartitionAssignment, path, id string) *messages.PartitionAssignment {
	c := proto.CloneOf(p)
	c.LogDir, c.DirId = path, id
	return c
}

// dirOf is the path of the directory p names, by path or by id: "" when
// it names none, and ok false when it names one this node does not have.
func (m *partitionManager) dirOf(p *messages.PartitionAssignment) (path string, ok bool) {
	if p.LogDir != "" {
		_, ok := m.cfg.LogDirs[p.LogDir]
		return p.LogDir, ok
	}
	if p.DirId == "" {
		return "", true
	}
	for path, id := range m.cfg.DirIDs {
		if id == p.DirId {
			return path, true
		}
	}
	return "", false
}

// dirName names the directory p names, for an error.
func dirName(p *messages.PartitionAssignment) string {
	if p.LogDir != "" {
		return fmt.Sprintf("%q", p.LogDir)
	}
	return "with id " + p.DirId
}

// spawn starts the partitions of placed and chosen, in the directories
// they name by path, and answers with chosen. Those alone in their
// partition leave their logs closed until first used or woken (see
// wakeDormant), whether a restart finds them or a topic's creation makes
// them: creating a 10,000-partition topic's 40,000 directories and files
// before the answer took longer than the controller waits for it (10 s
// here). Those with other replicas open theirs at once.
func (m *partitionManager) spawn(ctx actor.Context, cfg topic.Config, placed, chosen []*messages.PartitionAssignment) *messages.StartPartitionsResponse {
	for _, p := range append(placed, chosen...) {
		tp := disk.TopicPartition{Topic: p.Topic, Partition: p.Partition}
		checkpoints := m.cfg.Checkpoints[p.LogDir]
		state := m.startState(p)
		dormant := !replicated(state)
		props := NewPartitionProps(PartitionConfig{
			Topic:          p.Topic,
			Partition:      p.Partition,
			FS:             m.cfg.FS,
			Files:          m.cfg.Files,
			LogDir:         p.LogDir,
			Config:         cfg,
			RecoveryPoint:  checkpoints.RecoveryPoints[tp],
			LogStartOffset: checkpoints.LogStart[tp],
			Transport:      m.cfg.Transport,
			LogDirActor:    m.cfg.LogDirs[p.LogDir],
			Flusher:        m.flusherOf(p.LogDir),
			TickInterval:   m.cfg.TickInterval,
			TickedByParent: true,
			NodeID:         m.cfg.NodeID,
			State:          state,
			Controller:     m.cfg.Controller,
			ReplicaLagMax:  m.cfg.ReplicaLagMax,
			Background:     dormant,
			Metrics:        m.cfg.Metrics,
			Dispatcher:     m.dispatcher,
			Logger:         m.cfg.Logger,
		})
		// A checkpoint describes the log as it was at start-up: once the
		// partition has opened it, it no longer applies (the topic may be
		// deleted and created again).
		delete(checkpoints.RecoveryPoints, tp)
		delete(checkpoints.LogStart, tp)
		if len(checkpoints.RecoveryPoints) == 0 && len(checkpoints.LogStart) == 0 {
			delete(m.cfg.Checkpoints, p.LogDir) // its maps' room goes with it
		}
		pid, err := ctx.SpawnNamed(props, disk.PartitionDirName(tp))
		if err != nil {
			return &messages.StartPartitionsResponse{Error: messages.ErrorCode_UNKNOWN_SERVER_ERROR, ErrorMessage: fmt.Sprintf("%s: %v", tp, err)}
		}
		m.children[tp] = pid
		if dormant {
			m.dormant.add(tp)
		}
	}
	m.cfg.Metrics.setDormant(len(m.dormant.waiting))
	return &messages.StartPartitionsResponse{Assigned: chosen}
}

// flusherOf is the flusher of the log dir at path (disks.FlusherOf), nil
// for a dir the manager does not know.
func (m *partitionManager) flusherOf(path string) *actor.PID {
	if pid, ok := m.flushers[path]; ok {
		return pid
	}
	pid := disks.FlusherOf(m.cfg.LogDirs[path])
	if pid != nil {
		if m.flushers == nil {
			m.flushers = map[string]*actor.PID{}
		}
		m.flushers[path] = pid
	}
	return pid
}

// add puts tp at the end of the queue.
func (d *dormantPartitions) add(tp disk.TopicPartition) {
	if len(d.waiting) == 0 {
		d.since, d.total = time.Now(), 0
	}
	d.total++
	d.waiting[tp] = true
	d.queue = append(d.queue, tp)
}

// opened crosses tp off, whether it was asked to open or opened on a
// request; pid is its actor.
func (d *dormantPartitions) opened(tp disk.TopicPartition, pid *actor.PID) {
	delete(d.waiting, tp)
	if pid != nil {
		delete(d.opening, pid.Id)
	}
}

// wakeDormant asks the next dormant partitions to open their logs, up to
// BackgroundOpens at a time: after a restart, every partition is readable
// a while after the node answers, and one asked for meanwhile opens first.
func (m *partitionManager) wakeDormant(ctx actor.Context) {
	d := &m.dormant
	for len(d.opening) < m.cfg.BackgroundOpens && d.next < len(d.queue) {
		tp := d.queue[d.next]
		d.next++
		pid := m.children[tp]
		switch {
		case !d.waiting[tp]:
		case pid == nil:
			delete(d.waiting, tp)
		default:
			d.opening[pid.Id] = tp
			ctx.Send(pid, &openLog{})
		}
	}
	if d.next == len(d.queue) {
		d.queue, d.next = nil, 0
	}
	m.cfg.Metrics.setDormant(len(d.waiting))
	if len(d.waiting) == 0 && d.total > 0 {
		m.logger.WithFields(logrus.Fields{"partitions": d.total, "took": time.Since(d.since).Round(time.Millisecond)}).Info("partitions started in the background are open")
		d.total = 0
	}
}

// onLogOpened crosses off a partition that opened its log, and asks the
// next one to.
func (m *partitionManager) onLogOpened(ctx actor.Context, msg *logOpened) {
	if !m.dormant.waiting[msg.tp] {
		return
	}
	m.dormant.opened(msg.tp, m.children[msg.tp])
	m.wakeDormant(ctx)
}

// onUpdateConfigs hands a topic's new configs to each of its partitions
// on the node; a config it cannot parse changes nothing.
func (m *partitionManager) onUpdateConfigs(ctx actor.Context, req *messages.UpdateTopicConfigsRequest) {
	cfg, err := topic.ParseConfig(req.GetConfigs())
	if err != nil {
		ctx.Respond(&messages.UpdateTopicConfigsResponse{Error: messages.ErrorCode_INVALID_CONFIG, ErrorMessage: messages.ErrorText(err)})
		return
	}
	for tp, pid := range m.children {
		if tp.Topic == req.GetTopic() {
			ctx.Send(pid, &reconfigure{config: cfg})
		}
	}
	ctx.Respond(&messages.UpdateTopicConfigsResponse{})
}

func (m *partitionManager) onStop(ctx actor.Context, req *messages.StopPartitionsRequest) {
	p := &pendingStop{sender: ctx.Sender(), waiting: map[string]bool{}}
	for _, tp := range req.Partitions {
		key := disk.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}
		pid, ok := m.children[key]
		if !ok {
			continue
		}
		if req.Delete {
			ctx.Send(pid, &deletePartition{movedAway: req.MovedAway})
			delete(m.states, key)
		}
		m.stopChild(ctx, key, pid, p)
	}
	if len(p.waiting) == 0 {
		ctx.Respond(&messages.StopPartitionsResponse{})
		return
	}
	m.pendingStops = append(m.pendingStops, p)
}

// stopChild stops the partition tp, whose actor is pid, for p.
func (m *partitionManager) stopChild(ctx actor.Context, tp disk.TopicPartition, pid *actor.PID, p *pendingStop) {
	m.onUnfollow(ctx, &unfollow{tp: tp})
	ctx.Poison(pid)
	delete(m.children, tp)
	m.dormant.opened(tp, pid)
	p.waiting[pid.Id] = true
}

// StopAllPartitions asks the partition manager to stop every partition of
// the node, as a clean stop does: each answers what it holds, syncs and
// closes its log and sends its log dir its final report, and one that has
// not opened its log has nothing to do. The manager answers with a
// StopPartitionsResponse once all have stopped. Local only.
type StopAllPartitions struct{}

func (m *partitionManager) onStopAll(ctx actor.Context) {
	p := &pendingStop{sender: ctx.Sender(), waiting: map[string]bool{}}
	for tp, pid := range m.children {
		m.stopChild(ctx, tp, pid, p)
	}
	m.dormant.queue, m.dormant.next, m.dormant.total = nil, 0, 0
	m.cfg.Metrics.setDormant(0)
	if len(p.waiting) == 0 {
		ctx.Respond(&messages.StopPartitionsResponse{})
		return
	}
	m.pendingStops = append(m.pendingStops, p)
}

func (m *partitionManager) onTerminated(ctx actor.Context, t *actor.Terminated) {
	for tp, pid := range m.children {
		if pid.Id == t.Who.Id && !m.stopping {
			// Not asked to stop: the supervisor gave up on it.
			m.logger.WithField("partition", tp.String()).Error("partition actor stopped after repeated failures; partition offline")
			delete(m.children, tp)
			m.onUnfollow(ctx, &unfollow{tp: tp})
		}
	}
	if _, ok := m.dormant.opening[t.Who.Id]; ok {
		delete(m.dormant.opening, t.Who.Id)
		m.wakeDormant(ctx)
	}
	kept := m.pendingStops[:0]
	for _, p := range m.pendingStops {
		delete(p.waiting, t.Who.Id)
		if len(p.waiting) == 0 {
			ctx.Send(p.sender, &messages.StopPartitionsResponse{})
			continue
		}
		kept = append(kept, p)
	}
	m.pendingStops = kept
}

// partitionWorkers is how many of the node's partitions run at once: eight
// a processor, so that partitions blocked in a write, a read of a cold
// segment or an fsync of their own leave others enough to run on.
func partitionWorkers() int {
	return max(16, 8*runtime.GOMAXPROCS(0))
}
