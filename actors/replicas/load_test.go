package replicas

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

const tib = 1 << 40

// checkLoadAware checks LoadAware's promises for one answer: a list of
// replicationFactor distinct nodes for every partition, none fenced or
// unknown, every live node leading partitions/n or one more, the extra
// leaders on the least loaded nodes, and, when every live node has a rack,
// each partition on min(replicationFactor, racks) racks.
func checkLoadAware(t *testing.T, nodes []Node, partitions, rf int, got [][]int32) {
	t.Helper()
	up := map[int32]Node{}
	racks := map[string]struct{}{}
	allRacked := true
	for _, n := range nodes {
		if !n.Fenced {
			up[n.ID] = n
			racks[n.Rack] = struct{}{}
			allRacked = allRacked && n.Rack != ""
		}
	}
	require.Len(t, got, partitions)
	leaders := map[int32]int{}
	for p, replicas := range got {
		require.Len(t, replicas, rf, "partition %d", p)
		require.Equal(t, rf, distinct(replicas), "partition %d has a node twice: %v", p, replicas)
		var partitionRacks []string
		for _, id := range replicas {
			n, ok := up[id]
			require.True(t, ok, "partition %d on %d, fenced or unknown", p, id)
			partitionRacks = append(partitionRacks, n.Rack)
		}
		if allRacked {
			require.Equal(t, min(rf, len(racks)), distinct(partitionRacks), "partition %d racks %v", p, partitionRacks)
		}
		leaders[replicas[0]]++
	}
	floor := partitions / len(up)
	for id := range up {
		require.Contains(t, []int{floor, floor + 1}, leaders[id], "leaders of %d: %v", id, leaders)
	}
	// The nodes leading one more are the least loaded ones: none of them is
	// more loaded than a node leading the floor.
	load := loadsByID(nodes)
	for a := range up {
		for b := range up {
			if leaders[a] > leaders[b] {
				require.LessOrEqual(t, load[a], load[b], "%d leads more than %d but is more loaded", a, b)
			}
		}
	}
}

// loadsByID is loads over the live nodes, by id.
func loadsByID(nodes []Node) map[int32]float64 {
	up := live(nodes)
	out := map[int32]float64{}
	_, load := loads(up)
	for i, l := range load {
		out[up[i].ID] = l
	}
	return out
}

func replicaCounts(assignment [][]int32) map[int32]int {
	out := map[int32]int{}
	for _, replicas := range assignment {
		for _, id := range replicas {
			out[id]++
		}
	}
	return out
}

func leaderCounts(assignment [][]int32) map[int32]int {
	out := map[int32]int{}
	for _, replicas := range assignment {
		out[replicas[0]]++
	}
	return out
}

func loadAware(t *testing.T, nodes []Node, partitions, rf int) [][]int32 {
	t.Helper()
	before := fmt.Sprintf("%#v", nodes) // prints NaN, which == never equals
	got, err := LoadAware(nodes, partitions, rf)
	require.NoError(t, err)
	require.Equal(t, before, fmt.Sprintf("%#v", nodes), "nodes modified")
	checkLoadAware(t, nodes, partitions, rf, got)
	return got
}

func equalNodes(n int) []Node {
	out := make([]Node, n)
	for i := range out {
		out[i] = Node{ID: int32(i), Bytes: tib, GrowthBytesPerSec: 1 << 20, Leaders: 10}
	}
	return out
}

func TestLoadAwareEqualNodes(t *testing.T) {
	for _, rf := range []int{1, 2, 3} {
		got := loadAware(t, equalNodes(3), 12, rf)
		require.Equal(t, map[int32]int{0: 4, 1: 4, 2: 4}, leaderCounts(got), "rf %d", rf)
		require.Equal(t, map[int32]int{0: 4 * rf, 1: 4 * rf, 2: 4 * rf}, replicaCounts(got), "rf %d", rf)
	}
	// Equal nodes stripe their followers: here Kafka's rack-unaware answer
	// for start index 0 and shift 0.
	got := loadAware(t, equalNodes(3), 6, 2)
	want, err := RackUnaware(nodeIDs(3), 6, 2, 0, 0)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Equal(t, [][]int32{{0, 1}, {1, 2}, {2, 0}, {0, 2}, {1, 0}, {2, 1}}, got)
}

