package partition

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/sirupsen/logrus"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/disks"
	"github.com/depot-dev/depot/actors/partition/state"
	"github.com/depot-dev/depot/actors/remote"
	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

const (
	// defaultFetchMaxBytes is used for a fetch that names no limit.
	defaultFetchMaxBytes = 1 << 20
	// maxFramePool bounds the buffer a fetch takes from its transport for
	// its records, whatever max_bytes asks: 4 MiB.
	maxFramePool = 4 << 20
	// partitionTickInterval is how often a partition applies retention,
	// rolls by age and reports its size to its log directory.
	partitionTickInterval = 10 * time.Second
	// reportStepBytes: a partition also reports its size to its log
	// directory whenever it has grown by this much since its last report.
	reportStepBytes = 4 << 20
	// reportDelay bounds how stale a log directory's view of a partition
	// that is written to gets: at most one report per partition per delay.
	reportDelay = time.Second
)

// PartitionConfig is what a partition actor needs to start.
type PartitionConfig struct {
	Topic     string
	Partition int32
	FS        disk.FS
	// LogDir is the log directory (a disk) that holds the partition's
	// directory <LogDir>/<topic>-<partition>.
	LogDir string
	Config topic.Config
	// RecoveryPoint and LogStartOffset come from the log directory's
	// checkpoints; zero when unknown.
	RecoveryPoint  int64
	LogStartOffset int64
	// Transport is the actor system's remote state: fetch frames come from
	// its pool, and received produce requests are released to it.
	Transport *remote.Transport
	// LogDirActor receives the partition's reports (size, recovery point)
	// and its final report when it stops. May be nil.
	LogDirActor *actor.PID
	// TickInterval overrides partitionTickInterval when positive.
	TickInterval time.Duration
	Logger       *logrus.Entry
	// moveHook, when set, is called at each step of a move (moveStepCopy,
	// moveStepS2, moveStepS3, moveStepS4); an error fails the move there,
	// as an I/O error at that step would. Tests use it to stop a move.
	moveHook func(step string) error
}

// deletePartition makes a partition actor remove its log before it stops.
type deletePartition struct{}

// partitionTick drives retention, roll by age and reports.
type partitionTick struct{}

// reportSoon sends a report of bytes appended since the last one.
type reportSoon struct{}

// syncParked makes the partition start a flush for the acks=all produce
// requests that arrived before this message: a group commit.
type syncParked struct{}

// flushRun is a disk.FlushJob running on a goroutine of its own, so that
// the partition goes on appending during the fsync; done receives the
// job's result.
type flushRun struct {
	job  *disk.FlushJob
	done chan error
}

// flushDone tells the partition that run's fsync has returned.
type flushDone struct{ run *flushRun }

// fetchExpired ends the wait of a parked fetch.
type fetchExpired struct{ id uint64 }

// parkedProduce is an acks=all answer waiting for a flush that covers the
// offsets below end.
type parkedProduce struct {
	sender   *actor.PID
	response *messages.ProduceResponse
	end      int64
}

// parkedFetch is a fetch waiting for min_bytes or max_wait_ms, as in
// Kafka's fetch purgatory.
type parkedFetch struct {
	id        uint64
	sender    *actor.PID
	request   *messages.FetchRequest
	available int
	cancel    scheduler.CancelFunc
}

// partitionActor owns one partition's log. Not shared: all access is
// through its mailbox.
type partitionActor struct {
	cfg       PartitionConfig
	tp        disk.TopicPartition
	log       *disk.Log
	logErr    error // why the log is not open, when log is nil
	producers state.Producers
	logger    *logrus.Entry
	timers    *scheduler.TimerScheduler
	stopTick  scheduler.CancelFunc

	// syncing is set while a syncParked is on its way; flushing is the
	// flush in flight, if any.
	syncing        bool
	flushing       *flushRun
	parkedProduces []parkedProduce
	parkedFetches  []*parkedFetch
	nextFetchID    uint64
	deleted        bool
	// appendedBytes counts the bytes appended since the actor started; the
	// log-dir actor derives the write rate from it.
	appendedBytes int64
	// reportedBytes is the appendedBytes of the last report;
	// reportPending is set while a reportSoon is on its way.
	reportedBytes int64
	reportPending bool

	// move is the running move to another log directory, if any; moveSeq
	// numbers moves so that a stale copyStep is recognised.
	move    *partitionMove
	moveSeq uint64
	// home is the config the next incarnation of the actor starts from,
	// shared with its props; only the live actor writes it.
	home *PartitionConfig
}

