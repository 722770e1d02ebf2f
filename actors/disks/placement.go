package disks

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/placement"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
)

// Placement policies.
const (
	PolicyLoad  = "load"
	PolicyCount = "count"
)

// DisksStateFile is the file in a node's data directory that remembers the
// log directories added at run time and those draining, so that both
// survive a restart.
const DisksStateFile = "disks.json"

// LogDirSpec is one log directory of a node as configured.
type LogDirSpec struct {
	Path     string `json:"path"`
	Capacity int64  `json:"capacity_bytes,omitempty"`
	Draining bool   `json:"draining,omitempty"`
	// ID is the directory's id, from its meta.properties (see EnsureDirID);
	// it is not kept in DisksStateFile.
	ID string `json:"-"`
}

// DisksState is the content of DisksStateFile.
type DisksState struct {
	// Added are directories added with `depot disks add`.
	Added []LogDirSpec `json:"added"`
	// Draining are directories being emptied with `depot disks drain`.
	Draining []string `json:"draining"`
	// Removed are directories removed with `depot disks remove`: a start
	// that names one is refused.
	Removed []string `json:"removed,omitempty"`
}

// ReadDisksState reads the disks state of the data directory dataDir; a
// missing file is an empty state.
func ReadDisksState(fsys disk.FS, dataDir string) (DisksState, error) {
	var st DisksState
	path := filepath.Join(dataDir, DisksStateFile)
	data, err := disk.ReadFile(fsys, path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("disks: reading %s: %w", path, err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("disks: %s is damaged: %w", path, err)
	}
	return st, nil
}

// writeDisksState replaces the disks state atomically.
func writeDisksState(fsys disk.FS, dataDir string, st DisksState) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(fsys, dataDir, DisksStateFile, data)
}

// writeFileAtomic replaces dir/name with data: written to a temporary file,
// synced, renamed over it, and the directory synced, so that a crash leaves
// the old content or the new, never a mix.
func writeFileAtomic(fsys disk.FS, dir, name string, data []byte) error {
	path := filepath.Join(dir, name)
	tmp := path + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}

// BalanceSettings tune the balancer.
type BalanceSettings struct {
	// Interval between balancing passes. Default 30 s; negative disables
	// the timer (balancing then runs only when asked).
	Interval time.Duration
	// MaxDeviation is how far (relative) a directory's used fraction may be
	// from the node's mean. Default 0.10.
	MaxDeviation float64
	// HighWater is the used fraction a directory should stay below.
	// Default 0.80. Whatever it is, a directory is kept below its capacity
	// less twice its reserve, where it would be relieved urgently.
	HighWater float64
	// ThrottleBytesPerS bounds the copy rate of a move, so that clients are
	// not starved. Default 64 MiB/s; 0 after defaults means unlimited only
	// if set negative.
	ThrottleBytesPerS int64
	// MinMoveBytes: imbalances smaller than this are left alone. Default
	// 64 MiB.
	MinMoveBytes int64
}

// DefaultBalanceSettings returns the settings the balancer runs with when
// given none: every field of BalanceSettings at its stated default.
func DefaultBalanceSettings() BalanceSettings { return BalanceSettings{}.withDefaults() }

func (b BalanceSettings) withDefaults() BalanceSettings {
	if b.Interval == 0 {
		b.Interval = 30 * time.Second
	}
	if b.MaxDeviation == 0 {
		b.MaxDeviation = 0.10
	}
	if b.HighWater == 0 {
		b.HighWater = 0.80
	}
	if b.ThrottleBytesPerS == 0 {
		b.ThrottleBytesPerS = 64 << 20
	}
	if b.ThrottleBytesPerS < 0 {
		b.ThrottleBytesPerS = 0
	}
	if b.MinMoveBytes == 0 {
		b.MinMoveBytes = 64 << 20
	}
	return b
}

// PlacementConfig is what the placement actor needs.
type PlacementConfig struct {
	// NodeID is the node's id, in the directory assignments it reports.
	NodeID  int32
	FS      disk.FS
	DataDir string
	// Policy is PolicyLoad (default) or PolicyCount.
	Policy string
	// LogDirs are the node's directories at start-up, configured ones first.
	LogDirs []LogDirSpec
	// AddedLogDirs are those of LogDirs that were added at run time.
	AddedLogDirs []LogDirSpec
	Balance      BalanceSettings
	// PartitionManager is told about directories added at run time.
	PartitionManager *actor.PID
	// OpenLogDir prepares a directory added at run time, before anything is
	// recorded of it: the node locks it and returns its id. Default: no
	// lock, and EnsureDirID.
	OpenLogDir func(path string) (string, error)
	// StartLogDir starts the log-dir actor of a directory added at run time.
	StartLogDir func(spec LogDirSpec) (*actor.PID, error)
	// StopLogDir stops the log-dir actor of a removed directory and lets go
	// of it. May be nil.
	StopLogDir func(path string)
	// Removed are the directories removed before the start (DisksState).
	Removed []string
	Logger  *logrus.Entry
}

type balanceTick struct{}

// moveDone is the end of a move the balancer started.
type moveDone struct {
	move placement.Move
	resp *messages.MovePartitionResponse
	err  error
}

