// Package controller is the node's controller actor: it drives the node's
// replica of the metadata log, a raft log (actors/quorum over
// go.etcd.io/raft/v3), applies what the log commits to the metadata image
// (actors/metadata), and has the node's partition manager act on what
// changed for this node. Every node runs one: the nodes named as voters
// elect the active controller among them, the others follow the log as
// raft learners, as Kafka brokers follow the metadata log. The active
// controller, the raft leader, turns requests into metadata records and
// proposes them; requests asked of another node are forwarded to it.
//
// The controller also keeps the node's own registration: it registers the
// node with the active controller and heartbeats, and the active
// controller fences the nodes whose session lapses (lifecycle.go).
package controller

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/sirupsen/logrus"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/metadata"
	"github.com/depot-dev/depot/actors/quorum"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
)

// Defaults of the controller.
const (
	// DefaultManagerTimeout is how long the controller waits for the
	// partition manager to start or stop a topic's partitions.
	DefaultManagerTimeout = 10 * time.Second
	// DefaultTickInterval is the raft tick: with DefaultElectionTicks, an
	// election timeout of 1 s.
	DefaultTickInterval = 100 * time.Millisecond
	// DefaultElectionTicks is raft's election timeout in ticks.
	DefaultElectionTicks = 10
	// DefaultHeartbeatInterval is how often a node heartbeats to the
	// active controller, Kafka's broker.heartbeat.interval.ms.
	DefaultHeartbeatInterval = 2 * time.Second
	// DefaultSessionTimeout is how long a node stays unfenced without a
	// heartbeat, near Kafka's broker.session.timeout.ms (9 s).
	DefaultSessionTimeout = 9 * time.Second
	// DefaultSnapshotEvery is how many applied entries of the metadata log
	// are followed by a snapshot, after which the log before it is
	// compacted.
	DefaultSnapshotEvery = 1000
	// InternalReplicationFactor is the replicas an internal topic
	// (__consumer_offsets) has once there are as many live nodes, as
	// Kafka's offsets.topic.replication.factor: one created with fewer is
	// reassigned to more as nodes join, at each leader rebalance.
	InternalReplicationFactor = 3
	// DefaultLeaderRebalanceInterval is how often preferred leaders are
	// elected again where they can lead: Kafka checks every 300 s; 30 s
	// here, since an election costs one metadata record.
	DefaultLeaderRebalanceInterval = 30 * time.Second
	// DefaultChangeWait is how long a change waits for an active controller
	// to be known before it is answered NOT_CONTROLLER.
	DefaultChangeWait = 5 * time.Second
	// waitLogInterval is how often a node without an active controller says
	// what it waits for.
	waitLogInterval = 5 * time.Second
	// snapshotChunkBytes bounds the chunks a snapshot travels in, well
	// under gRPC's 4 MiB message limit.
	snapshotChunkBytes = 512 << 10
)

// ErrMetadataLog is wrapped by the errors of a metadata log that cannot be
// replayed: a whole record (its batch checksum intact) that does not decode.
var ErrMetadataLog = errors.New("controller: bad metadata log")

