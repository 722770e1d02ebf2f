package bench

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/node"
)

// Bounds of the steps around the measured phases.
const (
	setupTimeout       = 30 * time.Second
	flushTimeout       = 30 * time.Second
	interruptedFlush   = 5 * time.Second
	pollSlice          = 100 * time.Millisecond
	sampleInterval     = 10 * time.Millisecond
	seriesEvery        = 10 // samples: one series point per 100 ms
	progressRecordUnit = "records"
)

// Run runs the benchmark cfg describes and returns what it measured. When
// ctx ends early (Ctrl-C), Run stops producing, gives what is in flight a
// few seconds, skips what has not started, and returns the partial report
// with Interrupted set. Run is safe to call from one goroutine at a time per
// embedded data directory; it starts its own goroutines and stops them all
// before it returns.
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	rep = &Report{Config: cfg}
	if cfg.Baseline {
		b, err := MeasureBaseline(ctx, cfg.Dir, baselineBytes(cfg), groupCommitWindow(cfg), cfg.BaselineDuration)
		if err != nil {
			return nil, err
		}
		rep.Baseline = b
	}
	if ctx.Err() != nil {
		rep.Interrupted = true
		return rep, nil
	}
	e, err := startEnv(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := e.close(cfg.Keep); cerr != nil && err == nil {
			err = cerr
		}
		if cfg.Keep {
			rep.DataDir = e.dataDir
		}
	}()
	r := newRun(cfg, e)
	if err := r.execute(ctx); err != nil {
		return nil, err
	}
	r.report(rep)
	if ctx.Err() != nil {
		rep.Interrupted = true
		for i := range rep.Results {
			rep.Results[i].Interrupted = true
		}
	}
	return rep, nil
}

// env is what a run talks to: an embedded node or remote ones, a client, a
// topic.
type env struct {
	node         *node.Node
	dataDir      string
	client       *client.Client
	topic        string
	createdTopic bool
	remote       bool
	logger       *logrus.Entry
}

// startEnv starts the embedded node (unless cfg names brokers), a client in
// its own actor system, and the topic.
func startEnv(ctx context.Context, cfg Config) (_ *env, err error) {
	e := &env{topic: cfg.Topic, remote: len(cfg.Brokers) > 0, logger: logrus.NewEntry(cfg.Logger).WithField("actor", "bench")}
	defer func() {
		if err != nil {
			_ = e.close(false)
		}
	}()
	brokers := cfg.Brokers
	if !e.remote {
		if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		e.dataDir, err = os.MkdirTemp(cfg.Dir, "depot-bench-")
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		e.node, err = node.Start(node.Config{DataDir: e.dataDir, Listen: "127.0.0.1:0", HTTP: "", Logger: cfg.Logger})
		if err != nil {
			return nil, fmt.Errorf("bench: start embedded node: %w", err)
		}
		brokers = []string{e.node.Address()}
	}
	e.client, err = client.New(client.Brokers(brokers...), client.Logger(logrus.NewEntry(cfg.Logger)))
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	_, err = e.client.CreateTopicReplicated(cctx, cfg.Topic, int32(cfg.Partitions), int32(cfg.ReplicationFactor), nil)
	switch {
	case err == nil:
		e.createdTopic = true
	case errors.Is(err, client.ErrTopicAlreadyExists):
		md, err := e.client.Metadata(cctx, cfg.Topic)
		if err != nil {
			return nil, fmt.Errorf("bench: topic %s: %w", cfg.Topic, err)
		}
		if len(md.Topics) != 1 || len(md.Topics[0].Partitions) != cfg.Partitions {
			return nil, fmt.Errorf("%w: topic %s exists with a partition count other than %d", ErrConfig, cfg.Topic, cfg.Partitions)
		}
	default:
		return nil, fmt.Errorf("bench: create topic %s: %w", cfg.Topic, err)
	}
	return e, nil
}

