package remote

import (
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/encoding/protowire"
)

// sharedRead is the pooled buffer a received remote message was decoded
// from, or a HeldBuffer's, and the pool it came from. The stream holds it
// until its next read (see heldStream), a HeldBuffer's holder until it
// lets go, and each ProduceRequest whose records alias it holds it until its partition
// has appended them (see receivedHolds); the last to let go puts it back
// into pool. refs counts the holds.
type sharedRead struct {
	buf  *[]byte
	pool *dirtyPool
	refs atomic.Int32
}

func (s *sharedRead) release() {
	if s.refs.Add(-1) == 0 {
		s.pool.Put(s.buf)
	}
}

// receivedHolds is one transport's registry of the received records that
// alias a pooled buffer: by the address of their first byte, the
// sharedRead they hold one reference of. remoteCodec fills it as it hands
// envelopes to aliasSerializer, one entry for each non-empty Records the
// serializer's decode will give a request (see aliasedRecords), a
// HeldBuffer with the records it lends, and Transport.Release empties it. The serializer, which protoactor gives no
// actor system, needs no part in it. Safe for concurrent use.
//
// An address is a safe key. Each key is the address of a byte inside a
// buffer that its entry holds (refs > 0), so that buffer is neither in the
// pool nor collected, and no other live allocation can have that address:
// two entries never share a key unless they are the same records, and a
// request whose records were not received here (a local one, or one
// received into a buffer since forgotten) finds no entry. Records received
// once yield one entry each, as the envelopes of a message and the
// requests of a ProduceRequests occupy disjoint bytes.
//
// Records that are never released (a request protoactor never
// deserialized, a dead letter, a partition that stopped or panicked with
// them in its mailbox) keep their buffer out of the pool, and the entry
// keeps it from the garbage collector. Once maxHeldProduces entries, or
// buffers of maxHeldBytes together, are held, all are forgotten at once,
// without letting go of their references: a buffer with a forgotten hold
// never returns to the pool, whatever else lets go of it, and is left to
// the garbage collector once nothing aliases it. So what such records
// keep from the collector is bounded, however long the node runs.
type receivedHolds struct {
	mu sync.Mutex
	m  map[*byte]*sharedRead
	// buffers counts the entries of m that hold each buffer, and bytes
	// is those buffers' capacity together, bounded by maxBytes.
	buffers  map[*sharedRead]int
	bytes    int
	maxBytes int
	// aliased counts the records hold has noted.
	aliased atomic.Int64
}

const (
	// maxHeldProduces bounds the records holding a pooled buffer: a
	// ProduceRequests may carry a request for every partition of a node.
	maxHeldProduces = 1 << 16
	// maxHeldBytes bounds the buffers the records hold: far above what
	// the requests and fetched records on their way to partitions hold
	// at once, each at most a remote message (MaxRemoteMessageBytes).
	maxHeldBytes = 1 << 30
)

func newReceivedHolds() *receivedHolds {
	return &receivedHolds{m: map[*byte]*sharedRead{}, buffers: map[*sharedRead]int{}, maxBytes: maxHeldBytes}
}

// room forgets every entry when n more, in s's buffer, would pass a
// bound. Called with r.mu held.
func (r *receivedHolds) room(n int, s *sharedRead) {
	bytes := r.bytes
	if r.buffers[s] == 0 {
		bytes += cap(*s.buf)
	}
	if len(r.m)+n > maxHeldProduces || bytes > r.maxBytes {
		clear(r.m)
		clear(r.buffers)
		r.bytes = 0
	}
}

// put adds the entry first -> s. Called with r.mu held.
func (r *receivedHolds) put(first *byte, s *sharedRead) {
	if r.buffers[s] == 0 {
		r.bytes += cap(*s.buf)
	}
	r.buffers[s]++
	r.m[first] = s
}

// remove deletes the entry of first, which holds s. Called with r.mu held.
func (r *receivedHolds) remove(first *byte, s *sharedRead) {
	delete(r.m, first)
	if r.buffers[s]--; r.buffers[s] <= 0 {
		delete(r.buffers, s)
		r.bytes -= cap(*s.buf)
	}
}

// hold notes that the records of data, an envelope of the named type in
// s's buffer that goes to aliasSerializer, each hold s. It does nothing
// for data the serializer cannot decode, which gives no records.
func (r *receivedHolds) hold(name string, data []byte, s *sharedRead) {
	n, ok := aliasedRecords(name, data, nil)
	if !ok || n == 0 {
		return
	}
	s.refs.Add(int32(n))
	r.aliased.Add(int64(n))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.room(n, s)
	if n > maxHeldProduces || cap(*s.buf) > r.maxBytes {
		return // forgotten at once
	}
	aliasedRecords(name, data, func(records []byte) { r.put(&records[0], s) })
}

