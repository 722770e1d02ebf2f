// Package controller is the node's controller actor: it owns the metadata
// log, turns requests into metadata records (actors/metadata), persists
// them, replays them into the image, and has the node's partition manager
// act on what changed for this node. It is a quorum of one, the node itself;
// the metadata log is written so that it can be replicated and applied on
// every node.
package controller

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/metadata"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

// Defaults of the controller.
const (
	// DefaultManagerTimeout is how long the controller waits for the
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

// Config is what the controller needs.
type Config struct {
	// FS is the file system of the metadata log (disk.OS in production).
	FS disk.FS
	// Dir is the metadata log's own directory, e.g. <data-dir>/meta.
	Dir string
	// NodeID is this node's id: the leader of every partition it places.
	NodeID int32
	// Address is this node's actor address (host:port of protoactor remote),
	// given to clients as the leader_address of partitions.
	Address string
	// LogDirs maps the id of each of this node's log directories to its
	// path, for describing partitions and for reading records written
	// before directory ids, which name paths. Directories added later are
	// learnt from the assignments that name them.
	LogDirs map[string]string
	// PartitionManager starts and stops partition actors on this node.
	PartitionManager *actor.PID
	// ManagerTimeout bounds each request to the partition manager. Default
	// DefaultManagerTimeout (10 s).
	ManagerTimeout time.Duration
	// Now is the clock of the records' timestamps. Default time.Now.
	Now func() time.Time
	// Logger is the actor's logger. Default: a logger that discards.
	Logger *logrus.Entry
}

// NewProps returns the props of the controller.
//
// Every change is a messages.MetadataRecord generated from the current
// image, appended to a log in cfg.Dir and synced before it is replayed and
// the request that caused it answered; on Started the actor replays that
// log, so a restart brings every topic back. The image is the result of
// replaying the records in order, and nothing else.
//
// It answers CreateTopicRequest, DeleteTopicRequest, MetadataRequest,
// InitProducerIdRequest and AssignReplicaDirsRequest. Like every actor it
// is not shared: all access is through its mailbox.
//
// Log layout: a disk.Log of Kafka record batches, each holding the records
// of one change (one record each but for directory assignments, which come
// together), whose values are proto-marshalled messages.MetadataRecord (no
// key, timestamp the time of the change). A torn tail (a crash mid-append)
// is cut by the log's recovery, losing only the change that was never
// answered.
func NewProps(cfg Config) *actor.Props {
	if cfg.ManagerTimeout <= 0 {
		cfg.ManagerTimeout = DefaultManagerTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = actors.DiscardLogger()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	logger := cfg.Logger.WithFields(logrus.Fields{"actor": "metadata", "node": cfg.NodeID})
	return actors.Props(func() actor.Actor {
		return &controllerActor{cfg: cfg, logger: logger}
	}, logger)
}

// controllerActor is the state of the controller. Not shared: all access is
// through its mailbox.
type controllerActor struct {
	cfg    Config
	logger *logrus.Entry

	log *disk.Log
	// failed is why the metadata log cannot be written (it did not open, or
	// an append or sync failed); changes are then refused.
	failed error

	image *metadata.Image
	// dirPaths maps this node's log directory ids to their paths.
	dirPaths map[string]string
	// nextProducerID is the next producer id to hand out; ids below the
	// image's ProducerIDsEnd are reserved by the log.
	nextProducerID int64

	builder *wire.Builder
	batch   []byte
}

// Receive dispatches.
func (a *controllerActor) Receive(ctx actor.Context) {
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
		resp := a.assignDirs(m.GetAssignments())
		if ctx.Sender() != nil {
			ctx.Respond(resp)
		}
	default:
		a.logger.WithField("type", fmt.Sprintf("%T", m)).Warn("unhandled message")
	}
}

func (a *controllerActor) onStarted() {
	a.image = metadata.Empty()
	a.dirPaths = make(map[string]string, len(a.cfg.LogDirs))
	for id, path := range a.cfg.LogDirs {
		a.dirPaths[id] = path
	}
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
	a.nextProducerID = a.image.ProducerIDsEnd()
	a.logger.WithFields(logrus.Fields{"records": records, "topics": len(a.image.TopicNames())}).Info("metadata loaded")
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

// replay folds every record of the log into one delta, in order, applies it
// and returns the number of records.
func (a *controllerActor) replay() (int, error) {
	var (
		buf     []byte
		records int
	)
	delta := metadata.NewDelta(a.image, a.legacyDir)
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
				a.replayOne(delta, &rec)
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
	a.image = delta.Apply()
	return records, nil
}

// replayOne folds rec into delta, logging what it could not take.
func (a *controllerActor) replayOne(delta *metadata.Delta, rec *messages.MetadataRecord) {
	if err := delta.Replay(rec); err != nil {
		a.logger.WithError(err).Warn("metadata record not replayed as written")
	}
}

// persist appends recs to the metadata log in one batch and syncs it, then
// replays them into the image and returns their delta. On failure nothing
// is replayed and later changes are refused: what reached the log is
// unknown until a restart replays it.
func (a *controllerActor) persist(recs ...*messages.MetadataRecord) (*metadata.Delta, error) {
	if a.failed != nil {
		return nil, a.failed
	}
	a.builder.Reset(wire.NoProducer)
	now := a.cfg.Now().UnixMilli()
	for _, rec := range recs {
		value, err := proto.Marshal(rec)
		if err != nil {
			return nil, fmt.Errorf("controller: marshal metadata record: %w", err)
		}
		a.builder.Append(now, nil, value, nil)
	}
	var err error
	a.batch, err = a.builder.AppendTo(a.batch[:0])
	if err != nil {
		return nil, fmt.Errorf("controller: build metadata records: %w", err)
	}
	if _, err := a.log.Append(a.batch); err != nil {
		return nil, a.fail(fmt.Errorf("controller: append to metadata log %s: %w", a.cfg.Dir, err))
	}
	if err := a.log.Sync(); err != nil {
		return nil, a.fail(fmt.Errorf("controller: sync metadata log %s: %w", a.cfg.Dir, err))
	}
	delta := metadata.NewDelta(a.image, a.legacyDir)
	for _, rec := range recs {
		a.replayOne(delta, rec)
	}
	a.image = delta.Apply()
	return delta, nil
}

func (a *controllerActor) fail(err error) error {
	a.failed = err
	a.logger.WithError(err).Error("metadata log failed; refusing changes")
	return err
}

func (a *controllerActor) closeLog() {
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

// view is how the image describes partitions from this node.
func (a *controllerActor) view() metadata.View {
	return metadata.View{
		Address: func(int32) string { return a.cfg.Address },
		DirPath: func(nodeID int32, id string) string {
			if nodeID != a.cfg.NodeID {
				return ""
			}
			return a.dirPaths[id]
		},
	}
}

func (a *controllerActor) onCreateTopic(ctx actor.Context, m *messages.CreateTopicRequest) {
	_, code, msg := a.image.ValidateCreate(m)
	if code != messages.ErrorCode_NONE {
		ctx.Respond(&messages.CreateTopicResponse{Error: code, ErrorMessage: msg})
		return
	}
	record := metadata.CreateTopic(m, a.cfg.NodeID)
	name := m.GetName()
	if m.GetValidateOnly() {
		delta := metadata.NewDelta(a.image, nil)
		a.replayOne(delta, record)
		t, _ := delta.Apply().Topic(name)
		ctx.Respond(&messages.CreateTopicResponse{Topic: t.Describe(a.view())})
		return
	}
	delta, err := a.persist(record)
	if err != nil {
		ctx.Respond(&messages.CreateTopicResponse{Error: messages.ErrorCode_KAFKA_STORAGE_ERROR,
			ErrorMessage: fmt.Sprintf("topic %q not created: %s", name, messages.ErrorText(err))})
		return
	}
	t, _ := a.image.Topic(name)
	a.logger.WithFields(logrus.Fields{"topic": name, "partitions": len(t.Partitions)}).Info("topic created")
	a.act(ctx, delta, func(code messages.ErrorCode, msg string) {
		resp := &messages.CreateTopicResponse{Error: code, ErrorMessage: msg}
		if t, ok := a.image.Topic(name); ok {
			resp.Topic = t.Describe(a.view())
		}
		ctx.Respond(resp)
	})
}

func (a *controllerActor) onDeleteTopic(ctx actor.Context, m *messages.DeleteTopicRequest) {
	name := m.GetName()
	if _, ok := a.image.Topic(name); !ok {
		ctx.Respond(&messages.DeleteTopicResponse{
			Error:        messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION,
			ErrorMessage: fmt.Sprintf("topic %q does not exist", name),
		})
		return
	}
	delta, err := a.persist(metadata.DeleteTopic(name))
	if err != nil {
		ctx.Respond(&messages.DeleteTopicResponse{Error: messages.ErrorCode_KAFKA_STORAGE_ERROR,
			ErrorMessage: fmt.Sprintf("topic %q not deleted: %s", name, messages.ErrorText(err))})
		return
	}
	a.logger.WithField("topic", name).Info("topic deleted")
	a.act(ctx, delta, func(code messages.ErrorCode, msg string) {
		ctx.Respond(&messages.DeleteTopicResponse{Error: code, ErrorMessage: msg})
	})
}

// act has the partition manager do what delta changes for this node: stop
// and delete the partitions of deleted topics, then start those of created
// ones, recording the directories the node chose for them. done gets the
// first failure, or NONE.
func (a *controllerActor) act(ctx actor.Context, delta *metadata.Delta, done func(messages.ErrorCode, string)) {
	changes := delta.LocalChanges(a.cfg.NodeID)
	var steps []func(next func(messages.ErrorCode, string))
	for _, t := range changes.Deleted {
		stop := &messages.StopPartitionsRequest{Delete: true}
		for _, p := range t.Assignments(a.cfg.NodeID) {
			stop.Partitions = append(stop.Partitions, &messages.TopicPartition{Topic: p.Topic, Partition: p.Partition})
		}
		steps = append(steps, func(next func(messages.ErrorCode, string)) {
			a.askManager(ctx, stop, "stop partitions", t.Name, func(any) messages.ErrorCode { return messages.ErrorCode_NONE }, next)
		})
	}
	for _, t := range changes.Created {
		start := &messages.StartPartitionsRequest{Partitions: t.Assignments(a.cfg.NodeID), Configs: t.Config.Map()}
		steps = append(steps, func(next func(messages.ErrorCode, string)) {
			a.askManager(ctx, start, "start partitions", t.Name, func(res any) messages.ErrorCode {
				r := res.(*messages.StartPartitionsResponse)
				return a.assignDirs(r.GetAssigned()).GetError()
			}, next)
		})
	}
	var run func(i int, code messages.ErrorCode, msg string)
	run = func(i int, code messages.ErrorCode, msg string) {
		if i == len(steps) {
			done(code, msg)
			return
		}
		steps[i](func(c messages.ErrorCode, m string) {
			if code == messages.ErrorCode_NONE {
				code, msg = c, m
			}
			run(i+1, code, msg)
		})
	}
	run(0, messages.ErrorCode_NONE, "")
}

// askManager sends req to the partition manager and calls next with the
// outcome; on success, then(res) may still turn it into a failure.
func (a *controllerActor) askManager(ctx actor.Context, req proto.Message, what, topicName string, then func(res any) messages.ErrorCode, next func(messages.ErrorCode, string)) {
	future := ctx.RequestFuture(a.cfg.PartitionManager, req, a.cfg.ManagerTimeout)
	ctx.ReenterAfter(future, func(res any, err error) {
		code, msg := managerAnswer(res, err, what)
		if code == messages.ErrorCode_NONE {
			if code = then(res); code != messages.ErrorCode_NONE {
				msg = fmt.Sprintf("%s: recording the log dirs chosen failed", what)
			}
		}
		if code != messages.ErrorCode_NONE {
			a.logger.WithFields(logrus.Fields{"topic": topicName, "error": msg}).Error("partition manager failed to " + what)
		}
		next(code, msg)
	})
}

// managerAnswer turns the partition manager's answer (or its absence) into
// the error code and message for the client.
func managerAnswer(res any, err error, what string) (messages.ErrorCode, string) {
	if err != nil {
		return messages.ErrorCode_REQUEST_TIMED_OUT, fmt.Sprintf("%s: partition manager did not answer: %s", what, messages.ErrorText(err))
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

// assignDirs records the log directories that assignments name for their
// partitions (KIP-858's AssignReplicasToDirs), in one batch, and learns the
// paths of this node's directories from them.
func (a *controllerActor) assignDirs(assignments []*messages.PartitionAssignment) *messages.AssignReplicaDirsResponse {
	for _, p := range assignments {
		if p.GetNodeId() == a.cfg.NodeID && p.GetDirId() != "" && p.GetLogDir() != "" {
			a.dirPaths[p.GetDirId()] = p.GetLogDir()
		}
	}
	recs := a.image.AssignDirs(assignments)
	if len(recs) == 0 {
		return &messages.AssignReplicaDirsResponse{}
	}
	if _, err := a.persist(recs...); err != nil {
		a.logger.WithError(err).Error("recording the log dirs of partitions failed")
		return &messages.AssignReplicaDirsResponse{Error: messages.ErrorCode_KAFKA_STORAGE_ERROR, ErrorMessage: messages.ErrorText(err)}
	}
	return &messages.AssignReplicaDirsResponse{}
}

// metadata answers a MetadataRequest: every topic sorted by name, or the
// named ones in the order asked, an unknown or invalid name with its error.
func (a *controllerActor) metadata(m *messages.MetadataRequest) *messages.MetadataResponse {
	return &messages.MetadataResponse{
		Brokers:      []*messages.Broker{{NodeId: a.cfg.NodeID, Address: a.cfg.Address}},
		ControllerId: a.cfg.NodeID,
		Topics:       a.image.Describe(m.GetTopics(), a.view()),
	}
}

// initProducerID hands out the next producer id, reserving a new block in
// the log first when the current one is used up.
func (a *controllerActor) initProducerID() *messages.InitProducerIdResponse {
	if a.nextProducerID >= a.image.ProducerIDsEnd() {
		if _, err := a.persist(a.image.ReserveProducerIDs(a.nextProducerID)); err != nil {
			return &messages.InitProducerIdResponse{Error: messages.ErrorCode_KAFKA_STORAGE_ERROR,
				ErrorMessage: "no producer id: " + messages.ErrorText(err)}
		}
	}
	id := a.nextProducerID
	a.nextProducerID++
	return &messages.InitProducerIdResponse{ProducerId: id, ProducerEpoch: 0}
}