// Config is what the controller needs.
type Config struct {
	// FS is the file system of the metadata log (disk.OS in production).
	FS disk.FS
	// Dir is the metadata directory, e.g. <data-dir>/meta: the raft log is
	// in its raft subdirectory, and a single node's metadata log of older
	// versions in the directory itself.
	Dir string
	// NodeID is this node's id, raft's node id: never 0.
	NodeID int32
	// Address is this node's actor address (host:port of protoactor
	// remote), registered as the node's address.
	Address string
	// Rack is the node's rack, "" for none.
	Rack string
	// KafkaAddress is the node's Kafka listener, "" for none.
	KafkaAddress string
	// Voters maps the node ids of the controller quorum's voters to their
	// actor addresses (Kafka's controller.quorum.voters). Empty: a quorum
	// of one, this node.
	Voters map[int32]string
	// ClusterID is the cluster the node's data dir belongs to, "" for a new
	// data dir. A node refuses a cluster of another id.
	ClusterID string
	// SaveClusterID records the cluster's id in the data dir once the node
	// is registered in a cluster it did not know. Nil records nothing.
	SaveClusterID func(id string) error
	// LogDirs maps the id of each of this node's log directories to its
	// path, for describing partitions and for reading records written
	// before directory ids, which name paths. Directories added later are
	// learnt from the assignments that name them.
	LogDirs map[string]string
	// PartitionManager starts and stops partition actors on this node.
	PartitionManager *actor.PID
	// Placement is the node's placement actor, asked for the node's bytes
	// and write rate, which heartbeats carry for the load-aware replica
	// assignment. Nil reports none.
	Placement *actor.PID
	// ManagerTimeout bounds each request to the partition manager. Default
	// DefaultManagerTimeout (10 s).
	ManagerTimeout time.Duration
	// TickInterval is raft's tick. Default DefaultTickInterval.
	TickInterval time.Duration
	// ElectionTicks is raft's election timeout in ticks. Default
	// DefaultElectionTicks.
	ElectionTicks int
	// HeartbeatInterval and SessionTimeout are the node's session with the
	// active controller. Defaults DefaultHeartbeatInterval and
	// DefaultSessionTimeout.
	HeartbeatInterval time.Duration
	SessionTimeout    time.Duration
	// SnapshotEvery is the number of entries between snapshots. Default
	// DefaultSnapshotEvery.
	SnapshotEvery uint64
	// LeaderRebalanceInterval is how often the active controller makes
	// each partition's preferred replica its leader again where it can
	// (Kafka's auto.leader.rebalance.enable, checked every
	// leader.imbalance.check.interval.seconds): 0 takes
	// DefaultLeaderRebalanceInterval, negative never does.
	LeaderRebalanceInterval time.Duration
	// Now is the clock of sessions. Default time.Now.
	Now func() time.Time
	// Logger is the actor's logger. Default: a logger that discards.
	Logger *logrus.Entry
}

