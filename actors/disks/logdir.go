package disks

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/placement"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
)

// Checkpoint file names in a log directory, as Kafka names them.
const (
	RecoveryPointCheckpointFile = "recovery-point-offset-checkpoint"
	LogStartCheckpointFile      = "log-start-offset-checkpoint"
	// defaultCheckpointInterval is Kafka's
	// log.flush.offset.checkpoint.interval.ms.
	defaultCheckpointInterval = 60 * time.Second
	// defaultUsageInterval is how often a log-dir actor reports its usage
	// to the placement actor even when nothing changed.
	defaultUsageInterval = 10 * time.Second
	// usageDelay gathers the size changes partitions report into one
	// usage report to the placement actor: with many partitions each
	// reporting about once a second, one per report cost a sort of them
	// all every time.
	usageDelay = 100 * time.Millisecond
	// rateHalfLife is the half-life of the write-rate average.
	rateHalfLife = 30 * time.Second
)

// Log directory states, as shown by `depot disks`.
const (
	LogDirOnline   = "online"
	LogDirOffline  = "offline"
	LogDirDraining = "draining"
	// LogDirFull is a directory whose free space fell under its reserve:
	// appends to its partitions are refused, with a retriable error, while
	// fetches, retention, moves out and checkpoints go on. It leaves full
	// by itself once it has twice its reserve free.
	LogDirFull = "full"
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
	// Capacity is the declared capacity in bytes; 0 asks the file system
	// (statfs) for its size.
	Capacity int64
	// Draining is set for a directory being emptied.
	Draining bool
	// Checkpoints are those read at start-up; the actor keeps them current.
	Checkpoints Checkpoints
	// Placement receives the directory's usage on change and on a timer.
	// May be nil.
	Placement *actor.PID
	// CheckpointInterval defaults to 60 s, UsageInterval to 10 s.
	CheckpointInterval time.Duration
	UsageInterval      time.Duration
	// Reserve is the free space under which the directory is full. Default
	// the smaller of 5% of its capacity and 5 GiB (DefaultReserve).
	Reserve Reserve
	// Space returns the size and free bytes of the file system that holds
	// path. Default: statfs on the OS file system; nothing known on others.
	Space func(path string) (total, free int64, ok bool)
	// Now is the clock of write rates. Default time.Now.
	Now func() time.Time
	// FlushParallelism is its flusher's (see FlusherConfig.Parallelism).
	FlushParallelism int
	// FileSystemSyncFlushes is its flusher's (see
	// FlusherConfig.FileSystemSyncFlushes).
	FileSystemSyncFlushes int
	// Dispatcher runs the mailboxes of the log-dir actor and of its
	// flusher; nil: protoactor's default (see actors.DispatchedBy).
	Dispatcher actor.Dispatcher
	Logger     *logrus.Entry
}

// Reserve is a log dir's free-space reserve: Bytes, or Percent of its
// capacity when Bytes is 0. The zero value is DefaultReserve.
type Reserve struct {
	Bytes   int64
	Percent float64
}

// DefaultReserve is the reserve of a log dir that names none: the smaller
// of 5% of its capacity and 5 GiB, so 10 MiB of a 200 MiB dir and 5 GiB of
// a 4 TB disk. It covers what a full dir must still write: index rebuilds,
// checkpoints, offset commits, and the metadata log where it shares the
// file system.
var DefaultReserve = Reserve{Bytes: 5 << 30, Percent: 5}

// Of is the reserve of a directory of capacity bytes.
func (r Reserve) Of(capacity int64) int64 {
	if r == (Reserve{}) {
		r = DefaultReserve
	}
	pct := int64(float64(capacity) * r.Percent / 100)
	switch {
	case r.Percent > 0 && r.Bytes > 0:
		return min(pct, r.Bytes)
	case r.Percent > 0:
		return pct
	}
	return r.Bytes
}

// sizedFS is a file system that tells its usage, as a disk.MemFS with a
// capacity does.
type sizedFS interface {
	Used() int64
	Free() int64
}

