package remote

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// remoteCodec is the gRPC codec of protoactor's remote stream. It writes and
// reads the same protobuf bytes as gRPC's own proto codec, so a node using it
// talks to any protoactor peer, but it moves record bytes one copy less each
// way:
//
//   - Marshal hands a large envelope's message_data to gRPC as its own
//     buffer, where the proto codec would first copy it into one contiguous
//     message, writes a producer's ProduceRequests from its batches
//     where they are (see OutgoingProduces), and a partition manager's
//     FetchPartitionsResponse from its parts' fetch frames (see
//     FetchesMessage);
//   - Unmarshal leaves message_data aliasing the received bytes, where the
//     proto codec copies every bytes field out of them; and for a large
//     ProduceRequest it goes one further, handing the
//     envelope to aliasSerializer so that the message's Records aliases
//     them too, where protoactor's proto serializer would copy it again.
//
// Every other message of the stream (connect, disconnect) goes through proto
// unchanged.
//
// A codec works for one transport t, whose streams it encodes and decodes:
// its buffers come from t's pool, the tokens it writes are t's, and the
// records it hands to aliasSerializer hold their buffer in t (see
// Transport.Config). Safe for concurrent use.
type remoteCodec struct {
	t *Transport
}

// inlineData is the size under which an envelope's data is copied next to
// its framing rather than handed over as a buffer of its own.
const inlineData = 4 << 10

// Name is the content subtype gRPC announces; keeping proto's name is what
// lets peers without this codec read the stream.
func (remoteCodec) Name() string { return "proto" }