func (c Config) withDefaults() Config {
	if c.ManagerTimeout <= 0 {
		c.ManagerTimeout = DefaultManagerTimeout
	}
	if c.TickInterval <= 0 {
		c.TickInterval = DefaultTickInterval
	}
	if c.ElectionTicks <= 0 {
		c.ElectionTicks = DefaultElectionTicks
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.SnapshotEvery == 0 {
		c.SnapshotEvery = DefaultSnapshotEvery
	}
	if c.LeaderRebalanceInterval == 0 {
		c.LeaderRebalanceInterval = DefaultLeaderRebalanceInterval
	}
	if c.Logger == nil {
		c.Logger = actors.DiscardLogger()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if len(c.Voters) == 0 {
		c.Voters = map[int32]string{c.NodeID: c.Address}
	}
	return c
}

// NewProps returns the props of the controller, to be spawned as
// actors.MetadataActorName: the voters reach each other by that name.
//
// It answers CreateTopicRequest, DeleteTopicRequest,
// CreatePartitionsRequest, AlterTopicConfigsRequest, MetadataRequest,
// ClusterInfoRequest, InitProducerIdRequest, AssignReplicaDirsRequest,
// RegisterNodeRequest, NodeHeartbeatRequest, AlterPartitionRequest,
// ElectLeadersRequest and ReassignPartitionsRequest, and takes raft's messages
// (raftpb.Message, and messages.RaftChunk for snapshots) from the other
// nodes' controllers. Like every actor it is not shared: all access is
// through its mailbox.
//
// A change is answered once its records are committed by the quorum and
// applied here, and this node's partitions have acted on it. The image is
// the result of applying the committed records in order, and nothing else.
func NewProps(cfg Config) *actor.Props {
	cfg = cfg.withDefaults()
	logger := cfg.Logger.WithFields(logrus.Fields{"actor": "metadata", "node": cfg.NodeID})
	return actors.Props(func() actor.Actor {
		return &reader{cfg: cfg, logger: logger}
	}, logger)
}

// CheckOpen asks whether the controller opened the metadata log; it is
// answered with an *actors.Registration whose Err is why it did not.
type CheckOpen struct{}

// tick is the controller's timer message.
type tick struct{}

// controllerActor is the state of the controller. Not shared: all access is
// through its mailbox.
type controllerActor struct {
	cfg    Config
	logger *logrus.Entry
	self   *actor.PID

	storage *quorum.Storage
	peer    *quorum.Peer
	// failed is why the metadata log cannot be written (it did not open, or
	// an append or sync failed); changes are then refused.
	failed error
	// legacy is the image of an older single node's metadata log, taken
	// into the raft log when the quorum first forms.
	legacy *metadata.Image

	image   *metadata.Image
	applied uint64
	// replaying is set while the entries the log held at start are
	// applied: the node starts their partitions itself.
	replaying bool
	// dirPaths maps this node's log directory ids to their paths.
	dirPaths map[string]string
	// nextProducerID is the next producer id to hand out; ids below the
	// image's ProducerIDsEnd are reserved by the log.
	nextProducerID int64

	// leader is the raft leader as last seen, 0 for none.
	leader uint64
	// dirty is set when what reads need changed since it was published.
	dirty bool
	// noLeaderSince is when the quorum was last seen without a leader, and
	// waitLogged when that was last logged.
	noLeaderSince, waitLogged time.Time
	// changes are the changes asked of this node as the active
	// controller, in order, waiting for inflight, the one proposed, to be
	// applied.
	changes  []*change
	inflight *change
	// proposal numbers this node's proposals.
	proposal uint64
	// waiting are changes asked while no active controller is known.
	waiting []waitingChange

	// acts are the steps the partition manager is asked to take, in the
	// order of the entries that caused them; the first runs.
	acts   []act
	acting bool
	// dirChanges counts the changes in flight that record the directories
	// chosen for new partitions; afterDirs wait for them.
	dirChanges int
	afterDirs  []func()

	// assembler rebuilds snapshots that arrive in chunks.
	assembler *quorum.Assembler

	life lifecycle

	// rebalanced is when maybeRebalance last looked; elections keeps
	// the outcome of each ElectLeadersRequest between its build and its
	// answer.
	rebalanced time.Time
	elections  map[*messages.ElectLeadersRequest][]*messages.ElectionResult
	// reassignments keeps the outcome of each ReassignPartitionsRequest
	// between its build and its answer.
	reassignments map[*messages.ReassignPartitionsRequest][]*messages.ReassignmentResult
	// outboxes send to other nodes, by address.
	outboxes *actors.Outboxes
	// endpoints is the subscription to lost remote endpoints.
	endpoints *eventstream.Subscription
	// watches are the active controller's watches of the other nodes, by
	// node id (watch.go).
	watches map[int32]*nodeWatch

	cancelTicks scheduler.CancelFunc
}

// Receive dispatches.
func (a *controllerActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.onStarted(ctx)
	case *actor.Stopping:
		a.close(ctx)
	case *actor.Restarting:
		a.close(ctx)
	case *actor.Stopped, *actor.Terminated:
	case tick:
		a.onTick(ctx)
	case *raftpb.Message:
		a.step(ctx, m)
	case *messages.RaftChunk:
		a.onChunk(ctx, m)
	case *remote.EndpointTerminatedEvent:
		a.onEndpointLost(ctx, m.Address)
	case *nodeReachability:
		a.onReachability(m)
	case *messages.MetadataRequest:
		ctx.Respond(describe(a.image, a.dirPaths, a.cfg.NodeID, a.clusterInfo(), m))
	case *messages.ClusterInfoRequest:
		ctx.Respond(a.clusterInfo())
	case *messages.CreateTopicRequest:
		a.onChange(ctx, m)
	case *messages.DeleteTopicRequest:
		a.onChange(ctx, m)
	case *messages.CreatePartitionsRequest:
		a.onChange(ctx, m)
	case *messages.AlterTopicConfigsRequest:
		a.onChange(ctx, m)
	case *messages.InitProducerIdRequest:
		a.onChange(ctx, m)
	case *messages.AssignReplicaDirsRequest:
		a.learnDirs(m.GetAssignments())
		a.onChange(ctx, m)
	case *messages.RegisterNodeRequest:
		a.onChange(ctx, m)
	case *messages.AlterPartitionRequest:
		a.onChange(ctx, m)
	case *messages.ElectLeadersRequest:
		a.onChange(ctx, m)
	case *messages.ReassignPartitionsRequest:
		a.onChange(ctx, m)
	case *messages.NodeHeartbeatRequest:
		a.onHeartbeat(ctx, m)
	case *actors.AwaitRegistration:
		a.onAwaitRegistration(ctx)
	case *CheckOpen:
		ctx.Respond(&actors.Registration{Err: a.failed})
	case *ControlledShutdown:
		timeout := m.Timeout
		if timeout <= 0 {
			timeout = 5 * time.Second
		}
		a.onControlledShutdown(ctx, &shutdownStep{sender: ctx.Sender(), deadline: a.cfg.Now().Add(timeout)})
	default:
		a.logger.WithField("type", fmt.Sprintf("%T", m)).Warn("unhandled message")
	}
}

func (a *controllerActor) onStarted(ctx actor.Context) {
	a.self = ctx.Self()
	a.image = metadata.Empty()
	a.dirPaths = maps.Clone(a.cfg.LogDirs)
	if a.dirPaths == nil {
		a.dirPaths = map[string]string{}
	}
	a.assembler = quorum.NewAssembler(0)
	a.outboxes = actors.NewOutboxes(a.logger)
	a.elections = map[*messages.ElectLeadersRequest][]*messages.ElectionResult{}
	a.reassignments = map[*messages.ReassignPartitionsRequest][]*messages.ReassignmentResult{}
	a.life = newLifecycle()
	a.watches = map[int32]*nodeWatch{}
	root, self := ctx.ActorSystem().Root, a.self
	a.endpoints = ctx.ActorSystem().EventStream.Subscribe(func(evt any) {
		if e, ok := evt.(*remote.EndpointTerminatedEvent); ok {
			root.Send(self, e)
		}
	})
	a.cancelTicks = scheduler.NewTimerScheduler(ctx).SendRepeatedly(a.cfg.TickInterval, a.cfg.TickInterval, a.self, tick{})
	if err := a.open(); err != nil {
		a.failed = err
		a.logger.WithError(err).Error("metadata log did not open; refusing changes")
		return
	}
	// Apply what the log already commits, so that the node starts its
	// partitions from the image it had; the node starts them itself.
	a.replaying = true
	a.ready(ctx)
	a.replaying = false
	if err := a.checkVoters(); err != nil {
		a.failed = err
		a.logger.WithError(err).Error("metadata log not served")
		return
	}
	if len(a.cfg.Voters) == 1 && a.cfg.Voters[a.cfg.NodeID] != "" {
		// A quorum of one need not wait an election timeout.
		if err := a.peer.Campaign(); err != nil {
			a.logger.WithError(err).Warn("campaign")
		}
		a.ready(ctx)
	}
	a.lifecycleTick(ctx)
	a.logger.WithFields(logrus.Fields{"applied": a.applied, "topics": len(a.image.TopicNames()), "voters": len(a.cfg.Voters)}).Info("metadata loaded")
}

// open opens the raft log, and the old metadata log of a single node when
// the raft log is new.
func (a *controllerActor) open() error {
	raftDir := filepath.Join(a.cfg.Dir, "raft")
	// The storage creates its directory, durably.
	storage, err := quorum.OpenStorage(a.cfg.FS, raftDir, a.logger.WithField("dir", raftDir))
	if err != nil {
		return fmt.Errorf("controller: open metadata log %s: %w", raftDir, err)
	}
	a.storage = storage
	_, isVoter := a.cfg.Voters[a.cfg.NodeID]
	if storage.Empty() {
		old, err := hasLegacyLog(a.cfg.FS, a.cfg.Dir)
		if err != nil {
			return fmt.Errorf("controller: metadata log %s: %w", a.cfg.Dir, err)
		}
		if old {
			if len(a.cfg.Voters) != 1 || !isVoter {
				return fmt.Errorf("controller: %s holds the metadata of a single node, which can seed only a quorum of one: start it without --controllers, or naming only itself; other nodes join it as brokers", a.cfg.Dir)
			}
			image, records, err := readLegacyLog(a.cfg.FS, a.cfg.Dir, a.legacyDir, a.logger.WithField("dir", a.cfg.Dir))
			if err != nil {
				return err
			}
			a.legacy = image
			a.logger.WithFields(logrus.Fields{"records": records, "topics": len(image.TopicNames())}).Info("metadata of a single node found; it seeds the quorum")
		}
	}
	var voters []uint64
	if isVoter {
		for id := range a.cfg.Voters {
			voters = append(voters, uint64(id))
		}
		slices.Sort(voters)
	}
	peer, err := quorum.NewPeer(quorum.Config{
		ID:            uint64(a.cfg.NodeID),
		Storage:       storage,
		Voters:        voters,
		ElectionTick:  a.cfg.ElectionTicks,
		HeartbeatTick: 1,
		SnapshotEvery: a.cfg.SnapshotEvery,
		Logger:        a.logger.WithField("raft", a.cfg.NodeID),
		StateMachine:  (*stateMachine)(a),
	})
	if err != nil {
		return fmt.Errorf("controller: metadata log %s: %w", raftDir, err)
	}
	a.peer = peer
	return nil
}

// checkVoters compares the voters given with those of the metadata log, as
// applied at start.
func (a *controllerActor) checkVoters() error {
	if _, isVoter := a.cfg.Voters[a.cfg.NodeID]; !isVoter {
		return nil
	}
	given := make([]uint64, 0, len(a.cfg.Voters))
	for id := range a.cfg.Voters {
		given = append(given, uint64(id))
	}
	slices.Sort(given)
	if stored := a.peer.Voters(); len(stored) > 0 && !slices.Equal(stored, given) {
		return fmt.Errorf("controller: the voters given (%s) are not those of the metadata log in %s (%s): a quorum's voters are not changed by a flag", idList(given), a.cfg.Dir, idList(stored))
	}
	return nil
}

// idList is ids as "1,2,3".
func idList(ids []uint64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprint(id)
	}
	return strings.Join(parts, ",")
}

