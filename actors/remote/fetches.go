package remote

import (
	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/messages"
)

var (
	fetchPartitionsResponseDescriptor = (&messages.FetchPartitionsResponse{}).ProtoReflect().Descriptor()
	// fetchPartitionsResponseName is "depot.FetchPartitionsResponse".
	fetchPartitionsResponseName = string(proto.MessageName(&messages.FetchPartitionsResponse{}))
	// fetchPartitionsField is the number of FetchPartitionsResponse's
	// partitions (4).
	fetchPartitionsField = fetchPartitionsResponseDescriptor.Fields().ByName("partitions").Number()
)

// FetchesFrame is a partition manager's answer to a FetchPartitionsRequest
// from its own actor system that asked to hand back its frames
// (FetchPartitionsRequest.HandBackFrames): the response, and for each of
// its parts, in their order, a FetchFrame of the part's response and the
// buffer of the transport's pool its records were read into, if any. The
// receiver owns the frames, and hands back each as a FetchFrame says, or
// all at once with Release. Release may be called from any goroutine, and
// more than once (or on nil).
type FetchesFrame struct {
	Response *messages.FetchPartitionsResponse
	Parts    []*FetchFrame
}

// Release hands back every part's frame; see FetchFrame.Release.
func (f *FetchesFrame) Release() {
	if f == nil {
		return
	}
	for _, p := range f.Parts {
		p.Release()
	}
}

// FetchesAnswer is what a partition manager of system sends to the
// consumer to for resp, the answers of several partitions whose records
// were read into frames (see FetchesMessage): a FetchesFrame holding the
// frames when the fetch asked to hand them back (handBack) and to is in
// system, FetchesMessage's message otherwise.
func (t *Transport) FetchesAnswer(system *actor.ActorSystem, to *actor.PID, handBack bool, resp *messages.FetchPartitionsResponse, frames [][]byte) any {
	if !handBack || isRemote(system, to) {
		return t.FetchesMessage(system, to, resp, frames)
	}
	f := &FetchesFrame{Response: resp, Parts: make([]*FetchFrame, len(resp.Partitions))}
	for i, r := range resp.Partitions {
		var frame []byte
		if i < len(frames) {
			frame = frames[i]
		}
		f.Parts[i] = t.FetchAnswer(system, to, true, r, frame).(*FetchFrame)
	}
	return f
}

// FetchesMessage is what a partition manager of system sends to the
// consumer to for resp, the answers of several partitions, where frames[i]
// is the frame the records of resp.Partitions[i] were read into (nil when
// they were not; see FetchMessage). To another actor system, with any
// frame, the message is a token for resp's pieces in t: the stream writes
// the response's fields, and each frame as it lies, its part's fields
// written in the room before its records, and then hands the frames back
// to t's pool. The caller must not touch resp or the frames after.
// Otherwise, and for a nil Transport, it is resp, the frames left to the
// garbage collector.
func (t *Transport) FetchesMessage(system *actor.ActorSystem, to *actor.PID, resp *messages.FetchPartitionsResponse, frames [][]byte) proto.Message {
	if t == nil || !isRemote(system, to) {
		return resp
	}
	g, ok := gatherFetchResponses(resp, frames)
	if !ok {
		return resp
	}
	return &encodedMessage{desc: fetchPartitionsResponseDescriptor, b: t.outgoing.put(g)}
}

var (
	replicaFetchResponseDescriptor = (&messages.ReplicaFetchResponse{}).ProtoReflect().Descriptor()
	// replicaFetchResponseName is "depot.ReplicaFetchResponse".
	replicaFetchResponseName = string(proto.MessageName(&messages.ReplicaFetchResponse{}))
	// replicaPartitionsField is the number of ReplicaFetchResponse's
	// partitions (2).
	replicaPartitionsField = replicaFetchResponseDescriptor.Fields().ByName("partitions").Number()
	// replicaRecordsField is the number of ReplicaFetchedPartition's
	// records (8).
	replicaRecordsField = recordsField(&messages.ReplicaFetchedPartition{})
)

