package placement

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkPlanBalance plans for four 1 TiB directories, one of them new
// and empty, holding 4000 partitions of 1 MiB to 2 GiB between them.
func BenchmarkPlanBalance(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	dirs := make([]DirLoad, 4)
	for i := range dirs {
		dirs[i] = DirLoad{Path: fmt.Sprintf("d%d", i), Capacity: 1 << 40, Online: true}
	}
	for k := range 4000 {
		i := rng.IntN(3)
		size := mib + rng.Int64N(2*gib)
		dirs[i].Partitions = append(dirs[i].Partitions, PartitionLoad{Topic: "t", Partition: int32(k), Bytes: size})
	}
	b.ReportAllocs()
	var moves []Move
	for b.Loop() {
		moves = PlanBalance(dirs, BalanceConfig{})
	}
	b.ReportMetric(float64(len(moves)), "moves")
}

// BenchmarkByLoad places 100 partitions over eight directories.
func BenchmarkByLoad(b *testing.B) {
	dirs := make([]Dir, 8)
	for i := range dirs {
		dirs[i] = Dir{Path: fmt.Sprintf("d%d", i), Online: true, Capacity: 1 << 40, Projected: int64(i) << 36}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ByLoad(dirs, 100); err != nil {
			b.Fatal(err)
		}
	}
}
