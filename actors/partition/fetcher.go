package partition

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/sirupsen/logrus"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/remote"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
)

const (
	// replicaFetchWait is a follower's max_wait_ms: how long the leader
	// holds a fetch that finds nothing new.
	replicaFetchWait = 500 * time.Millisecond
	// replicaFetchTimeout is how long a follower waits for the answer to
	// a fetch or an epoch query before it sends another: delivery between
	// nodes is at most once, and a lost request must cost far less than
	// the lag time that takes a follower out of the ISR.
	replicaFetchTimeout = replicaFetchWait + 1500*time.Millisecond
	// replicaFetchMaxBytes and replicaPartitionMaxBytes bound one fetch's
	// answer and each partition's part of it.
	replicaFetchMaxBytes     = 8 << 20
	replicaPartitionMaxBytes = 1 << 20
	// replicaRetryBackoff is how long a partition whose fetch failed waits
	// before it is fetched again.
	replicaRetryBackoff = 200 * time.Millisecond
	// fetcherTickInterval is how often a fetcher looks for lost answers and
	// partitions whose backoff ended.
	fetcherTickInterval = 100 * time.Millisecond
)

// fetcherConfig is what a replica fetcher needs.
type fetcherConfig struct {
	// NodeID is the follower's node, Leader and Address the leader's.
	NodeID  int32
	Leader  int32
	Address string
	// Metrics take the time of each fetch; nil records none.
	Metrics *Metrics
	// Throttle is the most bytes a second the fetcher fetches for its
	// throttled partitions together, 0 unlimited (see
	// PartitionManagerConfig.ReplicaThrottle).
	Throttle int64
	// Transport lets go of the buffers the answers' records were received
	// in (see remote.Transport.ReleaseRecords): the fetcher of the records
	// it hands no partition, each partition of its own.
	Transport *remote.Transport
	// Dispatcher runs the fetcher's mailbox (see
	// PartitionManagerConfig.Dispatcher).
	Dispatcher actor.Dispatcher
	Logger     *logrus.Entry
}

// fetchPhase is where a followed partition stands.
type fetchPhase int

const (
	// phaseTruncate: the leader is to be asked the end of the partition's
	// latest epoch.
	phaseTruncate fetchPhase = iota
	// phaseTruncating: asked, or the partition truncating.
	phaseTruncating
	// phaseFetch: fetched in every fetch from its log end.
	phaseFetch
	// phaseAppending: the records of the last fetch are being appended.
	phaseAppending
)

// followed is a fetcher's state of one partition it fetches for.
type followed struct {
	pid         *actor.PID
	epoch       int32
	phase       fetchPhase
	latestEpoch int32
	offset      int64
	// highWatermark is the leader's, as last passed on.
	highWatermark int64
	retryAt       time.Time
	// throttled is set while the partition catches up as a replica a
	// reassignment adds: its fetches are paced by the fetcher's throttle.
	throttled bool
}

// fetchThrottle paces the fetches of a fetcher's throttled partitions so
// that what they bring averages at most rate bytes a second: after an
// answer brings n bytes, none is fetched again until n/rate seconds later
// than the last such time, or than now if that has passed, so idle time
// gives no burst. Each fetch asks at most a tenth of a second's worth, as
// a throttled move copies. Owned by the fetcher.
type fetchThrottle struct {
	rate int64 // bytes a second, 0 unlimited
	due  time.Time
}

// ready reports whether throttled partitions may be fetched at now.
func (t *fetchThrottle) ready(now time.Time) bool { return t.rate <= 0 || !now.Before(t.due) }

// maxBytes is what one fetch may ask of a throttled partition.
func (t *fetchThrottle) maxBytes() int32 {
	if t.rate <= 0 {
		return replicaPartitionMaxBytes
	}
	return int32(min(int64(replicaPartitionMaxBytes), max(t.rate/10, minThrottledChunkBytes)))
}

// took counts n bytes a throttled partition's fetch brought at now.
func (t *fetchThrottle) took(n int, now time.Time) {
	if t.rate <= 0 || n == 0 {
		return
	}
	if t.due.Before(now) {
		t.due = now
	}
	t.due = t.due.Add(time.Duration(float64(n) / float64(t.rate) * float64(time.Second)))
}