// statfsSpace is LogDirConfig.Space on the OS file system.
func statfsSpace(path string) (total, free int64, ok bool) {
	var st unix.Statfs_t
	if unix.Statfs(path, &st) != nil {
		return 0, 0, false
	}
	return int64(st.Blocks) * int64(st.Bsize), int64(st.Bavail) * int64(st.Bsize), true
}

// WriteCheckpoints asks a log-dir actor to write its checkpoint files now;
// it answers with WriteCheckpointsDone.
type WriteCheckpoints struct{}

// WriteCheckpointsDone answers WriteCheckpoints.
type WriteCheckpointsDone struct{ Err error }

// everyDirFull tells a log-dir actor whether every log dir of the node is
// full: text says so, naming each, or is "".
type everyDirFull struct{ text string }

// setDraining switches a log directory's draining state.
type setDraining struct{ draining bool }

// logDirUsage is what a log-dir actor reports to the placement actor.
type logDirUsage struct {
	info *messages.LogDirInfo
}

// partitionState is what a log-dir actor knows of one partition.
type partitionState struct {
	report   PartitionReport
	rate     float64 // bytes per second, decaying average
	lastSeen time.Time
	// token, ceiling and pending are the partition's allowance in a dir
	// with a declared capacity (see DirAllowance): the token of its
	// incarnation, the ceiling it acknowledged (-1 none), and the one
	// sent to it as pendingSeq and not yet acknowledged (-1 none), which
	// sent is.
	token      *AllowanceToken
	ceiling    int64
	pending    int64
	pendingSeq uint64
	sent       *DirAllowance
}

func newPartitionState(report PartitionReport) *partitionState {
	return &partitionState{report: report, ceiling: -1, pending: -1}
}

// logDirActor owns one log directory: its checkpoint files, its state
// (online, offline, draining), and what it knows of the partitions it holds
// from their reports, which it passes on to the placement actor. Its child
// the flusher (FlusherOf) runs the group commits of its partitions.
type logDirActor struct {
	cfg        LogDirConfig
	partitions map[disk.TopicPartition]*partitionState
	state      string
	failure    string
	// full is set while free space is under the reserve (see LogDirFull);
	// fullReason says so in the words partitions answer with.
	full       bool
	fullReason string
	fullSince  time.Time
	// checked is set once the directory's space has been checked: the
	// first check, at start-up, makes it full under twice its reserve.
	checked bool
	// everyFull, when every log dir of the node is full, says so (from
	// the placement actor), after fullReason in refusals.
	everyFull string
	// limit is what the partitions of a dir with a declared capacity may
	// hold together, its capacity less its reserve; -1 for a dir without.
	// allowanceSeq numbers the DirAllowances sent. It is the props', so
	// that an actor restarted after a failure numbers on: a partition
	// takes an allowance only with a Seq above the last it took, so it
	// would ignore those numbered afresh, while its reports of that last
	// Seq would read as acknowledging them.
	limit        int64
	allowanceSeq *atomic.Uint64
	dirty        bool
	usageSoon    bool // a usage report is due after usageDelay
	// sorted holds the keys of partitions in order, for usage; nil once
	// a partition is added or removed. Sorting them for every report cost
	// a node of thousands of partitions more than anything else the
	// reports do.
	sorted    []disk.TopicPartition
	recovered recoveryTotals
	timers    []scheduler.CancelFunc
	logger    *logrus.Entry
}