// close deletes the topic it created on remote brokers (unless keep), stops
// the client and the embedded node, and removes its data (unless keep).
func (e *env) close(keep bool) error {
	var errs []error
	if e.client != nil {
		if e.remote && e.createdTopic && !keep {
			ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
			if err := e.client.DeleteTopic(ctx, e.topic); err != nil {
				errs = append(errs, fmt.Errorf("bench: delete topic %s: %w", e.topic, err))
			}
			cancel()
		}
		e.client.Close()
	}
	if e.node != nil {
		if err := e.node.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if e.dataDir != "" && !keep {
		if err := os.RemoveAll(e.dataDir); err != nil {
			errs = append(errs, fmt.Errorf("bench: %w", err))
		}
	}
	return errors.Join(errs...)
}

// run is one execution's state. Counters are updated by producer promises
// and consumer goroutines and read by the sampler.
type run struct {
	cfg     Config
	env     *env
	payload []byte
	keys    [][]byte
	items   sync.Pool // *item

	producers []*client.Producer

	start        time.Time
	warmEnd      time.Time // records sent before it are not counted
	startOffsets []int64
	endOffsets   atomic.Pointer[[]int64] // set once production is over

	// The edges of what the rows measure, each with the process's CPU
	// time then; warmEndCPU is taken at the first record sent after
	// warmEnd.
	produceStart, warmEndCPU, produceEnd cpuMark
	consumeStart, consumeEnd             cpuMark
	warmEndOnce                          sync.Once
	// warmEndSent and produceEndSent are what the producers had sent at
	// warmEndCPU and produceEnd.
	warmEndSent, produceEndSent client.ProducerStats

	produced      atomic.Int64
	warmedUp      atomic.Int64 // acknowledged records sent during the warm-up
	produceErrors atomic.Int64
	tail, catchUp reading
	peakBuffered  atomic.Int64

	ack, e2e, poll *Latencies

	errMu    sync.Mutex
	firstErr error

	series   []Sample
	progress *progress
}

func newRun(cfg Config, e *env) *run {
	r := &run{cfg: cfg, env: e, ack: NewLatencies(), e2e: NewLatencies(), poll: NewLatencies()}
	r.payload = make([]byte, cfg.RecordSize)
	_, _ = rand.Read(r.payload)
	for i := range cfg.Keys {
		r.keys = append(r.keys, fmt.Appendf(nil, "key-%d", i))
	}
	if cfg.Progress != nil {
		r.progress = &progress{w: cfg.Progress}
	}
	return r
}

// reading is what a group of consumers has read: records, the unix ns of
// the last, and Poll errors.
type reading struct {
	records atomic.Int64
	last    atomic.Int64
	errors  atomic.Int64
}

// item is a record on its way, with its promise made once and reused.
type item struct {
	rec     client.Record
	sent    time.Time
	warm    bool // sent during the warm-up: not counted
	promise func(*client.Record, error)
}

// sent sums what the producers have sent.
func (r *run) sent() client.ProducerStats {
	var total client.ProducerStats
	for _, p := range r.producers {
		st := p.Stats()
		total.Requests += st.Requests
		total.Batches += st.Batches
	}
	return total
}

func (r *run) getItem() *item {
	if it, ok := r.items.Get().(*item); ok {
		return it
	}
	it := &item{}
	it.rec.Value = append([]byte(nil), r.payload...)
	it.promise = func(_ *client.Record, err error) { r.onAck(it, err) }
	return it
}

// onAck is each record's promise, called by the producer's sender.
func (r *run) onAck(it *item, err error) {
	switch {
	case err == nil && it.warm:
		r.warmedUp.Add(1)
	case err == nil:
		r.ack.Record(time.Since(it.sent))
		r.produced.Add(1)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		// Not sent: the run ended while Produce waited for buffer space.
	default:
		r.produceErrors.Add(1)
		r.noteErr(err)
	}
	r.items.Put(it)
}

func (r *run) noteErr(err error) {
	r.errMu.Lock()
	if r.firstErr == nil {
		r.firstErr = err
		r.env.logger.WithError(err).Warn("first error of the run")
	}
	r.errMu.Unlock()
}

// execute runs the phases: production (with tailing consumers for both),
// then the catch-up read (for consume and both).
func (r *run) execute(ctx context.Context) error {
	cfg := r.cfg
	var err error
	r.startOffsets, err = r.listEnds(ctx)
	if err != nil {
		return err
	}
	defer func() {
		for _, p := range r.producers {
			_ = p.Close()
		}
	}()
	for range cfg.Producers {
		p, err := r.env.client.NewProducer(r.producerOpts()...)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		r.producers = append(r.producers, p)
	}
	r.start = time.Now()
	stopSampler := r.startSampler()
	defer stopSampler()

	// Tailing consumers start before the first record is produced.
	var tailWG sync.WaitGroup
	tailCtx, tailCancel := context.WithCancel(ctx)
	defer tailCancel()
	if cfg.Workload == WorkloadBoth {
		if err := r.startConsumers(tailCtx, &tailWG, r.tailTarget, r.e2eObserver(), &r.tail); err != nil {
			return err
		}
	}

	r.progress.phase("produce", cfg.Records, cfg.Duration, &r.produced)
	r.produceStart = markCPU()
	r.warmEnd = r.produceStart.at.Add(cfg.Warmup)
	r.produceAll(ctx)
	r.produceEnd, r.produceEndSent = markCPU(), r.sent()

	ends, err := r.listEnds(context.WithoutCancel(ctx))
	if err == nil && cfg.Acks == 0 {
		ends, err = r.awaitEnds(context.WithoutCancel(ctx), ends)
	}
	if err != nil {
		return err
	}
	r.endOffsets.Store(&ends)
	total := r.recordsUpTo(ends)
	if cfg.Workload == WorkloadBoth {
		r.progress.phase("tail", total, cfg.DrainTimeout, &r.tail.records)
		drain := time.AfterFunc(cfg.DrainTimeout, tailCancel)
		tailWG.Wait()
		drain.Stop()
		r.checkRead(ctx, &r.tail, total, fmt.Sprintf("the tailing consumers stopped at the drain timeout (%s)", cfg.DrainTimeout))
	}
	if cfg.Workload != WorkloadProduce && ctx.Err() == nil && total > 0 {
		r.progress.phase("consume", total, cfg.Duration, &r.catchUp.records)
		cctx, cancel := context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
		var wg sync.WaitGroup
		r.consumeStart = markCPU()
		target := func() []int64 { return ends }
		if err := r.startConsumers(cctx, &wg, target, r.pollObserver(), &r.catchUp); err != nil {
			return err
		}
		wg.Wait()
		r.consumeEnd = markCPU()
		r.checkRead(ctx, &r.catchUp, total, fmt.Sprintf("the catch-up read stopped at --duration (%s)", cfg.Duration))
	}
	r.progress.finish()
	return nil
}

// checkRead counts a read that stopped short of the records produced as an
// error of its row, unless the run was interrupted: its records/s would
// otherwise stand for a read that never finished.
func (r *run) checkRead(ctx context.Context, into *reading, total int64, why string) {
	if got := into.records.Load(); got < total && ctx.Err() == nil {
		into.errors.Add(1)
		r.noteErr(fmt.Errorf("bench: %s with %d of %d records read", why, got, total))
	}
}

func (r *run) producerOpts() []client.ProducerOpt {
	cfg := r.cfg
	opts := []client.ProducerOpt{
		client.Acks(cfg.Acks),
		client.Compression(cfg.Compression),
	}
	if cfg.MaxBufferedBytes > 0 {
		opts = append(opts, client.MaxBufferedBytes(cfg.MaxBufferedBytes))
	}
	if cfg.Linger > 0 {
		opts = append(opts, client.Linger(cfg.Linger))
	}
	if cfg.BatchBytes > 0 {
		opts = append(opts, client.BatchBytes(cfg.BatchBytes))
	}
	return opts
}

// listEnds returns each partition's log end offset.
func (r *run) listEnds(ctx context.Context) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	ends := make([]int64, r.cfg.Partitions)
	for p := range ends {
		off, err := r.env.client.ListOffset(ctx, r.cfg.Topic, int32(p), client.LatestOffset)
		if err != nil {
			return nil, fmt.Errorf("bench: end offset of %s-%d: %w", r.cfg.Topic, p, err)
		}
		ends[p] = off
	}
	return ends, nil
}

