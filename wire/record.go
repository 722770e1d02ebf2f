package wire

import (
	"encoding/binary"
	"hash/crc32"
)

// Record is one decoded record. Key and Value are nil for null and non-nil
// (possibly empty) otherwise. On decode they and the header values alias the
// batch bytes (or the decompressed buffer) and are valid only as long as
// those are, and Headers is reused from one record to the next: see
// Decoder.Records.
type Record struct {
	Offset    int64
	Timestamp int64
	Key       []byte
	Value     []byte
	Headers   []RecordHeader
}

// RecordHeader is one record header.
type RecordHeader struct {
	Key   string
	Value []byte
}

// BatchOptions are the fields of a batch header a producer chooses.
type BatchOptions struct {
	// Compression codec for the records. Default none.
	Compression Compression
	// ProducerID is -1 for a producer that is not idempotent.
	ProducerID int64
	// ProducerEpoch is -1 for a producer that is not idempotent.
	ProducerEpoch int16
	// BaseSequence is -1 for a producer that is not idempotent.
	BaseSequence int32
	// LogAppendTime marks timestamps as the broker's append time.
	LogAppendTime bool
}

// NoProducer is the BatchOptions of a producer without idempotence.
var NoProducer = BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}

// Builder accumulates records into one batch. Create one with NewBuilder, or
// Reset a zero Builder before its first use. A Builder is not safe for
// concurrent use. Reset lets one builder produce many batches without
// allocating.
type Builder struct {
	opts BatchOptions
	// buf holds HeaderSize bytes reserved for the batch header, then the
	// encoded records, uncompressed; Take finishes the header in place.
	buf           []byte
	count         int32
	baseTimestamp int64
	maxTimestamp  int64
	// recordsCRC is the CRC-32C of buf[HeaderSize:crcTo], the records
	// appended up to crcTo: taken a block at a time as they are appended,
	// while they are in the cache (see crcCombine).
	recordsCRC uint32
	crcTo      int
	scratch    []byte // compression output
}

// NewBuilder returns a builder for a batch with the given options.
func NewBuilder(opts BatchOptions) *Builder {
	b := &Builder{}
	b.Reset(opts)
	return b
}

// Reset empties the builder and sets new options, keeping its buffers.
func (b *Builder) Reset(opts BatchOptions) {
	b.opts = opts
	b.buf = reserveHeader(b.buf)
	b.count = 0
	b.baseTimestamp = 0
	b.maxTimestamp = 0
	b.recordsCRC = 0
	b.crcTo = HeaderSize
}

// crcBlock is how many bytes of records Append lets accumulate before it
// takes their CRC: small enough to be still in the CPU's cache, large
// enough for the CRC instructions to run at full speed.
const crcBlock = 32 << 10

// takeCRC brings recordsCRC up to the end of the records.
func (b *Builder) takeCRC() {
	b.recordsCRC = crc32.Update(b.recordsCRC, castagnoli, b.buf[b.crcTo:])
	b.crcTo = len(b.buf)
}

// Len is the number of records appended.
func (b *Builder) Len() int { return int(b.count) }

// Size is the size the batch would have uncompressed.
func (b *Builder) Size() int { return len(b.buf) }

// Cap is the size the batch can reach in the builder's buffer without it
// being grown.
func (b *Builder) Cap() int { return cap(b.buf) }

// Grow moves the builder's records into buf when buf is larger than its
// buffer, and returns the buffer it had; otherwise it changes nothing and
// returns nil. buf's contents are discarded.
func (b *Builder) Grow(buf []byte) []byte {
	if cap(buf) <= cap(b.buf) {
		return nil
	}
	old := b.buf
	b.buf = append(buf[:0], old...)
	return old
}

// reserveHeader empties buf down to the space of a batch header.
func reserveHeader(buf []byte) []byte {
	if cap(buf) < HeaderSize {
		return make([]byte, HeaderSize, 4096)
	}
	return buf[:HeaderSize]
}

// RecordSize is the encoded size of a record with these fields, including its
// length prefix, for a timestamp delta and offset delta of ts and off.
func RecordSize(tsDelta int64, offsetDelta int32, key, value []byte, headers []RecordHeader) int {
	n := bodySize(tsDelta, offsetDelta, key, value, headers)
	return varintSize(int64(n)) + n
}

func bodySize(tsDelta int64, offsetDelta int32, key, value []byte, headers []RecordHeader) int {
	n := 1 + varintSize(tsDelta) + varintSize(int64(offsetDelta))
	n += bytesSize(key) + bytesSize(value)
	n += varintSize(int64(len(headers)))
	for _, h := range headers {
		n += varintSize(int64(len(h.Key))) + len(h.Key) + bytesSize(h.Value)
	}
	return n
}