// NewLogDirProps returns the props of a log-dir actor.
func NewLogDirProps(cfg LogDirConfig) *actor.Props {
	if cfg.CheckpointInterval <= 0 {
		cfg.CheckpointInterval = defaultCheckpointInterval
	}
	if cfg.UsageInterval <= 0 {
		cfg.UsageInterval = defaultUsageInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Space == nil {
		cfg.Space = func(string) (int64, int64, bool) { return 0, 0, false }
		if sized, ok := cfg.FS.(sizedFS); ok {
			cfg.Space = func(string) (int64, int64, bool) {
				free := sized.Free()
				return sized.Used() + free, free, free != math.MaxInt64
			}
		}
		if cfg.FS == disk.OS {
			cfg.Space = statfsSpace
		}
	}
	logger := cfg.Logger.WithFields(logrus.Fields{"actor": "logdir", "dir": cfg.Path})
	allowanceSeq := new(atomic.Uint64)
	return actors.Props(func() actor.Actor {
		a := &logDirActor{cfg: cfg, partitions: map[disk.TopicPartition]*partitionState{}, state: LogDirOnline, limit: -1, allowanceSeq: allowanceSeq, logger: logger}
		if cfg.Draining {
			a.state = LogDirDraining
		}
		if cfg.Capacity > 0 {
			a.limit = cfg.Capacity - cfg.Reserve.Of(cfg.Capacity)
		}
		for tp, rp := range cfg.Checkpoints.RecoveryPoints {
			a.partitions[tp] = newPartitionState(PartitionReport{TP: tp, RecoveryPoint: rp, LogStartOffset: cfg.Checkpoints.LogStart[tp]})
		}
		return a
	}, logger, actors.DispatchedBy(cfg.Dispatcher)...)
}

func (a *logDirActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.startFlusher(ctx)
		a.countPartitionsOnDisk()
		timers := scheduler.NewTimerScheduler(ctx)
		a.timers = append(a.timers,
			timers.SendRepeatedly(a.cfg.CheckpointInterval, a.cfg.CheckpointInterval, ctx.Self(), &checkpointTick{}),
			timers.SendRepeatedly(a.cfg.UsageInterval, a.cfg.UsageInterval, ctx.Self(), &usageTick{}))
		a.reportUsage(ctx)
	case *PartitionReport:
		a.onReport(ctx, m)
	case *LogDirNoSpace:
		a.onNoSpace(ctx, m)
	case *LogDirFailed:
		a.onFailed(ctx, m)
	case *setDraining:
		a.onSetDraining(ctx, m)
	case *everyDirFull:
		a.everyFull = m.text
		if a.full {
			a.tellPartitions(ctx, &DirSpace{Full: true, Reason: a.fullText()})
		}
	case *checkpointTick:
		if a.dirty {
			_ = a.writeCheckpoints()
		}
	case *usageTick:
		a.reportUsage(ctx)
	case *recoverySummary:
		a.logRecovery()
	case *usageDue:
		a.usageSoon = false
		a.reportUsage(ctx)
	case *WriteCheckpoints:
		ctx.Respond(&WriteCheckpointsDone{Err: a.writeCheckpoints()})
	case *actor.Stopping:
		for _, cancel := range a.timers {
			cancel()
		}
	case actor.AutoReceiveMessage, actor.SystemMessage:
	default:
		a.logger.WithField("type", fmt.Sprintf("%T", m)).Warn("unhandled message")
	}
}

// startFlusher spawns the dir's flusher. Without one, the partitions,
// whose flushes come back from it as dead letters, sync their own files.
func (a *logDirActor) startFlusher(ctx actor.Context) {
	props := NewFlusherProps(FlusherConfig{Parallelism: a.cfg.FlushParallelism, FileSystemSyncFlushes: a.cfg.FileSystemSyncFlushes, Dispatcher: a.cfg.Dispatcher, Logger: a.logger})
	if _, err := ctx.SpawnNamed(props, flusherName); err != nil {
		a.logger.WithError(err).Error("cannot start the flusher; partitions sync their own files")
	}
}

type checkpointTick struct{}

type usageTick struct{}

// usageDue is the usage report partitions' size changes made due.
type usageDue struct{}

