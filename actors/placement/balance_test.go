package placement

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// partitions makes partitions 0, 1, ... of topic with the given sizes.
func partitions(topic string, sizes ...int64) []PartitionLoad {
	out := make([]PartitionLoad, len(sizes))
	for i, s := range sizes {
		out[i] = PartitionLoad{Topic: topic, Partition: int32(i), Bytes: s, Projected: s}
	}
	return out
}

// repeat is n copies of size.
func repeat(n int, size int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = size
	}
	return out
}

func dirBytes(d DirLoad) int64 {
	var total int64
	for _, p := range d.Partitions {
		total += p.Bytes
	}
	return total
}

// takesPart reports whether a directory takes part in balancing.
func takesPart(d DirLoad) bool { return d.Online && !d.Draining && d.Capacity > 0 }

// maxDeviation is the largest |fraction - mean| / mean over the directories
// that take part in balancing (0 when the mean is 0).
func maxDeviation(dirs []DirLoad) float64 {
	var total, capacity float64
	for _, d := range dirs {
		if takesPart(d) {
			total += float64(dirBytes(d))
			capacity += float64(d.Capacity)
		}
	}
	if total == 0 {
		return 0
	}
	mean := total / capacity
	worst := 0.0
	for _, d := range dirs {
		if takesPart(d) {
			worst = max(worst, math.Abs(float64(dirBytes(d))/float64(d.Capacity)-mean)/mean)
		}
	}
	return worst
}

// plan runs PlanBalance, checks the invariants every plan keeps, and
// returns the moves and the directories after them.
func plan(t *testing.T, dirs []DirLoad, cfg BalanceConfig) ([]Move, []DirLoad) {
	t.Helper()
	before := cloneDirs(dirs)
	moves := PlanBalance(dirs, cfg)
	require.Equal(t, before, dirs, "input modified")
	require.Equal(t, moves, PlanBalance(dirs, cfg), "not deterministic")
	byPath := map[string]DirLoad{}
	for _, d := range dirs {
		byPath[d.Path] = d
	}
	moved := map[string]bool{}
	for _, m := range moves {
		key := fmt.Sprintf("%s/%s-%d", m.From, m.Topic, m.Partition)
		require.False(t, moved[key], "%s moved twice", key)
		moved[key] = true
		require.True(t, byPath[m.From].Online, "move from offline %q", m.From)
		require.True(t, takesPart(byPath[m.To]), "move to %q, which cannot take it", m.To)
	}
	after, err := Simulate(dirs, moves)
	require.NoError(t, err)
	var sumBefore, sumAfter int64
	for i := range dirs {
		sumBefore += dirBytes(dirs[i])
		sumAfter += dirBytes(after[i])
	}
	require.Equal(t, sumBefore, sumAfter)
	return moves, after
}

func cloneDirs(dirs []DirLoad) []DirLoad {
	out := append([]DirLoad(nil), dirs...)
	for i := range out {
		out[i].Partitions = append([]PartitionLoad(nil), out[i].Partitions...)
	}
	return out
}

func movedBytes(moves []Move) int64 {
	var total int64
	for _, m := range moves {
		total += m.Bytes
	}
	return total
}

