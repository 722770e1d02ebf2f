package wire

import (
	"math/rand/v2"
	"testing"
)

// benchRecords are 64 records of 1 KiB (a 16-byte key, a 1008-byte value of
// word-like text), a 64 KiB batch.
func benchRecords() []rec {
	r := rand.New(rand.NewPCG(42, 42))
	recs := make([]rec, 64)
	for i := range recs {
		recs[i] = rec{ts: 1_700_000_000_000 + int64(i), key: textValue(r, 16), value: textValue(r, 1008)}
	}
	return recs
}

func BenchmarkBuild(b *testing.B) {
	recs := benchRecords()
	bld := NewBuilder(NoProducer)
	buf := build(b, NoProducer, recs)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		bld.Reset(NoProducer)
		for _, r := range recs {
			bld.Append(r.ts, r.key, r.value, nil)
		}
		var err error
		buf, err = bld.AppendTo(buf[:0])
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidate(b *testing.B) {
	batch := build(b, NoProducer, benchRecords())
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Validate(batch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecords decodes a 64 KiB batch with a reused Decoder, CRC
// included; bytes per second count the uncompressed records.
func BenchmarkRecords(b *testing.B) {
	recs := benchRecords()
	for _, c := range codecs {
		b.Run(c.String(), func(b *testing.B) {
			batch := build(b, BatchOptions{Compression: c, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
			plain := build(b, NoProducer, recs)
			var d Decoder
			n := 0
			fn := func(r Record) error { n += len(r.Value); return nil }
			b.SetBytes(int64(len(plain)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := d.Records(batch, fn); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkBatches(b *testing.B) {
	batch := build(b, NoProducer, benchRecords())
	var all []byte
	for range 16 {
		all = append(all, batch...)
	}
	fn := func([]byte, Header) error { return nil }
	b.SetBytes(int64(len(all)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Batches(all, fn); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompress and BenchmarkDecompress measure the codecs on the
// records section of the 64 KiB batch; bytes per second count it
// uncompressed.
func BenchmarkCompress(b *testing.B) {
	section := build(b, NoProducer, benchRecords())[HeaderSize:]
	for _, c := range codecs[1:] {
		b.Run(c.String(), func(b *testing.B) {
			var dst []byte
			b.SetBytes(int64(len(section)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				var err error
				dst, err = Compress(c, dst[:0], section)
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(section))/float64(len(dst)), "ratio")
		})
	}
}

func BenchmarkDecompress(b *testing.B) {
	section := build(b, NoProducer, benchRecords())[HeaderSize:]
	for _, c := range codecs[1:] {
		b.Run(c.String(), func(b *testing.B) {
			compressed, err := Compress(c, nil, section)
			if err != nil {
				b.Fatal(err)
			}
			var dst []byte
			b.SetBytes(int64(len(section)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				dst, err = Decompress(c, dst[:0], compressed, 0)
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
