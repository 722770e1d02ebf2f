package group

import (
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
	// coordinatorRetry is how long the coordinator waits before it asks
	// again after a failed request while loading.
	coordinatorRetry = time.Second
)

// GroupsConfig is what the group coordinator needs.
type GroupsConfig struct {
	// Now is the clock of commit timestamps. Default time.Now.
	Now func() time.Time
	// NodeID and Address identify this node in FindCoordinator answers.
	NodeID  int32
	Address string
	// Metadata is the metadata actor: it creates __consumer_offsets and
	// tells where its partitions and the groups' topics live.
	Metadata *actor.PID
	// OffsetsPartitions is the partition count __consumer_offsets is
	// created with (offsets.topic.num.partitions). Default
	// DefaultOffsetsTopicPartitions (50). Once the topic exists its actual
	// count decides a group's partition.
	OffsetsPartitions int32
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
	// RequestTimeout bounds requests to other actors. Default
	// DefaultGroupRequestTimeout (10 s).
	RequestTimeout time.Duration
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
	// coordinatorRetryLookup asks the metadata actor again.
	coordinatorRetryLookup struct{}
	// retryLoad restarts the load of an offsets partition.
	retryLoad struct{ partition int32 }
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
// __consumer_offsets.
type offsetsPartition struct {
	index      int32
	pid        *actor.PID
	loaded     bool
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
// The coordinator answers FindCoordinatorRequest (this node, actor
// actors.GroupActorName(group)) and ListGroupsRequest, and forwards every other
// group request to the group's actor, its child, spawned on demand. It owns
// the partitions of __consumer_offsets: at start it reads each from its log
// start and rebuilds the latest committed offset per group, topic and
// partition, handing each group its offsets (groups queue requests until
// then); it writes the groups' commits (acks=all) and cleans each
// partition once enough of it is superseded (see the package notes in
// offsets.go). When __consumer_offsets does not exist it is created on the
// first group request, as Kafka does.
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
			listings: map[string]*messages.GroupListing{},
			builder:  wire.NewBuilder(wire.NoProducer),
		}
	}, logger, actor.WithSupervisor(supervisor))
}

// groupCoordinator is the state of the coordinator. Not shared: all access
// is through its mailbox.
type groupCoordinator struct {
	cfg        GroupsConfig
	logger     *logrus.Entry
	timers     *scheduler.TimerScheduler
	stopTick   scheduler.CancelFunc
	status     topicStatus
	looking    bool
	partitions []*offsetsPartition
	children   map[string]*actor.PID
	listings   map[string]*messages.GroupListing
	builder    *wire.Builder
}

func (c *groupCoordinator) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		c.timers = scheduler.NewTimerScheduler(ctx)
		c.stopTick = c.timers.SendRepeatedly(c.cfg.CleanInterval, c.cfg.CleanInterval, ctx.Self(), &coordinatorTick{})
		c.lookup(ctx)
	case *messages.FindCoordinatorRequest:
		c.onFindCoordinator(ctx, m)
	case *messages.ListGroupsRequest:
		c.onListGroups(ctx)
	case *messages.JoinGroupRequest, *messages.HeartbeatRequest, *messages.LeaveGroupRequest,
		*messages.OffsetCommitRequest, *messages.OffsetFetchRequest, *messages.DescribeGroupRequest,
		*messages.DeleteGroupRequest:
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
	case *coordinatorRetryLookup:
		c.lookup(ctx)
	case *retryLoad:
		if m.partition >= 0 && int(m.partition) < len(c.partitions) {
			p := c.partitions[m.partition]
			c.load(ctx, p, p.endOffset)
		}
	case *actor.Terminated:
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
	case *actor.Stopped, *actor.Restarting:
	case actor.AutoReceiveMessage, actor.SystemMessage:
	default:
		c.logger.WithField("type", fmt.Sprintf("%T", m)).Warn("unhandled message")
	}
}

