package wire

import "fmt"

// BatchIterator walks a run of concatenated batches as a fetch response or a
// segment file holds them. The last batch may be cut short (a fetch stops at
// a byte limit, a crash tears a write): that is not an error, the iterator
// stops before it and Rest returns its bytes.
//
// Use:
//
//	var it wire.BatchIterator
//	it.Reset(b)
//	for it.Next() {
//		batch, h := it.Batch(), it.Header()
//		...
//	}
//	if err := it.Err(); err != nil { ... } // it.Pos() is where the bad batch starts
//	partial := it.Rest()
//
// The zero value is an iterator over nothing. A BatchIterator allocates
// nothing and is not safe for concurrent use.
type BatchIterator struct {
	// SkipCRC skips the CRC check of each batch. Default false: every batch
	// is checked as Validate checks it.
	SkipCRC bool

	src    []byte
	pos    int // start of the current batch after Next, else of the next one
	next   int // start of the batch after the current one
	batch  []byte
	header Header
	err    error
}

// Reset points the iterator at b, from its start, keeping SkipCRC.
func (it *BatchIterator) Reset(b []byte) {
	*it = BatchIterator{SkipCRC: it.SkipCRC, src: b}
}

// Next advances to the next complete batch and reports whether there is one.
// It returns false at the end of the input, before a trailing partial batch,
// and on the first damaged batch, after which Err is set and the iterator
// stays where the damage is.
func (it *BatchIterator) Next() bool {
	if it.err != nil {
		return false
	}
	it.pos = it.next
	it.batch = nil
	rest := it.src[it.pos:]
	if len(rest) < LogOverhead {
		return false
	}
	size, err := PeekSize(rest)
	if err != nil {
		it.err = atByte(err, it.pos)
		return false
	}
	if len(rest) > magicPos && rest[magicPos] != Magic {
		it.err = atByte(fmt.Errorf("%w: %d", ErrBadMagic, int8(rest[magicPos])), it.pos)
		return false
	}
	if size > len(rest) {
		return false
	}
	h, err := validate(rest[:size], !it.SkipCRC)
	if err != nil {
		it.err = atByte(err, it.pos)
		return false
	}
	it.batch = rest[:size:size]
	it.header = h
	it.next = it.pos + size
	return true
}

// Batch is the current batch's bytes, valid after Next returned true. It
// aliases the input.
func (it *BatchIterator) Batch() []byte { return it.batch }

// Header is the current batch's header, valid after Next returned true.
func (it *BatchIterator) Header() Header { return it.header }

// Err is the error that stopped the iteration, or nil when it stopped at the
// end of the input or at a partial batch. It wraps one of the sentinels
// Validate returns.
func (it *BatchIterator) Err() error { return it.err }

// Pos is the byte position in the input of the current batch, or, once Next
// has returned false, of the first byte not consumed: the damaged batch when
// Err is set, else the partial batch (or the end).
func (it *BatchIterator) Pos() int { return it.pos }

// Rest is the input from Pos on: once Next has returned false and Err is nil,
// the trailing partial batch, empty when the input ended on a batch boundary.
func (it *BatchIterator) Rest() []byte { return it.src[it.pos:] }

// Batches calls fn for each complete batch at the start of b, in order, with
// the batch's bytes (aliasing b) and its header. Each batch is validated as
// Validate does (CRC included) before fn sees it. It returns the bytes left
// over: empty when b ends on a batch boundary, a trailing partial batch
// otherwise, which is not an error. On a damaged batch it returns an error
// wrapping Validate's sentinel and rest starting at that batch; on an error
// from fn it returns that error unchanged and rest starting at the batch fn
// refused. Batches allocates nothing but the errors it returns.
func Batches(b []byte, fn func(batch []byte, h Header) error) (rest []byte, err error) {
	var it BatchIterator
	it.Reset(b)
	for it.Next() {
		if err := fn(it.batch, it.header); err != nil {
			return it.Rest(), err
		}
	}
	return it.Rest(), it.Err()
}

// atByte adds the position of a damaged batch to its error.
func atByte(err error, pos int) error {
	return fmt.Errorf("%w (batch at byte %d)", err, pos)
}
