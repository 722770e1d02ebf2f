package metadata

import (
	"fmt"
	"slices"

	"github.com/depot-dev/depot/messages"
)

// A reassignment moves a partition's replicas to a target list of nodes,
// online, as Kafka's KIP-455 does:
//
//  1. The record that starts it gives the partition the target's replicas
//     followed by those the target leaves out, and marks them Adding (in
//     the target, not in the partition before) and Removing (in the
//     partition before, not in the target). The ISR and the leader stay.
//     Each node given a replica starts it, and it follows the leader.
//  2. The ISR change that brings the last replica of Adding into the ISR
//     completes it, in the same record (completed): the replicas become
//     the target, in its order, the ISR keeps only its members, and a
//     leader the target leaves out gives way to the first member of the
//     target in the ISR that is live, in a new leader epoch. The nodes
//     that held the replicas of Removing stop them and delete their logs.
//
// A target that adds nothing, or only replicas already in the ISR,
// completes at once. A new target for a partition already moving replaces
// the move, from the partition's original replicas; cancelling it is that
// with the original replicas as the target: the replicas it was adding
// stop and delete their logs, and those it was removing stay, after the
// ones it kept, as Kafka's revert leaves them.

// replicaState is what a change leaves of a partition: its leader and ISR,
// and its replicas with the move in flight among them.
type replicaState struct {
	leader                     int32
	isr                        []int32
	replicas, adding, removing []int32
}

// stateOf is p's replica state as it is.
func stateOf(p *Partition) replicaState {
	return replicaState{leader: p.Leader, isr: p.ISR, replicas: p.Replicas, adding: p.Adding, removing: p.Removing}
}

// record is the record that takes p to s, with the epochs that go with the
// change: the leader epoch goes up with a change of leader, the partition
// epoch with every change. It names the replicas only when they change.
func (s replicaState) record(topicName string, p *Partition) *messages.MetadataRecord {
	leaderEpoch := p.LeaderEpoch
	if s.leader != p.Leader {
		leaderEpoch++
	}
	change := &messages.PartitionChangeRecord{
		Topic: topicName, Partition: p.Partition, Leader: s.leader, Isr: slices.Clone(s.isr),
		LeaderEpoch: leaderEpoch, PartitionEpoch: p.PartitionEpoch + 1,
	}
	if !slices.Equal(s.replicas, p.Replicas) || !slices.Equal(s.adding, p.Adding) || !slices.Equal(s.removing, p.Removing) {
		change.Replicas = &messages.ReplicaSet{
			Replicas: slices.Clone(s.replicas), AddingReplicas: slices.Clone(s.adding), RemovingReplicas: slices.Clone(s.removing),
		}
	}
	return &messages.MetadataRecord{Record: &messages.MetadataRecord_PartitionChange{PartitionChange: change}}
}

// completed is s with its move completed, when one is in flight, every
// replica it adds is in the ISR, and a member of its target in the ISR can
// lead: the replicas become the target, the ISR keeps only its members,
// and a leader the target leaves out gives way to the first member of the
// target, in the target's order, that is in the ISR and live. ok is false
// when there is nothing to complete yet.
func (im *Image) completed(s replicaState) (done replicaState, ok bool) {
	if len(s.adding) == 0 && len(s.removing) == 0 {
		return s, false
	}
	for _, r := range s.adding {
		if !slices.Contains(s.isr, r) {
			return s, false
		}
	}
	target := without(s.replicas, s.removing)
	isr := slices.DeleteFunc(slices.Clone(s.isr), func(r int32) bool { return !slices.Contains(target, r) })
	leader := s.leader
	if !slices.Contains(target, leader) {
		leader = NoLeader
		for _, r := range target {
			if slices.Contains(isr, r) && im.live(r) {
				leader = r
				break
			}
		}
		if leader == NoLeader {
			return s, false
		}
	}
	return replicaState{leader: leader, isr: isr, replicas: target}, true
}

// live reports whether node id is registered and not fenced.
func (im *Image) live(id int32) bool {
	n, ok := im.nodes[id]
	return ok && !n.Fenced
}

// without is list without the members of drop, in list's order; nil when
// nothing is left.
func without(list, drop []int32) []int32 {
	var out []int32
	for _, r := range list {
		if !slices.Contains(drop, r) {
			out = append(out, r)
		}
	}
	return out
}

// Reassign returns the records that start, replace or cancel the moves m
// asks for, one per partition that changes, and each partition's outcome,
// in the order asked. A partition is refused, and changes nothing, when
// its topic or itself does not exist (UNKNOWN_TOPIC_OR_PARTITION), when it
// is named twice (INVALID_REQUEST), when a cancel finds no move in flight
// (NO_REASSIGNMENT_IN_PROGRESS), and when its target is empty, names a
// node twice or one not registered, adds a replica on a fenced node, is
// already its replicas with no move in flight (nothing to do), or leaves
// its ISR without a member (INVALID_REPLICA_ASSIGNMENT). A target asked
// again while its move is in flight, and, in a retried request, one the
// partition already has or a cancel with no move in flight, change
// nothing and succeed. With keep_replication_factor, a target with more or
// fewer replicas than the partition had before any move is refused
// (INVALID_REPLICATION_FACTOR); a cancel is not.
func (im *Image) Reassign(m *messages.ReassignPartitionsRequest) ([]*messages.MetadataRecord, []*messages.ReassignmentResult) {
	var recs []*messages.MetadataRecord
	results := make([]*messages.ReassignmentResult, 0, len(m.GetPartitions()))
	type key struct {
		topic     string
		partition int32
	}
	seen := map[key]bool{}
	for _, r := range m.GetPartitions() {
		res := &messages.ReassignmentResult{Topic: r.GetTopic(), Partition: r.GetPartition()}
		results = append(results, res)
		k := key{r.GetTopic(), r.GetPartition()}
		if seen[k] {
			res.Error, res.ErrorMessage = messages.ErrorCode_INVALID_REQUEST, fmt.Sprintf("partition %s-%d is named twice", r.GetTopic(), r.GetPartition())
			continue
		}
		seen[k] = true
		rec, code, msg := im.reassign(r, m.GetRetried(), m.GetKeepReplicationFactor())
		res.Error, res.ErrorMessage = code, msg
		if rec != nil {
			recs = append(recs, rec)
		}
	}
	return recs, results
}

