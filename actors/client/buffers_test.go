package client

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBatchBuffersClasses(t *testing.T) {
	p := newBatchBuffers(1 << 20)
	require.Len(t, p.classes, 9, "4 KiB to 1 MiB")
	for _, tc := range []struct{ n, capacity int }{
		{0, 4 << 10}, {1, 4 << 10}, {4 << 10, 4 << 10}, {4<<10 + 1, 8 << 10},
		{100 << 10, 128 << 10}, {1 << 20, 1 << 20},
	} {
		b := p.get(tc.n)
		require.Zero(t, len(b), "n=%d", tc.n)
		require.Equal(t, tc.capacity, cap(b), "n=%d", tc.n)
	}
	require.Equal(t, 1<<20+1, cap(p.get(1<<20+1)), "beyond the largest class: exactly what is asked")

	// A 1 MiB + 61 batch size needs the 2 MiB class.
	require.Len(t, newBatchBuffers(1<<20+61).classes, 10)
}

func TestBatchBuffersReuse(t *testing.T) {
	p := newBatchBuffers(1 << 20)
	b := p.get(64 << 10)
	b = append(b, "records"...)
	p.put(b)
	// sync.Pool may drop what it holds at any time, so a reused buffer is
	// looked for a few times; a put that kept nothing would never be seen.
	reused := false
	for range 100 {
		got := p.get(64 << 10)
		require.Zero(t, len(got))
		if &got[:1][0] == &b[:1][0] {
			reused = true
			break
		}
		p.put(got)
	}
	require.True(t, reused)

	odd := make([]byte, 0, 5000)
	p.put(odd) // not a class size: dropped
	for range 10 {
		require.Equal(t, 8<<10, cap(p.get(5000)))
	}
	p.put(nil) // dropped
}
