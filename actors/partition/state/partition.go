// Package state is a partition's state and the decisions taken from it,
// apart from its files and its mailbox: whether a request is valid, what to
// do with each batch of a produce (idempotence), where the high watermark
// stands, and which parked requests may be answered. It never imports
// protoactor and does no I/O: the partition actor does the disk.Log calls
// and the sends, tells this package what happened, and acts on its answers,
// as etcd-io/raft's RawNode is driven. The split is Kafka's: Partition plays
// UnifiedLog (offsets, producer state, later leader epochs) beside the
// disk.Log's LocalLog (segments and files).
package state

import (
	"fmt"

	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

// Refusal is why a request is refused: the error code for its response and
// a message for people. The zero Refusal refuses nothing.
type Refusal struct {
	Code    messages.ErrorCode
	Message string
}

// Refused reports whether r refuses its request.
func (r Refusal) Refused() bool { return r.Code != messages.ErrorCode_NONE }

func refuse(code messages.ErrorCode, format string, args ...any) Refusal {
	return Refusal{Code: code, Message: fmt.Sprintf(format, args...)}
}

// BatchCheck is what CheckBatch decides for one batch of a produce request:
// append it (neither refused nor a duplicate), answer it with the offsets of
// Duplicate, a batch appended before, or refuse it.
type BatchCheck struct {
	Refusal
	Duplicate *Batch
}

// Partition is one partition replica's offsets and producer state, and the
// decisions taken from them. The partition actor calls Opened when it opens
// the log, CheckBatch before and Appended after each append, Flushed after
// each fsync, and StartMoved when retention or DeleteRecords raise the log
// start offset; it reads the offsets it answers with from here.
//
// The high watermark is the offset below which consumers may read and
// acks=all produces may be answered. A replica alone in its partition is
// its own in-sync set, and its high watermark is its log end offset. A
// leader's is the least log end offset of its in-sync replicas (see
// FollowerFetch), and a follower's the one its leader's fetch answers bring
// (LeaderHighWatermark); replication.go holds the replica state.
//
// Not safe for concurrent use: owned by the partition actor.
type Partition struct {
	maxMessageBytes int32
	producers       Producers
	// awaited holds, for each producer with no batch here that had a batch
	// refused (see Refused), the first such batch: until it is appended,
	// no later batch of the producer is.
	awaited map[int64]awaitedBatch

	logStartOffset int64
	logEndOffset   int64
	highWatermark  int64
	// durableOffset is the offset below which the log is fsynced: its
	// recovery point.
	durableOffset int64
	// unread are the batches appended at or above the high watermark, by
	// end offset: the bytes consumers may read once it passes them.
	unread []unreadBatch
	repl   replication
}

// unreadBatch is a batch above the high watermark: its end offset and size.
type unreadBatch struct {
	end  int64
	size int
}

// NewPartition returns the state of a partition whose batches may be up to
// maxMessageBytes (max.message.bytes) each, before its log is opened.
func NewPartition(maxMessageBytes int32) *Partition {
	// The maps are made on their first entry: most partitions of a node
	// are idle, and many never see an idempotent producer.
	return &Partition{maxMessageBytes: maxMessageBytes}
}

// awaitedBatch is the epoch and base sequence of a batch refused to a
// producer the partition knows nothing of yet.
type awaitedBatch struct {
	epoch    int16
	sequence int32
}

// Opened sets the offsets of a log just opened (or reopened after a move):
// its start and end offsets and its recovery point. Producer state is
// rebuilt from the log's batches with Recovered.
func (p *Partition) Opened(logStartOffset, logEndOffset, durableOffset int64) {
	p.logStartOffset = logStartOffset
	p.logEndOffset = logEndOffset
	p.durableOffset = min(durableOffset, logEndOffset)
	p.unread = nil
	if !p.repl.replicated {
		p.highWatermark = logEndOffset
	}
	p.highWatermark = min(p.highWatermark, logEndOffset)
	p.repl.leaderStart = logEndOffset
}

// Recovered takes a batch found in the log at start-up into producer state.
func (p *Partition) Recovered(h *wire.Header) { p.updateProducers(h) }

// updateProducers takes h into producer state, making the map on the first
// producer id.
func (p *Partition) updateProducers(h *wire.Header) {
	if h.ProducerID < 0 {
		return
	}
	if p.producers == nil {
		p.producers = Producers{}
	}
	p.producers.Update(h)
}

// ProducerCount is the number of producer ids the partition remembers.
func (p *Partition) ProducerCount() int { return len(p.producers) }

// MaxMessageBytes is max.message.bytes, the largest batch a produce may
// append.
func (p *Partition) MaxMessageBytes() int32 { return p.maxMessageBytes }

// SetMaxMessageBytes changes max.message.bytes, for the batches validated
// from now on.
func (p *Partition) SetMaxMessageBytes(n int32) { p.maxMessageBytes = n }

// LogStartOffset is the first offset of the log.
func (p *Partition) LogStartOffset() int64 { return p.logStartOffset }

// LogEndOffset is the offset the next appended batch gets.
func (p *Partition) LogEndOffset() int64 { return p.logEndOffset }

// HighWatermark is the offset below which consumers read: every in-sync
// replica has the records below it.
func (p *Partition) HighWatermark() int64 { return p.highWatermark }

// DurableOffset is the offset below which the log is fsynced.
func (p *Partition) DurableOffset() int64 { return p.durableOffset }

// AcknowledgedOffset is the offset below which an acks=all produce may be
// answered: its batches are fsynced and below the high watermark.
func (p *Partition) AcknowledgedOffset() int64 { return min(p.durableOffset, p.highWatermark) }

// ValidateProduce checks a produce request before any of its batches is
// appended, so that a bad request changes nothing: acks must be 0, 1 or -1,
// and records one or more whole, valid batches (CRC included) of at most
// max.message.bytes each, in a supported compression. A request with acks
// 0 gets no answer, whatever the refusal.
func (p *Partition) ValidateProduce(acks int32, records []byte) Refusal {
	if acks != 0 && acks != 1 && acks != -1 {
		return refuse(messages.ErrorCode_INVALID_REQUIRED_ACKS, "acks %d: want 0, 1 or -1", acks)
	}
	if len(records) == 0 {
		return refuse(messages.ErrorCode_CORRUPT_MESSAGE, "no record batch in request")
	}
	for i, rest := 0, records; len(rest) > 0; i++ {
		size, err := wire.PeekSize(rest)
		if err != nil || size > len(rest) {
			return refuse(messages.ErrorCode_CORRUPT_MESSAGE, "batch %d: truncated or bad length", i)
		}
		if size > int(p.maxMessageBytes) {
			return refuse(messages.ErrorCode_MESSAGE_TOO_LARGE, "batch %d of %d bytes exceeds max.message.bytes %d", i, size, p.maxMessageBytes)
		}
		h, err := wire.Validate(rest[:size])
		if err != nil {
			return refuse(messages.ErrorCode_CORRUPT_MESSAGE, "batch %d: %v", i, err)
		}
		if h.Compression() > wire.CompressionZstd {
			return refuse(messages.ErrorCode_UNSUPPORTED_COMPRESSION_TYPE, "batch %d: %s", i, h.Compression())
		}
		rest = rest[size:]
	}
	return Refusal{}
}

// CheckBatch decides what to do with one batch of a valid produce request,
// from the state of its producer (see Producers.Check), and refuses as out
// of order a batch behind one of its producer's that was refused and is
// still awaited (see Refused).
func (p *Partition) CheckBatch(h *wire.Header) BatchCheck {
	code, dup := p.producers.Check(h)
	if code == messages.ErrorCode_NONE && dup == nil && h.ProducerID >= 0 && h.BaseSequence != 0 &&
		!p.producers.Known(h.ProducerID) && p.logStartOffset == 0 {
		// A producer's first batch here starts at sequence 0, unless
		// retention or DeleteRecords may have taken its earlier ones
		// (Kafka's rule): a later batch of a producer whose first request
		// was lost on its way must not be appended before it, or the
		// producer would take the lost one for written.
		code = messages.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER
	}
	if a, ok := p.awaited[h.ProducerID]; ok && code == messages.ErrorCode_NONE && dup == nil &&
		a.epoch == h.ProducerEpoch && sequenceAfter(h.BaseSequence, a.sequence) {
		code = messages.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER
	}
	if code != messages.ErrorCode_NONE {
		return BatchCheck{Refusal: refuse(code, "producer %d epoch %d sequence %d refused", h.ProducerID, h.ProducerEpoch, h.BaseSequence)}
	}
	return BatchCheck{Duplicate: dup}
}

// Refused takes a batch of a valid produce request that was not appended
// and was answered with an error its producer retries: the log dir had no
// room for it, or it waited too long for an allowance. A producer the
// partition knows must send its next sequence, so its retry comes before
// anything later. One it does not know yet may start at any sequence (its
// batches may all have left the log by retention), so a later batch it had
// in flight behind the refused one would be appended ahead of it, and the
// retry, then out of order, refused for ever. So, until a batch of it is
// appended, such a producer's batches after the first refused one are
// refused as out of order: it sends them again, in order, after the one
// refused first, or numbered anew from it once it gives that one up.
func (p *Partition) Refused(h *wire.Header) {
	if h.ProducerID < 0 || p.producers.Known(h.ProducerID) {
		return
	}
	if a, ok := p.awaited[h.ProducerID]; ok && (a.epoch > h.ProducerEpoch ||
		a.epoch == h.ProducerEpoch && !sequenceAfter(a.sequence, h.BaseSequence)) {
		return
	}
	if p.awaited == nil {
		p.awaited = map[int64]awaitedBatch{}
	}
	p.awaited[h.ProducerID] = awaitedBatch{epoch: h.ProducerEpoch, sequence: h.BaseSequence}
}

// Appended takes a batch the log appended, h with the base offset it was
// given, of size bytes. It returns the bytes that became readable to
// consumers (passed the high watermark) by it: all of them while the leader
// is alone in its in-sync set.
func (p *Partition) Appended(h *wire.Header, size int) (readable int) {
	p.updateProducers(h)
	delete(p.awaited, h.ProducerID)
	p.logEndOffset = h.NextOffset()
	p.unread = append(p.unread, unreadBatch{end: p.logEndOffset, size: size})
	if p.repl.role == Follower {
		return 0
	}
	return p.updateHighWatermark()
}

// Flushed takes an fsync that made the log durable below upTo.
func (p *Partition) Flushed(upTo int64) {
	p.durableOffset = max(p.durableOffset, min(upTo, p.logEndOffset))
}

// StartMoved takes a log start offset raised by retention or DeleteRecords.
func (p *Partition) StartMoved(logStartOffset int64) {
	p.logStartOffset = max(p.logStartOffset, logStartOffset)
}

// updateHighWatermark moves a leader's high watermark up to the least log
// end offset of its in-sync replicas, those of the ISR change in flight
// included, and returns the bytes that became readable by it. It never
// moves down: what consumers could read stays readable.
func (p *Partition) updateHighWatermark() (readable int) {
	hw := p.logEndOffset
	if p.repl.role == Leader {
		for _, isr := range [][]int32{p.repl.assignment.ISR, p.repl.pending} {
			for _, id := range isr {
				if f, ok := p.repl.followers[id]; ok {
					hw = min(hw, f.logEndOffset)
				}
			}
		}
	}
	if hw <= p.highWatermark {
		return 0
	}
	p.highWatermark = hw
	return p.takeReadable()
}

// takeReadable drops the unread batches below the high watermark and
// returns their bytes.
func (p *Partition) takeReadable() (readable int) {
	n := 0
	for n < len(p.unread) && p.unread[n].end <= p.highWatermark {
		readable += p.unread[n].size
		n++
	}
	p.unread = append(p.unread[:0], p.unread[n:]...)
	return readable
}

// DeleteRecordsOffset is the offset a DeleteRecords request for offset
// raises the log start offset to: offset -1 means the high watermark, and
// an offset below zero or past the high watermark is refused, as Kafka
// does.
func (p *Partition) DeleteRecordsOffset(offset int64) (int64, Refusal) {
	if offset == -1 {
		return p.highWatermark, Refusal{}
	}
	if offset < 0 || offset > p.highWatermark {
		return 0, refuse(messages.ErrorCode_OFFSET_OUT_OF_RANGE, "delete before %d: outside [0, %d]", offset, p.highWatermark)
	}
	return offset, Refusal{}
}

// ListOffset is the offset a ListOffsets request answers for the special
// timestamps -2 (earliest: the log start offset) and -1 (latest: the high
// watermark, what a consumer can read up to); ok is false for any other
// timestamp, which the log's time index answers and TimestampOffset checks.
// A leader refuses the latest offset with OFFSET_NOT_AVAILABLE while its
// high watermark lags (see Lagging), as Kafka does since KIP-207.
func (p *Partition) ListOffset(timestamp int64) (offset int64, ok bool, refusal Refusal) {
	switch timestamp {
	case -2:
		return p.logStartOffset, true, Refusal{}
	case -1:
		if p.Lagging() {
			return 0, true, p.notAvailable()
		}
		return p.highWatermark, true, Refusal{}
	}
	return 0, false, Refusal{}
}

// TimestampOffset checks the offset the time index found for a ListOffsets
// timestamp: one below the high watermark is the answer, and one at or past
// it is not readable yet, so the answer is -1 (no record that recent), or,
// while the high watermark lags, OFFSET_NOT_AVAILABLE: the records past it
// may be acknowledged already.
func (p *Partition) TimestampOffset(offset int64) (int64, Refusal) {
	switch {
	case offset < p.highWatermark:
		return offset, Refusal{}
	case p.Lagging():
		return 0, p.notAvailable()
	}
	return -1, Refusal{}
}

// Lagging reports whether the partition leads others and its high
// watermark has not reached the log end it had when it took over (or
// opened its log): a follower's high watermark trails its leader's by a
// fetch, and a restarted leader's starts at zero, so until its followers
// fetch, what it holds may be below what was acknowledged before.
func (p *Partition) Lagging() bool {
	return p.repl.role == Leader && p.highWatermark < p.repl.leaderStart
}

func (p *Partition) notAvailable() Refusal {
	return refuse(messages.ErrorCode_OFFSET_NOT_AVAILABLE, "high watermark %d lags the log end %d this leader started its epoch with", p.highWatermark, p.repl.leaderStart)
}

// FetchFrom says what a consumer's fetch from offset may read: below is the
// offset its records must end at or before, the high watermark; readable is
// false when there is nothing to read yet (offset at or past the high
// watermark, up to the log end), and an offset outside the log is refused.
func (p *Partition) FetchFrom(offset int64) (below int64, readable bool, refusal Refusal) {
	if offset < p.logStartOffset || offset > p.logEndOffset {
		return 0, false, refuse(messages.ErrorCode_OFFSET_OUT_OF_RANGE, "offset %d outside [%d, %d]", offset, p.logStartOffset, p.highWatermark)
	}
	return p.highWatermark, offset < p.highWatermark, Refusal{}
}

// ValidateFetchSize checks a fetch's max_bytes and chunk_bytes, neither of
// which may be negative (0 means the default, and no chunks).
func ValidateFetchSize(maxBytes, chunkBytes int32) Refusal {
	if maxBytes < 0 || chunkBytes < 0 {
		return refuse(messages.ErrorCode_INVALID_FETCH_SIZE, "max_bytes %d, chunk_bytes %d", maxBytes, chunkBytes)
	}
	return Refusal{}
}

// RecordsBelow cuts records, whole batches read from the log, before the
// first batch that reaches offset or beyond: a consumer reads no record at
// or past the high watermark.
func RecordsBelow(records []byte, offset int64) []byte {
	var it wire.BatchIterator
	it.SkipCRC = true // read back from the log, which checked it
	it.Reset(records)
	for it.Next() {
		if it.Header().NextOffset() > offset {
			return records[:it.Pos()]
		}
	}
	return records
}
