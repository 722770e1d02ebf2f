package replicas

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func nodeIDs(n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(i)
	}
	return out
}

// racked turns an id -> rack map into nodes in order of id, as Kafka's
// RackAwareTest.toBrokerMetadata does.
func racked(racks map[int32]string) []Node {
	var out []Node
	for id, rack := range racks {
		out = append(out, Node{ID: id, Rack: rack})
	}
	slices.SortFunc(out, func(a, b Node) int { return int(a.ID - b.ID) })
	return out
}

func TestRackUnaware(t *testing.T) {
	tests := []struct {
		name              string
		nodes             []int32
		partitions, rf    int
		startIndex, shift int
		want              [][]int32
	}{
		{
			// Kafka's AdminRackAwareTest.testReplicaAssignment (and the
			// table in AdminUtils' doc comment): fixedStartIndex 0 sets both.
			name:  "kafka five brokers ten partitions",
			nodes: nodeIDs(5), partitions: 10, rf: 3,
			want: [][]int32{
				{0, 1, 2}, {1, 2, 3}, {2, 3, 4}, {3, 4, 0}, {4, 0, 1},
				{0, 2, 3}, {1, 3, 4}, {2, 4, 0}, {3, 0, 1}, {4, 1, 2},
			},
		},
		{
			// Worked by hand from Kafka's rule: the first replicas start at
			// broker 2, the second is 2 after the first until the wrap at
			// partition 5, then 3.
			name:  "start index and shift apart",
			nodes: nodeIDs(5), partitions: 6, rf: 3, startIndex: 2, shift: 1,
			want: [][]int32{{2, 4, 0}, {3, 0, 1}, {4, 1, 2}, {0, 2, 3}, {1, 3, 4}, {2, 0, 1}},
		},
		{
			name:  "start index beyond the node count wraps",
			nodes: nodeIDs(5), partitions: 6, rf: 3, startIndex: 7, shift: 5,
			want: [][]int32{{2, 4, 0}, {3, 0, 1}, {4, 1, 2}, {0, 2, 3}, {1, 3, 4}, {2, 0, 1}},
		},
		{
			name:  "ids in the order given",
			nodes: []int32{10, 30, 20}, partitions: 4, rf: 2,
			want: [][]int32{{10, 30}, {30, 20}, {20, 10}, {10, 20}},
		},
		{
			name:  "one node",
			nodes: []int32{7}, partitions: 3, rf: 1, startIndex: 4, shift: 9,
			want: [][]int32{{7}, {7}, {7}},
		},
		{
			name:  "replication factor equals node count",
			nodes: nodeIDs(3), partitions: 4, rf: 3,
			want: [][]int32{{0, 1, 2}, {1, 2, 0}, {2, 0, 1}, {0, 2, 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := slices.Clone(tt.nodes)
			got, err := RackUnaware(nodes, tt.partitions, tt.rf, tt.startIndex, tt.shift)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.nodes, nodes, "nodes modified")
		})
	}
}

