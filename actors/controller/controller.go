package controller

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/disks"
	"github.com/depot-dev/depot/actors/placement"
	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

// Limits and defaults of the metadata actor.
const (
	// MaxPartitionsPerTopic is the largest partition count CreateTopic accepts.
	MaxPartitionsPerTopic = 10000
	// ProducerIDBlockSize is how many producer ids one ProducerIdBlockRecord
	// reserves: the metadata log is written once per block, not per id.
	ProducerIDBlockSize = 1000
	// DefaultManagerTimeout is how long the metadata actor waits for the
	// partition manager to start or stop a topic's partitions.
	DefaultManagerTimeout = 10 * time.Second
	// metadataReadBytes is how much of the metadata log replay reads at once.
	metadataReadBytes = 1 << 20
	// metadataSegmentBytes is the segment size of the metadata log.
	metadataSegmentBytes = 64 << 20
)

// ErrMetadataLog is wrapped by the errors of a metadata log that cannot be
// replayed: a whole record (its batch checksum intact) that does not decode.
var ErrMetadataLog = errors.New("controller: bad metadata log")

// MetadataConfig is what the metadata actor needs.
type MetadataConfig struct {
	// FS is the file system of the metadata log (disk.OS in production).
	FS disk.FS
	// Dir is the metadata log's own directory, e.g. <data-dir>/meta.
	Dir string
	// NodeID is this node's id: the leader of every partition it places.
	NodeID int32
	// Address is this node's actor address (host:port of protoactor remote),
	// given to clients as the leader_address of partitions.
	Address string
	// LogDirs are the node's data directories, in configured order, among
	// which new partitions are placed (placement.ByCount).
	LogDirs []string
	// PartitionManager starts and stops partition actors on this node.
	PartitionManager *actor.PID
	// Placement, when set, chooses the log dir of each new partition (the
	// placement actor, by load); otherwise LogDirs are used by count.
	Placement *actor.PID
	// ManagerTimeout bounds each request to the partition manager. Default
	// DefaultManagerTimeout (10 s).
	ManagerTimeout time.Duration
	// Logger is the actor's logger. Default: a logger that discards.
	Logger *logrus.Entry
}

// NewMetadataProps returns the props of the metadata actor.
//
// The metadata actor owns the node's topics: their partitions' placement and
// their configs, and the producer ids it hands out. Every change is a
// messages.MetadataRecord appended to a log in cfg.Dir and synced before the
// request that caused it is answered; on Started the actor replays that log,
// so a restart brings every topic back. Its state is the result of applying
// the records in order, and nothing else, so the log can later be replicated
// and applied on every node.
//
// It answers CreateTopicRequest, DeleteTopicRequest, MetadataRequest and
// InitProducerIdRequest. Like every actor it is not shared: all access is
// through its mailbox.
//
// Log layout: a disk.Log of Kafka record batches, each holding exactly one
// record whose value is a proto-marshalled messages.MetadataRecord (no key,
// timestamp the time of the change). A torn tail (a crash mid-append) is cut
// by the log's recovery, losing only the change that was never answered.
func NewMetadataProps(cfg MetadataConfig) *actor.Props {
	if cfg.ManagerTimeout <= 0 {
		cfg.ManagerTimeout = DefaultManagerTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = actors.DiscardLogger()
	}
	logger := cfg.Logger.WithFields(logrus.Fields{"actor": "metadata", "node": cfg.NodeID})
	return actors.Props(func() actor.Actor {
		return &metadataActor{cfg: cfg, logger: logger}
	}, logger)
}

// topicState is one topic as the metadata log describes it.
type topicState struct {
	record *messages.TopicRecord
	config topic.Config
}

// metadataActor is the state of the metadata actor. Not shared: all access
// is through its mailbox.
type metadataActor struct {
	cfg    MetadataConfig
	logger *logrus.Entry

	log *disk.Log
	// failed is why the metadata log cannot be written (it did not open, or
	// an append or sync failed); changes are then refused.
	failed error

	topics map[string]*topicState
	// creating holds the names of topics whose directories are being
	// chosen, so that a second create of the same name is refused.
	creating map[string]bool
	// nextProducerID is the next producer id to hand out; ids below
	// producerIDBlockEnd are reserved by the log.
	nextProducerID     int64
	producerIDBlockEnd int64

	builder *wire.Builder
	batch   []byte
}

