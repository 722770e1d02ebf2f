package actors

import (
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
)

// A mailbox that blocks does not hold back another while the pool has a
// goroutine free.
func TestWorkerDispatcherDoesNotQueueBehindABusyMailbox(t *testing.T) {
	d := NewWorkerDispatcher(300, 2, time.Minute)
	release := make(chan struct{})
	blocked := make(chan struct{})
	d.Schedule(func() {
		close(blocked)
		<-release
	})
	<-blocked
	ran := make(chan struct{})
	d.Schedule(func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("the second mailbox waited for the first")
	}
	close(release)
}

// Every mailbox scheduled is run once, from many goroutines at once, and
// actors on the dispatcher answer requests.
func TestWorkerDispatcherRunsEverything(t *testing.T) {
	d := NewWorkerDispatcher(300, 4, time.Millisecond)
	require.Equal(t, 300, d.Throughput())
	const n = 2000
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[int]int{}
	for i := range n {
		wg.Add(1)
		go d.Schedule(func() {
			mu.Lock()
			counts[i]++
			mu.Unlock()
			wg.Done()
		})
	}
	wg.Wait()
	require.Len(t, counts, n)
	for i, c := range counts {
		require.Equal(t, 1, c, "mailbox %d", i)
	}

	system := actor.NewActorSystem()
	t.Cleanup(system.Shutdown)
	echo := system.Root.Spawn(Props(func() actor.Actor {
		return actor.ReceiveFunc(func(ctx actor.Context) {
			if s, ok := ctx.Message().(string); ok {
				ctx.Respond(s + "!")
			}
		})
	}, DiscardLogger(), actor.WithDispatcher(d)))
	for i := range 100 {
		res, err := system.Root.RequestFuture(echo, "hi", 10*time.Second).Result()
		require.NoError(t, err, "request %d", i)
		require.Equal(t, "hi!", res)
	}
}

// No more than workers mailboxes run at once; the others wait and run as
// goroutines come free. Idle goroutines end, and the pool starts new ones
// for later work.
func TestWorkerDispatcherBoundsRunningMailboxes(t *testing.T) {
	const workers = 3
	d := NewWorkerDispatcher(300, workers, 20*time.Millisecond)
	release := make(chan struct{})
	started := make(chan int, 100)
	for i := range 10 {
		d.Schedule(func() {
			started <- i
			<-release
		})
	}
	for range workers {
		<-started
	}
	select {
	case i := <-started:
		t.Fatalf("mailbox %d ran while %d others held every goroutine", i, workers)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	for range 10 - workers {
		<-started
	}

	require.Eventually(t, func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.running == 0 && d.waiting == 0
	}, 10*time.Second, 5*time.Millisecond, "idle goroutines end")
	ran := make(chan struct{})
	d.Schedule(func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("a mailbox scheduled after the pool went idle did not run")
	}
}

// Mailboxes waiting for a goroutine run in the order they were scheduled.
func TestWorkerDispatcherRunsQueuedMailboxesInOrder(t *testing.T) {
	d := NewWorkerDispatcher(300, 1, time.Minute)
	release := make(chan struct{})
	d.Schedule(func() { <-release })
	var order []int
	done := make(chan struct{})
	for i := range 2000 {
		d.Schedule(func() {
			order = append(order, i) // one goroutine runs them all
			if i == 1999 {
				close(done)
			}
		})
	}
	close(release)
	<-done
	for i, got := range order {
		require.Equal(t, i, got)
	}
	require.Len(t, order, 2000)
}
