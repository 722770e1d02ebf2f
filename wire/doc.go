// Package wire encodes, decodes and validates Kafka record batches (magic 2).
//
// A record batch is the unit Depot stores, replicates and serves. Its layout is
// Kafka's RecordBatch v2, byte for byte, and must never change: stored logs,
// replicas and Kafka clients all depend on it. All integers are big-endian.
//
//	offset  size  field
//	     0     8  baseOffset            first offset in the batch; the broker rewrites it
//	     8     4  batchLength           bytes that follow this field (total size - 12)
//	    12     4  partitionLeaderEpoch
//	    16     1  magic                 always 2
//	    17     4  crc                   CRC-32C (Castagnoli) of bytes 21 to the end
//	    21     2  attributes            see below
//	    23     4  lastOffsetDelta       offset of the last record minus baseOffset
//	    27     8  baseTimestamp         timestamp of the first record (ms)
//	    35     8  maxTimestamp          largest timestamp in the batch (ms)
//	    43     8  producerId            -1 when not idempotent
//	    51     2  producerEpoch
//	    53     4  baseSequence          sequence of the first record, -1 when none
//	    57     4  recordCount
//	    61     -  records               possibly compressed, see below
//
// Attributes: bits 0-2 compression codec (0 none, 1 gzip, 2 snappy, 3 lz4,
// 4 zstd), bit 3 timestamp type (0 create time, 1 log append time), bit 4
// transactional, bit 5 control batch, bit 6 delete horizon set.
//
// The CRC does not cover baseOffset, batchLength or partitionLeaderEpoch, so the
// broker can assign offsets by rewriting baseOffset without recomputing it, and
// a fetch can hand stored bytes to a client unchanged.
//
// Each record (after decompression of the records section) is:
//
//	length          varint   bytes that follow
//	attributes      int8     unused, 0
//	timestampDelta  varlong  timestamp minus baseTimestamp
//	offsetDelta     varint   offset minus baseOffset
//	keyLength       varint   -1 for a null key
//	key             bytes
//	valueLength     varint   -1 for a null value
//	value           bytes
//	headerCount     varint
//	headers         headerCount x (keyLength varint, key, valueLength varint, value)
//
// Varints are zig-zag encoded, as in protocol buffers' sint32/sint64.
//
// # Use
//
// A producer fills a Builder and appends the batch to a buffer (AppendTo). A
// broker checks each produced batch with Validate, which does not decompress,
// and rewrites its base offset with SetBaseOffset. A fetch returns a run of
// batches whose last one may be cut short; Batches or a BatchIterator walks
// it, validating each batch and handing back the partial tail. A consumer
// decodes records with a Decoder, which keeps its buffers from batch to
// batch; the package-level Records is the convenience for one-off use.
//
// Codecs (see compression.go for their framing) are gzip, snappy, lz4 and
// zstd, read and written as Kafka does. A compressed batch may expand to at
// most DefaultMaxDecompressed bytes (64 MiB) unless a Decoder sets another
// cap; beyond it decoding fails with ErrCompression.
//
// Errors are the package's sentinels (ErrShort, ErrBadMagic, ErrBadCRC,
// ErrBadLength, ErrRecordCount, ErrCompression, ErrCorruptRecord), wrapped
// with detail; compare with errors.Is. Bad input never panics.
//
// Builder, Decoder and BatchIterator are not safe for concurrent use; each
// belongs to one goroutine (or actor). The package-level functions are safe
// for concurrent use: codec state comes from package-level pools.
package wire
