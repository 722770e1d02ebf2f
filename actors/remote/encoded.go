package remote

import (
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/runtime/protoiface"

	"github.com/depot-dev/depot/messages"
)

// encodedMessage is a message already in its protobuf wire form, sent to
// another actor system without being encoded again. protoactor's remote
// serializer calls proto.Marshal, which takes the bytes as they are through
// the message's ProtoMethods, and proto.MessageName, which reads its
// descriptor; the peer decodes it as the message the descriptor names, as
// any other. Beyond those, IsValid, GetUnknown and Range answer as for an
// empty message, for whatever inspects it on the way; the rest of
// protoreflect.Message is not implemented (the embedded interface is nil),
// so an encodedMessage must never reach a local actor: see isRemote.
//
// Its bytes are handed to the sender's stream, and remoteCodec puts them
// into its transport's pool once gRPC has written them (when they are at
// least inlineData): an encodedMessage is sent once and not touched after.
// Those of a ProduceRequests are a token for its pieces (see
// Transport.OutgoingProduces), which remoteCodec writes in their place.
type encodedMessage struct {
	protoreflect.Message
	desc protoreflect.MessageDescriptor
	b    []byte
}

var _ protoreflect.ProtoMessage = (*encodedMessage)(nil)

func (e *encodedMessage) ProtoReflect() protoreflect.Message                                { return e }
func (e *encodedMessage) Interface() protoreflect.ProtoMessage                              { return e }
func (e *encodedMessage) Descriptor() protoreflect.MessageDescriptor                        { return e.desc }
func (e *encodedMessage) ProtoMethods() *protoiface.Methods                                 { return &encodedMethods }
func (e *encodedMessage) IsValid() bool                                                     { return true }
func (e *encodedMessage) GetUnknown() protoreflect.RawFields                                { return nil }
func (e *encodedMessage) Range(func(protoreflect.FieldDescriptor, protoreflect.Value) bool) {}

// String keeps the bytes out of logs (a dead letter is logged with its
// message).
func (e *encodedMessage) String() string {
	return fmt.Sprintf("%s (%d bytes, encoded)", e.desc.FullName(), len(e.b))
}

var encodedMethods = protoiface.Methods{
	Flags: protoiface.SupportMarshalDeterministic,
	Marshal: func(in protoiface.MarshalInput) (protoiface.MarshalOutput, error) {
		e := in.Message.(*encodedMessage)
		if len(in.Buf) == 0 {
			return protoiface.MarshalOutput{Buf: e.b}, nil
		}
		return protoiface.MarshalOutput{Buf: append(in.Buf, e.b...)}, nil
	},
	CheckInitialized: func(protoiface.CheckInitializedInput) (protoiface.CheckInitializedOutput, error) {
		return protoiface.CheckInitializedOutput{}, nil
	},
}

// localAddress is the address protoactor gives local PIDs before its remote
// starts ("nonhost" in its process registry).
const localAddress = "nonhost"

// isRemote reports whether pid names an actor of another actor system,
// which protoactor reaches through its remote and its serializer.
func isRemote(system *actor.ActorSystem, pid *actor.PID) bool {
	return pid != nil && pid.Address != localAddress && pid.Address != system.Address()
}

var fetchResponseDescriptor = (&messages.FetchResponse{}).ProtoReflect().Descriptor()

// fetchRecordsReserve is the room a fetch leaves before its records for the
// other fields of its FetchResponse (see encodeFetchResponse): a topic name
// is at most 249 bytes, and the numbers take at most 60.
const fetchRecordsReserve = 512

// encodeFetchResponse returns r in its wire form, built in place in frame:
// frame holds fetchRecordsReserve bytes of room, then r.Records (the same
// bytes, not a copy), and the other fields are written just before the
// records, so nothing is copied. It returns nil when frame is not such a
// frame or the fields do not fit. The records come last, where proto puts
// them before correlation_id: a decoder takes fields in any order.
func encodeFetchResponse(r *messages.FetchResponse, frame []byte) []byte {
	return encodeFetchResponseAs(r, frame, 0)
}

