package remote

import (
	"sync"
	"sync/atomic"

	"github.com/depot-dev/depot/messages"
)

// sharedRead is the pooled buffer a received remote message was decoded
// from. The stream holds it until its next read (see heldStream), and each
// ProduceRequest whose records alias it holds it until its partition has
// appended them (see ReleaseReceived); the last to let go puts it back into
// remoteBuffers.
type sharedRead struct {
	buf  *[]byte
	refs atomic.Int32
	// expected are the starts of the envelopes handed to aliasSerializer
	// and not deserialized yet; guarded by receivedRecords.mu.
	expected []*byte
}

func (s *sharedRead) release() {
	if s.refs.Add(-1) == 0 {
		remoteBuffers.Put(s.buf)
	}
}

// receivedHolds tracks which sharedRead each aliased ProduceRequest holds,
// from the codec, which expects it, through aliasSerializer, which makes
// it, to the partition, which releases it. Safe for concurrent use.
//
// A request that is never released (a dead letter, a partition that
// panicked) keeps its buffer from the pool, not from the garbage
// collector: once maxHeldProduces are held, the holds are forgotten all at
// once, and their buffers are left to the collector.
type receivedHolds struct {
	mu       sync.Mutex
	expected map[*byte]*sharedRead
	owners   map[*messages.ProduceRequest]*sharedRead
}

// maxHeldProduces bounds the produce requests holding a pooled buffer: a
// ProduceRequests may carry a request for every partition of a node.
const maxHeldProduces = 1 << 16

var receivedRecords = &receivedHolds{
	expected: map[*byte]*sharedRead{},
	owners:   map[*messages.ProduceRequest]*sharedRead{},
}

// expect notes that data, an envelope in s's buffer, goes to
// aliasSerializer, whose request will hold s.
func (r *receivedHolds) expect(data []byte, s *sharedRead) {
	s.refs.Add(1)
	r.mu.Lock()
	r.expected[&data[0]] = s
	s.expected = append(s.expected, &data[0])
	r.mu.Unlock()
}

// own makes ms, decoded from data, the holders of the buffer data was
// expected in; it does nothing for data not expected.
func (r *receivedHolds) own(data []byte, ms ...*messages.ProduceRequest) {
	if len(data) == 0 {
		return
	}
	r.mu.Lock()
	s, ok := r.expected[&data[0]]
	if !ok {
		r.mu.Unlock()
		return
	}
	delete(r.expected, &data[0])
	// expect counted one hold for data: one per request instead.
	if len(ms) > 1 {
		s.refs.Add(int32(len(ms) - 1))
	}
	if len(r.owners)+len(ms) > maxHeldProduces {
		clear(r.owners)
	}
	for _, m := range ms {
		r.owners[m] = s
	}
	r.mu.Unlock()
	if len(ms) == 0 {
		s.release()
	}
}

// move makes to the holder of what from holds, if anything: to carries
// from's records on.
func (r *receivedHolds) move(from, to *messages.ProduceRequest) {
	r.mu.Lock()
	if s, ok := r.owners[from]; ok {
		delete(r.owners, from)
		r.owners[to] = s
	}
	r.mu.Unlock()
}

// forget drops the expectations of s that were not met (envelopes
// protoactor did not deserialize) and lets go of their holds.
func (r *receivedHolds) forget(s *sharedRead) {
	r.mu.Lock()
	unmet := 0
	for _, k := range s.expected {
		if r.expected[k] == s {
			delete(r.expected, k)
			unmet++
		}
	}
	s.expected = nil
	r.mu.Unlock()
	for range unmet {
		s.release()
	}
}

// ReleaseReceived tells that m's records are no longer used, so that the
// buffer they were received in, from another actor system, can serve
// again. A partition calls it once it has appended them. It does nothing
// for a request that holds no buffer; m must not be used after.
func ReleaseReceived(m *messages.ProduceRequest) {
	r := receivedRecords
	r.mu.Lock()
	s, ok := r.owners[m]
	delete(r.owners, m)
	r.mu.Unlock()
	if ok {
		s.release()
	}
}
