package remote

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/depot-dev/depot/messages"
)

// A cut drops what one system sends to another: a request times out while
// it lasts, and is answered again once healed, over the same stream. A cut
// set before the stream first connects lets it connect, and the first
// request after the heal is answered.
func TestFaultsCutAndHeal(t *testing.T) {
	systemA, a := newRemoteTestSystem(t)
	systemB, _ := newRemoteTestSystem(t)
	target, received := remoteSink(t, systemB, "sink")
	ask := func(id int64, timeout time.Duration) error {
		_, err := systemA.Root.RequestFuture(target, &messages.ProduceRequest{Topic: "t", CorrelationId: id}, timeout).Result()
		return err
	}
	require.NoError(t, ask(1, 10*time.Second))
	require.Equal(t, int64(1), (<-received).CorrelationId)

	a.Faults().Cut(systemB.Address())
	require.ErrorIs(t, ask(2, 300*time.Millisecond), actor.ErrTimeout)
	// Another address is not cut.
	a.Faults().Cut("127.0.0.1:1")
	a.Faults().Heal(systemB.Address())
	require.NoError(t, ask(3, 10*time.Second))
	require.Equal(t, int64(3), (<-received).CorrelationId, "the request sent during the cut was dropped")
	a.Faults().HealAll()

	systemC, c := newRemoteTestSystem(t)
	c.Faults().Cut(systemB.Address())
	// A PID keeps the process it was first resolved to, here systemA's
	// remote: systemC needs a PID of its own.
	fromC := actor.NewPID(target.Address, target.Id)
	require.ErrorIs(t, func() error {
		_, err := systemC.Root.RequestFuture(fromC, &messages.ProduceRequest{Topic: "t", CorrelationId: 4}, 300*time.Millisecond).Result()
		return err
	}(), actor.ErrTimeout)
	c.Faults().HealAll()
	_, err := systemC.Root.RequestFuture(fromC, &messages.ProduceRequest{Topic: "t", CorrelationId: 5}, 10*time.Second).Result()
	require.NoError(t, err)
	require.Equal(t, int64(5), (<-received).CorrelationId)

	// The records a dropped ProduceRequests held for the stream are let
	// go.
	a.Faults().Cut(systemB.Address())
	msg := a.OutgoingProduces(systemA, target, []*messages.ProduceRequest{{Topic: "t", Records: patterned(64<<10, 1)}})
	_, isToken := msg.(*encodedMessage)
	require.True(t, isToken, "%T", msg)
	systemA.Root.Send(target, msg)
	require.Eventually(t, func() bool { return a.outgoing.pending() == 0 }, 10*time.Second, time.Millisecond)
}

// A delay delays each message by its amount, keeps their order, and does
// not hold back those after it: messages sent one after the other arrive
// one after the other, a delay after they were sent.
func TestFaultsDelay(t *testing.T) {
	systemA, a := newRemoteTestSystem(t)
	systemB, _ := newRemoteTestSystem(t)
	target, received := remoteSink(t, systemB, "sink")
	_, err := systemA.Root.RequestFuture(target, &messages.ProduceRequest{Topic: "t"}, 10*time.Second).Result()
	require.NoError(t, err)
	<-received

	const delay = 300 * time.Millisecond
	a.Faults().Delay(systemB.Address(), delay)
	start := time.Now()
	const n = 20
	for i := range n {
		systemA.Root.Send(target, &messages.ProduceRequest{Topic: "t", CorrelationId: int64(i)})
	}
	for i := range n {
		r := <-received
		require.Equal(t, int64(i), r.CorrelationId)
		require.GreaterOrEqual(t, time.Since(start), delay, "message %d arrived before its delay", i)
	}
	_, err = systemA.Root.RequestFuture(target, &messages.ProduceRequest{Topic: "t", CorrelationId: n}, 10*time.Second).Result()
	require.NoError(t, err)
	<-received

	a.Faults().Heal(systemB.Address())
	_, err = systemA.Root.RequestFuture(target, &messages.ProduceRequest{Topic: "t", CorrelationId: n + 1}, 10*time.Second).Result()
	require.NoError(t, err)
	require.Equal(t, int64(n+1), (<-received).CorrelationId)
}

// recordingStream is a client stream that records what is sent on it, and
// fails the sends once failing is set.
type recordingStream struct {
	grpc.ClientStream
	ctx     context.Context
	mu      sync.Mutex
	sent    []int64
	closed  int
	failing bool
}

func (r *recordingStream) Context() context.Context { return r.ctx }

func (r *recordingStream) SendMsg(m any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failing {
		return context.Canceled
	}
	r.sent = append(r.sent, batchID(m))
	return nil
}

func (r *recordingStream) CloseSend() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed++
	return nil
}