// NewPartitionProps returns the props of a partition actor.
func NewPartitionProps(cfg PartitionConfig) *actor.Props {
	// home is where the partition lives; a move changes it, so that an
	// actor restarted after a failure opens the log where it now is.
	home := &cfg
	return actors.Props(func() actor.Actor {
		return &partitionActor{
			cfg:       *home,
			home:      home,
			tp:        disk.TopicPartition{Topic: home.Topic, Partition: home.Partition},
			producers: state.Producers{},
			logger:    home.Logger.WithFields(logrus.Fields{"actor": "partition", "topic": home.Topic, "partition": home.Partition, "dir": home.LogDir}),
		}
	}, cfg.Logger.WithFields(logrus.Fields{"actor": "partition", "topic": cfg.Topic, "partition": cfg.Partition}))
}

// leaderEpoch is a partition's leader epoch. The metadata assigns none, so
// it is disk.NoLeaderEpoch. As Kafka's leader does, a partition stamps it
// on every batch it appends, whatever the producer sent, and its log takes
// a batch with a higher one for damage.
const leaderEpoch = disk.NoLeaderEpoch

// PartitionDir is the directory of a partition's log in a log directory.
func PartitionDir(logDir, topicName string, partition int32) string {
	return filepath.Join(logDir, disk.PartitionDirName(disk.TopicPartition{Topic: topicName, Partition: partition}))
}

func (a *partitionActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.onStarted(ctx)
	case *messages.ProduceRequest:
		a.onProduce(ctx, m)
		a.cfg.Transport.Release(m)
	case *syncParked:
		a.syncing = false
		a.startFlush(ctx)
	case *flushDone:
		if m.run == a.flushing {
			a.finishFlush(ctx)
			a.startFlush(ctx)
		}
	case *messages.FetchRequest:
		a.onFetch(ctx, m)
	case *fetchExpired:
		a.onFetchExpired(ctx, m)
	case *messages.ListOffsetsRequest:
		a.onListOffsets(ctx, m)
	case *messages.PartitionStatusRequest:
		ctx.Respond(a.status())
	case *messages.DeleteRecordsRequest:
		a.onDeleteRecords(ctx, m)
	case *partitionTick:
		a.onTick(ctx)
	case *reportSoon:
		a.reportPending = false
		if a.appendedBytes != a.reportedBytes {
			a.report(ctx, false)
		}
	case *disks.GoOffline:
		a.onOffline(ctx, m)
	case *deletePartition:
		a.onDelete(ctx)
	case *messages.MovePartitionRequest:
		a.onMove(ctx, m)
	case *copyStep:
		a.onCopyStep(ctx, m)
	case *actor.Stopping:
		a.onStopping(ctx)
	case *actor.Restarting:
		a.closeLog(ctx)
	case *actor.Stopped, *actor.Restart, *actor.ReceiveTimeout:
	case actor.AutoReceiveMessage, actor.SystemMessage:
	default:
		a.logger.WithField("type", fmt.Sprintf("%T", m)).Warn("unhandled message")
	}
}

func (a *partitionActor) onStarted(ctx actor.Context) {
	a.timers = scheduler.NewTimerScheduler(ctx)
	interval := a.cfg.TickInterval
	if interval <= 0 {
		interval = partitionTickInterval
	}
	a.stopTick = a.timers.SendRepeatedly(interval, interval, ctx.Self(), &partitionTick{})

	started := time.Now()
	log, err := disk.Open(a.cfg.FS, PartitionDir(a.cfg.LogDir, a.cfg.Topic, a.cfg.Partition), disk.Options{
		Config:         a.cfg.Config.Log,
		RecoveryPoint:  a.cfg.RecoveryPoint,
		LogStartOffset: a.cfg.LogStartOffset,
		LeaderEpoch:    leaderEpoch,
		Logger:         a.logger,
	})
	if err != nil {
		a.logErr = err
		a.logger.WithError(err).Error("cannot open partition log; partition offline")
		return
	}
	a.log = log
	if err := log.ScanHeaders(log.StartOffset(), func(h wire.Header) error {
		a.producers.Update(&h)
		return nil
	}); err != nil {
		a.logger.WithError(err).Warn("producer state rebuilt from a damaged log: idempotence checks may refuse a retry")
	}
	a.logger.WithFields(logrus.Fields{
		"start_offset": log.StartOffset(),
		"end_offset":   log.EndOffset(),
		"producers":    len(a.producers),
		"took":         time.Since(started).Round(time.Millisecond),
	}).Debug("partition log opened")
	a.report(ctx, false)
}

