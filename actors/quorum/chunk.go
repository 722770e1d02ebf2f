package quorum

import (
	"cmp"
	"fmt"
	"math"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/messages"
)

const (
	// DefaultChunkBytes is a good size for SplitSnapshot's chunks: well
	// under gRPC's default 4 MiB message limit, with room for the
	// transport's own framing.
	DefaultChunkBytes = 512 << 10
	// DefaultAssemblerBytes is the default of NewAssembler's bound.
	DefaultAssemblerBytes = 1 << 30
	// chunkOverhead is the most a RaftChunk's encoding adds to its data:
	// four uint64 fields and two int32 fields of at most 11 bytes each
	// with their tags, and the tag and length of the data.
	chunkOverhead = 4*11 + 2*11 + 1 + 5
)

// SplitSnapshot splits a MsgSnap message into chunks whose encodings are at
// most maxChunkBytes each (more than 128), in order: the message's protobuf
// encoding cut into pieces, each chunk naming the sender, the recipient,
// the term and the snapshot's index. Any other message, or a MsgSnap
// without a snapshot, gives an error. The chunks' data alias nothing of m.
//
// The sender tells its Peer how the snapshot fared once the chunks are
// sent: ReportSnapshot with raft.SnapshotFinish when all were, with
// raft.SnapshotFailure when one was lost, so the leader sends it again.
func SplitSnapshot(m *raftpb.Message, maxChunkBytes int) ([]*messages.RaftChunk, error) {
	if m.GetType() != raftpb.MsgSnap || m.GetSnapshot() == nil {
		return nil, fmt.Errorf("quorum: split %s: not a snapshot message", m.GetType())
	}
	if maxChunkBytes <= 2*chunkOverhead {
		return nil, fmt.Errorf("quorum: split a snapshot into chunks of %d bytes, not more than %d", maxChunkBytes, 2*chunkOverhead)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("quorum: split a snapshot: %w", err)
	}
	per := maxChunkBytes - chunkOverhead
	total := (len(b) + per - 1) / per
	if total > math.MaxInt32 {
		return nil, fmt.Errorf("%w: a snapshot message of %d bytes in chunks of %d", ErrTooLarge, len(b), maxChunkBytes)
	}
	chunks := make([]*messages.RaftChunk, 0, total)
	for seq := 0; seq < total; seq++ {
		chunks = append(chunks, &messages.RaftChunk{
			From:  m.GetFrom(),
			To:    m.GetTo(),
			Term:  m.GetTerm(),
			Index: m.GetSnapshot().GetMetadata().GetIndex(),
			Seq:   int32(seq),
			Total: int32(total),
			Data:  b[seq*per : min(len(b), (seq+1)*per)],
		})
	}
	return chunks, nil
}

// Assembler rebuilds the MsgSnap messages that SplitSnapshot split, on the
// receiving node. It holds at most one partial snapshot per sender, keyed
// by the sender, the term and the snapshot's index: a chunk of a newer
// snapshot (a higher term, or the same term and a higher index) from the
// same sender discards the partial older one, and a chunk of an older one
// is refused. The chunks it holds are bounded in bytes. Chunks may arrive
// in any order; a repeated one is ignored.
//
// Not safe for concurrent use: the actor that receives the chunks owns it.
type Assembler struct {
	maxBytes int64
	bytes    int64
	partial  map[uint64]*assembly // by sender
}

// assembly is the partial snapshot of one sender.
type assembly struct {
	term, index, to uint64
	total           int32
	chunks          map[int32][]byte
	bytes           int64
}

// NewAssembler returns an Assembler holding at most maxBytes of chunk data
// in all; maxBytes <= 0 means DefaultAssemblerBytes (1 GiB).
func NewAssembler(maxBytes int64) *Assembler {
	if maxBytes <= 0 {
		maxBytes = DefaultAssemblerBytes
	}
	return &Assembler{maxBytes: maxBytes, partial: map[uint64]*assembly{}}
}

