package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// DefaultMaxDecompressed is the largest records section, in bytes, that a
// compressed batch may expand to unless a Decoder sets another cap. A batch
// that expands further is refused with ErrCompression, so a small hostile
// batch cannot make a broker or consumer allocate without bound.
const DefaultMaxDecompressed = 64 << 20

// Codec framing, as Kafka writes it:
//
//	gzip    one gzip stream (RFC 1952)
//	snappy  one raw snappy block, or Java's xerial framing:
//	          magic   8 bytes  "\x82SNAPPY\x00"
//	          version 4 bytes  big-endian, 1
//	          compat  4 bytes  big-endian, 1
//	          blocks  repeated (length uint32 big-endian, raw snappy block)
//	lz4     one LZ4 frame (the standard frame format, magic 0x184D2204)
//	zstd    one zstd frame
//
// Depot writes snappy as one raw block, as franz-go does, and reads both.
const (
	xerialHeaderSize = 16
	zstdWindowSize   = 64 << 10
)

var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// Compress appends src compressed with codec c to dst and returns the
// extended slice. CompressionNone appends src unchanged. Safe for concurrent
// use: codec state comes from package-level pools.
func Compress(c Compression, dst, src []byte) ([]byte, error) {
	return compress(c, dst, src)
}

// Decompress appends src decompressed with codec c to dst and returns the
// extended slice. It returns an error wrapping ErrCompression for an unknown
// codec, malformed input, or output of more than limit bytes (limit <= 0
// means DefaultMaxDecompressed). Safe for concurrent use.
func Decompress(c Compression, dst, src []byte, limit int) ([]byte, error) {
	if limit <= 0 {
		limit = DefaultMaxDecompressed
	}
	return decompress(c, dst, src, limit)
}

// compress appends src compressed with codec c to dst.
func compress(c Compression, dst, src []byte) ([]byte, error) {
	switch c {
	case CompressionNone:
		return append(dst, src...), nil
	case CompressionGzip:
		e := gzipEncoders.Get().(*gzipEncoder)
		defer gzipEncoders.Put(e)
		e.out.b = dst
		e.w.Reset(&e.out)
		_, err := e.w.Write(src)
		if err == nil {
			err = e.w.Close()
		}
		dst, e.out.b = e.out.b, nil
		if err != nil {
			return dst, fmt.Errorf("%w: gzip: %v", ErrCompression, err)
		}
		return dst, nil
	case CompressionSnappy:
		n := s2.MaxEncodedLen(len(src))
		if n < 0 {
			return dst, fmt.Errorf("%w: snappy: %d bytes too large", ErrCompression, len(src))
		}
		dst = grow(dst, n)
		out := s2.EncodeSnappy(dst[len(dst):len(dst)+n], src)
		return dst[:len(dst)+len(out)], nil
	case CompressionLZ4:
		e := lz4Encoders.Get().(*lz4Encoder)
		defer lz4Encoders.Put(e)
		e.out.b = dst
		e.w.Reset(&e.out)
		_, err := e.w.Write(src)
		if err == nil {
			err = e.w.Close()
		}
		dst, e.out.b = e.out.b, nil
		if err != nil {
			return dst, fmt.Errorf("%w: lz4: %v", ErrCompression, err)
		}
		return dst, nil
	case CompressionZstd:
		e := zstdEncoders.Get().(*zstd.Encoder)
		defer zstdEncoders.Put(e)
		return e.EncodeAll(src, dst), nil
	}
	return dst, fmt.Errorf("%w: unknown codec %d", ErrCompression, int8(c))
}

// decompress appends src decompressed with codec c to dst, refusing output
// larger than limit bytes.
func decompress(c Compression, dst, src []byte, limit int) ([]byte, error) {
	switch c {
	case CompressionNone:
		if len(src) > limit {
			return dst, fmt.Errorf("%w: %d bytes exceed the limit of %d", ErrCompression, len(src), limit)
		}
		return append(dst, src...), nil
	case CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd:
		if len(src) == 0 {
			// Every codec writes a header, even for no data.
			return dst, fmt.Errorf("%w: %s: no data", ErrCompression, c)
		}
	}
	switch c {
	case CompressionGzip:
		d := gzipDecoders.Get().(*gzipDecoder)
		defer gzipDecoders.Put(d)
		d.in.Reset(src)
		defer d.in.Reset(nil)
		var err error
		if d.r == nil {
			d.r, err = gzip.NewReader(&d.in)
		} else {
			err = d.r.Reset(&d.in)
		}
		if err == nil {
			dst, err = readLimited(d.r, dst, limit)
		}
		if err != nil {
			return dst, codecError("gzip", err)
		}
		return dst, nil
	case CompressionSnappy:
		var err error
		if len(src) >= xerialHeaderSize && bytes.HasPrefix(src, xerialMagic) {
			dst, err = decodeXerial(dst, src[xerialHeaderSize:], limit)
		} else {
			dst, err = decodeSnappyBlock(dst, src, limit)
		}
		if err != nil {
			return dst, codecError("snappy", err)
		}
		return dst, nil
	case CompressionLZ4:
		d := lz4Decoders.Get().(*lz4Decoder)
		defer lz4Decoders.Put(d)
		d.in.Reset(src)
		defer d.in.Reset(nil)
		d.r.Reset(&d.in)
		var err error
		dst, err = readLimited(d.r, dst, limit)
		if err != nil {
			return dst, codecError("lz4", err)
		}
		return dst, nil
	case CompressionZstd:
		d := zstdDecoders.Get().(*zstdDecoder)
		defer zstdDecoders.Put(d)
		if d.limit != limit {
			if err := d.d.ResetWithOptions(nil, zstd.WithDecoderMaxMemory(uint64(limit))); err != nil {
				return dst, codecError("zstd", err)
			}
			d.limit = limit
		}
		start := len(dst)
		out, err := d.d.DecodeAll(src, dst)
		if err != nil {
			return dst, codecError("zstd", err)
		}
		if len(out)-start > limit {
			return dst, codecError("zstd", errTooLarge)
		}
		return out, nil
	}
	return dst, fmt.Errorf("%w: unknown codec %d", ErrCompression, int8(c))
}