// placementActor chooses the log directory of every new partition and
// keeps the node's directories balanced by moving partitions between them
// online. It knows the directories from their log-dir actors' reports.
type placementActor struct {
	cfg   PlacementConfig
	order []string // directory paths in configured, then added, order
	dirs  map[string]*messages.LogDirInfo
	ids   map[string]string // directory ids by path
	// declared are the directories whose capacity is declared, not the
	// file system's.
	declared map[string]bool
	added    []LogDirSpec
	removed  []string
	running  *placement.Move
	queue    []placement.Move
	// asked are the moves asked of the node (MoveReplicasRequest), in
	// the order asked: they run before the balancer's queue.
	asked []placement.Move
	// everyFull is what the log-dir actors were last told of every dir
	// being full (see everyDirFullText).
	everyFull string
	stop      scheduler.CancelFunc
	logger    *logrus.Entry
}

// NewPlacementProps returns the props of the placement actor.
func NewPlacementProps(cfg PlacementConfig) *actor.Props {
	if cfg.Policy == "" {
		cfg.Policy = PolicyLoad
	}
	if cfg.OpenLogDir == nil {
		cfg.OpenLogDir = func(path string) (string, error) { return EnsureDirID(cfg.FS, path, cfg.NodeID) }
	}
	cfg.Balance = cfg.Balance.withDefaults()
	logger := cfg.Logger.WithField("actor", "placement")
	return actors.Props(func() actor.Actor {
		a := &placementActor{cfg: cfg, dirs: map[string]*messages.LogDirInfo{}, ids: map[string]string{}, declared: map[string]bool{}, added: append([]LogDirSpec(nil), cfg.AddedLogDirs...), removed: append([]string(nil), cfg.Removed...), logger: logger}
		for _, d := range cfg.LogDirs {
			a.order = append(a.order, d.Path)
			a.ids[d.Path] = d.ID
			a.declared[d.Path] = d.Capacity > 0
			state := LogDirOnline
			if d.Draining {
				state = LogDirDraining
			}
			a.dirs[d.Path] = &messages.LogDirInfo{Path: d.Path, State: state, CapacityBytes: d.Capacity}
		}
		return a
	}, logger)
}

func (a *placementActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if a.cfg.Balance.Interval > 0 {
			a.stop = scheduler.NewTimerScheduler(ctx).SendRepeatedly(a.cfg.Balance.Interval, a.cfg.Balance.Interval, ctx.Self(), &balanceTick{})
		}
	case *logDirUsage:
		if _, ok := a.dirs[m.info.Path]; ok {
			a.dirs[m.info.Path] = m.info
			a.drainLeftovers(ctx, m.info)
			a.relieve(ctx, m.info)
			a.tellEveryFull(ctx)
		}
	case *ChooseLogDirs:
		dirs, err := a.choose(m)
		ctx.Respond(&ChooseLogDirsResult{Dirs: dirs, Err: err})
	case *messages.DescribeLogDirsRequest:
		a.onDescribe(ctx, m)
	case *messages.MoveReplicasRequest:
		ctx.Respond(a.onMoveReplicas(ctx, m))
	case *messages.AddLogDirRequest:
		ctx.Respond(a.onAdd(ctx, m))
	case *messages.DrainLogDirRequest:
		ctx.Respond(a.onDrain(ctx, m))
	case *messages.UndrainLogDirRequest:
		ctx.Respond(a.onUndrain(ctx, m))
	case *messages.RemoveLogDirRequest:
		ctx.Respond(a.onRemove(ctx, m))
	case *messages.BalanceRequest:
		ctx.Respond(a.onBalance(ctx, m))
	case *balanceTick:
		a.balance(ctx)
	case *moveDone:
		a.onMoveDone(ctx, m)
	case *actor.Stopping:
		if a.stop != nil {
			a.stop()
		}
	case actor.AutoReceiveMessage, actor.SystemMessage:
	default:
		a.logger.WithField("type", fmt.Sprintf("%T", m)).Warn("unhandled message")
	}
}

// describe returns the directories in order.
func (a *placementActor) describe() []*messages.LogDirInfo {
	out := make([]*messages.LogDirInfo, 0, len(a.order))
	for _, path := range a.order {
		out = append(out, a.dirs[path])
	}
	return out
}

// describeStatusTimeout bounds the wait for a moving partition's status in
// the answer to a DescribeLogDirsRequest.
const describeStatusTimeout = 5 * time.Second

// onDescribe answers a DescribeLogDirsRequest with a copy of the
// directories and, while a move runs, its future log in the directory it
// moves to, from the moving partition's status (none when the partition
// does not answer in describeStatusTimeout). With totals_only the copy
// leaves the partitions' usage out, which is most of it with many
// partitions.
func (a *placementActor) onDescribe(ctx actor.Context, m *messages.DescribeLogDirsRequest) {
	dirs := make([]*messages.LogDirInfo, 0, len(a.order))
	for _, info := range a.describe() {
		if m.GetTotalsOnly() {
			usage := info.PartitionUsage
			info.PartitionUsage = nil
			dirs = append(dirs, proto.Clone(info).(*messages.LogDirInfo))
			info.PartitionUsage = usage
			continue
		}
		dirs = append(dirs, proto.Clone(info).(*messages.LogDirInfo))
	}
	resp := &messages.DescribeLogDirsResponse{Dirs: dirs, Policy: a.cfg.Policy, NodeId: a.cfg.NodeID}
	if a.running == nil || m.GetTotalsOnly() {
		ctx.Respond(resp)
		return
	}
	sender := ctx.Sender()
	pid := actor.NewPID(ctx.Self().Address, actors.PartitionActorName(a.running.Topic, a.running.Partition))
	future := ctx.RequestFuture(pid, &messages.PartitionStatusRequest{}, describeStatusTimeout)
	ctx.ReenterAfter(future, func(res any, err error) {
		if st, ok := res.(*messages.PartitionStatusResponse); ok && err == nil {
			addFuture(dirs, st)
		}
		ctx.Send(sender, resp)
	})
}

