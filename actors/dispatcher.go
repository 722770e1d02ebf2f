package actors

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// WorkerDispatcher runs actors' mailboxes on a bounded pool of goroutines,
// as Kafka runs its appends on num.io.threads request handler threads,
// where protoactor's default dispatcher starts a goroutine for each
// mailbox that gets a message while empty.
//
// A node of many partitions appends a few records at a time to each, and
// a request that names thousands of them schedules thousands of mailboxes
// at once. With a goroutine each, a node at 10,000 partitions ran 7,000
// goroutines: each started on a small stack that its append, which goes
// down to the write(2) of a segment, grew by copying, and each stack was
// scanned and shrunk again at every garbage collection. A quarter of the
// node's CPU went to growing stacks, and more to switching between them. A
// pool's goroutines keep their grown stacks and run one mailbox after
// another.
//
// At most workers mailboxes run at once; others wait, in the order they
// were scheduled, for a goroutine to be free. So a mailbox must never wait
// for another mailbox of the same dispatcher: its handler may block on its
// own I/O (a write, a read, an fsync it runs), never on another actor of
// the pool. A goroutine idle for the idle duration ends. Safe for
// concurrent use.
type WorkerDispatcher struct {
	throughput int
	workers    int
	idle       time.Duration

	mu      sync.Mutex
	queue   []func() // scheduled and not yet running, oldest at head
	head    int
	running int // goroutines of the pool
	waiting int // goroutines waiting for work; each wake takes one
	wake    chan struct{}
}

var _ actor.Dispatcher = (*WorkerDispatcher)(nil)

// DispatchedBy is the props option of an actor whose mailbox d runs, none
// for nil: protoactor's default dispatcher, which starts a goroutine each
// time the mailbox gets a message while empty.
func DispatchedBy(d actor.Dispatcher) []actor.PropsOption {
	if d == nil {
		return nil
	}
	return []actor.PropsOption{actor.WithDispatcher(d)}
}

// NewWorkerDispatcher returns a dispatcher whose mailboxes process up to
// throughput messages before yielding (protoactor's default is 300), that
// runs at most workers mailboxes at once, and whose goroutines end after
// idle without work.
func NewWorkerDispatcher(throughput, workers int, idle time.Duration) *WorkerDispatcher {
	workers = max(workers, 1)
	return &WorkerDispatcher{throughput: throughput, workers: workers, idle: idle, wake: make(chan struct{}, workers)}
}

// Schedule queues fn, a mailbox's processing, and wakes or starts a
// goroutine for it unless all of the pool's are busy. It never blocks.
func (d *WorkerDispatcher) Schedule(fn func()) {
	d.mu.Lock()
	d.queue = append(d.queue, fn)
	switch {
	case d.waiting > 0:
		// Sent under the lock, so that a goroutine whose wait times
		// out finds the wake meant for it (see worker). The channel
		// holds a wake for every goroutine of the pool: never full.
		d.waiting--
		d.wake <- struct{}{}
	case d.running < d.workers:
		d.running++
		go d.worker()
	}
	d.mu.Unlock()
}

// Throughput is the messages a mailbox processes before yielding.
func (d *WorkerDispatcher) Throughput() int { return d.throughput }

// worker runs queued mailboxes until it has waited d.idle for one. A
// mailbox recovers its actor's panics, so each returns.
func (d *WorkerDispatcher) worker() {
	timer := time.NewTimer(d.idle)
	defer timer.Stop()
	d.mu.Lock()
	for {
		if fn, ok := d.pop(); ok {
			d.mu.Unlock()
			fn()
			d.mu.Lock()
			continue
		}
		d.waiting++
		d.mu.Unlock()
		timer.Reset(d.idle)
		select {
		case <-d.wake:
			d.mu.Lock()
		case <-timer.C:
			d.mu.Lock()
			select {
			case <-d.wake: // woken as the wait ended: the wake is ours
			default:
				d.waiting--
				d.running--
				d.mu.Unlock()
				return
			}
		}
	}
}

// pop takes the oldest queued mailbox. Called with d.mu held.
func (d *WorkerDispatcher) pop() (func(), bool) {
	if d.head == len(d.queue) {
		return nil, false
	}
	fn := d.queue[d.head]
	d.queue[d.head] = nil
	d.head++
	if d.head == len(d.queue) {
		// Empty: start again at the front of the same array.
		d.queue, d.head = d.queue[:0], 0
	} else if d.head >= 1024 && d.head*2 >= len(d.queue) {
		// Mostly consumed: move what is left to the front.
		n := copy(d.queue, d.queue[d.head:])
		clear(d.queue[n:])
		d.queue, d.head = d.queue[:n], 0
	}
	return fn, true
}