func TestLoadAwareUnequalBytes(t *testing.T) {
	// Node 3 is new and empty; the others hold a TiB each.
	nodes := []Node{
		{ID: 0, Bytes: tib, Leaders: 30},
		{ID: 1, Bytes: tib, Leaders: 30},
		{ID: 2, Bytes: tib, Leaders: 30},
		{ID: 3},
	}
	got := loadAware(t, nodes, 12, 2)
	require.Equal(t, map[int32]int{0: 3, 1: 3, 2: 3, 3: 3}, leaderCounts(got), "leaders stay even")
	counts := replicaCounts(got)
	for id := range int32(3) {
		require.Greater(t, counts[3], counts[id], "the empty node takes more replicas: %v", counts)
	}
	require.Less(t, counts[3], 12, "but not one of every partition: %v", counts)

	t.Run("growth counts as load", func(t *testing.T) {
		nodes := equalNodes(4)
		nodes[2].GrowthBytesPerSec = 100 << 20 // 8.4 TiB a day
		got := loadAware(t, nodes, 12, 2)
		counts := replicaCounts(got)
		for _, id := range []int32{0, 1, 3} {
			require.Less(t, counts[2], counts[id], "%v", counts)
		}
		require.Equal(t, 3, leaderCounts(got)[2])
	})
	t.Run("the extra leaders go to the least loaded nodes", func(t *testing.T) {
		nodes := []Node{
			{ID: 0, Bytes: 4 * tib},
			{ID: 1, Bytes: 3 * tib},
			{ID: 2, Bytes: 1 * tib},
			{ID: 3, Bytes: 2 * tib},
		}
		got := loadAware(t, nodes, 6, 3)
		require.Equal(t, map[int32]int{0: 1, 1: 1, 2: 2, 3: 2}, leaderCounts(got))
		require.Equal(t, int32(2), got[0][0], "the least loaded node leads partition 0")
	})
	t.Run("leaders count as load", func(t *testing.T) {
		nodes := equalNodes(3)
		nodes[0].Leaders = 100
		got := loadAware(t, nodes, 4, 1)
		require.Equal(t, map[int32]int{0: 1, 1: 2, 2: 1}, leaderCounts(got))
	})
}

// TestLoadAwareManyTopics creates topic after topic on a cluster, each one
// seeing the leaders and bytes its predecessors left (one GiB a replica):
// leaders and bytes stay even across the nodes, neither drifting at the
// other's expense.
func TestLoadAwareManyTopics(t *testing.T) {
	for _, shape := range []struct{ nodes, partitions, rf int }{
		{3, 4, 2}, {4, 6, 2}, {5, 7, 3}, {6, 1, 3}, {6, 1, 2}, {7, 10, 3}, {5, 2, 1},
	} {
		t.Run(fmt.Sprintf("%d nodes %d partitions rf %d", shape.nodes, shape.partitions, shape.rf), func(t *testing.T) {
			nodes := make([]Node, shape.nodes)
			for i := range nodes {
				nodes[i].ID = int32(i)
			}
			for topic := range 200 {
				got := loadAware(t, nodes, shape.partitions, shape.rf)
				leaders, replicas := leaderCounts(got), replicaCounts(got)
				for i, n := range nodes {
					nodes[i].Leaders += leaders[n.ID]
					nodes[i].Bytes += int64(replicas[n.ID]) << 30
				}
				lo, hi := slices.MinFunc(nodes, byBytes), slices.MaxFunc(nodes, byBytes)
				require.LessOrEqual(t, hi.Bytes-lo.Bytes, int64(2)<<30, "bytes after topic %d: %+v", topic, nodes)
				lo, hi = slices.MinFunc(nodes, byLeaders), slices.MaxFunc(nodes, byLeaders)
				require.LessOrEqual(t, hi.Leaders-lo.Leaders, 2, "leaders after topic %d: %+v", topic, nodes)
			}
		})
	}
}

func byBytes(a, b Node) int   { return cmp.Compare(a.Bytes, b.Bytes) }
func byLeaders(a, b Node) int { return cmp.Compare(a.Leaders, b.Leaders) }

func TestLoadAwareFenced(t *testing.T) {
	nodes := equalNodes(4)
	nodes[1].Fenced = true
	nodes[1].Bytes = 0 // the emptiest, were it not fenced
	got := loadAware(t, nodes, 12, 3)
	require.NotContains(t, replicaCounts(got), int32(1))
	require.Equal(t, map[int32]int{0: 4, 2: 4, 3: 4}, leaderCounts(got))

	_, err := LoadAware(nodes, 12, 4)
	require.ErrorIs(t, err, ErrInvalidReplicationFactor)
	require.EqualError(t, err, "replicas: invalid replication factor: replication factor 4 larger than available brokers 3")
}