// awaitEnds waits, with acks=0, for the records produced to reach the
// partitions before the reads take their end offsets as targets: a
// producer that waits for no answer is done with a record once it has
// handed it to the stream, and megabytes may still be on their way. It
// polls the end offsets until they account for every record produced, or
// stop growing for endsSettle (records a producer without answers may
// lose), or DrainTimeout passes.
func (r *run) awaitEnds(ctx context.Context, ends []int64) ([]int64, error) {
	want := r.produced.Load() + r.warmedUp.Load()
	deadline := time.Now().Add(r.cfg.DrainTimeout)
	settled := time.Now()
	for r.recordsUpTo(ends) < want && time.Now().Before(deadline) && time.Since(settled) < endsSettle {
		time.Sleep(endsPoll)
		next, err := r.listEnds(ctx)
		if err != nil {
			return nil, err
		}
		if r.recordsUpTo(next) > r.recordsUpTo(ends) {
			settled = time.Now()
		}
		ends = next
	}
	return ends, nil
}

// recordsUpTo is how many records the topic holds from the run's start
// offsets to ends.
func (r *run) recordsUpTo(ends []int64) int64 {
	n := int64(0)
	for p := range ends {
		n += ends[p] - r.startOffsets[p]
	}
	return n
}

// endsPoll and endsSettle pace awaitEnds.
const (
	endsPoll   = 20 * time.Millisecond
	endsSettle = 500 * time.Millisecond
)

