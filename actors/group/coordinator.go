package group

import (
	"errors"
	"fmt"
	"maps"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/sirupsen/logrus"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

// Defaults of the group coordinator.
const (
	// DefaultOffsetsCleanBytes is how many superseded bytes an offsets
	// partition may hold before the coordinator cleans it.
	DefaultOffsetsCleanBytes = 16 << 20
	// DefaultOffsetsCleanInterval is how often the coordinator checks
	// every offsets partition for cleaning.
	DefaultOffsetsCleanInterval = time.Minute
	// DefaultGroupMetadataInterval is how often a stable group checks the
	// partition counts of its topics.
	DefaultGroupMetadataInterval = 5 * time.Second
	// DefaultGroupRequestTimeout bounds each request the coordinator and
	// the groups send to other actors (metadata, offsets partitions).
	DefaultGroupRequestTimeout = 10 * time.Second
	// DefaultInitialRebalanceDelay is Kafka's
	// group.initial.rebalance.delay.ms.
	DefaultInitialRebalanceDelay = 3 * time.Second
	// DefaultOffsetsSegmentBytes is the segment size of __consumer_offsets
	// (Kafka's offsets.topic.segment.bytes).
	DefaultOffsetsSegmentBytes = 100 << 20
	// offsetsFetchBytes is how much of an offsets partition one fetch of
	// the loader asks for at first; it doubles for a larger batch.
	offsetsFetchBytes = 1 << 20
	// maxOffsetsFetchBytes caps that doubling.
	maxOffsetsFetchBytes = 64 << 20
	// snapshotBatchRecords is how many records one batch of a cleaning
	// snapshot holds.
	snapshotBatchRecords = 1000
	// DefaultOffsetsTopicReplicationFactor is the most replicas each
	// partition of __consumer_offsets is created with (Kafka's
	// offsets.topic.replication.factor).
	DefaultOffsetsTopicReplicationFactor = 3
	// DefaultLeaderCheckInterval is how often the coordinator asks the
	// metadata which partitions of __consumer_offsets its node leads.
	DefaultLeaderCheckInterval = time.Second
	// coordinatorRetry is how long the coordinator waits before it asks
	// again after a failed request while loading.
	coordinatorRetry = time.Second
	// loadWait is how long one fetch of the loader waits at the high
	// watermark for it to rise to the log end the load must reach.
	loadWait = 500 * time.Millisecond
)

// GroupsConfig is what the group coordinator needs.
type GroupsConfig struct {
	// Now is the clock of commit timestamps. Default time.Now.
	Now func() time.Time
	// NodeID and Address identify this node in FindCoordinator answers,
	// and in the metadata as the leader of offsets partitions.
	NodeID  int32
	Address string
	// KafkaAddress is this node's Kafka listener (host:port), which
	// FindCoordinator answers give Kafka clients; empty without one.
	KafkaAddress string
	// Metadata is the metadata actor: it creates __consumer_offsets and
	// tells where its partitions and the groups' topics live.
	Metadata *actor.PID
	// OffsetsPartitions is the partition count __consumer_offsets is
	// created with (offsets.topic.num.partitions). Default
	// DefaultOffsetsTopicPartitions (50). Once the topic exists its actual
	// count decides a group's partition.
	OffsetsPartitions int32
	// OffsetsReplicationFactor is the most replicas each partition of
	// __consumer_offsets is created with: it gets as many as there are live
	// nodes then, up to this, where Kafka refuses to create it with fewer.
	// Default DefaultOffsetsTopicReplicationFactor (3).
	OffsetsReplicationFactor int32
	// OffsetsTopicConfigs are the configs __consumer_offsets is created
	// with. Default: retention.ms -1 (offsets never expire by age) and
	// segment.bytes DefaultOffsetsSegmentBytes.
	OffsetsTopicConfigs map[string]string
	// CleanBytes is how many superseded bytes an offsets partition may
	// hold before it is cleaned. Default DefaultOffsetsCleanBytes (16 MiB).
	CleanBytes int64
	// CleanInterval is how often every offsets partition is checked for
	// cleaning, besides after each commit. Default
	// DefaultOffsetsCleanInterval (1 min).
	CleanInterval time.Duration
	// MetadataInterval is how often a stable group checks its topics'
	// partition counts and rebalances when one changed. Default
	// DefaultGroupMetadataInterval (5 s).
	MetadataInterval time.Duration
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms: how long
	// the first rebalance of an empty group of Kafka's classic protocol
	// waits for more members, again after each that joins, up to the
	// rebalance timeout. 0 (the zero value) waits for none; a node started
	// from the command line uses Kafka's default,
	// DefaultInitialRebalanceDelay.
	InitialRebalanceDelay time.Duration
	// RequestTimeout bounds requests to other actors. Default
	// DefaultGroupRequestTimeout (10 s).
	RequestTimeout time.Duration
	// LeaderCheckInterval is how often the coordinator asks the metadata
	// which partitions of __consumer_offsets its node leads, and so which
	// groups it coordinates. Default DefaultLeaderCheckInterval (1 s).
	LeaderCheckInterval time.Duration
	// AwaitRegistration has the coordinator serve no group until its
	// node's metadata has caught up with the cluster's: Metadata, the
	// node's controller, answers actors.AwaitRegistration once the node
	// is registered and unfenced. A node restarted with the metadata it
	// had would otherwise coordinate, for a moment, the groups of the
	// offsets partitions it led before it stopped, from what its replicas
	// of them held then.
	AwaitRegistration bool
	// Logger is the base logger. Default: a logger that discards.
	Logger *logrus.Entry
}

func (c GroupsConfig) withDefaults() GroupsConfig {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.OffsetsPartitions <= 0 {
		c.OffsetsPartitions = DefaultOffsetsTopicPartitions
	}
	if c.OffsetsReplicationFactor <= 0 {
		c.OffsetsReplicationFactor = DefaultOffsetsTopicReplicationFactor
	}
	if c.OffsetsTopicConfigs == nil {
		c.OffsetsTopicConfigs = map[string]string{
			topic.ConfigRetentionMs:  "-1",
			topic.ConfigSegmentBytes: fmt.Sprint(DefaultOffsetsSegmentBytes),
		}
	}
	if c.CleanBytes <= 0 {
		c.CleanBytes = DefaultOffsetsCleanBytes
	}
	if c.CleanInterval <= 0 {
		c.CleanInterval = DefaultOffsetsCleanInterval
	}
	if c.MetadataInterval <= 0 {
		c.MetadataInterval = DefaultGroupMetadataInterval
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultGroupRequestTimeout
	}
	if c.LeaderCheckInterval <= 0 {
		c.LeaderCheckInterval = DefaultLeaderCheckInterval
	}
	if c.Logger == nil {
		c.Logger = actors.DiscardLogger()
	}
	return c
}

// Messages between the coordinator and its groups (local only).
type (
	// groupStarted: a group actor (re)started and wants its offsets.
	groupStarted struct{ group string }
	// groupLoaded hands a group its committed offsets.
	groupLoaded struct {
		offsets map[offsetKey]*messages.OffsetValue
	}
	// groupUnloaded tells a group that this node no longer leads its
	// offsets partition: it answers NOT_COORDINATOR and stops.
	groupUnloaded struct{}
	// groupChanged reports a group's listing to the coordinator.
	groupChanged struct {
		listing *messages.GroupListing
		exists  bool
	}
	// appendOffsets asks the coordinator to write offset records (a nil
	// value is a tombstone) for group; answered with appendOffsetsResult.
	appendOffsets struct {
		group  string
		keys   []*messages.OffsetKey
		values []*messages.OffsetValue
	}
	appendOffsetsResult struct {
		code    messages.ErrorCode
		message string
	}
	// coordinatorTick drives cleaning checks.
	coordinatorTick struct{}
	// leaderCheckTick asks the metadata which offsets partitions this node
	// leads.
	leaderCheckTick struct{}
	// retryLoad restarts the load of an offsets partition, unless the
	// leadership it was for (generation) is over.
	retryLoad struct {
		partition  int32
		generation uint64
	}
)

// topicStatus is what the coordinator knows of __consumer_offsets.
type topicStatus int

const (
	topicUnknown  topicStatus = iota // not yet asked
	topicAbsent                      // does not exist; created on first use
	topicCreating                    // being created
	topicReady                       // partitions known, loading or loaded
)

// offsetsPartition is the coordinator's view of one partition of
// __consumer_offsets: who leads it, as the metadata last said, and while
// this node leads it, the offsets of its groups.
type offsetsPartition struct {
	index int32
	// leader and leaderAddress are the metadata's leader, NoLeader (-1)
	// when it has none.
	leader        int32
	leaderAddress string
	// leading is set while this node leads the partition, in leader epoch
	// epoch: it serves the partition's groups, from state, which holds
	// the partition's offsets once loaded.
	leading bool
	epoch   int32
	// generation goes up with every leadership taken or given up: what
	// an answer to an earlier one brings is stale.
	generation uint64
	// pid is the partition's replica on this node, which it leads.
	pid    *actor.PID
	loaded bool
	// loadEnd is the replica's log end offset once it leads, which the
	// load reads up to (the high watermark may lag it until the other
	// replicas of the ISR fetch from their new leader); -1 until known.
	loadEnd    int64
	fetchBytes int32
	state      *offsetsState
	// endOffset is the offset after the last record known written.
	endOffset int64
	inflight  int
	cleaning  bool
	// waiting holds appends that arrived during a cleaning, to be sent
	// once it is over (each with the sender to answer).
	waiting []waitingAppend
}

type waitingAppend struct {
	sender *actor.PID
	msg    *appendOffsets
}

// NewGroupsProps returns the props of the group coordinator.
//
// A group's coordinator is the node that leads the group's partition of
// __consumer_offsets, as in Kafka. The coordinator asks the metadata every
// LeaderCheckInterval which partitions its node leads, and in which leader
// epoch. When its node takes the lead of one (at start, or from a node
// that failed), it reads the partition's local replica, which replication
// kept up to date, from its log start to its log end, and rebuilds the
// latest committed offset per group, topic and partition; the partition's
// groups queue their requests until then. When its node no longer leads
// one, or leads it in a new epoch (and so may have missed what another
// leader took meanwhile), the partition's group actors answer
// NOT_COORDINATOR to what they hold and stop, and its offsets are
// dropped; members find the new coordinator and join it again.
//
// The coordinator answers FindCoordinatorRequest: this node (actor
// actors.GroupActorName(group)) for a group it coordinates or whose
// partition's leader it does not know yet, and otherwise the answer of the
// leader's coordinator, to which it passes the request on. It answers
// ListGroupsRequest for the groups it coordinates, and forwards every other
// group request to the group's actor, its child, spawned on demand; one for
// a group of another node is answered NOT_COORDINATOR. It writes the
// groups' commits (acks=all) to the partitions it leads, answering a write
// refused for want of a leader or of in-sync replicas with NOT_COORDINATOR
// or COORDINATOR_NOT_AVAILABLE (see commitError), and cleans each
// partition once enough of it is superseded (see the package notes in
// offsets.go). When __consumer_offsets does not exist it is created on the
// first group request, as Kafka does, with OffsetsPartitions partitions of
// up to OffsetsReplicationFactor replicas, as many as there are live nodes.
//
// Not shared: all access is through its mailbox.
func NewGroupsProps(cfg GroupsConfig) *actor.Props {
	cfg = cfg.withDefaults()
	logger := cfg.Logger.WithFields(logrus.Fields{"actor": "groups", "node": cfg.NodeID})
	supervisor := actor.NewOneForOneStrategy(3, time.Minute, func(reason any) actor.Directive {
		logger.WithField("reason", fmt.Sprint(reason)).Error("group actor failed; restarting it")
		return actor.RestartDirective
	})
	return actors.Props(func() actor.Actor {
		return &groupCoordinator{
			cfg:      cfg,
			logger:   logger,
			children: map[string]*actor.PID{},
			stopping: map[string]string{},
			listings: map[string]*messages.GroupListing{},
			builder:  wire.NewBuilder(wire.NoProducer),
			outboxes: actors.NewOutboxes(logger),
		}
	}, logger, actor.WithSupervisor(supervisor))
}

// groupCoordinator is the state of the coordinator. Not shared: all access
// is through its mailbox.
type groupCoordinator struct {
	cfg             GroupsConfig
	logger          *logrus.Entry
	timers          *scheduler.TimerScheduler
	stopTick        scheduler.CancelFunc
	stopLeaderCheck scheduler.CancelFunc
	status          topicStatus
	looking         bool
	// caughtUp is set once the node's metadata has caught up (see
	// GroupsConfig.AwaitRegistration).
	caughtUp bool
	// createSent is set once a create of __consumer_offsets was sent: the
	// next one is a retry.
	createSent bool
	partitions []*offsetsPartition
	children   map[string]*actor.PID
	// stopping are the groups whose actors were told to stop and have not
	// yet, by actor name; a group's actor is spawned again only once its
	// old one is gone.
	stopping map[string]string
	listings map[string]*messages.GroupListing
	builder  *wire.Builder
	outboxes *actors.Outboxes
}

func (c *groupCoordinator) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		c.timers = scheduler.NewTimerScheduler(ctx)
		c.stopTick = c.timers.SendRepeatedly(c.cfg.CleanInterval, c.cfg.CleanInterval, ctx.Self(), &coordinatorTick{})
		c.stopLeaderCheck = c.timers.SendRepeatedly(c.cfg.LeaderCheckInterval, c.cfg.LeaderCheckInterval, ctx.Self(), &leaderCheckTick{})
		c.awaitRegistration(ctx)
	case *messages.FindCoordinatorRequest:
		c.onFindCoordinator(ctx, m)
	case *messages.ListGroupsRequest:
		c.onListGroups(ctx)
	case *messages.JoinGroupRequest, *messages.SyncGroupRequest, *messages.HeartbeatRequest, *messages.LeaveGroupRequest,
		*messages.OffsetCommitRequest, *messages.OffsetFetchRequest, *messages.OffsetDeleteRequest,
		*messages.DescribeGroupRequest, *messages.DeleteGroupRequest:
		c.route(ctx, m)
	case *groupStarted:
		c.onGroupStarted(ctx, m)
	case *groupChanged:
		if m.exists {
			c.listings[m.listing.GroupId] = m.listing
		} else {
			delete(c.listings, m.listing.GroupId)
		}
	case *appendOffsets:
		c.onAppend(ctx, ctx.Sender(), m)
	case *coordinatorTick:
		for _, p := range c.partitions {
			c.maybeClean(ctx, p)
		}
	case *leaderCheckTick:
		c.lookup(ctx)
	case *retryLoad:
		if m.partition >= 0 && int(m.partition) < len(c.partitions) {
			if p := c.partitions[m.partition]; p.generation == m.generation && p.leading && !p.loaded {
				c.load(ctx, p, p.endOffset)
			}
		}
	case *actor.Terminated:
		if group, ok := c.stopping[m.Who.Id]; ok {
			delete(c.stopping, m.Who.Id)
			if p := c.partitionOf(group); p != nil && p.leading && p.loaded && len(p.state.group(group)) > 0 {
				// Led again meanwhile: listed as loaded() lists its groups.
				_, _ = c.child(ctx, group)
			}
			return
		}
		for id, pid := range c.children {
			if pid.Id == m.Who.Id {
				delete(c.children, id)
				delete(c.listings, id)
			}
		}
	case *actor.Stopping:
		if c.stopTick != nil {
			c.stopTick()
		}
		if c.stopLeaderCheck != nil {
			c.stopLeaderCheck()
		}
	case *actor.Stopped, *actor.Restarting:
	case actor.AutoReceiveMessage, actor.SystemMessage:
	default:
		c.logger.WithField("type", fmt.Sprintf("%T", m)).Warn("unhandled message")
	}
}

