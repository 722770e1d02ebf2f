package metadata

import (
	"fmt"
	"slices"

	"github.com/depot-dev/depot/messages"
)

// AlterPartition validates a leader's request to change its partition's
// ISR, as Kafka's controller does AlterPartition, and returns the record
// that makes the change, nil when the ISR is already the one asked for.
// The request must come from the partition's leader in its current leader
// epoch (else FENCED_LEADER_EPOCH) and name its current partition epoch
// (else INVALID_UPDATE_VERSION): a leader that was replaced, or that has
// not seen the last change, changes nothing. The ISR must hold the
// leader, only replicas, each once, and a replica it adds must be live
// (else INELIGIBLE_REPLICA), as KIP-841 asks.
func (im *Image) AlterPartition(m *messages.AlterPartitionRequest) (*messages.MetadataRecord, messages.ErrorCode, string) {
	t, ok := im.topics[m.GetTopic()]
	if !ok || m.GetPartition() < 0 || int(m.GetPartition()) >= len(t.Partitions) {
		return nil, messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, fmt.Sprintf("partition %s-%d does not exist", m.GetTopic(), m.GetPartition())
	}
	p := &t.Partitions[m.GetPartition()]
	name := fmt.Sprintf("%s-%d", t.Name, p.Partition)
	switch {
	case m.GetLeader() != p.Leader || m.GetLeaderEpoch() < p.LeaderEpoch:
		return nil, messages.ErrorCode_FENCED_LEADER_EPOCH,
			fmt.Sprintf("%s: node %d in leader epoch %d asks an ISR change; the leader is node %d in epoch %d", name, m.GetLeader(), m.GetLeaderEpoch(), p.Leader, p.LeaderEpoch)
	case m.GetLeaderEpoch() > p.LeaderEpoch:
		return nil, messages.ErrorCode_UNKNOWN_LEADER_EPOCH,
			fmt.Sprintf("%s: leader epoch %d is ahead of the metadata's %d", name, m.GetLeaderEpoch(), p.LeaderEpoch)
	case m.GetPartitionEpoch() != p.PartitionEpoch:
		return nil, messages.ErrorCode_INVALID_UPDATE_VERSION,
			fmt.Sprintf("%s: partition epoch %d asked, the partition is at %d", name, m.GetPartitionEpoch(), p.PartitionEpoch)
	}
	isr := m.GetIsr()
	if !slices.Contains(isr, p.Leader) {
		return nil, messages.ErrorCode_INVALID_REQUEST, fmt.Sprintf("%s: ISR %v leaves out its leader %d", name, isr, p.Leader)
	}
	for i, r := range isr {
		if !p.Holds(r) {
			return nil, messages.ErrorCode_INVALID_REQUEST, fmt.Sprintf("%s: ISR member %d is not a replica of %v", name, r, p.Replicas)
		}
		if slices.Contains(isr[:i], r) {
			return nil, messages.ErrorCode_INVALID_REQUEST, fmt.Sprintf("%s: ISR %v names node %d twice", name, isr, r)
		}
		if slices.Contains(p.ISR, r) {
			continue
		}
		if n, ok := im.nodes[r]; !ok || n.Fenced {
			return nil, messages.ErrorCode_INELIGIBLE_REPLICA, fmt.Sprintf("%s: node %d cannot join the ISR: it is fenced or not registered", name, r)
		}
	}
	if slices.Equal(sortedCopy(isr), sortedCopy(p.ISR)) {
		return nil, messages.ErrorCode_NONE, ""
	}
	return changeRecord(t.Name, p, p.Leader, isr), messages.ErrorCode_NONE, ""
}

// Partition returns partition p of the named topic.
func (im *Image) Partition(topicName string, p int32) (*Partition, bool) {
	t, ok := im.topics[topicName]
	if !ok || p < 0 || int(p) >= len(t.Partitions) {
		return nil, false
	}
	return &t.Partitions[p], true
}

func sortedCopy(ids []int32) []int32 {
	s := slices.Clone(ids)
	slices.Sort(s)
	return s
}

// uncleanLeader is the replica of p, other than except, that leads by an
// unclean election when t allows one and no ISR member can: the first live
// one, in replica order; NoLeader otherwise.
func (im *Image) uncleanLeader(t *Topic, p *Partition, except int32) int32 {
	if !t.Config.UncleanLeaderElection {
		return NoLeader
	}
	return im.electLeader(p.Replicas, except)
}
