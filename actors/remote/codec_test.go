package remote

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"testing"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/messages"
)

var (
	_ encoding.CodecV2 = remoteCodec{}
	_ mem.BufferPool   = (*dirtyPool)(nil)
)

// testCodec is the codec of a transport of its own.
func testCodec() remoteCodec { return remoteCodec{t: NewTransport()} }

// patterned is n bytes that differ from one position to the next, so that
// a shifted or truncated copy does not compare equal.
func patterned(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed + byte(i>>8)
	}
	return b
}

func batchMessage(b *remote.MessageBatch) *remote.RemoteMessage {
	return &remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: b}}
}

// remoteCodecCases are the messages of a remote stream the codec must carry
// as proto does.
func remoteCodecCases() []struct {
	name string
	msg  *remote.RemoteMessage
} {
	pidA := &actor.PID{Address: "127.0.0.1:7001", Id: "orders-0"}
	pidB := &actor.PID{Address: "127.0.0.1:7002", Id: "consumer/fetcher", RequestId: 42}
	pidC := &actor.PID{Address: "127.0.0.1:7002", Id: "future$17", RequestId: 1 << 31}
	return []struct {
		name string
		msg  *remote.RemoteMessage
	}{
		{"no message", &remote.RemoteMessage{}},
		{"empty batch", batchMessage(&remote.MessageBatch{})},
		{"empty envelope", batchMessage(&remote.MessageBatch{Envelopes: []*remote.MessageEnvelope{{}}})},
		{"small data", batchMessage(&remote.MessageBatch{
			TypeNames: []string{"messages.FetchRequest"},
			Targets:   []*actor.PID{pidA},
			Senders:   []*actor.PID{pidB},
			Envelopes: []*remote.MessageEnvelope{{TypeId: 0, MessageData: []byte("hello"), Target: 0, Sender: 1, SerializerId: 0}},
		})},
		{"empty data", batchMessage(&remote.MessageBatch{
			TypeNames: []string{"actor.Terminated"},
			Targets:   []*actor.PID{pidA},
			Envelopes: []*remote.MessageEnvelope{{MessageData: []byte{}, Sender: -1}},
		})},
		{"data just under inline", batchMessage(&remote.MessageBatch{
			TypeNames: []string{"messages.FetchResponse"},
			Targets:   []*actor.PID{pidB},
			Envelopes: []*remote.MessageEnvelope{{MessageData: patterned(inlineData-1, 1), TargetRequestId: 9}},
		})},
		{"data at inline", batchMessage(&remote.MessageBatch{
			TypeNames: []string{"messages.FetchResponse"},
			Targets:   []*actor.PID{pidB},
			Envelopes: []*remote.MessageEnvelope{{MessageData: patterned(inlineData, 2), TargetRequestId: 9}},
		})},
		{"large data", batchMessage(&remote.MessageBatch{
			TypeNames: []string{"messages.FetchResponse"},
			Targets:   []*actor.PID{pidB},
			Senders:   []*actor.PID{pidA},
			Envelopes: []*remote.MessageEnvelope{{MessageData: patterned(100<<10, 3), Sender: 0, TargetRequestId: 7}},
		})},
		{"several MiB", batchMessage(&remote.MessageBatch{
			TypeNames: []string{"messages.FetchResponse"},
			Targets:   []*actor.PID{pidB},
			Envelopes: []*remote.MessageEnvelope{{MessageData: patterned(5<<20+3, 4), SenderRequestId: 3}},
		})},
		{"headers", batchMessage(&remote.MessageBatch{
			TypeNames: []string{"messages.ProduceRequest"},
			Targets:   []*actor.PID{pidA},
			Senders:   []*actor.PID{pidC},
			Envelopes: []*remote.MessageEnvelope{
				{MessageData: patterned(10, 5), MessageHeader: &remote.MessageHeader{HeaderData: map[string]string{"trace": "abc", "": "empty key"}}, Sender: 0},
				{MessageData: patterned(8<<10, 6), MessageHeader: &remote.MessageHeader{HeaderData: map[string]string{"k": ""}}},
				{MessageHeader: &remote.MessageHeader{}},
			},
		})},
		{"small headers", batchMessage(&remote.MessageBatch{
			TypeNames: []string{"messages.FetchRequest"},
			Targets:   []*actor.PID{pidA},
			Envelopes: []*remote.MessageEnvelope{
				{MessageData: []byte("x"), MessageHeader: &remote.MessageHeader{HeaderData: map[string]string{"a": "1", "b": "2"}}},
				{MessageHeader: &remote.MessageHeader{HeaderData: map[string]string{"c": ""}}, TargetRequestId: 4},
			},
		})},
		{"senders and targets with request ids", batchMessage(&remote.MessageBatch{
			TypeNames: []string{"a", "b"},
			Targets:   []*actor.PID{pidA, pidB, pidC},
			Senders:   []*actor.PID{pidC, pidB},
			Envelopes: []*remote.MessageEnvelope{
				{TypeId: 1, Target: 2, Sender: 0, TargetRequestId: 1 << 31, SenderRequestId: 0xffffffff, MessageData: []byte{1}},
				{TypeId: 0, Target: 1, Sender: 1, TargetRequestId: 5, SenderRequestId: 6, SerializerId: 1, MessageData: []byte(`{"json":true}`)},
			},
		})},
		{"several envelopes of every size", batchMessage(&remote.MessageBatch{
			TypeNames: []string{"messages.FetchResponse", "messages.ProduceResponse"},
			Targets:   []*actor.PID{pidA, pidB},
			Senders:   []*actor.PID{pidC},
			Envelopes: []*remote.MessageEnvelope{
				{TypeId: 0, MessageData: patterned(64<<10, 7), Target: 0},
				{TypeId: 1, MessageData: patterned(12, 8), Target: 1},
				{TypeId: 0, MessageData: patterned(5000, 9), Target: 1},
				{TypeId: 0, MessageData: patterned(6000, 10), Target: 0},
				{TypeId: 1, Target: 1},
				{TypeId: 0, MessageData: patterned(1<<20, 11), Target: 0, Sender: 0, SenderRequestId: 77},
				{TypeId: 1, MessageData: patterned(100, 12), Target: 1},
			},
		})},
		{"connect request", &remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{ConnectRequest: &remote.ConnectRequest{
			ConnectionType: &remote.ConnectRequest_ServerConnection{ServerConnection: &remote.ServerConnection{SystemId: "node-1", Address: "127.0.0.1:7001"}},
		}}}},
		{"connect request, client", &remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{ConnectRequest: &remote.ConnectRequest{
			ConnectionType: &remote.ConnectRequest_ClientConnection{ClientConnection: &remote.ClientConnection{SystemId: "client-9"}},
		}}}},
		{"connect response", &remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectResponse{ConnectResponse: &remote.ConnectResponse{MemberId: "m-1", Blocked: true}}}},
		{"disconnect request", &remote.RemoteMessage{MessageType: &remote.RemoteMessage_DisconnectRequest{DisconnectRequest: &remote.DisconnectRequest{}}}},
	}
}