// replicaFetcher fetches, for every partition its node follows from one
// leader node, in one ReplicaFetchRequest at a time, as Kafka's replica
// fetcher thread does; a partition new to it first asks the leader where
// its log agrees with the leader's (OffsetForLeaderEpoch) and truncates
// there. It appends nothing itself: each partition's actor appends its
// records and says where its log now ends. A fetch to a node that is gone
// may block this actor for the seconds protoactor takes to give up on the
// address, which delays only the partitions that follow that node. The
// partitions that catch up as replicas a reassignment adds are fetched
// under the node's throttle (fetchThrottle). Not shared: all access is
// through its mailbox.
type replicaFetcher struct {
	cfg    fetcherConfig
	leader *actor.PID
	// stream carries the fetches to the leader and brings their answers,
	// nil without a transport: the fetches then go as actor messages.
	stream   *remote.ReplicaStream
	parts    map[disk.TopicPartition]*followed
	throttle fetchThrottle
	timers   *scheduler.TimerScheduler
	stop     scheduler.CancelFunc
	logger   *logrus.Entry

	nextCorr   uint64
	fetchCorr  uint64 // of the fetch in flight, 0 when none
	fetchSent  time.Time
	epochCorr  uint64 // of the epoch query in flight, 0 when none
	epochSent  time.Time
	appending  int // partitions appending the last fetch's records
	lastFailed time.Time
	// throttleWake is when the wake scheduled for throttled partitions held
	// back is due, zero when none is.
	throttleWake time.Time
}

type fetcherTick struct{}

// throttleWoken kicks the fetcher once its throttle lets the partitions it
// held back be fetched.
type throttleWoken struct{}

func newFetcherProps(cfg fetcherConfig) *actor.Props {
	logger := cfg.Logger.WithFields(logrus.Fields{"actor": "fetcher", "leader": cfg.Leader})
	return actors.Props(func() actor.Actor {
		return &replicaFetcher{
			cfg:      cfg,
			leader:   actor.NewPID(cfg.Address, actors.PartitionManagerName),
			parts:    map[disk.TopicPartition]*followed{},
			throttle: fetchThrottle{rate: cfg.Throttle},
			logger:   logger,
		}
	}, logger, actors.DispatchedBy(cfg.Dispatcher)...)
}

func (f *replicaFetcher) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		f.timers = scheduler.NewTimerScheduler(ctx)
		f.stop = f.timers.SendRepeatedly(fetcherTickInterval, fetcherTickInterval, ctx.Self(), &fetcherTick{})
		if f.cfg.Transport != nil {
			f.stream = f.cfg.Transport.ReplicaStream(ctx.ActorSystem(), f.leader, ctx.Self(), f.logger)
		}
	case *actor.Stopping:
		if f.stop != nil {
			f.stop()
		}
		if f.stream != nil {
			f.stream.Close()
		}
	case *follow:
		f.drop(m.tp)
		f.parts[m.tp] = &followed{
			pid: m.pid, epoch: m.epoch, latestEpoch: m.latestEpoch, offset: m.logEnd, phase: startPhase(m.latestEpoch),
			highWatermark: -1, throttled: m.throttled,
		}
		f.kick(ctx)
	case *unfollow:
		f.drop(m.tp)
	case *throttleFollow:
		if p, ok := f.parts[m.tp]; ok {
			p.throttled = m.throttled
			f.kick(ctx)
		}
	case *fetcherTick:
		f.onTick(ctx)
	case *throttleWoken:
		f.throttleWake = time.Time{}
		f.kick(ctx)
	case *messages.OffsetForLeaderEpochResponse:
		f.onEpochs(ctx, m)
	case *truncated:
		f.onTruncated(ctx, m)
	case *messages.ReplicaFetchResponse:
		f.onFetched(ctx, m)
	case *appended:
		f.onAppended(ctx, m)
	}
}

// drop stops fetching for tp.
func (f *replicaFetcher) drop(tp disk.TopicPartition) {
	if p, ok := f.parts[tp]; ok && p.phase == phaseAppending {
		f.appending--
	}
	delete(f.parts, tp)
}

