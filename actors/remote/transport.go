package remote

import (
	"slices"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/messages"
)

// FetchRecordsReserve is the room a fetch frame leaves before its records
// for the other fields of their FetchResponse (see FetchMessage).
const FetchRecordsReserve = fetchRecordsReserve

// InlineData is the size under which records travel copied next to their
// message's framing rather than as a buffer of their own: a fetch of fewer
// bytes copies them out of its frame and lets the frame go.
const InlineData = inlineData

// Transport is the state of one actor system's remote streams: its buffer
// pool, the received produce requests that alias its buffers, and the
// produce requests on their way out. Safe for concurrent use.
type Transport struct{}

// NewTransport returns the transport state of one actor system.
func NewTransport() *Transport { return &Transport{} }

// Frame returns a pooled buffer of at least size bytes for a fetch to read
// records into, after FetchRecordsReserve bytes of room.
func (t *Transport) Frame(size int) *[]byte { return remoteBuffers.Get(size) }

// PutFrame hands back a frame that no message took.
func (t *Transport) PutFrame(b *[]byte) { remoteBuffers.Put(b) }

// Release tells that m's records are no longer used, so that the buffer
// they were received in, from another actor system, can serve again. A
// partition calls it once it has appended them. It does nothing for a
// request that holds no buffer; m must not be used after.
func (t *Transport) Release(m *messages.ProduceRequest) { ReleaseReceived(m) }

// Carry makes to the holder of the received buffer from holds, if any: to
// carries from's records on.
func (t *Transport) Carry(from, to *messages.ProduceRequest) { receivedRecords.move(from, to) }

// OutgoingProduces returns the ProduceRequests a producer of system sends to
// the partition manager to (see the package function of that name). A nil
// Transport (a system without remote) always copies.
func (t *Transport) OutgoingProduces(system *actor.ActorSystem, to *actor.PID, rs []*messages.ProduceRequest) proto.Message {
	if t == nil {
		return &messages.ProduceRequests{Requests: slices.Clone(rs)}
	}
	return OutgoingProduces(system, to, rs)
}

// FetchMessage is what a partition of system sends to a consumer to for
// resp, whose records were read into frame (nil when they were not): to
// another actor system, records read into a frame go as they lie in it,
// the other fields written before them, where protoactor's serializer
// would copy them into a message of its own (see encodedMessage).
func FetchMessage(system *actor.ActorSystem, to *actor.PID, resp *messages.FetchResponse, frame []byte) any {
	if frame != nil && isRemote(system, to) {
		if b := encodeFetchResponse(resp, frame); b != nil {
			return &encodedMessage{desc: fetchResponseDescriptor, b: b}
		}
	}
	return resp
}
