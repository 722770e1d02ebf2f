package remote

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/messages"
)

// holds reports whether the records starting at first hold a buffer.
func (r *receivedHolds) holds(first *byte) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.m[first]
	return ok
}

// produceSink hands each ProduceRequest it receives, alone or among
// ProduceRequests, to received, unreleased, and answers it.
type produceSink struct {
	received chan *messages.ProduceRequest
}

func (s *produceSink) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.ProduceRequest:
		s.received <- m
		ctx.Respond(&messages.ProduceResponse{Topic: m.Topic, CorrelationId: m.CorrelationId})
	case *messages.ProduceRequests:
		for _, r := range m.Requests {
			s.received <- r
		}
		ctx.Respond(&messages.ProduceResponse{})
	}
}

// remoteSink spawns a produceSink in system and returns its PID as other
// systems address it.
func remoteSink(t *testing.T, system *actor.ActorSystem, name string) (*actor.PID, chan *messages.ProduceRequest) {
	t.Helper()
	sink := &produceSink{received: make(chan *messages.ProduceRequest, 64)}
	pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return sink }), name)
	require.NoError(t, err)
	return actor.NewPID(system.Address(), pid.Id), sink.received
}

// Two actor systems in one process, each with its transport, send large
// produce requests each way: the records each receives alias a buffer of
// its own transport's pool and hold it in its own transport only, release
// there, and the buffer goes back to that pool and not to the other's. A
// token of one transport's producer is not the other's to write.
func TestTransportsShareNothing(t *testing.T) {
	systemA, a := newRemoteTestSystem(t)
	systemB, b := newRemoteTestSystem(t)
	type side struct {
		name   string
		system *actor.ActorSystem
		tr     *Transport
	}
	sides := []side{{"a", systemA, a}, {"b", systemB, b}}
	for i, from := range sides {
		to := sides[1-i]
		t.Run(from.name+" to "+to.name, func(t *testing.T) {
			target, received := remoteSink(t, to.system, "sink-from-"+from.name)
			const n = 4
			var sizes []int
			for j := range n {
				size := 100<<10 + 4093*j
				sizes = append(sizes, size)
				req := &messages.ProduceRequest{Topic: "t", Partition: int32(j), Acks: 1, Records: patterned(size, byte(j)), CorrelationId: int64(j)}
				_, err := from.system.Root.RequestFuture(target, req, 10*time.Second).Result()
				require.NoError(t, err, "request %d", j)
			}
			// Several requests in one message, their records not copied
			// by the sender (a token of its transport).
			bundle := []*messages.ProduceRequest{
				{Topic: "t", Partition: 10, Acks: 1, Records: patterned(64<<10, 10)},
				{Topic: "t", Partition: 11, Acks: 1, Records: patterned(32<<10, 11)},
			}
			msg := from.tr.OutgoingProduces(from.system, target, bundle)
			_, isToken := msg.(*encodedMessage)
			require.True(t, isToken, "%T", msg)
			_, err := from.system.Root.RequestFuture(target, msg, 10*time.Second).Result()
			require.NoError(t, err)
			require.Zero(t, from.tr.outgoing.pending(), "the sender's stream took the records")
			// A small request after them, answered: the stream has read
			// past every large one, and holds none of them any more.
			_, err = from.system.Root.RequestFuture(target, &messages.ProduceRequest{Topic: "t", Records: []byte{1}}, 10*time.Second).Result()
			require.NoError(t, err)

			var reqs []*messages.ProduceRequest
			for range n + len(bundle) + 1 {
				reqs = append(reqs, <-received)
			}
			reqs = reqs[:len(reqs)-1]
			require.Equal(t, n+len(bundle), to.tr.received.size(), "records held in the receiver's transport")
			for j, r := range reqs {
				want := bundle[max(j-n, 0)].Records
				if j < n {
					want = patterned(sizes[j], byte(j))
				}
				require.Equal(t, want, r.Records, "request %d", j)
				require.Equal(t, len(r.Records), cap(r.Records), "request %d copied", j)
				require.True(t, to.tr.received.holds(&r.Records[0]), "request %d holds no buffer of its receiver", j)
				require.False(t, from.tr.received.holds(&r.Records[0]), "request %d holds a buffer of its sender", j)
			}

			for j, r := range reqs {
				first := unsafe.SliceData(r.Records)
				from.tr.Release(r)
				require.True(t, to.tr.received.holds(first), "request %d released through its sender's transport", j)
			}
			// The bundled requests share one buffer; each single request
			// has its own.
			defer emptyTiers(to.tr.buffers, 32<<10)()
			defer emptyTiers(to.tr.buffers, 64<<10)()
			for j, r := range reqs {
				first := unsafe.SliceData(r.Records)
				size := len(r.Records)
				to.tr.Release(r)
				if j < n {
					require.True(t, pooledBufferHolds(to.tr.buffers, size, first), "request %d: the buffer did not go back to the receiver's pool", j)
				}
				require.False(t, pooledBufferHolds(from.tr.buffers, size, first), "request %d: the buffer went to the sender's pool", j)
			}
			require.True(t, pooledBufferHolds(to.tr.buffers, 64<<10, unsafe.SliceData(reqs[n].Records)), "the bundle's buffer did not go back to the receiver's pool")
			require.Zero(t, to.tr.received.size())
			require.Zero(t, from.tr.received.size())
		})
	}

	// A token stands for its records in the transport that made it only.
	far := actor.NewPID("127.0.0.1:9092", "p")
	rs := []*messages.ProduceRequest{{Topic: "t", Acks: 1, Records: patterned(inlineData, 7)}}
	msg := a.OutgoingProduces(systemA, far, rs)
	_, got := sendThroughCodec(t, b, msg)
	require.Empty(t, got.(*messages.ProduceRequests).Requests, "another transport wrote the token's records")
	require.Equal(t, 1, a.outgoing.pending())
	_, got = sendThroughCodec(t, a, msg)
	require.True(t, proto.Equal(&messages.ProduceRequests{Requests: rs}, got), "got %v", got)
	require.Zero(t, a.outgoing.pending())
}