// envelopeData is each envelope's data slice, to check that Marshal puts
// back what it took out.
func envelopeData(m *remote.RemoteMessage) [][]byte {
	var out [][]byte
	for _, e := range m.GetMessageBatch().GetEnvelopes() {
		out = append(out, e.MessageData)
	}
	return out
}

// sameSlice reports whether a and b are the same bytes in memory, not
// merely equal ones.
func sameSlice(a, b []byte) bool {
	return len(a) == len(b) && cap(a) == cap(b) && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// within reports whether sub lies inside buf's memory.
func within(sub, buf []byte) bool {
	if len(sub) == 0 {
		return true
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(sub)))
	return p >= start && p+uintptr(len(sub)) <= start+uintptr(len(buf))
}

func TestRemoteCodecMarshalMatchesProto(t *testing.T) {
	for _, tt := range remoteCodecCases() {
		t.Run(tt.name, func(t *testing.T) {
			before := envelopeData(tt.msg)
			want := proto.Clone(tt.msg)

			codec := testCodec()
			out, err := codec.Marshal(tt.msg)
			require.NoError(t, err)
			encoded := out.Materialize()
			require.Equal(t, proto.Size(tt.msg), len(encoded), "encoded size")

			got := &remote.RemoteMessage{}
			require.NoError(t, proto.Unmarshal(encoded, got))
			require.True(t, proto.Equal(want, got), "decoded by proto:\n%v\nwant:\n%v", got, want)

			// The envelopes are as they were: the same data slices.
			after := envelopeData(tt.msg)
			require.Len(t, after, len(before))
			for i := range before {
				require.True(t, sameSlice(before[i], after[i]), "envelope %d data not restored", i)
			}
			require.True(t, proto.Equal(want, tt.msg), "Marshal changed its input")

			// Data of inlineData bytes or more travels as its own buffer,
			// not copied; smaller data is copied next to its framing.
			for i, data := range before {
				handedOver := false
				for _, buf := range out {
					if sameSlice(buf.ReadOnlyData(), data) {
						handedOver = true
					}
				}
				require.Equal(t, len(data) >= inlineData, handedOver, "envelope %d of %d bytes", i, len(data))
			}

			// A batch whose data is all copied is one buffer of the pool,
			// made its final size at once, that goes back to the pool
			// once written, when it is not below gRPC's pooling
			// threshold (1 KiB).
			whole := tt.msg.GetMessageBatch() != nil
			for _, data := range before {
				whole = whole && len(data) < inlineData
			}
			if whole {
				require.Len(t, out, 1)
				require.Equal(t, int64(1), codec.t.PoolStats().Gets)
				out.Free()
				if !mem.IsBelowBufferPoolingThreshold(len(encoded)) {
					require.Equal(t, int64(1), codec.t.PoolStats().Puts, "the frame's buffer went back to the pool")
				}
			}
		})
	}
}

func TestRemoteCodecUnmarshalMatchesProto(t *testing.T) {
	for _, tt := range remoteCodecCases() {
		t.Run(tt.name, func(t *testing.T) {
			encoded, err := proto.Marshal(tt.msg)
			require.NoError(t, err)

			got := &remote.RemoteMessage{}
			require.NoError(t, unmarshalRemoteMessage(encoded, got))
			require.True(t, proto.Equal(tt.msg, got), "decoded:\n%v\nwant:\n%v", got, tt.msg)

			// Envelope data aliases the input rather than copying it.
			for i, e := range got.GetMessageBatch().GetEnvelopes() {
				require.True(t, within(e.MessageData, encoded), "envelope %d data copied", i)
				require.Equal(t, len(e.MessageData), cap(e.MessageData), "envelope %d data may be appended to over its neighbour", i)
			}

			// Through the codec's entry point, with one buffer.
			got = &remote.RemoteMessage{}
			require.NoError(t, testCodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(encoded)}, got))
			require.True(t, proto.Equal(tt.msg, got))
		})
	}
}

// gRPC may hand a message over in several buffers, cut anywhere.
func TestRemoteCodecUnmarshalBufferSlice(t *testing.T) {
	for _, tt := range remoteCodecCases() {
		t.Run(tt.name, func(t *testing.T) {
			encoded, err := proto.Marshal(tt.msg)
			require.NoError(t, err)
			for _, parts := range []int{2, 3, 7} {
				var data mem.BufferSlice
				step := max(len(encoded)/parts, 1)
				for start := 0; start < len(encoded); start += step {
					end := min(start+step, len(encoded))
					data = append(data, mem.SliceBuffer(append([]byte(nil), encoded[start:end]...)))
				}
				got := &remote.RemoteMessage{}
				require.NoError(t, testCodec().Unmarshal(data, got))
				require.True(t, proto.Equal(tt.msg, got), "in %d parts", parts)
			}
		})
	}
}

// scribblingPool is a buffer pool that scribbles over what is given back,
// so that a decoded message still aliasing a freed buffer shows.
type scribblingPool struct{}

func (scribblingPool) Get(n int) *[]byte {
	b := make([]byte, n)
	return &b
}

func (scribblingPool) Put(b *[]byte) {
	for i := range *b {
		(*b)[i] = 0xAA
	}
}

// gRPC frees the received buffer when Unmarshal returns; the decoded data
// must not go back to the pool with it.
func TestRemoteCodecUnmarshalOutlivesBuffer(t *testing.T) {
	data := patterned(64<<10, 13)
	msg := batchMessage(&remote.MessageBatch{
		TypeNames: []string{"messages.FetchResponse"},
		Targets:   []*actor.PID{{Address: "a", Id: "b"}},
		Envelopes: []*remote.MessageEnvelope{{MessageData: data}},
	})
	encoded, err := proto.Marshal(msg)
	require.NoError(t, err)
	pool := scribblingPool{}
	buf := pool.Get(len(encoded))
	copy(*buf, encoded)
	received := mem.NewBuffer(buf, pool)

	c := testCodec()
	got := &remote.RemoteMessage{}
	require.NoError(t, c.Unmarshal(mem.BufferSlice{received}, got))
	received.Free()
	require.Equal(t, data, got.GetMessageBatch().GetEnvelopes()[0].GetMessageData())

	// A message other than RemoteMessage goes through proto.
	pid := &actor.PID{Address: "x", Id: "y", RequestId: 3}
	out, err := c.Marshal(pid)
	require.NoError(t, err)
	var back actor.PID
	require.NoError(t, c.Unmarshal(out, &back))
	require.True(t, proto.Equal(pid, &back))
}

