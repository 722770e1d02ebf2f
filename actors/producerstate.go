package actors

import (
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

// ProducerBatchesKept is how many recent batches per producer a partition
// keeps for finding duplicates: an idempotent producer may have at most
// this many requests in flight per partition. Kafka keeps five, its
// clients' max.in.flight with idempotence; Depot's client sends more with
// acks=all, whose requests mostly wait for a group commit's fsync.
const ProducerBatchesKept = 16

// producerBatch is what is remembered of one appended batch of an
// idempotent producer.
type producerBatch struct {
	firstSequence int32
	lastSequence  int32
	firstOffset   int64
	lastOffset    int64
}

// producerEntry is the state of one producer id on one partition.
type producerEntry struct {
	epoch   int16
	batches []producerBatch // oldest first, at most ProducerBatchesKept
}

// producerStates maps producer ids to their state on one partition. It is
// rebuilt from the log's batch headers on start-up. Not safe for concurrent
// use: owned by the partition actor.
type producerStates map[int64]*producerEntry

// check decides what to do with a batch: append it (NONE, nil), answer it as
// a duplicate of an appended batch (NONE, the batch), or refuse it.
//
// A producer this partition does not know is accepted at any sequence, so a
// producer whose batches all left the log by retention keeps working.
func (s producerStates) check(h *wire.Header) (messages.ErrorCode, *producerBatch) {
	if h.ProducerID < 0 {
		return messages.ErrorCode_NONE, nil
	}
	e := s[h.ProducerID]
	if e == nil {
		return messages.ErrorCode_NONE, nil
	}
	switch {
	case h.ProducerEpoch < e.epoch:
		return messages.ErrorCode_INVALID_PRODUCER_EPOCH, nil
	case h.ProducerEpoch > e.epoch:
		if h.BaseSequence != 0 {
			return messages.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER, nil
		}
		return messages.ErrorCode_NONE, nil
	}
	for i := range e.batches {
		b := &e.batches[i]
		if b.firstSequence == h.BaseSequence && b.lastSequence == h.LastSequence() {
			return messages.ErrorCode_NONE, b
		}
	}
	if len(e.batches) > 0 && h.BaseSequence != nextSequence(e.batches[len(e.batches)-1].lastSequence) {
		return messages.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER, nil
	}
	return messages.ErrorCode_NONE, nil
}

// update records an appended batch whose header is h.
func (s producerStates) update(h *wire.Header) {
	if h.ProducerID < 0 {
		return
	}
	e := s[h.ProducerID]
	if e == nil || h.ProducerEpoch > e.epoch {
		e = &producerEntry{epoch: h.ProducerEpoch}
		s[h.ProducerID] = e
	}
	if len(e.batches) == ProducerBatchesKept {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:ProducerBatchesKept-1]
	}
	e.batches = append(e.batches, producerBatch{
		firstSequence: h.BaseSequence,
		lastSequence:  h.LastSequence(),
		firstOffset:   h.BaseOffset,
		lastOffset:    h.LastOffset(),
	})
}

// nextSequence is the sequence after seq; sequences wrap at 2^31 as Kafka's.
func nextSequence(seq int32) int32 {
	if seq == 1<<31-1 {
		return 0
	}
	return seq + 1
}
