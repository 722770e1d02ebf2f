package remote

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
)

// Faults are the network faults injected into one transport's outgoing
// remote streams, for tests: while an address is cut, every message this
// transport's actor system sends to it is dropped; while it is delayed,
// every message reaches it that much later, in order, at the pace it was
// sent. A partition between two nodes is a cut on each of them; a cut on
// one alone drops one direction, as a one-way partition does.
//
// Faults act on the messages of protoactor's streams, not on their
// connections: a stream to a cut address still connects, and its connect
// handshake passes, so that a stream opened during a cut serves once it is
// healed; protoactor reports no lost endpoint for a cut. A message dropped
// is lost as one in flight on a broken connection is, with no error to its
// sender.
//
// Each Transport has its own Faults, none at first; with none, a send
// costs one atomic load more. Safe for concurrent use.
type Faults struct {
	// t is the transport whose streams the faults act on.
	t *Transport
	// mu serialises changes of links.
	mu sync.Mutex
	// links are the faults by address, nil when there are none. A map
	// stored is never changed: a change stores a new one.
	links atomic.Pointer[map[string]linkFault]
}

// linkFault is what happens to the messages sent to one address.
type linkFault struct {
	cut   bool
	delay time.Duration
}

// Cut drops every message sent to address from now on, until it is healed.
// It replaces a delay. address is the peer's actor address (host:port), as
// its PIDs name it.
func (f *Faults) Cut(address string) {
	f.set(address, linkFault{cut: true})
}

// Delay has every message sent to address from now on reach it d late,
// until it is healed; a message already waiting keeps the delay it was
// given. It replaces a cut; a d of 0 or less heals.
func (f *Faults) Delay(address string, d time.Duration) {
	f.set(address, linkFault{delay: max(d, 0)})
}

// Heal ends the cut or delay of address. Messages already delayed still
// arrive at their time.
func (f *Faults) Heal(address string) {
	f.set(address, linkFault{})
}

// HealAll ends every cut and delay.
func (f *Faults) HealAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.links.Store(nil)
}

func (f *Faults) set(address string, lf linkFault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	links := map[string]linkFault{}
	if old := f.links.Load(); old != nil {
		for a, l := range *old {
			links[a] = l
		}
	}
	if lf == (linkFault{}) {
		delete(links, address)
	} else {
		links[address] = lf
	}
	if len(links) == 0 {
		f.links.Store(nil)
		return
	}
	f.links.Store(&links)
}

// link is the fault of address, zero for none.
func (f *Faults) link(address string) linkFault {
	links := f.links.Load()
	if links == nil {
		return linkFault{}
	}
	return (*links)[address]
}

// streamInterceptor is the interceptor of the transport's client streams:
// each is one of protoactor's endpoint writers to the address its
// connection was dialled for, and its sends go through f.
func (f *Faults) streamInterceptor(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, err
	}
	return &faultStream{ClientStream: cs, faults: f, address: cc.Target(), stop: make(chan struct{}, 1)}, nil
}

// faultStream is a client stream whose sends to address go through faults.
// Its sends are made by its endpoint writer, one at a time, as gRPC wants
// them; while messages are delayed, a goroutine of the stream's own makes
// them in the writer's stead, in order, and the writer only queues them.
// That goroutine ends once the queue is empty or the stream ends.
type faultStream struct {
	grpc.ClientStream
	faults  *Faults
	address string
	// delivering is set while the goroutine owns the stream's sends.
	delivering atomic.Bool
	// stop wakes the goroutine when the writer closes the stream.
	stop chan struct{}

	mu sync.Mutex // guards what follows
	// queue are the delayed messages, in the order sent.
	queue []delayedMessage
	// closing is set when the writer closed the stream while messages
	// waited; the goroutine closes it in its stead.
	closing bool
	// err is the error of the stream's last send, returned to the writer's
	// next.
	err error
}

// delayedMessage is a message waiting for its time.
type delayedMessage struct {
	m   any
	due time.Time
}

// SendMsg sends m, drops it, or queues it, as the faults of the stream's
// address say.
func (s *faultStream) SendMsg(m any) error {
	lf := s.faults.link(s.address)
	if lf == (linkFault{}) && !s.delivering.Load() {
		return s.ClientStream.SendMsg(m)
	}
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	if lf.cut && s.drop(m) {
		s.mu.Unlock()
		return nil
	}
	if lf.delay == 0 && !s.delivering.Load() {
		s.mu.Unlock()
		return s.ClientStream.SendMsg(m)
	}
	s.queue = append(s.queue, delayedMessage{m: m, due: time.Now().Add(lf.delay)})
	if !s.delivering.Load() {
		s.delivering.Store(true)
		go s.deliver()
	}
	s.mu.Unlock()
	return nil
}

// CloseSend closes the stream at once, or, while messages wait, has the
// goroutine close it in the writer's stead, dropping them.
func (s *faultStream) CloseSend() error {
	if !s.delivering.Load() {
		return s.ClientStream.CloseSend()
	}
	s.mu.Lock()
	if !s.delivering.Load() {
		s.mu.Unlock()
		return s.ClientStream.CloseSend()
	}
	s.closing = true
	s.mu.Unlock()
	select {
	case s.stop <- struct{}{}:
	default:
	}
	return nil
}

// deliver sends the queued messages, each at its time, until none is
// left, the stream fails or is closed. A message whose address is cut by
// then is dropped.
func (s *faultStream) deliver() {
	timer := time.NewTimer(0)
	defer timer.Stop()
	ended := s.Context().Done()
	for {
		s.mu.Lock()
		if len(s.queue) == 0 || s.closing || s.err != nil {
			closing := s.closing
			for _, d := range s.queue {
				s.drop(d.m)
			}
			s.queue = nil
			s.delivering.Store(false)
			s.mu.Unlock()
			if closing {
				_ = s.ClientStream.CloseSend()
			}
			return
		}
		next := s.queue[0]
		s.mu.Unlock()
		if wait := time.Until(next.due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ended:
			case <-s.stop:
				continue
			}
		}
		s.mu.Lock()
		s.queue = s.queue[1:]
		dropped := s.faults.link(s.address).cut && s.drop(next.m)
		s.mu.Unlock()
		if dropped {
			continue
		}
		if err := s.ClientStream.SendMsg(next.m); err != nil {
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
		}
	}
}

// drop drops m, when it is a batch of envelopes, and reports whether it
// did. A message of the stream's own (its connect request) is never
// dropped. The records of the ProduceRequests and the frames of the
// FetchPartitionsResponses among the envelopes, which the transport holds
// for the stream to write (see Transport.OutgoingProduces and
// Transport.FetchesMessage), are let go.
func (s *faultStream) drop(m any) bool {
	rm, ok := m.(*remote.RemoteMessage)
	if !ok || rm.GetMessageBatch() == nil {
		return false
	}
	b := rm.GetMessageBatch()
	for _, e := range b.Envelopes {
		if e.TypeId >= 0 && int(e.TypeId) < len(b.TypeNames) && gatheredType(b.TypeNames[e.TypeId]) {
			s.faults.t.outgoing.take(e.MessageData)
		}
	}
	return true
}
