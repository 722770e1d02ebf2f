package metadata

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/actors/topic"
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
// (else INELIGIBLE_REPLICA), as KIP-841 asks. A change that brings the
// last replica a reassignment adds into the ISR completes the
// reassignment in the same record (see completed): it may change the
// replicas and the leader too.
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
	s := stateOf(p)
	s.isr = isr
	if done, ok := im.completed(s); ok {
		return done.record(t.Name, p), messages.ErrorCode_NONE, ""
	}
	if slices.Equal(sortedCopy(isr), sortedCopy(p.ISR)) {
		return nil, messages.ErrorCode_NONE, ""
	}
	return s.record(t.Name, p), messages.ErrorCode_NONE, ""
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

// ElectLeaders returns the records of the elections m asks for, and each
// partition's outcome, in the order the partitions are named: preferred
// elections (electPreferred), or unclean ones when m asks for them
// (electUnclean). The partitions are those of m's topic partitions when it
// names any; else those of its topic, only the partitions it lists when it
// lists any; else every partition of every topic, by topic name. A topic
// that does not exist, or a partition it does not have, is answered
// UNKNOWN_TOPIC_OR_PARTITION; a partition named twice is elected once, and
// answered each time.
func (im *Image) ElectLeaders(m *messages.ElectLeadersRequest) ([]*messages.MetadataRecord, []*messages.ElectionResult) {
	var recs []*messages.MetadataRecord
	var results []*messages.ElectionResult
	type key struct {
		topic     string
		partition int32
	}
	done := map[key]*messages.ElectionResult{}
	elect := func(name string, i int32) {
		k := key{name, i}
		if earlier, ok := done[k]; ok {
			results = append(results, proto.Clone(earlier).(*messages.ElectionResult))
			return
		}
		r := &messages.ElectionResult{Topic: name, Partition: i, Leader: NoLeader}
		results = append(results, r)
		done[k] = r
		t, ok := im.topics[name]
		if !ok || i < 0 || int(i) >= len(t.Partitions) {
			r.Error, r.ErrorMessage = messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, fmt.Sprintf("partition %s-%d does not exist", name, i)
			return
		}
		p := &t.Partitions[i]
		r.Leader = p.Leader
		electOne := im.electPreferred
		if m.GetUnclean() {
			electOne = im.electUnclean
		}
		rec, code, msg := electOne(t, p)
		r.Error, r.ErrorMessage = code, msg
		if rec != nil {
			recs = append(recs, rec)
			r.Leader = rec.GetPartitionChange().GetLeader()
		}
	}
	if len(m.GetTopicPartitions()) > 0 {
		for _, tp := range m.GetTopicPartitions() {
			elect(tp.GetTopic(), tp.GetPartition())
		}
		return recs, results
	}
	names := im.TopicNames()
	if m.GetTopic() != "" {
		names = []string{m.GetTopic()}
	}
	for _, name := range names {
		t, ok := im.topics[name]
		if !ok {
			results = append(results, &messages.ElectionResult{Topic: name, Partition: -1, Leader: NoLeader,
				Error: messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, ErrorMessage: fmt.Sprintf("topic %q does not exist", name)})
			continue
		}
		parts := m.GetPartitions()
		if len(parts) == 0 || m.GetTopic() == "" {
			parts = nil
			for _, p := range t.Partitions {
				parts = append(parts, p.Partition)
			}
		}
		for _, i := range parts {
			elect(name, i)
		}
	}
	return recs, results
}