func (c remoteCodec) Marshal(v any) (mem.BufferSlice, error) {
	rm, ok := v.(*remote.RemoteMessage)
	if !ok || rm.GetMessageBatch() == nil {
		m, ok := v.(proto.Message)
		if !ok {
			return nil, fmt.Errorf("depot: remote codec: %T is not a protobuf message", v)
		}
		b, err := proto.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	return c.marshalBatch(rm.GetMessageBatch())
}

// marshalBatch encodes RemoteMessage{message_batch: b}. Framing and small
// envelopes go into one buffer; the data of a large envelope follows as a
// buffer of its own, not copied, and so do the records of a ProduceRequests
// and the fetch frames of a FetchPartitionsResponse whose message is a
// token of c's transport (see Transport.OutgoingProduces and
// Transport.FetchesMessage).
func (c remoteCodec) marshalBatch(b *remote.MessageBatch) (mem.BufferSlice, error) {
	head := &remote.MessageBatch{TypeNames: b.TypeNames, Targets: b.Targets, Senders: b.Senders}
	headSize := proto.Size(head)
	// Each envelope is sized and written without its data, which is
	// appended as field 2 after it: field order is free in protobuf.
	bare := make([]int, len(b.Envelopes))
	var gathered []*gatheredPieces // by envelope, when any is a token
	batchSize := headSize
	// metaSize bounds what goes into meta: framing, and the pieces
	// copied in; whole says whether every piece is.
	metaSize, whole := 16+headSize, true
	for i, e := range b.Envelopes {
		data := e.MessageData
		n := len(data)
		pieces := [][]byte{data}
		if e.TypeId >= 0 && int(e.TypeId) < len(b.TypeNames) && gatheredType(b.TypeNames[e.TypeId]) {
			if g, ok := c.t.outgoing.take(data); ok {
				if gathered == nil {
					gathered = make([]*gatheredPieces, len(b.Envelopes))
				}
				gathered[i], n = &g, g.size
				pieces = g.pieces
			}
		}
		e.MessageData = nil
		bare[i] = proto.Size(e)
		e.MessageData = data
		batchSize += protowire.SizeTag(3) + protowire.SizeBytes(envelopeSize(bare[i], n))
		metaSize += bare[i] + 2*(protowire.SizeTag(3)+binary.MaxVarintLen64)
		for _, p := range pieces {
			if len(p) < inlineData {
				metaSize += len(p)
			} else {
				whole = false
			}
		}
	}

	// A frame of framing and copied pieces alone, as many partitions'
	// small batches make, is written from a buffer of the pool that the
	// stream hands back once it has written it; a frame with cuts holds
	// meta in several slices, and leaves it to the garbage collector.
	// Either way meta is made its final size at once.
	var pooled *[]byte
	var meta []byte
	if whole {
		pooled = c.t.buffers.Get(metaSize)
		meta = (*pooled)[:0]
	} else {
		meta = make([]byte, 0, metaSize)
	}
	meta = protowire.AppendTag(meta, 1, protowire.BytesType)
	meta = protowire.AppendVarint(meta, uint64(batchSize))
	var err error
	if meta, err = (proto.MarshalOptions{UseCachedSize: true}).MarshalAppend(meta, head); err != nil {
		return nil, err
	}
	type cut struct {
		end  int // meta[previous end:end] precedes data
		data []byte
		pool mem.BufferPool // takes data back once written; nil: none does
	}
	var cuts []cut
	for i, e := range b.Envelopes {
		data := e.MessageData
		one := [1][]byte{data}
		pieces, n := one[:], len(data)
		// poolOf is the pool that takes piece j back once it is written,
		// nil for none.
		poolOf := func(int) mem.BufferPool { return c.t.buffers }
		if gathered != nil && gathered[i] != nil {
			g := gathered[i]
			// A producer's records are its own until it has an answer;
			// fetch frames go back to the pool.
			pieces, n = g.pieces, g.size
			poolOf = func(j int) mem.BufferPool {
				if g.pooled != nil && g.pooled[j] {
					return c.t.buffers
				}
				return nil
			}
		}
		meta = protowire.AppendTag(meta, 3, protowire.BytesType)
		meta = protowire.AppendVarint(meta, uint64(envelopeSize(bare[i], n)))
		e.MessageData = nil
		meta, err = (proto.MarshalOptions{UseCachedSize: true}).MarshalAppend(meta, e)
		e.MessageData = data
		if err != nil {
			return nil, err
		}
		if n == 0 {
			continue
		}
		meta = protowire.AppendTag(meta, 2, protowire.BytesType)
		meta = protowire.AppendVarint(meta, uint64(n))
		for j, p := range pieces {
			if len(p) < inlineData {
				meta = append(meta, p...)
				if gathered != nil && gathered[i] != nil && poolOf(j) != nil {
					c.t.buffers.Put(&p) // copied: the frame is done with
				}
				continue
			}
			cuts = append(cuts, cut{end: len(meta), data: p, pool: poolOf(j)})
		}
	}
	if pooled != nil {
		if cap(meta) != cap(*pooled) {
			// Outgrown: meta is a new array, and the pooled one is left
			// to the garbage collector.
			return mem.BufferSlice{mem.SliceBuffer(meta)}, nil
		}
		*pooled = meta
		return mem.BufferSlice{mem.NewBuffer(pooled, c.t.buffers)}, nil
	}
	out := make(mem.BufferSlice, 0, 2*len(cuts)+1)
	start := 0
	for _, ct := range cuts {
		if ct.end > start {
			out = append(out, mem.SliceBuffer(meta[start:ct.end]))
		}
		data := ct.data
		if ct.pool != nil {
			// The envelope's data was marshaled for this send alone and
			// nothing reads it after gRPC has written it, so gRPC hands
			// it to the pool then, for the next message read.
			out = append(out, mem.NewBuffer(&data, ct.pool))
		} else {
			out = append(out, mem.SliceBuffer(data))
		}
		start = ct.end
	}
	if start < len(meta) {
		out = append(out, mem.SliceBuffer(meta[start:]))
	}
	return out, nil
}

// envelopeSize is the encoded size of an envelope whose other fields take
// bare bytes and whose data takes n.
func envelopeSize(bare, n int) int {
	if n == 0 {
		return bare
	}
	return bare + protowire.SizeTag(2) + protowire.SizeBytes(n)
}

func (c remoteCodec) Unmarshal(data mem.BufferSlice, v any) error {
	rm, ok := v.(*remote.RemoteMessage)
	if !ok {
		m, ok := v.(proto.Message)
		if !ok {
			return fmt.Errorf("depot: remote codec: %T is not a protobuf message", v)
		}
		buf := data.MaterializeToBuffer(c.t.buffers)
		defer buf.Free()
		return proto.Unmarshal(buf.ReadOnlyData(), m)
	}
	// The message is copied into one buffer of the pool (as gRPC's codec
	// copies it into one of its own), which the decoded batch aliases until
	// protoactor has deserialized its envelopes. It does so before reading
	// the next message of the stream, whose read lets go of the buffer (see
	// heldStream). gRPC's own buffers are not held past Unmarshal: holding
	// them stalls the stream. The produce requests among the envelopes keep
	// their records in the buffer (see aliasRecords) and hold it too, until
	// their partition has appended them (see Transport.Release).
	pool := c.t.buffers
	b := pool.Get(data.Len())
	data.CopyTo(*b)
	err := unmarshalRemoteMessage(*b, rm)
	if err == nil && rm.GetMessageBatch() == nil {
		// Connect and disconnect messages were decoded by proto, which
		// copies: nothing aliases the buffer.
		pool.Put(b)
		return nil
	}
	if err != nil {
		pool.Put(b)
		return err
	}
	shared := &sharedRead{buf: b, pool: pool}
	shared.refs.Store(1) // the stream's, until its next read
	if !c.t.reads.hold(rm, shared) {
		// Nobody will let go of it: detach the batch from the buffer,
		// which goes back now.
		err = unmarshalRemoteMessageCopy(*b, rm)
		pool.Put(b)
		return err
	}
	c.aliasRecords(rm.GetMessageBatch(), shared)
	return nil
}

// aliasRecords hands each envelope of batch that carries a produce
// request's records to aliasSerializer, so that the deserialized
// ProduceRequest's Records aliases the envelope's data, in shared's buffer,
// rather than a copy of it, and notes in c's transport that those records
// hold the buffer (see receivedHolds). An envelope qualifies when
// protoactor would read it with proto (serializer id 0), its type is
// aliased (see aliasedType), and its data is at least inlineData bytes
// (below that, a copy costs less than holding the buffer).
//
// An envelope that arrives naming aliasSerializer's id (which no sender
// writes for it: a peer meant one of its own) is read with proto instead,
// as aliasSerializer reads it but for aliasing: handed to aliasSerializer
// unnoted, its records would alias a buffer the pool takes back while
// they are still in use.
//
// The owner of Records may write to it: a partition's disk.Log.Append
// rewrites the base offset of each batch in place (wire.SetBaseOffset).
// That is harmless, because protobuf's length-delimited fields do not
// overlap: the envelopes of one batch occupy disjoint ranges of the buffer,
// each Records lies inside its envelope's range and its capacity ends
// there (an append reallocates rather than spill over a neighbour), and
// everything else in the buffer is copied out of it by proto.
func (c remoteCodec) aliasRecords(batch *remote.MessageBatch, shared *sharedRead) {
	if aliasSerializerID < 0 {
		return
	}
	for _, e := range batch.GetEnvelopes() {
		if e.SerializerId == aliasSerializerID {
			e.SerializerId = 0
		}
		if e.SerializerId != 0 || len(e.MessageData) < inlineData ||
			e.TypeId < 0 || int(e.TypeId) >= len(batch.TypeNames) || !aliasedType(batch.TypeNames[e.TypeId]) {
			continue
		}
		e.SerializerId = aliasSerializerID
		c.t.received.hold(batch.TypeNames[e.TypeId], e.MessageData, shared)
	}
}

// unmarshalRemoteMessageCopy decodes b into rm with nothing aliasing b.
func unmarshalRemoteMessageCopy(b []byte, rm *remote.RemoteMessage) error {
	rm.Reset()
	return proto.Unmarshal(b, rm)
}

// heldReads maps one transport's decoded messages to the buffers they
// alias until the stream that read them reads again. It is bounded: a
// message read by a stream that never lets go (not wrapped by heldStream)
// is decoded with copies once the bound is reached, rather than held
// forever. Safe for concurrent use.
type heldReads struct {
	mu sync.Mutex
	m  map[*remote.RemoteMessage]*sharedRead
}

// maxHeldReads bounds heldReads: one message per open stream.
const maxHeldReads = 1024

func newHeldReads() *heldReads {
	return &heldReads{m: map[*remote.RemoteMessage]*sharedRead{}}
}

func (r *heldReads) hold(rm *remote.RemoteMessage, s *sharedRead) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.m) >= maxHeldReads {
		return false
	}
	r.m[rm] = s
	return true
}