// startPhase is where a partition newly followed starts: a log with a
// leader epoch truncates first.
func startPhase(latestEpoch int32) fetchPhase {
	if latestEpoch >= 0 {
		return phaseTruncate
	}
	return phaseFetch
}

// kick sends the epoch query and the fetch that may go now.
func (f *replicaFetcher) kick(ctx actor.Context) {
	now := time.Now()
	if f.epochCorr == 0 {
		req := &messages.OffsetForLeaderEpochRequest{ReplicaId: f.cfg.NodeID}
		for tp, p := range f.parts {
			if p.phase == phaseTruncate && !now.Before(p.retryAt) {
				req.Partitions = append(req.Partitions, &messages.EpochQuery{Topic: tp.Topic, Partition: tp.Partition, CurrentLeaderEpoch: p.epoch, LeaderEpoch: p.latestEpoch})
				p.phase = phaseTruncating
			}
		}
		if len(req.Partitions) > 0 {
			f.nextCorr++
			f.epochCorr, f.epochSent = f.nextCorr, now
			req.CorrelationId = f.epochCorr
			ctx.Request(f.leader, req)
		}
	}
	if f.fetchCorr != 0 || f.appending > 0 {
		return
	}
	req := &messages.ReplicaFetchRequest{ReplicaId: f.cfg.NodeID, MaxWaitMs: int32(replicaFetchWait / time.Millisecond), MaxBytes: replicaFetchMaxBytes}
	throttledReady := f.throttle.ready(now)
	for tp, p := range f.parts {
		if p.phase != phaseFetch || now.Before(p.retryAt) {
			continue
		}
		if p.throttled && !throttledReady {
			f.wakeForThrottle(ctx, now)
			continue
		}
		maxBytes := int32(replicaPartitionMaxBytes)
		if p.throttled {
			maxBytes = f.throttle.maxBytes()
		}
		req.Partitions = append(req.Partitions, &messages.ReplicaFetchPartition{
			Topic: tp.Topic, Partition: tp.Partition, CurrentLeaderEpoch: p.epoch, FetchOffset: p.offset, MaxBytes: maxBytes,
		})
	}
	if len(req.Partitions) == 0 {
		return
	}
	f.nextCorr++
	f.fetchCorr, f.fetchSent = f.nextCorr, now
	req.CorrelationId = f.fetchCorr
	if f.stream != nil {
		f.stream.Fetch(req)
		return
	}
	ctx.Request(f.leader, req)
}

// wakeForThrottle schedules a kick for when the throttle lets its
// partitions be fetched again, unless one is scheduled: they wait for no
// tick.
func (f *replicaFetcher) wakeForThrottle(ctx actor.Context, now time.Time) {
	if !f.throttleWake.IsZero() {
		return
	}
	f.throttleWake = f.throttle.due
	f.timers.SendOnce(f.throttle.due.Sub(now), ctx.Self(), &throttleWoken{})
}

// onTick gives up on answers that are late, taken for lost, and sends what
// a backoff held back.
func (f *replicaFetcher) onTick(ctx actor.Context) {
	now := time.Now()
	if f.fetchCorr != 0 && now.Sub(f.fetchSent) > replicaFetchTimeout {
		f.failed("fetch", fmt.Errorf("no answer in %s", replicaFetchTimeout))
		f.fetchCorr = 0
	}
	if f.epochCorr != 0 && now.Sub(f.epochSent) > replicaFetchTimeout {
		f.failed("leader epoch query", fmt.Errorf("no answer in %s", replicaFetchTimeout))
		f.epochCorr = 0
		for _, p := range f.parts {
			if p.phase == phaseTruncating {
				p.phase = phaseTruncate
			}
		}
	}
	f.kick(ctx)
}

// failed logs a failure of the fetcher's requests, at most every few
// seconds.
func (f *replicaFetcher) failed(what string, err error) {
	if now := time.Now(); now.Sub(f.lastFailed) > 5*time.Second {
		f.lastFailed = now
		f.logger.WithError(err).WithField("address", f.cfg.Address).Warn("replica " + what + " failed; retrying")
	}
}