// unavailable returns the error code and message for a request when the
// log is not open.
func (a *partitionActor) unavailable() (messages.ErrorCode, string) {
	if a.deleted {
		return messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "partition deleted"
	}
	return messages.ErrorCode_KAFKA_STORAGE_ERROR, fmt.Sprintf("partition log unavailable: %v", a.logErr)
}

func (a *partitionActor) onProduce(ctx actor.Context, m *messages.ProduceRequest) {
	resp := &messages.ProduceResponse{
		Topic:           m.Topic,
		Partition:       m.Partition,
		CorrelationId:   m.CorrelationId,
		BaseOffset:      -1,
		LogAppendTimeMs: -1,
	}
	answer := func() {
		if m.Acks != 0 {
			ctx.Respond(resp)
		}
	}
	if a.log == nil {
		resp.Error, resp.ErrorMessage = a.unavailable()
		answer()
		return
	}
	resp.LogStartOffset = a.log.StartOffset()
	if m.Acks != 0 && m.Acks != 1 && m.Acks != -1 {
		resp.Error, resp.ErrorMessage = messages.ErrorCode_INVALID_REQUIRED_ACKS, fmt.Sprintf("acks %d: want 0, 1 or -1", m.Acks)
		ctx.Respond(resp)
		return
	}
	if code, msg := validateProduce(m.Records, a.cfg.Config.MaxMessageBytes); code != messages.ErrorCode_NONE {
		resp.Error, resp.ErrorMessage = code, msg
		if code == messages.ErrorCode_MESSAGE_TOO_LARGE {
			resp.MaxMessageBytes = a.cfg.Config.MaxMessageBytes
		}
		answer()
		return
	}
	appended := false
	for rest := m.Records; len(rest) > 0; {
		size, _ := wire.PeekSize(rest) // validated above
		batch := rest[:size]
		rest = rest[size:]
		h, _ := wire.ParseHeader(batch) // validated above, CRC included
		code, dup := a.producers.Check(&h)
		if code != messages.ErrorCode_NONE {
			resp.Error = code
			resp.ErrorMessage = fmt.Sprintf("producer %d epoch %d sequence %d refused", h.ProducerID, h.ProducerEpoch, h.BaseSequence)
			break
		}
		if dup != nil {
			if resp.BaseOffset < 0 {
				resp.BaseOffset = dup.FirstOffset
			}
			continue
		}
		wire.SetLeaderEpoch(batch, leaderEpoch)
		h.LeaderEpoch = leaderEpoch
		res, err := a.log.AppendValidated(batch, h)
		if err != nil {
			resp.Error, resp.ErrorMessage = a.appendError(ctx, err)
			break
		}
		appended = true
		a.appendedBytes += int64(len(batch))
		h.BaseOffset = res.BaseOffset
		a.producers.Update(&h)
		if resp.BaseOffset < 0 {
			resp.BaseOffset = res.BaseOffset
		}
	}
	if appended {
		a.wakeFetches(ctx, len(m.Records))
		switch {
		case a.appendedBytes-a.reportedBytes >= reportStepBytes:
			a.report(ctx, false)
		case !a.reportPending:
			a.reportPending = true
			a.timers.SendOnce(reportDelay, ctx.Self(), &reportSoon{})
		}
	}
	if m.Acks == -1 && appended && resp.Error == messages.ErrorCode_NONE {
		a.parkedProduces = append(a.parkedProduces, parkedProduce{sender: ctx.Sender(), response: resp, end: a.log.EndOffset()})
		if !a.syncing && a.flushing == nil {
			a.syncing = true
			ctx.Send(ctx.Self(), &syncParked{})
		}
		return
	}
	answer()
}

