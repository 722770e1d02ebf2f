package state

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

// testBatch is one batch of values for a producer without idempotence.
func testBatch(t *testing.T, values ...string) []byte {
	t.Helper()
	b := wire.NewBuilder(wire.NoProducer)
	for _, v := range values {
		b.Append(1_700_000_000_000, nil, []byte(v), nil)
	}
	out, err := b.AppendTo(nil)
	require.NoError(t, err)
	return out
}

// withCodec is batch with its attributes' codec set to c and its CRC
// computed again, so that only the codec is wrong with it.
func withCodec(batch []byte, c int16) []byte {
	out := append([]byte(nil), batch...)
	const attributesPos, crcPos = 21, 17
	attributes := int16(binary.BigEndian.Uint16(out[attributesPos:]))
	binary.BigEndian.PutUint16(out[attributesPos:], uint16(attributes&^0x07|c))
	binary.BigEndian.PutUint32(out[crcPos:], crc32.Checksum(out[attributesPos:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

func concat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// A produce request is refused whole before anything is appended: bad
// acks first, then the first bad batch, by its index.
func TestValidateProduce(t *testing.T) {
	good := testBatch(t, "a", "b")
	badCRC := append([]byte(nil), good...)
	badCRC[len(badCRC)-1] ^= 0xff
	large := testBatch(t, string(make([]byte, 300)))
	for _, tc := range []struct {
		name    string
		acks    int32
		records []byte
		code    messages.ErrorCode
		message string // the refusal's message, or its start when it ends in "..."
	}{
		{"acks 0", 0, good, messages.ErrorCode_NONE, ""},
		{"acks 1", 1, good, messages.ErrorCode_NONE, ""},
		{"acks all", -1, good, messages.ErrorCode_NONE, ""},
		{"two batches", 1, concat(good, good), messages.ErrorCode_NONE, ""},
		{"acks 2", 2, good, messages.ErrorCode_INVALID_REQUIRED_ACKS, "acks 2: want 0, 1 or -1"},
		{"acks -2 before bad records", -2, nil, messages.ErrorCode_INVALID_REQUIRED_ACKS, "acks -2: want 0, 1 or -1"},
		{"no records", 1, nil, messages.ErrorCode_CORRUPT_MESSAGE, "no record batch in request"},
		{"truncated", 1, good[:len(good)-1], messages.ErrorCode_CORRUPT_MESSAGE, "batch 0: truncated or bad length"},
		{"shorter than a length", 1, good[:5], messages.ErrorCode_CORRUPT_MESSAGE, "batch 0: truncated or bad length"},
		{"second truncated", 1, concat(good, good[:20]), messages.ErrorCode_CORRUPT_MESSAGE, "batch 1: truncated or bad length"},
		{"too large", 1, concat(good, large), messages.ErrorCode_MESSAGE_TOO_LARGE, fmt.Sprintf("batch 1 of %d bytes exceeds max.message.bytes 256", len(large))},
		{"bad crc", 1, badCRC, messages.ErrorCode_CORRUPT_MESSAGE, "batch 0: wire: crc mismatch: stored ..."},
		// wire.Validate knows the codecs: an unknown one is damage.
		{"unknown codec", 1, withCodec(good, 7), messages.ErrorCode_CORRUPT_MESSAGE, "batch 0: wire: bad compression: unknown codec 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPartition(256)
			refusal := p.ValidateProduce(tc.acks, tc.records)
			require.Equal(t, tc.code, refusal.Code, refusal.Message)
			require.Equal(t, tc.code != messages.ErrorCode_NONE, refusal.Refused())
			if prefix, ok := strings.CutSuffix(tc.message, "..."); ok {
				require.True(t, strings.HasPrefix(refusal.Message, prefix), refusal.Message)
				return
			}
			require.Equal(t, tc.message, refusal.Message)
		})
	}
}

// idempotentHeader is the header of producer 7's batch of three records at
// sequence seq, in epoch.
func idempotentHeader(epoch int16, seq int32) *wire.Header {
	return &wire.Header{ProducerID: 7, ProducerEpoch: epoch, BaseSequence: seq, LastOffsetDelta: 2, RecordCount: 3}
}

// CheckBatch answers with Producers.Check's decision, a refusal naming the
// producer, and Appended remembers what was appended, and where.
func TestCheckBatch(t *testing.T) {
	for _, tc := range []struct {
		name      string
		appended  []*wire.Header
		batch     *wire.Header
		code      messages.ErrorCode
		message   string
		duplicate *Batch
		// trimmed starts the log past 0, as retention leaves it.
		trimmed bool
	}{
		{name: "no producer id", batch: &wire.Header{ProducerID: -1, LastOffsetDelta: 0}},
		{name: "unknown producer from 0", batch: idempotentHeader(0, 0)},
		{name: "unknown producer past 0", batch: idempotentHeader(0, 40),
			code: messages.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER, message: "producer 7 epoch 0 sequence 40 refused"},
		{name: "unknown producer at any sequence once the log was trimmed", trimmed: true, batch: idempotentHeader(0, 40)},
		{name: "next sequence", appended: []*wire.Header{idempotentHeader(0, 0)}, batch: idempotentHeader(0, 3)},
		{name: "resend", appended: []*wire.Header{idempotentHeader(0, 0), idempotentHeader(0, 3)}, batch: idempotentHeader(0, 0),
			duplicate: &Batch{FirstSequence: 0, LastSequence: 2, FirstOffset: 0, LastOffset: 2}},
		{name: "gap", appended: []*wire.Header{idempotentHeader(0, 0)}, batch: idempotentHeader(0, 6),
			code: messages.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER, message: "producer 7 epoch 0 sequence 6 refused"},
		{name: "old epoch", appended: []*wire.Header{idempotentHeader(1, 0)}, batch: idempotentHeader(0, 3),
			code: messages.ErrorCode_INVALID_PRODUCER_EPOCH, message: "producer 7 epoch 0 sequence 3 refused"},
		{name: "new epoch from 0", appended: []*wire.Header{idempotentHeader(0, 0)}, batch: idempotentHeader(1, 0)},
		{name: "new epoch not from 0", appended: []*wire.Header{idempotentHeader(0, 0)}, batch: idempotentHeader(1, 3),
			code: messages.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER, message: "producer 7 epoch 1 sequence 3 refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPartition(1 << 20)
			if tc.trimmed {
				p.Opened(100, 100, 100)
			}
			for _, h := range tc.appended {
				h.BaseOffset = p.LogEndOffset()
				require.False(t, p.CheckBatch(h).Refused())
				p.Appended(h, 100)
			}
			check := p.CheckBatch(tc.batch)
			require.Equal(t, tc.code, check.Code)
			require.Equal(t, tc.message, check.Message)
			require.Equal(t, tc.duplicate, check.Duplicate)
		})
	}
}

// A batch refused with a retriable error to a producer the partition does
// not know holds back that producer's later batches, which would otherwise
// be taken at any sequence ahead of it, until it or an earlier one is
// appended; a known producer's own sequence checks already keep its order.
func TestRefusedBatchKeepsItsProducersOrder(t *testing.T) {
	const outOfOrder = messages.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER
	type step struct {
		refuse, append *wire.Header
	}
	for _, tc := range []struct {
		name  string
		steps []step
		batch *wire.Header
		code  messages.ErrorCode
	}{
		{name: "later batch of an unknown producer", steps: []step{{refuse: idempotentHeader(0, 0)}},
			batch: idempotentHeader(0, 3), code: outOfOrder},
		{name: "the refused batch again", steps: []step{{refuse: idempotentHeader(0, 0)}},
			batch: idempotentHeader(0, 0)},
		{name: "an earlier batch", steps: []step{{refuse: idempotentHeader(0, 6)}},
			batch: idempotentHeader(0, 3)},
		{name: "the earliest refused holds", steps: []step{{refuse: idempotentHeader(0, 6)}, {refuse: idempotentHeader(0, 3)}, {refuse: idempotentHeader(0, 9)}},
			batch: idempotentHeader(0, 6), code: outOfOrder},
		{name: "next once the refused batch is appended", steps: []step{{refuse: idempotentHeader(0, 0)}, {append: idempotentHeader(0, 0)}},
			batch: idempotentHeader(0, 3)},
		{name: "a known producer's next", steps: []step{{append: idempotentHeader(0, 0)}, {refuse: idempotentHeader(0, 3)}},
			batch: idempotentHeader(0, 3)},
		{name: "a known producer's gap", steps: []step{{append: idempotentHeader(0, 0)}, {refuse: idempotentHeader(0, 3)}},
			batch: idempotentHeader(0, 6), code: outOfOrder},
		{name: "another epoch", steps: []step{{refuse: idempotentHeader(0, 0)}},
			batch: idempotentHeader(1, 3)},
		{name: "an older epoch refused after", steps: []step{{refuse: idempotentHeader(1, 0)}, {refuse: idempotentHeader(0, 0)}},
			batch: idempotentHeader(1, 3), code: outOfOrder},
		{name: "across the wrap", steps: []step{{refuse: idempotentHeader(0, 1<<31-3)}},
			batch: idempotentHeader(0, 0), code: outOfOrder},
		{name: "another producer", steps: []step{{refuse: &wire.Header{ProducerID: 8, BaseSequence: 0, LastOffsetDelta: 2, RecordCount: 3}}},
			batch: idempotentHeader(0, 3)},
		{name: "no producer id", steps: []step{{refuse: &wire.Header{ProducerID: -1}}},
			batch: &wire.Header{ProducerID: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPartition(1 << 20)
			// A log retention trimmed: a producer it does not know may
			// start anywhere.
			p.Opened(100, 100, 100)
			for _, s := range tc.steps {
				if s.refuse != nil {
					p.Refused(s.refuse)
					continue
				}
				s.append.BaseOffset = p.LogEndOffset()
				require.False(t, p.CheckBatch(s.append).Refused())
				p.Appended(s.append, 100)
			}
			require.Equal(t, tc.code, p.CheckBatch(tc.batch).Code)
		})
	}
}

// The offsets move with what the driver reports: the high watermark with
// the log end (the leader alone is in sync), the acknowledged offset with
// the fsyncs, and the log start only up.
func TestPartitionOffsets(t *testing.T) {
	type offsets struct{ start, end, hw, durable, acknowledged int64 }
	batch := func(base int64, records int32) *wire.Header {
		return &wire.Header{BaseOffset: base, ProducerID: -1, LastOffsetDelta: records - 1, RecordCount: records}
	}
	for _, tc := range []struct {
		name     string
		steps    func(p *Partition) []int // bytes readable after each Appended
		readable []int
		want     offsets
	}{
		{
			name:  "opened",
			steps: func(p *Partition) []int { p.Opened(5, 20, 12); return nil },
			want:  offsets{start: 5, end: 20, hw: 20, durable: 12, acknowledged: 12},
		},
		{
			name:  "opened with a recovery point past the end",
			steps: func(p *Partition) []int { p.Opened(0, 20, 30); return nil },
			want:  offsets{end: 20, hw: 20, durable: 20, acknowledged: 20},
		},
		{
			name: "appended, not flushed",
			steps: func(p *Partition) []int {
				p.Opened(0, 10, 10)
				return []int{p.Appended(batch(10, 3), 200), p.Appended(batch(13, 1), 90)}
			},
			readable: []int{200, 90},
			want:     offsets{end: 14, hw: 14, durable: 10, acknowledged: 10},
		},
		{
			name: "flushed part",
			steps: func(p *Partition) []int {
				p.Opened(0, 10, 10)
				p.Appended(batch(10, 3), 200)
				p.Flushed(13)
				p.Appended(batch(13, 1), 90)
				return nil
			},
			want: offsets{end: 14, hw: 14, durable: 13, acknowledged: 13},
		},
		{
			name: "a flush never lowers the durable offset nor passes the end",
			steps: func(p *Partition) []int {
				p.Opened(0, 10, 8)
				p.Flushed(30)
				p.Flushed(9)
				return nil
			},
			want: offsets{end: 10, hw: 10, durable: 10, acknowledged: 10},
		},
		{
			name: "start moved up, not down",
			steps: func(p *Partition) []int {
				p.Opened(0, 10, 10)
				p.StartMoved(7)
				p.StartMoved(3)
				return nil
			},
			want: offsets{start: 7, end: 10, hw: 10, durable: 10, acknowledged: 10},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPartition(1 << 20)
			readable := tc.steps(p)
			require.Equal(t, tc.readable, readable)
			require.Equal(t, tc.want, offsets{p.LogStartOffset(), p.LogEndOffset(), p.HighWatermark(), p.DurableOffset(), p.AcknowledgedOffset()})
		})
	}
}

func TestDeleteRecordsOffset(t *testing.T) {
	for _, tc := range []struct {
		name    string
		offset  int64
		want    int64
		code    messages.ErrorCode
		message string
	}{
		{name: "the high watermark", offset: -1, want: 20},
		{name: "below the start", offset: 2, want: 2},
		{name: "zero", offset: 0, want: 0},
		{name: "at the high watermark", offset: 20, want: 20},
		{name: "past the high watermark", offset: 21, code: messages.ErrorCode_OFFSET_OUT_OF_RANGE, message: "delete before 21: outside [0, 20]"},
		{name: "negative", offset: -2, code: messages.ErrorCode_OFFSET_OUT_OF_RANGE, message: "delete before -2: outside [0, 20]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPartition(1 << 20)
			p.Opened(5, 20, 0)
			offset, refusal := p.DeleteRecordsOffset(tc.offset)
			require.Equal(t, tc.code, refusal.Code)
			require.Equal(t, tc.message, refusal.Message)
			if !refusal.Refused() {
				require.Equal(t, tc.want, offset)
			}
		})
	}
}