// awaitRegistration looks up __consumer_offsets once the node's metadata
// has caught up with the cluster's, asking again until it has, or at once
// when the coordinator does not wait for it (see
// GroupsConfig.AwaitRegistration).
func (c *groupCoordinator) awaitRegistration(ctx actor.Context) {
	if !c.cfg.AwaitRegistration {
		c.caughtUp = true
		c.lookup(ctx)
		return
	}
	future := ctx.RequestFuture(c.cfg.Metadata, &actors.AwaitRegistration{}, c.cfg.RequestTimeout)
	ctx.ReenterAfter(future, func(res any, err error) {
		r, ok := res.(*actors.Registration)
		switch {
		case err != nil || !ok:
			c.awaitRegistration(ctx)
		case r.Err != nil:
			c.logger.WithError(r.Err).Error("the node is not in the cluster: no group is coordinated here")
		default:
			c.caughtUp = true
			c.lookup(ctx)
		}
	})
}

// catchingUp is why the coordinator serves no group yet, "" once it does.
func (c *groupCoordinator) catchingUp() string {
	if c.caughtUp {
		return ""
	}
	return fmt.Sprintf("node %d is catching up with the cluster's metadata", c.cfg.NodeID)
}

// lookup asks the metadata actor for __consumer_offsets: whether it exists,
// and who leads each of its partitions.
func (c *groupCoordinator) lookup(ctx actor.Context) {
	if c.looking || !c.caughtUp {
		return
	}
	c.looking = true
	future := ctx.RequestFuture(c.cfg.Metadata, &messages.MetadataRequest{Topics: []string{OffsetsTopic}}, c.cfg.RequestTimeout)
	ctx.ReenterAfter(future, func(res any, err error) {
		c.looking = false
		md, ok := res.(*messages.MetadataResponse)
		if err != nil || !ok || len(md.Topics) != 1 {
			c.logger.WithField("error", fmt.Sprint(err)).Warn("metadata did not answer about " + OffsetsTopic + "; asking again")
			return
		}
		t := md.Topics[0]
		switch {
		case t.Error == messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION:
			if c.status == topicReady {
				c.logger.Warn(OffsetsTopic + " was deleted")
				c.unloadAll(ctx, OffsetsTopic+" was deleted")
				c.partitions = nil
			}
			if c.status == topicCreating {
				return
			}
			c.status = topicAbsent
			if len(c.children) > 0 {
				c.ensureTopic(ctx)
			}
		case t.Error != messages.ErrorCode_NONE || len(t.Partitions) == 0:
			c.logger.WithField("error", t.ErrorMessage).Warn(OffsetsTopic + " not usable; asking again")
		default:
			c.follow(ctx, t)
		}
	})
}