// validateProduce checks every batch of a produce request before any is
// appended, so that a bad batch changes nothing.
func validateProduce(records []byte, maxMessageBytes int32) (messages.ErrorCode, string) {
	if len(records) == 0 {
		return messages.ErrorCode_CORRUPT_MESSAGE, "no record batch in request"
	}
	for i, rest := 0, records; len(rest) > 0; i++ {
		size, err := wire.PeekSize(rest)
		if err != nil || size > len(rest) {
			return messages.ErrorCode_CORRUPT_MESSAGE, fmt.Sprintf("batch %d: truncated or bad length", i)
		}
		if size > int(maxMessageBytes) {
			return messages.ErrorCode_MESSAGE_TOO_LARGE, fmt.Sprintf("batch %d of %d bytes exceeds max.message.bytes %d", i, size, maxMessageBytes)
		}
		h, err := wire.Validate(rest[:size])
		if err != nil {
			return messages.ErrorCode_CORRUPT_MESSAGE, fmt.Sprintf("batch %d: %v", i, err)
		}
		if h.Compression() > wire.CompressionZstd {
			return messages.ErrorCode_UNSUPPORTED_COMPRESSION_TYPE, fmt.Sprintf("batch %d: %s", i, h.Compression())
		}
		rest = rest[size:]
	}
	return messages.ErrorCode_NONE, ""
}

// appendError classifies an append failure.
func (a *partitionActor) appendError(ctx actor.Context, err error) (messages.ErrorCode, string) {
	var corrupt *disk.CorruptionError
	switch {
	case errors.Is(err, wire.ErrBadCRC), errors.Is(err, wire.ErrShort), errors.Is(err, wire.ErrBadLength),
		errors.Is(err, wire.ErrBadMagic), errors.Is(err, wire.ErrRecordCount), errors.Is(err, wire.ErrCompression),
		errors.Is(err, wire.ErrLeaderEpoch):
		return messages.ErrorCode_CORRUPT_MESSAGE, err.Error()
	case errors.As(err, &corrupt):
		a.logger.WithError(err).Error("log corrupt")
		return messages.ErrorCode_KAFKA_STORAGE_ERROR, err.Error()
	}
	a.logger.WithError(err).Error("append failed")
	a.dirFailed(ctx, err)
	return messages.ErrorCode_KAFKA_STORAGE_ERROR, err.Error()
}

// dirFailed reports an I/O error to the log-dir actor, which takes the whole
// directory offline (and this partition with it) as Kafka does.
func (a *partitionActor) dirFailed(ctx actor.Context, err error) {
	if a.cfg.LogDirActor != nil {
		ctx.Send(a.cfg.LogDirActor, &disks.LogDirFailed{TP: a.tp, Err: err})
	}
}

// onOffline closes the log of a partition whose directory failed: from now
// on every request is answered with KAFKA_STORAGE_ERROR.
func (a *partitionActor) onOffline(ctx actor.Context, m *disks.GoOffline) {
	if a.log == nil {
		return
	}
	a.abortMove(ctx, messages.ErrorCode_KAFKA_STORAGE_ERROR, m.Reason)
	a.finishFlush(ctx)
	a.logErr = errors.New(m.Reason)
	log := a.log
	a.log = nil
	for _, p := range a.parkedProduces {
		p.response.Error, p.response.ErrorMessage = a.unavailable()
		ctx.Send(p.sender, p.response)
	}
	a.parkedProduces = nil
	for _, p := range a.parkedFetches {
		p.cancel()
		a.answerParkedFetch(ctx, p)
	}
	a.parkedFetches = nil
	_ = log.Close()
	a.logger.WithField("reason", m.Reason).Error("partition offline")
}