// take returns and forgets the buffer rm aliases, if rm holds one.
func (r *heldReads) take(rm *remote.RemoteMessage) (*sharedRead, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.m[rm]
	delete(r.m, rm)
	return s, ok
}

// size is how many decoded messages hold a buffer.
func (r *heldReads) size() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}

// releaseRead lets go of what rm aliases, which its stream has done with; rm
// must not be used after. The produce requests deserialized from it hold
// the buffer on.
func (t *Transport) releaseRead(rm *remote.RemoteMessage) {
	if s, ok := t.reads.take(rm); ok {
		s.release()
	}
}

// abandonRead lets go of what rm aliases when its stream stopped on it,
// before protoactor had deserialized all of its envelopes: the holds of
// its records are forgotten (see receivedHolds.forget).
func (t *Transport) abandonRead(rm *remote.RemoteMessage) {
	if s, ok := t.reads.take(rm); ok {
		t.received.forget(rm.GetMessageBatch(), s)
		s.release()
	}
}

// heldStream is the server side of one of t's remote streams. Each read
// first lets go of the bytes of the message read before: protoactor's
// endpoint reader has delivered it by then, its envelopes deserialized
// into messages of their own. Not safe for concurrent use, as a gRPC
// stream's reads are not.
type heldStream struct {
	grpc.ServerStream
	t    *Transport
	last *remote.RemoteMessage
}