func TestLoadAwareRacks(t *testing.T) {
	racked := func(racks ...string) []Node {
		nodes := equalNodes(len(racks))
		for i, r := range racks {
			nodes[i].Rack = r
		}
		return nodes
	}
	tests := []struct {
		name           string
		nodes          []Node
		partitions, rf int
	}{
		{"three racks of two rf 3", racked("a", "a", "b", "b", "c", "c"), 12, 3},
		{"three racks of two rf 2", racked("a", "b", "c", "a", "b", "c"), 12, 2},
		{"uneven racks", racked("a", "a", "a", "a", "b", "c"), 12, 3},
		{"more replicas than racks", racked("a", "b", "b", "c", "c", "b"), 6, 5},
		{"single rack", racked("a", "a", "a", "a"), 8, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loadAware(t, tt.nodes, tt.partitions, tt.rf) // checks the racks
		})
	}

	t.Run("racks come before load", func(t *testing.T) {
		// Racks a and b; the two empty nodes are both in rack a, so each
		// partition takes at most one of them.
		nodes := racked("a", "a", "b", "b")
		nodes[0].Bytes, nodes[1].Bytes = 0, 0
		got := loadAware(t, nodes, 8, 2)
		for p, replicas := range got {
			require.False(t, slices.Contains(replicas, 0) && slices.Contains(replicas, 1), "partition %d: %v", p, replicas)
		}
	})
	t.Run("more replicas than racks spread over the racks", func(t *testing.T) {
		nodes := racked("a", "a", "a", "b", "b", "b")
		got := loadAware(t, nodes, 6, 4)
		for p, replicas := range got {
			perRack := map[string]int{}
			for _, id := range replicas {
				perRack[nodes[id].Rack]++
			}
			require.Equal(t, map[string]int{"a": 2, "b": 2}, perRack, "partition %d: %v", p, replicas)
		}
	})
	t.Run("a node without a rack turns racks off", func(t *testing.T) {
		nodes := racked("a", "a", "a", "")
		got, err := LoadAware(nodes, 4, 2)
		require.NoError(t, err)
		checkLoadAware(t, nodes, 4, 2, got)
		// Rack a would force node 3 into every partition.
		require.Less(t, replicaCounts(got)[3], 4)
	})
	t.Run("a fenced node without a rack does not", func(t *testing.T) {
		nodes := append(racked("a", "b", "b"), Node{ID: 3, Fenced: true})
		got := loadAware(t, nodes, 4, 2)
		require.Equal(t, 4, replicaCounts(got)[0], "rack a holds one replica of every partition")
	})
}

func TestLoadAwareInputs(t *testing.T) {
	t.Run("order of nodes does not matter", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		nodes := make([]Node, 9)
		for i := range nodes {
			nodes[i] = Node{ID: int32(100 - i), Rack: string(rune('a' + i%3)), Bytes: rng.Int64N(tib), Leaders: rng.IntN(50)}
		}
		want := loadAware(t, nodes, 30, 3)
		for range 5 {
			shuffled := slices.Clone(nodes)
			rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			require.Equal(t, want, loadAware(t, shuffled, 30, 3))
		}
	})
	t.Run("odd values count as zero", func(t *testing.T) {
		for _, growth := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -5, math.MaxFloat64} {
			nodes := []Node{{ID: 0, Bytes: -7, Leaders: -3, GrowthBytesPerSec: growth}, {ID: 1}, {ID: 2, Bytes: math.MaxInt64}}
			loadAware(t, nodes, 7, 2)
		}
	})
	t.Run("a single node", func(t *testing.T) {
		require.Equal(t, [][]int32{{5}, {5}}, loadAware(t, []Node{{ID: 5}}, 2, 1))
	})
}

func TestLoadAwareErrors(t *testing.T) {
	tests := []struct {
		name           string
		nodes          []Node
		partitions, rf int
		want           error
	}{
		{"no partitions", equalNodes(3), 0, 1, ErrInvalidPartitions},
		{"negative partitions", equalNodes(3), -1, 1, ErrInvalidPartitions},
		{"replication factor 0", equalNodes(3), 3, 0, ErrInvalidReplicationFactor},
		{"replication factor above nodes", equalNodes(3), 3, 4, ErrInvalidReplicationFactor},
		{"no nodes", nil, 3, 1, ErrInvalidReplicationFactor},
		{"all fenced", []Node{{ID: 1, Fenced: true}}, 3, 1, ErrInvalidReplicationFactor},
		{"duplicate id", []Node{{ID: 1}, {ID: 2}, {ID: 1}}, 3, 1, ErrDuplicateNode},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LoadAware(tt.nodes, tt.partitions, tt.rf)
			require.ErrorIs(t, err, tt.want)
			require.Nil(t, got)
		})
	}
}
