package remote

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/messages"
)

// frameOf lays records out as fetchAt does: reserve room, then the records.
func frameOf(records []byte) ([]byte, []byte) {
	frame := append(make([]byte, fetchRecordsReserve, fetchRecordsReserve+len(records)), records...)
	for i := range fetchRecordsReserve {
		frame[i] = 0xEE // a pooled buffer's leftovers
	}
	return frame, frame[fetchRecordsReserve:]
}

// A FetchResponse encoded in its frame decodes, with proto, to the same
// message, whatever its fields hold; the records are not copied.
func TestEncodeFetchResponse(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := []*messages.FetchResponse{
		{Topic: "t", Records: []byte{1}},
		{Records: patterned(10, 1)},
		{
			Topic: strings.Repeat("x", maxTopicNameLength), Partition: math.MaxInt32, Error: messages.ErrorCode_OFFSET_OUT_OF_RANGE,
			ErrorMessage: "offset out of range", HighWatermark: math.MaxInt64, LogStartOffset: -1, CorrelationId: math.MinInt64,
			Offset: -2, More: true, Records: patterned(1<<20, 2),
		},
	}
	for range 200 {
		cases = append(cases, &messages.FetchResponse{
			Topic:          strings.Repeat("a", rng.IntN(maxTopicNameLength+1)),
			Partition:      rng.Int32() - math.MaxInt32/2,
			HighWatermark:  rng.Int64() - math.MaxInt64/2,
			LogStartOffset: rng.Int64N(1 << 40),
			CorrelationId:  rng.Int64(),
			Offset:         rng.Int64N(1<<40) - 1<<39,
			More:           rng.IntN(2) == 0,
			LeaderEpoch:    rng.Int32() - math.MaxInt32/2,
			Records:        patterned(1+rng.IntN(64<<10), byte(rng.IntN(256))),
		})
	}
	for i, want := range cases {
		frame, records := frameOf(want.Records)
		r := proto.Clone(want).(*messages.FetchResponse)
		r.Records = records
		b := encodeFetchResponse(r, frame)
		require.NotNil(t, b, "case %d", i)
		require.Same(t, &frame[len(frame)-1], &b[len(b)-1], "case %d: built in its frame", i)
		got := &messages.FetchResponse{}
		require.NoError(t, proto.Unmarshal(b, got), "case %d", i)
		require.True(t, proto.Equal(want, got), "case %d:\n%v\n%v", i, want, got)
	}
}

// Records that are not the tail of their frame, or none, are not encoded:
// the caller sends the message itself.
func TestEncodeFetchResponseNeedsAFrame(t *testing.T) {
	frame, records := frameOf(patterned(100, 1))
	require.Nil(t, encodeFetchResponse(&messages.FetchResponse{Records: records[:50]}, frame), "a prefix of the frame's records")
	require.Nil(t, encodeFetchResponse(&messages.FetchResponse{Records: patterned(100, 1)}, frame), "a copy of them")
	require.Nil(t, encodeFetchResponse(&messages.FetchResponse{}, frame[:fetchRecordsReserve]), "no records")
	short := frame[fetchRecordsReserve-10:]
	require.Nil(t, encodeFetchResponse(&messages.FetchResponse{Records: short[10:]}, short), "no room before them")
}

// protoactor's serializer sends an encodedMessage as the message it names,
// without copying its bytes, and its peer's proto serializer reads it.
func TestEncodedMessageThroughProtoactorSerializer(t *testing.T) {
	want := &messages.FetchResponse{Topic: "orders", Partition: 3, HighWatermark: 99, Offset: 7, Records: patterned(8<<10, 4)}
	frame, records := frameOf(want.Records)
	r := proto.Clone(want).(*messages.FetchResponse)
	r.Records = records
	msg := &encodedMessage{desc: fetchResponseDescriptor, b: encodeFetchResponse(r, frame)}

	data, typeName, err := remote.Serialize(msg, 0)
	require.NoError(t, err)
	require.Equal(t, "depot.FetchResponse", typeName)
	require.Same(t, &msg.b[0], &data[0], "serialized without a copy")
	got, err := remote.Deserialize(data, typeName, 0)
	require.NoError(t, err)
	require.True(t, proto.Equal(want, got.(proto.Message)))
	require.NotContains(t, msg.String(), "\x04", "its bytes stay out of logs")
}

func TestIsRemote(t *testing.T) {
	system := actortest.System(t)
	pid := system.NewLocalPID("a")
	require.False(t, isRemote(system, pid))
	require.False(t, isRemote(system, actor.NewPID(localAddress, "b")))
	require.True(t, isRemote(system, actor.NewPID("127.0.0.1:9092", "b")))
	require.False(t, isRemote(system, nil))
}

