package wire

import (
	"bytes"
	stdgzip "compress/gzip"
	"encoding/binary"
	"hash/crc32"
	"io"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The kmsg side of these tests compresses and decompresses with the codec
// libraries directly (the standard library for gzip, library defaults
// elsewhere), never through this package.

func refCompress(t *testing.T, c Compression, src []byte) []byte {
	t.Helper()
	switch c {
	case CompressionNone:
		return src
	case CompressionGzip:
		var buf bytes.Buffer
		w := stdgzip.NewWriter(&buf)
		_, err := w.Write(src)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		return buf.Bytes()
	case CompressionSnappy:
		return s2.EncodeSnappy(nil, src)
	case CompressionLZ4:
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		_, err := w.Write(src)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		return buf.Bytes()
	case CompressionZstd:
		e, err := zstd.NewWriter(nil)
		require.NoError(t, err)
		defer e.Close()
		return e.EncodeAll(src, nil)
	}
	t.Fatalf("codec %v", c)
	return nil
}

func refDecompress(t *testing.T, c Compression, src []byte) []byte {
	t.Helper()
	switch c {
	case CompressionNone:
		return src
	case CompressionGzip:
		r, err := stdgzip.NewReader(bytes.NewReader(src))
		require.NoError(t, err)
		out, err := io.ReadAll(r)
		require.NoError(t, err)
		return out
	case CompressionSnappy:
		out, err := s2.Decode(nil, src)
		require.NoError(t, err)
		return out
	case CompressionLZ4:
		out, err := io.ReadAll(lz4.NewReader(bytes.NewReader(src)))
		require.NoError(t, err)
		return out
	case CompressionZstd:
		d, err := zstd.NewReader(nil)
		require.NoError(t, err)
		defer d.Close()
		out, err := d.DecodeAll(src, nil)
		require.NoError(t, err)
		return out
	}
	t.Fatalf("codec %v", c)
	return nil
}

// xerial frames src as Kafka's Java producer does, in blocks of at most
// blockSize bytes.
func xerial(src []byte, blockSize int) []byte {
	out := append([]byte{}, xerialMagic...)
	out = binary.BigEndian.AppendUint32(out, 1)
	out = binary.BigEndian.AppendUint32(out, 1)
	for len(src) > 0 {
		n := min(blockSize, len(src))
		block := s2.EncodeSnappy(nil, src[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
		out = append(out, block...)
		src = src[n:]
	}
	return out
}

// kmsgRecords parses a records section with kmsg.
func kmsgRecords(t *testing.T, src []byte, n int) []kmsg.Record {
	t.Helper()
	var out []kmsg.Record
	for len(src) > 0 {
		l, m := binary.Varint(src)
		require.Greater(t, m, 0)
		var r kmsg.Record
		require.NoError(t, r.ReadFrom(src[:m+int(l)]))
		out = append(out, r)
		src = src[m+int(l):]
	}
	require.Len(t, out, n)
	return out
}

// kmsgBatch encodes recs as a batch with kmsg, records section compressed
// by compressFn, CRC computed as Kafka does.
func kmsgBatch(t *testing.T, c Compression, baseOffset int64, opts BatchOptions, recs []rec, compressFn func([]byte) []byte) []byte {
	t.Helper()
	var section []byte
	maxTS := recs[0].ts
	for i, r := range recs {
		kr := kmsg.Record{
			TimestampDelta64: r.ts - recs[0].ts,
			OffsetDelta:      int32(i),
			Key:              r.key,
			Value:            r.value,
		}
		for _, h := range r.headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		body := kr.AppendTo(nil)[1:] // Length 0 takes one byte
		kr.Length = int32(len(body))
		section = kr.AppendTo(section)
		maxTS = max(maxTS, r.ts)
	}
	records := compressFn(section)
	attrs := int16(c)
	if opts.LogAppendTime {
		attrs |= timestampTypeBit
	}
	kb := kmsg.RecordBatch{
		FirstOffset:          baseOffset,
		Length:               int32(49 + len(records)),
		PartitionLeaderEpoch: 5,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      int32(len(recs) - 1),
		FirstTimestamp:       recs[0].ts,
		MaxTimestamp:         maxTS,
		ProducerID:           opts.ProducerID,
		ProducerEpoch:        opts.ProducerEpoch,
		FirstSequence:        opts.BaseSequence,
		NumRecords:           int32(len(recs)),
		Records:              records,
	}
	raw := kb.AppendTo(nil)
	kb.CRC = int32(crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return kb.AppendTo(nil)
}

var producers = map[string]BatchOptions{
	"no producer": NoProducer,
	"idempotent":  {ProducerID: 123456789, ProducerEpoch: 7, BaseSequence: 1000},
}

func TestBuilderDecodesWithKmsg(t *testing.T) {
	recs := sampleRecords()
	for _, c := range codecs {
		for name, opts := range producers {
			t.Run(c.String()+"/"+name, func(t *testing.T) {
				opts.Compression = c
				batch := build(t, opts, recs)
				SetBaseOffset(batch, 9000)
				SetLeaderEpoch(batch, 3)

				var kb kmsg.RecordBatch
				require.NoError(t, kb.ReadFrom(batch))
				require.Equal(t, int64(9000), kb.FirstOffset)
				require.Equal(t, int32(len(batch)-LogOverhead), kb.Length)
				require.Equal(t, int32(3), kb.PartitionLeaderEpoch)
				require.Equal(t, int8(2), kb.Magic)
				require.Equal(t, int16(c), kb.Attributes)
				require.Equal(t, int32(len(recs)-1), kb.LastOffsetDelta)
				require.Equal(t, recs[0].ts, kb.FirstTimestamp)
				require.Equal(t, int64(1_700_000_100_000), kb.MaxTimestamp)
				require.Equal(t, opts.ProducerID, kb.ProducerID)
				require.Equal(t, opts.ProducerEpoch, kb.ProducerEpoch)
				require.Equal(t, opts.BaseSequence, kb.FirstSequence)
				require.Equal(t, int32(len(recs)), kb.NumRecords)
				// kmsg re-encodes the batch byte for byte, and the CRC is
				// Kafka's: CRC-32C of everything from the attributes on.
				require.Equal(t, batch, kb.AppendTo(nil))
				reencoded := kb.AppendTo(nil)
				require.Equal(t, uint32(kb.CRC), crc32.Checksum(reencoded[21:], crc32.MakeTable(crc32.Castagnoli)))

				krs := kmsgRecords(t, refDecompress(t, c, kb.Records), len(recs))
				for i, r := range recs {
					kr := krs[i]
					require.Equal(t, int32(i), kr.OffsetDelta)
					require.Equal(t, r.ts, kb.FirstTimestamp+kr.TimestampDelta64)
					requireSameBytes(t, r.key, kr.Key)
					requireSameBytes(t, r.value, kr.Value)
					require.Len(t, kr.Headers, len(r.headers))
					for j, h := range r.headers {
						require.Equal(t, h.Key, kr.Headers[j].Key)
						requireSameBytes(t, h.Value, kr.Headers[j].Value)
					}
				}
			})
		}
	}
}

func TestKmsgBatchDecodes(t *testing.T) {
	recs := sampleRecords()
	var d Decoder
	for _, c := range codecs {
		for name, opts := range producers {
			t.Run(c.String()+"/"+name, func(t *testing.T) {
				batch := kmsgBatch(t, c, 555, opts, recs, func(b []byte) []byte { return refCompress(t, c, b) })
				h, err := Validate(batch)
				require.NoError(t, err)
				require.Equal(t, int64(555), h.BaseOffset)
				require.Equal(t, int32(5), h.LeaderEpoch)
				require.Equal(t, c, h.Compression())
				require.Equal(t, opts.ProducerID, h.ProducerID)
				require.Equal(t, opts.ProducerEpoch, h.ProducerEpoch)
				require.Equal(t, opts.BaseSequence, h.BaseSequence)
				require.Equal(t, int32(len(recs)), h.RecordCount)
				require.Equal(t, int64(555+len(recs)), h.NextOffset())

				requireRecords(t, 555, recs, decodeAll(t, &d, batch))
				var viaPackage []got
				require.NoError(t, Records(batch, func(r Record) error {
					viaPackage = append(viaPackage, copyRecord(r))
					return nil
				}))
				requireRecords(t, 555, recs, viaPackage)
			})
		}
	}
}

func TestKmsgXerialSnappyDecodes(t *testing.T) {
	recs := sampleRecords()
	for _, blockSize := range []int{1, 100, 32 << 10} {
		batch := kmsgBatch(t, CompressionSnappy, 0, NoProducer, recs, func(b []byte) []byte { return xerial(b, blockSize) })
		var d Decoder
		requireRecords(t, 0, recs, decodeAll(t, &d, batch))
	}
}

func TestLogAppendTime(t *testing.T) {
	recs := sampleRecords()
	opts := NoProducer
	opts.LogAppendTime = true
	batch := build(t, opts, recs)
	h, err := Validate(batch)
	require.NoError(t, err)
	require.True(t, h.LogAppendTime())
	var kb kmsg.RecordBatch
	require.NoError(t, kb.ReadFrom(batch))
	require.Equal(t, int16(timestampTypeBit), kb.Attributes)
	var d Decoder
	out := decodeAll(t, &d, batch)
	require.Len(t, out, len(recs))
	for _, g := range out {
		require.Equal(t, h.MaxTimestamp, g.ts)
	}
}
