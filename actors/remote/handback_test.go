package remote

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/messages"
)

// fetchFrameOf is a frame of tr's pool holding records after
// FetchRecordsReserve bytes, as a partition reads it, and its response.
func fetchFrameOf(tr *Transport, records []byte) (*messages.FetchResponse, []byte) {
	buf := tr.Frame(FetchRecordsReserve + len(records))
	frame := append((*buf)[:FetchRecordsReserve], records...)
	return &messages.FetchResponse{Topic: "t", Records: frame[FetchRecordsReserve:]}, frame
}

// A fetch that asks to hand back its frame gets, in its own actor system,
// a FetchFrame holding it; the first Release puts the frame back into the
// pool and empties the records, and later ones do nothing. A fetch that
// does not ask, or asks from another actor system, gets what FetchMessage
// gives.
func TestFetchAnswer(t *testing.T) {
	system := actortest.System(t)
	local := actor.NewPID(system.Address(), "consumer")
	other := actor.NewPID("127.0.0.1:1", "consumer")
	records := patterned(64<<10, 3)

	t.Run("handed back once", func(t *testing.T) {
		tr := NewTransport()
		resp, frame := fetchFrameOf(tr, records)
		ff, ok := tr.FetchAnswer(system, local, true, resp, frame).(*FetchFrame)
		require.True(t, ok)
		require.Same(t, resp, ff.Response)
		require.Equal(t, records, ff.Response.Records)
		before := tr.PoolStats()
		ff.Release()
		ff.Release()
		require.Nil(t, ff.Response.Records)
		require.Equal(t, before.Puts+1, tr.PoolStats().Puts, "one frame, handed back once")
		again := tr.Frame(len(frame))
		require.Same(t, unsafe.SliceData(frame), unsafe.SliceData(*again), "the frame serves the next fetch")
		require.Equal(t, before.Reused+1, tr.PoolStats().Reused)
	})
	t.Run("without a frame", func(t *testing.T) {
		tr := NewTransport()
		resp := &messages.FetchResponse{Records: []byte{1, 2, 3}}
		ff, ok := tr.FetchAnswer(system, local, true, resp, nil).(*FetchFrame)
		require.True(t, ok)
		ff.Release()
		require.Equal(t, []byte{1, 2, 3}, resp.Records, "records copied out of their frame are the response's")
		require.Zero(t, tr.PoolStats().Puts)
	})
	t.Run("not asked", func(t *testing.T) {
		tr := NewTransport()
		resp, frame := fetchFrameOf(tr, records)
		require.Same(t, resp, tr.FetchAnswer(system, local, false, resp, frame))
	})
	t.Run("another actor system", func(t *testing.T) {
		tr := NewTransport()
		resp, frame := fetchFrameOf(tr, records)
		msg := tr.FetchAnswer(system, other, true, resp, frame)
		_, isFrame := msg.(*FetchFrame)
		require.False(t, isFrame, "a remote consumer's stream hands the frame back")
		require.IsType(t, &encodedMessage{}, msg)
	})
	t.Run("nil transport", func(t *testing.T) {
		var tr *Transport
		resp, frame := fetchFrameOf(tr, records)
		ff, ok := tr.FetchAnswer(system, local, true, resp, frame).(*FetchFrame)
		require.True(t, ok)
		ff.Release()
		require.Equal(t, records, resp.Records, "a frame no pool lent stays with the response")
		var none *FetchFrame
		none.Release()
	})
}

// A fetch of several partitions that asks to hand back its frames gets, in
// its own actor system, a FetchesFrame with a FetchFrame for each part, in
// order: Release hands back every part's frame, once. From another actor
// system, or not asked, it gets what FetchesMessage gives.
func TestFetchesAnswer(t *testing.T) {
	system := actortest.System(t)
	local := actor.NewPID(system.Address(), "consumer")
	other := actor.NewPID("127.0.0.1:1", "consumer")
	tr := NewTransport()
	first, firstFrame := fetchFrameOf(tr, patterned(64<<10, 1))
	second := &messages.FetchResponse{Topic: "t", Records: []byte{1, 2, 3}}
	third, thirdFrame := fetchFrameOf(tr, patterned(32<<10, 2))
	resp := &messages.FetchPartitionsResponse{Partitions: []*messages.FetchResponse{first, second, third}}

	ff, ok := tr.FetchesAnswer(system, local, true, resp, [][]byte{firstFrame, nil, thirdFrame}).(*FetchesFrame)
	require.True(t, ok)
	require.Same(t, resp, ff.Response)
	require.Len(t, ff.Parts, 3)
	for i, p := range ff.Parts {
		require.Same(t, resp.Partitions[i], p.Response)
	}
	before := tr.PoolStats()
	ff.Release()
	ff.Release()
	require.Equal(t, before.Puts+2, tr.PoolStats().Puts, "two frames, each handed back once")
	require.Nil(t, first.Records)
	require.Equal(t, []byte{1, 2, 3}, second.Records, "records copied out of a frame stay")

	again, againFrame := fetchFrameOf(tr, patterned(64<<10, 1))
	resp = &messages.FetchPartitionsResponse{Partitions: []*messages.FetchResponse{again}}
	require.Same(t, resp, tr.FetchesAnswer(system, local, false, resp, [][]byte{againFrame}), "not asked")
	_, isFrame := tr.FetchesAnswer(system, other, true, resp, [][]byte{againFrame}).(*FetchesFrame)
	require.False(t, isFrame, "a remote consumer's stream hands the frames back")
	var none *FetchesFrame
	none.Release()
}