func (a *logDirActor) onReport(ctx actor.Context, m *PartitionReport) {
	a.dirty = true
	if m.Deleted {
		delete(a.partitions, m.TP)
		a.sorted = nil
		a.reportUsage(ctx)
		a.allocate(ctx)
		return
	}
	if m.Recovered != nil {
		a.noteRecovery(ctx, m.Recovered)
	}
	now := a.cfg.Now()
	p := a.partitions[m.TP]
	appeared := p == nil || p.report.PID == nil
	if p == nil {
		p = newPartitionState(PartitionReport{})
		a.partitions[m.TP] = p
		a.sorted = nil
	}
	if !p.lastSeen.IsZero() && m.AppendedBytes >= p.report.AppendedBytes {
		p.rate = decayRate(p.rate, float64(m.AppendedBytes-p.report.AppendedBytes), now.Sub(p.lastSeen))
	}
	// A partition that appears is a change even when empty: the placement
	// actor must know every partition a drain has to move.
	changed := appeared || m.SizeBytes != p.report.SizeBytes || m.Closed
	if appeared && a.full && m.PID != nil {
		ctx.Send(m.PID, &DirSpace{Full: true, Reason: a.fullText()})
	}
	p.report = *m
	p.lastSeen = now
	a.noteAllowance(ctx, p, m)
	if changed && !a.usageSoon {
		a.usageSoon = true
		scheduler.NewTimerScheduler(ctx).SendOnce(usageDelay, ctx.Self(), &usageDue{})
	}
	a.allocate(ctx)
}

// recoverySummaryDelay gathers the recoveries of the partitions opened
// after an unclean stop into one log line per log dir.
const recoverySummaryDelay = time.Second

// recoverySummary is the line a log dir logs of what recovery did to its
// partitions, gathered over recoverySummaryDelay.
type recoverySummary struct{}

// noteRecovery adds what recovery did to a partition to the summary due.
func (a *logDirActor) noteRecovery(ctx actor.Context, r *disk.Recovery) {
	if a.recovered.partitions == 0 {
		scheduler.NewTimerScheduler(ctx).SendOnce(recoverySummaryDelay, ctx.Self(), &recoverySummary{})
	}
	s := &a.recovered
	s.partitions++
	s.SegmentsValidated += r.SegmentsValidated
	s.BytesValidated += r.BytesValidated
	s.BytesTruncated += r.BytesTruncated
	s.SegmentsDeleted += r.SegmentsDeleted
	s.Took = max(s.Took, r.Took)
}

func (a *logDirActor) logRecovery() {
	s := a.recovered
	a.recovered = recoveryTotals{}
	a.logger.WithFields(logrus.Fields{
		"partitions":         s.partitions,
		"segments_validated": s.SegmentsValidated,
		"bytes_validated":    s.BytesValidated,
		"bytes_truncated":    s.BytesTruncated,
		"segments_deleted":   s.SegmentsDeleted,
		"longest":            s.Took.Round(time.Millisecond).String(),
	}).Info("recovered partitions after an unclean stop")
}

// recoveryTotals sums the recoveries of a log dir's partitions.
type recoveryTotals struct {
	disk.Recovery
	partitions int
}

// decayRate folds bytes written over elapsed into an exponentially decaying
// average rate with half-life rateHalfLife.
func decayRate(rate, bytes float64, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return rate
	}
	current := bytes / elapsed.Seconds()
	keep := 1 / (1 + elapsed.Seconds()/rateHalfLife.Seconds())
	return rate*keep + current*(1-keep)
}

func (a *logDirActor) onFailed(ctx actor.Context, m *LogDirFailed) {
	if a.state == LogDirOffline {
		return
	}
	a.state = LogDirOffline
	a.failure = fmt.Sprintf("I/O error in %s: %s", m.TP, messages.ErrorText(m.Err))
	a.logger.WithError(m.Err).WithField("partition", m.TP.String()).Error("log directory failed; its partitions are offline")
	for _, p := range a.partitions {
		if p.report.PID != nil {
			ctx.Send(p.report.PID, &GoOffline{Reason: a.failure})
		}
	}
	a.reportUsage(ctx)
}