func (s *heldStream) RecvMsg(m any) error {
	if s.last != nil {
		s.t.releaseRead(s.last)
		s.last = nil
	}
	err := s.ServerStream.RecvMsg(m)
	if rm, ok := m.(*remote.RemoteMessage); ok && err == nil {
		s.last = rm
	}
	return err
}

// end lets go of the message read last, when the handler returns. The
// endpoint reader reads on after every message it delivers in full, so a
// message still held then is one it stopped on (an unknown target, an
// envelope it could not deserialize, a panic).
func (s *heldStream) end() {
	if s.last != nil {
		s.t.abandonRead(s.last)
		s.last = nil
	}
}

// errRemoteWire is returned for bytes that do not parse as a RemoteMessage.
var errRemoteWire = errors.New("depot: remote codec: malformed message")

// unmarshalRemoteMessage decodes b into rm. A message batch is decoded here,
// its envelopes' data aliasing b; anything else is left to proto.
func unmarshalRemoteMessage(b []byte, rm *remote.RemoteMessage) error {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || num != 1 || typ != protowire.BytesType {
		return proto.Unmarshal(b, rm)
	}
	batch := &remote.MessageBatch{}
	all := b
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errRemoteWire
		}
		b = b[n:]
		if num != 1 || typ != protowire.BytesType {
			// Another oneof member after the batch, where proto's last
			// one wins: rare enough to leave to proto.
			return unmarshalRemoteMessageCopy(all, rm)
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return errRemoteWire
		}
		b = b[n:]
		if err := unmarshalBatch(v, batch); err != nil {
			return err
		}
	}
	rm.MessageType = &remote.RemoteMessage_MessageBatch{MessageBatch: batch}
	return nil
}