func TestRemoteCodecRejects(t *testing.T) {
	c := testCodec()
	_, err := c.Marshal(struct{}{})
	require.Error(t, err)
	require.Error(t, c.Unmarshal(mem.BufferSlice{mem.SliceBuffer{0x0a, 0x00}}, &struct{}{}))
	require.Equal(t, "proto", c.Name())

	valid, err := proto.Marshal(batchMessage(&remote.MessageBatch{
		TypeNames: []string{"t"},
		Targets:   []*actor.PID{{Address: "a", Id: "b"}},
		Envelopes: []*remote.MessageEnvelope{{MessageData: []byte("data"), TargetRequestId: 3}},
	}))
	require.NoError(t, err)
	tests := []struct {
		name string
		b    []byte
	}{
		{"truncated", valid[:len(valid)-1]},
		{"batch longer than input", []byte{0x0a, 0x05, 0x1a, 0x00}},
		{"bad tag", []byte{0x0a, 0x01, 0x80}},
		{"envelope data longer than envelope", []byte{0x0a, 0x04, 0x1a, 0x02, 0x12, 0x05}},
		{"bad pid", []byte{0x0a, 0x03, 0x12, 0x01, 0xff}},
		{"bad varint in envelope", []byte{0x0a, 0x0d, 0x1a, 0x0b, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := &remote.RemoteMessage{}
			require.Error(t, unmarshalRemoteMessage(tt.b, got))
		})
	}
}

// discardUnknown clears the unknown fields of m and the messages in it.
// The codec skips unknown fields of batches and envelopes where proto keeps
// them; neither re-encodes them, so they are no part of the comparison.
func discardUnknown(m protoreflect.Message) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len(); i++ {
				discardUnknown(v.List().Get(i).Message())
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				discardUnknown(mv.Message())
				return true
			})
		case fd.Message() != nil && !fd.IsMap():
			discardUnknown(v.Message())
		}
		return true
	})
	if m.GetUnknown() != nil {
		m.SetUnknown(nil)
	}
}

func FuzzRemoteCodecUnmarshal(f *testing.F) {
	for _, tt := range remoteCodecCases() {
		if proto.Size(tt.msg) > 1<<10 {
			continue // the fuzzer mutates small inputs better
		}
		b, err := proto.Marshal(tt.msg)
		require.NoError(f, err)
		f.Add(b)
		out, err := testCodec().Marshal(tt.msg)
		require.NoError(f, err)
		if m := out.Materialize(); !bytes.Equal(m, b) {
			f.Add(m) // the same message, fields in the codec's order
		}
	}
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x00, 0x0a, 0x00})
	f.Add([]byte{0x0a, 0x04, 0x1a, 0x02, 0x12, 0x00})
	// Unknown and mistyped fields in a batch and an envelope.
	f.Add([]byte{0x0a, 0x08, 0x28, 0x01, 0x10, 0x05, 0x1a, 0x02, 0x48, 0x01})
	// A batch whose produce request takes the aliasing path.
	big, err := proto.Marshal(recordsBatch(f, recordsMessage(produceRequestName, patterned(inlineData, 14)), recordsMessage(fetchResponseName, nil)))
	require.NoError(f, err)
	f.Add(big)
	actortest.AddSeedFiles(f, "FuzzRemoteCodecUnmarshal", func(b []byte) { f.Add(b) })
	f.Fuzz(func(t *testing.T, b []byte) {
		input := bytes.Clone(b)
		got := &remote.RemoteMessage{}
		err := unmarshalRemoteMessage(b, got)
		require.Equal(t, input, b, "Unmarshal changed its input")

		// Through the codec's entry point, which may hand envelopes to
		// aliasSerializer but decodes the same.
		tr := NewTransport()
		viaCodec := &remote.RemoteMessage{}
		cerr := remoteCodec{t: tr}.Unmarshal(mem.BufferSlice{mem.SliceBuffer(input)}, viaCodec)
		require.Equal(t, err == nil, cerr == nil, "unmarshalRemoteMessage: %v, codec: %v", err, cerr)
		if cerr == nil {
			// Each envelope handed to aliasSerializer that it decodes
			// gives records that hold the buffer, and only those:
			// released, they leave no hold behind.
			delivered := true
			for _, e := range viaCodec.GetMessageBatch().GetEnvelopes() {
				if e.SerializerId != aliasSerializerID {
					continue
				}
				m, err := remote.Deserialize(e.MessageData, viaCodec.GetMessageBatch().TypeNames[e.TypeId], e.SerializerId)
				if err != nil {
					delivered = false
					continue
				}
				releaseProduces(tr, m)
			}
			tr.releaseRead(viaCodec)
			if delivered {
				require.Zero(t, tr.received.size(), "holds left after every request was released")
			}
			// Proto's id and aliasSerializer's read the same; the codec
			// picks between them.
			proto0 := func(id int32) bool { return id == 0 || id == aliasSerializerID }
			want := got.GetMessageBatch().GetEnvelopes()
			for i, e := range viaCodec.GetMessageBatch().GetEnvelopes() {
				if i < len(want) && proto0(want[i].SerializerId) && proto0(e.SerializerId) {
					e.SerializerId = want[i].SerializerId
				}
			}
			require.True(t, proto.Equal(got, viaCodec))
		}
		want := &remote.RemoteMessage{}
		if proto.Unmarshal(b, want) != nil || err != nil {
			return
		}
		discardUnknown(want.ProtoReflect())
		discardUnknown(got.ProtoReflect())
		require.True(t, proto.Equal(want, got), "proto:\n%v\ncodec:\n%v", want, got)
		// What was decoded encodes again as proto would.
		out, err := testCodec().Marshal(got)
		require.NoError(t, err)
		again := &remote.RemoteMessage{}
		require.NoError(t, proto.Unmarshal(out.Materialize(), again))
		require.True(t, proto.Equal(got, again))
	})
}

func TestDirtyPoolGet(t *testing.T) {
	p := newDirtyPool()
	for _, size := range []int{0, 1, 255, 256, 257, 1000, 1024, 1025, 4096, 5000, 1 << 15, 1<<15 + 1, 1 << 20, 3<<20 + 5, 16 << 20, 16<<20 + 1, 40 << 20} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			for range 3 {
				b := p.Get(size)
				require.Len(t, *b, size)
				if size > 0 {
					(*b)[0], (*b)[size-1] = 1, 2 // the whole length is usable
				}
				p.Put(b)
			}
		})
	}
}

// A buffer given back is handed out again as it was: capacity kept, bytes
// not cleared. A pool may drop any one buffer, so reuse is asked of one
// attempt in many.
func TestDirtyPoolReuses(t *testing.T) {
	for _, size := range []int{1 << minPoolShift, 300, 4096, 20000, 1 << 20, 1 << maxPoolShift, 1<<maxPoolShift + 5} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			p := newDirtyPool()
			reused := false
			for attempt := 0; attempt < 50 && !reused; attempt++ {
				b := p.Get(size)
				c := cap(*b)
				(*b)[0], (*b)[size-1] = 0x5A, 0xA5
				first := unsafe.SliceData(*b)
				*b = (*b)[:1] // Put is given a prefix, as gRPC does
				p.Put(b)
				b2 := p.Get(size)
				require.Len(t, *b2, size)
				if unsafe.SliceData(*b2) == first {
					reused = true
					require.Equal(t, c, cap(*b2))
					require.Equal(t, byte(0x5A), (*b2)[0], "reused buffer was cleared")
					require.Equal(t, byte(0xA5), (*b2)[size-1], "reused buffer was cleared")
				}
			}
			require.True(t, reused, "a buffer put back is never handed out again")
		})
	}
}