// tailTarget is the tailing consumers' target: nil until production is
// over, then each partition's end offset.
func (r *run) tailTarget() []int64 {
	if p := r.endOffsets.Load(); p != nil {
		return *p
	}
	return nil
}

// produceAll runs the producers until Records are produced (when the run
// has a count bound), Duration has passed or ctx ends, then flushes them.
func (r *run) produceAll(ctx context.Context) {
	cfg := r.cfg
	pctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var wg sync.WaitGroup
	for i, p := range r.producers {
		quota := int64(math.MaxInt64) // ended by pctx
		if cfg.countBound() {
			quota = cfg.Records / int64(cfg.Producers)
			if int64(i) < cfg.Records%int64(cfg.Producers) {
				quota++
			}
		}
		wg.Go(func() { r.produce(pctx, p, i, quota) })
	}
	wg.Wait()
	wait := flushTimeout
	if ctx.Err() != nil {
		wait = interruptedFlush
	}
	fctx, fcancel := context.WithTimeout(context.Background(), wait)
	defer fcancel()
	for _, p := range r.producers {
		if err := p.Flush(fctx); err != nil {
			r.noteErr(fmt.Errorf("bench: flush: %w", err))
		}
	}
}

// produce sends quota records through p, paced by a token bucket when a
// rate is set.
func (r *run) produce(ctx context.Context, p *client.Producer, index int, quota int64) {
	cfg := r.cfg
	var bucket *tokenBucket
	if cfg.Rate > 0 {
		bucket = newTokenBucket(cfg.Rate/float64(cfg.Producers), time.Now())
	}
	var pause *time.Timer
	for i := int64(0); i < quota; i++ {
		if ctx.Err() != nil {
			return
		}
		if bucket != nil {
			if d := bucket.reserve(time.Now()); d >= minPause {
				if pause == nil {
					pause = time.NewTimer(d)
				} else {
					pause.Reset(d)
				}
				select {
				case <-pause.C:
				case <-ctx.Done():
					return
				}
			}
		}
		it := r.getItem()
		it.rec.Topic, it.rec.Partition, it.rec.Offset, it.rec.Headers = cfg.Topic, 0, 0, nil
		it.rec.Key = nil
		if len(r.keys) > 0 {
			it.rec.Key = r.keys[(i*int64(cfg.Producers)+int64(index))%int64(len(r.keys))]
		}
		now := time.Now()
		it.sent, it.rec.Timestamp = now, now
		it.warm = now.Before(r.warmEnd)
		if !it.warm {
			r.warmEndOnce.Do(func() { r.warmEndCPU, r.warmEndSent = markCPU(), r.sent() })
		}
		binary.LittleEndian.PutUint64(it.rec.Value[valueTimePos:], uint64(now.UnixNano()))
		p.Produce(ctx, &it.rec, it.promise)
		if i%peakEvery == 0 || i == quota-1 {
			// Right after a Produce the buffer holds at least that record:
			// a run shorter than the sampler's interval still has a peak.
			r.notePeak(p)
		}
	}
}