// Receive dispatches.
func (a *metadataActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.onStarted()
	case *actor.Stopping:
		a.closeLog()
	case *actor.Restarting:
		a.closeLog()
	case *actor.Stopped:
	case *messages.CreateTopicRequest:
		a.onCreateTopic(ctx, m)
	case *messages.DeleteTopicRequest:
		a.onDeleteTopic(ctx, m)
	case *messages.MetadataRequest:
		ctx.Respond(a.metadata(m))
	case *messages.InitProducerIdRequest:
		ctx.Respond(a.initProducerID())
	case *messages.AssignReplicaDirsRequest:
		for _, p := range m.GetAssignments() {
			a.onPartitionMoved(p)
		}
	default:
		a.logger.WithField("type", fmt.Sprintf("%T", m)).Warn("unhandled message")
	}
}

func (a *metadataActor) onStarted() {
	a.topics = map[string]*topicState{}
	a.creating = map[string]bool{}
	a.builder = wire.NewBuilder(wire.NoProducer)
	logCfg := disk.DefaultConfig()
	logCfg.SegmentBytes = metadataSegmentBytes
	logCfg.RetentionMs = -1
	logCfg.RetentionBytes = -1
	log, err := disk.Open(a.cfg.FS, a.cfg.Dir, disk.Options{Config: logCfg, LeaderEpoch: disk.NoLeaderEpoch, Logger: a.logger.WithField("dir", a.cfg.Dir)})
	if err != nil {
		a.failed = fmt.Errorf("controller: open metadata log %s: %w", a.cfg.Dir, err)
		a.logger.WithError(err).Error("metadata log did not open; refusing changes")
		return
	}
	a.log = log
	records, err := a.replay()
	if err != nil {
		a.failed = err
		a.logger.WithError(err).Error("metadata log did not replay; refusing changes")
		return
	}
	// Ids of a block reserved before the restart may have been handed out:
	// continue after it.
	a.nextProducerID = a.producerIDBlockEnd
	a.logger.WithFields(logrus.Fields{"records": records, "topics": len(a.topics)}).Info("metadata loaded")
}

// replay applies every record of the log in order and returns their number.
func (a *metadataActor) replay() (int, error) {
	var (
		buf     []byte
		records int
	)
	offset := a.log.StartOffset()
	for offset < a.log.EndOffset() {
		var err error
		buf, err = a.log.Read(offset, metadataReadBytes, buf[:0])
		if err != nil {
			return records, fmt.Errorf("controller: read metadata log %s at offset %d: %w", a.cfg.Dir, offset, err)
		}
		start := offset
		_, err = wire.Batches(buf, func(batch []byte, h wire.Header) error {
			err := wire.Records(batch, func(r wire.Record) error {
				var rec messages.MetadataRecord
				if err := proto.Unmarshal(r.Value, &rec); err != nil {
					return fmt.Errorf("%w %s: record at offset %d: %w", ErrMetadataLog, a.cfg.Dir, r.Offset, err)
				}
				a.apply(&rec)
				records++
				return nil
			})
			offset = h.NextOffset()
			return err
		})
		if err != nil {
			return records, err
		}
		if offset == start {
			return records, fmt.Errorf("%w %s: no whole batch at offset %d", ErrMetadataLog, a.cfg.Dir, offset)
		}
	}
	return records, nil
}

// apply changes the state by one record. It is the only place the state
// changes, at replay and after a record is persisted.
func (a *metadataActor) apply(rec *messages.MetadataRecord) {
	switch r := rec.Record.(type) {
	case *messages.MetadataRecord_Topic:
		config, err := topic.ParseConfig(r.Topic.GetConfigs())
		if err != nil {
			a.logger.WithError(err).WithField("topic", r.Topic.GetName()).Warn("stored topic config no longer valid; using defaults")
			config = topic.DefaultConfig()
		}
		a.topics[r.Topic.GetName()] = &topicState{record: r.Topic, config: config}
	case *messages.MetadataRecord_TopicDeleted:
		delete(a.topics, r.TopicDeleted.GetName())
	case *messages.MetadataRecord_ProducerIds:
		a.producerIDBlockEnd = max(a.producerIDBlockEnd, r.ProducerIds.GetNextProducerId())
	case *messages.MetadataRecord_PartitionDir:
		if t, ok := a.topics[r.PartitionDir.GetTopic()]; ok {
			for _, p := range t.record.GetPartitions() {
				if p.GetPartition() == r.PartitionDir.GetPartition() && p.GetNodeId() == r.PartitionDir.GetNodeId() {
					p.LogDir = r.PartitionDir.GetLogDir()
				}
			}
		}
	default:
		a.logger.WithField("type", fmt.Sprintf("%T", r)).Warn("unknown metadata record skipped")
	}
}

