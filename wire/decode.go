package wire

import (
	"encoding/binary"
	"fmt"
	"sync"
)

// Bounds of a Decoder's table of header keys.
const (
	maxInternedKeys   = 1024
	maxInternedKeyLen = 128
)

// Decoder decodes the records of many batches and reuses its buffers from
// batch to batch: the decompression buffer, the slice behind Record.Headers
// and the strings of header keys seen before. Decoding an uncompressed batch
// allocates nothing once header keys have been seen; a compressed one
// allocates only while the buffer grows to the largest batch.
//
// The zero value is ready to use. A Decoder is not safe for concurrent use.
type Decoder struct {
	// MaxDecompressed caps the size, in bytes, that the records of one
	// compressed batch may expand to; a batch that expands further fails with
	// ErrCompression. Zero or less means DefaultMaxDecompressed (64 MiB).
	MaxDecompressed int
	// SkipCRC skips the CRC check, for batches validated already, for
	// example by Batches or a BatchIterator. Default false: Records checks
	// the CRC of every batch.
	SkipCRC bool

	buf     []byte            // decompressed records, reused
	headers []RecordHeader    // backing array of Record.Headers, reused
	keys    map[string]string // header keys seen, to decode them without allocating
}

// Records decodes every record of the batch at the start of b and calls fn
// for each in order, stopping at the first error fn returns and returning it
// unchanged. It validates the batch first (see Validate; the CRC only when
// SkipCRC is false), then checks that the records fill the batch exactly and
// match its record count.
//
// The Record handed to fn is only valid until fn returns: Key, Value and
// header values alias b, or for a compressed batch the Decoder's buffer, which
// the next call of Records overwrites; Headers is reused for the next record.
// Copy what must outlive fn. For a batch in log append time, each record's
// Timestamp is the batch's MaxTimestamp, as in Kafka.
//
// Errors other than fn's wrap ErrShort, ErrBadMagic, ErrBadLength, ErrBadCRC,
// ErrRecordCount, ErrCompression or ErrCorruptRecord.
func (d *Decoder) Records(b []byte, fn func(Record) error) error {
	return d.records(b, fn, true)
}

// records decodes as Records does; reuse false decompresses into a new
// buffer that the records may keep aliasing after the call.
func (d *Decoder) records(b []byte, fn func(Record) error, reuse bool) error {
	h, err := validate(b, !d.SkipCRC)
	if err != nil {
		return err
	}
	body := b[HeaderSize:h.Size()]
	if c := h.Compression(); c != CompressionNone {
		limit := d.MaxDecompressed
		if limit <= 0 {
			limit = DefaultMaxDecompressed
		}
		// The decoder's buffer takes the output, grown once to the
		// largest batch rather than for each; records kept after the
		// call get a copy of exactly their size.
		dst, err := decompress(c, d.buf[:0], body, limit)
		d.buf = dst
		if err != nil {
			return err
		}
		body = dst
		if !reuse {
			body = append([]byte(nil), dst...)
		}
	}
	return d.decode(&h, body, fn)
}

