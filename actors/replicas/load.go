package replicas

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// ProjectionHorizon is how far ahead LoadAware projects a node's growth: its
// projected bytes are its bytes plus 24 hours of growth at its current rate.
const ProjectionHorizon = 24 * time.Hour

// LoadAware is Depot's default assignment. It measures each node that is
// not fenced against the average over those nodes in two ratios: its
// projected bytes (Bytes plus ProjectionHorizon of GrowthBytesPerSec) over
// the average, and its Leaders over the average. A ratio whose average is
// zero (no bytes anywhere, or no leaders anywhere) is 0 for every node. A
// node's load is the mean of the ratios that are not left out that way.
//
// Leaders. Spreading the topic's leaders is a hard constraint: with n nodes,
// every node leads partitions/n of its partitions, and the partitions % n
// least loaded nodes lead one more. Partition p is led by the (p % n)-th
// node in order of load (then id), so the extra leaders go to the least
// loaded nodes.
//
// Followers. Each further replica of a partition, in partition order, goes
// to the node with the greatest quotient weight / (replicas + 1), where
// weight = 1 / (1 + bytes ratio) and replicas counts the topic's replicas
// the node already has, its leaders included. This is the D'Hondt (highest
// averages) rule: nodes take the topic's replicas in proportion to their
// weight, as far as one replica per node per partition allows. An empty
// node's weight is twice an average node's and three times that of a node
// at twice the average, so emptier nodes get more of a topic's replicas,
// never all of them (a pure size rule would send every new replica to a
// newly added empty node, Kafka's count rule's failure in reverse). Ties go
// to the emptier node, then to the node nearest after the leader in order
// of id, starting one further along for each time p has wrapped round the
// nodes, so equal nodes get Kafka's striped pattern of followers.
//
// A follower costs a node disk and replication traffic, which the bytes
// ratio measures; a leader costs that and the clients' traffic, which the
// leader ratio adds. Followers chosen by load as well would let the two
// drift apart over many topics: a node with many bytes and few leaders
// looks average, and keeps getting both.
//
// Racks. When every node that is not fenced has a rack, each further replica
// goes to a rack holding the fewest of the partition's replicas among racks
// with a node still free for it, so a partition's replicas are on
// min(replicationFactor, racks) distinct racks and spread over them as evenly
// as their sizes allow. Racks take precedence over load. When some node has
// no rack, racks are ignored.
//
// The result depends only on the nodes' values, not their order in nodes,
// and on nothing else: no randomness, so the same arguments give the same
// assignment. To keep spreading leaders and bytes across topics the caller
// passes Leaders and Bytes as they stand, this topic's predecessors
// included.
//
// Errors: ErrInvalidPartitions for partitions < 1, ErrInvalidReplicationFactor
// for a replication factor < 1 or above the number of nodes that are not
// fenced, ErrDuplicateNode for an id given twice. nodes is not modified.
func LoadAware(nodes []Node, partitions, replicationFactor int) ([][]int32, error) {
	up := live(nodes)
	if err := checkCounts(partitions, replicationFactor, len(up)); err != nil {
		return nil, err
	}
	if err := checkUnique(ids(nodes)); err != nil {
		return nil, err
	}
	slices.SortFunc(up, func(a, b Node) int { return cmp.Compare(a.ID, b.ID) })
	n := len(up)
	bytesRatio, load := loads(up)
	weight := make([]float64, n)
	for i, r := range bytesRatio {
		weight[i] = 1 / (1 + r)
	}

	// Leaders: the (p % n)-th node in order of load, then id.
	byLoad := make([]int, n)
	for i := range byLoad {
		byLoad[i] = i
	}
	slices.SortStableFunc(byLoad, func(a, b int) int { return cmp.Compare(load[a], load[b]) })
	count := make([]int, n) // the topic's replicas on each node
	for p := range partitions {
		count[byLoad[p%n]]++
	}

	// Racks, as indexes, when every node has one.
	var rackOf, rackSize, rackCount []int
	if racksKnown(up) {
		rackOf = make([]int, n)
		index := make(map[string]int)
		for i, node := range up {
			r, ok := index[node.Rack]
			if !ok {
				r = len(index)
				index[node.Rack] = r
				rackSize = append(rackSize, 0)
			}
			rackOf[i] = r
			rackSize[r]++
		}
		rackCount = make([]int, len(rackSize))
	}

	// better reports whether node a beats node b for a further replica of a
	// partition led by leader, at wrap shift.
	better := func(a, b, leader, shift int) bool {
		// weight[a]/(count[a]+1) against weight[b]/(count[b]+1).
		qa, qb := weight[a]*float64(count[b]+1), weight[b]*float64(count[a]+1)
		if qa != qb {
			return qa > qb
		}
		if bytesRatio[a] != bytesRatio[b] {
			return bytesRatio[a] < bytesRatio[b]
		}
		return ringRank(a, leader, shift, n) < ringRank(b, leader, shift, n)
	}

	out := newAssignment(partitions, replicationFactor)
	holds := make([]int, n) // p+1 on the nodes holding partition p
	for p := range partitions {
		leader := byLoad[p%n]
		out[p] = append(out[p], up[leader].ID)
		holds[leader] = p + 1
		if rackOf != nil {
			clear(rackCount)
			rackCount[rackOf[leader]]++
		}
		shift := p / n
		for range replicationFactor - 1 {
			fewest := math.MaxInt
			for r, c := range rackCount {
				if c < rackSize[r] {
					fewest = min(fewest, c)
				}
			}
			best := -1
			for i := range n {
				if holds[i] == p+1 || (rackOf != nil && rackCount[rackOf[i]] != fewest) {
					continue
				}
				if best < 0 || better(i, best, leader, shift) {
					best = i
				}
			}
			out[p] = append(out[p], up[best].ID)
			holds[best] = p + 1
			count[best]++
			if rackOf != nil {
				rackCount[rackOf[best]]++
			}
		}
	}
	return out, nil
}

