package replicas

import (
	"cmp"
	"fmt"
	"slices"
)

// RackUnaware is Kafka's rack-unaware assignment
// (AdminUtils.assignReplicasToBrokersRackUnaware) over nodes, in the order
// given (Kafka's callers sort brokers by id). With n nodes, partition p's
// first replica is nodes[(startIndex+p) % n]; its j-th further replica
// (j from 0) is the node 1 + (s+j) % (n-1) places after the first, where s
// is shift plus one for each time p has wrapped round the nodes (p / n).
// Kafka draws startIndex and shift at random from [0, n); any value >= 0
// works here.
//
// Partitions are numbered from 0, as for a new topic. When partitions is a
// multiple of n, every node leads partitions/n of them and holds
// partitions*replicationFactor/n replicas.
//
// Errors: ErrInvalidPartitions for partitions < 1, ErrInvalidReplicationFactor
// for a replication factor < 1 or > len(nodes), ErrInvalidStart for a
// negative startIndex or shift, ErrDuplicateNode for an id given twice.
// nodes is not modified.
func RackUnaware(nodes []int32, partitions, replicationFactor int, startIndex, shift int) ([][]int32, error) {
	if err := checkCounts(partitions, replicationFactor, len(nodes)); err != nil {
		return nil, err
	}
	if err := checkStart(startIndex, shift); err != nil {
		return nil, err
	}
	if err := checkUnique(nodes); err != nil {
		return nil, err
	}
	n := len(nodes)
	out := newAssignment(partitions, replicationFactor)
	start := startIndex % n
	s := reduceShift(shift, n)
	for p := range partitions {
		if p > 0 && p%n == 0 {
			s = reduceShift(s+1, n)
		}
		first := (p + start) % n
		out[p] = append(out[p], nodes[first])
		for j := range replicationFactor - 1 {
			out[p] = append(out[p], nodes[replicaIndex(first, s, j, n)])
		}
	}
	return out, nil
}

// RackAware is Kafka's assignment (AdminUtils.assignReplicasToBrokers) over
// the nodes that are not fenced. When none of them has a rack it is
// RackUnaware over their ids, in the order given. When all of them have one,
// it is Kafka's rack-aware assignment
// (assignReplicasToBrokersRackAware):
//
//   - The nodes are arranged in a rack-alternated list (rackAlternated):
//     racks in order of name, each rack's nodes in order of id, taken one
//     from each rack in turn.
//   - Partition p's first replica is list[(startIndex+p) % n], as in
//     RackUnaware.
//   - Further replicas are sought from the positions 1 + (s*racks+k) % (n-1)
//     after the first, for k = 0, 1, ... continuing across the partition's
//     replicas, where s is shift plus one per wrap of p round the list and
//     racks is the number of racks. A node is skipped while its rack already
//     holds a replica of the partition and some rack holds none, or while it
//     holds one itself and some node holds none.
//
// So a partition's replicas are on min(replicationFactor, racks) distinct
// racks. Kafka draws startIndex and shift at random from [0, n); any value
// >= 0 works here. Rack names compare byte-wise, which is Java's String order
// for every name in the Basic Multilingual Plane.
//
// Errors: those of RackUnaware, counting only nodes that are not fenced, and
// ErrIncompleteRacks when some of those nodes have a rack and others not.
// nodes is not modified.
func RackAware(nodes []Node, partitions, replicationFactor int, startIndex, shift int) ([][]int32, error) {
	up := live(nodes)
	if err := checkCounts(partitions, replicationFactor, len(up)); err != nil {
		return nil, err
	}
	if err := checkStart(startIndex, shift); err != nil {
		return nil, err
	}
	if err := checkUnique(ids(nodes)); err != nil {
		return nil, err
	}
	withRack := 0
	for _, n := range up {
		if n.Rack != "" {
			withRack++
		}
	}
	switch withRack {
	case 0:
		return RackUnaware(ids(up), partitions, replicationFactor, startIndex, shift)
	case len(up):
	default:
		return nil, fmt.Errorf("%w: %d of %d live brokers have none", ErrIncompleteRacks, len(up)-withRack, len(up))
	}

	list := rackAlternated(up)
	n := len(list)
	rackOf := make(map[int32]string, n)
	for _, node := range up {
		rackOf[node.ID] = node.Rack
	}
	racks := countRacks(up)
	out := newAssignment(partitions, replicationFactor)
	start := startIndex % n
	s := reduceShift(shift, n)
	racksUsed := make(map[string]struct{}, racks)
	nodesUsed := make(map[int32]struct{}, replicationFactor)
	for p := range partitions {
		if p > 0 && p%n == 0 {
			s = reduceShift(s+1, n)
		}
		first := (p + start) % n
		leader := list[first]
		out[p] = append(out[p], leader)
		clear(racksUsed)
		clear(nodesUsed)
		racksUsed[rackOf[leader]] = struct{}{}
		nodesUsed[leader] = struct{}{}
		k := 0
		for range replicationFactor - 1 {
			for {
				// (s*racks + k) % (n-1) without overflow: s < n-1 and k
				// stays below replicationFactor*(n-1).
				candidate := list[replicaIndex(first, s*racks%(n-1), k, n)]
				k++
				rack := rackOf[candidate]
				_, rackHas := racksUsed[rack]
				_, nodeHas := nodesUsed[candidate]
				if (!rackHas || len(racksUsed) == racks) && (!nodeHas || len(nodesUsed) == n) {
					out[p] = append(out[p], candidate)
					racksUsed[rack] = struct{}{}
					nodesUsed[candidate] = struct{}{}
					break
				}
			}
		}
	}
	return out, nil
}