// ensureTopic creates __consumer_offsets if it is known to be missing.
func (c *groupCoordinator) ensureTopic(ctx actor.Context) {
	switch c.status {
	case topicUnknown:
		c.lookup(ctx)
		return
	case topicAbsent:
	default:
		return
	}
	c.status = topicCreating
	req := &messages.CreateTopicRequest{
		Name: OffsetsTopic, Partitions: c.cfg.OffsetsPartitions, Configs: maps.Clone(c.cfg.OffsetsTopicConfigs),
		ReplicationFactor: -c.cfg.OffsetsReplicationFactor, Retried: c.createSent,
	}
	c.createSent = true
	future := ctx.RequestFuture(c.cfg.Metadata, req, c.cfg.RequestTimeout)
	ctx.ReenterAfter(future, func(res any, err error) {
		r, ok := res.(*messages.CreateTopicResponse)
		switch {
		case err != nil || !ok:
			c.logger.WithField("error", fmt.Sprint(err)).Warn("creating " + OffsetsTopic + " got no answer; asking again")
			c.status = topicAbsent
		case r.Error != messages.ErrorCode_NONE && r.Error != messages.ErrorCode_TOPIC_ALREADY_EXISTS:
			c.logger.WithFields(logrus.Fields{"error": r.Error.String(), "message": r.ErrorMessage}).Error("cannot create " + OffsetsTopic)
			c.status = topicAbsent
			return
		default:
			fields := logrus.Fields{"partitions": c.cfg.OffsetsPartitions}
			if ps := r.GetTopic().GetPartitions(); len(ps) > 0 {
				fields["replication_factor"] = len(ps[0].GetReplicas())
			}
			c.logger.WithFields(fields).Info("created " + OffsetsTopic)
		}
		c.lookup(ctx)
	})
}