// addFuture adds the future log of a moving partition, as its status st
// describes it, to the directory of dirs it moves to; a partition not
// moving, or moving to none of dirs, adds nothing. Its offset lag is how
// far its end offset is behind the partition's log end offset.
func addFuture(dirs []*messages.LogDirInfo, st *messages.PartitionStatusResponse) {
	if st.GetError() != messages.ErrorCode_NONE || st.GetMovingTo() == "" {
		return
	}
	for _, d := range dirs {
		if filepath.Clean(d.GetPath()) != filepath.Clean(st.GetMovingTo()) {
			continue
		}
		d.Futures = append(d.Futures, &messages.FutureLog{
			Topic: st.GetTopic(), Partition: st.GetPartition(), Bytes: st.GetMoveFutureBytes(),
			OffsetLag: max(st.GetLogEndOffset()-st.GetMoveFutureEndOffset(), 0),
		})
		return
	}
}

// onMoveReplicas takes the moves a MoveReplicasRequest asks for: each one
// moveAsked queues joins the moves asked, in place of one queued for the
// same partition, and the balancer's queue drops its own moves of every
// partition that was not refused. The first starts at once when no move
// runs.
func (a *placementActor) onMoveReplicas(ctx actor.Context, m *messages.MoveReplicasRequest) *messages.MoveReplicasResponse {
	resp := &messages.MoveReplicasResponse{}
	for _, r := range m.GetReplicas() {
		res := &messages.ReplicaDirResult{Topic: r.GetTopic(), Partition: r.GetPartition()}
		resp.Results = append(resp.Results, res)
		var queue bool
		res.Error, res.ErrorMessage, queue = moveAsked(a.dirs, a.running, a.asked, r)
		if res.Error != messages.ErrorCode_NONE {
			continue
		}
		same := func(mv placement.Move) bool { return mv.Topic == r.GetTopic() && mv.Partition == r.GetPartition() }
		a.queue = slices.DeleteFunc(a.queue, same)
		if !queue {
			continue
		}
		a.asked = slices.DeleteFunc(a.asked, same)
		a.asked = append(a.asked, placement.Move{Topic: r.GetTopic(), Partition: r.GetPartition(), To: filepath.Clean(r.GetDir())})
		a.logger.WithFields(logrus.Fields{"topic": r.GetTopic(), "partition": r.GetPartition(), "to": filepath.Clean(r.GetDir())}).Info("partition move asked")
	}
	a.next(ctx)
	return resp
}

// moveAsked decides what becomes of a move asked of the node, from its
// directories as reported (dirs, by path), the move running and the moves
// asked before it: whether to queue it, or the code that refuses it, or
// NONE with nothing to do. A directory that is not one of dirs is
// LOG_DIR_NOT_FOUND; one offline or full KAFKA_STORAGE_ERROR; one draining
// INVALID_REQUEST; a partition no directory holds NOT_LEADER_OR_FOLLOWER.
// A partition already there, moving there, or last asked to go there,
// needs nothing.
func moveAsked(dirs map[string]*messages.LogDirInfo, running *placement.Move, asked []placement.Move, r *messages.ReplicaMove) (messages.ErrorCode, string, bool) {
	path := filepath.Clean(r.GetDir())
	name := fmt.Sprintf("%s-%d", r.GetTopic(), r.GetPartition())
	info, ok := dirs[path]
	switch {
	case r.GetDir() == "" || !ok:
		return messages.ErrorCode_LOG_DIR_NOT_FOUND, fmt.Sprintf("no log dir %q on this node", r.GetDir()), false
	case info.GetState() == LogDirOffline:
		return messages.ErrorCode_KAFKA_STORAGE_ERROR, fmt.Sprintf("log dir %s is offline: %s", path, info.GetError()), false
	case info.GetState() == LogDirFull:
		return messages.ErrorCode_KAFKA_STORAGE_ERROR, fmt.Sprintf("log dir %s is full", path), false
	case info.GetState() == LogDirDraining || info.GetDraining():
		return messages.ErrorCode_INVALID_REQUEST, fmt.Sprintf("log dir %s is draining: it takes no partition", path), false
	}
	from, _, held := holder(dirs, r.GetTopic(), r.GetPartition())
	if !held {
		return messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, fmt.Sprintf("no log dir of this node holds %s", name), false
	}
	// Where the partition ends up once the moves before this one ran.
	end := from
	if running != nil && running.Topic == r.GetTopic() && running.Partition == r.GetPartition() {
		end = running.To
	}
	for _, mv := range asked {
		if mv.Topic == r.GetTopic() && mv.Partition == r.GetPartition() {
			end = mv.To
		}
	}
	if end == path {
		return messages.ErrorCode_NONE, "", false
	}
	return messages.ErrorCode_NONE, "", true
}

