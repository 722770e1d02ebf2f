package quorum

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/messages"
)

// snapMessage returns a MsgSnap from 1 to 2 in term with a snapshot at
// index holding size bytes of data.
func snapMessage(term, index uint64, size int) *raftpb.Message {
	data := bytes.Repeat([]byte("snapshot"), size/8+1)[:size]
	return &raftpb.Message{
		Type: raftpb.MsgSnap.Enum(),
		From: new(uint64(1)),
		To:   new(uint64(2)),
		Term: new(term),
		Snapshot: &raftpb.Snapshot{
			Data:     data,
			Metadata: &raftpb.SnapshotMetadata{Index: new(index), Term: new(term), ConfState: voters(1, 2, 3)},
		},
	}
}

func TestSplitSnapshotAndAssemble(t *testing.T) {
	for _, tc := range []struct {
		size, chunkBytes int
	}{
		{0, 200},
		{10, 200},
		{1000, 200},
		{100_000, 4096},
		{3 << 20, DefaultChunkBytes},
		{DefaultChunkBytes, DefaultChunkBytes},
	} {
		t.Run(fmt.Sprintf("%d in %d", tc.size, tc.chunkBytes), func(t *testing.T) {
			m := snapMessage(3, 100, tc.size)
			chunks, err := SplitSnapshot(m, tc.chunkBytes)
			require.NoError(t, err)
			require.NotEmpty(t, chunks)
			for i, c := range chunks {
				require.LessOrEqual(t, proto.Size(c), tc.chunkBytes)
				require.Equal(t, int32(i), c.GetSeq())
				require.Equal(t, int32(len(chunks)), c.GetTotal())
				require.Equal(t, uint64(100), c.GetIndex())
				require.Equal(t, uint64(3), c.GetTerm())
			}
			// In order, and in reverse order.
			for _, order := range [][]*messages.RaftChunk{chunks, reversed(chunks)} {
				a := NewAssembler(0)
				var got *raftpb.Message
				for i, c := range order {
					got, err = a.Add(c)
					require.NoError(t, err)
					if i < len(order)-1 {
						require.Nil(t, got)
					}
				}
				require.True(t, proto.Equal(m, got))
				require.Zero(t, a.Bytes())
			}
		})
	}
}