func unmarshalBatch(b []byte, batch *remote.MessageBatch) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errRemoteWire
		}
		b = b[n:]
		if typ != protowire.BytesType || num < 1 || num > 4 {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return errRemoteWire
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return errRemoteWire
		}
		b = b[n:]
		switch num {
		case 1:
			batch.TypeNames = append(batch.TypeNames, string(v))
		case 2, 4:
			pid := &actor.PID{}
			if err := proto.Unmarshal(v, pid); err != nil {
				return err
			}
			if num == 2 {
				batch.Targets = append(batch.Targets, pid)
			} else {
				batch.Senders = append(batch.Senders, pid)
			}
		case 3:
			e := &remote.MessageEnvelope{}
			if err := unmarshalEnvelope(v, e); err != nil {
				return err
			}
			batch.Envelopes = append(batch.Envelopes, e)
		}
	}
	return nil
}

func unmarshalEnvelope(b []byte, e *remote.MessageEnvelope) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errRemoteWire
		}
		b = b[n:]
		switch {
		case typ == protowire.VarintType && (num == 1 || (num >= 3 && num <= 5) || num == 7 || num == 8):
			x, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return errRemoteWire
			}
			b = b[n:]
			switch num {
			case 1:
				e.TypeId = int32(x)
			case 3:
				e.Target = int32(x)
			case 4:
				e.Sender = int32(x)
			case 5:
				e.SerializerId = int32(x)
			case 7:
				e.TargetRequestId = uint32(x)
			case 8:
				e.SenderRequestId = uint32(x)
			}
		case typ == protowire.BytesType && (num == 2 || num == 6):
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return errRemoteWire
			}
			b = b[n:]
			if num == 2 {
				e.MessageData = v[:len(v):len(v)]
				continue
			}
			if e.MessageHeader == nil {
				e.MessageHeader = &remote.MessageHeader{}
			}
			if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(v, e.MessageHeader); err != nil {
				return err
			}
		default:
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return errRemoteWire
			}
			b = b[n:]
		}
	}
	return nil
}

// dirtyPool is a gRPC buffer pool that does not clear what it hands out.
// gRPC's default pool zeroes every buffer it reuses, which on a stream of
// megabyte fetches costs as much as a copy; gRPC writes every byte it later
// reads, so the clearing buys nothing here. Each tier is a bounded free
// list and the pool keeps at most maxPoolBytes in all, and it keeps it: a
// process's memory does not swing with the collector's cycles. Safe for
// concurrent use.
type dirtyPool struct {
	tiers []*poolTier  // tiers[i] holds buffers of at least 1<<(minPoolShift+i) bytes
	kept  atomic.Int64 // capacity of the buffers in the tiers
	// gets, reused and puts count Get, the Gets served from the tiers,
	// and Put (see PoolStats).
	gets, reused, puts atomic.Int64
	// poison makes Put overwrite each buffer handed back (see
	// Transport.PoisonPool).
	poison atomic.Bool
}

// poisonByte is what a poisoned pool writes over each buffer handed back.
const poisonByte = 0xdb

// poolTier is a bounded stack of free buffers: the last one handed back is
// the first handed out, while it is likely still in the CPU's caches. (A
// queue hands out the one that waited longest; with many buffers in
// circulation, as eight partitions make, every copy into one then missed
// the caches.)
type poolTier struct {
	mu    sync.Mutex
	free  []*[]byte
	limit int
}

// fitDepth is how many buffers from the top popFit looks at.
const fitDepth = 4

// popFit takes the topmost of the fitDepth buffers on top that holds size
// bytes, or returns nil: a buffer too small for this size stays for the
// next, rather than hiding the ones under it.
func (t *poolTier) popFit(size int) *[]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(t.free)
	for i := n - 1; i >= max(n-fitDepth, 0); i-- {
		if b := t.free[i]; cap(*b) >= size {
			copy(t.free[i:], t.free[i+1:])
			t.free[n-1] = nil
			t.free = t.free[:n-1]
			return b
		}
	}
	return nil
}

func (t *poolTier) push(b *[]byte) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.free) >= t.limit {
		return false
	}
	t.free = append(t.free, b)
	return true
}