// follow takes the metadata's word on the partitions of __consumer_offsets:
// this node takes the lead of those it leads now and gives up those it no
// longer leads, or leads in a new leader epoch.
func (c *groupCoordinator) follow(ctx actor.Context, t *messages.TopicMetadata) {
	if c.status != topicReady || len(c.partitions) != len(t.Partitions) {
		// First seen, or made again with another partition count.
		c.unloadAll(ctx, OffsetsTopic+" was created again")
		c.partitions = make([]*offsetsPartition, len(t.Partitions))
		for i := range c.partitions {
			c.partitions[i] = &offsetsPartition{index: int32(i), leader: -1, state: newOffsetsState()}
		}
		c.status = topicReady
	}
	for _, pm := range t.Partitions {
		if pm.Partition < 0 || int(pm.Partition) >= len(c.partitions) {
			continue
		}
		p := c.partitions[pm.Partition]
		p.leader, p.leaderAddress = pm.Leader, pm.LeaderAddress
		if pm.Error != messages.ErrorCode_NONE || pm.LeaderAddress == "" {
			p.leader, p.leaderAddress = -1, ""
		}
		leads := p.leader == c.cfg.NodeID
		switch {
		case leads && p.leading && p.epoch == pm.LeaderEpoch:
		case leads:
			if p.leading {
				c.unload(ctx, p, fmt.Sprintf("leader epoch %d follows %d: another node may have led it meanwhile", pm.LeaderEpoch, p.epoch))
			}
			c.lead(ctx, p, pm.LeaderEpoch)
		case p.leading && p.leader < 0:
			c.unload(ctx, p, "the partition has no leader")
		case p.leading:
			c.unload(ctx, p, fmt.Sprintf("node %d leads it", p.leader))
		}
	}
	// Groups asked for before the leaders were known.
	for id, pid := range c.children {
		if p := c.partitionOf(id); p != nil && !p.leading {
			c.stopGroup(ctx, id, pid)
		}
	}
}

// lead starts this node's leadership of p in leader epoch epoch: it loads
// p's offsets from the local replica.
func (c *groupCoordinator) lead(ctx actor.Context, p *offsetsPartition, epoch int32) {
	p.generation++
	p.leading, p.epoch, p.loaded = true, epoch, false
	p.pid = actor.NewPID(c.cfg.Address, actors.PartitionActorName(OffsetsTopic, p.index))
	p.state, p.loadEnd, p.fetchBytes, p.endOffset = newOffsetsState(), -1, offsetsFetchBytes, 0
	p.inflight, p.cleaning, p.waiting = 0, false, nil
	c.logger.WithFields(logrus.Fields{"partition": p.index, "leader_epoch": epoch}).Debug("leading offsets partition; loading it")
	c.load(ctx, p, 0)
}