func TestPlanBalance(t *testing.T) {
	online := func(path string, capacity int64, parts ...PartitionLoad) DirLoad {
		return DirLoad{Path: path, Capacity: capacity, Online: true, Partitions: parts}
	}
	tests := []struct {
		name  string
		dirs  []DirLoad
		cfg   BalanceConfig
		moves []Move // exact plan, when given
		// check, when given, looks at the plan and the directories after it.
		check func(t *testing.T, moves []Move, after []DirLoad)
	}{
		{name: "already balanced", dirs: []DirLoad{
			online("a", 100*gib, partitions("t", repeat(10, gib)...)...),
			online("b", 100*gib, partitions("u", 10*gib, gib/2)...),
			online("c", 100*gib, partitions("v", 9*gib, gib)...)},
			moves: []Move{}},
		{name: "empty", moves: []Move{}},
		{name: "one dir", dirs: []DirLoad{online("a", gib, partitions("t", gib)...)}, moves: []Move{}},
		{name: "no data", dirs: []DirLoad{online("a", gib, partitions("t", 0, 0)...), online("b", gib)}, moves: []Move{}},
		{name: "one big partition stays", dirs: []DirLoad{
			online("a", 100*gib, partitions("big", 50*gib)...), online("b", 100*gib)},
			moves: []Move{}},
		{name: "one big partition among three stays", dirs: []DirLoad{
			online("a", 100*gib, partitions("big", 60*gib)...), online("b", 100*gib), online("c", 100*gib)},
			moves: []Move{}},
		// mean 22 GiB: moving the 40 GiB partition would put b as far out
		// as a is, so the small ones move and the plan ends
		{name: "big partition left, small ones move, the plan ends", dirs: []DirLoad{
			online("a", 100*gib, partitions("t", 40*gib, gib, gib, gib, gib)...), online("b", 100*gib)},
			moves: []Move{
				{Topic: "t", Partition: 1, From: "a", To: "b", Bytes: gib}, {Topic: "t", Partition: 2, From: "a", To: "b", Bytes: gib},
				{Topic: "t", Partition: 3, From: "a", To: "b", Bytes: gib}, {Topic: "t", Partition: 4, From: "a", To: "b", Bytes: gib}}},
		// mean 36.3 GiB, band 32.6..39.9: the 8 GiB partition is closest to
		// the 6.4 GiB that would equalise a and b, but would put b above its
		// band with nothing small to give back; 2 GiB moves keep both in it
		{name: "moves that keep both dirs in their band first", dirs: []DirLoad{
			online("a", 100*gib, partitions("t", append(repeat(4, 8*gib), append(repeat(6, 2*gib), 800*mib)...)...)...),
			online("b", 100*gib, partitions("u", repeat(4, 8*gib)...)...),
			online("c", 100*gib, partitions("v", repeat(4, 8*gib)...)...)},
			check: func(t *testing.T, moves []Move, after []DirLoad) {
				for _, m := range moves {
					require.Equal(t, 2*gib, m.Bytes, "%+v", m)
				}
				require.LessOrEqual(t, maxDeviation(after), 0.10)
			}},
		{name: "equal sizes move in directory order", dirs: []DirLoad{
			online("a", 100*gib, partitions("t", 3*gib, 4*gib, 4*gib, 3*gib)...), online("b", 100*gib)},
			moves: []Move{{Topic: "t", Partition: 1, From: "a", To: "b", Bytes: 4 * gib}, {Topic: "t", Partition: 0, From: "a", To: "b", Bytes: 3 * gib}}},
		{name: "draining dir emptied", dirs: []DirLoad{
			{Path: "a", Capacity: 100 * gib, Online: true, Draining: true, Partitions: partitions("t", 5*gib, 0, 20*gib, gib)},
			online("b", 100*gib, partitions("u", 10*gib)...),
			{Path: "c", Capacity: 100 * gib, Partitions: partitions("v", gib)},
			online("d", 100*gib)},
			check: func(t *testing.T, moves []Move, after []DirLoad) {
				require.Empty(t, after[0].Partitions)
				require.Len(t, moves, 4)
				// largest first, to the emptiest after taking it
				require.Equal(t, Move{Topic: "t", Partition: 2, From: "a", To: "d", Bytes: 20 * gib}, moves[0])
				require.Equal(t, Move{Topic: "t", Partition: 0, From: "a", To: "b", Bytes: 5 * gib}, moves[1])
				require.Equal(t, "b", moves[2].To)
				require.Equal(t, partitions("v", gib), after[2].Partitions, "offline dir touched")
			}},
		{name: "draining dir with nowhere to go", dirs: []DirLoad{
			{Path: "a", Capacity: 100 * gib, Online: true, Draining: true, Partitions: partitions("t", 5*gib)},
			{Path: "b", Capacity: 100 * gib},
			{Path: "c", Capacity: 100 * gib, Online: true, Draining: true}},
			moves: []Move{}},
		{name: "offline draining dir ignored", dirs: []DirLoad{
			{Path: "a", Capacity: 100 * gib, Draining: true, Partitions: partitions("t", 5*gib)},
			online("b", 100*gib)},
			moves: []Move{}},
		{name: "drained partitions avoid the high-water mark", dirs: []DirLoad{
			{Path: "a", Capacity: 100 * gib, Online: true, Draining: true, Partitions: partitions("t", 10*gib)},
			online("b", 10*gib), online("c", 100*gib, partitions("u", 50*gib)...)},
			moves: []Move{{Topic: "t", Partition: 0, From: "a", To: "c", Bytes: 10 * gib}}},
		{name: "offline dir ignored", dirs: []DirLoad{
			{Path: "a", Capacity: 100 * gib, Partitions: partitions("t", 90*gib)},
			online("b", 100*gib, partitions("u", 10*gib)...), online("c", 100*gib, partitions("v", 10*gib)...)},
			moves: []Move{}},
		{name: "dir of unknown capacity keeps its partitions and takes none", dirs: []DirLoad{
			{Path: "a", Online: true, Partitions: partitions("t", 90*gib)},
			online("b", 100*gib, partitions("u", 10*gib, 10*gib)...), online("c", 100*gib)},
			moves: []Move{{Topic: "u", Partition: 0, From: "b", To: "c", Bytes: 10 * gib}}},
		// mean 67.5%, every dir inside its band and below 99%; but a,
		// with a reserve of 10, must stay below 100 - 2*10 = 80
		{name: "high water clamped below twice the reserve", cfg: BalanceConfig{HighWater: 0.99, MaxDeviation: 0.5, MinMoveBytes: -1},
			dirs: []DirLoad{
				{Path: "a", Capacity: 100, Reserve: 10, Online: true, Partitions: partitions("t", repeat(17, 5)...)},
				online("b", 100, partitions("u", repeat(10, 5)...)...)},
			moves: []Move{
				{Topic: "t", Partition: 0, From: "a", To: "b", Bytes: 5}}},
		{name: "no reserve, the high water asked for", cfg: BalanceConfig{HighWater: 0.99, MaxDeviation: 0.5, MinMoveBytes: -1},
			dirs: []DirLoad{
				online("a", 100, partitions("t", repeat(17, 5)...)...),
				online("b", 100, partitions("u", repeat(10, 5)...)...)},
			moves: []Move{}},
		{name: "a reserve larger than the capacity leaves no room", cfg: BalanceConfig{HighWater: 0.99, MaxDeviation: 0.5, MinMoveBytes: -1},
			dirs: []DirLoad{
				online("a", 100, partitions("t", repeat(8, 5)...)...),
				{Path: "b", Capacity: 100, Reserve: 1 << 62, Online: true, Partitions: partitions("u", repeat(10, 5)...)}},
			moves: []Move{{Topic: "u", Partition: 0, From: "b", To: "a", Bytes: 5}}},
		// mean 78.3%: a is within 10% of it but above 80%
		{name: "high-water violation fixed within deviation", dirs: []DirLoad{
			online("a", 100*gib, partitions("t", repeat(17, 5*gib)...)...),
			online("b", 100*gib, partitions("u", repeat(15, 5*gib)...)...),
			online("c", 100*gib, partitions("v", repeat(15, 5*gib)...)...)},
			moves: []Move{{Topic: "t", Partition: 0, From: "a", To: "b", Bytes: 5 * gib}}},
		{name: "same dirs under a higher mark", cfg: BalanceConfig{HighWater: 0.9}, dirs: []DirLoad{
			online("a", 100*gib, partitions("t", repeat(17, 5*gib)...)...),
			online("b", 100*gib, partitions("u", repeat(15, 5*gib)...)...),
			online("c", 100*gib, partitions("v", repeat(15, 5*gib)...)...)},
			moves: []Move{}},
		{name: "high-water mark not pushed onto the destination", dirs: []DirLoad{
			online("a", 100*gib, partitions("t", 60*gib, 30*gib)...), online("b", 100*gib, partitions("u", 60*gib)...)},
			// mean 75%; the 30 GiB partition would take b to 90%
			moves: []Move{}},
		{name: "mean above high water balances anyway", dirs: []DirLoad{
			online("a", 100*gib, partitions("t", repeat(19, 5*gib)...)...), online("b", 100*gib, partitions("u", repeat(15, 5*gib)...)...)},
			// mean 85%: 90% and 80% are within 10% of it
			moves: []Move{{Topic: "t", Partition: 0, From: "a", To: "b", Bytes: 5 * gib}}},
		{name: "imbalance below MinMoveBytes ignored", dirs: []DirLoad{
			online("a", gib, partitions("t", 20*mib, 20*mib)...), online("b", gib)},
			moves: []Move{}},
		{name: "no minimum", cfg: BalanceConfig{MinMoveBytes: -1}, dirs: []DirLoad{
			online("a", gib, partitions("t", 20*mib, 20*mib)...), online("b", gib)},
			moves: []Move{{Topic: "t", Partition: 0, From: "a", To: "b", Bytes: 20 * mib}}},
		{name: "MaxDeviation setting", cfg: BalanceConfig{MaxDeviation: 0.5}, dirs: []DirLoad{
			online("a", 100*gib, partitions("t", repeat(13, gib)...)...), online("b", 100*gib, partitions("u", repeat(7, gib)...)...)},
			moves: []Move{}},
		{name: "projected sizes ignored by default", dirs: []DirLoad{
			online("a", 100*gib, PartitionLoad{Topic: "t", Bytes: gib, Projected: 40 * gib}, PartitionLoad{Topic: "t", Partition: 1, Bytes: gib, Projected: 40 * gib}),
			online("b", 100*gib, PartitionLoad{Topic: "u", Bytes: 2 * gib})},
			moves: []Move{}},
		{name: "projected sizes when asked", cfg: BalanceConfig{UseProjected: true}, dirs: []DirLoad{
			online("a", 100*gib, PartitionLoad{Topic: "t", Bytes: gib, Projected: 40 * gib}, PartitionLoad{Topic: "t", Partition: 1, Bytes: gib, Projected: 40 * gib}),
			online("b", 100*gib, PartitionLoad{Topic: "u", Bytes: 2 * gib})},
			moves: []Move{{Topic: "t", Partition: 0, From: "a", To: "b", Bytes: gib}}},
		{name: "unequal capacities fill to equal fractions", dirs: []DirLoad{
			online("a", 50*gib), online("b", 100*gib),
			online("c", 200*gib, partitions("t", append(repeat(120, gib), repeat(10, 2*gib)...)...)...)},
			check: func(t *testing.T, moves []Move, after []DirLoad) {
				require.LessOrEqual(t, maxDeviation(after), 0.10+1e-9)
				a, b, c := dirBytes(after[0]), dirBytes(after[1]), dirBytes(after[2])
				t.Logf("after: a %d GiB of 50, b %d GiB of 100, c %d GiB of 200; %d moves, %d GiB", a/gib, b/gib, c/gib, len(moves), movedBytes(moves)/gib)
				// mean 40%: 20, 40 and 80 GiB
				require.InDelta(t, 20*gib, a, float64(2*gib))
				require.InDelta(t, 40*gib, b, float64(4*gib))
				require.InDelta(t, 80*gib, c, float64(8*gib))
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			moves, after := plan(t, tt.dirs, tt.cfg)
			if tt.moves != nil {
				require.Equal(t, len(tt.moves), len(moves), "%+v", moves)
				if len(tt.moves) > 0 {
					require.Equal(t, tt.moves, moves)
				}
			}
			if tt.check != nil {
				tt.check(t, moves, after)
			}
		})
	}
}