func (a *controllerActor) close(ctx actor.Context) {
	a.stopWatches()
	if a.endpoints != nil {
		ctx.ActorSystem().EventStream.Unsubscribe(a.endpoints)
		a.endpoints = nil
	}
	if a.cancelTicks != nil {
		a.cancelTicks()
		a.cancelTicks = nil
	}
	a.failAll(messages.ErrorCode_NOT_CONTROLLER, "the controller is stopping")
	if a.storage != nil {
		if err := a.storage.Close(); err != nil {
			a.logger.WithError(err).Error("close metadata log")
		}
		a.storage = nil
		a.peer = nil
	}
	if a.failed == nil {
		a.failed = fmt.Errorf("controller: metadata log %s: %w", a.cfg.Dir, disk.ErrClosed)
	}
}

// legacyDir resolves the path of a record written before directory ids to
// the id of this node's directory there.
func (a *controllerActor) legacyDir(nodeID int32, path string) string {
	if nodeID != a.cfg.NodeID {
		return ""
	}
	for id, p := range a.dirPaths {
		if p == path {
			return id
		}
	}
	return ""
}

func (a *controllerActor) onTick(ctx actor.Context) {
	if a.peer == nil {
		return
	}
	a.peer.Tick()
	a.ready(ctx)
	a.logWaiting()
	a.retryWaiting(ctx)
	a.lifecycleTick(ctx)
	a.maybeRebalance(ctx)
}