// encodeFetchResponseAs is encodeFetchResponse, and when field is not 0,
// r as that field of an enclosing message: its tag and length come first.
func encodeFetchResponseAs(r *messages.FetchResponse, frame []byte, field protowire.Number) []byte {
	if !inFrame(r.Records, frame) {
		return nil
	}
	var head [fetchRecordsReserve]byte
	h := head[:0]
	h = appendStringField(h, 1, r.Topic)
	h = appendVarintField(h, 2, uint64(int64(r.Partition)))
	h = appendVarintField(h, 3, uint64(int64(r.Error)))
	h = appendStringField(h, 4, r.ErrorMessage)
	h = appendVarintField(h, 5, uint64(r.HighWatermark))
	h = appendVarintField(h, 6, uint64(r.LogStartOffset))
	h = appendVarintField(h, 8, uint64(r.CorrelationId))
	h = appendVarintField(h, 9, uint64(r.Offset))
	if r.More {
		h = appendVarintField(h, 10, 1)
	}
	h = appendVarintField(h, 11, uint64(int64(r.LeaderEpoch)))
	return placeInFrame(frame, appendBytesHead(h, 7, len(r.Records)), len(r.Records), field)
}

// inFrame reports whether frame is a frame holding records: its
// fetchRecordsReserve bytes of room, then the records themselves.
func inFrame(records, frame []byte) bool {
	return len(records) > 0 && len(frame) == fetchRecordsReserve+len(records) && &frame[fetchRecordsReserve] == &records[0]
}

// placeInFrame writes h, a message's fields ending with the tag and length
// of its n bytes of records, into the room of frame just before them, and
// when field is not 0 the tag and length of the message as that field of
// an enclosing one before h, and returns the frame from there: the
// message in its wire form. It returns nil when they do not fit the room.
func placeInFrame(frame, h []byte, n int, field protowire.Number) []byte {
	var outer [16]byte
	o := outer[:0]
	if field != 0 {
		o = appendBytesHead(o, field, len(h)+n)
	}
	if len(o)+len(h) > fetchRecordsReserve {
		return nil
	}
	out := frame[fetchRecordsReserve-len(h)-len(o):]
	copy(out, o)
	copy(out[len(o):], h)
	return out
}

// appendStringField appends a string field unless it is empty, which
// proto3 leaves out.
func appendStringField(b []byte, num protowire.Number, v string) []byte {
	if v == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, v)
}

// appendBytesHead appends the tag and length of a bytes field of n bytes,
// whose bytes follow.
func appendBytesHead(b []byte, num protowire.Number, n int) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendVarint(b, uint64(n))
}

// appendVarintField appends a varint field unless v is zero, which proto3
// leaves out.
func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// produceHeadRoom is room enough for a ProduceRequest's fields but its
// records: a topic name is at most MaxTopicNameLength bytes, and the
// numbers and the records' tag and length take at most 64.
const produceHeadRoom = maxTopicNameLength + 64

// maxTopicNameLength is topic.MaxNameLength, which this leaf package
// does not import (a test checks that they agree).
const maxTopicNameLength = 249

// produceRequestHead appends r's fields to h, ending with the tag and
// length of its records, which are to follow.
func produceRequestHead(h []byte, r *messages.ProduceRequest) []byte {
	h = appendStringField(h, 1, r.Topic)
	h = appendVarintField(h, 2, uint64(int64(r.Partition)))
	h = appendVarintField(h, 3, uint64(int64(r.Acks)))
	h = appendVarintField(h, 4, uint64(int64(r.TimeoutMs)))
	h = appendVarintField(h, 6, uint64(r.CorrelationId))
	if len(r.Records) > 0 {
		h = appendBytesHead(h, 5, len(r.Records))
	}
	return h
}

var produceRequestsDescriptor = (&messages.ProduceRequests{}).ProtoReflect().Descriptor()