// Add adds a chunk. It returns the whole message once every chunk of its
// snapshot has arrived, and nil before. It keeps c.Data until then. A
// chunk that does not fit its snapshot's earlier chunks (its total or
// recipient differs, its seq is out of range), that belongs to an older
// snapshot than the sender's partial one, or whose snapshot does not
// decode into the MsgSnap its chunks name gives an error wrapping
// ErrBadChunk; one that would take the bytes held past the bound an error
// wrapping ErrTooLarge, after other senders' partial snapshots were
// discarded to make room. Either way the snapshot it belongs to is
// discarded (but for a chunk of an older snapshot, which is only refused).
func (a *Assembler) Add(c *messages.RaftChunk) (*raftpb.Message, error) {
	if c.GetTotal() < 1 || c.GetSeq() < 0 || c.GetSeq() >= c.GetTotal() {
		return nil, fmt.Errorf("%w: chunk %d of %d from %d", ErrBadChunk, c.GetSeq(), c.GetTotal(), c.GetFrom())
	}
	cur := a.partial[c.GetFrom()]
	if cur != nil && (cur.term != c.GetTerm() || cur.index != c.GetIndex()) {
		if cmp.Or(cmp.Compare(c.GetTerm(), cur.term), cmp.Compare(c.GetIndex(), cur.index)) < 0 {
			return nil, fmt.Errorf("%w: a chunk of the snapshot at index %d of term %d from %d, older than the one at index %d of term %d", ErrBadChunk, c.GetIndex(), c.GetTerm(), c.GetFrom(), cur.index, cur.term)
		}
		a.Discard(c.GetFrom())
		cur = nil
	}
	if cur == nil {
		cur = &assembly{term: c.GetTerm(), index: c.GetIndex(), to: c.GetTo(), total: c.GetTotal(), chunks: map[int32][]byte{}}
		a.partial[c.GetFrom()] = cur
	}
	if c.GetTotal() != cur.total || c.GetTo() != cur.to {
		a.Discard(c.GetFrom())
		return nil, fmt.Errorf("%w: chunk %d of %d to %d from %d, after chunks of %d to %d", ErrBadChunk, c.GetSeq(), c.GetTotal(), c.GetTo(), c.GetFrom(), cur.total, cur.to)
	}
	if _, dup := cur.chunks[c.GetSeq()]; dup {
		return nil, nil
	}
	size := int64(len(c.GetData()))
	if a.bytes+size > a.maxBytes {
		for from := range a.partial {
			if from != c.GetFrom() {
				a.Discard(from)
			}
		}
		if a.bytes+size > a.maxBytes {
			a.Discard(c.GetFrom())
			return nil, fmt.Errorf("%w: the chunks of a snapshot from %d pass %d bytes", ErrTooLarge, c.GetFrom(), a.maxBytes)
		}
	}
	cur.chunks[c.GetSeq()] = c.GetData()
	cur.bytes += size
	a.bytes += size
	if int32(len(cur.chunks)) < cur.total {
		return nil, nil
	}

	a.Discard(c.GetFrom())
	b := make([]byte, 0, cur.bytes)
	for seq := int32(0); seq < cur.total; seq++ {
		b = append(b, cur.chunks[seq]...)
	}
	m := &raftpb.Message{}
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("%w: the snapshot from %d does not decode: %w", ErrBadChunk, c.GetFrom(), err)
	}
	if m.GetType() != raftpb.MsgSnap || m.GetFrom() != c.GetFrom() || m.GetTo() != cur.to || m.GetTerm() != cur.term ||
		m.GetSnapshot().GetMetadata().GetIndex() != cur.index {
		return nil, fmt.Errorf("%w: the chunks from %d rebuild %s from %d to %d of term %d, not the snapshot they name", ErrBadChunk, c.GetFrom(), m.GetType(), m.GetFrom(), m.GetTo(), m.GetTerm())
	}
	return m, nil
}

// Discard drops the partial snapshot of sender from, if any: the sender
// is gone, or its snapshot was reported lost.
func (a *Assembler) Discard(from uint64) {
	if cur := a.partial[from]; cur != nil {
		a.bytes -= cur.bytes
		delete(a.partial, from)
	}
}

// Bytes is the chunk data the Assembler holds.
func (a *Assembler) Bytes() int64 { return a.bytes }