// A received request whose records are carried on by a copy, as the
// partition manager hands a request on under its own correlation id, is
// released through the copy: the hold is the records', so the buffer goes
// back to the pool and serves the next read of its size.
func TestReleaseThroughACopy(t *testing.T) {
	for _, bundled := range []bool{false, true} {
		t.Run(fmt.Sprintf("bundled=%v", bundled), func(t *testing.T) {
			tr := NewTransport()
			want := &messages.ProduceRequest{Topic: "orders", Partition: 1, Acks: -1, CorrelationId: 9, Records: patterned(100<<10, 3)}
			var sent proto.Message = want
			if bundled {
				sent = &messages.ProduceRequests{Requests: []*messages.ProduceRequest{want}}
			}
			got := receive(t, tr, recordsBatch(t, sent))
			size := proto.Size(got)
			defer emptyTiers(tr.buffers, size)()
			m := deliver(t, got.GetMessageBatch())[0]
			r, ok := m.(*messages.ProduceRequest)
			if bundled {
				r, ok = m.(*messages.ProduceRequests).Requests[0], true
			}
			require.True(t, ok, "%T", m)
			require.True(t, proto.Equal(want, r))
			require.Equal(t, 1, tr.received.size())
			tr.releaseRead(got)

			sub := &messages.ProduceRequest{
				Topic: r.Topic, Partition: r.Partition, Acks: r.Acks, TimeoutMs: r.TimeoutMs,
				Records: r.Records, CorrelationId: 1,
			}
			first := unsafe.SliceData(r.Records)
			require.False(t, pooledBufferHolds(tr.buffers, size, first))
			tr.Release(sub)
			require.Zero(t, tr.received.size())
			require.True(t, pooledBufferHolds(tr.buffers, size, first), "the buffer did not go back to the pool")
			tr.Release(r) // the original after its copy lets go of nothing more
			b := tr.buffers.Get(size)
			require.True(t, within(unsafe.Slice(first, 1), (*b)[:cap(*b)]), "the next read of the size did not get the buffer")
		})
	}
}

// Streams of two transports receive produce requests side by side, and
// partitions on other goroutines release them: every hold ends in the
// transport it was taken in, and none is left. (Under the race detector,
// this stands in for the tests between two remotes, which it skips.)
func TestTransportsReleaseConcurrently(t *testing.T) {
	const streams, reads = 4, 50
	transports := []*Transport{NewTransport(), NewTransport()}
	want := map[string][]byte{"orders": patterned(64<<10, 1), "a": patterned(8<<10, 2), "b": patterned(16<<10, 3)}
	msg := recordsBatch(t,
		recordsMessage(produceRequestName, want["orders"]),
		&messages.ProduceRequests{Requests: []*messages.ProduceRequest{
			{Topic: "a", Records: want["a"]},
			{Topic: "b", Records: want["b"]},
		}},
	)
	encoded, err := proto.Marshal(msg)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for _, tr := range transports {
		partition := make(chan *messages.ProduceRequest, 16)
		var released sync.WaitGroup
		released.Go(func() {
			for r := range partition {
				// Read as a partition appends them: a buffer back in
				// the pool too soon is written over by the next read.
				if !bytes.Equal(want[r.Topic], r.Records) {
					t.Errorf("records of %q changed", r.Topic)
				}
				tr.Release(r)
			}
		})
		var sent sync.WaitGroup
		for range streams {
			sent.Go(func() {
				c := remoteCodec{t: tr}
				for range reads {
					rm := &remote.RemoteMessage{}
					if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(encoded)}, rm); err != nil {
						t.Error(err)
						return
					}
					batch := rm.GetMessageBatch()
					for _, e := range batch.GetEnvelopes() {
						m, err := remote.Deserialize(e.MessageData, batch.TypeNames[e.TypeId], e.SerializerId)
						if err != nil {
							t.Error(err)
							return
						}
						switch m := m.(type) {
						case *messages.ProduceRequest:
							partition <- m
						case *messages.ProduceRequests:
							for _, r := range m.Requests {
								partition <- r
							}
						}
					}
					tr.releaseRead(rm)
				}
			})
		}
		wg.Go(func() {
			sent.Wait()
			close(partition)
			released.Wait()
		})
	}
	wg.Wait()
	for i, tr := range transports {
		require.Zero(t, tr.received.size(), "transport %d", i)
		require.Zero(t, tr.reads.size(), "transport %d", i)
	}
}

// A nil Transport is a system without remote: produce requests are copied
// into their message, frames are allocated and dropped, and nothing is
// released.
func TestNilTransport(t *testing.T) {
	system := actortest.System(t)
	var tr *Transport
	rs := []*messages.ProduceRequest{{Topic: "t", Records: patterned(1<<20, 1)}}
	msg := tr.OutgoingProduces(system, actor.NewPID("127.0.0.1:9092", "p"), rs)
	require.Same(t, rs[0], msg.(*messages.ProduceRequests).Requests[0])
	rs[0] = nil
	require.NotNil(t, msg.(*messages.ProduceRequests).Requests[0], "the message keeps its own slice")

	frame := tr.Frame(FetchRecordsReserve + 100)
	require.Len(t, *frame, FetchRecordsReserve+100)
	tr.PutFrame(frame)
	tr.Release(&messages.ProduceRequest{Records: []byte{1}})
	tr.Release(&messages.ProduceRequest{})
}