func (a *logDirActor) onSetDraining(ctx actor.Context, m *setDraining) {
	if a.state == LogDirOffline {
		return
	}
	if m.draining {
		a.state = LogDirDraining
	} else {
		a.state = LogDirOnline
	}
	a.reportUsage(ctx)
}

// usage describes the directory now.
func (a *logDirActor) usage() *messages.LogDirInfo {
	info := &messages.LogDirInfo{Path: a.cfg.Path, State: a.state, Error: a.failure, Partitions: int32(len(a.partitions))}
	if a.sorted == nil {
		a.sorted = make([]disk.TopicPartition, 0, len(a.partitions))
		for tp := range a.partitions {
			a.sorted = append(a.sorted, tp)
		}
		sort.Slice(a.sorted, func(i, j int) bool {
			if a.sorted[i].Topic != a.sorted[j].Topic {
				return a.sorted[i].Topic < a.sorted[j].Topic
			}
			return a.sorted[i].Partition < a.sorted[j].Partition
		})
	}
	info.PartitionUsage = make([]*messages.PartitionUsage, 0, len(a.sorted))
	for _, tp := range a.sorted {
		p := a.partitions[tp]
		info.Bytes += p.report.SizeBytes
		info.WriteBytesPerS += p.rate
		info.ProjectedBytes += placement.Projection(p.report.SizeBytes, p.rate, p.report.RetentionBytes, p.report.RetentionMs)
		info.PartitionUsage = append(info.PartitionUsage, &messages.PartitionUsage{
			Topic: tp.Topic, Partition: tp.Partition, Bytes: p.report.SizeBytes, WriteBytesPerS: p.rate,
			RetentionBytes: p.report.RetentionBytes, RetentionMs: p.report.RetentionMs,
		})
	}
	info.CapacityBytes, info.FreeBytes = a.space(info.Bytes)
	info.ReserveBytes = a.cfg.Reserve.Of(info.CapacityBytes)
	info.Draining = a.state == LogDirDraining
	if a.full && a.state != LogDirOffline {
		info.State = LogDirFull
	}
	return info
}

// space returns the directory's capacity and free bytes: the declared
// capacity less what its partitions hold (and no more than the file system
// has free), or the file system's own figures.
func (a *logDirActor) space(used int64) (capacity, free int64) {
	var fsTotal, fsFree int64 = -1, -1
	if total, avail, ok := a.cfg.Space(a.cfg.Path); ok {
		fsTotal, fsFree = total, avail
	}
	if a.cfg.Capacity > 0 {
		free = max(a.cfg.Capacity-used, 0)
		if fsFree >= 0 && fsFree < free {
			free = fsFree
		}
		return a.cfg.Capacity, free
	}
	if fsTotal < 0 {
		return 0, 0
	}
	return fsTotal, fsFree
}

func (a *logDirActor) reportUsage(ctx actor.Context) {
	info := a.usage()
	a.checkSpace(ctx, info)
	if a.cfg.Placement != nil {
		ctx.Send(a.cfg.Placement, &logDirUsage{info: info})
	}
}

// checkSpace puts the directory into full when its free space is under the
// reserve, and out of it once it has twice the reserve free (hysteresis, so
// that appends do not flap at the edge). At start-up it is full with up to
// twice the reserve free: whether it was full before is not known, and one
// that was would have stayed full until then. A capacity it cannot tell (no file
// system figures, no declared capacity) never makes it full.
func (a *logDirActor) checkSpace(ctx actor.Context, info *messages.LogDirInfo) {
	if a.state == LogDirOffline {
		return
	}
	known := info.CapacityBytes > 0
	short := info.FreeBytes < info.ReserveBytes
	if !a.checked {
		short = info.FreeBytes <= 2*info.ReserveBytes // as full leaves above it
	}
	a.checked = true
	switch {
	case known && !a.full && short:
		a.setFull(ctx, fmt.Sprintf("log dir %s is full: %d bytes free, under its reserve of %d", a.cfg.Path, info.FreeBytes, info.ReserveBytes))
	case a.full && known && info.FreeBytes > 2*info.ReserveBytes,
		// With no figures to tell, a dir that a write found full is tried
		// again after a usage interval: its next append finds out.
		a.full && !known && a.cfg.Now().Sub(a.fullSince) >= a.cfg.UsageInterval:
		a.full, a.fullReason = false, ""
		a.logger.WithFields(logrus.Fields{"free_bytes": info.FreeBytes, "reserve_bytes": info.ReserveBytes}).Info("log directory has room again; appends resume")
		a.tellPartitions(ctx, &DirSpace{})
	default:
		return
	}
	info.State = a.usage().State
}