// maybeRebalance has the active controller, every LeaderRebalanceInterval,
// give the internal topics the replicas the live nodes allow, and elect
// the preferred leaders that can lead again: after a node came back, its
// partitions return to it and the leaders stay spread.
func (a *controllerActor) maybeRebalance(ctx actor.Context) {
	every := a.cfg.LeaderRebalanceInterval
	now := a.cfg.Now()
	if every < 0 || !a.isLeader() || now.Sub(a.rebalanced) < every {
		return
	}
	a.rebalanced = now
	if req := a.image.RaiseInternalReplicas(InternalReplicationFactor); req != nil {
		a.logger.WithField("partitions", len(req.Partitions)).Info("raising the replicas of internal topics to the live nodes")
		a.submit(ctx, req, func(code messages.ErrorCode, msg string) {
			delete(a.reassignments, req)
			if code != messages.ErrorCode_NONE {
				a.logger.WithFields(logrus.Fields{"error": code.String(), "reason": msg}).Warn("raising the replicas of internal topics failed")
			}
		})
	}
	if a.image.Imbalanced() {
		req := &messages.ElectLeadersRequest{}
		a.submit(ctx, req, func(code messages.ErrorCode, msg string) {
			delete(a.elections, req)
			if code != messages.ErrorCode_NONE {
				a.logger.WithFields(logrus.Fields{"error": code.String(), "reason": msg}).Warn("preferred leader election failed")
			}
		})
	}
}

