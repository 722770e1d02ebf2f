// Package replicas assigns the replicas of a new topic's partitions to nodes:
// for each partition, the ordered list of nodes that hold it, the first of
// them the preferred leader. It is what a controller needs when a topic is
// created: the active controller calls LoadAware.
//
// Three rules share one result shape, [][]int32 indexed by partition:
//
//   - RackUnaware is Kafka's AdminUtils.assignReplicasToBrokersRackUnaware:
//     first replicas round-robin from a start index, the others at a shift
//     from the first that grows by one each time the round-robin wraps.
//   - RackAware is Kafka's AdminUtils.assignReplicasToBrokers with racks:
//     the same round-robin over a rack-alternated list of the nodes, each
//     further replica skipping nodes whose rack (or the node itself) already
//     holds one while some rack (or node) holds none.
//   - LoadAware is Depot's default: the topic's leaders are spread evenly as
//     a hard constraint; each node's bytes, projected growth and leaders
//     decide which nodes take the extra leaders, and its projected bytes how
//     many of the other replicas it takes. A partition's replicas are on
//     distinct racks where the racks allow.
//
// Kafka draws the start index and shift at random; here the caller passes
// them, so the Kafka rules are reproducible and their published answers are
// tests. LoadAware needs no randomness: the load it is given breaks the
// symmetry from one topic to the next.
//
// Fenced nodes are never chosen (Kafka's StripedReplicaPlacer uses a fenced
// broker as a follower when it runs out of unfenced ones; Depot does not).
// A replication factor counts only the nodes that are not fenced.
//
// Everything here is a pure function of its arguments: no I/O, no clocks, no
// randomness, no actor system, and the arguments are never modified, so
// every function is safe for concurrent use.
package replicas

import (
	"errors"
	"fmt"
)

// Sentinel errors of the package, wrapped with %w.
var (
	// ErrInvalidPartitions is returned for fewer than one partition.
	ErrInvalidPartitions = errors.New("replicas: invalid number of partitions")
	// ErrInvalidReplicationFactor is returned for a replication factor below
	// one or above the number of nodes that are not fenced.
	ErrInvalidReplicationFactor = errors.New("replicas: invalid replication factor")
	// ErrInvalidStart is returned by RackUnaware and RackAware for a negative
	// start index or shift.
	ErrInvalidStart = errors.New("replicas: invalid start index or shift")
	// ErrDuplicateNode is returned when a node id is given twice.
	ErrDuplicateNode = errors.New("replicas: node listed twice")
	// ErrIncompleteRacks is returned by RackAware when some nodes that are
	// not fenced have a rack and others have none.
	ErrIncompleteRacks = errors.New("replicas: not all brokers have rack information")
)

// Node is what replica assignment knows of one node (a broker).
type Node struct {
	// ID is the node id, what an assignment lists.
	ID int32
	// Rack is the node's rack (broker.rack), "" for none.
	Rack string
	// Bytes is the size of the partition replicas the node holds now;
	// negative counts as 0. LoadAware only.
	Bytes int64
	// GrowthBytesPerSec is the rate at which those replicas grow, in bytes
	// per second; negative, NaN or infinite counts as 0. LoadAware only.
	GrowthBytesPerSec float64
	// Leaders is the number of partitions, of every topic, the node leads
	// now; negative counts as 0. LoadAware only.
	Leaders int
	// Fenced is true for a node that may not take replicas (KRaft's fenced
	// broker: registered, but not heartbeating).
	Fenced bool
}

// checkCounts validates the partition count and the replication factor
// against the number of nodes available, in Kafka's order.
func checkCounts(partitions, replicationFactor, available int) error {
	if partitions < 1 {
		return fmt.Errorf("%w: %d, must be larger than 0", ErrInvalidPartitions, partitions)
	}
	if replicationFactor < 1 {
		return fmt.Errorf("%w: %d, must be larger than 0", ErrInvalidReplicationFactor, replicationFactor)
	}
	if replicationFactor > available {
		return fmt.Errorf("%w: replication factor %d larger than available brokers %d",
			ErrInvalidReplicationFactor, replicationFactor, available)
	}
	return nil
}

// checkUnique returns ErrDuplicateNode for the first id given twice.
func checkUnique(ids []int32) error {
	seen := make(map[int32]struct{}, len(ids))
	for _, id := range ids {
		if _, ok := seen[id]; ok {
			return fmt.Errorf("%w: %d", ErrDuplicateNode, id)
		}
		seen[id] = struct{}{}
	}
	return nil
}

// live returns the nodes that are not fenced, in the order given.
func live(nodes []Node) []Node {
	out := make([]Node, 0, len(nodes))
	for _, n := range nodes {
		if !n.Fenced {
			out = append(out, n)
		}
	}
	return out
}

// ids returns the nodes' ids, in order.
func ids(nodes []Node) []int32 {
	out := make([]int32, len(nodes))
	for i, n := range nodes {
		out[i] = n.ID
	}
	return out
}

// newAssignment returns partitions empty replica lists of capacity
// replicationFactor, sharing one backing array.
func newAssignment(partitions, replicationFactor int) [][]int32 {
	backing := make([]int32, partitions*replicationFactor)
	out := make([][]int32, partitions)
	for p := range out {
		out[p] = backing[p*replicationFactor : p*replicationFactor : (p+1)*replicationFactor]
	}
	return out
}
