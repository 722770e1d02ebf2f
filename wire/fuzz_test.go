package wire

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/require"
)

// Seeds beyond these f.Add calls live in testdata/fuzz/<FuzzName>/, in the
// go test corpus format: batches of every codec, runs with a torn tail, and
// batches kmsg wrote.

// fuzzMax keeps a fuzzed batch from expanding to more than this, so the
// fuzzer spends its time on decoding.
const fuzzMax = 1 << 20

func seedBatches(f *testing.F) {
	f.Helper()
	for _, c := range codecs {
		b := build(f, BatchOptions{Compression: c, ProducerID: 1, ProducerEpoch: 2, BaseSequence: 3}, sampleRecords()[:6])
		f.Add(b)
		f.Add(b[:len(b)-1])
		f.Add(append(b, b[:HeaderSize+5]...))
	}
	f.Add([]byte{})
	f.Add(rawBatch(1, 0, okRecord(0).encode()))
	f.Add(rawBatch(2, 0, append(okRecord(0).encode(), 0x80)))
}

func FuzzValidate(f *testing.F) {
	seedBatches(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Validate(b)
		if err != nil {
			return
		}
		require.LessOrEqual(t, h.Size(), len(b))
		require.GreaterOrEqual(t, h.Size(), HeaderSize)
		require.Equal(t, h.CRC, crc32.Checksum(b[attributesPos:h.Size()], crc32.MakeTable(crc32.Castagnoli)))
		require.Equal(t, int32(h.LastOffsetDelta)+1, h.RecordCount)
		size, err := PeekSize(b)
		require.NoError(t, err)
		require.Equal(t, h.Size(), size)
	})
}

func FuzzRecords(f *testing.F) {
	seedBatches(f)
	d := Decoder{MaxDecompressed: fuzzMax}
	f.Fuzz(func(t *testing.T, b []byte) {
		// Fuzzed bytes rarely carry a good CRC: fix it, so that the
		// decoder past validation gets fuzzed too.
		if len(b) >= HeaderSize {
			if size, err := PeekSize(b); err == nil && size <= len(b) {
				fixed := append([]byte{}, b...)
				binary.BigEndian.PutUint32(fixed[crcPos:], crc32.Checksum(fixed[attributesPos:size], crc32.MakeTable(crc32.Castagnoli)))
				b = fixed
			}
		}
		h, verr := Validate(b)
		n := 0
		err := d.Records(b, func(r Record) error {
			n++
			require.LessOrEqual(t, len(r.Key)+len(r.Value), fuzzMax)
			return nil
		})
		if verr != nil {
			require.Error(t, err, "Records validates as Validate does")
			return
		}
		if err == nil {
			require.Equal(t, int(h.RecordCount), n)
		}
	})
}

func FuzzBatches(f *testing.F) {
	seedBatches(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		total := 0
		rest, err := Batches(b, func(batch []byte, h Header) error {
			require.Equal(t, h.Size(), len(batch))
			require.Equal(t, b[total:total+len(batch)], batch)
			total += len(batch)
			return nil
		})
		require.Equal(t, b[total:], rest, "rest follows the batches delivered")
		if err == nil && len(rest) > 0 {
			// A partial batch: shorter than its length says.
			size, perr := PeekSize(rest)
			if perr == nil {
				require.Greater(t, size, len(rest))
			}
		}
	})
}

// FuzzRoundTrip builds a batch from arbitrary fields and decodes it back.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte("key"), []byte("value"), "header", []byte("hv"), int64(1_700_000_000_000), uint8(0), uint8(3), uint8(0))
	f.Add([]byte{}, []byte{}, "", []byte{}, int64(-1), uint8(1), uint8(1), uint8(0xff))
	f.Add([]byte(nil), bytes.Repeat([]byte("ab"), 5000), "k", []byte(nil), int64(0), uint8(2), uint8(7), uint8(0x0f))
	f.Add([]byte{0}, []byte{1}, "\x00", []byte{2}, int64(-1<<62), uint8(3), uint8(20), uint8(0x33))
	f.Add([]byte("z"), []byte("zstd"), "h", []byte("v"), int64(1<<62), uint8(4), uint8(2), uint8(0xa5))
	var d Decoder
	bld := NewBuilder(NoProducer)
	var buf []byte
	f.Fuzz(func(t *testing.T, key, value []byte, hkey string, hvalue []byte, ts int64, codec, count, nils uint8) {
		c := Compression(codec % 5)
		n := int(count%32) + 1
		// nils picks, per record, which fields are null.
		pick := func(i, bit int, b []byte) []byte {
			if nils>>((i+bit)%8)&1 == 1 {
				return nil
			}
			if b == nil {
				return []byte{}
			}
			return b
		}
		recs := make([]rec, n)
		for i := range recs {
			recs[i] = rec{
				ts:    ts + int64(i)*int64(int8(codec)),
				key:   pick(i, 0, key),
				value: pick(i, 1, value),
			}
			for j := 0; j < i%3; j++ {
				recs[i].headers = append(recs[i].headers, RecordHeader{Key: hkey, Value: pick(i, j+2, hvalue)})
			}
		}
		opts := BatchOptions{Compression: c, ProducerID: ts, ProducerEpoch: int16(count), BaseSequence: int32(nils)}
		bld.Reset(opts)
		for _, r := range recs {
			bld.Append(r.ts, r.key, r.value, r.headers)
		}
		var err error
		buf, err = bld.AppendTo(buf[:0])
		require.NoError(t, err)
		require.Equal(t, n, bld.Len())
		if c == CompressionNone {
			require.Equal(t, len(buf), bld.Size())
			size := 0
			for i, r := range recs {
				size += RecordSize(r.ts-recs[0].ts, int32(i), r.key, r.value, r.headers)
			}
			require.Equal(t, HeaderSize+size, len(buf))
		}
		h, err := Validate(buf)
		require.NoError(t, err)
		require.Equal(t, opts.ProducerID, h.ProducerID)
		require.Equal(t, opts.ProducerEpoch, h.ProducerEpoch)
		require.Equal(t, opts.BaseSequence, h.BaseSequence)
		require.Equal(t, c, h.Compression())
		maxTS := recs[0].ts
		for _, r := range recs {
			maxTS = max(maxTS, r.ts)
		}
		require.Equal(t, maxTS, h.MaxTimestamp)
		SetBaseOffset(buf, ts)
		requireRecords(t, ts, recs, decodeAll(t, &d, buf))
	})
}