// TestPlanBalanceRandom runs plans over random directories: every plan
// ends, moves each partition at most once, only to directories that take
// part, empties every online draining directory when some directory can
// take its partitions, and never makes the largest deviation from the mean
// worse.
func TestPlanBalanceRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := []int64{0, mib, 100 * mib, gib, 3 * gib, 10 * gib, 50 * gib}
	improved := 0
	for i := range 400 {
		dirs := make([]DirLoad, 1+rng.IntN(6))
		for j := range dirs {
			d := DirLoad{
				Path:     fmt.Sprintf("d%d", j),
				Capacity: (1 + rng.Int64N(8)) * 50 * gib,
				Online:   rng.IntN(8) > 0,
				Draining: rng.IntN(8) == 0,
			}
			if rng.IntN(20) == 0 {
				d.Capacity = 0
			}
			for k := range rng.IntN(40) {
				size := sizes[rng.IntN(len(sizes))]
				size += rng.Int64N(size/2 + 1)
				d.Partitions = append(d.Partitions, PartitionLoad{Topic: fmt.Sprintf("t%d", j), Partition: int32(k), Bytes: size, Projected: size + rng.Int64N(gib)})
			}
			dirs[j] = d
		}
		cfg := BalanceConfig{MinMoveBytes: []int64{0, -1, gib}[rng.IntN(3)], UseProjected: rng.IntN(4) == 0}
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			moves, after := plan(t, dirs, cfg)
			destinations, draining := 0, false
			for _, d := range dirs {
				if takesPart(d) {
					destinations++
				}
				draining = draining || (d.Online && d.Draining && len(d.Partitions) > 0)
			}
			for j, d := range after {
				if d.Online && d.Draining && destinations > 0 {
					require.Empty(t, d.Partitions, "draining %s not emptied", d.Path)
				}
				if !d.Online {
					require.Equal(t, dirs[j], d, "offline %s touched", d.Path)
				}
			}
			if !draining && !cfg.UseProjected {
				require.LessOrEqual(t, maxDeviation(after), maxDeviation(dirs)+1e-12)
				if len(moves) > 0 && maxDeviation(after) < maxDeviation(dirs) {
					improved++
				}
			}
		})
	}
	require.Greater(t, improved, 50, "too few random cases exercised balancing")
}