func TestRackAlternated(t *testing.T) {
	// Kafka's testGetRackAlternatedBrokerListAndAssignReplicasToBrokers.
	rackMap := map[int32]string{0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
	require.Equal(t, []int32{0, 3, 1, 5, 4, 2}, rackAlternated(racked(rackMap)))
	delete(rackMap, 5)
	require.Equal(t, []int32{0, 3, 1, 4, 2}, rackAlternated(racked(rackMap)))
	// The example of Kafka's doc comment.
	nine := map[int32]string{0: "rack1", 1: "rack1", 2: "rack1", 3: "rack2", 4: "rack2", 5: "rack2", 6: "rack3", 7: "rack3", 8: "rack3"}
	require.Equal(t, []int32{0, 3, 6, 1, 4, 7, 2, 5, 8}, rackAlternated(racked(nine)))
}

func TestRackAware(t *testing.T) {
	// Kafka's testGetRackAlternatedBrokerListAndAssignReplicasToBrokers: the
	// rack-alternated list is 0, 3, 1, 5, 4, 2, and partition 6 starts the
	// second round with the followers shifted.
	rackMap := map[int32]string{0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
	got, err := RackAware(racked(rackMap), 7, 3, 0, 0)
	require.NoError(t, err)
	require.Equal(t, [][]int32{{0, 3, 1}, {3, 1, 5}, {1, 5, 4}, {5, 4, 2}, {4, 2, 0}, {2, 0, 3}, {0, 4, 2}}, got)

	t.Run("input order does not matter", func(t *testing.T) {
		nodes := racked(rackMap)
		slices.Reverse(nodes)
		again, err := RackAware(nodes, 7, 3, 0, 0)
		require.NoError(t, err)
		require.Equal(t, got, again)
	})
	t.Run("no racks is rack unaware", func(t *testing.T) {
		nodes := []Node{{ID: 0}, {ID: 1}, {ID: 2}, {ID: 3}, {ID: 4}}
		got, err := RackAware(nodes, 10, 3, 0, 0)
		require.NoError(t, err)
		want, err := RackUnaware(nodeIDs(5), 10, 3, 0, 0)
		require.NoError(t, err)
		require.Equal(t, want, got)
	})
	t.Run("fenced nodes are left out", func(t *testing.T) {
		nodes := append(racked(rackMap), Node{ID: 9, Rack: "rack0", Fenced: true})
		again, err := RackAware(nodes, 7, 3, 0, 0)
		require.NoError(t, err)
		require.Equal(t, got, again)
	})
	t.Run("a fenced node without a rack is not counted", func(t *testing.T) {
		nodes := append(racked(rackMap), Node{ID: 9, Fenced: true})
		again, err := RackAware(nodes, 7, 3, 0, 0)
		require.NoError(t, err)
		require.Equal(t, got, again)
	})
}

// distribution is a Kafka RackAwareTest.getReplicaDistribution: leaders and
// replicas per node and the racks of each partition's replicas.
type distribution struct {
	leaders, replicas map[int32]int
	partitionRacks    [][]string
}

func distributionOf(assignment [][]int32, rackOf map[int32]string) distribution {
	d := distribution{leaders: map[int32]int{}, replicas: map[int32]int{}}
	for _, replicas := range assignment {
		d.leaders[replicas[0]]++
		var racks []string
		for _, id := range replicas {
			d.replicas[id]++
			racks = append(racks, rackOf[id])
		}
		d.partitionRacks = append(d.partitionRacks, racks)
	}
	return d
}

func distinct[T comparable](xs []T) int {
	seen := map[T]struct{}{}
	for _, x := range xs {
		seen[x] = struct{}{}
	}
	return len(seen)
}

// checkReplicaDistribution is Kafka's RackAwareTest.checkReplicaDistribution:
// replicas of a partition on distinct nodes always; with rackAware, on
// replicationFactor distinct racks; with leaders, partitions/nodes leaders
// each; with replicas, partitions*rf/nodes replicas each.
func checkReplicaDistribution(t *testing.T, assignment [][]int32, rackOf map[int32]string, partitions, rf int, rackAware, leaders, replicas bool) {
	t.Helper()
	require.Len(t, assignment, partitions)
	for p, r := range assignment {
		require.Len(t, r, rf, "partition %d", p)
		require.Equal(t, rf, distinct(r), "partition %d has a node twice: %v", p, r)
	}
	d := distributionOf(assignment, rackOf)
	for id := range rackOf {
		if leaders {
			require.Equal(t, partitions/len(rackOf), d.leaders[id], "leaders of %d", id)
		}
		if replicas {
			require.Equal(t, partitions*rf/len(rackOf), d.replicas[id], "replicas of %d", id)
		}
	}
	if rackAware {
		for p, racks := range d.partitionRacks {
			require.Equal(t, rf, distinct(racks), "partition %d racks %v", p, racks)
		}
	}
}

// TestRackAwareKafkaCases runs Kafka's AdminRackAwareTest cases. Those that
// Kafka runs with a random start index run here with every start index and
// shift, since either may be drawn.
func TestRackAwareKafkaCases(t *testing.T) {
	six := map[int32]string{0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}
	twelve := map[int32]string{0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1",
		6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack1", 11: "rack3"}
	expansion := map[int32]string{6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack3", 11: "rack1"}
	tests := []struct {
		name                         string
		racks                        map[int32]string
		partitions, rf               int
		fixed                        int // -1: every start index and shift
		rackAware, leaders, replicas bool
	}{
		{"with rack aware", six, 6, 3, 2, true, true, true},
		{"with rack aware with random start index", six, 6, 3, -1, true, true, true},
		{"with uneven replicas", six, 13, 3, 0, true, false, false},
		{"with uneven racks", map[int32]string{0: "rack1", 1: "rack1", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}, 12, 3, -1, true, true, false},
		{"with 2 replicas", six, 12, 2, -1, true, true, true},
		{"expansion brokers", expansion, 12, 2, -1, true, true, true},
		{"with 2 replicas and 6 partitions", six, 6, 2, -1, true, true, true},
		{"with 2 replicas and 3 brokers", map[int32]string{0: "rack1", 1: "rack2", 4: "rack3"}, 3, 2, -1, true, true, true},
		{"large number of partitions", twelve, 96, 3, -1, true, true, true},
		{"skip broker with replica already assigned", map[int32]string{0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}, 6, 4, 2, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			starts := []int{tt.fixed}
			if tt.fixed < 0 {
				starts = nil
				for i := range len(tt.racks) {
					starts = append(starts, i)
				}
			}
			for _, start := range starts {
				for _, shift := range starts {
					got, err := RackAware(racked(tt.racks), tt.partitions, tt.rf, start, shift)
					require.NoError(t, err)
					t.Run(fmt.Sprintf("start %d shift %d", start, shift), func(t *testing.T) {
						checkReplicaDistribution(t, got, tt.racks, tt.partitions, tt.rf, tt.rackAware, tt.leaders, tt.replicas)
					})
				}
			}
		})
	}

	// testMoreReplicasThanRacks, testLessReplicasThanRacks, testSingleRack.
	racksCases := []struct {
		name           string
		racks          map[int32]string
		partitions, rf int
		wantRacks      int
		leadersEach    int
	}{
		{"more replicas than racks", map[int32]string{0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}, 6, 5, 3, 0},
		{"less replicas than racks", map[int32]string{0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}, 6, 2, 2, 0},
		{"single rack", map[int32]string{0: "rack1", 1: "rack1", 2: "rack1", 3: "rack1", 4: "rack1", 5: "rack1"}, 6, 3, 1, 1},
	}
	for _, tt := range racksCases {
		t.Run(tt.name, func(t *testing.T) {
			for start := range len(tt.racks) {
				for shift := range len(tt.racks) {
					got, err := RackAware(racked(tt.racks), tt.partitions, tt.rf, start, shift)
					require.NoError(t, err)
					checkReplicaDistribution(t, got, tt.racks, tt.partitions, tt.rf, false, false, false)
					d := distributionOf(got, tt.racks)
					for p, racks := range d.partitionRacks {
						require.Equal(t, tt.wantRacks, distinct(racks), "start %d shift %d partition %d", start, shift, p)
					}
					if tt.leadersEach > 0 {
						for id := range tt.racks {
							require.Equal(t, tt.leadersEach, d.leaders[id])
						}
					}
				}
			}
		})
	}
}

func TestKafkaRuleErrors(t *testing.T) {
	five := []Node{{ID: 0}, {ID: 1}, {ID: 2}, {ID: 3}, {ID: 4}}
	tests := []struct {
		name    string
		call    func() ([][]int32, error)
		want    error
		message string
	}{
		{"no partitions", func() ([][]int32, error) { return RackUnaware(nodeIDs(5), 0, 3, 0, 0) }, ErrInvalidPartitions,
			"replicas: invalid number of partitions: 0, must be larger than 0"},
		{"replication factor 0", func() ([][]int32, error) { return RackUnaware(nodeIDs(5), 10, 0, 0, 0) }, ErrInvalidReplicationFactor,
			"replicas: invalid replication factor: 0, must be larger than 0"},
		{"replication factor above brokers", func() ([][]int32, error) { return RackUnaware(nodeIDs(5), 10, 6, 0, 0) }, ErrInvalidReplicationFactor,
			"replicas: invalid replication factor: replication factor 6 larger than available brokers 5"},
		{"no nodes", func() ([][]int32, error) { return RackUnaware(nil, 1, 1, 0, 0) }, ErrInvalidReplicationFactor,
			"replicas: invalid replication factor: replication factor 1 larger than available brokers 0"},
		{"negative start", func() ([][]int32, error) { return RackUnaware(nodeIDs(5), 10, 3, -1, 0) }, ErrInvalidStart, ""},
		{"negative shift", func() ([][]int32, error) { return RackAware(five, 10, 3, 0, -1) }, ErrInvalidStart, ""},
		{"duplicate id", func() ([][]int32, error) { return RackUnaware([]int32{1, 2, 1}, 3, 2, 0, 0) }, ErrDuplicateNode,
			"replicas: node listed twice: 1"},
		{"duplicate fenced id", func() ([][]int32, error) {
			return RackAware(append(slices.Clone(five), Node{ID: 4, Fenced: true}), 3, 2, 0, 0)
		}, ErrDuplicateNode, ""},
		{"fenced nodes do not count", func() ([][]int32, error) {
			return RackAware([]Node{{ID: 0}, {ID: 1, Fenced: true}, {ID: 2}}, 3, 3, 0, 0)
		}, ErrInvalidReplicationFactor, "replicas: invalid replication factor: replication factor 3 larger than available brokers 2"},
		{"some racks missing", func() ([][]int32, error) {
			return RackAware([]Node{{ID: 0, Rack: "a"}, {ID: 1}, {ID: 2, Rack: "b"}}, 3, 2, 0, 0)
		}, ErrIncompleteRacks, "replicas: not all brokers have rack information: 1 of 3 live brokers have none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.call()
			require.ErrorIs(t, err, tt.want)
			require.Nil(t, got)
			if tt.message != "" {
				require.EqualError(t, err, tt.message)
			}
		})
	}
}
