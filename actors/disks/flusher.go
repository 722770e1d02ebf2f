package disks

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/disk"
)

// DefaultFlushParallelism is the default of FlusherConfig.Parallelism: how
// many fsyncs one pass of a flusher runs at once. Measured on a virtual disk
// (ext4 on virtio), a pass over 5,000 files with appended bytes took 57 us
// a file with 32 fdatasyncs at once, 90 us with 8 and 76-104 us with 128 or
// one goroutine a file: the file system commits its journal for the
// fdatasyncs waiting together, and more at once only queue.
const DefaultFlushParallelism = 32

// flusherName is the name of a log-dir actor's flusher among its children.
const flusherName = "flusher"

// FlusherOf is the PID of the flusher of the log-dir actor logDir, which
// spawns it as its child; nil for nil.
func FlusherOf(logDir *actor.PID) *actor.PID {
	if logDir == nil {
		return nil
	}
	return actor.NewPID(logDir.Address, logDir.Id+"/"+flusherName)
}

// Flush is a partition's disk.FlushJob (its group commit's fsync) on its
// way to be run: by the flusher of its log dir, in one pass with the
// flushes of the dir's other partitions, or by the partition itself when it
// stops or its flusher is gone. Whoever claims it first runs it, once. Run
// sends the result to ReplyTo as a Flushed. Safe for concurrent use.
type Flush struct {
	Job     *disk.FlushJob
	ReplyTo *actor.PID
	claimed atomic.Bool
	done    chan struct{}
	err     error // the job's result, once done is closed
}

// NewFlush returns the Flush of job, whose result goes to replyTo.
func NewFlush(job *disk.FlushJob, replyTo *actor.PID) *Flush {
	return &Flush{Job: job, ReplyTo: replyTo, done: make(chan struct{})}
}

// Flushed tells a partition that its Flush has run: its log is durable
// below Flush.Job.UpTo() unless Err is set. Its log still has to finish
// the job (disk.Log.FinishFlush), which fails it on an error.
type Flushed struct {
	Flush *Flush
	Err   error
}

// Run runs the job on the calling goroutine and sends its Flushed through
// sender, unless it was claimed already; it reports whether it ran it.
func (f *Flush) Run(sender actor.SenderContext) bool {
	if !f.claim() {
		return false
	}
	f.complete(sender, f.Job.Run())
	return true
}

// claim claims f to run it, unless someone did.
func (f *Flush) claim() bool { return f.claimed.CompareAndSwap(false, true) }

// complete ends f, which the caller claimed and ran, with the job's
// result, and sends it as a Flushed through sender.
func (f *Flush) complete(sender actor.SenderContext, err error) {
	f.finish(err)
	sender.Send(f.ReplyTo, &Flushed{Flush: f, Err: f.err})
}

// Wait runs the job on the calling goroutine if no one has claimed it, or
// waits for whoever did, and returns its result; no Flushed is sent when
// Wait runs it. For a partition that stops, which gets no later message to
// learn the result from: the wait is that of one fsync.
func (f *Flush) Wait() error {
	if f.claim() {
		f.finish(f.Job.Run())
	}
	<-f.done
	return f.err
}

// Claimed reports whether someone has claimed f to run it.
func (f *Flush) Claimed() bool { return f.claimed.Load() }

func (f *Flush) finish(err error) {
	f.err = err
	close(f.done)
}

// DefaultFileSystemSyncFlushes is the default of
// FlusherConfig.FileSystemSyncFlushes: a pass of at least this many
// flushes syncs its log dir's whole file system at once. Measured on a
// virtual disk (ext4 on virtio), with a few hundred bytes appended to each
// file, 16 files took 1.2-1.8 ms with fdatasyncs against 0.26-0.28 ms with
// syncfs, and 10,000 files 280-350 ms against 40-47 ms (see
// disk.RunFlushJobs); a pass of one partition keeps its own fdatasync,
// which writes back nothing else of the file system.
const DefaultFileSystemSyncFlushes = 16

// FlusherConfig is what a flusher needs.
type FlusherConfig struct {
	// Parallelism bounds the fsyncs a pass runs at once. Default
	// DefaultFlushParallelism.
	Parallelism int
	// FileSystemSyncFlushes is the fewest flushes for which a pass syncs
	// the whole file system at once (disk.RunFlushJobs) instead of each
	// file: the log dir's file systems are its own, or what else they
	// hold is little. Default DefaultFileSystemSyncFlushes; negative:
	// never.
	FileSystemSyncFlushes int
	// Dispatcher runs the flusher's mailbox; nil: protoactor's default
	// (see actors.DispatchedBy).
	Dispatcher actor.Dispatcher
	Logger     *logrus.Entry
}

// FlusherStatusRequest asks a flusher what it is doing; it answers with a
// FlusherStatusResponse.
type FlusherStatusRequest struct{}

// FlusherStatusResponse answers FlusherStatusRequest.
type FlusherStatusResponse struct {
	// Waiting is the flushes waiting for the next pass; Passing is set
	// while a pass runs.
	Waiting int
	Passing bool
	// Passes and Flushes count the passes started and the flushes they
	// held since the flusher started.
	Passes, Flushes uint64
}

