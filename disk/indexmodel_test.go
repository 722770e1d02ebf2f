package disk_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/disk"
)

// Both indexes answer every lookup as a linear scan of their entries does,
// through appends past several flushes and sparse blocks, truncations into
// the file and into what is still in memory, seals and reopens.
func TestIndexesMatchModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	fsys := newMemWithDir(t)
	ix, err := disk.CreateOffsetIndex(fsys, "/d/i.index", testBase)
	require.NoError(t, err)
	ti, err := disk.CreateTimeIndex(fsys, "/d/i.timeindex", testBase)
	require.NoError(t, err)
	var offsets []disk.OffsetEntry
	var times []disk.TimeEntry
	off, pos, ts := testBase, int64(0), int64(0)

	check := func() {
		t.Helper()
		checkEntries(t, rng, ix, offsets)
		checkEntries(t, rng, ti, times)
		for range 50 {
			q := testBase - 5 + rng.Int64N(off-testBase+10)
			want := disk.OffsetEntry{Offset: testBase}
			for _, e := range offsets {
				if e.Offset <= q {
					want = e
				}
			}
			require.Equal(t, want, ix.Lookup(q), "lookup %d", q)
			p := rng.Int64N(pos + 10)
			want = disk.OffsetEntry{Offset: testBase}
			for _, e := range offsets {
				if e.Position <= p {
					want = e
				}
			}
			require.Equal(t, want, ix.LookupPosition(p), "lookup position %d", p)
			tq := rng.Int64N(ts + 10)
			wantTime := disk.TimeEntry{Timestamp: -1, Offset: testBase}
			for _, e := range times {
				if e.Timestamp <= tq {
					wantTime = e
				}
			}
			require.Equal(t, wantTime, ti.Lookup(tq), "time lookup %d", tq)
		}
	}

	for round := range 60 {
		for range rng.IntN(400) {
			off += 1 + rng.Int64N(20)
			pos += 1 + rng.Int64N(5000)
			ts += 1 + rng.Int64N(3)
			require.NoError(t, ix.Append(off, pos))
			require.NoError(t, ti.Append(ts, off))
			offsets = append(offsets, disk.OffsetEntry{Offset: off, Position: pos})
			times = append(times, disk.TimeEntry{Timestamp: ts, Offset: off})
		}
		check()
		switch rng.IntN(5) {
		case 0, 4: // truncate somewhere, in the file or in memory
			if len(offsets) == 0 {
				continue
			}
			i := rng.IntN(len(offsets))
			if rng.IntN(2) == 0 {
				i -= i % 128 // where a block of the sparse level starts
			}
			cut := offsets[i].Offset
			require.NoError(t, ix.TruncateTo(cut))
			require.NoError(t, ti.TruncateTo(cut))
			for len(offsets) > 0 && offsets[len(offsets)-1].Offset >= cut {
				offsets = offsets[:len(offsets)-1]
			}
			for len(times) > 0 && times[len(times)-1].Offset >= cut {
				times = times[:len(times)-1]
			}
			off = cut - 1
			if len(offsets) > 0 {
				pos = offsets[len(offsets)-1].Position
			} else {
				pos = 0
			}
		case 1:
			require.NoError(t, ix.Seal())
			require.NoError(t, ti.Seal())
		case 2: // reopen
			require.NoError(t, ix.Close())
			require.NoError(t, ti.Close())
			ix, err = disk.OpenOffsetIndex(fsys, "/d/i.index", testBase)
			require.NoError(t, err)
			ti, err = disk.OpenTimeIndex(fsys, "/d/i.timeindex", testBase)
			require.NoError(t, err)
		}
		check()
		if round%10 == 9 && len(offsets) > 3000 {
			require.NoError(t, ix.Reset())
			require.NoError(t, ti.Reset())
			offsets, times = nil, nil
			off, pos = testBase, 0
			check()
		}
	}
}

// checkEntries checks that index holds entries: their count, the last,
// and one at random.
func checkEntries[E any](t *testing.T, rng *rand.Rand, index interface {
	Entries() int
	Last() (E, bool)
	Entry(int) E
}, entries []E) {
	t.Helper()
	require.Equal(t, len(entries), index.Entries())
	n := len(entries)
	if n == 0 {
		return
	}
	last, ok := index.Last()
	require.True(t, ok)
	require.Equal(t, entries[n-1], last)
	i := rng.IntN(n)
	require.Equal(t, entries[i], index.Entry(i), "entry %d", i)
}

// A lookup whose read of the file fails answers an earlier entry, from
// which a reader scans forward (slower, never wrong); a truncation whose
// read fails returns the error and changes nothing.
func TestIndexReadErrors(t *testing.T) {
	efs := disk.NewErrorFS(newMemWithDir(t))
	ix, err := disk.CreateOffsetIndex(efs, "/d/i.index", testBase)
	require.NoError(t, err)
	const n = 2000
	for i := int64(1); i <= n; i++ {
		require.NoError(t, ix.Append(testBase+10*i, 100*i))
	}
	require.NoError(t, ix.Sync())
	want := disk.OffsetEntry{Offset: testBase + 10*1000, Position: 100 * 1000}
	require.Equal(t, want, ix.Lookup(want.Offset+5))

	efs.InjectAt(1)
	got := ix.Lookup(want.Offset + 5)
	require.Equal(t, int64(1), efs.Injected(), "the lookup read the file")
	require.LessOrEqual(t, got.Offset, want.Offset, "an earlier entry")
	require.Less(t, want.Offset-got.Offset, int64(10*200), "one of the same block")

	efs.InjectAt(1)
	require.ErrorIs(t, ix.TruncateTo(want.Offset), disk.ErrInjected)
	require.Equal(t, n, ix.Entries())
	require.Equal(t, want, ix.Lookup(want.Offset+5))
}