// setFull puts the directory into full, for reason.
func (a *logDirActor) setFull(ctx actor.Context, reason string) {
	a.full, a.fullReason, a.fullSince = true, reason, a.cfg.Now()
	a.logger.WithField("reason", reason).Warn("log directory full: appends to its partitions are refused until it has twice its reserve free")
	a.tellPartitions(ctx, &DirSpace{Full: true, Reason: a.fullText()})
}

// fullText is why appends to the directory's partitions are refused while
// it is full.
func (a *logDirActor) fullText() string {
	if a.everyFull == "" {
		return a.fullReason
	}
	return a.fullReason + "; " + a.everyFull
}

// countPartitionsOnDisk counts, before any partition has reported, the
// bytes of every partition directory found in the directory: the sizes of
// its segments' .log files, as a partition's log counts its size. So a
// declared capacity is counted against the bytes already there from the
// start, not as partitions open one by one, and the partitions that open
// first get no room that the others already hold. A directory that cannot
// be read is counted by what its partitions report.
func (a *logDirActor) countPartitionsOnDisk() {
	names, err := a.cfg.FS.ReadDir(a.cfg.Path)
	if err != nil {
		a.logger.WithError(err).Warn("cannot list the log directory; its partitions count from their reports")
		return
	}
	for _, name := range names {
		tp, err := disk.ParsePartitionDirName(name)
		if err != nil {
			continue
		}
		dir := filepath.Join(a.cfg.Path, name)
		files, err := a.cfg.FS.ReadDir(dir)
		if err != nil {
			continue
		}
		var size int64
		for _, f := range files {
			if _, ext, err := disk.ParseSegmentFileName(f); err != nil || ext != ".log" {
				continue
			}
			if st, err := a.cfg.FS.Stat(filepath.Join(dir, f)); err == nil {
				size += st.Size()
			}
		}
		p := a.partitions[tp]
		if p == nil {
			p = newPartitionState(PartitionReport{TP: tp})
			a.partitions[tp] = p
			a.sorted = nil
		}
		p.report.SizeBytes = size
	}
}

// tellPartitions sends m to every partition of the directory.
func (a *logDirActor) tellPartitions(ctx actor.Context, m any) {
	for _, p := range a.partitions {
		if p.report.PID != nil {
			ctx.Send(p.report.PID, m)
		}
	}
}

// onNoSpace takes the directory into full when a partition's write found
// no room, whatever the figures say: the file system knows best.
func (a *logDirActor) onNoSpace(ctx actor.Context, m *LogDirNoSpace) {
	if a.state == LogDirOffline {
		return
	}
	if !a.full {
		info := a.usage()
		a.setFull(ctx, fmt.Sprintf("log dir %s is full: %d bytes free, and a write to %s found no room (%v)", a.cfg.Path, info.FreeBytes, m.TP, messages.ErrorText(m.Err)))
	}
	a.reportUsage(ctx)
}

// writeCheckpoints writes both checkpoint files atomically.
func (a *logDirActor) writeCheckpoints() error {
	if a.state == LogDirOffline {
		return nil
	}
	recovery := make(map[disk.TopicPartition]int64, len(a.partitions))
	start := make(map[disk.TopicPartition]int64, len(a.partitions))
	for tp, p := range a.partitions {
		recovery[tp] = p.report.RecoveryPoint
		start[tp] = p.report.LogStartOffset
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