// startFlush starts the group commit of the acks=all batches parked so
// far: one fsync covers them all. It runs beside the partition, which
// appends the next group meanwhile; flushDone brings the result back.
func (a *partitionActor) startFlush(ctx actor.Context) {
	if a.flushing != nil || len(a.parkedProduces) == 0 {
		return
	}
	if a.log == nil {
		a.answerParkedProduces(ctx, -1, nil)
		return
	}
	job, err := a.log.StartFlush()
	if err != nil {
		a.flushFailed(ctx, err)
		return
	}
	run := &flushRun{job: job, done: make(chan error, 1)}
	a.flushing = run
	root, self := ctx.ActorSystem().Root, ctx.Self()
	go func() {
		run.done <- job.Run()
		root.Send(self, &flushDone{run: run})
	}()
}

// finishFlush waits for the flush in flight, if any, and answers the
// parked produces it covers. Everything that closes or removes segment
// files calls it first: the log refuses to while a flush is in flight.
func (a *partitionActor) finishFlush(ctx actor.Context) {
	run := a.flushing
	if run == nil {
		return
	}
	a.flushing = nil
	err := <-run.done
	if a.log != nil {
		err = a.log.FinishFlush(run.job, err)
	}
	if err != nil {
		a.flushFailed(ctx, err)
		return
	}
	a.answerParkedProduces(ctx, run.job.UpTo(), nil)
}

// flushParkedNow makes every parked produce durable with a flush on the
// partition's own goroutine and answers them; for a log about to close.
func (a *partitionActor) flushParkedNow(ctx actor.Context) {
	a.finishFlush(ctx)
	if len(a.parkedProduces) == 0 {
		return
	}
	if a.log == nil {
		a.answerParkedProduces(ctx, -1, nil)
		return
	}
	if err := a.log.Sync(); err != nil {
		a.flushFailed(ctx, err)
		return
	}
	a.answerParkedProduces(ctx, a.log.EndOffset(), nil)
}

// flushFailed answers every parked produce with a storage error and takes
// the directory offline, as Kafka does on a failed fsync.
func (a *partitionActor) flushFailed(ctx actor.Context, err error) {
	a.logger.WithError(err).Error("fsync failed")
	a.answerParkedProduces(ctx, -1, err)
	a.dirFailed(ctx, err)
}

// answerParkedProduces answers the parked produces whose batches end at or
// below upTo, all of them when upTo is -1: with err when it is not nil,
// with the partition's state when the log is gone, and as they are
// otherwise.
func (a *partitionActor) answerParkedProduces(ctx actor.Context, upTo int64, err error) {
	kept := a.parkedProduces[:0]
	for _, p := range a.parkedProduces {
		if upTo >= 0 && p.end > upTo {
			kept = append(kept, p)
			continue
		}
		switch {
		case err != nil:
			p.response.Error, p.response.ErrorMessage = messages.ErrorCode_KAFKA_STORAGE_ERROR, err.Error()
		case a.log == nil:
			p.response.Error, p.response.ErrorMessage = a.unavailable()
		}
		ctx.Send(p.sender, p.response)
	}
	clear(a.parkedProduces[len(kept):])
	a.parkedProduces = kept
}

func (a *partitionActor) onFetch(ctx actor.Context, m *messages.FetchRequest) {
	resp, frame, ok := a.fetch(m)
	if !ok && m.MaxWaitMs > 0 && len(resp.Records) < int(m.MinBytes) {
		a.nextFetchID++
		p := &parkedFetch{id: a.nextFetchID, sender: ctx.Sender(), request: m, available: len(resp.Records)}
		p.cancel = a.timers.SendOnce(time.Duration(m.MaxWaitMs)*time.Millisecond, ctx.Self(), &fetchExpired{id: p.id})
		a.parkedFetches = append(a.parkedFetches, p)
		return
	}
	a.answerFetch(ctx, ctx.Sender(), m, resp, frame)
}

