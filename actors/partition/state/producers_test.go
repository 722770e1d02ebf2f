package state

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

// producerHeader is the header of an idempotent producer's batch i of three
// records, appended at offset 10*i.
func producerHeader(i int) *wire.Header {
	return &wire.Header{ProducerID: 7, ProducerEpoch: 2, BaseSequence: int32(3 * i), LastOffsetDelta: 2, BaseOffset: int64(10 * i)}
}

// A partition recognises a resend of any of a producer's last
// topic.ProducerBatchesKept batches, answering it with the offsets it was
// appended at; an older one, a gap or an old epoch is refused.
func TestProducerStatesKeepRecentBatches(t *testing.T) {
	const appended = topic.ProducerBatchesKept + 3
	s := Producers{}
	for i := range appended {
		code, dup := s.Check(producerHeader(i))
		require.Equal(t, messages.ErrorCode_NONE, code)
		require.Nil(t, dup, "batch %d is new", i)
		s.Update(producerHeader(i))
	}
	for i := appended - topic.ProducerBatchesKept; i < appended; i++ {
		code, dup := s.Check(producerHeader(i))
		require.Equal(t, messages.ErrorCode_NONE, code)
		require.NotNil(t, dup, "batch %d is a resend", i)
		require.Equal(t, int64(10*i), dup.FirstOffset)
		require.Equal(t, int64(10*i+2), dup.LastOffset)
	}
	for i := range appended - topic.ProducerBatchesKept {
		code, dup := s.Check(producerHeader(i))
		require.Equal(t, messages.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER, code, "batch %d is no longer remembered", i)
		require.Nil(t, dup)
	}
	code, dup := s.Check(producerHeader(appended))
	require.Equal(t, messages.ErrorCode_NONE, code, "the next batch")
	require.Nil(t, dup)
	code, _ = s.Check(producerHeader(appended + 1))
	require.Equal(t, messages.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER, code, "a gap")
	old := producerHeader(appended)
	old.ProducerEpoch = 1
	code, _ = s.Check(old)
	require.Equal(t, messages.ErrorCode_INVALID_PRODUCER_EPOCH, code)
}