// persist appends rec to the metadata log and syncs it, then applies it.
// On failure nothing is applied and later changes are refused: what reached
// the log is unknown until a restart replays it.
func (a *metadataActor) persist(rec *messages.MetadataRecord) error {
	if a.failed != nil {
		return a.failed
	}
	value, err := proto.Marshal(rec)
	if err != nil {
		return fmt.Errorf("controller: marshal metadata record: %w", err)
	}
	a.builder.Reset(wire.NoProducer)
	a.builder.Append(time.Now().UnixMilli(), nil, value, nil)
	a.batch, err = a.builder.AppendTo(a.batch[:0])
	if err != nil {
		return fmt.Errorf("controller: build metadata record: %w", err)
	}
	if _, err := a.log.Append(a.batch); err != nil {
		return a.fail(fmt.Errorf("controller: append to metadata log %s: %w", a.cfg.Dir, err))
	}
	if err := a.log.Sync(); err != nil {
		return a.fail(fmt.Errorf("controller: sync metadata log %s: %w", a.cfg.Dir, err))
	}
	a.apply(rec)
	return nil
}

func (a *metadataActor) fail(err error) error {
	a.failed = err
	a.logger.WithError(err).Error("metadata log failed; refusing changes")
	return err
}

func (a *metadataActor) closeLog() {
	if a.log == nil {
		return
	}
	if err := a.log.Close(); err != nil {
		a.logger.WithError(err).Error("close metadata log")
	}
	a.log = nil
	if a.failed == nil {
		a.failed = fmt.Errorf("controller: metadata log %s: %w", a.cfg.Dir, disk.ErrClosed)
	}
}

// validateCreate checks a CreateTopicRequest against the current state and
// returns the parsed config, or the error code and message to answer with.
func (a *metadataActor) validateCreate(m *messages.CreateTopicRequest) (topic.Config, messages.ErrorCode, string) {
	name := m.GetName()
	if err := topic.ValidateName(name); err != nil {
		return topic.Config{}, messages.ErrorCode_INVALID_TOPIC, err.Error()
	}
	if _, ok := a.topics[name]; ok {
		return topic.Config{}, messages.ErrorCode_TOPIC_ALREADY_EXISTS, fmt.Sprintf("topic %q already exists", name)
	}
	for other := range a.topics {
		if topic.NamesCollide(name, other) {
			return topic.Config{}, messages.ErrorCode_INVALID_TOPIC,
				fmt.Sprintf("topic %q collides with existing topic %q ('.' and '_' are treated alike)", name, other)
		}
	}
	if p := m.GetPartitions(); p < 1 || p > MaxPartitionsPerTopic {
		return topic.Config{}, messages.ErrorCode_INVALID_PARTITIONS,
			fmt.Sprintf("partitions %d: must be between 1 and %d", p, MaxPartitionsPerTopic)
	}
	config, err := topic.ParseConfig(m.GetConfigs())
	if err != nil {
		return topic.Config{}, messages.ErrorCode_INVALID_CONFIG, err.Error()
	}
	return config, messages.ErrorCode_NONE, ""
}

// placePartitions chooses a log dir for each of n new partitions, counting
// the partitions this node already holds in each configured dir.
func (a *metadataActor) placePartitions(n int) ([]string, error) {
	dirs := make([]placement.Dir, len(a.cfg.LogDirs))
	index := make(map[string]int, len(dirs))
	for i, path := range a.cfg.LogDirs {
		dirs[i] = placement.Dir{Path: path, Online: true}
		index[path] = i
	}
	for _, t := range a.topics {
		for _, p := range t.record.GetPartitions() {
			if i, ok := index[p.GetLogDir()]; ok && p.GetNodeId() == a.cfg.NodeID {
				dirs[i].Partitions++
			}
		}
	}
	return placement.ByCount(dirs, n)
}

func (a *metadataActor) onCreateTopic(ctx actor.Context, m *messages.CreateTopicRequest) {
	config, code, msg := a.validateCreate(m)
	if code == messages.ErrorCode_NONE && a.creating[m.GetName()] {
		code, msg = messages.ErrorCode_TOPIC_ALREADY_EXISTS, fmt.Sprintf("topic %q is being created", m.GetName())
	}
	if code != messages.ErrorCode_NONE {
		ctx.Respond(&messages.CreateTopicResponse{Error: code, ErrorMessage: msg})
		return
	}
	if a.cfg.Placement == nil || m.GetValidateOnly() {
		dirs, err := a.placePartitions(int(m.GetPartitions()))
		a.createTopic(ctx, m, config, dirs, err)
		return
	}
	name := m.GetName()
	a.creating[name] = true
	future := ctx.RequestFuture(a.cfg.Placement, &disks.ChooseLogDirs{
		Topic:          name,
		Partitions:     int(m.GetPartitions()),
		RetentionBytes: config.Log.RetentionBytes,
		RetentionMs:    topic.RetentionMillis(config.Log.RetentionMs),
	}, a.cfg.ManagerTimeout)
	ctx.ReenterAfter(future, func(res any, err error) {
		delete(a.creating, name)
		var dirs []string
		if err == nil {
			if r, ok := res.(*disks.ChooseLogDirsResult); ok {
				dirs, err = r.Dirs, r.Err
			} else {
				err = fmt.Errorf("placement answered %T", res)
			}
		}
		a.createTopic(ctx, m, config, dirs, err)
	})
}

