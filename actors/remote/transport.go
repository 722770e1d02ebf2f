package remote

import (
	"slices"
	"sync/atomic"

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
// pool, the received produce requests that alias its buffers, the received
// messages its streams hold, and the produce requests on their way out.
// Each actor system has its own, made by NewTransport and installed by
// Config; nothing of it is shared between the systems of one process. Safe
// for concurrent use.
//
// A nil *Transport is a system without remote: Frame allocates, PutFrame
// and Release do nothing, and OutgoingProduces copies.
type Transport struct {
	// buffers is the pool of the streams' reads and of fetch frames.
	buffers *dirtyPool
	// outgoing holds the pieces of ProduceRequests waiting for a stream
	// (see OutgoingProduces).
	outgoing *gatherTokens
	// received holds the buffers that received produce requests' records
	// alias (see Release).
	received *receivedHolds
	// reads holds the buffers that decoded messages alias until their
	// stream reads again (see heldStream).
	reads *heldReads
	// faults are the faults tests inject into the outgoing streams.
	faults *Faults
	// replicas serves the replica streams followers open to this node.
	replicas *replicaServer
	// frames counts the frames asked for (see PoolStats).
	frames atomic.Int64
}

// NewTransport returns the transport state of one actor system.
func NewTransport() *Transport {
	t := &Transport{
		buffers:  newDirtyPool(),
		outgoing: newGatherTokens(),
		received: newReceivedHolds(),
		reads:    newHeldReads(),
	}
	t.faults = &Faults{t: t}
	t.replicas = &replicaServer{t: t}
	return t
}

// Faults are the network faults injected into t's outgoing streams, for
// tests; there are none unless a test sets them. Nil for a nil Transport.
func (t *Transport) Faults() *Faults {
	if t == nil {
		return nil
	}
	return t.faults
}

// Frame returns a pooled buffer of at least size bytes for a fetch to read
// records into, after FetchRecordsReserve bytes of room.
func (t *Transport) Frame(size int) *[]byte {
	if t == nil {
		b := make([]byte, size)
		return &b
	}
	t.frames.Add(1)
	return t.buffers.Get(size)
}

// PutFrame hands back a frame that no message took.
func (t *Transport) PutFrame(b *[]byte) {
	if t != nil {
		t.buffers.Put(b)
	}
}

// Release tells that m's records are no longer used, so that the buffer
// they were received in, from another actor system, can serve again. A
// partition calls it once it has appended them. It does nothing for a
// request that holds no buffer. The hold is that of the records, not of
// m: a request that carries the same Records slice on (as the partition
// manager's copy under its own correlation id does) is released in m's
// stead, and once either is, neither m nor any other request carrying
// those records may be used.
func (t *Transport) Release(m *messages.ProduceRequest) {
	t.ReleaseRecords(m.GetRecords())
}

// ReleaseRecords is Release for records received in any message that
// aliases them: a ProduceRequest's, or a ReplicaFetchResponse partition's,
// which its follower releases once it has appended them, or has decided
// not to. It does nothing for records that hold no buffer, and for the
// same records a second time.
func (t *Transport) ReleaseRecords(records []byte) {
	if t == nil || len(records) == 0 {
		return
	}
	t.received.release(&records[0])
}

// OutgoingProduces returns the ProduceRequests a producer of system sends
// to the partition manager to, for the partitions of rs that its node
// leads. When to is in another actor system and the requests carry at
// least a few KiB of records, their records are not copied: the message is
// a token for them in t, and remoteCodec writes the requests' fields and
// the records themselves, where they are, when t's stream sends it. The
// caller must then leave the records unchanged until their requests are
// answered, and for good when they never are: a stream may still be about
// to write them. Otherwise it is a message holding the requests themselves
// (not rs, which the caller may reuse). A nil Transport (a system without
// remote) always copies.
func (t *Transport) OutgoingProduces(system *actor.ActorSystem, to *actor.PID, rs []*messages.ProduceRequest) proto.Message {
	if t == nil {
		return &messages.ProduceRequests{Requests: slices.Clone(rs)}
	}
	records := 0
	for _, r := range rs {
		records += len(r.Records)
	}
	if records < inlineData || !isRemote(system, to) {
		return &messages.ProduceRequests{Requests: slices.Clone(rs)}
	}
	return &encodedMessage{desc: produceRequestsDescriptor, b: t.outgoing.put(gatherProduceRequests(rs))}
}

// FetchMessage is what a partition of system sends to a consumer to for
// resp, whose records were read into frame (nil when they were not): to
// another actor system, records read into a frame go as they lie in it,
// the other fields written before them, where protoactor's serializer
// would copy them into a message of its own (see encodedMessage). The
// stream that writes it puts the frame into its own transport's pool.
func FetchMessage(system *actor.ActorSystem, to *actor.PID, resp *messages.FetchResponse, frame []byte) any {
	if frame != nil && isRemote(system, to) {
		if b := encodeFetchResponse(resp, frame); b != nil {
			return &encodedMessage{desc: fetchResponseDescriptor, b: b}
		}
	}
	return resp
}
