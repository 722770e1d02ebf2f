package wire

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValidate(t *testing.T) {
	valid := build(t, NoProducer, sampleRecords())
	edit := func(f func(b []byte) []byte) []byte {
		return f(append([]byte{}, valid...))
	}
	tests := []struct {
		name  string
		batch []byte
		want  error // nil: valid
	}{
		{"valid", valid, nil},
		{"valid with bytes after", append(append([]byte{}, valid...), 1, 2, 3), nil},
		{"empty", nil, ErrShort},
		{"length field only", valid[:LogOverhead], ErrShort},
		{"short header", valid[:HeaderSize-1], ErrShort},
		{"short body", valid[:len(valid)-1], ErrShort},
		{"header only", valid[:HeaderSize], ErrShort},
		{"bad magic 1", edit(func(b []byte) []byte { b[magicPos] = 1; return b }), ErrBadMagic},
		{"bad magic 3", edit(func(b []byte) []byte { b[magicPos] = 3; return b }), ErrBadMagic},
		{"bad crc", edit(func(b []byte) []byte { b[crcPos] ^= 1; return b }), ErrBadCRC},
		{"flipped attribute bit", edit(func(b []byte) []byte { b[attributesPos+1] ^= 0x10; return b }), ErrBadCRC},
		{"flipped last byte", edit(func(b []byte) []byte { b[len(b)-1] ^= 0x80; return b }), ErrBadCRC},
		{"length below header", edit(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[batchLengthPos:], HeaderSize-LogOverhead-1)
			return b
		}), ErrBadLength},
		{"negative length", edit(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[batchLengthPos:], 0x80000000)
			return b
		}), ErrBadLength},
		{"length past end", edit(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[batchLengthPos:], uint32(len(b)-LogOverhead+1))
			return b
		}), ErrShort},
		{"shorter length", edit(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[batchLengthPos:], uint32(len(b)-LogOverhead-1))
			return b
		}), ErrBadCRC},
		{"count above last offset delta", edit(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[recordCountPos:], 100)
			fixCRC(b)
			return b
		}), ErrRecordCount},
		{"last offset delta above count", edit(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[lastOffsetDeltaPos:], 100)
			fixCRC(b)
			return b
		}), ErrRecordCount},
		{"negative count", edit(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[recordCountPos:], 0xffffffff)
			binary.BigEndian.PutUint32(b[lastOffsetDeltaPos:], 0xfffffffe)
			fixCRC(b)
			return b
		}), ErrRecordCount},
		{"zero records", build(t, NoProducer, nil), ErrRecordCount},
		{"unknown codec", edit(func(b []byte) []byte {
			binary.BigEndian.PutUint16(b[attributesPos:], 5)
			fixCRC(b)
			return b
		}), ErrCompression},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := Validate(tt.batch)
			if tt.want == nil {
				require.NoError(t, err)
				require.Equal(t, len(valid), h.Size())
				return
			}
			require.ErrorIs(t, err, tt.want)
			for _, other := range []error{ErrShort, ErrBadMagic, ErrBadCRC, ErrBadLength, ErrRecordCount, ErrCompression, ErrCorruptRecord} {
				if other != tt.want {
					require.NotErrorIs(t, err, other)
				}
			}
			// Records validates the same way before decoding.
			var d Decoder
			require.ErrorIs(t, d.Records(tt.batch, func(Record) error { return nil }), tt.want)
		})
	}
}

// TestValidateEveryBitFlip flips each bit the CRC covers, and each bit it
// does not (base offset, leader epoch), one at a time. A flipped leader
// epoch is caught only when it falls below -1.
func TestValidateEveryBitFlip(t *testing.T) {
	valid := build(t, BatchOptions{Compression: CompressionNone, ProducerID: 1, ProducerEpoch: 2, BaseSequence: 3}, sampleRecords()[:3])
	b := append([]byte{}, valid...)
	for i := 0; i < len(b); i++ {
		if i >= batchLengthPos && i < leaderEpochPos || i == magicPos {
			continue // the length and magic fields fail with their own errors
		}
		for bit := 0; bit < 8; bit++ {
			b[i] ^= 1 << bit
			_, err := Validate(b)
			switch {
			case i < batchLengthPos:
				require.NoError(t, err, "byte %d bit %d not covered by the CRC", i, bit)
			case i < magicPos:
				if epoch := int32(binary.BigEndian.Uint32(b[leaderEpochPos:])); epoch >= -1 {
					require.NoError(t, err, "byte %d bit %d: leader epoch %d", i, bit, epoch)
				} else {
					require.ErrorIs(t, err, ErrLeaderEpoch, "byte %d bit %d: leader epoch %d", i, bit, epoch)
				}
			default:
				require.ErrorIs(t, err, ErrBadCRC, "byte %d bit %d", i, bit)
			}
			b[i] ^= 1 << bit
		}
	}
	_, err := Validate(b)
	require.NoError(t, err)
}