// unload ends this node's leadership of p: its groups answer
// NOT_COORDINATOR and stop, its offsets are dropped, and what was waiting
// to be written is refused.
func (c *groupCoordinator) unload(ctx actor.Context, p *offsetsPartition, reason string) {
	p.generation++
	p.leading, p.loaded = false, false
	p.state = newOffsetsState()
	p.inflight, p.cleaning = 0, false
	text := fmt.Sprintf("node %d no longer leads partition %d of %s: %s", c.cfg.NodeID, p.index, OffsetsTopic, reason)
	for _, w := range p.waiting {
		ctx.Send(w.sender, &appendOffsetsResult{code: messages.ErrorCode_NOT_COORDINATOR, message: text})
	}
	p.waiting = nil
	groups := 0
	for id, pid := range c.children {
		if c.partitionOf(id) == p {
			c.stopGroup(ctx, id, pid)
			groups++
		}
	}
	c.logger.WithFields(logrus.Fields{"partition": p.index, "leader_epoch": p.epoch, "reason": reason, "groups": groups}).Info("no longer leading offsets partition; its groups unloaded")
}

// unloadAll unloads every partition this node leads.
func (c *groupCoordinator) unloadAll(ctx actor.Context, reason string) {
	for _, p := range c.partitions {
		if p.leading {
			c.unload(ctx, p, reason)
		}
	}
}

// stopGroup tells the actor of a group this node does not coordinate to
// answer what it holds and stop.
func (c *groupCoordinator) stopGroup(ctx actor.Context, group string, pid *actor.PID) {
	ctx.Send(pid, &groupUnloaded{})
	delete(c.children, group)
	delete(c.listings, group)
	c.stopping[pid.Id] = group
}

// partitionOf returns the offsets partition of group, nil while unknown.
func (c *groupCoordinator) partitionOf(group string) *offsetsPartition {
	if c.status != topicReady || len(c.partitions) == 0 {
		return nil
	}
	return c.partitions[OffsetsPartitionFor(group, int32(len(c.partitions)))]
}

// load fetches p from offset, in the leader epoch this node leads it in,
// and applies what it reads until it reaches the replica's log end.
func (c *groupCoordinator) load(ctx actor.Context, p *offsetsPartition, offset int64) {
	if p.loaded || !p.leading {
		return
	}
	generation := p.generation
	p.endOffset = offset
	epoch := p.epoch
	req := &messages.FetchRequest{Topic: OffsetsTopic, Partition: p.index, Offset: offset, MaxBytes: p.fetchBytes, CurrentLeaderEpoch: &epoch}
	if p.loadEnd >= 0 {
		req.MinBytes, req.MaxWaitMs = 1, int32(loadWait.Milliseconds())
	}
	future := ctx.RequestFuture(p.pid, req, c.cfg.RequestTimeout)
	ctx.ReenterAfter(future, func(res any, err error) {
		if p.generation != generation {
			return
		}
		resp, ok := res.(*messages.FetchResponse)
		retry := func(level logrus.Level, why string) {
			c.logger.WithFields(logrus.Fields{"partition": p.index, "offset": offset, "reason": why}).Log(level, "loading offsets partition; retrying")
			c.timers.SendOnce(coordinatorRetry, ctx.Self(), &retryLoad{partition: p.index, generation: generation})
		}
		switch {
		case err != nil || !ok:
			retry(logrus.WarnLevel, fmt.Sprintf("no answer: %v", err))
			return
		case resp.Error == messages.ErrorCode_OFFSET_OUT_OF_RANGE && resp.LogStartOffset > offset:
			c.load(ctx, p, resp.LogStartOffset)
			return
		case resp.Error == messages.ErrorCode_OFFSET_OUT_OF_RANGE && offset >= resp.HighWatermark:
			c.loaded(ctx, p, resp.HighWatermark)
			return
		case resp.Error == messages.ErrorCode_FENCED_LEADER_EPOCH:
			// The replica knows a newer epoch than the metadata read.
			retry(logrus.DebugLevel, resp.Error.String()+": "+resp.ErrorMessage)
			c.lookup(ctx)
			return
		case resp.Error == messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, resp.Error == messages.ErrorCode_LEADER_NOT_AVAILABLE,
			resp.Error == messages.ErrorCode_UNKNOWN_LEADER_EPOCH:
			// The replica has not taken the lead the metadata gives it yet.
			retry(logrus.DebugLevel, resp.Error.String()+": "+resp.ErrorMessage)
			return
		case resp.Error != messages.ErrorCode_NONE:
			retry(logrus.WarnLevel, resp.Error.String()+": "+resp.ErrorMessage)
			return
		}
		next, bad, derr := decodeOffsetBatches(p.state, resp.Records, offset)
		if bad > 0 {
			c.logger.WithFields(logrus.Fields{"partition": p.index, "records": bad}).Warn("skipped offsets records that do not decode")
		}
		if derr != nil && next == offset {
			// Nothing whole could be read where the log says a batch is:
			// keep what was loaded rather than never serve the groups.
			c.logger.WithError(derr).WithField("partition", p.index).Error("offsets partition unreadable past this offset; loaded up to it")
			c.loaded(ctx, p, offset)
			return
		}
		switch {
		case next >= resp.HighWatermark:
			c.reachedHighWatermark(ctx, p, next)
		case next == offset:
			if p.fetchBytes >= maxOffsetsFetchBytes {
				c.logger.WithField("partition", p.index).Error("offsets batch larger than the largest fetch; loaded up to it")
				c.loaded(ctx, p, offset)
				return
			}
			p.fetchBytes *= 2
			c.load(ctx, p, offset)
		default:
			c.load(ctx, p, next)
		}
	})
}