// answerFetch sends resp, the first answer to m, and when m asks for chunks
// reads and sends the rest of max_bytes one chunk at a time: each chunk is
// on its way to the consumer while the next is read. frame is what resp's
// records were read into (see fetchAt).
func (a *partitionActor) answerFetch(ctx actor.Context, to *actor.PID, m *messages.FetchRequest, resp *messages.FetchResponse, frame []byte) {
	if to == nil {
		ctx.Respond(resp) // to the dead letters, as any answer to nobody
		return
	}
	left := int(m.MaxBytes) - len(resp.Records)
	for m.ChunkBytes > 0 && m.ChunkBytes < m.MaxBytes && resp.Error == messages.ErrorCode_NONE && len(resp.Records) > 0 && left > 0 {
		next, ok := nextOffset(resp.Records)
		if !ok || next >= a.log.EndOffset() {
			break
		}
		resp.More = true
		ctx.Send(to, remote.FetchMessage(ctx.ActorSystem(), to, resp, frame))
		resp, frame, _ = a.fetchAt(m, next, min(int(m.ChunkBytes), left))
		if len(resp.Records) > left {
			// Only the first batch of a fetch may go over max_bytes: this
			// one waits for the next fetch, which starts at resp.Offset.
			resp.Records, frame = nil, nil
		}
		left -= len(resp.Records)
	}
	resp.More = false
	ctx.Send(to, remote.FetchMessage(ctx.ActorSystem(), to, resp, frame))
}

// answerParkedFetch answers p with what the log holds now.
func (a *partitionActor) answerParkedFetch(ctx actor.Context, p *parkedFetch) {
	resp, frame, _ := a.fetch(p.request)
	a.answerFetch(ctx, p.sender, p.request, resp, frame)
}

// nextOffset is the offset after the last whole batch in records.
func nextOffset(records []byte) (int64, bool) {
	var it wire.BatchIterator
	it.SkipCRC = true // read back from the log, which checked its structure
	it.Reset(records)
	next, ok := int64(0), false
	for it.Next() {
		next, ok = it.Header().NextOffset(), true
	}
	return next, ok && it.Err() == nil
}

// fetch reads for m. ok is false when the answer may be parked: no error,
// just not enough bytes yet.
func (a *partitionActor) fetch(m *messages.FetchRequest) (*messages.FetchResponse, []byte, bool) {
	maxBytes := int(m.MaxBytes)
	if m.ChunkBytes > 0 && m.ChunkBytes < m.MaxBytes {
		maxBytes = int(m.ChunkBytes)
	}
	return a.fetchAt(m, m.Offset, maxBytes)
}

// fetchAt is fetch from offset, up to maxBytes. The records are read into a
// frame: a buffer of the transport's pool holding
// remote.FetchRecordsReserve bytes of room and then the records, which
// sendFetch turns into the response's wire form in place. frame is nil
// when there are no records.
func (a *partitionActor) fetchAt(m *messages.FetchRequest, offset int64, maxBytes int) (*messages.FetchResponse, []byte, bool) {
	resp := &messages.FetchResponse{
		Topic:         m.Topic,
		Partition:     m.Partition,
		CorrelationId: m.CorrelationId,
		Offset:        offset,
	}
	if a.log == nil {
		resp.Error, resp.ErrorMessage = a.unavailable()
		return resp, nil, true
	}
	resp.HighWatermark = a.log.EndOffset()
	resp.LogStartOffset = a.log.StartOffset()
	if maxBytes == 0 {
		maxBytes = defaultFetchMaxBytes
	}
	if maxBytes < 0 || m.ChunkBytes < 0 {
		resp.Error, resp.ErrorMessage = messages.ErrorCode_INVALID_FETCH_SIZE, fmt.Sprintf("max_bytes %d, chunk_bytes %d", m.MaxBytes, m.ChunkBytes)
		return resp, nil, true
	}
	if offset == resp.HighWatermark {
		return resp, nil, false
	}
	// The response owns the frame, since it may cross to another node or
	// stay with a client: it goes back to the pool only from a stream that
	// has written it. Read looks one header past maxBytes, and grows the
	// frame past maxFramePool when the data does.
	buf := a.cfg.Transport.Frame(remote.FetchRecordsReserve + min(maxBytes, maxFramePool) + wire.HeaderSize)
	frame, err := a.log.Read(offset, maxBytes, (*buf)[:remote.FetchRecordsReserve])
	switch {
	case errors.Is(err, disk.ErrOffsetOutOfRange):
		a.cfg.Transport.PutFrame(buf)
		resp.Error = messages.ErrorCode_OFFSET_OUT_OF_RANGE
		resp.ErrorMessage = fmt.Sprintf("offset %d outside [%d, %d]", offset, resp.LogStartOffset, resp.HighWatermark)
		return resp, nil, true
	case err != nil:
		a.cfg.Transport.PutFrame(buf)
		resp.Error, resp.ErrorMessage = messages.ErrorCode_KAFKA_STORAGE_ERROR, err.Error()
		a.logger.WithError(err).Error("read failed")
		return resp, nil, true
	case len(frame) == remote.FetchRecordsReserve:
		a.cfg.Transport.PutFrame(buf)
		return resp, nil, false
	case len(frame)-remote.FetchRecordsReserve < remote.InlineData:
		// Too few bytes to travel as a buffer of their own: the stream
		// would copy them and drop the frame, so they are copied now and
		// the frame goes back, as a tailing consumer's fetches are.
		resp.Records = bytes.Clone(frame[remote.FetchRecordsReserve:])
		a.cfg.Transport.PutFrame(buf)
		return resp, nil, false
	}
	resp.Records = frame[remote.FetchRecordsReserve:]
	return resp, frame, false
}