// Whatever capacities are given back, Get never hands out a buffer too
// small for the length asked, and buffers below the smallest tier or far
// over the largest are not kept.
func TestDirtyPoolCapacities(t *testing.T) {
	top := 1 << maxPoolShift
	caps := []int{1, 100, 255, 256, 300, 512, 1000, 1024, 2048, 3 << 10, 5000, 8 << 10, 40000, 1<<20 + 1, top - 1, top, top + 1, 2*top - 1}
	sizes := []int{0, 1, 200, 256, 257, 301, 513, 1024, 1025, 3000, 4097, 9000, 40001, 1 << 20, 1<<20 + 2, top - 1, top, top + 2, 2*top - 1, 2 * top, 3 * top}
	p := newDirtyPool()
	for round := range 3 {
		for _, c := range caps {
			b := make([]byte, c)
			p.Put(&b)
		}
		for _, size := range sizes {
			b := p.Get(size)
			require.Len(t, *b, size, "round %d", round)
			require.GreaterOrEqual(t, cap(*b), size)
			p.Put(b)
		}
	}
	t.Run("not kept", func(t *testing.T) {
		for _, c := range []int{1, 100, 1<<minPoolShift - 1, 2 << maxPoolShift, 4 << maxPoolShift} {
			p := newDirtyPool()
			b := make([]byte, c)
			p.Put(&b)
			for i, tier := range p.tiers {
				require.Zero(t, tierLen(tier), "buffer of capacity %d kept in tier %d", c, i)
			}
		}
	})
}

// The buffer handed back last is handed out first: it is the one most
// likely still in the CPU's caches.
func TestDirtyPoolHandsOutTheLastBufferFirst(t *testing.T) {
	p := newDirtyPool()
	var bufs []*[]byte
	for range 4 {
		bufs = append(bufs, p.Get(1<<20))
	}
	for _, b := range bufs {
		p.Put(b)
	}
	for i := len(bufs) - 1; i >= 0; i-- {
		require.Same(t, bufs[i], p.Get(1<<20), "buffer %d", i)
	}
}

// A buffer too small for a size, handed back last, does not hide a larger
// one under it, and stays for a smaller size.
func TestDirtyPoolLooksUnderASmallBuffer(t *testing.T) {
	p := newDirtyPool()
	large, small := make([]byte, 1<<20+1<<19), make([]byte, 1<<20)
	p.Put(&large)
	p.Put(&small)
	got := p.Get(1<<20 + 1<<18)
	require.Equal(t, unsafe.SliceData(large), unsafe.SliceData(*got), "the fitting buffer under the small one")
	got = p.Get(1 << 20)
	require.Equal(t, unsafe.SliceData(small), unsafe.SliceData(*got))
}

// The pool keeps at most maxPoolBytes however much is given back, and
// counts what it hands out again.
func TestDirtyPoolBound(t *testing.T) {
	p := newDirtyPool()
	kept := func() int {
		n := 0
		for _, tier := range p.tiers {
			tier.mu.Lock()
			for _, b := range tier.free {
				n += cap(*b)
			}
			tier.mu.Unlock()
		}
		return n
	}
	for _, size := range []int{1 << 10, 16 << 10, 1 << 20, 4 << 20} {
		for range 200 {
			b := make([]byte, size)
			p.Put(&b)
		}
	}
	require.LessOrEqual(t, kept(), maxPoolBytes)
	require.Greater(t, kept(), maxPoolBytes/2, "the pool keeps what it may")
	require.Equal(t, int64(kept()), p.kept.Load())
	for range 100 {
		p.Get(1 << 20)
		p.Get(16 << 10)
	}
	require.Equal(t, int64(kept()), p.kept.Load(), "what Get hands out is no longer counted")
}

// A buffer made for one size serves sizes up to an eighth larger, and one
// given back a little short at its head still serves the size it was made
// for: a fetch's frame comes back so (see encodeFetchResponse).
func TestDirtyPoolSizeClasses(t *testing.T) {
	for _, size := range []int{256, 300, 4096, 5000, 1<<20 + fetchRecordsReserve + 61, 3 << 20} {
		c := classSize(size)
		require.GreaterOrEqual(t, c, size)
		require.LessOrEqual(t, c-size, size/8, "size %d", size)
	}
	p := newDirtyPool()
	size := 1<<20 + fetchRecordsReserve + 61
	b := p.Get(size)
	first := unsafe.SliceData(*b)
	short := (*b)[fetchRecordsReserve-40:]
	p.Put(&short)
	again := p.Get(size)
	require.Equal(t, unsafe.Add(unsafe.Pointer(first), fetchRecordsReserve-40), unsafe.Pointer(unsafe.SliceData(*again)), "the frame's buffer serves the next fetch")
}

// The codec's size arithmetic against protowire's, for the boundaries where
// a length prefix grows a byte.
func TestEnvelopeSize(t *testing.T) {
	for _, n := range []int{0, 1, 127, 128, 16383, 16384, 1<<21 - 1, 1 << 21} {
		e := &remote.MessageEnvelope{TypeId: 3, MessageData: make([]byte, n)}
		bare := proto.Size(&remote.MessageEnvelope{TypeId: 3})
		require.Equal(t, proto.Size(e), envelopeSize(bare, n), "data of %d bytes", n)
	}
}

// fakeServerStream hands out its messages, each decoded by codec as gRPC
// would.
type fakeServerStream struct {
	grpc.ServerStream
	codec remoteCodec
	wire  [][]byte
}

func (s *fakeServerStream) RecvMsg(m any) error {
	if len(s.wire) == 0 {
		return io.EOF
	}
	b := s.wire[0]
	s.wire = s.wire[1:]
	half := len(b) / 2
	return s.codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b[:half]), mem.SliceBuffer(b[half:])}, m)
}

// A stream holds the buffer of the message it read last, and only that:
// each read lets go of the one before, and the end of the stream of the
// last. Until then the decoded data stays intact.
func TestHeldStreamLetsGoOnNextRead(t *testing.T) {
	tr := NewTransport()
	held := tr.reads.size
	before := held()
	var encoded [][]byte
	for i := range 3 {
		b, err := proto.Marshal(batchMessage(&remote.MessageBatch{
			TypeNames: []string{"t"},
			Envelopes: []*remote.MessageEnvelope{{MessageData: patterned(64<<10, byte(i))}},
		}))
		require.NoError(t, err)
		encoded = append(encoded, b)
	}
	hs := &heldStream{ServerStream: &fakeServerStream{codec: remoteCodec{t: tr}, wire: encoded}, t: tr}
	for i := range 3 {
		rm := &remote.RemoteMessage{}
		require.NoError(t, hs.RecvMsg(rm))
		require.Equal(t, before+1, held(), "message %d", i)
		require.Equal(t, patterned(64<<10, byte(i)), rm.GetMessageBatch().GetEnvelopes()[0].GetMessageData())
	}
	require.ErrorIs(t, hs.RecvMsg(&remote.RemoteMessage{}), io.EOF)
	require.Equal(t, before, held(), "a failed read holds nothing")
	hs.end()
	require.Equal(t, before, held())
}