// logWaiting says, every few seconds while the quorum has no leader, what
// the node waits for.
func (a *controllerActor) logWaiting() {
	now := a.cfg.Now()
	if a.leader != 0 {
		a.noLeaderSince = time.Time{}
		return
	}
	if a.noLeaderSince.IsZero() {
		a.noLeaderSince, a.waitLogged = now, now
		return
	}
	if now.Sub(a.waitLogged) < waitLogInterval {
		return
	}
	a.waitLogged = now
	voters := make([]string, 0, len(a.cfg.Voters))
	for _, id := range slices.Sorted(maps.Keys(a.cfg.Voters)) {
		voters = append(voters, fmt.Sprintf("%d@%s", id, a.cfg.Voters[id]))
	}
	a.logger.WithFields(logrus.Fields{"voters": strings.Join(voters, ","), "for": now.Sub(a.noLeaderSince).Round(time.Second)}).
		Warn("waiting for the controller quorum to elect a leader: a majority of the voters must be up and reach each other")
}

// step hands a message of another node's raft to ours.
func (a *controllerActor) step(ctx actor.Context, m *raftpb.Message) {
	if a.peer == nil {
		return
	}
	if !a.known(m.GetFrom()) {
		a.logger.WithFields(logrus.Fields{"from": m.GetFrom(), "type": m.GetType().String()}).Warn("raft message from a node that is not a member dropped")
		return
	}
	if err := a.peer.Step(m); err != nil {
		a.logger.WithError(err).WithField("from", m.GetFrom()).Debug("raft message not taken")
	}
	a.ready(ctx)
}

func (a *controllerActor) onChunk(ctx actor.Context, c *messages.RaftChunk) {
	m, err := a.assembler.Add(c)
	if err != nil {
		a.logger.WithError(err).WithField("from", c.GetFrom()).Warn("snapshot chunk dropped")
		return
	}
	if m != nil {
		a.step(ctx, m)
	}
}

// known reports whether node id may send raft messages here: a voter, or
// a registered node.
func (a *controllerActor) known(id uint64) bool {
	if _, ok := a.cfg.Voters[int32(id)]; ok {
		return true
	}
	_, ok := a.image.Node(int32(id))
	return ok
}

// ready persists, sends and applies what raft has ready, and then acts on
// a change of leader.
func (a *controllerActor) ready(ctx actor.Context) {
	if a.peer == nil || a.failed != nil {
		return
	}
	msgs, err := a.peer.Handle()
	if err != nil {
		a.failed = fmt.Errorf("controller: metadata log %s: %w", a.cfg.Dir, err)
		a.logger.WithError(err).Error("metadata log failed; refusing changes")
		a.failAll(messages.ErrorCode_KAFKA_STORAGE_ERROR, messages.ErrorText(a.failed))
		return
	}
	for _, m := range msgs {
		a.send(ctx, m)
	}
	if leader := a.peer.Leader(); leader != a.leader {
		a.onLeaderChange(ctx, a.leader, leader)
	}
	a.proposeNext(ctx)
	a.runActs(ctx)
	a.answerWaiters(ctx)
	a.publish(ctx)
}

// send delivers a raft message to its node's controller; snapshots go in
// chunks.
func (a *controllerActor) send(ctx actor.Context, m *raftpb.Message) {
	to := m.GetTo()
	if to == uint64(a.cfg.NodeID) {
		return
	}
	pid := a.controllerOf(int32(to))
	if pid == nil {
		a.peer.ReportUnreachable(to)
		if m.GetType() == raftpb.MessageType_MsgSnap {
			a.peer.ReportSnapshot(to, raft.SnapshotFailure)
		}
		return
	}
	if m.GetType() != raftpb.MessageType_MsgSnap {
		if !a.sendTo(ctx, pid, m, nil) {
			a.peer.ReportUnreachable(to)
		}
		return
	}
	chunks, err := quorum.SplitSnapshot(m, snapshotChunkBytes)
	if err != nil {
		a.logger.WithError(err).WithField("to", to).Error("snapshot not sent")
		a.peer.ReportSnapshot(to, raft.SnapshotFailure)
		return
	}
	for _, c := range chunks {
		if !a.sendTo(ctx, pid, c, nil) {
			a.peer.ReportSnapshot(to, raft.SnapshotFailure)
			return
		}
	}
	// Delivery is at most once: a snapshot lost on the way leaves the
	// follower behind, and the leader's probe finds it and sends another.
	a.peer.ReportSnapshot(to, raft.SnapshotFinish)
}