// lookup asks the metadata actor for __consumer_offsets.
func (c *groupCoordinator) lookup(ctx actor.Context) {
	if c.looking || c.status == topicReady {
		return
	}
	c.looking = true
	future := ctx.RequestFuture(c.cfg.Metadata, &messages.MetadataRequest{Topics: []string{OffsetsTopic}}, c.cfg.RequestTimeout)
	ctx.ReenterAfter(future, func(res any, err error) {
		c.looking = false
		md, ok := res.(*messages.MetadataResponse)
		if err != nil || !ok || len(md.Topics) != 1 {
			c.logger.WithField("error", fmt.Sprint(err)).Warn("metadata did not answer about " + OffsetsTopic + "; asking again")
			c.timers.SendOnce(coordinatorRetry, ctx.Self(), &coordinatorRetryLookup{})
			return
		}
		t := md.Topics[0]
		switch {
		case t.Error == messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION:
			if c.status == topicCreating {
				c.timers.SendOnce(coordinatorRetry, ctx.Self(), &coordinatorRetryLookup{})
				return
			}
			c.status = topicAbsent
			if len(c.children) > 0 {
				c.ensureTopic(ctx)
			}
		case t.Error != messages.ErrorCode_NONE || len(t.Partitions) == 0:
			c.logger.WithField("error", t.ErrorMessage).Warn(OffsetsTopic + " not usable; asking again")
			c.timers.SendOnce(coordinatorRetry, ctx.Self(), &coordinatorRetryLookup{})
		default:
			c.setUp(ctx, t)
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
	req := &messages.CreateTopicRequest{Name: OffsetsTopic, Partitions: c.cfg.OffsetsPartitions, Configs: maps.Clone(c.cfg.OffsetsTopicConfigs)}
	future := ctx.RequestFuture(c.cfg.Metadata, req, c.cfg.RequestTimeout)
	ctx.ReenterAfter(future, func(res any, err error) {
		r, ok := res.(*messages.CreateTopicResponse)
		switch {
		case err != nil || !ok:
			c.logger.WithField("error", fmt.Sprint(err)).Warn("creating " + OffsetsTopic + " got no answer; asking again")
		case r.Error != messages.ErrorCode_NONE && r.Error != messages.ErrorCode_TOPIC_ALREADY_EXISTS:
			c.logger.WithFields(logrus.Fields{"error": r.Error.String(), "message": r.ErrorMessage}).Error("cannot create " + OffsetsTopic)
			c.status = topicAbsent
			c.timers.SendOnce(coordinatorRetry, ctx.Self(), &coordinatorRetryLookup{})
			return
		default:
			c.logger.WithField("partitions", c.cfg.OffsetsPartitions).Info("created " + OffsetsTopic)
		}
		c.lookup(ctx)
	})
}

// setUp learns the offsets partitions and starts loading each.
func (c *groupCoordinator) setUp(ctx actor.Context, t *messages.TopicMetadata) {
	c.status = topicReady
	c.partitions = make([]*offsetsPartition, len(t.Partitions))
	for _, pm := range t.Partitions {
		if pm.Partition < 0 || int(pm.Partition) >= len(t.Partitions) {
			continue
		}
		c.partitions[pm.Partition] = &offsetsPartition{
			index:      pm.Partition,
			pid:        actor.NewPID(pm.LeaderAddress, pm.ActorName),
			fetchBytes: offsetsFetchBytes,
			state:      newOffsetsState(),
		}
	}
	for i, p := range c.partitions {
		if p == nil { // metadata without partition i: address it by convention
			p = &offsetsPartition{index: int32(i), pid: actor.NewPID(c.cfg.Address, actors.PartitionActorName(OffsetsTopic, int32(i))),
				fetchBytes: offsetsFetchBytes, state: newOffsetsState()}
			c.partitions[i] = p
		}
		c.load(ctx, p, 0)
	}
}

// partitionOf returns the offsets partition of group, nil while unknown.
func (c *groupCoordinator) partitionOf(group string) *offsetsPartition {
	if c.status != topicReady || len(c.partitions) == 0 {
		return nil
	}
	return c.partitions[OffsetsPartitionFor(group, int32(len(c.partitions)))]
}

// load fetches an offsets partition from offset and applies what it reads,
// until it reaches the high watermark.
func (c *groupCoordinator) load(ctx actor.Context, p *offsetsPartition, offset int64) {
	if p.loaded {
		return
	}
	p.endOffset = offset
	req := &messages.FetchRequest{Topic: OffsetsTopic, Partition: p.index, Offset: offset, MaxBytes: p.fetchBytes}
	future := ctx.RequestFuture(p.pid, req, c.cfg.RequestTimeout)
	ctx.ReenterAfter(future, func(res any, err error) {
		resp, ok := res.(*messages.FetchResponse)
		retry := func(why string) {
			c.logger.WithFields(logrus.Fields{"partition": p.index, "offset": offset, "reason": why}).Warn("loading offsets partition; retrying")
			c.timers.SendOnce(coordinatorRetry, ctx.Self(), &retryLoad{partition: p.index})
		}
		switch {
		case err != nil || !ok:
			retry(fmt.Sprintf("no answer: %v", err))
			return
		case resp.Error == messages.ErrorCode_OFFSET_OUT_OF_RANGE && resp.LogStartOffset > offset:
			c.load(ctx, p, resp.LogStartOffset)
			return
		case resp.Error == messages.ErrorCode_OFFSET_OUT_OF_RANGE && offset >= resp.HighWatermark:
			c.loaded(ctx, p, resp.HighWatermark)
			return
		case resp.Error != messages.ErrorCode_NONE:
			retry(resp.Error.String() + ": " + resp.ErrorMessage)
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
			c.loaded(ctx, p, next)
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

// loaded marks p loaded and hands its groups their offsets.
func (c *groupCoordinator) loaded(ctx actor.Context, p *offsetsPartition, end int64) {
	p.loaded = true
	p.endOffset = end
	groups := p.state.groups()
	c.logger.WithFields(logrus.Fields{"partition": p.index, "end_offset": end, "groups": len(groups)}).Debug("offsets partition loaded")
	for id, pid := range c.children {
		if c.partitionOf(id) == p {
			ctx.Send(pid, &groupLoaded{offsets: p.state.group(id)})
		}
	}
	for _, id := range groups {
		if _, ok := c.children[id]; !ok {
			c.child(ctx, id)
		}
	}
	c.maybeClean(ctx, p)
}

// child returns group's actor, spawning it if needed.
func (c *groupCoordinator) child(ctx actor.Context, group string) (*actor.PID, error) {
	if pid, ok := c.children[group]; ok {
		return pid, nil
	}
	props := newGroupProps(groupConfig{
		id:               group,
		metadata:         c.cfg.Metadata,
		metadataInterval: c.cfg.MetadataInterval,
		requestTimeout:   c.cfg.RequestTimeout,
		now:              c.cfg.Now,
		logger:           c.cfg.Logger.WithFields(logrus.Fields{"actor": "group", "group": group, "node": c.cfg.NodeID}),
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
	if p := c.partitionOf(m.group); p != nil && p.loaded {
		ctx.Respond(&groupLoaded{offsets: p.state.group(m.group)})
	}
}

func (c *groupCoordinator) onFindCoordinator(ctx actor.Context, m *messages.FindCoordinatorRequest) {
	if m.GroupId == "" {
		ctx.Respond(&messages.FindCoordinatorResponse{Error: messages.ErrorCode_INVALID_GROUP_ID, ErrorMessage: "group id is empty"})
		return
	}
	// The coordinator of a group is the node that leads the group's
	// partition of __consumer_offsets, as in Kafka: another node passes
	// the request on to it.
	if p := c.partitionOf(m.GroupId); p != nil && p.pid.Address != c.cfg.Address && p.pid.Address != "" && !m.Forwarded {
		ctx.RequestWithCustomSender(actor.NewPID(p.pid.Address, actors.GroupCoordinatorName),
			&messages.FindCoordinatorRequest{GroupId: m.GroupId, Forwarded: true}, ctx.Sender())
		return
	}
	if _, err := c.child(ctx, m.GroupId); err != nil {
		ctx.Respond(&messages.FindCoordinatorResponse{Error: messages.ErrorCode_COORDINATOR_NOT_AVAILABLE, ErrorMessage: messages.ErrorText(err)})
		return
	}
	ctx.Respond(&messages.FindCoordinatorResponse{NodeId: c.cfg.NodeID, Address: c.cfg.Address, ActorName: actors.GroupActorName(m.GroupId)})
}

func (c *groupCoordinator) onListGroups(ctx actor.Context) {
	resp := &messages.ListGroupsResponse{}
	for _, l := range c.listings {
		resp.Groups = append(resp.Groups, &messages.GroupListing{GroupId: l.GroupId, State: l.State, Members: l.Members})
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
	pid, err := c.child(ctx, group)
	if err != nil {
		ctx.Respond(groupErrorResponse(m, messages.ErrorCode_COORDINATOR_NOT_AVAILABLE, messages.ErrorText(err)))
		return
	}
	ctx.Forward(pid)
}

// onAppend writes a group's offset records to its offsets partition.
func (c *groupCoordinator) onAppend(ctx actor.Context, sender *actor.PID, m *appendOffsets) {
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
	req := &messages.ProduceRequest{Topic: OffsetsTopic, Partition: p.index, Acks: -1, TimeoutMs: int32(c.cfg.RequestTimeout.Milliseconds()), Records: batch}
	future := ctx.RequestFuture(p.pid, req, c.cfg.RequestTimeout)
	ctx.ReenterAfter(future, func(res any, err error) {
		p.inflight--
		code, msg := produceAnswer(res, err)
		if code == messages.ErrorCode_NONE {
			resp := res.(*messages.ProduceResponse)
			for i, k := range m.keys {
				p.state.apply(k, m.values[i], sizes[i])
			}
			p.endOffset = max(p.endOffset, resp.BaseOffset+int64(len(m.keys)))
		}
		ctx.Send(sender, &appendOffsetsResult{code: code, message: msg})
		c.maybeClean(ctx, p)
	})
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
	if !p.loaded || p.cleaning || p.inflight > 0 || p.state.superseded < c.cfg.CleanBytes {
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
	req := &messages.ProduceRequest{Topic: OffsetsTopic, Partition: p.index, Acks: -1, TimeoutMs: int32(c.cfg.RequestTimeout.Milliseconds()), Records: batch}
	future := ctx.RequestFuture(p.pid, req, c.cfg.RequestTimeout)
	ctx.ReenterAfter(future, func(res any, err error) {
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
	req := &messages.DeleteRecordsRequest{Topic: OffsetsTopic, Partition: p.index, Offset: offset}
	future := ctx.RequestFuture(p.pid, req, c.cfg.RequestTimeout)
	ctx.ReenterAfter(future, func(res any, err error) {
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