func bytesSize(b []byte) int {
	if b == nil {
		return varintSize(-1)
	}
	return varintSize(int64(len(b))) + len(b)
}

// Append adds a record with the given timestamp (ms), key, value and headers.
// The record's offset is its position in the batch.
func (b *Builder) Append(timestamp int64, key, value []byte, headers []RecordHeader) {
	if b.count == 0 {
		b.baseTimestamp = timestamp
		b.maxTimestamp = timestamp
	}
	if timestamp > b.maxTimestamp {
		b.maxTimestamp = timestamp
	}
	tsDelta := timestamp - b.baseTimestamp
	offsetDelta := b.count
	dst := b.buf
	dst = binary.AppendVarint(dst, int64(bodySize(tsDelta, offsetDelta, key, value, headers)))
	dst = append(dst, 0) // attributes
	dst = binary.AppendVarint(dst, tsDelta)
	dst = binary.AppendVarint(dst, int64(offsetDelta))
	dst = appendBytes(dst, key)
	dst = appendBytes(dst, value)
	dst = binary.AppendVarint(dst, int64(len(headers)))
	for _, h := range headers {
		dst = binary.AppendVarint(dst, int64(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = appendBytes(dst, h.Value)
	}
	b.buf = dst
	b.count++
	if len(dst)-b.crcTo >= crcBlock {
		b.takeCRC()
	}
}

func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

// AppendTo appends the finished batch to dst, with base offset 0, and returns
// the extended slice. It compresses the records with the builder's codec and
// computes the CRC. The builder keeps its records until Reset. A builder
// with no records gives a batch of zero records, which Validate refuses.
func (b *Builder) AppendTo(dst []byte) ([]byte, error) {
	records := b.buf[HeaderSize:]
	compressed := b.opts.Compression != CompressionNone
	if compressed {
		var err error
		b.scratch, err = compress(b.opts.Compression, b.scratch[:0], records)
		if err != nil {
			return dst, err
		}
		records = b.scratch
	}
	start := len(dst)
	var h [HeaderSize]byte
	dst = append(dst, h[:]...)
	dst = append(dst, records...)
	b.writeHeader(dst[start:], !compressed)
	return dst, nil
}

// Take finishes the batch and returns it, without copying the records of
// an uncompressed batch: the builder hands over its buffer and continues,
// empty with the same options, in spare (whose contents are discarded; nil
// is fine). A compressed batch is written into spare instead. Either way the
// returned slice belongs to the caller.
func (b *Builder) Take(spare []byte) ([]byte, error) {
	if b.opts.Compression != CompressionNone {
		batch, err := b.AppendTo(spare[:0])
		b.Reset(b.opts)
		return batch, err
	}
	batch := b.buf
	b.writeHeader(batch, true)
	b.buf = spare
	b.Reset(b.opts)
	return batch, nil
}

// writeHeader fills in the header of the finished batch. When its records
// are the builder's own (plain), their CRC is already known: the batch's
// is combined with it from that of the header alone.
func (b *Builder) writeHeader(batch []byte, plain bool) {
	attributes := uint16(b.opts.Compression) & compressionMask
	if b.opts.LogAppendTime {
		attributes |= timestampTypeBit
	}
	lastOffsetDelta := b.count - 1
	if b.count == 0 {
		lastOffsetDelta = 0
	}
	be := binary.BigEndian
	be.PutUint64(batch[baseOffsetPos:], 0)
	be.PutUint32(batch[batchLengthPos:], uint32(len(batch)-LogOverhead))
	be.PutUint32(batch[leaderEpochPos:], 0xffffffff) // -1: no leader epoch yet
	batch[magicPos] = Magic
	be.PutUint16(batch[attributesPos:], attributes)
	be.PutUint32(batch[lastOffsetDeltaPos:], uint32(lastOffsetDelta))
	be.PutUint64(batch[baseTimestampPos:], uint64(b.baseTimestamp))
	be.PutUint64(batch[maxTimestampPos:], uint64(b.maxTimestamp))
	be.PutUint64(batch[producerIDPos:], uint64(b.opts.ProducerID))
	be.PutUint16(batch[producerEpochPos:], uint16(b.opts.ProducerEpoch))
	be.PutUint32(batch[baseSequencePos:], uint32(b.opts.BaseSequence))
	be.PutUint32(batch[recordCountPos:], uint32(b.count))
	var crc uint32
	if plain {
		b.takeCRC()
		crc = crcCombine(crc32.Checksum(batch[attributesPos:HeaderSize], castagnoli), b.recordsCRC, len(batch)-HeaderSize)
	} else {
		crc = checksum(batch)
	}
	be.PutUint32(batch[crcPos:], crc)
}

func varintSize(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}