// controllerOf is the controller actor of node id, nil when its address is
// unknown.
func (a *controllerActor) controllerOf(id int32) *actor.PID {
	if id == a.cfg.NodeID {
		return a.self
	}
	addr := a.image.Address(id)
	if addr == "" {
		addr = a.cfg.Voters[id]
	}
	if addr == "" {
		return nil
	}
	return actor.NewPID(addr, actors.MetadataActorName)
}

// onEndpointLost tells raft that the nodes at addr are unreachable, and the
// lifecycle that their connection dropped.
func (a *controllerActor) onEndpointLost(ctx actor.Context, addr string) {
	for _, id := range a.nodesAt(addr) {
		if a.peer != nil {
			a.peer.ReportUnreachable(uint64(id))
		}
		a.life.lost(id, a.cfg.Now(), false)
	}
	a.ready(ctx)
}

// nodesAt are the nodes whose actor address is addr.
func (a *controllerActor) nodesAt(addr string) []int32 {
	var out []int32
	for id, v := range a.cfg.Voters {
		if v == addr {
			out = append(out, id)
		}
	}
	for _, n := range a.image.Nodes() {
		if n.Address == addr && !slices.Contains(out, n.ID) {
			out = append(out, n.ID)
		}
	}
	return out
}

// view is how the image describes partitions from this node.
func (a *controllerActor) view() metadata.View { return dirView(a.cfg.NodeID, a.dirPaths) }

// dirView describes the directories of node self by the paths dirPaths
// gives their ids; another node's directories have no path here.
func dirView(self int32, dirPaths map[string]string) metadata.View {
	return metadata.View{
		DirPath: func(nodeID int32, id string) string {
			if nodeID != self {
				return ""
			}
			return dirPaths[id]
		},
	}
}

// learnDirs learns the paths of this node's directories from assignments
// that name them.
func (a *controllerActor) learnDirs(assignments []*messages.PartitionAssignment) {
	for _, p := range assignments {
		if p.GetNodeId() == a.cfg.NodeID && p.GetDirId() != "" && p.GetLogDir() != "" && a.dirPaths[p.GetDirId()] != p.GetLogDir() {
			a.dirPaths[p.GetDirId()] = p.GetLogDir()
			a.dirty = true
		}
	}
}

// controllerID is the node id of the active controller, -1 when none is
// known.
func (a *controllerActor) controllerID() int32 {
	if a.leader == 0 {
		return -1
	}
	return int32(a.leader)
}

// brokers are the registered nodes as metadata answers give them.
func (a *controllerActor) brokers() []*messages.Broker {
	nodes := a.image.Nodes()
	out := make([]*messages.Broker, 0, len(nodes))
	for _, n := range nodes {
		_, voter := a.cfg.Voters[n.ID]
		out = append(out, &messages.Broker{NodeId: n.ID, Address: n.Address, Rack: n.Rack, Fenced: n.Fenced, Voter: voter, KafkaAddress: n.KafkaAddress})
	}
	return out
}

// clusterInfo answers a ClusterInfoRequest: the nodes, and the quorum as
// this node sees it.
func (a *controllerActor) clusterInfo() *messages.ClusterInfoResponse {
	resp := &messages.ClusterInfoResponse{
		ClusterId:        a.image.ClusterID(),
		ControllerLeader: a.controllerID(),
		Nodes:            a.brokers(),
		Applied:          a.applied,
	}
	// Voters that have not registered are still voters.
	for _, id := range slices.Sorted(maps.Keys(a.cfg.Voters)) {
		if _, ok := a.image.Node(id); !ok {
			resp.Nodes = append(resp.Nodes, &messages.Broker{NodeId: id, Address: a.cfg.Voters[id], Fenced: true, Voter: true})
		}
	}
	slices.SortFunc(resp.Nodes, func(x, y *messages.Broker) int { return int(x.NodeId - y.NodeId) })
	if a.peer != nil {
		st := a.peer.Status()
		resp.Term = st.GetTerm()
		resp.Committed = st.GetCommit()
	}
	return resp
}