// wakeFetches answers parked fetches that now have enough bytes.
func (a *partitionActor) wakeFetches(ctx actor.Context, appendedBytes int) {
	kept := a.parkedFetches[:0]
	for _, p := range a.parkedFetches {
		p.available += appendedBytes
		if p.available < int(p.request.MinBytes) {
			kept = append(kept, p)
			continue
		}
		p.cancel()
		a.answerParkedFetch(ctx, p)
	}
	clear(a.parkedFetches[len(kept):])
	a.parkedFetches = kept
}

func (a *partitionActor) onFetchExpired(ctx actor.Context, m *fetchExpired) {
	for i, p := range a.parkedFetches {
		if p.id != m.id {
			continue
		}
		a.parkedFetches = append(a.parkedFetches[:i], a.parkedFetches[i+1:]...)
		a.answerParkedFetch(ctx, p)
		return
	}
}

func (a *partitionActor) onListOffsets(ctx actor.Context, m *messages.ListOffsetsRequest) {
	resp := &messages.ListOffsetsResponse{Offset: -1, Timestamp: -1}
	defer ctx.Respond(resp)
	if a.log == nil {
		resp.Error, resp.ErrorMessage = a.unavailable()
		return
	}
	switch m.Timestamp {
	case -2:
		resp.Offset = a.log.StartOffset()
	case -1:
		resp.Offset = a.log.EndOffset()
	default:
		offset, ts, err := a.log.OffsetForTimestamp(m.Timestamp)
		switch {
		case errors.Is(err, disk.ErrNotFound):
			// No record at or after the timestamp: -1, as Kafka answers.
		case err != nil:
			resp.Error, resp.ErrorMessage = messages.ErrorCode_KAFKA_STORAGE_ERROR, err.Error()
		default:
			resp.Offset, resp.Timestamp = offset, ts
		}
	}
}

// onDeleteRecords raises the log start offset (Kafka's DeleteRecords):
// offset -1 means the high watermark; an offset past it is refused and
// changes nothing.
func (a *partitionActor) onDeleteRecords(ctx actor.Context, m *messages.DeleteRecordsRequest) {
	resp := &messages.DeleteRecordsResponse{LowWatermark: -1}
	defer ctx.Respond(resp)
	if a.log == nil {
		resp.Error, resp.ErrorMessage = a.unavailable()
		return
	}
	offset := m.Offset
	if offset == -1 {
		offset = a.log.EndOffset()
	}
	if offset < 0 || offset > a.log.EndOffset() {
		resp.Error = messages.ErrorCode_OFFSET_OUT_OF_RANGE
		resp.ErrorMessage = fmt.Sprintf("delete before %d: outside [0, %d]", m.Offset, a.log.EndOffset())
		resp.LowWatermark = a.log.StartOffset()
		return
	}
	a.finishFlush(ctx)
	if a.log == nil {
		resp.Error, resp.ErrorMessage = a.unavailable()
		return
	}
	if err := a.log.DeleteBefore(offset); err != nil {
		a.logger.WithError(err).Error("delete records failed")
		resp.Error, resp.ErrorMessage = messages.ErrorCode_KAFKA_STORAGE_ERROR, err.Error()
		a.dirFailed(ctx, err)
		return
	}
	resp.LowWatermark = a.log.StartOffset()
	a.report(ctx, false)
}