// Only a batch holds its buffer: a connect message is decoded by proto,
// which copies, so a stream that never reads again (a client's) keeps
// nothing.
func TestRemoteCodecHoldsOnlyBatches(t *testing.T) {
	tr := NewTransport()
	before := tr.reads.size()
	b, err := proto.Marshal(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{
		ConnectRequest: &remote.ConnectRequest{ConnectionType: &remote.ConnectRequest_ServerConnection{
			ServerConnection: &remote.ServerConnection{SystemId: "peer", Address: "127.0.0.1:1"},
		}},
	}})
	require.NoError(t, err)
	rm := &remote.RemoteMessage{}
	require.NoError(t, remoteCodec{t: tr}.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, rm))
	require.Equal(t, "peer", rm.GetConnectRequest().GetServerConnection().GetSystemId())
	require.Equal(t, before, tr.reads.size())
}

// receive decodes msg as a server stream of tr does: encoded by the
// sender's codec, cut into several buffers, decoded by tr's.
func receive(t *testing.T, tr *Transport, msg *remote.RemoteMessage) *remote.RemoteMessage {
	t.Helper()
	out, err := testCodec().Marshal(msg)
	require.NoError(t, err)
	encoded := out.Materialize()
	var data mem.BufferSlice
	for start := 0; start < len(encoded); start += 16 << 10 {
		data = append(data, mem.SliceBuffer(bytes.Clone(encoded[start:min(start+16<<10, len(encoded))])))
	}
	got := &remote.RemoteMessage{}
	require.NoError(t, remoteCodec{t: tr}.Unmarshal(data, got))
	return got
}

// releaseProduces releases to tr the produce requests m carries, as their
// partitions do.
func releaseProduces(tr *Transport, m any) {
	switch m := m.(type) {
	case *messages.ProduceRequest:
		tr.Release(m)
	case *messages.ProduceRequests:
		for _, r := range m.Requests {
			tr.Release(r)
		}
	}
}

// deliver deserializes each envelope of batch as protoactor's endpoint
// reader does.
func deliver(t *testing.T, batch *remote.MessageBatch) []proto.Message {
	t.Helper()
	var out []proto.Message
	for i, e := range batch.GetEnvelopes() {
		m, err := remote.Deserialize(e.MessageData, batch.TypeNames[e.TypeId], e.SerializerId)
		require.NoError(t, err, "envelope %d", i)
		out = append(out, m.(proto.Message))
	}
	return out
}

// recordsBatch is a batch of msgs, each in an envelope of its own, sent
// with serializer id 0 as a protoactor sender does.
func recordsBatch(t testing.TB, msgs ...proto.Message) *remote.RemoteMessage {
	t.Helper()
	b := &remote.MessageBatch{Targets: []*actor.PID{{Address: "127.0.0.1:7001", Id: "orders-0"}}}
	ids := map[string]int32{}
	for _, m := range msgs {
		name := string(proto.MessageName(m))
		if _, ok := ids[name]; !ok {
			ids[name] = int32(len(b.TypeNames))
			b.TypeNames = append(b.TypeNames, name)
		}
		data, err := proto.Marshal(m)
		require.NoError(t, err)
		b.Envelopes = append(b.Envelopes, &remote.MessageEnvelope{TypeId: ids[name], MessageData: data, TargetRequestId: uint32(len(b.Envelopes))})
	}
	return batchMessage(b)
}

// A large ProduceRequest is handed to aliasSerializer, and reads back as
// sent, its records aliasing the received buffer, which the pool gets back
// only once the stream has read on and every such request is released;
// small ones and other types (a FetchResponse among them) stay with proto.
func TestRemoteCodecAliasesRecords(t *testing.T) {
	msgs := []proto.Message{
		recordsMessage(produceRequestName, patterned(1<<20, 1)),
		recordsMessage(produceRequestName, patterned(100, 2)),
		&messages.ProduceResponse{Topic: "orders", ErrorMessage: string(bytes.Repeat([]byte("x"), 2*inlineData))},
		recordsMessage(fetchResponseName, patterned(inlineData, 3)),
		recordsMessage(produceRequestName, patterned(64<<10, 4)),
		recordsMessage(fetchResponseName, nil),
		recordsMessage(produceRequestName, patterned(inlineData, 5)),
	}
	aliased := []bool{true, false, false, false, true, false, true}
	tr := NewTransport()
	got := receive(t, tr, recordsBatch(t, msgs...))
	require.Equal(t, 1, tr.reads.size(), "the stream holds the buffer")
	require.Equal(t, 3, tr.received.size(), "each aliased request's records hold it")

	batch := got.GetMessageBatch()
	for i, e := range batch.GetEnvelopes() {
		want := int32(0)
		if aliased[i] {
			want = aliasSerializerID
		}
		require.Equal(t, want, e.SerializerId, "envelope %d", i)
	}
	delivered := deliver(t, batch)
	for i, m := range delivered {
		require.True(t, proto.Equal(msgs[i], m), "envelope %d:\n%v", i, m)
		if aliased[i] {
			r := recordsOf(t, m)
			require.True(t, within(r, batch.Envelopes[i].MessageData), "envelope %d records copied", i)
			require.Equal(t, len(r), cap(r))
		}
	}

	// The stream reads on; the requests still hold the buffer, so whatever
	// the pool hands out of that size may be written over without touching
	// their records.
	tr.releaseRead(got)
	size := proto.Size(got)
	tier := floor(size)
	require.GreaterOrEqual(t, tier, 0)
	pool := tr.buffers
	var taken []*[]byte
	for range pool.tiers[tier].limit + pool.tiers[min(tier+1, len(pool.tiers)-1)].limit + 1 {
		b := pool.Get(size)
		for i := range *b {
			(*b)[i] = 0xAA
		}
		taken = append(taken, b)
	}
	for _, b := range taken {
		pool.Put(b)
	}
	for i, m := range delivered {
		if aliased[i] {
			require.True(t, proto.Equal(msgs[i], m), "envelope %d changed after the pool was reused", i)
		}
	}

	// A partition rewrites each batch's base offset in place: records of
	// one envelope do not share bytes with those of another.
	for i, m := range delivered {
		if aliased[i] {
			r := recordsOf(t, m)
			for j := range 8 {
				r[j] = byte(i)
			}
		}
	}
	for i, m := range delivered {
		if _, ok := m.(*messages.ProduceResponse); ok {
			continue
		}
		want := bytes.Clone(recordsOf(t, msgs[i]))
		if aliased[i] {
			for j := range 8 {
				want[j] = byte(i)
			}
		}
		require.Equal(t, want, recordsOf(t, m), "envelope %d", i)
	}

	// Released, the last of them gives the buffer back to the pool.
	start := unsafe.SliceData(batch.Envelopes[0].MessageData)
	defer emptyTiers(pool, size)()
	for i, m := range delivered {
		if aliased[i] {
			require.False(t, pooledBufferHolds(pool, size, start), "buffer back in the pool before request %d is released", i)
			tr.Release(m.(*messages.ProduceRequest))
		}
	}
	require.True(t, pooledBufferHolds(pool, size, start), "the buffer did not go back to the pool")
	require.Zero(t, tr.received.size())
}