// lend notes that the records starting at first, in s's buffer, hold s:
// records lent by a HeldBuffer's holder to a partition of its own actor
// system.
func (r *receivedHolds) lend(first *byte, s *sharedRead) {
	s.refs.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.room(1, s)
	if cap(*s.buf) > r.maxBytes {
		return // forgotten at once
	}
	r.put(first, s)
}

// release lets go of the hold of the records starting at first, if they
// have one; a second release of the same records does nothing.
func (r *receivedHolds) release(first *byte) {
	r.mu.Lock()
	s, ok := r.m[first]
	if ok {
		r.remove(first, s)
	}
	r.mu.Unlock()
	if ok {
		s.release()
	}
}

// forget drops the holds on s of the records of batch's aliased envelopes,
// without letting go of them, so that s's buffer never returns to the pool
// and is left to the garbage collector. A stream that stops on a batch
// (protoactor stops at an envelope it cannot deliver) calls it: the
// envelopes after that one were never deserialized, and would keep their
// entries until maxHeldProduces clears them, and with them their buffer
// from the collector; those before it are in some actor's hands, which
// may still use their records.
func (r *receivedHolds) forget(batch *remote.MessageBatch, s *sharedRead) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range batch.GetEnvelopes() {
		if aliasSerializerID < 0 || e.SerializerId != aliasSerializerID || e.TypeId < 0 || int(e.TypeId) >= len(batch.TypeNames) {
			continue
		}
		aliasedRecords(batch.TypeNames[e.TypeId], e.MessageData, func(records []byte) {
			if r.m[&records[0]] == s {
				r.remove(&records[0], s)
			}
		})
	}
}

// size is how many records hold a buffer.
func (r *receivedHolds) size() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}

// aliasedRecords calls fn, when not nil, with each non-empty Records that
// aliasSerializer's decode of data, a message of the named type, gives a
// request, in order, and returns how many there are: for a ProduceRequest,
// the value of the last field 5 of wire type bytes, as unmarshalAliasing
// takes it; for a ProduceRequests, that of each of its requests (each
// field 1 of wire type bytes); for a ReplicaFetchResponse, that of each of
// its partitions (field 2), their field 8. ok is false, and fn is not called, when
// data does not parse as the fields the serializer walks (it then fails
// too) or the type is another. It walks the fields and allocates nothing.
func aliasedRecords(name string, data []byte, fn func(records []byte)) (n int, ok bool) {
	switch name {
	case produceRequestName:
		records, ok := lastBytesField(data, produceRecordsField)
		if !ok || len(records) == 0 {
			return 0, ok
		}
		if fn != nil {
			fn(records)
		}
		return 1, true
	case produceRequestsName:
		return eachPartRecords(data, 1, produceRecordsField, fn)
	case replicaFetchResponseName:
		return eachPartRecords(data, replicaPartitionsField, replicaRecordsField, fn)
	}
	return 0, false
}

// eachPartRecords is aliasedRecords for a message whose field parts
// repeats a message with a records field: a ProduceRequests' requests, a
// ReplicaFetchResponse's partitions. fn is called only once data is known
// to parse.
func eachPartRecords(data []byte, parts, records protowire.Number, fn func(records []byte)) (n int, ok bool) {
	if n, ok = walkPartRecords(data, parts, records, nil); !ok || fn == nil {
		return n, ok
	}
	return walkPartRecords(data, parts, records, fn)
}

// walkPartRecords walks the parts of eachPartRecords, calling fn, when not
// nil, as it goes.
func walkPartRecords(data []byte, parts, recordsField protowire.Number, fn func(records []byte)) (n int, ok bool) {
	for len(data) > 0 {
		num, typ, tagLen := protowire.ConsumeTag(data)
		if tagLen < 0 {
			return 0, false
		}
		size := protowire.ConsumeFieldValue(num, typ, data[tagLen:])
		if size < 0 {
			return 0, false
		}
		if num == parts && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(data[tagLen : tagLen+size])
			records, ok := lastBytesField(v, recordsField)
			if !ok {
				return 0, false
			}
			if len(records) > 0 {
				n++
				if fn != nil {
					fn(records)
				}
			}
		}
		data = data[tagLen+size:]
	}
	return n, true
}

// lastBytesField returns the value of the last field num of wire type
// bytes in b, nil if there is none, and false if b does not parse as
// protobuf fields, walking them as unmarshalTaking does.
func lastBytesField(b []byte, num protowire.Number) ([]byte, bool) {
	var last []byte
	for len(b) > 0 {
		n, typ, tagLen := protowire.ConsumeTag(b)
		if tagLen < 0 {
			return nil, false
		}
		size := protowire.ConsumeFieldValue(n, typ, b[tagLen:])
		if size < 0 {
			return nil, false
		}
		if n == num && typ == protowire.BytesType {
			last, _ = protowire.ConsumeBytes(b[tagLen : tagLen+size])
		}
		b = b[tagLen+size:]
	}
	return last, true
}
