package client

import (
	"math/bits"
	"sync"
)

// minBufferShift is the size of the smallest pooled batch buffer, 4 KiB:
// what a new builder begins in.
const minBufferShift = 12

// batchBuffers pools batch buffers by size, in powers of two from 4 KiB to
// the smallest power of two that holds a full batch. A partition's open
// batch begins in a buffer the size of its last batch and moves to one
// twice as large as it fills, so that a producer writing to many partitions
// holds buffers near the bytes it buffers rather than a full batch's worth
// per partition; a partition whose batches fill keeps full-size buffers and
// never moves. Safe for concurrent use.
type batchBuffers struct {
	classes []sync.Pool // *[]byte of cap 1<<(minBufferShift+i)
}

func newBatchBuffers(batchBytes int) *batchBuffers {
	top := max(bufferClass(batchBytes), 0)
	return &batchBuffers{classes: make([]sync.Pool, top+1)}
}

// bufferClass is the index of the smallest class of at least n bytes, -1
// below the smallest.
func bufferClass(n int) int {
	if n <= 1<<minBufferShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minBufferShift
}

// get returns an empty buffer of at least n bytes: pooled, unless n is
// beyond the largest class.
func (p *batchBuffers) get(n int) []byte {
	c := bufferClass(n)
	if c >= len(p.classes) {
		return make([]byte, 0, n)
	}
	if b, ok := p.classes[c].Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, 1<<(minBufferShift+c))
}

// put returns b to its class; a buffer of another size is left to the
// garbage collector.
func (p *batchBuffers) put(b []byte) {
	n := cap(b)
	c := bufferClass(n)
	if c < 0 || c >= len(p.classes) || n != 1<<(minBufferShift+c) {
		return
	}
	b = b[:0]
	p.classes[c].Put(&b)
}