// reachedHighWatermark goes on from next, where the load reached the
// replica's high watermark: it is loaded once next is the log end the
// replica had when it led, learnt now that a fetch in this node's epoch
// was answered; below it, it waits for the high watermark to rise.
func (c *groupCoordinator) reachedHighWatermark(ctx actor.Context, p *offsetsPartition, next int64) {
	if p.loadEnd >= 0 {
		if next >= p.loadEnd {
			c.loaded(ctx, p, next)
			return
		}
		c.load(ctx, p, next)
		return
	}
	generation := p.generation
	future := ctx.RequestFuture(p.pid, &messages.PartitionStatusRequest{}, c.cfg.RequestTimeout)
	ctx.ReenterAfter(future, func(res any, err error) {
		if p.generation != generation {
			return
		}
		s, ok := res.(*messages.PartitionStatusResponse)
		if err != nil || !ok || s.Error != messages.ErrorCode_NONE {
			c.logger.WithFields(logrus.Fields{"partition": p.index, "error": fmt.Sprint(err), "code": s.GetError().String()}).Warn("offsets partition status not read; retrying the load")
			c.timers.SendOnce(coordinatorRetry, ctx.Self(), &retryLoad{partition: p.index, generation: generation})
			return
		}
		p.loadEnd = s.LogEndOffset
		c.reachedHighWatermark(ctx, p, next)
	})
}

// loaded marks p loaded and hands its groups their offsets.
func (c *groupCoordinator) loaded(ctx actor.Context, p *offsetsPartition, end int64) {
	p.loaded = true
	p.endOffset = end
	groups := p.state.groups()
	c.logger.WithFields(logrus.Fields{"partition": p.index, "leader_epoch": p.epoch, "end_offset": end, "groups": len(groups)}).Info("offsets partition loaded")
	for id, pid := range c.children {
		if c.partitionOf(id) == p {
			ctx.Send(pid, &groupLoaded{offsets: p.state.group(id)})
		}
	}
	for _, id := range groups {
		if _, ok := c.children[id]; !ok {
			_, _ = c.child(ctx, id)
		}
	}
	c.maybeClean(ctx, p)
}

// errGroupStopping refuses a group whose actor of an earlier leadership has
// not stopped yet.
var errGroupStopping = errors.New("group: the group's actor of an earlier leadership is stopping")

// child returns group's actor, spawning it if needed.
func (c *groupCoordinator) child(ctx actor.Context, group string) (*actor.PID, error) {
	if pid, ok := c.children[group]; ok {
		return pid, nil
	}
	if _, ok := c.stopping[actors.GroupActorName(group)]; ok {
		return nil, errGroupStopping
	}
	props := newGroupProps(groupConfig{
		id:                    group,
		metadata:              c.cfg.Metadata,
		metadataInterval:      c.cfg.MetadataInterval,
		requestTimeout:        c.cfg.RequestTimeout,
		initialRebalanceDelay: c.cfg.InitialRebalanceDelay,
		now:                   c.cfg.Now,
		logger:                c.cfg.Logger.WithFields(logrus.Fields{"actor": "group", "group": group, "node": c.cfg.NodeID}),
	})
	pid, err := ctx.SpawnNamed(props, actors.GroupChildName(group))
	if err != nil {
		return nil, err
	}
	c.children[group] = pid
	c.ensureTopic(ctx)
	return pid, nil
}

func (c *groupCoordinator) onGroupStarted(ctx actor.Context, m *groupStarted) {
	switch p := c.partitionOf(m.group); {
	case p == nil:
	case !p.leading:
		ctx.Respond(&groupUnloaded{})
	case p.loaded:
		ctx.Respond(&groupLoaded{offsets: p.state.group(m.group)})
	}
}

// coordinates says whether this node serves group: it does while it leads
// the group's offsets partition, or while it does not know who leads it
// (the group waits until it does).
func (c *groupCoordinator) coordinates(group string) (messages.ErrorCode, string) {
	if why := c.catchingUp(); why != "" {
		return messages.ErrorCode_COORDINATOR_NOT_AVAILABLE, why
	}
	p := c.partitionOf(group)
	switch {
	case p == nil || p.leading:
		return messages.ErrorCode_NONE, ""
	case p.leader < 0:
		return messages.ErrorCode_NOT_COORDINATOR, fmt.Sprintf("partition %d of %s, group %q's, has no leader", p.index, OffsetsTopic, group)
	}
	return messages.ErrorCode_NOT_COORDINATOR, fmt.Sprintf("node %d coordinates group %q, not node %d", p.leader, group, c.cfg.NodeID)
}

func (c *groupCoordinator) onFindCoordinator(ctx actor.Context, m *messages.FindCoordinatorRequest) {
	if m.GroupId == "" {
		ctx.Respond(&messages.FindCoordinatorResponse{Error: messages.ErrorCode_INVALID_GROUP_ID, ErrorMessage: "group id is empty"})
		return
	}
	if why := c.catchingUp(); why != "" {
		ctx.Respond(&messages.FindCoordinatorResponse{Error: messages.ErrorCode_COORDINATOR_NOT_AVAILABLE, ErrorMessage: why})
		return
	}
	p := c.partitionOf(m.GroupId)
	switch {
	case p != nil && p.leader < 0:
		ctx.Respond(&messages.FindCoordinatorResponse{Error: messages.ErrorCode_COORDINATOR_NOT_AVAILABLE,
			ErrorMessage: fmt.Sprintf("partition %d of %s, group %q's, has no leader", p.index, OffsetsTopic, m.GroupId)})
		return
	case p != nil && !p.leading && m.Forwarded:
		// The asking node's metadata and this one's disagree: one is
		// behind.
		ctx.Respond(&messages.FindCoordinatorResponse{Error: messages.ErrorCode_COORDINATOR_NOT_AVAILABLE,
			ErrorMessage: fmt.Sprintf("node %d does not lead partition %d of %s: node %d does, as far as it knows", c.cfg.NodeID, p.index, OffsetsTopic, p.leader)})
		c.lookup(ctx)
		return
	case p != nil && !p.leading:
		// The coordinator of a group is the node that leads the group's
		// partition of __consumer_offsets: it answers.
		// Through an outbox: a leader's node that died would stall every
		// group of this node for the seconds protoactor takes to give up.
		c.outboxes.Send(ctx, actor.NewPID(p.leaderAddress, actors.GroupCoordinatorName),
			&messages.FindCoordinatorRequest{GroupId: m.GroupId, Forwarded: true}, ctx.Sender())
		return
	}
	if _, err := c.child(ctx, m.GroupId); err != nil {
		ctx.Respond(&messages.FindCoordinatorResponse{Error: messages.ErrorCode_COORDINATOR_NOT_AVAILABLE, ErrorMessage: messages.ErrorText(err)})
		return
	}
	ctx.Respond(&messages.FindCoordinatorResponse{NodeId: c.cfg.NodeID, Address: c.cfg.Address, ActorName: actors.GroupActorName(m.GroupId),
		KafkaAddress: c.cfg.KafkaAddress})
}