// ReplicaFetchMessage is what a leader's partition manager of system sends
// to the follower to for resp, the answer to a ReplicaFetchRequest, where
// frames[i] is the frame the records of resp.Partitions[i] were read into
// (nil when they were not), as FetchesMessage is for a consumer: to a
// replica stream (see ReplicaStream), with any frame, resp's pieces, which
// the stream writes with each frame as it lies and then hands back to t's
// pool; to another actor system, a token for those pieces in t, which its
// gRPC stream writes likewise; otherwise resp. The caller must not touch
// resp or the frames after.
func (t *Transport) ReplicaFetchMessage(system *actor.ActorSystem, to *actor.PID, resp *messages.ReplicaFetchResponse, frames [][]byte) any {
	if t == nil {
		return resp
	}
	stream := isReplicaStream(system, to)
	if !stream && !isRemote(system, to) {
		return resp
	}
	g, ok := gatherReplicaFetch(resp, frames)
	switch {
	case !ok:
		return resp
	case stream:
		return &replicaAnswer{g: g}
	}
	return &encodedMessage{desc: replicaFetchResponseDescriptor, b: t.outgoing.put(g)}
}

// encodeReplicaFetchedAs is encodeFetchResponseAs for a partition of a
// ReplicaFetchResponse.
func encodeReplicaFetchedAs(r *messages.ReplicaFetchedPartition, frame []byte, field protowire.Number) []byte {
	if !inFrame(r.Records, frame) {
		return nil
	}
	var head [fetchRecordsReserve]byte
	h := head[:0]
	h = appendStringField(h, 1, r.Topic)
	h = appendVarintField(h, 2, uint64(int64(r.Partition)))
	h = appendVarintField(h, 3, uint64(int64(r.Error)))
	h = appendStringField(h, 4, r.ErrorMessage)
	h = appendVarintField(h, 5, uint64(r.FetchOffset))
	h = appendVarintField(h, 6, uint64(r.HighWatermark))
	h = appendVarintField(h, 7, uint64(r.LogStartOffset))
	return placeInFrame(frame, appendBytesHead(h, 8, len(r.Records)), len(r.Records), field)
}

// gatherReplicaFetch returns r in its wire form as pieces (see
// gatherParts).
func gatherReplicaFetch(r *messages.ReplicaFetchResponse, frames [][]byte) (gatheredPieces, bool) {
	head := appendVarintField(nil, 1, r.CorrelationId)
	return gatherParts(head, replicaPartitionsField, r.Partitions, frames, encodeReplicaFetchedAs)
}

// gatherFetchResponses returns r in its wire form as pieces (see
// gatherParts).
func gatherFetchResponses(r *messages.FetchPartitionsResponse, frames [][]byte) (gatheredPieces, bool) {
	var head []byte
	head = appendVarintField(head, 1, uint64(r.CorrelationId))
	head = appendVarintField(head, 2, uint64(int64(r.Error)))
	head = appendStringField(head, 3, r.ErrorMessage)
	return gatherParts(head, fetchPartitionsField, r.Partitions, frames, encodeFetchResponseAs)
}

// gatherParts returns a response in its wire form as pieces: head, its
// fields before its parts, then each of parts as the repeated field
// field. Those without a frame are copied together with the fields into
// buffers of their own; between them each part that has one is that
// frame, built in it by encode (see encodeFetchResponseAs) and pooled. ok
// is false when no part is in a frame, the response is then better sent
// as it is, or when proto cannot encode a part (a string that is not
// UTF-8), which sending the response reports.
func gatherParts[P proto.Message](head []byte, field protowire.Number, parts []P, frames [][]byte, encode func(P, []byte, protowire.Number) []byte) (g gatheredPieces, ok bool) {
	for i, p := range parts {
		var framed []byte
		if i < len(frames) && frames[i] != nil {
			framed = encode(p, frames[i], field)
		}
		if framed == nil {
			head = protowire.AppendTag(head, field, protowire.BytesType)
			head = protowire.AppendVarint(head, uint64(proto.Size(p)))
			var err error
			if head, err = (proto.MarshalOptions{UseCachedSize: true}).MarshalAppend(head, p); err != nil {
				return gatheredPieces{}, false // proto refuses it too, and says why
			}
			continue
		}
		if len(head) > 0 {
			g.pieces, g.pooled = append(g.pieces, head), append(g.pooled, false)
			g.size += len(head)
			head = nil
		}
		g.pieces, g.pooled = append(g.pieces, framed), append(g.pooled, true)
		g.size += len(framed)
		ok = true
	}
	if len(head) > 0 {
		g.pieces, g.pooled = append(g.pieces, head), append(g.pooled, false)
		g.size += len(head)
	}
	return g, ok
}