func (r *recordingStream) state() ([]int64, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int64(nil), r.sent...), r.closed
}

// batch is a message batch whose one envelope's target request id is id;
// connect is the stream's connect request.
func batch(id int64) *remote.RemoteMessage {
	return &remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: &remote.MessageBatch{
		TypeNames: []string{"depot.ProduceRequest"},
		Envelopes: []*remote.MessageEnvelope{{TargetRequestId: uint32(id)}},
	}}}
}

var connect = &remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{ConnectRequest: &remote.ConnectRequest{}}}

// batchID is the id batch gave m, -1 for the connect request.
func batchID(m any) int64 {
	b := m.(*remote.RemoteMessage).GetMessageBatch()
	if b == nil {
		return -1
	}
	return int64(b.Envelopes[0].TargetRequestId)
}

func newFaultStream(f *Faults, address string) (*faultStream, *recordingStream) {
	rec := &recordingStream{ctx: context.Background()}
	return &faultStream{ClientStream: rec, faults: f, address: address, stop: make(chan struct{}, 1)}, rec
}

// A fault stream's sends, delayed, cut and healed, from the writer's side:
// delayed messages go in order and the writer is not held back; a cut
// drops batches, the connect request never; a cut set while messages wait
// drops them; a stream closed while messages wait is closed once, by its
// goroutine; a failed send is the writer's next error; and the goroutine
// ends once nothing waits. (It runs under the race detector, which skips
// the tests between two remotes.)
func TestFaultStream(t *testing.T) {
	const addr = "127.0.0.1:9092"
	sent := func(rec *recordingStream, want ...int64) {
		t.Helper()
		require.Eventually(t, func() bool {
			got, _ := rec.state()
			return len(got) == len(want)
		}, 10*time.Second, time.Millisecond)
		got, _ := rec.state()
		require.Equal(t, want, got)
	}
	idle := func(s *faultStream) {
		t.Helper()
		require.Eventually(t, func() bool { return !s.delivering.Load() }, 10*time.Second, time.Millisecond)
	}

	t.Run("none", func(t *testing.T) {
		s, rec := newFaultStream(NewTransport().Faults(), addr)
		require.NoError(t, s.SendMsg(connect))
		require.NoError(t, s.SendMsg(batch(1)))
		require.False(t, s.delivering.Load())
		sent(rec, -1, 1)
		require.NoError(t, s.CloseSend())
		_, closed := rec.state()
		require.Equal(t, 1, closed)
	})
	t.Run("delay", func(t *testing.T) {
		f := NewTransport().Faults()
		s, rec := newFaultStream(f, addr)
		f.Delay(addr, 50*time.Millisecond)
		start := time.Now()
		for i := range int64(10) {
			require.NoError(t, s.SendMsg(batch(i)))
		}
		f.Heal(addr)
		// Sent after the heal, it still goes after those waiting.
		require.NoError(t, s.SendMsg(batch(10)))
		sent(rec, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
		require.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
		idle(s)
		require.NoError(t, s.SendMsg(batch(11)))
		sent(rec, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
	})
	t.Run("cut", func(t *testing.T) {
		f := NewTransport().Faults()
		s, rec := newFaultStream(f, addr)
		f.Cut("127.0.0.1:9093")
		require.NoError(t, s.SendMsg(batch(1)))
		f.Cut(addr)
		require.NoError(t, s.SendMsg(connect))
		require.NoError(t, s.SendMsg(batch(2)))
		f.Heal(addr)
		require.NoError(t, s.SendMsg(batch(3)))
		sent(rec, 1, -1, 3)
		// Cut while they wait: dropped when their time comes.
		f.Delay(addr, 100*time.Millisecond)
		require.NoError(t, s.SendMsg(batch(4)))
		f.Cut(addr)
		require.NoError(t, s.SendMsg(batch(5)))
		idle(s)
		f.HealAll()
		require.NoError(t, s.SendMsg(batch(6)))
		sent(rec, 1, -1, 3, 6)
	})
	t.Run("close while waiting", func(t *testing.T) {
		f := NewTransport().Faults()
		s, rec := newFaultStream(f, addr)
		f.Delay(addr, time.Hour)
		require.NoError(t, s.SendMsg(batch(1)))
		require.NoError(t, s.CloseSend())
		idle(s)
		got, closed := rec.state()
		require.Empty(t, got)
		require.Equal(t, 1, closed)
	})
	t.Run("failed send", func(t *testing.T) {
		f := NewTransport().Faults()
		s, rec := newFaultStream(f, addr)
		rec.failing = true
		f.Delay(addr, time.Millisecond)
		require.NoError(t, s.SendMsg(batch(1)))
		idle(s)
		require.ErrorIs(t, s.SendMsg(batch(2)), context.Canceled)
	})
}