// holder is the directory of dirs that holds a partition, by its reports,
// and the partition's bytes there.
func holder(dirs map[string]*messages.LogDirInfo, topic string, partition int32) (string, int64, bool) {
	for path, info := range dirs {
		for _, p := range info.GetPartitionUsage() {
			if p.GetTopic() == topic && p.GetPartition() == partition {
				return path, p.GetBytes(), true
			}
		}
	}
	return "", 0, false
}

func (a *placementActor) choose(m *ChooseLogDirs) ([]string, error) {
	if text := a.everyDirFullText(); text != "" {
		return nil, errors.New(text)
	}
	loads := a.loads()
	for i := range loads {
		// A full dir takes no new partition.
		if a.dirs[loads[i].Path].State == LogDirFull {
			loads[i].Online = false
		}
	}
	dirs := placement.DirsFor(loads, m.Topic)
	policy := placement.ByLoad
	if a.cfg.Policy == PolicyCount || !capacitiesKnown(dirs) {
		// Without a capacity for every directory there is nothing to
		// weigh bytes against: count partitions, as Kafka does.
		policy = placement.ByCount
	}
	chosen, err := policy(dirs, len(m.Partitions))
	if err != nil {
		return nil, err
	}
	// Count the new partitions now, so that a second topic created before
	// the next reports sees them.
	for i, path := range chosen {
		info := a.dirs[path]
		info.Partitions++
		info.PartitionUsage = append(info.PartitionUsage, &messages.PartitionUsage{
			Topic: m.Topic, Partition: m.Partitions[i], RetentionBytes: m.RetentionBytes, RetentionMs: m.RetentionMs,
		})
	}
	return chosen, nil
}

// loads converts the directories into the balancer's terms.
func (a *placementActor) loads() []placement.DirLoad {
	loads := make([]placement.DirLoad, 0, len(a.order))
	for _, path := range a.order {
		info := a.dirs[path]
		l := placement.DirLoad{
			Path:     path,
			Capacity: info.CapacityBytes,
			Online:   info.State != LogDirOffline,
			Draining: info.State == LogDirDraining,
			Reserve:  info.ReserveBytes,
		}
		for _, p := range info.PartitionUsage {
			l.Partitions = append(l.Partitions, placement.PartitionLoad{
				Topic: p.Topic, Partition: p.Partition, Bytes: p.Bytes,
				Projected: placement.Projection(p.Bytes, p.WriteBytesPerS, p.RetentionBytes, p.RetentionMs),
			})
		}
		loads = append(loads, l)
	}
	return loads
}

func (a *placementActor) plan() []placement.Move {
	return placement.PlanBalance(a.loads(), placement.BalanceConfig{
		MaxDeviation: a.cfg.Balance.MaxDeviation,
		HighWater:    a.cfg.Balance.HighWater,
		MinMoveBytes: a.cfg.Balance.MinMoveBytes,
	})
}

func (a *placementActor) onAdd(ctx actor.Context, m *messages.AddLogDirRequest) *messages.AddLogDirResponse {
	path := filepath.Clean(m.Path)
	if m.Path == "" {
		return &messages.AddLogDirResponse{Error: messages.ErrorCode_INVALID_REQUEST, ErrorMessage: "no log dir path given"}
	}
	if m.CapacityBytes < 0 {
		return &messages.AddLogDirResponse{Error: messages.ErrorCode_INVALID_REQUEST, ErrorMessage: fmt.Sprintf("log dir %s: capacity %d is negative", path, m.CapacityBytes)}
	}
	for _, existing := range a.order {
		if filepath.Clean(existing) == path {
			return &messages.AddLogDirResponse{Error: messages.ErrorCode_INVALID_REQUEST, ErrorMessage: fmt.Sprintf("%s is already a log dir of this node", path)}
		}
	}
	info, err := a.cfg.FS.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return &messages.AddLogDirResponse{Error: messages.ErrorCode_LOG_DIR_NOT_FOUND, ErrorMessage: fmt.Sprintf("%s does not exist: create the directory (or mount its disk) first", path)}
	case err != nil:
		return &messages.AddLogDirResponse{Error: messages.ErrorCode_KAFKA_STORAGE_ERROR, ErrorMessage: messages.ErrorText(err)}
	case !info.IsDir():
		return &messages.AddLogDirResponse{Error: messages.ErrorCode_INVALID_REQUEST, ErrorMessage: fmt.Sprintf("%s is not a directory", path)}
	}
	if m.CapacityBytes == 0 {
		if shared := a.sharedFileSystem(info); shared != "" {
			if !m.Force {
				return &messages.AddLogDirResponse{Error: messages.ErrorCode_INVALID_REQUEST, ErrorMessage: fmt.Sprintf(
					"%s is on the same file system as log dir %s and neither declares a capacity, so they would share it and balancing between them means little: declare capacities (PATH=CAP) or add it with --force", path, shared)}
			}
			a.logger.WithFields(logrus.Fields{"dir": path, "shares_with": shared}).Warn("log directory added on the file system of another, with no capacity declared: they share its space")
		}
	}
	id, err := a.cfg.OpenLogDir(path)
	if err != nil {
		return &messages.AddLogDirResponse{Error: messages.ErrorCode_KAFKA_STORAGE_ERROR, ErrorMessage: fmt.Sprintf("cannot use %s as a log dir: %s", path, messages.ErrorText(err))}
	}
	spec := LogDirSpec{Path: path, Capacity: m.CapacityBytes, ID: id}
	st := a.state()
	st.Added = append(st.Added, spec)
	st.Removed = slices.DeleteFunc(st.Removed, func(p string) bool { return p == path })
	if err := writeDisksState(a.cfg.FS, a.cfg.DataDir, st); err != nil {
		return &messages.AddLogDirResponse{Error: messages.ErrorCode_KAFKA_STORAGE_ERROR, ErrorMessage: fmt.Sprintf("log dir %s not added: recording it failed: %s", path, messages.ErrorText(err))}
	}
	pid, err := a.cfg.StartLogDir(spec)
	if err != nil {
		return &messages.AddLogDirResponse{Error: messages.ErrorCode_UNKNOWN_SERVER_ERROR, ErrorMessage: fmt.Sprintf("log dir %s recorded but not started: %s", path, messages.ErrorText(err))}
	}
	a.added = append(a.added, spec)
	a.removed = st.Removed
	a.order = append(a.order, path)
	a.ids[path] = id
	a.declared[path] = m.CapacityBytes > 0
	a.dirs[path] = &messages.LogDirInfo{Path: path, State: LogDirOnline, CapacityBytes: m.CapacityBytes}
	ctx.Send(a.cfg.PartitionManager, &LogDirAdded{Path: path, ID: id, PID: pid})
	a.logger.WithField("dir", path).Info("log directory added")
	return &messages.AddLogDirResponse{}
}

