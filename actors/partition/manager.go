package partition

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/sirupsen/logrus"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/disks"
	"github.com/depot-dev/depot/actors/remote"
	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
)

// PartitionManagerConfig is what the partition manager needs.
type PartitionManagerConfig struct {
	FS     disk.FS
	NodeID int32
	// Transport is the actor system's remote state (see PartitionConfig).
	Transport *remote.Transport
	// LogDirs maps each log directory's path to its log-dir actor.
	LogDirs map[string]*actor.PID
	// Checkpoints maps each log directory's path to the checkpoints read at
	// start-up; a partition's entry is used when it is first started.
	Checkpoints map[string]disks.Checkpoints
	// TickInterval is passed to partitions (retention, roll, reports).
	TickInterval time.Duration
	Logger       *logrus.Entry
}

// partitionManager starts and stops the node's partition actors, its
// children, and supervises them: a partition actor that panics is restarted
// (its log reopened and recovered), up to a few times a minute. Producers
// send it their requests for the node's partitions together, and it hands
// each to its partition and answers them together (see produceGathers).
type partitionManager struct {
	cfg          PartitionManagerConfig
	children     map[disk.TopicPartition]*actor.PID
	pendingStops []*pendingStop
	stopping     bool // the manager itself is stopping, and its children with it
	produces     produceGathers
	stopTick     scheduler.CancelFunc
	logger       *logrus.Entry
}

// pendingStop is a StopPartitionsRequest waiting for its partitions to stop.
type pendingStop struct {
	sender  *actor.PID
	waiting map[string]bool // child ids
}

// NewPartitionManagerProps returns the props of the partition manager.
func NewPartitionManagerProps(cfg PartitionManagerConfig) *actor.Props {
	logger := cfg.Logger.WithField("actor", "partitions")
	supervisor := actor.NewOneForOneStrategy(3, time.Minute, func(reason any) actor.Directive {
		logger.WithField("reason", fmt.Sprint(reason)).Error("partition actor failed; restarting it")
		return actor.RestartDirective
	})
	return actors.Props(func() actor.Actor {
		return &partitionManager{cfg: cfg, children: map[disk.TopicPartition]*actor.PID{}, produces: newProduceGathers(cfg.NodeID, cfg.Transport), logger: logger}
	}, logger, actor.WithSupervisor(supervisor))
}

func (m *partitionManager) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *messages.StartPartitionsRequest:
		ctx.Respond(m.onStart(ctx, msg))
	case *messages.StopPartitionsRequest:
		m.onStop(ctx, msg)
	case *messages.ProduceRequests:
		m.produces.route(ctx, msg, m.children, m.stopping)
	case *messages.ProduceResponse:
		m.produces.answered(ctx, msg)
	case *gatherTick:
		m.produces.expire(ctx, time.Now())
	case *actor.Terminated:
		m.onTerminated(ctx, msg)
	case *disks.LogDirAdded:
		m.cfg.LogDirs[msg.Path] = msg.PID
	case *actor.Started:
		m.stopTick = scheduler.NewTimerScheduler(ctx.ActorSystem().Root).SendRepeatedly(gatherTickInterval, gatherTickInterval, ctx.Self(), &gatherTick{})
	case *actor.Stopping:
		m.stopping = true
		m.stopGatherTick()
	case *actor.Restarting:
		m.stopGatherTick() // the new incarnation starts its own
	case *actor.Stopped:
	case actor.AutoReceiveMessage, actor.SystemMessage:
	default:
		m.logger.WithField("type", fmt.Sprintf("%T", msg)).Warn("unhandled message")
	}
}

// stopGatherTick stops the ticks that expire produce gathers.
func (m *partitionManager) stopGatherTick() {
	if m.stopTick != nil {
		m.stopTick()
		m.stopTick = nil
	}
}

func (m *partitionManager) onStart(ctx actor.Context, req *messages.StartPartitionsRequest) *messages.StartPartitionsResponse {
	cfg, err := topic.ParseConfig(req.Configs)
	if err != nil {
		return &messages.StartPartitionsResponse{Error: messages.ErrorCode_INVALID_CONFIG, ErrorMessage: err.Error()}
	}
	for _, p := range req.Partitions {
		if p.NodeId != m.cfg.NodeID {
			continue
		}
		tp := disk.TopicPartition{Topic: p.Topic, Partition: p.Partition}
		if _, ok := m.children[tp]; ok {
			continue
		}
		logDirActor, ok := m.cfg.LogDirs[p.LogDir]
		if !ok {
			return &messages.StartPartitionsResponse{
				Error:        messages.ErrorCode_LOG_DIR_NOT_FOUND,
				ErrorMessage: fmt.Sprintf("%s: log dir %q is not configured on this node", tp, p.LogDir),
			}
		}
		checkpoints := m.cfg.Checkpoints[p.LogDir]
		props := NewPartitionProps(PartitionConfig{
			Topic:          p.Topic,
			Partition:      p.Partition,
			FS:             m.cfg.FS,
			LogDir:         p.LogDir,
			Config:         cfg,
			RecoveryPoint:  checkpoints.RecoveryPoints[tp],
			LogStartOffset: checkpoints.LogStart[tp],
			Transport:      m.cfg.Transport,
			LogDirActor:    logDirActor,
			TickInterval:   m.cfg.TickInterval,
			Logger:         m.cfg.Logger,
		})
		// A checkpoint describes the log as it was at start-up: once the
		// partition has opened it, it no longer applies (the topic may be
		// deleted and created again).
		delete(checkpoints.RecoveryPoints, tp)
		delete(checkpoints.LogStart, tp)
		pid, err := ctx.SpawnNamed(props, disk.PartitionDirName(tp))
		if err != nil {
			return &messages.StartPartitionsResponse{Error: messages.ErrorCode_UNKNOWN_SERVER_ERROR, ErrorMessage: fmt.Sprintf("%s: %v", tp, err)}
		}
		m.children[tp] = pid
	}
	return &messages.StartPartitionsResponse{}
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
			ctx.Send(pid, &deletePartition{})
		}
		ctx.Poison(pid)
		delete(m.children, key)
		p.waiting[pid.Id] = true
	}
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
		}
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
