package wire

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// rec is a record as a test writes it.
type rec struct {
	ts      int64
	key     []byte
	value   []byte
	headers []RecordHeader
}

// got is a decoded record copied out of the decoder's buffers.
type got struct {
	offset  int64
	ts      int64
	key     []byte
	value   []byte
	headers []RecordHeader
}

var codecs = []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd}

// clone copies b, keeping nil and empty apart.
func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// copyRecord copies r out of the buffers it aliases.
func copyRecord(r Record) got {
	g := got{offset: r.Offset, ts: r.Timestamp, key: clone(r.Key), value: clone(r.Value)}
	for _, h := range r.Headers {
		g.headers = append(g.headers, RecordHeader{Key: h.Key, Value: clone(h.Value)})
	}
	return g
}

// build encodes recs into one batch with a Builder.
func build(t testing.TB, opts BatchOptions, recs []rec) []byte {
	t.Helper()
	b := NewBuilder(opts)
	for _, r := range recs {
		b.Append(r.ts, r.key, r.value, r.headers)
	}
	out, err := b.AppendTo(nil)
	require.NoError(t, err)
	return out
}

// decodeAll decodes batch with d and copies every record.
func decodeAll(t testing.TB, d *Decoder, batch []byte) []got {
	t.Helper()
	var out []got
	require.NoError(t, d.Records(batch, func(r Record) error {
		out = append(out, copyRecord(r))
		return nil
	}))
	return out
}

// requireRecords checks that decoded records are recs at offsets from base.
func requireRecords(t testing.TB, base int64, recs []rec, out []got) {
	t.Helper()
	require.Len(t, out, len(recs))
	for i, r := range recs {
		g := out[i]
		require.Equal(t, base+int64(i), g.offset, "record %d offset", i)
		require.Equal(t, r.ts, g.ts, "record %d timestamp", i)
		requireSameBytes(t, r.key, g.key, "record %d key", i)
		requireSameBytes(t, r.value, g.value, "record %d value", i)
		require.Len(t, g.headers, len(r.headers), "record %d headers", i)
		for j, h := range r.headers {
			require.Equal(t, h.Key, g.headers[j].Key, "record %d header %d key", i, j)
			requireSameBytes(t, h.Value, g.headers[j].Value, "record %d header %d value", i, j)
		}
	}
}

// requireSameBytes checks equal contents and equal nil-ness.
func requireSameBytes(t testing.TB, want, have []byte, msgAndArgs ...any) {
	t.Helper()
	require.Equal(t, want == nil, have == nil, msgAndArgs...)
	require.True(t, bytes.Equal(want, have), msgAndArgs...)
}

// sampleRecords covers null and empty keys and values, headers with null and
// empty values, and timestamps that go backwards.
func sampleRecords() []rec {
	return []rec{
		{ts: 1_700_000_000_000, key: []byte("k1"), value: []byte("v1")},
		{ts: 1_700_000_000_005, key: nil, value: []byte("null key")},
		{ts: 1_700_000_000_003, key: []byte{}, value: []byte("empty key")},
		{ts: 1_700_000_000_010, key: []byte("null value"), value: nil},
		{ts: 1_700_000_000_010, key: []byte("empty value"), value: []byte{}},
		{ts: 1_699_999_999_000, key: nil, value: nil, headers: []RecordHeader{
			{Key: "trace", Value: []byte("abc")},
			{Key: "null", Value: nil},
			{Key: "", Value: []byte{}},
		}},
		{ts: 1_700_000_100_000, key: bytes.Repeat([]byte("K"), 300), value: bytes.Repeat([]byte("compressible "), 500),
			headers: []RecordHeader{{Key: "trace", Value: []byte("def")}}},
	}
}

// textValue returns n bytes of compressible, word-like text.
func textValue(r *rand.Rand, n int) []byte {
	words := []string{"partition", "offset", "leader", "epoch", "replica", "segment", "index", "fetch", "produce", "batch", "record", "topic"}
	out := make([]byte, 0, n+16)
	for len(out) < n {
		out = append(out, words[r.IntN(len(words))]...)
		out = append(out, ' ')
		out = binary.AppendUvarint(out, r.Uint64N(1000))
	}
	return out[:n]
}

// fixCRC recomputes the CRC of the batch b after a test edited it.
func fixCRC(b []byte) {
	binary.BigEndian.PutUint32(b[crcPos:], crc32.Checksum(b[attributesPos:], crc32.MakeTable(crc32.Castagnoli)))
}

// rawBatch wraps a records section, as is, in a valid header for count
// records with the given attributes.
func rawBatch(count int32, attributes int16, records []byte) []byte {
	b := make([]byte, HeaderSize, HeaderSize+len(records))
	b = append(b, records...)
	be := binary.BigEndian
	be.PutUint32(b[batchLengthPos:], uint32(len(b)-LogOverhead))
	be.PutUint32(b[leaderEpochPos:], 0xffffffff)
	b[magicPos] = Magic
	be.PutUint16(b[attributesPos:], uint16(attributes))
	be.PutUint32(b[lastOffsetDeltaPos:], uint32(count-1))
	be.PutUint64(b[baseTimestampPos:], 1000)
	be.PutUint64(b[maxTimestampPos:], 1000)
	be.PutUint64(b[producerIDPos:], ^uint64(0))
	be.PutUint16(b[producerEpochPos:], 0xffff)
	be.PutUint32(b[baseSequencePos:], 0xffffffff)
	be.PutUint32(b[recordCountPos:], uint32(count))
	fixCRC(b)
	return b
}

// rawRecord encodes one record body from its parts as varints, with the
// length prefix computed, so tests can write lengths the Builder never would.
type rawRecord struct {
	tsDelta, offsetDelta int64
	keyLen               int64 // written as is; key bytes follow when >= 0
	key                  []byte
	valueLen             int64
	value                []byte
	headerCount          int64
	headers              []byte // raw header bytes
}

func (r rawRecord) encode() []byte {
	var body []byte
	body = append(body, 0)
	body = binary.AppendVarint(body, r.tsDelta)
	body = binary.AppendVarint(body, r.offsetDelta)
	body = binary.AppendVarint(body, r.keyLen)
	body = append(body, r.key...)
	body = binary.AppendVarint(body, r.valueLen)
	body = append(body, r.value...)
	body = binary.AppendVarint(body, r.headerCount)
	body = append(body, r.headers...)
	return append(binary.AppendVarint(nil, int64(len(body))), body...)
}

// okRecord is a well-formed raw record with key "k" and value "v".
func okRecord(offsetDelta int64) rawRecord {
	return rawRecord{offsetDelta: offsetDelta, keyLen: 1, key: []byte("k"), valueLen: 1, value: []byte("v")}
}