// tierLen is how many buffers tier holds.
func tierLen(tier *poolTier) int {
	tier.mu.Lock()
	defer tier.mu.Unlock()
	return len(tier.free)
}

// emptyTiers takes every buffer out of pool's tiers that serve size, so
// that the next buffer put back is kept, and returns a func that puts them
// back.
func emptyTiers(pool *dirtyPool, size int) func() {
	var taken []*[]byte
	for t := floor(size); t <= floor(size)+1 && t < len(pool.tiers); t++ {
		for b := pool.tiers[t].popFit(0); b != nil; b = pool.tiers[t].popFit(0) {
			pool.kept.Add(-int64(cap(*b)))
			taken = append(taken, b)
		}
	}
	return func() {
		for _, b := range taken {
			pool.Put(b)
		}
	}
}

// pooledBufferHolds reports whether a buffer in pool's tiers that serve
// size holds the byte at p.
func pooledBufferHolds(pool *dirtyPool, size int, p *byte) bool {
	for t := floor(size); t <= floor(size)+1 && t < len(pool.tiers); t++ {
		tier := pool.tiers[t]
		tier.mu.Lock()
		free := slices.Clone(tier.free)
		tier.mu.Unlock()
		for _, b := range free {
			if within(unsafe.Slice(p, 1), (*b)[:cap(*b)]) {
				return true
			}
		}
	}
	return false
}

// The requests of a large ProduceRequests read back as sent, their records
// aliasing the received buffer, and each holds it (or a copy carrying its
// records does): the pool gets it back only once the stream has read on
// and every one of them is released. A large ProduceRequests with no
// requests holds nothing.
func TestRemoteCodecAliasesBundledRecords(t *testing.T) {
	want := &messages.ProduceRequests{Requests: []*messages.ProduceRequest{
		{Topic: "a", Partition: 0, Acks: 1, CorrelationId: 1, Records: patterned(64<<10, 1)},
		{Topic: "a", Partition: 1, Acks: 1, CorrelationId: 2},
		{Topic: "b", Partition: 7, Acks: -1, CorrelationId: 3, Records: patterned(100, 2)},
	}}
	none := &messages.ProduceRequests{}
	none.ProtoReflect().SetUnknown(appendBytesField(nil, 2, patterned(2*inlineData, 3)))
	tr := NewTransport()
	got := receive(t, tr, recordsBatch(t, want, none))
	batch := got.GetMessageBatch()
	for i, e := range batch.GetEnvelopes() {
		require.Equal(t, aliasSerializerID, e.SerializerId, "envelope %d", i)
	}
	require.Equal(t, 2, tr.received.size(), "the requests with records hold the buffer")
	delivered := deliver(t, batch)
	require.True(t, proto.Equal(want, delivered[0]), "got %v", delivered[0])
	require.True(t, proto.Equal(none, delivered[1]), "got %v", delivered[1])
	reqs := delivered[0].(*messages.ProduceRequests).Requests
	for i, r := range reqs {
		require.True(t, within(r.Records, batch.Envelopes[0].MessageData), "request %d records copied", i)
		require.Equal(t, len(r.Records), cap(r.Records))
	}

	start := unsafe.SliceData(batch.Envelopes[0].MessageData)
	size := proto.Size(got)
	defer emptyTiers(tr.buffers, size)()
	tr.releaseRead(got)
	for i, r := range reqs {
		require.False(t, pooledBufferHolds(tr.buffers, size, start), "buffer back in the pool before request %d is released", i)
		if i == 0 {
			// Handed on as a copy (as the partition manager does), the
			// copy releases the records' hold, and the first request,
			// released after it, lets go of nothing more.
			c := &messages.ProduceRequest{Records: r.Records}
			tr.Release(c)
			require.Equal(t, 1, tr.received.size())
			tr.Release(r)
			require.False(t, pooledBufferHolds(tr.buffers, size, start), "the copy's hold was let go twice")
			continue
		}
		tr.Release(r)
	}
	require.True(t, pooledBufferHolds(tr.buffers, size, start), "the buffer did not go back to the pool")
	require.Zero(t, tr.received.size())
}

// A replica fetch answer's partitions arrive with their records aliasing
// the received buffer, each holding it until its follower releases it.
func TestRemoteCodecAliasesReplicaFetchedRecords(t *testing.T) {
	want := &messages.ReplicaFetchResponse{CorrelationId: 7, Partitions: []*messages.ReplicaFetchedPartition{
		{Topic: "a", Partition: 0, FetchOffset: 10, HighWatermark: 12, Records: patterned(64<<10, 1)},
		{Topic: "a", Partition: 1, Error: messages.ErrorCode_FENCED_LEADER_EPOCH},
		{Topic: "b", Partition: 7, Records: patterned(100, 2)},
	}}
	tr := NewTransport()
	got := receive(t, tr, recordsBatch(t, want))
	batch := got.GetMessageBatch()
	require.Equal(t, aliasSerializerID, batch.Envelopes[0].SerializerId)
	require.Equal(t, 2, tr.received.size(), "the partitions with records hold the buffer")
	delivered := deliver(t, batch)
	require.True(t, proto.Equal(want, delivered[0]), "got %v", delivered[0])
	parts := delivered[0].(*messages.ReplicaFetchResponse).Partitions
	for i, p := range parts {
		require.True(t, within(p.Records, batch.Envelopes[0].MessageData), "partition %d records copied", i)
		require.Equal(t, len(p.Records), cap(p.Records))
	}
	require.Equal(t, int64(2), tr.PoolStats().Aliased)

	start := unsafe.SliceData(batch.Envelopes[0].MessageData)
	size := proto.Size(got)
	defer emptyTiers(tr.buffers, size)()
	tr.releaseRead(got)
	for i, p := range parts {
		require.False(t, pooledBufferHolds(tr.buffers, size, start), "buffer back in the pool before partition %d is released", i)
		tr.ReleaseRecords(p.Records)
		tr.ReleaseRecords(p.Records) // a second release does nothing
	}
	require.True(t, pooledBufferHolds(tr.buffers, size, start), "the buffer did not go back to the pool")
	require.Zero(t, tr.PoolStats().Held)
}

// Produce requests protoactor never deserializes in a message its stream
// reads past (a suspended endpoint reader skips whole messages) keep their
// hold, and so the buffer from the pool: nothing tells them from requests
// still on their way to a partition. (A stream that stops on a message
// forgets them: see TestStoppedStreamForgetsItsHolds.)
func TestRemoteCodecUnmetAliasesHold(t *testing.T) {
	msg := recordsBatch(t, recordsMessage(produceRequestName, patterned(64<<10, 1)), recordsMessage(produceRequestName, patterned(64<<10, 2)))
	tr := NewTransport()
	got := receive(t, tr, msg)
	batch := got.GetMessageBatch()
	first, err := remote.Deserialize(batch.Envelopes[0].MessageData, batch.TypeNames[0], batch.Envelopes[0].SerializerId)
	require.NoError(t, err)
	start := unsafe.SliceData(batch.Envelopes[0].MessageData)
	size := proto.Size(got)
	defer emptyTiers(tr.buffers, size)()
	tr.releaseRead(got)
	require.Equal(t, 2, tr.received.size())
	tr.Release(first.(*messages.ProduceRequest))
	require.Equal(t, 1, tr.received.size(), "the envelope never deserialized keeps its hold")
	require.False(t, pooledBufferHolds(tr.buffers, size, start), "the buffer went back to the pool under records that hold it")
	tr.Release(first.(*messages.ProduceRequest)) // a second release does nothing
	require.Equal(t, 1, tr.received.size())
}