// decode decodes h.RecordCount records from body, which they must fill.
func (d *Decoder) decode(h *Header, body []byte, fn func(Record) error) error {
	var rec Record
	rec.Headers = d.headers[:0]
	defer func() { d.headers = rec.Headers[:0] }()
	src := body
	for i := int32(0); i < h.RecordCount; i++ {
		if len(src) == 0 {
			return fmt.Errorf("%w: %d records present, header says %d", ErrRecordCount, i, h.RecordCount)
		}
		length, n := binary.Varint(src)
		if n <= 0 || length < 0 {
			return fmt.Errorf("%w: record %d: bad length", ErrCorruptRecord, i)
		}
		src = src[n:]
		if length > int64(len(src)) {
			return fmt.Errorf("%w: %w: record %d of %d bytes, %d left in the batch", ErrCorruptRecord, ErrBadLength, i, length, len(src))
		}
		r := src[:length]
		src = src[length:]

		if len(r) < 1 {
			return fmt.Errorf("%w: record %d: empty", ErrCorruptRecord, i)
		}
		r = r[1:] // attributes, unused
		tsDelta, n := binary.Varint(r)
		if n <= 0 {
			return fmt.Errorf("%w: record %d: bad timestamp delta", ErrCorruptRecord, i)
		}
		r = r[n:]
		offsetDelta, n := binary.Varint(r)
		if n <= 0 {
			return fmt.Errorf("%w: record %d: bad offset delta", ErrCorruptRecord, i)
		}
		r = r[n:]
		var ok bool
		if rec.Key, r, ok = readBytes(r); !ok {
			return fmt.Errorf("%w: record %d: bad key", ErrCorruptRecord, i)
		}
		if rec.Value, r, ok = readBytes(r); !ok {
			return fmt.Errorf("%w: record %d: bad value", ErrCorruptRecord, i)
		}
		count, n := binary.Varint(r)
		if n <= 0 {
			return fmt.Errorf("%w: record %d: bad header count", ErrCorruptRecord, i)
		}
		r = r[n:]
		// Each header takes at least two bytes, its two lengths.
		if count < 0 || count > int64(len(r)/2) {
			return fmt.Errorf("%w: record %d: header count %d in %d bytes", ErrCorruptRecord, i, count, len(r))
		}
		rec.Headers = rec.Headers[:0]
		for j := int64(0); j < count; j++ {
			var k, v []byte
			if k, r, ok = readBytes(r); !ok || k == nil {
				return fmt.Errorf("%w: record %d: bad key of header %d", ErrCorruptRecord, i, j)
			}
			if v, r, ok = readBytes(r); !ok {
				return fmt.Errorf("%w: record %d: bad value of header %d", ErrCorruptRecord, i, j)
			}
			rec.Headers = append(rec.Headers, RecordHeader{Key: d.intern(k), Value: v})
		}
		if len(r) != 0 {
			return fmt.Errorf("%w: record %d: %d bytes past its fields", ErrCorruptRecord, i, len(r))
		}
		rec.Offset = h.BaseOffset + offsetDelta
		if h.LogAppendTime() {
			rec.Timestamp = h.MaxTimestamp
		} else {
			rec.Timestamp = h.BaseTimestamp + tsDelta
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
	if len(src) != 0 {
		return fmt.Errorf("%w: %d bytes after %d records", ErrRecordCount, len(src), h.RecordCount)
	}
	return nil
}

// readBytes reads a varint length and that many bytes; length -1 is nil.
// The bytes alias b and their capacity ends with them.
func readBytes(b []byte) (v, rest []byte, ok bool) {
	n, m := binary.Varint(b)
	if m <= 0 || n < -1 {
		return nil, b, false
	}
	b = b[m:]
	if n == -1 {
		return nil, b, true
	}
	if n > int64(len(b)) {
		return nil, b, false
	}
	return b[:n:n], b[n:], true
}

// intern returns k as a string, from the Decoder's table when seen before.
func (d *Decoder) intern(k []byte) string {
	if s, ok := d.keys[string(k)]; ok {
		return s
	}
	s := string(k)
	if len(k) <= maxInternedKeyLen {
		if d.keys == nil {
			d.keys = make(map[string]string)
		} else if len(d.keys) >= maxInternedKeys {
			clear(d.keys)
		}
		d.keys[s] = s
	}
	return s
}

var decoders = sync.Pool{New: func() any { return new(Decoder) }}

// Records decodes every record of the batch at the start of b and calls fn
// for each, as Decoder.Records does with the default options (CRC checked,
// DefaultMaxDecompressed), with one difference: the records of a compressed
// batch alias a buffer of their own, so Key, Value and header values stay
// valid after the call for as long as b does (or indefinitely when the batch
// is compressed). Headers is still reused from record to record. Safe for
// concurrent use; a consumer decoding many batches should keep a Decoder.
func Records(b []byte, fn func(Record) error) error {
	d := decoders.Get().(*Decoder)
	err := d.records(b, fn, false)
	clear(d.headers[:cap(d.headers)]) // do not keep b alive from the pool
	decoders.Put(d)
	return err
}