var errTooLarge = errors.New("decompressed size exceeds the limit")

func codecError(codec string, err error) error {
	return fmt.Errorf("%w: %s: %v", ErrCompression, codec, err)
}

// decodeSnappyBlock appends the raw snappy block src to dst.
func decodeSnappyBlock(dst, src []byte, limit int) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return dst, err
	}
	if n > limit {
		return dst, errTooLarge
	}
	dst = grow(dst, n)
	out, err := s2.Decode(dst[len(dst):len(dst)+n], src)
	if err != nil {
		return dst, err
	}
	return dst[:len(dst)+len(out)], nil
}

// decodeXerial appends the blocks of a xerial stream, its header removed.
func decodeXerial(dst, src []byte, limit int) ([]byte, error) {
	start := len(dst)
	for len(src) > 0 {
		if len(src) < 4 {
			return dst, errors.New("xerial: truncated block length")
		}
		n := binary.BigEndian.Uint32(src)
		src = src[4:]
		if uint64(n) > uint64(len(src)) {
			return dst, fmt.Errorf("xerial: block of %d bytes, %d present", n, len(src))
		}
		var err error
		dst, err = decodeSnappyBlock(dst, src[:n], limit-(len(dst)-start))
		if err != nil {
			return dst, err
		}
		src = src[n:]
	}
	return dst, nil
}

// readLimited appends everything r yields to dst, failing once more than
// limit bytes have come.
func readLimited(r io.Reader, dst []byte, limit int) ([]byte, error) {
	start := len(dst)
	for {
		if len(dst) == cap(dst) {
			dst = grow(dst, 4096)
		}
		end := cap(dst)
		if max := start + limit + 1; end > max {
			end = max
		}
		n, err := r.Read(dst[len(dst):end])
		dst = dst[:len(dst)+n]
		if len(dst)-start > limit {
			return dst[:start], errTooLarge
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst[:start], err
		}
	}
}

// grow makes room for at least n more bytes after len(b).
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	c := 2*cap(b) + n
	nb := make([]byte, len(b), c)
	copy(nb, b)
	return nb
}

// appendWriter is an io.Writer that appends to b.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// Codec state is expensive to create, so it is pooled. Each pooled value
// carries the reader or writer it is wired to, so using one allocates nothing.
type (
	gzipEncoder struct {
		w   *gzip.Writer
		out appendWriter
	}
	gzipDecoder struct {
		r  *gzip.Reader // created on first use: NewReader needs a valid header
		in bytes.Reader
	}
	lz4Encoder struct {
		w   *lz4.Writer
		out appendWriter
	}
	lz4Decoder struct {
		r  *lz4.Reader
		in bytes.Reader
	}
	zstdDecoder struct {
		d     *zstd.Decoder
		limit int // the decoder's max memory
	}
)

var (
	gzipEncoders = sync.Pool{New: func() any {
		e := &gzipEncoder{}
		e.w, _ = gzip.NewWriterLevel(&e.out, gzip.DefaultCompression)
		return e
	}}
	gzipDecoders = sync.Pool{New: func() any { return &gzipDecoder{} }}
	lz4Encoders  = sync.Pool{New: func() any {
		e := &lz4Encoder{}
		e.w = lz4.NewWriter(&e.out)
		// Kafka's own blocks are 64 KiB; the library's 4 MiB default costs
		// that much buffer per writer.
		_ = e.w.Apply(lz4.BlockSizeOption(lz4.Block64Kb))
		return e
	}}
	lz4Decoders = sync.Pool{New: func() any {
		d := &lz4Decoder{}
		d.r = lz4.NewReader(&d.in)
		return d
	}}
	zstdEncoders = sync.Pool{New: func() any {
		e, err := zstd.NewWriter(nil,
			zstd.WithEncoderConcurrency(1),
			zstd.WithWindowSize(zstdWindowSize),
			zstd.WithZeroFrames(true),
		)
		if err != nil {
			panic(err) // fixed, valid options
		}
		return e
	}}
	zstdDecoders = sync.Pool{New: func() any {
		d, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(DefaultMaxDecompressed),
		)
		if err != nil {
			panic(err) // fixed, valid options
		}
		return &zstdDecoder{d: d, limit: DefaultMaxDecompressed}
	}}
)