// A stream that stops on a batch (protoactor stops at an envelope it
// cannot deliver) forgets the holds of its records, delivered or not, and
// its buffer goes to the garbage collector rather than the pool: the
// requests delivered before the stop keep their records intact, and their
// release does nothing.
func TestStoppedStreamForgetsItsHolds(t *testing.T) {
	msg := recordsBatch(t,
		recordsMessage(produceRequestName, patterned(64<<10, 1)),
		&messages.ProduceRequests{Requests: []*messages.ProduceRequest{{Topic: "a", Records: patterned(8<<10, 2)}}},
	)
	encoded, err := proto.Marshal(msg)
	require.NoError(t, err)
	tr := NewTransport()
	hs := &heldStream{ServerStream: &fakeServerStream{codec: remoteCodec{t: tr}, wire: [][]byte{encoded}}, t: tr}
	got := &remote.RemoteMessage{}
	require.NoError(t, hs.RecvMsg(got))
	require.Equal(t, 2, tr.received.size())
	batch := got.GetMessageBatch()
	first, err := remote.Deserialize(batch.Envelopes[0].MessageData, batch.TypeNames[0], batch.Envelopes[0].SerializerId)
	require.NoError(t, err)
	start := unsafe.SliceData(batch.Envelopes[0].MessageData)
	size := proto.Size(got)
	defer emptyTiers(tr.buffers, size)()

	hs.end()
	require.Zero(t, tr.received.size(), "the holds of a stopped batch are kept")
	require.Zero(t, tr.reads.size())
	require.False(t, pooledBufferHolds(tr.buffers, size, start), "the buffer went back to the pool under a delivered request")
	tr.Release(first.(*messages.ProduceRequest))
	require.False(t, pooledBufferHolds(tr.buffers, size, start), "a forgotten hold was let go")
	require.Equal(t, patterned(64<<10, 1), first.(*messages.ProduceRequest).Records)

	// A stream that ends after reading on holds nothing to forget.
	tr = NewTransport()
	hs = &heldStream{ServerStream: &fakeServerStream{codec: remoteCodec{t: tr}, wire: [][]byte{encoded}}, t: tr}
	require.NoError(t, hs.RecvMsg(&remote.RemoteMessage{}))
	require.ErrorIs(t, hs.RecvMsg(&remote.RemoteMessage{}), io.EOF)
	hs.end()
	require.Equal(t, 2, tr.received.size(), "a batch read past is not forgotten")
}

// Past maxHeldProduces holds, every hold is forgotten at once, without
// letting go of its buffer, which never returns to the pool: releasing
// its records afterwards does nothing.
func TestReceivedHoldsBounded(t *testing.T) {
	tr := NewTransport()
	r := tr.received
	envelope := func(seed byte) []byte {
		b, err := proto.Marshal(recordsMessage(produceRequestName, []byte{seed}))
		require.NoError(t, err)
		return b
	}
	// One buffer the first hold is on, then holds on others up to the
	// bound.
	buf := envelope(1)
	first := &sharedRead{buf: &buf, pool: tr.buffers}
	first.refs.Store(1)
	r.hold(produceRequestName, buf, first)
	require.Equal(t, int32(2), first.refs.Load())
	for i := 1; i < maxHeldProduces; i++ {
		b := envelope(byte(i))
		s := &sharedRead{buf: &b, pool: tr.buffers}
		s.refs.Store(1)
		r.hold(produceRequestName, b, s)
	}
	require.Equal(t, maxHeldProduces, r.size())
	b := envelope(0)
	last := &sharedRead{buf: &b, pool: tr.buffers}
	last.refs.Store(1)
	r.hold(produceRequestName, b, last)
	require.Equal(t, 1, r.size(), "the holds before were forgotten")

	records, ok := lastBytesField(buf, produceRecordsField)
	require.True(t, ok)
	tr.Release(&messages.ProduceRequest{Records: records})
	require.Equal(t, int32(2), first.refs.Load(), "a forgotten hold was let go")
	require.Equal(t, 1, r.size())
}

// The buffers the holds keep from the garbage collector are bounded too:
// a hold that would take them past the bound forgets the others, which a
// release no longer finds; a buffer larger than the bound is forgotten at
// once; and releases take what they let go of off the account.
func TestReceivedHoldsBoundedInBytes(t *testing.T) {
	tr := NewTransport()
	r := tr.received
	r.maxBytes = 3 << 10
	hold := func(size int, seed byte) (*sharedRead, []byte) {
		b := make([]byte, 0, size)
		b, err := proto.MarshalOptions{}.MarshalAppend(b, recordsMessage(produceRequestName, []byte{seed}))
		require.NoError(t, err)
		s := &sharedRead{buf: &b, pool: tr.buffers}
		s.refs.Store(1)
		r.hold(produceRequestName, b, s)
		records, ok := lastBytesField(b, produceRecordsField)
		require.True(t, ok)
		return s, records
	}
	first, firstRecords := hold(1<<10, 1)
	_, secondRecords := hold(1<<10, 2)
	require.Equal(t, 2, r.size())
	require.Equal(t, 2<<10, r.bytes)
	tr.ReleaseRecords(secondRecords)
	require.Equal(t, 1<<10, r.bytes, "a release takes its buffer off the account")

	hold(1<<10, 3)
	require.Equal(t, 2, r.size(), "within the bound")
	hold(2<<10, 4)
	require.Equal(t, 1, r.size(), "past the bound, the holds before were forgotten")
	require.Equal(t, 2<<10, r.bytes)
	tr.ReleaseRecords(firstRecords)
	require.Equal(t, int32(2), first.refs.Load(), "a forgotten hold was let go")

	big, _ := hold(4<<10, 5)
	require.Zero(t, r.size(), "a buffer over the bound is forgotten at once")
	require.Zero(t, r.bytes)
	require.Equal(t, int32(2), big.refs.Load())
}

