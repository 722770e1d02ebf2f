package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Byte positions of the batch header fields. Never change.
const (
	baseOffsetPos      = 0
	batchLengthPos     = 8
	leaderEpochPos     = 12
	magicPos           = 16
	crcPos             = 17
	attributesPos      = 21
	lastOffsetDeltaPos = 23
	baseTimestampPos   = 27
	maxTimestampPos    = 35
	producerIDPos      = 43
	producerEpochPos   = 51
	baseSequencePos    = 53
	recordCountPos     = 57

	// HeaderSize is the size of a batch header, before the records.
	HeaderSize = 61
	// LogOverhead is the size of the baseOffset and batchLength fields, the
	// part of a batch that batchLength does not count.
	LogOverhead = 12
	// Magic is the only batch format version Depot reads and writes.
	Magic = 2
)

// Attribute bits.
const (
	compressionMask     = 0x07
	timestampTypeBit    = 0x08
	transactionalBit    = 0x10
	controlBit          = 0x20
	deleteHorizonSetBit = 0x40
)

// Errors returned by validation. Each names one kind of damage.
var (
	// ErrShort means fewer bytes than a header, or than the batch length says.
	ErrShort = errors.New("wire: batch truncated")
	// ErrBadMagic means a magic byte other than 2.
	ErrBadMagic = errors.New("wire: unsupported magic")
	// ErrBadCRC means the stored CRC does not match the bytes.
	ErrBadCRC = errors.New("wire: crc mismatch")
	// ErrBadLength means a batch length too small to hold a header, or a
	// record whose length runs past the end of its batch.
	ErrBadLength = errors.New("wire: bad length")
	// ErrRecordCount means the record count in the header disagrees with the
	// records in the batch, or with lastOffsetDelta.
	ErrRecordCount = errors.New("wire: record count mismatch")
	// ErrCompression means an unknown codec, or records that do not decompress.
	ErrCompression = errors.New("wire: bad compression")
	// ErrCorruptRecord means a record that does not decode.
	ErrCorruptRecord = errors.New("wire: corrupt record")
	// ErrLeaderEpoch means a partition leader epoch that cannot be: below
	// -1, which no leader writes, or (from a log) past its partition's.
	// The CRC does not cover the field, so only its range tells damage
	// there.
	ErrLeaderEpoch = errors.New("wire: bad partition leader epoch")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Compression is a record batch compression codec, as in Kafka's attributes.
type Compression int8

// Codecs, numbered as Kafka numbers them.
const (
	CompressionNone   Compression = 0
	CompressionGzip   Compression = 1
	CompressionSnappy Compression = 2
	CompressionLZ4    Compression = 3
	CompressionZstd   Compression = 4
)

// String returns Kafka's name for the codec.
func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "none"
	case CompressionGzip:
		return "gzip"
	case CompressionSnappy:
		return "snappy"
	case CompressionLZ4:
		return "lz4"
	case CompressionZstd:
		return "zstd"
	}
	return fmt.Sprintf("compression(%d)", int8(c))
}

// ParseCompression returns the codec with Kafka's name s.
func ParseCompression(s string) (Compression, error) {
	for c := CompressionNone; c <= CompressionZstd; c++ {
		if c.String() == s {
			return c, nil
		}
	}
	return 0, fmt.Errorf("wire: unknown compression %q (want none, gzip, snappy, lz4 or zstd)", s)
}

// Header is the decoded fixed part of a record batch.
type Header struct {
	BaseOffset      int64
	BatchLength     int32
	LeaderEpoch     int32
	Magic           int8
	CRC             uint32
	Attributes      int16
	LastOffsetDelta int32
	BaseTimestamp   int64
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	RecordCount     int32
}

// Size is the total size of the batch in bytes, header included.
func (h Header) Size() int { return int(h.BatchLength) + LogOverhead }

// LastOffset is the offset of the last record in the batch.
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset that follows the batch.
func (h Header) NextOffset() int64 { return h.LastOffset() + 1 }

// Compression is the batch's codec.
func (h Header) Compression() Compression { return Compression(h.Attributes & compressionMask) }

// LogAppendTime reports whether timestamps are the broker's append time.
func (h Header) LogAppendTime() bool { return h.Attributes&timestampTypeBit != 0 }

// Transactional reports whether the batch is part of a transaction.
func (h Header) Transactional() bool { return h.Attributes&transactionalBit != 0 }

// Control reports whether the batch holds control records.
func (h Header) Control() bool { return h.Attributes&controlBit != 0 }

// LastSequence is the sequence number of the last record, or -1.
func (h Header) LastSequence() int32 {
	if h.BaseSequence < 0 {
		return -1
	}
	return int32((int64(h.BaseSequence) + int64(h.LastOffsetDelta)) % (1 << 31))
}