// peakEvery is how often, in records, a producer's loop samples its
// buffered bytes besides the sampler's ticks.
const peakEvery = 1024

// notePeak raises peakBuffered to p's buffered bytes.
func (r *run) notePeak(p *client.Producer) {
	b := p.BufferedBytes()
	for {
		peak := r.peakBuffered.Load()
		if b <= peak || r.peakBuffered.CompareAndSwap(peak, b) {
			return
		}
	}
}

// observer sees each batch of records a consumer's Poll returned, with the
// time that Poll started waiting.
type observer func(records []*client.Record, waitStart, now time.Time)

// e2eObserver records each record's end-to-end latency from its value's
// send time.
func (r *run) e2eObserver() observer {
	return func(records []*client.Record, _, now time.Time) {
		nowNs := now.UnixNano()
		for _, rec := range records {
			if len(rec.Value) < valueTimeLen {
				continue
			}
			sent := int64(binary.LittleEndian.Uint64(rec.Value[valueTimePos:]))
			if sent < r.warmEnd.UnixNano() {
				continue
			}
			r.e2e.Record(time.Duration(nowNs - sent))
		}
	}
}

// pollObserver records how long each Poll waited for its records.
func (r *run) pollObserver() observer {
	return func(_ []*client.Record, waitStart, now time.Time) {
		r.poll.Record(now.Sub(waitStart))
	}
}

// startConsumers starts Consumers consumers, each reading partitions p with
// p % Consumers == its index from the run's start offsets until target
// (nil while unknown) is reached or ctx ends.
func (r *run) startConsumers(ctx context.Context, wg *sync.WaitGroup, target func() []int64, obs observer, into *reading) error {
	cfg := r.cfg
	for c := range cfg.Consumers {
		var parts []int32
		for p := c; p < cfg.Partitions; p += cfg.Consumers {
			parts = append(parts, int32(p))
		}
		if len(parts) == 0 {
			continue
		}
		cons, err := r.env.client.NewConsumer()
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		for _, p := range parts {
			cons.Assign(cfg.Topic, p, client.AtOffset(r.startOffsets[p]))
		}
		wg.Go(func() {
			defer cons.Close()
			r.consume(ctx, cons, parts, target, obs, into)
		})
	}
	return nil
}

// consume polls cons until every partition in parts has reached target.
func (r *run) consume(ctx context.Context, cons *client.Consumer, parts []int32, target func() []int64, obs observer, into *reading) {
	next := make(map[int32]int64, len(parts))
	for _, p := range parts {
		next[p] = r.startOffsets[p]
	}
	reached := func() bool {
		ends := target()
		if ends == nil {
			return false
		}
		for _, p := range parts {
			if next[p] < ends[p] {
				return false
			}
		}
		return true
	}
	waitStart := time.Now()
	for !reached() && ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, pollSlice)
		records, err := cons.Poll(pctx)
		cancel()
		now := time.Now()
		if len(records) > 0 {
			obs(records, waitStart, now)
			for _, rec := range records {
				if rec.Offset >= next[rec.Partition] {
					next[rec.Partition] = rec.Offset + 1
				}
			}
			into.records.Add(int64(len(records)))
			into.last.Store(now.UnixNano())
			waitStart = now
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			into.errors.Add(1)
			r.noteErr(err)
		}
	}
}

// startSampler samples the producers' buffered bytes every 10 ms and the
// counters every 100 ms until the returned function is called.
func (r *run) startSampler() (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(sampleInterval)
		defer t.Stop()
		for i := 1; ; i++ {
			select {
			case <-done:
				r.takeSample()
				return
			case <-t.C:
			}
			for _, p := range r.producers {
				r.notePeak(p)
			}
			if i%seriesEvery == 0 {
				r.takeSample()
				r.progress.update()
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			<-finished
		})
	}
}