// aliasedRecords finds, without allocating, exactly the records
// aliasSerializer gives: the last records field of a ProduceRequest, and
// that of each request of a ProduceRequests.
func TestAliasedRecords(t *testing.T) {
	one := recordsMessage(produceRequestName, patterned(300, 1))
	twice, err := proto.Marshal(one)
	require.NoError(t, err)
	twice = appendBytesField(twice, produceRecordsField, patterned(200, 2))
	bundle := &messages.ProduceRequests{Requests: []*messages.ProduceRequest{
		{Topic: "a", Records: patterned(64<<10, 3)},
		{Topic: "b"},
		{Topic: "c", Records: patterned(10, 4)},
	}}
	bundled, err := proto.Marshal(bundle)
	require.NoError(t, err)
	single, err := proto.Marshal(one)
	require.NoError(t, err)
	empty, err := proto.Marshal(recordsMessage(produceRequestName, []byte{}))
	require.NoError(t, err)
	fetched, err := proto.Marshal(&messages.ReplicaFetchResponse{CorrelationId: 1, Partitions: []*messages.ReplicaFetchedPartition{
		{Topic: "a", Records: patterned(64<<10, 5)},
		{Topic: "b", Error: messages.ErrorCode_NOT_LEADER_OR_FOLLOWER},
		{Topic: "c", Records: patterned(10, 6)},
	}})
	require.NoError(t, err)
	tests := []struct {
		name string
		typ  string
		b    []byte
		n    int
		ok   bool
	}{
		{"one", produceRequestName, single, 1, true},
		{"records twice", produceRequestName, twice, 1, true},
		{"no records", produceRequestName, empty, 0, true},
		{"bundled", produceRequestsName, bundled, 2, true},
		{"malformed", produceRequestName, single[:len(single)-1], 0, false},
		{"malformed request", produceRequestsName, []byte{0x0a, 0x02, 0x2a, 0x05}, 0, false},
		{"replica fetched", replicaFetchResponseName, fetched, 2, true},
		{"malformed partition", replicaFetchResponseName, []byte{0x12, 0x02, 0x42, 0x05}, 0, false},
		{"another type", fetchResponseName, single, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var found [][]byte
			n, ok := aliasedRecords(tt.typ, tt.b, func(r []byte) { found = append(found, r) })
			require.Equal(t, tt.ok, ok)
			require.Equal(t, tt.n, n)
			require.Len(t, found, n)
			if !ok {
				return
			}
			m, err := aliasSerializer{}.Deserialize(tt.typ, tt.b)
			require.NoError(t, err)
			want := slices.DeleteFunc(allRecordsOf(t, m), func(r []byte) bool { return len(r) == 0 })
			require.Len(t, found, len(want))
			for i := range want {
				require.Same(t, &want[i][0], &found[i][0], "records %d", i)
				require.Equal(t, len(want[i]), len(found[i]))
			}
		})
	}
	var sum int
	allocs := testing.AllocsPerRun(100, func() {
		aliasedRecords(produceRequestsName, bundled, func(r []byte) { sum += len(r) })
	})
	require.Zero(t, allocs)
}

// A batch with no large record-carrying envelope keeps the pooled path: its
// buffer is held until the stream reads again, its envelopes left to proto.
func TestRemoteCodecSmallRecordsPooled(t *testing.T) {
	var many []proto.Message
	for i := range 64 {
		many = append(many, recordsMessage(produceRequestName, patterned(100, byte(i))))
	}
	// The records field's tag and length take 3 bytes.
	underInline := recordsMessage(fetchResponseName, patterned(inlineData-1-proto.Size(recordsMessage(fetchResponseName, nil))-3, 2))
	require.Equal(t, inlineData-1, proto.Size(underInline))
	tests := []struct {
		name string
		msgs []proto.Message
	}{
		{"one small produce", []proto.Message{recordsMessage(produceRequestName, patterned(100, 1))}},
		{"many small produces, large together", many},
		{"data just under inline", []proto.Message{underInline}},
		{"large, of another type", []proto.Message{&messages.ProduceResponse{ErrorMessage: string(bytes.Repeat([]byte("y"), 64<<10))}}},
		{"large fetch response", []proto.Message{recordsMessage(fetchResponseName, patterned(64<<10, 3))}},
		{"large, not JSON's to alias", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := recordsBatch(t, tt.msgs...)
			if tt.msgs == nil {
				// A sender's JSON envelope (serializer 1) of a name
				// aliasSerializer knows stays JSON's.
				msg = batchMessage(&remote.MessageBatch{
					TypeNames: []string{produceRequestName},
					Targets:   []*actor.PID{{Address: "a", Id: "b"}},
					Envelopes: []*remote.MessageEnvelope{{SerializerId: 1, MessageData: []byte(`{"topic":"` + string(bytes.Repeat([]byte("z"), 8<<10)) + `"}`)}},
				})
			}
			tr := NewTransport()
			got := receive(t, tr, msg)
			require.Equal(t, 1, tr.reads.size(), "the buffer is not held")
			require.Zero(t, tr.received.size(), "records hold the buffer")
			require.True(t, proto.Equal(msg, got))
			for i, e := range got.GetMessageBatch().GetEnvelopes() {
				require.Equal(t, msg.GetMessageBatch().Envelopes[i].SerializerId, e.SerializerId, "envelope %d", i)
			}
			tr.releaseRead(got)
			require.Zero(t, tr.reads.size())
		})
	}
}

// An envelope that arrives naming aliasSerializer's id is read as one
// naming proto's: aliased, and holding the buffer, when the codec would
// alias it, and copied when not, so that no records alias a buffer
// unheld.
func TestRemoteCodecWireAliasSerializerID(t *testing.T) {
	tests := []struct {
		name    string
		msg     proto.Message
		aliased bool
	}{
		{"large produce", recordsMessage(produceRequestName, patterned(64<<10, 1)), true},
		{"small produce", recordsMessage(produceRequestName, patterned(100, 2)), false},
		{"large fetch response", recordsMessage(fetchResponseName, patterned(64<<10, 3)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := recordsBatch(t, tt.msg)
			msg.GetMessageBatch().Envelopes[0].SerializerId = aliasSerializerID
			tr := NewTransport()
			got := receive(t, tr, msg)
			e := got.GetMessageBatch().Envelopes[0]
			m := deliver(t, got.GetMessageBatch())[0]
			require.True(t, proto.Equal(tt.msg, m))
			r := recordsOf(t, m)
			if tt.aliased {
				require.Equal(t, aliasSerializerID, e.SerializerId)
				require.True(t, within(r, e.MessageData), "records copied")
				require.True(t, tr.received.holds(&r[0]), "aliased records hold nothing")
				return
			}
			require.Equal(t, int32(0), e.SerializerId)
			require.False(t, within(r, e.MessageData), "records alias a buffer they do not hold")
			require.Zero(t, tr.received.size())
		})
	}
}

// Without aliasSerializer's id, every batch takes the pooled path.
func TestRemoteCodecAliasingOff(t *testing.T) {
	id := aliasSerializerID
	aliasSerializerID = -1
	t.Cleanup(func() { aliasSerializerID = id })
	msg := recordsBatch(t, recordsMessage(produceRequestName, patterned(1<<20, 5)))
	tr := NewTransport()
	got := receive(t, tr, msg)
	require.Equal(t, 1, tr.reads.size())
	require.Zero(t, tr.received.size())
	require.True(t, proto.Equal(msg, got))
	require.Equal(t, int32(0), got.GetMessageBatch().Envelopes[0].SerializerId)
	tr.releaseRead(got)
}
