package placement

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

const (
	mib int64 = 1 << 20
	gib int64 = 1 << 30
)

// counts tallies a placement by directory path.
func counts(paths []string) map[string]int {
	c := map[string]int{}
	for _, p := range paths {
		c[p]++
	}
	return c
}

func TestByLoad(t *testing.T) {
	// dir is an online directory of 100 GiB holding projected GiB.
	dir := func(path string, projected int64) Dir {
		return Dir{Path: path, Online: true, Capacity: 100 * gib, Projected: projected * gib}
	}
	with := func(d Dir, change func(*Dir)) Dir { change(&d); return d }
	tests := []struct {
		name       string
		load       Load
		dirs       []Dir
		n          int
		want       []string       // exact choices, when given
		wantCounts map[string]int // per directory, when given
		wantErr    error
	}{
		{name: "equal empty dirs spread evenly", dirs: []Dir{dir("a", 0), dir("b", 0), dir("c", 0)}, n: 12,
			want: []string{"a", "b", "c", "a", "b", "c", "a", "b", "c", "a", "b", "c"}},
		{name: "one dir", dirs: []Dir{dir("a", 10)}, n: 3, want: []string{"a", "a", "a"}},
		// headroom 20 : 80 : 80 (high water 80 GiB)
		{name: "full-ish dir gets fewer", dirs: []Dir{dir("a", 60), dir("b", 0), dir("c", 0)}, n: 12,
			wantCounts: map[string]int{"a": 1, "b": 6, "c": 5}},
		{name: "empty new dir gets more but not all", dirs: []Dir{dir("a", 30), dir("b", 30), dir("c", 0)}, n: 12,
			wantCounts: map[string]int{"a": 3, "b": 3, "c": 6}},
		{name: "capacities 2:1 get partitions 2:1", n: 9, dirs: []Dir{
			with(dir("a", 0), func(d *Dir) { d.Capacity = 200 * gib }), dir("b", 0)},
			wantCounts: map[string]int{"a": 6, "b": 3}},
		{name: "offline and draining skipped", n: 4, dirs: []Dir{
			with(dir("a", 0), func(d *Dir) { d.Online = false }),
			dir("b", 50),
			with(dir("c", 0), func(d *Dir) { d.Draining = true })},
			want: []string{"b", "b", "b", "b"}},
		{name: "offline dir needs no capacity", n: 1, dirs: []Dir{{Path: "a"}, dir("b", 0)}, want: []string{"b"}},
		{name: "above high water only when all are", n: 5, dirs: []Dir{dir("a", 85), dir("b", 79)},
			want: []string{"b", "b", "b", "b", "b"}},
		// free 10 : 5, shared by the same quotient
		{name: "all above high water by free bytes", n: 3, dirs: []Dir{dir("a", 90), dir("b", 95)},
			want: []string{"a", "b", "a"}},
		{name: "bytes count when above projection", n: 1, dirs: []Dir{
			{Path: "a", Online: true, Capacity: 100 * gib, Bytes: 70 * gib},
			dir("b", 70), dir("c", 1)}, want: []string{"c"}},
		// headroom 80 : 30 (b holds 50 GiB)
		{name: "no expected size", n: 2, dirs: []Dir{dir("a", 0), dir("b", 50)}, want: []string{"a", "a"}},
		{name: "expected size counts toward the next choice", load: Load{Expected: 30 * gib}, n: 2,
			dirs: []Dir{dir("a", 0), dir("b", 50)}, want: []string{"a", "b"}},
		{name: "negative expected size is zero", load: Load{Expected: -30 * gib}, n: 2,
			dirs: []Dir{dir("a", 0), dir("b", 50)}, want: []string{"a", "a"}},
		{name: "topic partitions already placed", n: 3, dirs: []Dir{
			with(dir("a", 0), func(d *Dir) { d.TopicPartitions, d.Partitions = 2, 2 }), dir("b", 0)},
			want: []string{"b", "b", "a"}},
		{name: "ties go to fewer partitions", n: 1, dirs: []Dir{
			with(dir("a", 0), func(d *Dir) { d.Partitions = 3 }), with(dir("b", 0), func(d *Dir) { d.Partitions = 1 })},
			want: []string{"b"}},
		{name: "ties then in directory order", n: 1, dirs: []Dir{dir("b", 5), dir("a", 5)}, want: []string{"b"}},
		{name: "high water setting", load: Load{HighWater: 0.5}, n: 3, dirs: []Dir{dir("a", 45), dir("b", 55)},
			want: []string{"a", "a", "a"}},
		{name: "invalid high water is the default", load: Load{HighWater: 7}, n: 1, dirs: []Dir{dir("a", 81), dir("b", 79)},
			want: []string{"b"}},
		// a's high water is 100 - 2*15 = 70 GiB, so it has no headroom
		// left at 75, and b, below 99, does
		{name: "high water below twice the reserve", load: Load{HighWater: 0.99}, n: 2, dirs: []Dir{
			with(dir("a", 75), func(d *Dir) { d.Reserve = 15 * gib }), dir("b", 90)},
			want: []string{"b", "b"}},
		{name: "no reserve, the high water asked for", load: Load{HighWater: 0.99}, n: 1, dirs: []Dir{dir("a", 75), dir("b", 90)},
			want: []string{"a"}},
		{name: "zero partitions", dirs: []Dir{dir("a", 0)}, n: 0, want: []string{}},
		{name: "zero partitions no dirs", n: 0, want: []string{}},
		{name: "negative count", dirs: []Dir{dir("a", 0)}, n: -1, wantErr: ErrInvalidCount},
		{name: "no dirs", n: 1, wantErr: ErrNoOnlineDirs},
		{name: "all offline", n: 1, dirs: []Dir{{Path: "a", Capacity: gib}}, wantErr: ErrNoOnlineDirs},
		{name: "all draining", n: 1, dirs: []Dir{with(dir("a", 0), func(d *Dir) { d.Draining = true })}, wantErr: ErrNoOnlineDirs},
		{name: "capacity unknown", n: 1, dirs: []Dir{dir("a", 0), {Path: "b", Online: true}}, wantErr: ErrNoCapacity},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := append([]Dir(nil), tt.dirs...)
			got, err := tt.load.Place(tt.dirs, tt.n)
			require.Equal(t, before, tt.dirs, "input modified")
			if tt.wantErr != nil {
				require.Error(t, err)
				require.True(t, errors.Is(err, tt.wantErr), err.Error())
				require.Nil(t, got)
				return
			}
			require.NoError(t, err)
			require.Len(t, got, tt.n)
			if tt.want != nil {
				require.Equal(t, tt.want, got)
			}
			if tt.wantCounts != nil {
				require.Equal(t, tt.wantCounts, counts(got))
			}
			again, err := tt.load.Place(tt.dirs, tt.n)
			require.NoError(t, err)
			require.Equal(t, got, again, "not deterministic")
		})
	}
}