func TestValidateEveryTruncation(t *testing.T) {
	valid := build(t, NoProducer, sampleRecords())
	for n := 0; n < len(valid); n++ {
		_, err := Validate(valid[:n])
		require.ErrorIs(t, err, ErrShort, "cut at %d", n)
	}
}

func TestHeaderAccessors(t *testing.T) {
	opts := BatchOptions{ProducerID: 9, ProducerEpoch: 1, BaseSequence: 1<<31 - 2}
	b := build(t, opts, sampleRecords()[:3])
	SetBaseOffset(b, 100)
	h, err := Validate(b)
	require.NoError(t, err)
	require.Equal(t, int64(100), h.BaseOffset)
	require.Equal(t, int64(102), h.LastOffset())
	require.Equal(t, int64(103), h.NextOffset())
	require.Equal(t, int32(0), h.LastSequence(), "sequence wraps at 2^31")
	require.False(t, h.Transactional())
	require.False(t, h.Control())
	require.False(t, h.LogAppendTime())
	require.Equal(t, CompressionNone, h.Compression())
	size, err := PeekSize(b)
	require.NoError(t, err)
	require.Equal(t, len(b), size)
	_, err = PeekSize(b[:LogOverhead-1])
	require.ErrorIs(t, err, ErrShort)

	for _, c := range codecs {
		parsed, err := ParseCompression(c.String())
		require.NoError(t, err)
		require.Equal(t, c, parsed)
	}
	_, err = ParseCompression("brotli")
	require.Error(t, err)
	require.Equal(t, "compression(7)", Compression(7).String())
}

func TestRecordsMalformed(t *testing.T) {
	enc := func(rs ...rawRecord) []byte {
		var out []byte
		for _, r := range rs {
			out = append(out, r.encode()...)
		}
		return out
	}
	header := func(keyLen int64, key []byte, valueLen int64, value []byte) []byte {
		out := binary.AppendVarint(nil, keyLen)
		out = append(out, key...)
		out = binary.AppendVarint(out, valueLen)
		return append(out, value...)
	}
	withHeaders := func(count int64, raw []byte) rawRecord {
		r := okRecord(0)
		r.headerCount = count
		r.headers = raw
		return r
	}
	negKey := okRecord(0)
	negKey.keyLen, negKey.key = -2, nil
	negValue := okRecord(0)
	negValue.valueLen, negValue.value = -5, nil
	longKey := okRecord(0)
	longKey.keyLen = 50 // key is one byte
	hugeLength := binary.AppendVarint(nil, 1<<40)
	hugeLength = append(hugeLength, enc(okRecord(0))...)

	tests := []struct {
		name    string
		count   int32
		records []byte
		want    []error
	}{
		{"one good record", 1, enc(okRecord(0)), nil},
		{"two good records", 2, enc(okRecord(0), okRecord(1)), nil},
		{"truncated record", 1, enc(okRecord(0))[:4], []error{ErrCorruptRecord, ErrBadLength}},
		{"record length past end", 2, append(enc(okRecord(0)), 40, 0, 0), []error{ErrCorruptRecord, ErrBadLength}},
		{"huge record length", 1, hugeLength, []error{ErrCorruptRecord, ErrBadLength}},
		{"negative record length", 1, append(binary.AppendVarint(nil, -3), 0, 0, 0), []error{ErrCorruptRecord}},
		{"bad varint", 1, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, []error{ErrCorruptRecord}},
		{"empty record", 1, []byte{0}, []error{ErrCorruptRecord}},
		{"fields end early", 1, func() []byte {
			b := enc(okRecord(0))
			b[0] = byte(binary.AppendVarint(nil, int64(len(b)-1-2))[0]) // drop value's byte and header count
			return b[:len(b)-2]
		}(), []error{ErrCorruptRecord}},
		{"bytes past fields", 1, func() []byte {
			b := enc(okRecord(0))
			b = append(b, 7)
			b[0] = binary.AppendVarint(nil, int64(len(b)-1))[0]
			return b
		}(), []error{ErrCorruptRecord}},
		{"extra bytes after records", 1, append(enc(okRecord(0)), 0, 0), []error{ErrRecordCount}},
		{"fewer records than count", 3, enc(okRecord(0), okRecord(1)), []error{ErrRecordCount}},
		{"key length < -1", 1, enc(negKey), []error{ErrCorruptRecord}},
		{"value length < -1", 1, enc(negValue), []error{ErrCorruptRecord}},
		{"key length past record", 1, enc(longKey), []error{ErrCorruptRecord}},
		{"absurd header count", 1, enc(withHeaders(1<<40, header(1, []byte("a"), 1, []byte("b")))), []error{ErrCorruptRecord}},
		{"negative header count", 1, enc(withHeaders(-1, nil)), []error{ErrCorruptRecord}},
		{"header count above headers", 1, enc(withHeaders(3, header(1, []byte("a"), 1, []byte("b")))), []error{ErrCorruptRecord}},
		{"null header key", 1, enc(withHeaders(1, header(-1, nil, 1, []byte("b")))), []error{ErrCorruptRecord}},
		{"header key length < -1", 1, enc(withHeaders(1, header(-7, nil, 1, []byte("b")))), []error{ErrCorruptRecord}},
		{"header value length < -1", 1, enc(withHeaders(1, header(1, []byte("a"), -9, nil))), []error{ErrCorruptRecord}},
		{"header value past record", 1, enc(withHeaders(1, header(1, []byte("a"), 9, []byte("b")))), []error{ErrCorruptRecord}},
		{"good headers", 1, enc(withHeaders(2, append(header(1, []byte("a"), -1, nil), header(0, nil, 0, nil)...))), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, c := range []Compression{CompressionNone, CompressionZstd} {
				records := tt.records
				if c != CompressionNone {
					var err error
					records, err = Compress(c, nil, records)
					require.NoError(t, err)
				}
				batch := rawBatch(tt.count, int16(c), records)
				_, err := Validate(batch)
				require.NoError(t, err, "the batch itself is sound")
				var d Decoder
				n := 0
				err = d.Records(batch, func(Record) error { n++; return nil })
				if tt.want == nil {
					require.NoError(t, err)
					require.Equal(t, int(tt.count), n)
					continue
				}
				for _, want := range tt.want {
					require.ErrorIs(t, err, want, c.String())
				}
				require.ErrorIs(t, Records(batch, func(Record) error { return nil }), tt.want[0])
			}
		})
	}
}