// electUnclean is the record of an unclean election of p, as Kafka's
// ElectLeaders with the unclean election type: a partition with no leader
// gets the first live member of its ISR, or, when none is live and t
// allows an unclean election, its first live replica, which becomes the
// ISR alone. A partition that has a leader needs none
// (ELECTION_NOT_NEEDED); one that finds no leader it may take is refused
// ELIGIBLE_LEADERS_NOT_AVAILABLE.
func (im *Image) electUnclean(t *Topic, p *Partition) (*messages.MetadataRecord, messages.ErrorCode, string) {
	name := fmt.Sprintf("%s-%d", t.Name, p.Partition)
	if p.Leader != NoLeader {
		return nil, messages.ErrorCode_ELECTION_NOT_NEEDED, fmt.Sprintf("%s: node %d leads", name, p.Leader)
	}
	if leader := im.electLeader(p.ISR, NoLeader); leader != NoLeader {
		return changeRecord(t.Name, p, leader, p.ISR), messages.ErrorCode_NONE, ""
	}
	if !t.Config.UncleanLeaderElection {
		return nil, messages.ErrorCode_ELIGIBLE_LEADERS_NOT_AVAILABLE, fmt.Sprintf(
			"%s: no replica of its ISR %v is live, and topic %q does not allow a replica outside it to lead (%s is false)",
			name, p.ISR, t.Name, topic.ConfigUncleanLeaderElection)
	}
	leader := im.electLeader(p.Replicas, NoLeader)
	if leader == NoLeader {
		return nil, messages.ErrorCode_ELIGIBLE_LEADERS_NOT_AVAILABLE, fmt.Sprintf("%s: none of its replicas %v is live", name, p.Replicas)
	}
	return changeRecord(t.Name, p, leader, []int32{leader}), messages.ErrorCode_NONE, ""
}

// electPreferred is the record that makes p's preferred replica its
// leader, or why there is none.
func (im *Image) electPreferred(t *Topic, p *Partition) (*messages.MetadataRecord, messages.ErrorCode, string) {
	name := fmt.Sprintf("%s-%d", t.Name, p.Partition)
	if len(p.Replicas) == 0 {
		return nil, messages.ErrorCode_PREFERRED_LEADER_NOT_AVAILABLE, name + ": no replicas"
	}
	preferred := p.Replicas[0]
	if p.Leader == preferred {
		return nil, messages.ErrorCode_ELECTION_NOT_NEEDED, fmt.Sprintf("%s: node %d, its preferred replica, leads", name, preferred)
	}
	n, ok := im.nodes[preferred]
	if !ok || n.Fenced || !slices.Contains(p.ISR, preferred) {
		return nil, messages.ErrorCode_PREFERRED_LEADER_NOT_AVAILABLE, fmt.Sprintf("%s: node %d, its preferred replica, is fenced or not in the ISR %v", name, preferred, p.ISR)
	}
	return changeRecord(t.Name, p, preferred, p.ISR), messages.ErrorCode_NONE, ""
}

// Imbalanced reports whether a partition's preferred replica could lead it
// and does not: what Kafka's auto.leader.rebalance.enable elects.
func (im *Image) Imbalanced() bool {
	found := false
	im.eachPartition(func(t *Topic, p *Partition) {
		if !found {
			rec, _, _ := im.electPreferred(t, p)
			found = rec != nil
		}
	})
	return found
}

// RaiseInternalReplicas returns the reassignment that gives each partition
// of the internal topics (__consumer_offsets) min(want, live nodes)
// replicas, where it has fewer and is not moving already, as Kafka's
// offsets.topic.replication.factor asks of a topic created while fewer
// nodes were up: its replicas stay, in order, and the live nodes that hold
// the fewest of the topic's replicas join them. Nil when nothing is short.
func (im *Image) RaiseInternalReplicas(want int) *messages.ReassignPartitionsRequest {
	live := im.Live()
	want = min(want, len(live))
	var out *messages.ReassignPartitionsRequest
	for _, name := range im.TopicNames() {
		t := im.topics[name]
		if !t.Internal {
			continue
		}
		held := map[int32]int{}
		for _, p := range t.Partitions {
			for _, r := range p.Replicas {
				held[r]++
			}
		}
		for _, p := range t.Partitions {
			if len(p.Replicas) >= want || p.Reassigning() {
				continue
			}
			target := slices.Clone(p.Replicas)
			candidates := slices.DeleteFunc(slices.Clone(live), func(id int32) bool { return slices.Contains(target, id) })
			slices.SortStableFunc(candidates, func(a, b int32) int { return held[a] - held[b] })
			for _, id := range candidates[:min(len(candidates), want-len(target))] {
				target = append(target, id)
				held[id]++
			}
			if out == nil {
				out = &messages.ReassignPartitionsRequest{}
			}
			out.Partitions = append(out.Partitions, &messages.PartitionReassignment{Topic: name, Partition: p.Partition, Replicas: target})
		}
	}
	return out
}