// A held buffer goes back to the pool when the last of its holder and the
// requests carrying the records lent from it lets go, in whatever order,
// and only then; a second release of either changes nothing.
func TestHeldBufferGoesBackLast(t *testing.T) {
	const size = 256 << 10
	for _, order := range [][]string{
		{"holder", "a", "b"},
		{"a", "holder", "b"},
		{"a", "b", "holder"},
		{"b", "a", "a", "holder", "holder"},
	} {
		t.Run(fmt.Sprint(order), func(t *testing.T) {
			tr := NewTransport()
			h := tr.HoldBuffer(size)
			buf := h.Bytes()
			require.Len(t, buf, size)
			copy(buf, patterned(size, 7))
			requests := map[string]*messages.ProduceRequest{
				"a": {Records: buf[100:5000]},
				"b": {Records: buf[5000:size]},
			}
			h.Lend(requests["a"].Records)
			h.Lend(requests["b"].Records)
			left := map[string]bool{"holder": true, "a": true, "b": true}
			for _, who := range order {
				if len(left) > 0 {
					require.Zero(t, tr.PoolStats().Puts, "back in the pool before %v let go", left)
				}
				delete(left, who)
				if who == "holder" {
					h.Release()
				} else {
					tr.Release(requests[who])
				}
			}
			require.EqualValues(t, 1, tr.PoolStats().Puts)
			require.Zero(t, tr.received.size())
			require.True(t, pooledBufferHolds(tr.buffers, size, &buf[0]))
		})
	}
}

// Records that do not lie in the held buffer are not lent: nothing they
// do holds the buffer back.
func TestHeldBufferLendsOnlyItsOwn(t *testing.T) {
	tr := NewTransport()
	const size = 9000 // its buffer's capacity is larger (see classSize)
	h := tr.HoldBuffer(size)
	elsewhere := make([]byte, 100)
	h.Lend(elsewhere)
	h.Lend(nil)
	require.Zero(t, tr.received.size())
	require.Greater(t, cap(h.Bytes()), size+10)
	h.Lend(h.Bytes()[size-10 : size+10])
	require.Zero(t, tr.received.size(), "records running past the buffer's end")
	h.Release()
	require.EqualValues(t, 1, tr.PoolStats().Puts)
	h.Lend(h.Bytes()[:10])
	require.Zero(t, tr.received.size(), "lent after its holder let go")

	var none *Transport
	nh := none.HoldBuffer(100)
	require.Len(t, nh.Bytes(), 100)
	nh.Lend(nh.Bytes())
	nh.Release()
}

// A poisoned pool overwrites each buffer handed back, all its capacity;
// one that is not leaves it as it was.
func TestPoisonPool(t *testing.T) {
	for _, poison := range []bool{false, true} {
		t.Run(fmt.Sprint(poison), func(t *testing.T) {
			tr := NewTransport()
			tr.PoisonPool(poison)
			b := tr.Frame(10 << 10)
			copy(*b, patterned(10<<10, 1))
			whole := (*b)[:cap(*b)]
			*b = (*b)[:10]
			tr.PutFrame(b)
			want := bytes.Repeat([]byte{poisonByte}, len(whole))
			if poison {
				require.Equal(t, want, whole)
			} else {
				require.Equal(t, patterned(10<<10, 1), whole[:10<<10])
			}
		})
	}
}

// Holders and partitions on many goroutines lend and release records of
// buffers that the pool hands out again at once, poisoned: what a request
// reads before its release is always what was written into its buffer
// (run with -race).
func TestHeldBuffersReleaseConcurrently(t *testing.T) {
	tr := NewTransport()
	tr.PoisonPool(true)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				size := 8<<10 + 97*i
				h := tr.HoldBuffer(size)
				want := patterned(size, byte(g+i))
				copy(h.Bytes(), want)
				half := size / 2
				reqs := []*messages.ProduceRequest{{Records: h.Bytes()[:half]}, {Records: h.Bytes()[half:]}}
				for _, r := range reqs {
					h.Lend(r.Records)
				}
				var partitions sync.WaitGroup
				for j, r := range reqs {
					partitions.Add(1)
					go func() {
						defer partitions.Done()
						from := j * half
						if !bytes.Equal(want[from:from+len(r.Records)], r.Records) {
							t.Errorf("records of request %d overwritten before their release", j)
						}
						tr.Release(r)
					}()
				}
				h.Release()
				partitions.Wait()
			}
		}()
	}
	wg.Wait()
	require.Zero(t, tr.received.size())
	stats := tr.PoolStats()
	require.Equal(t, stats.Gets, stats.Puts, "every buffer handed back")
	require.Positive(t, stats.Reused)
}
