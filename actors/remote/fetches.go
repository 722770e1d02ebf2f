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

// gatherFetchResponses returns r in its wire form as pieces: the fields
// and the parts without a frame, copied together into buffers of their
// own, and between them each part that has a frame as that frame, built in
// it as encodeFetchResponseAs builds it (pooled). ok is false when no part
// is in a frame, r is then better sent as it is, or when proto cannot
// encode a part (a string that is not UTF-8), which sending r reports.
func gatherFetchResponses(r *messages.FetchPartitionsResponse, frames [][]byte) (g gatheredPieces, ok bool) {
	var head []byte
	head = appendVarintField(head, 1, uint64(r.CorrelationId))
	head = appendVarintField(head, 2, uint64(int64(r.Error)))
	head = appendStringField(head, 3, r.ErrorMessage)
	for i, p := range r.Partitions {
		var inFrame []byte
		if i < len(frames) && frames[i] != nil {
			inFrame = encodeFetchResponseAs(p, frames[i], fetchPartitionsField)
		}
		if inFrame == nil {
			head = protowire.AppendTag(head, fetchPartitionsField, protowire.BytesType)
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
		g.pieces, g.pooled = append(g.pieces, inFrame), append(g.pooled, true)
		g.size += len(inFrame)
		ok = true
	}
	if len(head) > 0 {
		g.pieces, g.pooled = append(g.pieces, head), append(g.pooled, false)
		g.size += len(head)
	}
	return g, ok
}