// passDone tells the flusher that its pass has ended.
type passDone struct{}

// flusherActor runs the group commits of one log dir's partitions in
// passes: a pass takes every Flush waiting when it starts and runs their
// fsyncs on at most Parallelism goroutines of its own, off the mailbox.
// Each fsync's result goes to its partition as soon as it returns; the
// flushes that arrive meanwhile wait for the next pass, which starts when
// this one ends. A partition sends one Flush at a time, so with many
// partitions written to at once, each pass syncs each of their files once
// for everything appended before it started, and the file system commits
// its journal for many of them together: acks=all on many partitions costs
// a pass, not an fsync a partition a request. Not shared: all access is
// through its mailbox.
type flusherActor struct {
	cfg     FlusherConfig
	waiting []*Flush
	passing bool
	passes  uint64
	flushes uint64
	logger  *logrus.Entry
}

// NewFlusherProps returns the props of a flusher.
func NewFlusherProps(cfg FlusherConfig) *actor.Props {
	if cfg.Parallelism <= 0 {
		cfg.Parallelism = DefaultFlushParallelism
	}
	if cfg.FileSystemSyncFlushes == 0 {
		cfg.FileSystemSyncFlushes = DefaultFileSystemSyncFlushes
	}
	if cfg.Logger == nil {
		cfg.Logger = actors.DiscardLogger()
	}
	logger := cfg.Logger.WithField("actor", "flusher")
	return actors.Props(func() actor.Actor {
		return &flusherActor{cfg: cfg, logger: logger}
	}, logger, actors.DispatchedBy(cfg.Dispatcher)...)
}

func (a *flusherActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *Flush:
		a.waiting = append(a.waiting, m)
		if !a.passing {
			a.startPass(ctx)
		}
	case *passDone:
		a.passing = false
		a.startPass(ctx)
	case *FlusherStatusRequest:
		ctx.Respond(&FlusherStatusResponse{Waiting: len(a.waiting), Passing: a.passing, Passes: a.passes, Flushes: a.flushes})
	case *actor.Stopping, *actor.Restarting:
		a.release(ctx)
	case *actor.Started, *actor.Stopped, *actor.Restart:
	case actor.AutoReceiveMessage, actor.SystemMessage:
	default:
		a.logger.WithField("type", fmt.Sprintf("%T", m)).Warn("unhandled message")
	}
}

// startPass starts a pass over the flushes waiting, if any.
func (a *flusherActor) startPass(ctx actor.Context) {
	pass, workers := gatherPass(a.waiting, a.cfg.Parallelism)
	clear(a.waiting)
	a.waiting = a.waiting[:0]
	if len(pass) == 0 {
		return
	}
	a.passing = true
	a.passes++
	a.flushes += uint64(len(pass))
	root, self, together := ctx.ActorSystem().Root, ctx.Self(), a.together(len(pass))
	go func() {
		if together {
			runPassTogether(root, pass)
		} else {
			runPass(root, pass, workers)
		}
		root.Send(self, &passDone{})
	}()
}

// release hands the flushes waiting to a pass that tells no one of its end:
// the flusher stops, and the partitions still wait for their results.
func (a *flusherActor) release(ctx actor.Context) {
	pass, workers := gatherPass(a.waiting, a.cfg.Parallelism)
	a.waiting = nil
	if len(pass) == 0 {
		return
	}
	root := ctx.ActorSystem().Root
	go runPass(root, pass, workers)
}

// together reports whether a pass of n flushes syncs the file system at
// once.
func (a *flusherActor) together(n int) bool {
	return a.cfg.FileSystemSyncFlushes > 0 && n >= a.cfg.FileSystemSyncFlushes
}

// gatherPass is the pass that starts over the flushes waiting: those not
// claimed yet (a partition that stops runs its own; see Flush.Wait), in
// the order they came, and the goroutines it runs them on, at most
// parallelism.
func gatherPass(waiting []*Flush, parallelism int) (pass []*Flush, workers int) {
	for _, f := range waiting {
		if !f.Claimed() {
			pass = append(pass, f)
		}
	}
	return pass, min(len(pass), max(parallelism, 1))
}

// runPass runs the flushes of pass on workers goroutines and returns once
// they have all run; each result goes to its partition through sender as
// soon as its fsync returns.
func runPass(sender actor.SenderContext, pass []*Flush, workers int) {
	var next atomic.Int64
	work := func() {
		for {
			i := next.Add(1) - 1
			if i >= int64(len(pass)) {
				return
			}
			pass[i].Run(sender)
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}

// runPassTogether runs the flushes of pass that no one has claimed with
// one sync of their file system (disk.RunFlushJobs) and sends each its
// result through sender.
func runPassTogether(sender actor.SenderContext, pass []*Flush) {
	claimed := make([]*Flush, 0, len(pass))
	jobs := make([]*disk.FlushJob, 0, len(pass))
	for _, f := range pass {
		if f.claim() {
			claimed = append(claimed, f)
			jobs = append(jobs, f.Job)
		}
	}
	for i, err := range disk.RunFlushJobs(jobs) {
		claimed[i].complete(sender, err)
	}
}