func TestListOffset(t *testing.T) {
	for _, tc := range []struct {
		timestamp int64
		offset    int64
		ok        bool
	}{{-2, 5, true}, {-1, 20, true}, {0, 0, false}, {1_700_000_000_000, 0, false}} {
		p := NewPartition(1 << 20)
		p.Opened(5, 20, 0)
		offset, ok, refusal := p.ListOffset(tc.timestamp)
		require.False(t, refusal.Refused())
		require.Equal(t, tc.ok, ok, "timestamp %d", tc.timestamp)
		require.Equal(t, tc.offset, offset, "timestamp %d", tc.timestamp)
	}
}

// A fetch reads from the log start up to the high watermark; at the high
// watermark there is nothing yet, and outside the log is out of range.
func TestFetchFrom(t *testing.T) {
	for _, tc := range []struct {
		name     string
		offset   int64
		readable bool
		code     messages.ErrorCode
		message  string
	}{
		{name: "log start", offset: 5, readable: true},
		{name: "below the high watermark", offset: 19, readable: true},
		{name: "at the high watermark", offset: 20},
		{name: "below the log start", offset: 4, code: messages.ErrorCode_OFFSET_OUT_OF_RANGE, message: "offset 4 outside [5, 20]"},
		{name: "past the log end", offset: 21, code: messages.ErrorCode_OFFSET_OUT_OF_RANGE, message: "offset 21 outside [5, 20]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPartition(1 << 20)
			p.Opened(5, 20, 0)
			below, readable, refusal := p.FetchFrom(tc.offset)
			require.Equal(t, tc.code, refusal.Code)
			require.Equal(t, tc.message, refusal.Message)
			require.Equal(t, tc.readable, readable)
			if !refusal.Refused() {
				require.Equal(t, int64(20), below)
			}
		})
	}
}

