package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// WorkerDispatcher runs actors' mailboxes on goroutines that it keeps for
// a while once idle, where protoactor's default dispatcher starts a new
// goroutine each time a mailbox that was empty gets a message. A new
// goroutine starts on a small stack, and an actor whose handler goes deep
// grows it, copying it, at each of those messages: a partition's append
// goes down to the write(2) of its segment, and with many partitions each
// gets a few records at a time, so that with the default dispatcher a
// quarter of a node's CPU went to growing stacks. A kept goroutine has
// grown its stack already.
//
// Schedule hands a mailbox to an idle goroutine when one is waiting, and
// otherwise starts one, so that a mailbox never waits for another's: there
// are as many goroutines as mailboxes running at once, as with the default
// dispatcher. A goroutine idle for IdleTimeout ends. Safe for concurrent
// use.
type WorkerDispatcher struct {
	throughput int
	idle       time.Duration
	work       chan func()
}

var _ actor.Dispatcher = (*WorkerDispatcher)(nil)

// NewWorkerDispatcher returns a dispatcher whose mailboxes process up to
// throughput messages before yielding the processor (protoactor's default
// is 300), and whose goroutines end after idle without work.
func NewWorkerDispatcher(throughput int, idle time.Duration) *WorkerDispatcher {
	return &WorkerDispatcher{throughput: throughput, idle: idle, work: make(chan func())}
}

// Schedule runs fn, a mailbox's processing, on an idle goroutine or a new
// one.
func (d *WorkerDispatcher) Schedule(fn func()) {
	select {
	case d.work <- fn:
	default:
		go d.worker(fn)
	}
}

// Throughput is the messages a mailbox processes before yielding.
func (d *WorkerDispatcher) Throughput() int { return d.throughput }

// worker runs fn, then what Schedule hands it, until it has been idle for
// d.idle. A mailbox recovers its actor's panics, so fn returns.
func (d *WorkerDispatcher) worker(fn func()) {
	timer := time.NewTimer(d.idle)
	defer timer.Stop()
	for {
		fn()
		timer.Reset(d.idle)
		select {
		case fn = <-d.work:
		case <-timer.C:
			return
		}
	}
}