// sharedFileSystem returns a log dir without a declared capacity on the
// file system of info (a directory's), or "" when there is none or the
// file systems cannot be told apart (not the OS's).
func (a *placementActor) sharedFileSystem(info os.FileInfo) string {
	dev, ok := deviceOf(info)
	if !ok {
		return ""
	}
	for _, path := range a.order {
		if a.declared[path] {
			continue
		}
		other, err := a.cfg.FS.Stat(path)
		if err != nil {
			continue
		}
		if d, ok := deviceOf(other); ok && d == dev {
			return path
		}
	}
	return ""
}

// deviceOf is the device of the file system that holds a file of the OS.
func deviceOf(info os.FileInfo) (uint64, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Dev), true
}

// state is the disks state to persist.
func (a *placementActor) state() DisksState {
	st := DisksState{Added: append([]LogDirSpec(nil), a.added...), Removed: append([]string(nil), a.removed...)}
	for _, path := range a.order {
		if a.dirs[path].State == LogDirDraining {
			st.Draining = append(st.Draining, path)
		}
	}
	return st
}

func (a *placementActor) onDrain(ctx actor.Context, m *messages.DrainLogDirRequest) *messages.DrainLogDirResponse {
	path := filepath.Clean(m.Path)
	info, ok := a.dirs[path]
	if !ok {
		return &messages.DrainLogDirResponse{Error: messages.ErrorCode_LOG_DIR_NOT_FOUND, ErrorMessage: fmt.Sprintf("no log dir %s on this node", path)}
	}
	if info.State == LogDirOffline {
		return &messages.DrainLogDirResponse{Error: messages.ErrorCode_KAFKA_STORAGE_ERROR, ErrorMessage: fmt.Sprintf("log dir %s is offline: %s", path, info.Error)}
	}
	others := 0
	for _, p := range a.order {
		if p != path && a.dirs[p].State == LogDirOnline {
			others++
		}
	}
	if others == 0 {
		return &messages.DrainLogDirResponse{Error: messages.ErrorCode_INVALID_REQUEST, ErrorMessage: fmt.Sprintf("cannot drain log dir %s: no other online log dir would take its partitions", path)}
	}
	info.State = LogDirDraining
	if err := writeDisksState(a.cfg.FS, a.cfg.DataDir, a.state()); err != nil {
		info.State = LogDirOnline
		return &messages.DrainLogDirResponse{Error: messages.ErrorCode_KAFKA_STORAGE_ERROR, ErrorMessage: fmt.Sprintf("log dir %s not drained: recording the drain failed: %s", path, messages.ErrorText(err))}
	}
	ctx.Send(actor.NewPID(ctx.Self().Address, actors.LogDirActorName(path)), &setDraining{draining: true})
	a.logger.WithField("dir", path).Info("draining log directory")
	moves := a.plan()
	a.queue = moves
	a.next(ctx)
	return &messages.DrainLogDirResponse{Moves: toMessages(moves)}
}

func (a *placementActor) onUndrain(ctx actor.Context, m *messages.UndrainLogDirRequest) *messages.UndrainLogDirResponse {
	path := filepath.Clean(m.Path)
	info, ok := a.dirs[path]
	switch {
	case !ok:
		return &messages.UndrainLogDirResponse{Error: messages.ErrorCode_LOG_DIR_NOT_FOUND, ErrorMessage: fmt.Sprintf("no log dir %s on this node", path)}
	case info.State != LogDirDraining:
		return &messages.UndrainLogDirResponse{Error: messages.ErrorCode_INVALID_REQUEST, ErrorMessage: fmt.Sprintf("log dir %s is %s, not draining", path, info.State)}
	}
	info.State = LogDirOnline
	if err := writeDisksState(a.cfg.FS, a.cfg.DataDir, a.state()); err != nil {
		info.State = LogDirDraining
		return &messages.UndrainLogDirResponse{Error: messages.ErrorCode_KAFKA_STORAGE_ERROR, ErrorMessage: fmt.Sprintf("log dir %s still draining: recording the undrain failed: %s", path, messages.ErrorText(err))}
	}
	ctx.Send(actor.NewPID(ctx.Self().Address, actors.LogDirActorName(path)), &setDraining{draining: false})
	queued := len(a.queue)
	a.queue = slices.DeleteFunc(a.queue, func(mv placement.Move) bool { return mv.From == path })
	a.logger.WithFields(logrus.Fields{"dir": path, "moves_dropped": queued - len(a.queue)}).Info("log directory no longer draining")
	return &messages.UndrainLogDirResponse{}
}