// loads returns each node's projected bytes over the nodes' average (0 for
// all when the average is 0) and its load: the mean of that ratio and its
// leaders over the average, leaving out a ratio whose average is 0.
func loads(nodes []Node) (bytesRatio, load []float64) {
	projected := make([]float64, len(nodes))
	leaders := make([]float64, len(nodes))
	var sumProjected, sumLeaders float64
	for i, node := range nodes {
		rate := node.GrowthBytesPerSec
		if !(rate > 0) || math.IsInf(rate, 1) {
			rate = 0
		}
		// The conversion keeps the product from being fused into the
		// addition, so every platform computes the same value; the
		// projection saturates at the largest int64, as byte counts do.
		projected[i] = min(float64(max(node.Bytes, 0))+float64(rate*ProjectionHorizon.Seconds()), math.MaxInt64)
		leaders[i] = float64(max(node.Leaders, 0))
		sumProjected += projected[i]
		sumLeaders += leaders[i]
	}
	n := float64(len(nodes))
	bytesRatio = make([]float64, len(nodes))
	load = make([]float64, len(nodes))
	for i := range nodes {
		terms := 0
		if sumProjected > 0 {
			bytesRatio[i] = projected[i] / (sumProjected / n)
			load[i] += bytesRatio[i]
			terms++
		}
		if sumLeaders > 0 {
			load[i] += leaders[i] / (sumLeaders / n)
			terms++
		}
		if terms > 0 {
			load[i] /= float64(terms)
		}
	}
	return bytesRatio, load
}

// racksKnown reports whether every node has a rack.
func racksKnown(nodes []Node) bool {
	for _, node := range nodes {
		if node.Rack == "" {
			return false
		}
	}
	return true
}

// ringRank orders the nodes other than leader (indexes in order of id) for a
// tie: the node right after the leader first, wrapping round, and rotated by
// shift among the n-1 others. n > 1.
func ringRank(i, leader, shift, n int) int {
	after := (i - leader - 1 + n) % n // 0 .. n-2 for i != leader
	return (after - shift%(n-1) + (n - 1)) % (n - 1)
}