func (a *partitionActor) status() *messages.PartitionStatusResponse {
	resp := &messages.PartitionStatusResponse{Topic: a.cfg.Topic, Partition: a.cfg.Partition, LogDir: a.cfg.LogDir}
	if a.log == nil {
		resp.Error, resp.ErrorMessage = a.unavailable()
		return resp
	}
	resp.LogStartOffset = a.log.StartOffset()
	resp.LogEndOffset = a.log.EndOffset()
	resp.HighWatermark = a.log.EndOffset()
	resp.SizeBytes = a.log.Size()
	resp.Segments = int32(len(a.log.Segments()))
	resp.RecoveryPoint = a.log.RecoveryPoint()
	if a.move != nil {
		resp.MovingTo = a.move.toDir
		resp.MoveCopiedBytes = a.move.copied
	}
	return resp
}

func (a *partitionActor) onTick(ctx actor.Context) {
	if a.log == nil {
		return
	}
	if err := a.log.MaybeRoll(); err != nil {
		a.logger.WithError(err).Error("roll failed")
	}
	a.finishFlush(ctx)
	if a.log == nil {
		return
	}
	deleted, err := a.log.ApplyRetention()
	if err != nil {
		a.logger.WithError(err).Error("retention failed")
	}
	if deleted > 0 {
		a.logger.WithFields(logrus.Fields{"segments": deleted, "start_offset": a.log.StartOffset()}).Info("retention deleted segments")
	}
	a.report(ctx, false)
}

// report tells the log-dir actor the partition's size and recovery point.
func (a *partitionActor) report(ctx actor.Context, closed bool) {
	if a.cfg.LogDirActor == nil || a.log == nil {
		return
	}
	a.reportedBytes = a.appendedBytes
	ctx.Send(a.cfg.LogDirActor, &disks.PartitionReport{
		TP:             a.tp,
		PID:            ctx.Self(),
		SizeBytes:      a.log.Size(),
		RecoveryPoint:  a.log.RecoveryPoint(),
		LogStartOffset: a.log.StartOffset(),
		AppendedBytes:  a.appendedBytes,
		RetentionBytes: a.cfg.Config.Log.RetentionBytes,
		RetentionMs:    topic.RetentionMillis(a.cfg.Config.Log.RetentionMs),
		Closed:         closed,
	})
}

func (a *partitionActor) onDelete(ctx actor.Context) {
	a.deleted = true
	a.abortMove(ctx, messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "partition deleted")
	if a.log == nil {
		return
	}
	a.finishFlush(ctx)
	a.answerParked(ctx)
	for _, p := range a.parkedProduces {
		p.response.Error, p.response.ErrorMessage = messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "partition deleted"
		ctx.Send(p.sender, p.response)
	}
	a.parkedProduces = nil
	if err := a.log.Delete(); err != nil {
		a.logger.WithError(err).Error("deleting partition log failed")
	}
	a.log = nil
	if a.cfg.LogDirActor != nil {
		ctx.Send(a.cfg.LogDirActor, &disks.PartitionReport{TP: a.tp, Deleted: true})
	}
	a.logger.Info("partition deleted")
}

func (a *partitionActor) onStopping(ctx actor.Context) {
	if a.stopTick != nil {
		a.stopTick()
	}
	a.closeLog(ctx)
}

// closeLog answers what is parked, closes the log cleanly (it syncs) and
// sends the final report with the recovery point for the checkpoint.
func (a *partitionActor) closeLog(ctx actor.Context) {
	a.abortMove(ctx, messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, "partition stopped during the move")
	if a.log == nil {
		return
	}
	a.flushParkedNow(ctx)
	a.answerParked(ctx)
	if err := a.log.Close(); err != nil {
		a.logger.WithError(err).Error("closing partition log failed")
		a.log = nil
		return
	}
	a.report(ctx, true)
	a.log = nil
}

// answerParked answers every parked fetch with what is there now.
func (a *partitionActor) answerParked(ctx actor.Context) {
	for _, p := range a.parkedFetches {
		p.cancel()
		a.answerParkedFetch(ctx, p)
	}
	a.parkedFetches = nil
}