func (r *run) takeSample() {
	r.series = append(r.series, Sample{
		At:       time.Since(r.start),
		Produced: r.produced.Load(),
		Tailed:   r.tail.records.Load(),
		Consumed: r.catchUp.records.Load(),
	})
}

// report fills rep's rows from the run's counters and histograms. Called
// after execute, once every goroutine has stopped.
func (r *run) report(rep *Report) {
	cfg := r.cfg
	rep.Series = r.series
	rep.Ack, rep.EndToEnd = r.ack, r.e2e
	rep.PeakRSSBytes = peakRSS()
	rep.PeakBufferedBytes = r.peakBuffered.Load()
	row := func(workload, latency string, records int64, seconds float64, h *Latencies, errs int64) Result {
		res := Result{
			Workload:     workload,
			Latency:      latency,
			RecordSize:   cfg.RecordSize,
			Records:      records,
			Seconds:      seconds,
			P50Ms:        h.QuantileMs(0.5),
			P99Ms:        h.QuantileMs(0.99),
			P999Ms:       h.QuantileMs(0.999),
			MaxMs:        h.MaxMs(),
			Partitions:   cfg.Partitions,
			Replicas:     cfg.ReplicationFactor,
			Producers:    cfg.Producers,
			Consumers:    cfg.Consumers,
			Acks:         cfg.Acks,
			Compression:  cfg.Compression.String(),
			Keys:         cfg.Keys,
			Rate:         cfg.Rate,
			Errors:       errs,
			PeakRSSBytes: rep.PeakRSSBytes,
		}
		if seconds > 0 {
			res.RecordsPerS = float64(records) / seconds
			res.MBPerS = float64(records) * float64(cfg.RecordSize) / 1e6 / seconds
		}
		return res
	}
	since := func(from time.Time, lastNs int64) float64 {
		if lastNs == 0 {
			return 0
		}
		return time.Unix(0, lastNs).Sub(from).Seconds()
	}
	// Throughput counts from the end of the warm-up (or from the start,
	// when production ended before it).
	measuredFrom, cpuFrom, sentFrom := r.produceStart.at, r.produceStart, client.ProducerStats{}
	if r.warmEnd.Before(r.produceEnd.at) {
		measuredFrom = r.warmEnd
		if r.warmEndCPU.ok {
			cpuFrom, sentFrom = r.warmEndCPU, r.warmEndSent
		}
	}
	produce := row(RowProduce, latencyAck, r.produced.Load(), r.produceEnd.at.Sub(measuredFrom).Seconds(), r.ack, r.produceErrors.Load())
	produce.CPUCores = coresBetween(cpuFrom, r.produceEnd)
	produce.Requests = r.produceEndSent.Requests - sentFrom.Requests
	produce.Batches = r.produceEndSent.Batches - sentFrom.Batches
	produce.WarmupRecords = r.warmedUp.Load()
	produce.PeakBufferedBytes = rep.PeakBufferedBytes
	for _, p := range r.producers {
		produce.BufferBoundBytes = max(produce.BufferBoundBytes, p.BufferBound())
	}
	rep.Results = append(rep.Results, produce)
	if cfg.Workload == WorkloadBoth {
		rep.Results = append(rep.Results, row(RowEndToEnd, latencyE2E, r.tail.records.Load(), since(r.produceStart.at, r.tail.last.Load()), r.e2e, r.tail.errors.Load()))
	}
	if cfg.Workload != WorkloadProduce && !r.consumeStart.at.IsZero() {
		consume := row(RowConsume, latencyPoll, r.catchUp.records.Load(), since(r.consumeStart.at, r.catchUp.last.Load()), r.poll, r.catchUp.errors.Load())
		consume.CPUCores = coresBetween(r.consumeStart, r.consumeEnd)
		rep.Results = append(rep.Results, consume)
	}
	if rep.Baseline != nil {
		for i := range rep.Results {
			rep.Baseline.applyRatios(&rep.Results[i], cfg.Acks)
		}
	}
}