// onRemove forgets a drained directory that holds no partition: its
// log-dir actor stops, and the node no longer uses it. Its files stay.
func (a *placementActor) onRemove(ctx actor.Context, m *messages.RemoveLogDirRequest) *messages.RemoveLogDirResponse {
	path := filepath.Clean(m.Path)
	info, ok := a.dirs[path]
	moving := func(mv placement.Move) bool { return mv.From == path || mv.To == path }
	switch {
	case !ok:
		return &messages.RemoveLogDirResponse{Error: messages.ErrorCode_LOG_DIR_NOT_FOUND, ErrorMessage: fmt.Sprintf("no log dir %s on this node", path)}
	case info.State != LogDirDraining:
		return &messages.RemoveLogDirResponse{Error: messages.ErrorCode_INVALID_REQUEST, ErrorMessage: fmt.Sprintf("log dir %s is %s: drain it first (depot disks drain %s)", path, info.State, path)}
	case info.Partitions > 0 || (a.running != nil && moving(*a.running)) || slices.ContainsFunc(a.queue, moving) || slices.ContainsFunc(a.asked, moving):
		return &messages.RemoveLogDirResponse{Error: messages.ErrorCode_INVALID_REQUEST, ErrorMessage: fmt.Sprintf("log dir %s still holds %d partitions: wait for its drain to finish", path, info.Partitions)}
	}
	st := a.state()
	st.Added = slices.DeleteFunc(st.Added, func(d LogDirSpec) bool { return d.Path == path })
	st.Draining = slices.DeleteFunc(st.Draining, func(p string) bool { return p == path })
	st.Removed = append(st.Removed, path)
	if err := writeDisksState(a.cfg.FS, a.cfg.DataDir, st); err != nil {
		return &messages.RemoveLogDirResponse{Error: messages.ErrorCode_KAFKA_STORAGE_ERROR, ErrorMessage: fmt.Sprintf("log dir %s not removed: recording the removal failed: %s", path, messages.ErrorText(err))}
	}
	a.added, a.removed = st.Added, st.Removed
	a.order = slices.DeleteFunc(a.order, func(p string) bool { return p == path })
	delete(a.dirs, path)
	delete(a.ids, path)
	delete(a.declared, path)
	ctx.Send(a.cfg.PartitionManager, &LogDirRemoved{Path: path})
	if a.cfg.StopLogDir != nil {
		a.cfg.StopLogDir(path)
	}
	a.logger.WithField("dir", path).Info("log directory removed; its files are left in place")
	return &messages.RemoveLogDirResponse{}
}

func (a *placementActor) onBalance(ctx actor.Context, m *messages.BalanceRequest) *messages.BalanceResponse {
	loads := a.loads()
	moves := a.plan()
	after, err := placement.Simulate(loads, moves)
	if err != nil {
		return &messages.BalanceResponse{Error: messages.ErrorCode_UNKNOWN_SERVER_ERROR, ErrorMessage: "no balancing plan: " + messages.ErrorText(err)}
	}
	resp := &messages.BalanceResponse{
		Moves:  toMessages(moves),
		Before: a.describe(),
		After:  describeLoads(after, a.dirs),
	}
	if a.running != nil {
		resp.Running = toMessage(*a.running)
	}
	if !m.DryRun {
		a.queue = moves
		a.next(ctx)
	}
	return resp
}

// describeLoads describes the directories as simulated loads leave them:
// the live figures of now, changed only by the partitions the loads moved
// (their bytes, projected bytes and write rates), so that a plan with no
// move describes the directories exactly as they are.
func describeLoads(loads []placement.DirLoad, now map[string]*messages.LogDirInfo) []*messages.LogDirInfo {
	usage := map[disk.TopicPartition]*messages.PartitionUsage{}
	for _, info := range now {
		for _, p := range info.PartitionUsage {
			usage[disk.TopicPartition{Topic: p.Topic, Partition: p.Partition}] = p
		}
	}
	out := make([]*messages.LogDirInfo, 0, len(loads))
	for _, l := range loads {
		info := &messages.LogDirInfo{Path: l.Path, CapacityBytes: l.Capacity}
		if cur, ok := now[l.Path]; ok {
			info = proto.Clone(cur).(*messages.LogDirInfo)
		}
		before := map[disk.TopicPartition]bool{}
		for _, p := range info.PartitionUsage {
			before[disk.TopicPartition{Topic: p.Topic, Partition: p.Partition}] = true
		}
		after := make([]*messages.PartitionUsage, 0, len(l.Partitions))
		for _, p := range l.Partitions {
			tp := disk.TopicPartition{Topic: p.Topic, Partition: p.Partition}
			u := usage[tp]
			if u == nil {
				u = &messages.PartitionUsage{Topic: p.Topic, Partition: p.Partition, Bytes: p.Bytes}
			}
			after = append(after, u)
			if !before[tp] {
				info.Bytes += u.Bytes
				info.FreeBytes -= u.Bytes
				info.WriteBytesPerS += u.WriteBytesPerS
				info.ProjectedBytes += placement.Projection(u.Bytes, u.WriteBytesPerS, u.RetentionBytes, u.RetentionMs)
			}
			delete(before, tp)
		}
		for tp := range before {
			u := usage[tp]
			info.Bytes -= u.Bytes
			info.FreeBytes += u.Bytes
			info.WriteBytesPerS -= u.WriteBytesPerS
			info.ProjectedBytes -= placement.Projection(u.Bytes, u.WriteBytesPerS, u.RetentionBytes, u.RetentionMs)
		}
		info.FreeBytes = max(info.FreeBytes, 0)
		info.WriteBytesPerS = max(info.WriteBytesPerS, 0)
		info.PartitionUsage = after
		info.Partitions = int32(len(after))
		out = append(out, info)
	}
	return out
}

