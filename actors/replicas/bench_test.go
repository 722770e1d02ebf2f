package replicas

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchNodes is n nodes over racks racks (none for 0) with random loads.
func benchNodes(n, racks int) []Node {
	rng := rand.New(rand.NewPCG(3, 5))
	nodes := make([]Node, n)
	for i := range nodes {
		nodes[i] = Node{ID: int32(i), Bytes: rng.Int64N(4 << 40), GrowthBytesPerSec: rng.Float64() * (50 << 20), Leaders: rng.IntN(2000)}
		if racks > 0 {
			nodes[i].Rack = fmt.Sprintf("rack-%d", i%racks)
		}
	}
	return nodes
}

// BenchmarkAssign times one topic of 10,000 partitions with replication
// factor 3 on 100 nodes, without racks and over 5 racks.
func BenchmarkAssign(b *testing.B) {
	const partitions, rf = 10_000, 3
	for _, racks := range []int{0, 5} {
		nodes := benchNodes(100, racks)
		b.Run(fmt.Sprintf("load-aware/racks=%d", racks), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := LoadAware(nodes, partitions, rf); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("kafka/racks=%d", racks), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := RackAware(nodes, partitions, rf, 17, 42); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
