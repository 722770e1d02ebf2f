package remote

import (
	"sync/atomic"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/depot-dev/depot/messages"
)

// FetchFrame is a partition's answer to a fetch from its own actor system
// that asked to hand back its frame (FetchRequest.HandBackFrame): the
// response, and the buffer of the transport's pool that its records were
// read into, none when they were not (no records, or few enough to be
// copied out: see InlineData).
//
// The receiver owns the frame. Once nothing reads Response's records any
// more (a Kafka listener: once the writev that writes them has returned),
// Release puts the frame back into the pool and empties Response.Records;
// neither the records nor anything sliced from them may be read after
// that. A FetchFrame never released leaves its frame to the garbage
// collector, which is always safe. Release may be called from any
// goroutine, and more than once (or on nil): only the first call does
// anything.
type FetchFrame struct {
	Response *messages.FetchResponse
	frame    atomic.Pointer[[]byte]
	pool     *dirtyPool
}

// Release hands the frame back to its pool; see FetchFrame.
func (f *FetchFrame) Release() {
	if f == nil {
		return
	}
	b := f.frame.Swap(nil)
	if b == nil {
		return
	}
	f.Response.Records = nil
	f.pool.Put(b)
}

// FetchAnswer is what a partition of system sends to the consumer to for
// resp, whose records were read into frame, a buffer of t's pool (nil when
// they were not): a FetchFrame holding the frame when the fetch asked to
// hand it back (handBack) and to is in system, FetchMessage's message
// otherwise. A nil Transport gives FetchFrames without a frame.
func (t *Transport) FetchAnswer(system *actor.ActorSystem, to *actor.PID, handBack bool, resp *messages.FetchResponse, frame []byte) any {
	if !handBack || isRemote(system, to) {
		return FetchMessage(system, to, resp, frame)
	}
	f := &FetchFrame{Response: resp}
	if t != nil && frame != nil {
		f.pool = t.buffers
		f.frame.Store(&frame)
	}
	return f
}

// HeldBuffer is a buffer of a transport's pool that a request is read
// into, whose records go as they lie in it to partitions of the
// transport's actor system: a Kafka listener reads each produce request
// into one. The buffer goes back to the pool once its holder has let go of
// it (Release) and each partition has released the records lent to it
// (Transport.Release, as for records received from another actor system),
// whichever comes last. Records that are never released (a dead letter, a
// partition that stopped with them in its mailbox) keep the buffer from
// the pool, and so does a holder that never lets go: the garbage collector
// takes it then. Safe for concurrent use.
type HeldBuffer struct {
	buf      []byte
	t        *Transport
	shared   *sharedRead
	released atomic.Bool
}

// HoldBuffer returns a buffer of size bytes from t's pool, its bytes as
// its last user left them, held by the caller. A nil Transport allocates
// one, and Lend and Release then do nothing.
func (t *Transport) HoldBuffer(size int) *HeldBuffer {
	if t == nil {
		return &HeldBuffer{buf: make([]byte, size)}
	}
	b := t.buffers.Get(size)
	h := &HeldBuffer{buf: *b, t: t, shared: &sharedRead{buf: b, pool: t.buffers}}
	h.shared.refs.Store(1)
	return h
}

// Bytes is the buffer, size bytes long.
func (h *HeldBuffer) Bytes() []byte { return h.buf }

// Lend notes that records, which lie in the buffer, go to a partition in a
// ProduceRequest: the buffer stays out of the pool until that request, or
// any carrying the same records, is released (see Transport.Release). The
// holder lends before it sends the request, and before its Release.
// Records outside the buffer, or empty, need no hold and are not noted.
func (h *HeldBuffer) Lend(records []byte) {
	if h == nil || h.t == nil || len(records) == 0 || h.released.Load() {
		return
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(h.buf)))
	first := uintptr(unsafe.Pointer(unsafe.SliceData(records)))
	if first < start || first-start+uintptr(len(records)) > uintptr(len(h.buf)) {
		return
	}
	h.t.received.lend(&records[0], h.shared)
}

// Release lets go of the holder's hold: the buffer goes back to the pool
// once every lent records are released too. Neither the buffer nor
// anything sliced from it may be read by the holder after. Only the first
// call does anything.
func (h *HeldBuffer) Release() {
	if h == nil || h.shared == nil || h.released.Swap(true) {
		return
	}
	h.shared.release()
}

// PoolStats are the counts of a transport's buffer pool since it was made:
// buffers asked for (Gets), those of them served from the pool (Reused),
// and buffers handed back (Puts, kept or left to the garbage collector);
// Frames counts the Gets that were fetch frames (Frame). Aliased counts
// the received records (of produce requests and replica fetch answers)
// handed on without a copy, in the buffer they arrived in, and Held those
// of them not yet released (see Transport.ReleaseRecords).
type PoolStats struct {
	Gets, Reused, Puts, Frames int64
	Aliased                    int64
	Held                       int
}

// PoolStats are the counts of t's buffer pool; zero for a nil Transport.
func (t *Transport) PoolStats() PoolStats {
	if t == nil {
		return PoolStats{}
	}
	return PoolStats{
		Gets: t.buffers.gets.Load(), Reused: t.buffers.reused.Load(), Puts: t.buffers.puts.Load(), Frames: t.frames.Load(),
		Aliased: t.received.aliased.Load(), Held: t.received.size(),
	}
}

// PoisonPool, for tests, makes t's pool overwrite every byte of each
// buffer handed back to it (with 0xdb) before it keeps it, so that
// whatever still reads a buffer after handing it back reads garbage: a
// record batch then fails its CRC. Off by default; it costs a write of
// every buffer handed back.
func (t *Transport) PoisonPool(on bool) {
	if t != nil {
		t.buffers.poison.Store(on)
	}
}