func reversed[T any](s []T) []T {
	out := make([]T, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

func TestSplitSnapshotRefuses(t *testing.T) {
	_, err := SplitSnapshot(&raftpb.Message{Type: raftpb.MsgApp.Enum()}, DefaultChunkBytes)
	require.Error(t, err)
	_, err = SplitSnapshot(&raftpb.Message{Type: raftpb.MsgSnap.Enum()}, DefaultChunkBytes)
	require.Error(t, err)
	_, err = SplitSnapshot(snapMessage(1, 1, 10), 100)
	require.Error(t, err)
}

func TestAssemblerNewSnapshotDiscardsThePartialOne(t *testing.T) {
	a := NewAssembler(0)
	old, err := SplitSnapshot(snapMessage(3, 100, 1000), 200)
	require.NoError(t, err)
	newer, err := SplitSnapshot(snapMessage(3, 150, 1000), 200)
	require.NoError(t, err)
	for _, c := range old[:3] {
		got, err := a.Add(c)
		require.NoError(t, err)
		require.Nil(t, got)
	}
	held := a.Bytes()
	require.Positive(t, held)
	var got *raftpb.Message
	for i, c := range newer {
		got, err = a.Add(c)
		require.NoError(t, err)
		if i == 0 {
			require.Equal(t, int64(len(c.GetData())), a.Bytes(), "the old chunks are gone")
		}
	}
	require.Equal(t, uint64(150), got.GetSnapshot().GetMetadata().GetIndex())

	// A late chunk of an older snapshot than the partial one is refused.
	_, err = a.Add(newer[0])
	require.NoError(t, err)
	_, err = a.Add(old[3])
	require.ErrorIs(t, err, ErrBadChunk)
	require.Equal(t, int64(len(newer[0].GetData())), a.Bytes(), "the newer partial one stays")

	// A higher term wins over a higher index.
	higherTerm, err := SplitSnapshot(snapMessage(4, 120, 1000), 200)
	require.NoError(t, err)
	_, err = a.Add(higherTerm[0])
	require.NoError(t, err)
	require.Equal(t, int64(len(higherTerm[0].GetData())), a.Bytes())
}

func TestAssemblerKeepsSendersApart(t *testing.T) {
	a := NewAssembler(0)
	m1 := snapMessage(3, 100, 1000)
	m2 := snapMessage(3, 100, 500)
	m2.From = new(uint64(5))
	c1, err := SplitSnapshot(m1, 200)
	require.NoError(t, err)
	c2, err := SplitSnapshot(m2, 200)
	require.NoError(t, err)
	var got []*raftpb.Message
	for i := 0; i < max(len(c1), len(c2)); i++ {
		for _, cs := range [][]*messages.RaftChunk{c1, c2} {
			if i < len(cs) {
				m, err := a.Add(cs[i])
				require.NoError(t, err)
				if m != nil {
					got = append(got, m)
				}
			}
		}
	}
	require.Len(t, got, 2)
	require.True(t, proto.Equal(m2, got[0]))
	require.True(t, proto.Equal(m1, got[1]))
}

func TestAssemblerRefusesBadChunks(t *testing.T) {
	chunks, err := SplitSnapshot(snapMessage(3, 100, 1000), 200)
	require.NoError(t, err)
	clone := func(c *messages.RaftChunk, edit func(*messages.RaftChunk)) *messages.RaftChunk {
		out := proto.Clone(c).(*messages.RaftChunk)
		edit(out)
		return out
	}
	for _, tc := range []struct {
		name  string
		first *messages.RaftChunk
		bad   *messages.RaftChunk
	}{
		{"seq past total", nil, clone(chunks[0], func(c *messages.RaftChunk) { c.Seq = c.Total })},
		{"negative seq", nil, clone(chunks[0], func(c *messages.RaftChunk) { c.Seq = -1 })},
		{"no total", nil, clone(chunks[0], func(c *messages.RaftChunk) { c.Total = 0 })},
		{"total changes", chunks[0], clone(chunks[1], func(c *messages.RaftChunk) { c.Total++ })},
		{"recipient changes", chunks[0], clone(chunks[1], func(c *messages.RaftChunk) { c.To = 9 })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAssembler(0)
			if tc.first != nil {
				_, err := a.Add(tc.first)
				require.NoError(t, err)
			}
			_, err := a.Add(tc.bad)
			require.ErrorIs(t, err, ErrBadChunk)
			require.Zero(t, a.Bytes())
		})
	}

	t.Run("garbled data", func(t *testing.T) {
		a := NewAssembler(0)
		for i, c := range chunks {
			if i == 0 { // the message's header, before the snapshot's data
				c = clone(c, func(c *messages.RaftChunk) { c.Data = bytes.Repeat([]byte{0xff}, len(c.Data)) })
			}
			got, err := a.Add(c)
			if i < len(chunks)-1 {
				require.NoError(t, err)
				continue
			}
			require.ErrorIs(t, err, ErrBadChunk)
			require.Nil(t, got)
		}
		require.Zero(t, a.Bytes())
	})

	t.Run("a message other than the one named", func(t *testing.T) {
		a := NewAssembler(0)
		other, err := SplitSnapshot(snapMessage(3, 101, 10), 200)
		require.NoError(t, err)
		c := clone(other[0], func(c *messages.RaftChunk) { c.Index = 100 })
		_, err = a.Add(c)
		require.ErrorIs(t, err, ErrBadChunk)
	})

	t.Run("repeated chunk", func(t *testing.T) {
		a := NewAssembler(0)
		_, err := a.Add(chunks[0])
		require.NoError(t, err)
		held := a.Bytes()
		got, err := a.Add(chunks[0])
		require.NoError(t, err)
		require.Nil(t, got)
		require.Equal(t, held, a.Bytes())
	})
}

func TestAssemblerBoundsItsMemory(t *testing.T) {
	a := NewAssembler(1500)
	big, err := SplitSnapshot(snapMessage(3, 100, 2000), 300)
	require.NoError(t, err)
	var last error
	for _, c := range big {
		if _, last = a.Add(c); last != nil {
			break
		}
		require.LessOrEqual(t, a.Bytes(), int64(1500))
	}
	require.ErrorIs(t, last, ErrTooLarge)
	require.Zero(t, a.Bytes())

	// Another sender's partial snapshot makes room for a new one.
	other := snapMessage(3, 100, 1000)
	other.From = new(uint64(7))
	small, err := SplitSnapshot(other, 300)
	require.NoError(t, err)
	_, err = a.Add(small[0])
	require.NoError(t, err)
	fits, err := SplitSnapshot(snapMessage(3, 100, 1200), 300)
	require.NoError(t, err)
	var got *raftpb.Message
	for _, c := range fits {
		got, err = a.Add(c)
		require.NoError(t, err)
	}
	require.NotNil(t, got)
}

func FuzzAssembler(f *testing.F) {
	chunks, err := SplitSnapshot(snapMessage(3, 100, 300), 200)
	require.NoError(f, err)
	for _, c := range chunks {
		f.Add(c.GetData(), c.GetSeq(), c.GetTotal())
	}
	f.Fuzz(func(t *testing.T, data []byte, seq, total int32) {
		a := NewAssembler(1 << 20)
		m, err := a.Add(&messages.RaftChunk{From: 1, To: 2, Term: 3, Index: 100, Seq: seq, Total: total, Data: data})
		if err != nil {
			require.Nil(t, m)
			return
		}
		if m != nil {
			require.Equal(t, raftpb.MsgSnap, m.GetType())
			require.Zero(t, a.Bytes())
		}
	})
}