func (c *groupCoordinator) onListGroups(ctx actor.Context) {
	resp := &messages.ListGroupsResponse{}
	for _, l := range c.listings {
		resp.Groups = append(resp.Groups, &messages.GroupListing{GroupId: l.GroupId, State: l.State, Members: l.Members, ProtocolType: l.ProtocolType})
	}
	sort.Slice(resp.Groups, func(i, j int) bool { return resp.Groups[i].GroupId < resp.Groups[j].GroupId })
	ctx.Respond(resp)
}

// route forwards a group request to the group's actor.
func (c *groupCoordinator) route(ctx actor.Context, m any) {
	group := requestGroupID(m)
	if group == "" {
		ctx.Respond(groupErrorResponse(m, messages.ErrorCode_INVALID_GROUP_ID, "group id is empty"))
		return
	}
	if code, text := c.coordinates(group); code != messages.ErrorCode_NONE {
		ctx.Respond(groupErrorResponse(m, code, text))
		return
	}
	pid, err := c.child(ctx, group)
	if err != nil {
		ctx.Respond(groupErrorResponse(m, messages.ErrorCode_COORDINATOR_NOT_AVAILABLE, messages.ErrorText(err)))
		return
	}
	ctx.Forward(pid)
}

// onAppend writes a group's offset records to its offsets partition.
func (c *groupCoordinator) onAppend(ctx actor.Context, sender *actor.PID, m *appendOffsets) {
	if code, text := c.coordinates(m.group); code != messages.ErrorCode_NONE {
		ctx.Send(sender, &appendOffsetsResult{code: code, message: text})
		return
	}
	p := c.partitionOf(m.group)
	if p == nil || !p.loaded {
		ctx.Send(sender, &appendOffsetsResult{code: messages.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS, message: "offsets partition is loading"})
		return
	}
	if p.cleaning {
		p.waiting = append(p.waiting, waitingAppend{sender: sender, msg: m})
		return
	}
	batch, sizes, err := buildOffsetBatch(c.builder, c.cfg.Now().UnixMilli(), m.keys, m.values)
	if err != nil {
		ctx.Send(sender, &appendOffsetsResult{code: messages.ErrorCode_UNKNOWN_SERVER_ERROR, message: messages.ErrorText(err)})
		return
	}
	p.inflight++
	generation := p.generation
	req := &messages.ProduceRequest{Topic: OffsetsTopic, Partition: p.index, Acks: -1, TimeoutMs: int32(c.cfg.RequestTimeout.Milliseconds()), Records: batch}
	future := ctx.RequestFuture(p.pid, req, c.cfg.RequestTimeout)
	ctx.ReenterAfter(future, func(res any, err error) {
		code, msg := produceAnswer(res, err)
		if code != messages.ErrorCode_NONE {
			msg = fmt.Sprintf("offsets not written: partition %d of %s answered %s: %s", p.index, OffsetsTopic, code, msg)
		}
		if p.generation != generation {
			// The leadership the write was for is over: the offsets are
			// in the log if it took them, and the next leader loads them.
			ctx.Send(sender, &appendOffsetsResult{code: commitError(code), message: msg})
			return
		}
		p.inflight--
		if code == messages.ErrorCode_NONE {
			resp := res.(*messages.ProduceResponse)
			for i, k := range m.keys {
				p.state.apply(k, m.values[i], sizes[i])
			}
			p.endOffset = max(p.endOffset, resp.BaseOffset+int64(len(m.keys)))
		} else if commitError(code) == messages.ErrorCode_NOT_COORDINATOR {
			c.lookup(ctx) // the lead may have moved
		}
		ctx.Send(sender, &appendOffsetsResult{code: commitError(code), message: msg})
		c.maybeClean(ctx, p)
	})
}

// commitError is the code a group answers for offsets its partition
// refused to write with code, as Kafka's GroupMetadataManager maps them:
// a partition this node no longer leads, or cannot write, means the
// coordinator moved (NOT_COORDINATOR); one that cannot take the write now,
// for want of in-sync replicas or time, is retriable
// (COORDINATOR_NOT_AVAILABLE). Clients find the coordinator again and
// retry on either; neither is ever taken for a commit.
func commitError(code messages.ErrorCode) messages.ErrorCode {
	switch code {
	case messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, messages.ErrorCode_LEADER_NOT_AVAILABLE,
		messages.ErrorCode_FENCED_LEADER_EPOCH, messages.ErrorCode_UNKNOWN_LEADER_EPOCH,
		messages.ErrorCode_KAFKA_STORAGE_ERROR:
		return messages.ErrorCode_NOT_COORDINATOR
	case messages.ErrorCode_NOT_ENOUGH_REPLICAS, messages.ErrorCode_NOT_ENOUGH_REPLICAS_AFTER_APPEND,
		messages.ErrorCode_REQUEST_TIMED_OUT, messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION:
		return messages.ErrorCode_COORDINATOR_NOT_AVAILABLE
	}
	return code
}

