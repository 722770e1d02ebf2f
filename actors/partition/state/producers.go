package state

import (
	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

// Batch is what is remembered of one appended batch of an
// idempotent producer.
type Batch struct {
	FirstSequence int32
	LastSequence  int32
	FirstOffset   int64
	LastOffset    int64
}

// producer is the state of one producer id on one partition.
type producer struct {
	epoch   int16
	batches []Batch // oldest first, at most topic.ProducerBatchesKept
}

// Producers maps producer ids to their state on one partition. It is
// rebuilt from the log's batch headers on start-up. Not safe for concurrent
// use: owned by the partition actor.
type Producers map[int64]*producer

// Check decides what to do with a batch: append it (NONE, nil), answer it as
// a duplicate of an appended batch (NONE, the batch), or refuse it.
//
// A producer this partition does not know is accepted at any sequence, so a
// producer whose batches all left the log by retention keeps working.
func (s Producers) Check(h *wire.Header) (messages.ErrorCode, *Batch) {
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
		if b.FirstSequence == h.BaseSequence && b.LastSequence == h.LastSequence() {
			return messages.ErrorCode_NONE, b
		}
	}
	if len(e.batches) > 0 && h.BaseSequence != nextSequence(e.batches[len(e.batches)-1].LastSequence) {
		return messages.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER, nil
	}
	return messages.ErrorCode_NONE, nil
}

// Known reports whether the partition holds a batch of producer id.
func (s Producers) Known(id int64) bool {
	_, ok := s[id]
	return ok
}

// Update records an appended batch whose header is h.
func (s Producers) Update(h *wire.Header) {
	if h.ProducerID < 0 {
		return
	}
	e := s[h.ProducerID]
	if e == nil || h.ProducerEpoch > e.epoch {
		e = &producer{epoch: h.ProducerEpoch}
		s[h.ProducerID] = e
	}
	if len(e.batches) == topic.ProducerBatchesKept {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:topic.ProducerBatchesKept-1]
	}
	e.batches = append(e.batches, Batch{
		FirstSequence: h.BaseSequence,
		LastSequence:  h.LastSequence(),
		FirstOffset:   h.BaseOffset,
		LastOffset:    h.LastOffset(),
	})
}

// nextSequence is the sequence after seq; sequences wrap at 2^31 as Kafka's.
func nextSequence(seq int32) int32 {
	if seq == 1<<31-1 {
		return 0
	}
	return seq + 1
}

// sequenceAfter reports whether sequence a comes after b, within half the
// sequence space: sequences wrap at 2^31.
func sequenceAfter(a, b int32) bool {
	d := int64(a) - int64(b)
	if d < 0 {
		d += 1 << 31
	}
	return d > 0 && d < 1<<30
}