// createTopic records a validated topic whose partitions go to dirs (or
// answers err), then has its partitions started.
func (a *metadataActor) createTopic(ctx actor.Context, m *messages.CreateTopicRequest, config topic.Config, dirs []string, err error) {
	if err != nil {
		ctx.Respond(&messages.CreateTopicResponse{Error: messages.ErrorCode_KAFKA_STORAGE_ERROR, ErrorMessage: fmt.Sprintf("choosing log dirs: %v", err)})
		return
	}
	name := m.GetName()
	record := &messages.TopicRecord{
		Name:     name,
		Configs:  copyConfigs(m.GetConfigs()),
		Internal: topic.IsInternal(name),
	}
	for i, dir := range dirs {
		record.Partitions = append(record.Partitions, &messages.PartitionAssignment{
			Topic: name, Partition: int32(i), NodeId: a.cfg.NodeID, LogDir: dir,
		})
	}
	if m.GetValidateOnly() {
		ctx.Respond(&messages.CreateTopicResponse{Topic: a.topicMetadata(&topicState{record: record, config: config})})
		return
	}
	if err := a.persist(&messages.MetadataRecord{Record: &messages.MetadataRecord_Topic{Topic: record}}); err != nil {
		ctx.Respond(&messages.CreateTopicResponse{Error: messages.ErrorCode_KAFKA_STORAGE_ERROR, ErrorMessage: err.Error()})
		return
	}
	a.logger.WithFields(logrus.Fields{"topic": name, "partitions": len(dirs)}).Info("topic created")
	metadata := a.topicMetadata(a.topics[name])
	start := &messages.StartPartitionsRequest{Partitions: record.GetPartitions(), Configs: config.Map()}
	future := ctx.RequestFuture(a.cfg.PartitionManager, start, a.cfg.ManagerTimeout)
	ctx.ReenterAfter(future, func(res any, err error) {
		code, msg := managerAnswer(res, err, "start partitions")
		if code != messages.ErrorCode_NONE {
			a.logger.WithFields(logrus.Fields{"topic": name, "error": msg}).Error("partitions of a new topic did not start")
		}
		ctx.Respond(&messages.CreateTopicResponse{Error: code, ErrorMessage: msg, Topic: metadata})
	})
}

func (a *metadataActor) onDeleteTopic(ctx actor.Context, m *messages.DeleteTopicRequest) {
	name := m.GetName()
	t, ok := a.topics[name]
	if !ok {
		ctx.Respond(&messages.DeleteTopicResponse{
			Error:        messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION,
			ErrorMessage: fmt.Sprintf("topic %q does not exist", name),
		})
		return
	}
	if err := a.persist(&messages.MetadataRecord{Record: &messages.MetadataRecord_TopicDeleted{
		TopicDeleted: &messages.TopicDeletedRecord{Name: name},
	}}); err != nil {
		ctx.Respond(&messages.DeleteTopicResponse{Error: messages.ErrorCode_KAFKA_STORAGE_ERROR, ErrorMessage: err.Error()})
		return
	}
	a.logger.WithField("topic", name).Info("topic deleted")
	stop := &messages.StopPartitionsRequest{Delete: true}
	for _, p := range t.record.GetPartitions() {
		if p.GetNodeId() == a.cfg.NodeID {
			stop.Partitions = append(stop.Partitions, &messages.TopicPartition{Topic: name, Partition: p.GetPartition()})
		}
	}
	future := ctx.RequestFuture(a.cfg.PartitionManager, stop, a.cfg.ManagerTimeout)
	ctx.ReenterAfter(future, func(res any, err error) {
		code, msg := managerAnswer(res, err, "stop partitions")
		if code != messages.ErrorCode_NONE {
			a.logger.WithFields(logrus.Fields{"topic": name, "error": msg}).Error("partitions of a deleted topic did not stop")
		}
		ctx.Respond(&messages.DeleteTopicResponse{Error: code, ErrorMessage: msg})
	})
}