func toMessage(m placement.Move) *messages.PartitionMove {
	return &messages.PartitionMove{Topic: m.Topic, Partition: m.Partition, FromDir: m.From, ToDir: m.To, Bytes: m.Bytes}
}

func toMessages(moves []placement.Move) []*messages.PartitionMove {
	out := make([]*messages.PartitionMove, len(moves))
	for i, m := range moves {
		out[i] = toMessage(m)
	}
	return out
}

// balance plans on the balancer's timer when no move runs or waits.
func (a *placementActor) balance(ctx actor.Context) {
	if a.running != nil || len(a.queue) > 0 || len(a.asked) > 0 {
		return
	}
	a.queue = a.plan()
	a.next(ctx)
}

// next starts the next move, one at a time: the first of those asked,
// from where its partition is when it starts, else the first of the
// balancer's queue.
func (a *placementActor) next(ctx actor.Context) {
	for a.running == nil && len(a.asked) > 0 {
		move := a.asked[0]
		a.asked = a.asked[1:]
		from, bytes, held := holder(a.dirs, move.Topic, move.Partition)
		switch {
		case !held:
			a.logger.WithFields(logrus.Fields{"topic": move.Topic, "partition": move.Partition, "to": move.To}).Warn("partition move asked dropped: no log dir holds the partition any more")
		case from != move.To:
			move.From, move.Bytes = from, bytes
			a.start(ctx, move)
		}
	}
	if a.running != nil || len(a.queue) == 0 {
		return
	}
	move := a.queue[0]
	a.queue = a.queue[1:]
	a.start(ctx, move)
}

// start runs move: the partition's actor copies it online, and its answer
// comes back as a moveDone.
func (a *placementActor) start(ctx actor.Context, move placement.Move) {
	a.running = &move
	a.logger.WithFields(logrus.Fields{"topic": move.Topic, "partition": move.Partition, "from": move.From, "to": move.To, "bytes": move.Bytes}).Info("moving partition")
	pid := actor.NewPID(ctx.Self().Address, actors.PartitionActorName(move.Topic, move.Partition))
	throttle := a.cfg.Balance.ThrottleBytesPerS
	if pressed(a.dirs[move.From]) {
		// A move out of a filling dir must outrun its writes: unthrottled.
		throttle = 0
	}
	future := ctx.RequestFuture(pid, &messages.MovePartitionRequest{
		TargetDir:         move.To,
		TargetLogDirActor: actors.LogDirActorName(move.To),
		ThrottleBytesPerS: throttle,
	}, moveTimeout(move.Bytes, throttle))
	ctx.ReenterAfter(future, func(res any, err error) {
		done := &moveDone{move: move, err: err}
		if r, ok := res.(*messages.MovePartitionResponse); ok {
			done.resp = r
		} else if err == nil {
			done.err = fmt.Errorf("partition answered %T", res)
		}
		a.onMoveDone(ctx, done)
	})
}

// moveTimeout allows a move its copy time at the throttle, twice over, and
// at least ten minutes.
func moveTimeout(bytes, throttle int64) time.Duration {
	d := 10 * time.Minute
	if throttle > 0 {
		if t := 2 * time.Duration(float64(bytes)/float64(throttle)*float64(time.Second)); t > d {
			d = t
		}
	}
	return d
}

func (a *placementActor) onMoveDone(ctx actor.Context, m *moveDone) {
	a.running = nil
	fields := logrus.Fields{"topic": m.move.Topic, "partition": m.move.Partition, "from": m.move.From, "to": m.move.To}
	switch {
	case m.err != nil:
		a.logger.WithFields(fields).WithError(m.err).Warn("partition move did not finish")
		a.queue = nil
	case m.resp.Error != messages.ErrorCode_NONE:
		a.logger.WithFields(fields).WithField("error", m.resp.Error.String()).Warn("partition move failed: " + m.resp.ErrorMessage)
		a.queue = nil
	default:
		fields["bytes"] = m.resp.BytesCopied
		fields["took"] = (time.Duration(m.resp.DurationMs) * time.Millisecond).String()
		a.logger.WithFields(fields).Info("partition moved")
		a.applyMove(m.move)
		ctx.Send(actor.NewPID(ctx.Self().Address, actors.MetadataActorName), &messages.AssignReplicaDirsRequest{
			Assignments: []*messages.PartitionAssignment{{Topic: m.move.Topic, Partition: m.move.Partition, NodeId: a.cfg.NodeID, LogDir: m.move.To, DirId: a.ids[m.move.To]}},
		})
	}
	a.next(ctx)
	if a.running != nil || len(a.queue) > 0 {
		return
	}
	for _, path := range a.order {
		info := a.dirs[path]
		switch {
		case info.State != LogDirDraining:
		case info.Partitions == 0:
			a.logger.WithField("dir", path).Info("log directory drained: it holds no partition and can be removed")
		case m.err == nil && m.resp.Error == messages.ErrorCode_NONE:
			// Partitions the plan did not know of when the drain began
			// (their first report came later) are moved too.
			a.queue = a.plan()
			a.next(ctx)
			return
		}
	}
}