// onEpochs hands each partition the leader's answer, for it to truncate.
func (f *replicaFetcher) onEpochs(ctx actor.Context, resp *messages.OffsetForLeaderEpochResponse) {
	if resp.GetCorrelationId() != f.epochCorr {
		return
	}
	f.epochCorr = 0
	for _, end := range resp.GetPartitions() {
		tp := disk.TopicPartition{Topic: end.GetTopic(), Partition: end.GetPartition()}
		p, ok := f.parts[tp]
		if !ok || p.phase != phaseTruncating {
			continue
		}
		ctx.Request(p.pid, &truncateTo{epoch: p.epoch, end: end})
	}
	f.kick(ctx)
}

// onTruncated moves a partition that truncated on to fetching, or asks
// again.
func (f *replicaFetcher) onTruncated(ctx actor.Context, m *truncated) {
	p, ok := f.parts[m.tp]
	if !ok || p.epoch != m.epoch || p.phase != phaseTruncating {
		return
	}
	switch {
	case m.retry:
		p.phase, p.retryAt = phaseTruncate, time.Now().Add(replicaRetryBackoff)
	case m.done:
		p.phase, p.offset = phaseFetch, m.logEnd
	default:
		p.phase, p.latestEpoch = phaseTruncate, m.latestEpoch
	}
	f.kick(ctx)
}

// onFetched hands each partition its part of the answer.
func (f *replicaFetcher) onFetched(ctx actor.Context, resp *messages.ReplicaFetchResponse) {
	switch corr := resp.GetCorrelationId(); {
	case corr == f.fetchCorr:
		f.fetchCorr = 0
		f.cfg.Metrics.replicaFetched(time.Since(f.fetchSent))
	case corr == 0 || corr > f.nextCorr:
		for _, r := range resp.GetPartitions() {
			f.cfg.Transport.ReleaseRecords(r.GetRecords())
		}
		return // not an answer to this fetcher
	}
	// A late answer, to a fetch given up on, is taken too: each partition
	// of it counts only where it starts at that partition's log end. A
	// leader slowed down past the timeout would otherwise never be heard.
	now := time.Now()
	for _, r := range resp.GetPartitions() {
		if !f.handOn(ctx, r, now) {
			f.cfg.Transport.ReleaseRecords(r.GetRecords())
		}
	}
	f.kick(ctx)
}

// handOn hands r to its partition to append, if it is due, and reports
// whether it did: the partition then lets go of r's records.
func (f *replicaFetcher) handOn(ctx actor.Context, r *messages.ReplicaFetchedPartition, now time.Time) bool {
	tp := disk.TopicPartition{Topic: r.GetTopic(), Partition: r.GetPartition()}
	p, ok := f.parts[tp]
	if !ok || p.phase != phaseFetch || r.GetFetchOffset() != p.offset {
		return false
	}
	switch r.GetError() {
	case messages.ErrorCode_NONE, messages.ErrorCode_OFFSET_OUT_OF_RANGE:
	default:
		// The leader does not lead it in our epoch (yet, or any more):
		// the metadata will say who does.
		p.retryAt = now.Add(replicaRetryBackoff)
		return false
	}
	if p.throttled {
		f.throttle.took(len(r.GetRecords()), now)
	}
	if len(r.GetRecords()) == 0 && r.GetError() == messages.ErrorCode_NONE && r.GetHighWatermark() == p.highWatermark {
		return false
	}
	p.highWatermark = r.GetHighWatermark()
	p.phase = phaseAppending
	f.appending++
	ctx.Request(p.pid, &replicaRecords{epoch: p.epoch, resp: r})
	return true
}

// onAppended takes a partition's new log end, for the next fetch.
func (f *replicaFetcher) onAppended(ctx actor.Context, m *appended) {
	p, ok := f.parts[m.tp]
	if !ok || p.phase != phaseAppending || p.epoch != m.epoch {
		return
	}
	f.appending--
	switch {
	case m.stale:
		p.phase = phaseFetch
	case m.truncate:
		p.phase, p.latestEpoch = phaseTruncate, m.latestEpoch
	default:
		p.phase, p.offset = phaseFetch, m.logEnd
		if m.failed {
			p.retryAt = time.Now().Add(replicaRetryBackoff)
		}
	}
	f.kick(ctx)
}
