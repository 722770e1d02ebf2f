package actors

import (
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
)

// A mailbox that blocks does not hold back another: each runs on a
// goroutine of its own while it runs, as with protoactor's default
// dispatcher.
func TestWorkerDispatcherDoesNotQueueBehindABusyMailbox(t *testing.T) {
	d := NewWorkerDispatcher(300, time.Minute)
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
	d := NewWorkerDispatcher(300, time.Millisecond)
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