func TestByLoadIsDefaultLoad(t *testing.T) {
	dirs := []Dir{
		{Path: "a", Online: true, Capacity: 100 * gib, Projected: 79 * gib},
		{Path: "b", Online: true, Capacity: 100 * gib, Projected: 81 * gib},
	}
	got, err := ByLoad(dirs, 2)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "a"}, got)
	want, err := Load{HighWater: DefaultHighWater}.Place(dirs, 2)
	require.NoError(t, err)
	require.Equal(t, want, got)
}

// TestByLoadRandom checks ByLoad's invariants over random directories:
// n choices, each an online non-draining directory, a below-high-water
// directory chosen whenever one is left, and partitions of a topic spread
// over equal directories within one of each other.
func TestByLoadRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range 500 {
		dirs := make([]Dir, 1+rng.IntN(6))
		for j := range dirs {
			dirs[j] = Dir{
				Path:       string(rune('a' + j)),
				Online:     rng.IntN(5) > 0,
				Draining:   rng.IntN(6) == 0,
				Capacity:   (1 + rng.Int64N(500)) * gib,
				Partitions: rng.IntN(60),
			}
			dirs[j].Projected = rng.Int64N(dirs[j].Capacity + dirs[j].Capacity/4)
		}
		n := rng.IntN(40)
		got, err := ByLoad(dirs, n)
		usable := map[string]bool{}
		room := 0
		for _, d := range dirs {
			if d.Online && !d.Draining {
				usable[d.Path] = true
				if d.Projected < highBytes(d.Capacity, DefaultHighWater) {
					room++
				}
			}
		}
		if len(usable) == 0 && n > 0 {
			require.ErrorIs(t, err, ErrNoOnlineDirs, "case %d", i)
			continue
		}
		require.NoError(t, err, "case %d", i)
		require.Len(t, got, n)
		for _, p := range got {
			require.True(t, usable[p], "case %d: chose %q", i, p)
			if room > 0 {
				for _, d := range dirs {
					if d.Path == p {
						require.Less(t, d.Projected, highBytes(d.Capacity, DefaultHighWater), "case %d: chose a full dir", i)
					}
				}
			}
		}
	}
	for n := range 30 {
		dirs := []Dir{{Path: "a", Online: true, Capacity: gib}, {Path: "b", Online: true, Capacity: gib}, {Path: "c", Online: true, Capacity: gib}}
		got, err := ByLoad(dirs, n)
		require.NoError(t, err)
		c := counts(got)
		lo, hi := n, 0
		for _, d := range dirs {
			lo, hi = min(lo, c[d.Path]), max(hi, c[d.Path])
		}
		require.LessOrEqual(t, hi-lo, 1, "n=%d counts=%v", n, c)
	}
}

func TestDirsFor(t *testing.T) {
	loads := []DirLoad{
		{Path: "a", Capacity: 100, Online: true, Partitions: []PartitionLoad{
			{Topic: "orders", Partition: 0, Bytes: 10, Projected: 40},
			{Topic: "events", Partition: 0, Bytes: 30, Projected: 5},
			{Topic: "orders", Partition: 2, Bytes: 1},
		}},
		{Path: "b", Capacity: 50, Draining: true, Reserve: 5},
	}
	require.Equal(t, []Dir{
		{Path: "a", Partitions: 3, Bytes: 41, Online: true, Capacity: 100, Projected: 71, TopicPartitions: 2},
		{Path: "b", Capacity: 50, Draining: true, Reserve: 5},
	}, DirsFor(loads, "orders"))
}