// sendThroughCodec marshals msg as the one envelope of a message batch,
// as an endpoint writer of tr sends it through remoteCodec, and returns
// what the stream writes and the message the other end decodes from it.
func sendThroughCodec(t *testing.T, tr *Transport, msg proto.Message) (mem.BufferSlice, proto.Message) {
	t.Helper()
	data, typeName, err := remote.Serialize(msg, 0)
	require.NoError(t, err)
	out, err := remoteCodec{t: tr}.Marshal(batchMessage(&remote.MessageBatch{
		TypeNames: []string{typeName},
		Targets:   []*actor.PID{actor.NewPID("127.0.0.1:9092", "p")},
		Envelopes: []*remote.MessageEnvelope{{MessageData: data}},
	}))
	require.NoError(t, err)
	rm := &remote.RemoteMessage{}
	require.NoError(t, proto.Unmarshal(out.Materialize(), rm))
	envelopes := rm.GetMessageBatch().GetEnvelopes()
	require.Len(t, envelopes, 1)
	got, err := remote.Deserialize(envelopes[0].MessageData, typeName, 0)
	require.NoError(t, err)
	return out, got.(proto.Message)
}

// pending is how many tokens still have their pieces.
func (t *gatherTokens) pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// Produce requests to another system go as a token, and the stream writes
// their fields and their records where they are: the records are not
// copied, and the message decodes to the same requests. A few small ones,
// or any to a local actor, go as they are.
func TestOutgoingProduces(t *testing.T) {
	system := actortest.System(t)
	tr := NewTransport()
	far, near := actor.NewPID("127.0.0.1:9092", "p"), system.NewLocalPID("p")
	for _, want := range [][]*messages.ProduceRequest{
		{{Topic: "orders", Partition: 2, Acks: -1, TimeoutMs: 30000, CorrelationId: 1 << 40, Records: patterned(64<<10, 1)}},
		{{Topic: strings.Repeat("t", 300), Partition: -1, Acks: 1, TimeoutMs: math.MaxInt32, CorrelationId: -5, Records: patterned(inlineData, 2)}},
		{{Records: patterned(1<<20, 3)}},
		{
			{Topic: "a", Partition: 0, Acks: 1, CorrelationId: 1, Records: patterned(100, 4)},
			{Topic: "a", Partition: 1, Acks: 1, CorrelationId: 2},
			{Topic: "b", Partition: 7, Acks: 1, CorrelationId: 3, Records: patterned(inlineData, 5)},
		},
	} {
		rs := make([]*messages.ProduceRequest, len(want))
		for i, w := range want {
			rs[i] = proto.Clone(w).(*messages.ProduceRequest)
		}
		msg := tr.OutgoingProduces(system, far, rs)
		_, ok := msg.(*encodedMessage)
		require.True(t, ok, "%T", msg)
		out, got := sendThroughCodec(t, tr, msg)
		require.True(t, proto.Equal(&messages.ProduceRequests{Requests: want}, got), "got %v", got)
		for i, r := range rs {
			handedOver := false
			for _, buf := range out {
				handedOver = handedOver || sameSlice(buf.ReadOnlyData(), r.Records)
			}
			require.Equal(t, len(r.Records) >= inlineData, handedOver, "request %d of %d bytes", i, len(r.Records))
		}
		require.Zero(t, tr.outgoing.pending(), "the stream took the records")
	}
	small := []*messages.ProduceRequest{{Topic: "t", Records: patterned(inlineData/2, 4)}, {Topic: "t", Partition: 1, Records: patterned(inlineData/2-1, 5)}}
	msg := tr.OutgoingProduces(system, far, small)
	require.Equal(t, small, msg.(*messages.ProduceRequests).Requests)
	large := []*messages.ProduceRequest{{Topic: "t", Records: patterned(1<<20, 5)}}
	msg = tr.OutgoingProduces(system, near, large)
	require.Same(t, large[0], msg.(*messages.ProduceRequests).Requests[0])
	large[0] = nil
	require.NotNil(t, msg.(*messages.ProduceRequests).Requests[0], "the message keeps its own slice")
}

// A token whose records are gone (dropped past maxPendingGathers, or sent
// twice) goes as it is and decodes to no requests: the producer, never
// answered, sends them again. The oldest tokens go first.
func TestOutgoingProducesTokensAreBounded(t *testing.T) {
	system := actortest.System(t)
	tr := NewTransport()
	far := actor.NewPID("127.0.0.1:9092", "p")
	rs := []*messages.ProduceRequest{{Topic: "t", Acks: 1, Records: patterned(inlineData, 6)}}
	first := tr.OutgoingProduces(system, far, rs)
	for range maxPendingGathers - 1 {
		tr.OutgoingProduces(system, far, rs)
	}
	require.Equal(t, maxPendingGathers, tr.outgoing.pending())
	last := tr.OutgoingProduces(system, far, rs)
	require.Equal(t, maxPendingGathers, tr.outgoing.pending(), "the oldest went")

	_, got := sendThroughCodec(t, tr, first)
	require.Empty(t, got.(*messages.ProduceRequests).Requests, "its records are gone")
	_, got = sendThroughCodec(t, tr, last)
	require.True(t, proto.Equal(&messages.ProduceRequests{Requests: rs}, got))
	_, got = sendThroughCodec(t, tr, last)
	require.Empty(t, got.(*messages.ProduceRequests).Requests, "a token is taken once")
}

// The room left for a produce request's fields holds the longest topic
// name: this leaf package keeps its own copy of the limit.
func TestMaxTopicNameLengthAgrees(t *testing.T) {
	require.Equal(t, topic.MaxNameLength, maxTopicNameLength)
}
