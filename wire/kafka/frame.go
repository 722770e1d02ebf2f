// Package kafka reads and writes the frames of Kafka's wire protocol: the
// size prefix, the request and response headers, and around them the
// bodies, which franz-go's kmsg encodes and decodes. It holds no protocol
// message of its own. Pure: no I/O, no goroutines, safe for concurrent use.
//
// Every frame, in both directions, is a size and then that many bytes. All
// integers are big-endian. Never change:
//
//	size            int32    bytes that follow; never negative
//
// A request frame holds a request header and the request's body:
//
//	api_key         int16    which API (kmsg.Key)
//	api_version     int16    the body's version
//	correlation_id  int32    echoed in the response
//	client_id       int16 length, then bytes; -1 for null
//	tagged fields   uvarint count, then (uvarint tag, uvarint size, bytes)
//	                         each; only in header v2, the header of a
//	                         flexible version (KIP-482)
//	body            the request at api_version
//
// A response frame holds a response header and the response's body:
//
//	correlation_id  int32    the request's
//	tagged fields   uvarint count, ...; only in header v1, the header of a
//	                         flexible version, and never for ApiVersions,
//	                         whose response header is always v0 (KIP-511)
//	body            the response at the request's api_version
package kafka

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Sizes of the frame fields. Never change.
const (
	// SizeBytes is the size prefix of every frame.
	SizeBytes = 4
	// minRequestHeader is a request header with a null client id and no
	// tagged fields: key, version, correlation id, client id length.
	minRequestHeader = 2 + 2 + 4 + 2
)

// DefaultMaxRequestBytes is Kafka's socket.request.max.bytes: 100 MiB.
const DefaultMaxRequestBytes = 100 << 20

// Errors of frames that cannot be read. Each closes its connection.
var (
	// ErrNegativeSize is a frame whose size prefix is below zero.
	ErrNegativeSize = errors.New("kafka: negative frame size")
	// ErrFrameTooLarge is a frame above the size a listener accepts.
	ErrFrameTooLarge = errors.New("kafka: frame too large")
	// ErrTLS is a TLS record (a ClientHello) where a frame was expected:
	// a client that speaks TLS to a plain-text port.
	ErrTLS = errors.New("kafka: TLS handshake on a plain-text port")
	// ErrUnknownAPI is a request whose API key kmsg does not know.
	ErrUnknownAPI = errors.New("kafka: unknown API key")
	// ErrMalformed is a request whose header or body does not decode.
	ErrMalformed = errors.New("kafka: malformed request")
)

// tlsHandshake is the first byte of a TLS handshake record, and
// tlsMajor the first byte of its version (3 for SSL 3.0 to TLS 1.3).
const (
	tlsHandshake = 0x16
	tlsMajor     = 0x03
)

// FrameSize reads a frame's size prefix, which must be SizeBytes long, and
// checks it against maxBytes: a TLS record (ErrTLS), a negative size
// (ErrNegativeSize) or one above maxBytes (ErrFrameTooLarge) is refused.
// A TLS ClientHello would otherwise read as a frame of some 369 MB.
func FrameSize(prefix []byte, maxBytes int32) (int32, error) {
	if len(prefix) != SizeBytes {
		return 0, fmt.Errorf("%w: size prefix of %d bytes", ErrMalformed, len(prefix))
	}
	if prefix[0] == tlsHandshake && prefix[1] == tlsMajor {
		return 0, ErrTLS
	}
	size := int32(binary.BigEndian.Uint32(prefix))
	switch {
	case size < 0:
		return 0, fmt.Errorf("%w: %d", ErrNegativeSize, size)
	case size > maxBytes:
		return 0, fmt.Errorf("%w: %d bytes, more than %d", ErrFrameTooLarge, size, maxBytes)
	}
	return size, nil
}

// Request is one request frame, decoded.
type Request struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      *string
	// Body is the decoded request at Version, nil when Version is above
	// what kmsg knows of its API: only the header was read.
	Body kmsg.Request
}

// ParseRequest decodes a request frame, the bytes after its size prefix.
// An API key kmsg does not know is ErrUnknownAPI, with the header read; a
// header or body that does not decode is ErrMalformed. A version above
// kmsg's for its API leaves Body nil: the caller answers it or not (an
// ApiVersions request at any version is answered, KIP-511). Byte slices
// of the body (a produce request's records) share frame's memory.
func ParseRequest(frame []byte) (req Request, err error) {
	defer func() {
		// kmsg's decoders check their bounds; this is for what they do
		// not foresee, so that bad input never takes the process down.
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: decoding panicked: %v", ErrMalformed, r)
		}
	}()
	if len(frame) < minRequestHeader {
		return req, fmt.Errorf("%w: %d bytes, shorter than a request header", ErrMalformed, len(frame))
	}
	b := kbin.Reader{Src: frame}
	req.Key = b.Int16()
	req.Version = b.Int16()
	req.CorrelationID = b.Int32()
	req.ClientID = b.NullableString()
	if !b.Ok() {
		return req, fmt.Errorf("%w: header", ErrMalformed)
	}
	body := kmsg.RequestForKey(req.Key)
	if body == nil {
		return req, fmt.Errorf("%w %d", ErrUnknownAPI, req.Key)
	}
	if req.Version < 0 {
		return req, fmt.Errorf("%w: %s version %d", ErrMalformed, kmsg.NameForKey(req.Key), req.Version)
	}
	body.SetVersion(req.Version)
	if body.IsFlexible() {
		skipTags(&b)
		if !b.Ok() {
			return req, fmt.Errorf("%w: header tagged fields", ErrMalformed)
		}
	}
	if req.Version > body.MaxVersion() {
		return req, nil
	}
	if err := body.ReadFrom(b.Src); err != nil {
		return req, fmt.Errorf("%w: %s v%d: %v", ErrMalformed, kmsg.NameForKey(req.Key), req.Version, err)
	}
	req.Body = body
	return req, nil
}

