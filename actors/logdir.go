package actors

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/sirupsen/logrus"

	"github.com/depot-dev/depot/disk"
)

// Checkpoint file names in a log directory, as Kafka names them.
const (
	RecoveryPointCheckpointFile = "recovery-point-offset-checkpoint"
	LogStartCheckpointFile      = "log-start-offset-checkpoint"
	// defaultCheckpointInterval is Kafka's
	// log.flush.offset.checkpoint.interval.ms.
	defaultCheckpointInterval = 60 * time.Second
)

// Checkpoints are the offsets a log directory remembers for its partitions.
type Checkpoints struct {
	RecoveryPoints map[disk.TopicPartition]int64
	LogStart       map[disk.TopicPartition]int64
}

// ReadCheckpoints reads the checkpoint files of the log directory path. A
// damaged checkpoint is not fatal: the partitions it covered are recovered
// in full, which is slower but safe, so the damage is logged and the file
// ignored.
func ReadCheckpoints(fsys disk.FS, path string, logger *logrus.Entry) Checkpoints {
	read := func(name string) map[disk.TopicPartition]int64 {
		m, err := disk.ReadCheckpoint(fsys, filepath.Join(path, name))
		if err != nil {
			logger.WithError(err).Warn("ignoring damaged checkpoint; its partitions will be recovered in full")
			return map[disk.TopicPartition]int64{}
		}
		return m
	}
	return Checkpoints{RecoveryPoints: read(RecoveryPointCheckpointFile), LogStart: read(LogStartCheckpointFile)}
}

// LogDirConfig is what a log-dir actor needs.
type LogDirConfig struct {
	Path string
	FS   disk.FS
	// Checkpoints are those read at start-up; the actor keeps them current.
	Checkpoints Checkpoints
	// CheckpointInterval defaults to 60 s.
	CheckpointInterval time.Duration
	Logger             *logrus.Entry
}

// WriteCheckpoints asks a log-dir actor to write its checkpoint files now;
// it answers with WriteCheckpointsDone.
type WriteCheckpoints struct{}

// WriteCheckpointsDone answers WriteCheckpoints.
type WriteCheckpointsDone struct{ Err error }

// logDirActor owns one log directory's checkpoint files and knows the
// partitions it holds, from their reports.
type logDirActor struct {
	cfg        LogDirConfig
	partitions map[disk.TopicPartition]partitionReport
	dirty      bool
	stopTimer  scheduler.CancelFunc
	logger     *logrus.Entry
}

// NewLogDirProps returns the props of a log-dir actor.
func NewLogDirProps(cfg LogDirConfig) *actor.Props {
	if cfg.CheckpointInterval <= 0 {
		cfg.CheckpointInterval = defaultCheckpointInterval
	}
	logger := cfg.Logger.WithFields(logrus.Fields{"actor": "logdir", "dir": cfg.Path})
	return Props(func() actor.Actor {
		a := &logDirActor{cfg: cfg, partitions: map[disk.TopicPartition]partitionReport{}, logger: logger}
		for tp, rp := range cfg.Checkpoints.RecoveryPoints {
			a.partitions[tp] = partitionReport{tp: tp, recoveryPoint: rp, logStartOffset: cfg.Checkpoints.LogStart[tp]}
		}
		return a
	}, logger)
}

func (a *logDirActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.stopTimer = scheduler.NewTimerScheduler(ctx).SendRepeatedly(a.cfg.CheckpointInterval, a.cfg.CheckpointInterval, ctx.Self(), &checkpointTick{})
	case *partitionReport:
		a.onReport(m)
	case *checkpointTick:
		if a.dirty {
			_ = a.writeCheckpoints()
		}
	case *WriteCheckpoints:
		ctx.Respond(&WriteCheckpointsDone{Err: a.writeCheckpoints()})
	case *actor.Stopping:
		if a.stopTimer != nil {
			a.stopTimer()
		}
	case actor.AutoReceiveMessage, actor.SystemMessage:
	default:
		a.logger.WithField("type", fmt.Sprintf("%T", m)).Warn("unhandled message")
	}
}

type checkpointTick struct{}

func (a *logDirActor) onReport(m *partitionReport) {
	a.dirty = true
	if m.deleted {
		delete(a.partitions, m.tp)
		return
	}
	a.partitions[m.tp] = *m
}

// writeCheckpoints writes both checkpoint files atomically.
func (a *logDirActor) writeCheckpoints() error {
	recovery := make(map[disk.TopicPartition]int64, len(a.partitions))
	start := make(map[disk.TopicPartition]int64, len(a.partitions))
	for tp, p := range a.partitions {
		recovery[tp] = p.recoveryPoint
		start[tp] = p.logStartOffset
	}
	for name, offsets := range map[string]map[disk.TopicPartition]int64{
		RecoveryPointCheckpointFile: recovery,
		LogStartCheckpointFile:      start,
	} {
		if err := disk.WriteCheckpoint(a.cfg.FS, filepath.Join(a.cfg.Path, name), offsets); err != nil {
			a.logger.WithError(err).Error("writing checkpoint failed")
			return err
		}
	}
	a.dirty = false
	return nil
}
