package wire

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/stretchr/testify/require"
)

func TestCompressRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 100_000)
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	inputs := map[string][]byte{
		"empty":  {},
		"byte":   {42},
		"text":   textValue(r, 200_000),
		"random": random,
		"zeros":  make([]byte, 1<<20),
	}
	for _, c := range codecs {
		for name, in := range inputs {
			t.Run(c.String()+"/"+name, func(t *testing.T) {
				prefix := []byte("prefix")
				out, err := Compress(c, append([]byte{}, prefix...), in)
				require.NoError(t, err)
				require.Equal(t, prefix, out[:len(prefix)], "Compress appends")
				if c != CompressionNone && name == "zeros" {
					require.Less(t, len(out), len(in)/10)
				}
				// Independent libraries read what Compress wrote.
				require.Equal(t, in, append([]byte{}, refDecompress(t, c, out[len(prefix):])...))

				back, err := Decompress(c, append([]byte{}, prefix...), out[len(prefix):], 0)
				require.NoError(t, err)
				require.Equal(t, prefix, back[:len(prefix)], "Decompress appends")
				require.True(t, bytes.Equal(in, back[len(prefix):]))

				// And what the libraries wrote with their defaults.
				back, err = Decompress(c, nil, refCompress(t, c, in), 0)
				require.NoError(t, err)
				require.True(t, bytes.Equal(in, back))
			})
		}
	}
}

func TestDecompressLimit(t *testing.T) {
	zeros := make([]byte, 2<<20)
	for _, c := range codecs {
		t.Run(c.String(), func(t *testing.T) {
			compressed, err := Compress(c, nil, zeros)
			require.NoError(t, err)
			_, err = Decompress(c, nil, compressed, 1<<20)
			require.ErrorIs(t, err, ErrCompression)
			out, err := Decompress(c, nil, compressed, len(zeros))
			require.NoError(t, err, "exactly at the limit")
			require.Len(t, out, len(zeros))

			if c == CompressionNone {
				return // nothing to decompress in an uncompressed batch
			}
			// A Decoder applies its MaxDecompressed to batches.
			batch := build(t, BatchOptions{Compression: c}, []rec{{value: zeros}})
			d := Decoder{MaxDecompressed: 1 << 20}
			require.ErrorIs(t, d.Records(batch, func(Record) error { return nil }), ErrCompression)
			d.MaxDecompressed = 4 << 20
			require.NoError(t, d.Records(batch, func(Record) error { return nil }))
			// Back to a small cap after a large one.
			d.MaxDecompressed = 1 << 20
			require.ErrorIs(t, d.Records(batch, func(Record) error { return nil }), ErrCompression)
		})
	}
}

// TestDecompressionBomb sends batches that expand past the default cap.
func TestDecompressionBomb(t *testing.T) {
	zeros := make([]byte, DefaultMaxDecompressed+1)
	for _, c := range []Compression{CompressionSnappy, CompressionLZ4, CompressionZstd} {
		t.Run(c.String(), func(t *testing.T) {
			compressed, err := Compress(c, nil, zeros)
			require.NoError(t, err)
			require.Less(t, len(compressed), len(zeros)/10)
			batch := rawBatch(1, int16(c), compressed)
			require.ErrorIs(t, Records(batch, func(Record) error { return nil }), ErrCompression)
		})
	}
	t.Run("snappy length header", func(t *testing.T) {
		// A block that claims 1 TiB is refused before anything is allocated.
		block := binary.AppendUvarint(nil, 1<<40)
		block = append(block, 0, 0, 0, 0)
		_, err := Decompress(CompressionSnappy, nil, block, 0)
		require.ErrorIs(t, err, ErrCompression)
	})
	t.Run("xerial blocks add up", func(t *testing.T) {
		// Each block is under the cap, together they are over it.
		_, err := Decompress(CompressionSnappy, nil, xerial(make([]byte, 3<<20), 1<<20), 2<<20)
		require.ErrorIs(t, err, ErrCompression)
	})
}

func TestDecompressMalformed(t *testing.T) {
	text := textValue(rand.New(rand.NewPCG(3, 4)), 10_000)
	for _, c := range codecs[1:] {
		t.Run(c.String(), func(t *testing.T) {
			good, err := Compress(c, nil, text)
			require.NoError(t, err)
			cases := map[string][]byte{
				"empty":     {},
				"garbage":   bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 50),
				"truncated": good[:len(good)/2],
			}
			for name, in := range cases {
				_, err := Decompress(c, nil, in, 0)
				require.ErrorIs(t, err, ErrCompression, name)
				// In a batch, the failure surfaces from Records.
				batch := rawBatch(1, int16(c), in)
				require.ErrorIs(t, Records(batch, func(Record) error { return nil }), ErrCompression, name)
			}
		})
	}
	t.Run("xerial", func(t *testing.T) {
		good := xerial(text, 1000)
		for name, in := range map[string][]byte{
			"cut in a length":  good[:xerialHeaderSize+2],
			"cut in a block":   good[:xerialHeaderSize+4+10],
			"length past end":  append(append([]byte{}, good[:xerialHeaderSize]...), 0, 0, 1, 0, 1, 2, 3),
			"block not snappy": append(append([]byte{}, good[:xerialHeaderSize]...), 0, 0, 0, 3, 0xff, 0xff, 0xff),
		} {
			_, err := Decompress(CompressionSnappy, nil, in, 0)
			require.ErrorIs(t, err, ErrCompression, name)
		}
		out, err := Decompress(CompressionSnappy, nil, good, 0)
		require.NoError(t, err)
		require.Equal(t, text, out)
		out, err = Decompress(CompressionSnappy, nil, good[:xerialHeaderSize], 0)
		require.NoError(t, err, "a xerial stream of no blocks is empty")
		require.Empty(t, out)
	})
	t.Run("unknown codec", func(t *testing.T) {
		_, err := Compress(Compression(6), nil, text)
		require.ErrorIs(t, err, ErrCompression)
		_, err = Decompress(Compression(6), nil, text, 0)
		require.ErrorIs(t, err, ErrCompression)
		b := NewBuilder(BatchOptions{Compression: 5})
		b.Append(0, nil, []byte("v"), nil)
		_, err = b.AppendTo(nil)
		require.ErrorIs(t, err, ErrCompression)
	})
}