func TestSimulate(t *testing.T) {
	dirs := []DirLoad{
		{Path: "a", Capacity: 10, Online: true, Partitions: partitions("t", 1, 2, 3)},
		{Path: "b", Capacity: 10, Online: true},
	}
	before := cloneDirs(dirs)
	after, err := Simulate(dirs, []Move{{Topic: "t", Partition: 1, From: "a", To: "b", Bytes: 2}, {Topic: "t", Partition: 1, From: "b", To: "a", Bytes: 2}, {Topic: "t", Partition: 0, From: "a", To: "b"}})
	require.NoError(t, err)
	require.Equal(t, before, dirs, "input modified")
	require.Equal(t, []DirLoad{
		{Path: "a", Capacity: 10, Online: true, Partitions: []PartitionLoad{partitions("t", 1, 2, 3)[2], partitions("t", 1, 2, 3)[1]}},
		{Path: "b", Capacity: 10, Online: true, Partitions: partitions("t", 1)},
	}, after)

	for _, bad := range []Move{
		{Topic: "t", Partition: 0, From: "x", To: "b"},
		{Topic: "t", Partition: 0, From: "a", To: "x"},
		{Topic: "t", Partition: 0, From: "a", To: "a"},
		{Topic: "t", Partition: 0, From: "b", To: "a"},
		{Topic: "u", Partition: 0, From: "a", To: "b"},
		{Topic: "t", Partition: 9, From: "a", To: "b"},
	} {
		t.Run(fmt.Sprintf("%+v", bad), func(t *testing.T) {
			got, err := Simulate(dirs, []Move{bad})
			require.Error(t, err)
			require.True(t, errors.Is(err, ErrInvalidMove), err.Error())
			require.Nil(t, got)
			require.Equal(t, before, dirs)
		})
	}
}