// gatheredPieces is the wire form of a message as pieces, which a stream
// writes one after the other: for a ProduceRequests, each request's fields,
// then its records; for a FetchPartitionsResponse, fields copied together
// and the fetch frames of its parts (see gatherFetchResponses).
type gatheredPieces struct {
	pieces [][]byte
	// pooled, when not nil, says which pieces are buffers of the
	// transport's pool that the stream hands back once it has written
	// them (fetch frames); the others are the sender's (a producer's
	// records until it is answered) or left to the garbage collector.
	pooled []bool
	size   int // of the pieces together
}

// gatheredType reports whether a message of the named type may be a token
// of a transport's gatherTokens: ProduceRequests, FetchPartitionsResponse
// and ReplicaFetchResponse.
func gatheredType(name string) bool {
	return name == produceRequestsName || name == fetchPartitionsResponseName || name == replicaFetchResponseName
}

// gatherProduceRequests returns ProduceRequests{rs} as pieces, the records
// not copied.
func gatherProduceRequests(rs []*messages.ProduceRequest) gatheredPieces {
	heads := make([]byte, 0, 96*len(rs))
	g := gatheredPieces{pieces: make([][]byte, 0, 2*len(rs))}
	for _, r := range rs {
		start := len(heads)
		var head [produceHeadRoom]byte
		h := produceRequestHead(head[:0], r)
		heads = appendBytesHead(heads, 1, len(h)+len(r.Records))
		heads = append(heads, h...)
		g.pieces = append(g.pieces, heads[start:len(heads):len(heads)], r.Records)
		g.size += len(heads) - start + len(r.Records)
	}
	return g
}

// gatherTokenField is the field of a ProduceRequests or a
// FetchPartitionsResponse that carries a token of a transport's
// gatherTokens. Neither message has it: a token sent as it is (its pieces
// dropped, see maxPendingGathers, or taken to another transport's stream)
// decodes to no requests, and the producer, unanswered, sends them again,
// or to an answer with no parts and correlation id 0, which the consumer
// ignores and, unanswered, fetches again.
const gatherTokenField protowire.Number = 15

// gatherTokens holds the pieces of ProduceRequests and
// FetchPartitionsResponses on their way to one transport's remote streams, by the token their message carries. Safe
// for concurrent use.
type gatherTokens struct {
	mu sync.Mutex
	// next is the last token given. It starts at random, so that a token
	// that reaches another transport's stream (a producer given the wrong
	// transport) is not taken for one of that transport's own.
	next  uint64
	m     map[uint64]gatheredPieces
	order []uint64 // tokens by age, some already taken
}

// maxPendingGathers bounds gatherTokens. A message protoactor drops before
// its stream writes it (an endpoint that fails) leaves its token here; the
// oldest go when the bound is reached, and so do their records, which the
// producer does not reuse unanswered, and the frames of fetches, which are
// left to the garbage collector.
const maxPendingGathers = 1024

func newGatherTokens() *gatherTokens {
	return &gatherTokens{next: rand.Uint64(), m: map[uint64]gatheredPieces{}}
}

// put keeps g and returns the token of a message that stands for it.
func (t *gatherTokens) put(g gatheredPieces) []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(t.order) > 0 {
		if _, ok := t.m[t.order[0]]; ok && len(t.m) < maxPendingGathers {
			break
		}
		delete(t.m, t.order[0])
		t.order = t.order[1:]
	}
	t.next++
	t.m[t.next] = g
	t.order = append(t.order, t.next)
	b := protowire.AppendTag(make([]byte, 0, 11), gatherTokenField, protowire.VarintType)
	return protowire.AppendVarint(b, t.next)
}

// take returns and forgets the pieces b stands for, if b is a token that
// still has them.
func (t *gatherTokens) take(b []byte) (gatheredPieces, bool) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || num != gatherTokenField || typ != protowire.VarintType {
		return gatheredPieces{}, false
	}
	id, m := protowire.ConsumeVarint(b[n:])
	if m < 0 || n+m != len(b) {
		return gatheredPieces{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	g, ok := t.m[id]
	delete(t.m, id)
	return g, ok
}