// managerAnswer turns the partition manager's answer (or its absence) into
// the error code and message for the client.
func managerAnswer(res any, err error, what string) (messages.ErrorCode, string) {
	if err != nil {
		return messages.ErrorCode_REQUEST_TIMED_OUT, fmt.Sprintf("%s: partition manager did not answer: %v", what, err)
	}
	switch r := res.(type) {
	case *messages.StartPartitionsResponse:
		if r.GetError() != messages.ErrorCode_NONE {
			return r.GetError(), fmt.Sprintf("%s: %s", what, r.GetErrorMessage())
		}
		return messages.ErrorCode_NONE, ""
	case *messages.StopPartitionsResponse:
		if r.GetError() != messages.ErrorCode_NONE {
			return r.GetError(), fmt.Sprintf("%s: %s", what, r.GetErrorMessage())
		}
		return messages.ErrorCode_NONE, ""
	}
	return messages.ErrorCode_UNKNOWN_SERVER_ERROR, fmt.Sprintf("%s: partition manager answered %T", what, res)
}

// metadata answers a MetadataRequest: every topic sorted by name, or the
// named ones in the order asked, an unknown or invalid name with its error.
func (a *metadataActor) metadata(m *messages.MetadataRequest) *messages.MetadataResponse {
	resp := &messages.MetadataResponse{
		Brokers:      []*messages.Broker{{NodeId: a.cfg.NodeID, Address: a.cfg.Address}},
		ControllerId: a.cfg.NodeID,
	}
	names := m.GetTopics()
	if len(names) == 0 {
		names = make([]string, 0, len(a.topics))
		for name := range a.topics {
			names = append(names, name)
		}
		sort.Strings(names)
	}
	for _, name := range names {
		if t, ok := a.topics[name]; ok {
			resp.Topics = append(resp.Topics, a.topicMetadata(t))
			continue
		}
		if err := topic.ValidateName(name); err != nil {
			resp.Topics = append(resp.Topics, &messages.TopicMetadata{
				Name: name, Error: messages.ErrorCode_INVALID_TOPIC, ErrorMessage: err.Error(),
			})
		} else {
			resp.Topics = append(resp.Topics, &messages.TopicMetadata{
				Name: name, Error: messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION,
				ErrorMessage: fmt.Sprintf("topic %q does not exist", name),
				Internal:     topic.IsInternal(name),
			})
		}
	}
	return resp
}

// topicMetadata describes a topic: its partitions with their leader's
// actor, and its effective configs.
func (a *metadataActor) topicMetadata(t *topicState) *messages.TopicMetadata {
	name := t.record.GetName()
	md := &messages.TopicMetadata{
		Name:     name,
		Configs:  t.config.Map(),
		Internal: t.record.GetInternal(),
	}
	for _, p := range t.record.GetPartitions() {
		md.Partitions = append(md.Partitions, &messages.PartitionMetadata{
			Partition:     p.GetPartition(),
			Leader:        p.GetNodeId(),
			LeaderAddress: a.cfg.Address,
			ActorName:     actors.PartitionActorName(name, p.GetPartition()),
			LogDir:        p.GetLogDir(),
		})
	}
	return md
}

// initProducerID hands out the next producer id, reserving a new block in
// the log first when the current one is used up.
func (a *metadataActor) initProducerID() *messages.InitProducerIdResponse {
	if a.nextProducerID >= a.producerIDBlockEnd {
		next := a.nextProducerID + ProducerIDBlockSize
		err := a.persist(&messages.MetadataRecord{Record: &messages.MetadataRecord_ProducerIds{
			ProducerIds: &messages.ProducerIdBlockRecord{NextProducerId: next},
		}})
		if err != nil {
			return &messages.InitProducerIdResponse{Error: messages.ErrorCode_KAFKA_STORAGE_ERROR, ErrorMessage: err.Error()}
		}
	}
	id := a.nextProducerID
	a.nextProducerID++
	return &messages.InitProducerIdResponse{ProducerId: id, ProducerEpoch: 0}
}

func copyConfigs(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func (a *metadataActor) onPartitionMoved(m *messages.PartitionAssignment) {
	if _, ok := a.topics[m.GetTopic()]; !ok {
		return
	}
	err := a.persist(&messages.MetadataRecord{Record: &messages.MetadataRecord_PartitionDir{PartitionDir: &messages.PartitionDirRecord{
		Topic: m.GetTopic(), Partition: m.GetPartition(), NodeId: m.GetNodeId(), LogDir: m.GetLogDir(),
	}}})
	if err != nil {
		a.logger.WithError(err).Error("recording a partition's new log dir failed")
	}
}