// skipTags reads past a tagged-field section.
func skipTags(b *kbin.Reader) {
	for n := b.Uvarint(); n > 0 && b.Ok(); n-- {
		b.Uvarint() // the tag
		b.Span(int(b.Uvarint()))
	}
}

// AppendResponse appends the frame of resp, the answer to the request
// with correlationID: size, response header, body at resp's version.
func AppendResponse(dst []byte, correlationID int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if resp.IsFlexible() && resp.Key() != kmsg.ApiVersions.Int16() {
		dst = append(dst, 0) // no tagged fields
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-SizeBytes))
	return dst
}

// AppendRequest appends the frame of req, sent with correlationID and
// clientID: what a client writes, for tests and tools.
func AppendRequest(dst []byte, correlationID int32, clientID *string, req kmsg.Request) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.Key()))
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.GetVersion()))
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if clientID == nil {
		dst = binary.BigEndian.AppendUint16(dst, 0xffff)
	} else {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(*clientID)))
		dst = append(dst, *clientID...)
	}
	if req.IsFlexible() {
		dst = append(dst, 0)
	}
	dst = req.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-SizeBytes))
	return dst
}

// FetchResponseFrame is the frame AppendResponse makes of resp, in pieces
// to be written one after another (writev): the record batches of resp's
// partitions are pieces of their own, as they are, not copied into the
// frame; the other pieces are kmsg's encoding around them. Written in
// order, the pieces are AppendResponse's frame byte for byte. resp is left
// as it was.
//
// kmsg encodes resp twice with each partition's records replaced by one
// byte, 0x00 then 0xff: the bytes where the two encodings differ are where
// the records go, each after its length (int32, or uvarint length+1 in
// flexible versions), which is rewritten for the records' length.
func FetchResponseFrame(correlationID int32, resp *kmsg.FetchResponse) [][]byte {
	var fields []*[]byte
	for ti := range resp.Topics {
		for pi := range resp.Topics[ti].Partitions {
			if p := &resp.Topics[ti].Partitions[pi]; len(p.RecordBatches) > 0 {
				fields = append(fields, &p.RecordBatches)
			}
		}
	}
	if len(fields) == 0 {
		return [][]byte{AppendResponse(nil, correlationID, resp)}
	}
	records := make([][]byte, len(fields))
	for i, f := range fields {
		records[i], *f = *f, []byte{0x00}
	}
	zeros := AppendResponse(nil, correlationID, resp)
	for _, f := range fields {
		*f = []byte{0xff}
	}
	ones := AppendResponse(make([]byte, 0, len(zeros)), correlationID, resp)
	for i, f := range fields {
		*f = records[i]
	}
	pieces, ok := splicePlaceholders(zeros, ones, records, resp.IsFlexible())
	if !ok {
		return [][]byte{AppendResponse(nil, correlationID, resp)}
	}
	return pieces
}

// splicePlaceholders is FetchResponseFrame's frame from its two encodings
// with placeholders; false when they are not as kmsg writes them.
func splicePlaceholders(zeros, ones []byte, records [][]byte, flexible bool) ([][]byte, bool) {
	if len(zeros) != len(ones) {
		return nil, false
	}
	// A placeholder's length: int32 1, or uvarint 2.
	lengthBytes := 4
	if flexible {
		lengthBytes = 1
	}
	head := make([]byte, 0, len(zeros)+len(records)*binary.MaxVarintLen32)
	pieces := make([][]byte, 0, 2*len(records)+1)
	from, start, found, size := 0, 0, 0, 0
	for i := range zeros {
		if zeros[i] == ones[i] {
			continue
		}
		if found == len(records) || i-lengthBytes < from {
			return nil, false
		}
		length := zeros[i-lengthBytes : i]
		if (flexible && length[0] != 2) || (!flexible && binary.BigEndian.Uint32(length) != 1) {
			return nil, false
		}
		head = append(head, zeros[from:i-lengthBytes]...)
		if flexible {
			head = binary.AppendUvarint(head, uint64(len(records[found]))+1)
		} else {
			head = binary.BigEndian.AppendUint32(head, uint32(len(records[found])))
		}
		pieces = append(pieces, head[start:len(head):len(head)], records[found])
		size += len(records[found])
		start, from = len(head), i+1
		found++
	}
	if found != len(records) {
		return nil, false
	}
	head = append(head, zeros[from:]...)
	pieces = append(pieces, head[start:len(head):len(head)])
	binary.BigEndian.PutUint32(pieces[0], uint32(len(head)+size-SizeBytes))
	return pieces, true
}