func TestRecordsCallbackError(t *testing.T) {
	batch := build(t, NoProducer, sampleRecords())
	stop := errors.New("stop")
	n := 0
	var d Decoder
	err := d.Records(batch, func(Record) error {
		n++
		if n == 3 {
			return stop
		}
		return nil
	})
	require.Equal(t, stop, err, "fn's error comes back unchanged")
	require.Equal(t, 3, n)
	// The decoder is still usable.
	requireRecords(t, 0, sampleRecords(), decodeAll(t, &d, batch))
}

func TestRecordsBigAndMany(t *testing.T) {
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	bigRecs := []rec{
		{ts: 1, key: []byte("big"), value: big},
		{ts: 2, key: big[:1000], value: nil, headers: []RecordHeader{{Key: "h", Value: big}}},
	}
	many := make([]rec, 10_000)
	for i := range many {
		many[i] = rec{ts: int64(1_000_000 + i), key: []byte{byte(i), byte(i >> 8)}, value: []byte("value")}
		if i%3 == 0 {
			many[i].key = nil
		}
		if i%5 == 0 {
			many[i].key = []byte{}
		}
		if i%7 == 0 {
			many[i].headers = []RecordHeader{{Key: "n", Value: []byte{byte(i)}}}
		}
	}
	var d Decoder
	for _, c := range codecs {
		t.Run(c.String(), func(t *testing.T) {
			for name, recs := range map[string][]rec{"1 MiB values": bigRecs, "10k records": many} {
				batch := build(t, BatchOptions{Compression: c, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
				SetBaseOffset(batch, 1<<40)
				requireRecords(t, 1<<40, recs, decodeAll(t, &d, batch))
				h, err := Validate(batch)
				require.NoError(t, err, name)
				require.Equal(t, int32(len(recs)), h.RecordCount, name)
			}
		})
	}
}

func TestNilAndEmptyDistinct(t *testing.T) {
	for _, c := range codecs {
		batch := build(t, BatchOptions{Compression: c}, []rec{
			{key: nil, value: []byte{}},
			{key: []byte{}, value: nil},
		})
		require.NoError(t, Records(batch, func(r Record) error {
			if r.Offset == 0 {
				require.Nil(t, r.Key)
				require.NotNil(t, r.Value)
				require.Empty(t, r.Value)
			} else {
				require.NotNil(t, r.Key)
				require.Empty(t, r.Key)
				require.Nil(t, r.Value)
			}
			return nil
		}))
	}
}