// reassign is the record that makes the change r asks of its partition,
// nil when there is none to make, or why it is refused.
func (im *Image) reassign(r *messages.PartitionReassignment, retried, keepReplicationFactor bool) (*messages.MetadataRecord, messages.ErrorCode, string) {
	t, ok := im.topics[r.GetTopic()]
	if !ok || r.GetPartition() < 0 || int(r.GetPartition()) >= len(t.Partitions) {
		return nil, messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, fmt.Sprintf("partition %s-%d does not exist", r.GetTopic(), r.GetPartition())
	}
	p := &t.Partitions[r.GetPartition()]
	name := fmt.Sprintf("%s-%d", t.Name, p.Partition)
	original := p.Replicas
	if p.Reassigning() {
		original = without(p.Replicas, p.Adding)
	}
	target := r.GetReplicas()
	switch {
	case r.GetCancel() && !p.Reassigning() && retried:
		return nil, messages.ErrorCode_NONE, ""
	case r.GetCancel() && !p.Reassigning():
		return nil, messages.ErrorCode_NO_REASSIGNMENT_IN_PROGRESS, fmt.Sprintf("%s: no reassignment in progress", name)
	case r.GetCancel():
		target = original
	default:
		if code, msg := im.validTarget(name, original, target); code != messages.ErrorCode_NONE {
			return nil, code, msg
		}
		if keepReplicationFactor && len(target) != len(original) {
			return nil, messages.ErrorCode_INVALID_REPLICATION_FACTOR, fmt.Sprintf(
				"%s: the target %v has %d replicas and the partition %d, and the request does not allow changing its replication factor", name, target, len(target), len(original))
		}
		switch {
		case p.Reassigning() && slices.Equal(target, p.Target()):
			return nil, messages.ErrorCode_NONE, ""
		case !p.Reassigning() && slices.Equal(target, p.Replicas) && retried:
			return nil, messages.ErrorCode_NONE, ""
		case !p.Reassigning() && slices.Equal(target, p.Replicas):
			return nil, messages.ErrorCode_INVALID_REPLICA_ASSIGNMENT, fmt.Sprintf("%s already has replicas %v: nothing to reassign", name, p.Replicas)
		}
	}
	s := replicaState{leader: p.Leader, adding: without(target, original), removing: without(original, target)}
	s.replicas = append(slices.Clone(target), s.removing...)
	// Replicas the move in flight added, in sync or not, that the new
	// target leaves out go.
	s.isr = slices.DeleteFunc(slices.Clone(p.ISR), func(id int32) bool { return !slices.Contains(s.replicas, id) })
	if len(s.isr) == 0 {
		return nil, messages.ErrorCode_INVALID_REPLICA_ASSIGNMENT,
			fmt.Sprintf("%s: its ISR %v holds only replicas the move in flight adds, and the target %v leaves them all out", name, p.ISR, target)
	}
	if !slices.Contains(s.replicas, s.leader) {
		if s.leader = im.electLeader(s.isr, NoLeader); s.leader == NoLeader {
			return nil, messages.ErrorCode_INVALID_REPLICA_ASSIGNMENT,
				fmt.Sprintf("%s: the target %v leaves out its leader %d, and no replica it keeps in the ISR %v is live to lead", name, target, p.Leader, s.isr)
		}
	}
	if done, ok := im.completed(s); ok {
		s = done
	}
	return s.record(t.Name, p), messages.ErrorCode_NONE, ""
}

// validTarget checks the target asked for partition name, whose replicas
// before any move were original: at least one replica, each once, each
// registered, and those it adds live.
func (im *Image) validTarget(name string, original, target []int32) (messages.ErrorCode, string) {
	if len(target) == 0 {
		return messages.ErrorCode_INVALID_REPLICA_ASSIGNMENT, fmt.Sprintf("%s: an empty target: a partition keeps at least one replica", name)
	}
	for i, r := range target {
		if slices.Contains(target[:i], r) {
			return messages.ErrorCode_INVALID_REPLICA_ASSIGNMENT, fmt.Sprintf("%s: the target %v names node %d twice", name, target, r)
		}
		n, ok := im.nodes[r]
		switch {
		case !ok:
			return messages.ErrorCode_INVALID_REPLICA_ASSIGNMENT, fmt.Sprintf("%s: the target %v names node %d, which is not registered", name, target, r)
		case n.Fenced && !slices.Contains(original, r):
			return messages.ErrorCode_INVALID_REPLICA_ASSIGNMENT, fmt.Sprintf("%s: the target %v adds a replica on node %d, which is fenced: it could not catch up", name, target, r)
		}
	}
	return messages.ErrorCode_NONE, ""
}