func TestValidateFetchSize(t *testing.T) {
	for _, tc := range []struct {
		maxBytes, chunkBytes int32
		refused              bool
	}{{0, 0, false}, {1 << 20, 0, false}, {1 << 20, 64 << 10, false}, {-1, 0, true}, {0, -1, true}, {-1, 10, true}} {
		refusal := ValidateFetchSize(tc.maxBytes, tc.chunkBytes)
		require.Equal(t, tc.refused, refusal.Refused(), "max_bytes %d, chunk_bytes %d", tc.maxBytes, tc.chunkBytes)
		if tc.refused {
			require.Equal(t, messages.ErrorCode_INVALID_FETCH_SIZE, refusal.Code)
		}
	}
}

// RecordsBelow keeps the whole batches that end at or below an offset.
func TestRecordsBelow(t *testing.T) {
	first := testBatch(t, "a", "b") // offsets 10, 11
	second := testBatch(t, "c")     // 12
	third := testBatch(t, "d", "e") // 13, 14
	wire.SetBaseOffset(first, 10)
	wire.SetBaseOffset(second, 12)
	wire.SetBaseOffset(third, 13)
	records := concat(first, second, third)
	for _, tc := range []struct {
		below int64
		want  []byte
	}{
		{10, []byte{}},
		{11, []byte{}},
		{12, first},
		{13, concat(first, second)},
		{14, concat(first, second)},
		{15, records},
		{99, records},
	} {
		require.Equal(t, tc.want, RecordsBelow(records, tc.below), "below %d", tc.below)
	}
}