const (
	// minPoolShift and maxPoolShift bound the tiers: 256 B to 16 MiB. A
	// produce batch or a fetch chunk is 1 MiB by default, but the codec
	// copies a whole gRPC message into one buffer, and a produce request
	// may carry up to its topic's max.message.bytes, which may be raised.
	// (While the endpoint writer still packed requests together, messages
	// of 8 MiB and more made 550 MB of allocations in a 1.5 GB acks=all
	// run with a top tier of 4 MiB.) Smaller
	// and larger buffers are allocated and left to the garbage collector.
	minPoolShift = 8
	maxPoolShift = 24
	// poolTierBytes is what one tier may keep, in 2 to 1024 buffers. What
	// is out at once sets it: gRPC reads a message frame by frame (16 KiB
	// each) into buffers of the pool and holds them all until the message
	// is whole, so a 16 MiB message has 1024 frames out; a chunked fetch
	// has 8 chunks of 1 MiB on their way.
	poolTierBytes = 16 << 20
	// maxPoolBytes bounds what the whole pool keeps.
	maxPoolBytes = 64 << 20
)

func newDirtyPool() *dirtyPool {
	p := &dirtyPool{}
	for shift := minPoolShift; shift <= maxPoolShift; shift++ {
		p.tiers = append(p.tiers, &poolTier{limit: min(max(poolTierBytes>>shift, 2), 1024)})
	}
	return p
}

// floor is the tier of the largest buffers at most size bytes, -1 if none.
func floor(size int) int {
	if size < 1<<minPoolShift {
		return -1
	}
	return min(bits.Len(uint(size))-1, maxPoolShift) - minPoolShift
}

// Get returns a buffer of size bytes: one near the top of the largest tier
// at most size that happens to hold size, else one of the next tier, which
// always does, else a new one of size bytes (its capacity a size class),
// which Put later keeps in the largest tier at most its capacity. So
// buffers of one recurring size (a produce batch with its framing, say)
// come back to serve that size, not a tier twice as large.
func (p *dirtyPool) Get(size int) *[]byte {
	p.gets.Add(1)
	f := floor(size)
	for t := f; t >= 0 && t <= f+1 && t < len(p.tiers); t++ {
		if b := p.tiers[t].popFit(size); b != nil {
			p.reused.Add(1)
			p.kept.Add(-int64(cap(*b)))
			*b = (*b)[:size]
			return b
		}
	}
	b := make([]byte, size, classSize(size))
	return &b
}

// classSize rounds size up to a multiple of an eighth of the power of two
// at or below it, as an allocator's size classes do: a buffer made for one
// size then serves the slightly larger sizes that follow (produce batches
// vary), and one handed back a little shorter at its head, as a fetch's
// frame is (see encodeFetchResponse), still serves the size it was made
// for. It wastes at most an eighth.
func classSize(size int) int {
	if size < 1<<minPoolShift {
		return size
	}
	step := 1 << (bits.Len(uint(size)) - 4)
	return (size + step - 1) &^ (step - 1)
}

// Put keeps b in the largest tier its capacity holds, unless that tier is
// full or the pool keeps maxPoolBytes already; a buffer below the smallest
// tier, or over twice the largest, is left to the garbage collector.
func (p *dirtyPool) Put(b *[]byte) {
	p.puts.Add(1)
	if p.poison.Load() {
		whole := (*b)[:cap(*b)]
		for i := range whole {
			whole[i] = poisonByte
		}
	}
	c := cap(*b)
	t := floor(c)
	if t < 0 || c >= 2<<maxPoolShift {
		return
	}
	if p.kept.Add(int64(c)) > maxPoolBytes {
		p.kept.Add(-int64(c))
		return
	}
	if !p.tiers[t].push(b) {
		p.kept.Add(-int64(c))
	}
}

// NewBufferPool returns a pool of its own like the remote streams' (see
// dirtyPool): buffers by size, the last handed back first, bounded, and
// never cleared. A producer keeps its batches' buffers in one.
func NewBufferPool() mem.BufferPool { return newDirtyPool() }