// TestSnappyWritesPlainBlock checks the framing Depot writes: one raw block,
// as franz-go writes it, not xerial.
func TestSnappyWritesPlainBlock(t *testing.T) {
	text := textValue(rand.New(rand.NewPCG(5, 6)), 5000)
	out, err := Compress(CompressionSnappy, nil, text)
	require.NoError(t, err)
	require.False(t, bytes.HasPrefix(out, xerialMagic))
	n, err := s2.DecodedLen(out)
	require.NoError(t, err)
	require.Equal(t, len(text), n)
}

// TestDecoderReuse decodes batches of every codec, large then small, through
// one Decoder, checking that a reused buffer never leaks old records.
func TestDecoderReuse(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var d Decoder
	for round := 0; round < 3; round++ {
		for _, c := range codecs {
			for _, n := range []int{200, 3, 50} {
				recs := make([]rec, n)
				for i := range recs {
					recs[i] = rec{ts: int64(i), key: textValue(r, 10), value: textValue(r, r.IntN(2000))}
					if i%2 == 0 {
						recs[i].headers = []RecordHeader{{Key: string(textValue(r, 5)), Value: textValue(r, 3)}}
					}
				}
				batch := build(t, BatchOptions{Compression: c}, recs)
				requireRecords(t, 0, recs, decodeAll(t, &d, batch))
			}
		}
	}
}

// TestRecordsKeepAliasing checks the promise of the package-level Records:
// records of a compressed batch stay valid after the call.
func TestRecordsKeepAliasing(t *testing.T) {
	recs := sampleRecords()
	for _, c := range codecs {
		var vals [][]byte
		for range 3 {
			batch := build(t, BatchOptions{Compression: c}, recs)
			vals = vals[:0]
			require.NoError(t, Records(batch, func(r Record) error {
				vals = append(vals, r.Value)
				return nil
			}))
			// Another batch through the pool must not overwrite them.
			other := build(t, BatchOptions{Compression: c}, []rec{{value: bytes.Repeat([]byte("x"), 10_000)}})
			require.NoError(t, Records(other, func(Record) error { return nil }))
			for i, v := range vals {
				requireSameBytes(t, recs[i].value, v, "%s record %d", c, i)
			}
		}
	}
}

func TestDecodeAllocations(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	recs := make([]rec, 64)
	for i := range recs {
		recs[i] = rec{ts: int64(i), key: textValue(r, 16), value: textValue(r, 1000),
			headers: []RecordHeader{{Key: "trace-id", Value: []byte("abc")}, {Key: "source", Value: nil}}}
	}
	batch := build(t, NoProducer, recs)
	var d Decoder
	fn := func(Record) error { return nil }
	require.NoError(t, d.Records(batch, fn)) // header keys seen once
	allocs := testing.AllocsPerRun(50, func() {
		if err := d.Records(batch, fn); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs, "uncompressed decode allocates nothing")

	var it BatchIterator
	run := append(append([]byte{}, batch...), batch...)
	allocs = testing.AllocsPerRun(50, func() {
		it.Reset(run)
		for it.Next() {
		}
	})
	require.Zero(t, allocs, "iterating allocates nothing")

	b := NewBuilder(NoProducer)
	var buf []byte
	encode := func() {
		b.Reset(NoProducer)
		for _, r := range recs {
			b.Append(r.ts, r.key, r.value, r.headers)
		}
		var err error
		buf, err = b.AppendTo(buf[:0])
		if err != nil {
			t.Fatal(err)
		}
	}
	encode()
	require.Zero(t, testing.AllocsPerRun(50, encode), "a reused builder allocates nothing")
	require.Equal(t, batch, buf)
}

// The package-level Records gives a compressed batch's records one buffer
// of their own, allocated once at its exact size: the output is not grown
// into it from a few KiB.
func TestRecordsAllocateTheirBufferOnce(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector empties the pools whose reuse this counts")
	}
	r := rand.New(rand.NewPCG(13, 14))
	recs := make([]rec, 256)
	for i := range recs {
		recs[i] = rec{ts: int64(i), value: textValue(r, 1000)}
	}
	for _, c := range codecs {
		batch := build(t, BatchOptions{Compression: c}, recs)
		fn := func(Record) error { return nil }
		require.NoError(t, Records(batch, fn)) // the pooled decoder's buffer grows once
		allocs := testing.AllocsPerRun(20, func() {
			if err := Records(batch, fn); err != nil {
				t.Fatal(err)
			}
		})
		require.LessOrEqual(t, allocs, 2.0, "%s: the records' buffer, and at most one more", c)
	}
}

// TestCodecsStartNoGoroutines checks that pooled codec state decodes and
// encodes synchronously: the package starts no goroutines.
func TestCodecsStartNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	text := textValue(rand.New(rand.NewPCG(11, 12)), 300_000)
	for _, c := range codecs {
		out, err := Compress(c, nil, text)
		require.NoError(t, err)
		back, err := Decompress(c, nil, out, 0)
		require.NoError(t, err)
		require.Equal(t, text, back)
	}
	// Goroutines of earlier tests may still be ending.
	for deadline := time.Now().Add(time.Second); runtime.NumGoroutine() > before && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), before)
}