// urgentFillTime: a directory that would fill its reserve within this
// time at its current write rate is relieved at once, not at the next
// balancing pass.
const urgentFillTime = 3 * time.Minute

// pressed reports whether a directory needs relief now: full, under twice
// its reserve free, or filling its reserve within urgentFillTime.
func pressed(info *messages.LogDirInfo) bool {
	if info == nil || info.State == LogDirOffline || info.ReserveBytes <= 0 {
		return false
	}
	if info.State == LogDirFull || info.FreeBytes < 2*info.ReserveBytes {
		return true
	}
	room := float64(info.FreeBytes - info.ReserveBytes)
	return info.WriteBytesPerS > 0 && room/info.WriteBytesPerS < urgentFillTime.Seconds()
}

// relieve plans an urgent move of a pressed directory's fastest-growing
// partitions to the directories with room, ahead of the balancer's timer,
// when no move runs or waits.
func (a *placementActor) relieve(ctx actor.Context, info *messages.LogDirInfo) {
	if !pressed(info) || a.running != nil || len(a.queue) > 0 {
		return
	}
	rooms := make([]placement.Room, 0, len(a.order))
	for _, path := range a.order {
		d := a.dirs[path]
		r := placement.Room{Path: path, Free: d.FreeBytes, Reserve: d.ReserveBytes,
			Accepts: d.State == LogDirOnline && !pressed(d)}
		for _, p := range d.PartitionUsage {
			r.Partitions = append(r.Partitions, placement.Growth{Topic: p.Topic, Partition: p.Partition, Bytes: p.Bytes, WriteBytesPerS: p.WriteBytesPerS})
		}
		rooms = append(rooms, r)
	}
	moves := placement.PlanRelief(rooms, info.Path, 3*info.ReserveBytes)
	if len(moves) == 0 {
		return
	}
	a.logger.WithFields(logrus.Fields{"dir": info.Path, "free_bytes": info.FreeBytes, "reserve_bytes": info.ReserveBytes,
		"write_bytes_per_s": info.WriteBytesPerS, "moves": len(moves)}).Warn("log directory filling: moving its fastest-growing partitions out now")
	a.queue = moves
	a.next(ctx)
}

// everyDirFullText says that every log dir of the node is full, naming
// each with its free bytes, or is "" while one that is not offline has
// room (or none is left).
func (a *placementActor) everyDirFullText() string {
	var dirs []string
	for _, path := range a.order {
		switch info := a.dirs[path]; info.State {
		case LogDirOffline:
		case LogDirFull:
			dirs = append(dirs, fmt.Sprintf("%s has %d bytes free (reserve %d)", path, info.FreeBytes, info.ReserveBytes))
		default:
			return ""
		}
	}
	if len(dirs) == 0 {
		return ""
	}
	return "every log dir of this node is full: " + strings.Join(dirs, ", ")
}

// tellEveryFull tells every log-dir actor when the node's dirs have all
// become full, and when one has room again, so that the refusals of their
// partitions say so.
func (a *placementActor) tellEveryFull(ctx actor.Context) {
	text := a.everyDirFullText()
	if (text == "") == (a.everyFull == "") {
		return
	}
	a.everyFull = text
	if text != "" {
		a.logger.Warn(text + ": produce to any partition is refused until one has room; reads go on")
	} else {
		a.logger.Info("a log directory has room again")
	}
	for _, path := range a.order {
		ctx.Send(actor.NewPID(ctx.Self().Address, actors.LogDirActorName(path)), &everyDirFull{text: text})
	}
}

// drainLeftovers plans again when a draining directory reports partitions
// while no move runs or waits: partitions it reported only after its drain
// was planned.
func (a *placementActor) drainLeftovers(ctx actor.Context, info *messages.LogDirInfo) {
	if info.State != LogDirDraining || info.Partitions == 0 || a.running != nil || len(a.queue) > 0 {
		return
	}
	a.queue = a.plan()
	a.next(ctx)
}

// applyMove updates the directories' usage for a completed move, ahead of
// their next reports.
func (a *placementActor) applyMove(m placement.Move) {
	from, to := a.dirs[m.From], a.dirs[m.To]
	if from == nil || to == nil {
		return
	}
	for i, p := range from.PartitionUsage {
		if p.Topic == m.Topic && p.Partition == m.Partition {
			from.PartitionUsage = append(from.PartitionUsage[:i], from.PartitionUsage[i+1:]...)
			from.Partitions--
			from.Bytes -= p.Bytes
			to.PartitionUsage = append(to.PartitionUsage, p)
			to.Partitions++
			to.Bytes += p.Bytes
			return
		}
	}
}

// capacitiesKnown reports whether every directory that can take a partition
// has a known capacity.
func capacitiesKnown(dirs []placement.Dir) bool {
	for _, d := range dirs {
		if d.Online && !d.Draining && d.Capacity <= 0 {
			return false
		}
	}
	return true
}