// PeekSize returns the total size of the batch starting at b from its length
// field alone, without checking anything else. It needs LogOverhead bytes.
func PeekSize(b []byte) (int, error) {
	if len(b) < LogOverhead {
		return 0, ErrShort
	}
	n := int32(binary.BigEndian.Uint32(b[batchLengthPos:]))
	if n < HeaderSize-LogOverhead {
		return 0, fmt.Errorf("%w: batch length %d", ErrBadLength, n)
	}
	return int(n) + LogOverhead, nil
}

// ParseHeader decodes the header of the batch at the start of b. It checks
// that the header is complete, that the magic is 2 and that the length can
// hold a header, but neither the CRC nor the records.
func ParseHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderSize {
		return h, ErrShort
	}
	h.BaseOffset = int64(binary.BigEndian.Uint64(b[baseOffsetPos:]))
	h.BatchLength = int32(binary.BigEndian.Uint32(b[batchLengthPos:]))
	h.LeaderEpoch = int32(binary.BigEndian.Uint32(b[leaderEpochPos:]))
	h.Magic = int8(b[magicPos])
	h.CRC = binary.BigEndian.Uint32(b[crcPos:])
	h.Attributes = int16(binary.BigEndian.Uint16(b[attributesPos:]))
	h.LastOffsetDelta = int32(binary.BigEndian.Uint32(b[lastOffsetDeltaPos:]))
	h.BaseTimestamp = int64(binary.BigEndian.Uint64(b[baseTimestampPos:]))
	h.MaxTimestamp = int64(binary.BigEndian.Uint64(b[maxTimestampPos:]))
	h.ProducerID = int64(binary.BigEndian.Uint64(b[producerIDPos:]))
	h.ProducerEpoch = int16(binary.BigEndian.Uint16(b[producerEpochPos:]))
	h.BaseSequence = int32(binary.BigEndian.Uint32(b[baseSequencePos:]))
	h.RecordCount = int32(binary.BigEndian.Uint32(b[recordCountPos:]))
	if h.Magic != Magic {
		return h, fmt.Errorf("%w: %d", ErrBadMagic, h.Magic)
	}
	if h.BatchLength < HeaderSize-LogOverhead {
		return h, fmt.Errorf("%w: batch length %d", ErrBadLength, h.BatchLength)
	}
	return h, nil
}

// Validate checks the batch at the start of b as a broker must before it
// appends: a whole header, magic 2, a length within b, a matching CRC, a
// known codec, a record count of at least one that agrees with
// lastOffsetDelta (a producer's batch numbers its records densely from 0),
// and a partition leader epoch of -1 or more. It does not decompress or
// decode records. Bytes past the batch's length are ignored. Errors wrap
// ErrShort, ErrBadMagic, ErrBadLength, ErrCompression, ErrBadCRC,
// ErrRecordCount or ErrLeaderEpoch.
func Validate(b []byte) (Header, error) {
	return validate(b, true)
}

// validate is Validate with the CRC check optional.
func validate(b []byte, checkCRC bool) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	if h.Size() > len(b) {
		return h, fmt.Errorf("%w: batch of %d bytes, %d present", ErrShort, h.Size(), len(b))
	}
	if checkCRC {
		if got := crc32.Checksum(b[attributesPos:h.Size()], castagnoli); got != h.CRC {
			return h, fmt.Errorf("%w: stored %08x, computed %08x", ErrBadCRC, h.CRC, got)
		}
	}
	return h, CheckStructure(&h)
}

// CheckStructure reports what a parsed header alone shows to be damaged,
// the checks of Validate that need neither the CRC nor the records: a
// record count that disagrees with lastOffsetDelta, an unknown codec, or a
// partition leader epoch below -1. ParseHeader has already checked the
// magic and that the length holds a header.
func CheckStructure(h *Header) error {
	if h.RecordCount < 1 || int64(h.LastOffsetDelta) != int64(h.RecordCount)-1 {
		return fmt.Errorf("%w: count %d, last offset delta %d", ErrRecordCount, h.RecordCount, h.LastOffsetDelta)
	}
	if c := h.Compression(); c > CompressionZstd {
		return fmt.Errorf("%w: unknown codec %d", ErrCompression, int8(c))
	}
	if h.LeaderEpoch < -1 {
		return fmt.Errorf("%w: %d", ErrLeaderEpoch, h.LeaderEpoch)
	}
	return nil
}

// SetBaseOffset rewrites the base offset of the batch at the start of b. The
// CRC does not cover it, so the batch stays valid.
func SetBaseOffset(b []byte, offset int64) {
	binary.BigEndian.PutUint64(b[baseOffsetPos:], uint64(offset))
}

// SetLeaderEpoch rewrites the partition leader epoch, which the CRC does not cover.
func SetLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[leaderEpochPos:], uint32(epoch))
}

// checksum computes the CRC of a complete batch.
func checksum(b []byte) uint32 {
	return crc32.Checksum(b[attributesPos:], castagnoli)
}