// rackAlternated is Kafka's getRackAlternatedBrokerList: the racks in order
// of name, each rack's nodes in order of id, and the list takes the next node
// of each rack in turn, skipping racks that have run out. For racks
// rack1: 0, 1, 2; rack2: 3, 4, 5; rack3: 6, 7, 8 it is 0, 3, 6, 1, 4, 7, 2,
// 5, 8.
func rackAlternated(nodes []Node) []int32 {
	byRack := make(map[string][]int32)
	for _, n := range nodes {
		byRack[n.Rack] = append(byRack[n.Rack], n.ID)
	}
	names := make([]string, 0, len(byRack))
	for name, members := range byRack {
		slices.Sort(members)
		names = append(names, name)
	}
	slices.SortFunc(names, cmp.Compare[string])
	out := make([]int32, 0, len(nodes))
	for round := 0; len(out) < len(nodes); round++ {
		for _, name := range names {
			if members := byRack[name]; round < len(members) {
				out = append(out, members[round])
			}
		}
	}
	return out
}

// countRacks is the number of distinct racks among nodes.
func countRacks(nodes []Node) int {
	seen := make(map[string]struct{})
	for _, n := range nodes {
		seen[n.Rack] = struct{}{}
	}
	return len(seen)
}

// replicaIndex is Kafka's AdminUtils.replicaIndex: the position of a further
// replica, 1 + (shift+j) % (n-1) places after the first replica's. n > 1.
func replicaIndex(first, shift, j, n int) int {
	return (first + 1 + (shift+j)%(n-1)) % n
}

// reduceShift brings a shift into [0, n-1): only shift % (n-1) matters to
// replicaIndex, and reducing keeps sums small. For n <= 1 there are no
// further replicas and the shift is 0.
func reduceShift(shift, n int) int {
	if n <= 1 {
		return 0
	}
	return shift % (n - 1)
}

func checkStart(startIndex, shift int) error {
	if startIndex < 0 || shift < 0 {
		return fmt.Errorf("%w: start index %d, shift %d; both must be at least 0", ErrInvalidStart, startIndex, shift)
	}
	return nil
}