// produceAnswer turns a partition's answer to a produce into an error
// code and message.
func produceAnswer(res any, err error) (messages.ErrorCode, string) {
	if err != nil {
		return messages.ErrorCode_REQUEST_TIMED_OUT, fmt.Sprintf("offsets partition did not answer: %v", err)
	}
	r, ok := res.(*messages.ProduceResponse)
	if !ok {
		return messages.ErrorCode_UNKNOWN_SERVER_ERROR, fmt.Sprintf("offsets partition answered %T", res)
	}
	if r.Error != messages.ErrorCode_NONE {
		return r.Error, r.ErrorMessage
	}
	return messages.ErrorCode_NONE, ""
}

// maybeClean starts a cleaning of p when enough of it is superseded and
// nothing is being written to it.
func (c *groupCoordinator) maybeClean(ctx actor.Context, p *offsetsPartition) {
	if !p.leading || !p.loaded || p.cleaning || p.inflight > 0 || p.state.superseded < c.cfg.CleanBytes {
		return
	}
	p.cleaning = true
	keys, values := p.state.snapshot()
	c.logger.WithFields(logrus.Fields{"partition": p.index, "superseded_bytes": p.state.superseded, "live": len(keys)}).Info("cleaning offsets partition")
	c.writeSnapshot(ctx, p, keys, values, -1)
}

// writeSnapshot writes the live records of p again, a batch at a time,
// then deletes everything before the first one (first is its offset, -1
// before the first batch is written).
func (c *groupCoordinator) writeSnapshot(ctx actor.Context, p *offsetsPartition, keys []*messages.OffsetKey, values []*messages.OffsetValue, first int64) {
	if len(keys) == 0 {
		c.deleteBefore(ctx, p, first)
		return
	}
	n := min(len(keys), snapshotBatchRecords)
	batch, _, err := buildOffsetBatch(c.builder, c.cfg.Now().UnixMilli(), keys[:n], values[:n])
	if err != nil {
		c.cleaned(ctx, p, messages.ErrorText(err))
		return
	}
	generation := p.generation
	req := &messages.ProduceRequest{Topic: OffsetsTopic, Partition: p.index, Acks: -1, TimeoutMs: int32(c.cfg.RequestTimeout.Milliseconds()), Records: batch}
	future := ctx.RequestFuture(p.pid, req, c.cfg.RequestTimeout)
	ctx.ReenterAfter(future, func(res any, err error) {
		if p.generation != generation {
			return // the cleaning ended with the leadership
		}
		code, msg := produceAnswer(res, err)
		if code != messages.ErrorCode_NONE {
			c.cleaned(ctx, p, code.String()+": "+msg)
			return
		}
		base := res.(*messages.ProduceResponse).BaseOffset
		if first < 0 {
			first = base
		}
		p.endOffset = max(p.endOffset, base+int64(n))
		c.writeSnapshot(ctx, p, keys[n:], values[n:], first)
	})
}

// deleteBefore deletes the records of p before offset (-1: everything,
// for an empty snapshot).
func (c *groupCoordinator) deleteBefore(ctx actor.Context, p *offsetsPartition, offset int64) {
	generation := p.generation
	req := &messages.DeleteRecordsRequest{Topic: OffsetsTopic, Partition: p.index, Offset: offset}
	future := ctx.RequestFuture(p.pid, req, c.cfg.RequestTimeout)
	ctx.ReenterAfter(future, func(res any, err error) {
		if p.generation != generation {
			return
		}
		r, ok := res.(*messages.DeleteRecordsResponse)
		switch {
		case err != nil || !ok:
			c.cleaned(ctx, p, fmt.Sprintf("delete records got no answer: %v", err))
		case r.Error != messages.ErrorCode_NONE:
			c.cleaned(ctx, p, r.Error.String()+": "+r.ErrorMessage)
		default:
			p.state.superseded = 0
			c.logger.WithFields(logrus.Fields{"partition": p.index, "log_start_offset": r.LowWatermark}).Info("offsets partition cleaned")
			c.cleaned(ctx, p, "")
		}
	})
}

// cleaned ends a cleaning (failed when failure is not empty) and sends the
// appends that waited for it.
func (c *groupCoordinator) cleaned(ctx actor.Context, p *offsetsPartition, failure string) {
	if failure != "" {
		c.logger.WithFields(logrus.Fields{"partition": p.index, "reason": failure}).Warn("cleaning offsets partition failed; will try again")
	}
	p.cleaning = false
	waiting := p.waiting
	p.waiting = nil
	for _, w := range waiting {
		c.onAppend(ctx, w.sender, w.msg)
	}
}

// requestGroupID is the group id of a group request.
func requestGroupID(m any) string {
	if r, ok := m.(interface{ GetGroupId() string }); ok {
		return r.GetGroupId()
	}
	return ""
}

// groupErrorResponse is the response of m's type carrying code and text.
func groupErrorResponse(m any, code messages.ErrorCode, text string) any {
	switch r := m.(type) {
	case *messages.JoinGroupRequest:
		return &messages.JoinGroupResponse{Error: code, ErrorMessage: text, Generation: -1, MemberId: r.MemberId}
	case *messages.SyncGroupRequest:
		return &messages.SyncGroupResponse{Error: code, ErrorMessage: text}
	case *messages.OffsetDeleteRequest:
		return &messages.OffsetDeleteResponse{Error: code, ErrorMessage: text}
	case *messages.HeartbeatRequest:
		return &messages.HeartbeatResponse{Error: code, ErrorMessage: text}
	case *messages.LeaveGroupRequest:
		return &messages.LeaveGroupResponse{Error: code, ErrorMessage: text}
	case *messages.OffsetCommitRequest:
		return &messages.OffsetCommitResponse{Error: code, ErrorMessage: text}
	case *messages.OffsetFetchRequest:
		return &messages.OffsetFetchResponse{Error: code, ErrorMessage: text}
	case *messages.DescribeGroupRequest:
		return &messages.DescribeGroupResponse{Error: code, ErrorMessage: text, GroupId: r.GroupId, State: "Dead"}
	case *messages.DeleteGroupRequest:
		return &messages.DeleteGroupResponse{Error: code, ErrorMessage: text}
	}
	return nil
}
