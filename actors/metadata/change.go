package metadata

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/messages"
)

// ValidateCreatePartitions checks m against the image (Kafka's
// CreatePartitions): the topic exists and is not internal, the count
// raises its partition count within MaxPartitionsPerTopic, and the
// assignments, when m names replicas, give each new partition as many
// replicas as the topic's first has, on registered nodes that are not
// fenced. It returns the topic and the replication factor of its new
// partitions, or the error code and message to answer with.
func (im *Image) ValidateCreatePartitions(m *messages.CreatePartitionsRequest) (*Topic, int, messages.ErrorCode, string) {
	name := m.GetTopic()
	t, ok := im.topics[name]
	if !ok {
		return nil, 0, messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, fmt.Sprintf("topic %q does not exist", name)
	}
	if t.Internal {
		return nil, 0, messages.ErrorCode_INVALID_REQUEST,
			fmt.Sprintf("partitions are not added to internal topic %q: what each holds is found by hashing among its partitions", name)
	}
	have, count := int32(len(t.Partitions)), m.GetCount()
	switch {
	case count < have:
		return nil, 0, messages.ErrorCode_INVALID_PARTITIONS,
			fmt.Sprintf("topic %q has %d partitions: a topic's partitions can be added, never removed, so %d is refused", name, have, count)
	case count == have:
		return nil, 0, messages.ErrorCode_INVALID_PARTITIONS, fmt.Sprintf("topic %q already has %d partitions", name, have)
	case count > MaxPartitionsPerTopic:
		return nil, 0, messages.ErrorCode_INVALID_PARTITIONS,
			fmt.Sprintf("topic %q cannot have %d partitions: a topic has 1 to %d", name, count, MaxPartitionsPerTopic)
	}
	replicationFactor := len(t.Partitions[0].Target())
	if a := m.GetAssignments(); len(a) > 0 {
		if int32(len(a)) != count-have {
			return nil, 0, messages.ErrorCode_INVALID_REPLICA_ASSIGNMENT,
				fmt.Sprintf("%d partitions are added to topic %q, but the replicas of %d are given", count-have, name, len(a))
		}
		for i, r := range a {
			if code, msg := im.checkAssignment(name, have+int32(i), r.GetReplicas(), replicationFactor); code != messages.ErrorCode_NONE {
				return nil, 0, code, msg
			}
		}
	}
	return t, replicationFactor, messages.ErrorCode_NONE, ""
}

// AddPartitions returns the records that add partitions to t: partition
// len(t.Partitions)+i on the nodes replicas[i], the first leading, every
// replica in sync and no log directory chosen yet.
func AddPartitions(t *Topic, replicas [][]int32) []*messages.MetadataRecord {
	out := make([]*messages.MetadataRecord, len(replicas))
	for i, nodes := range replicas {
		out[i] = &messages.MetadataRecord{Record: &messages.MetadataRecord_Partition{Partition: &messages.PartitionRecord{
			Assignment: &messages.PartitionAssignment{
				Topic: t.Name, Partition: int32(len(t.Partitions) + i), NodeId: nodes[0],
				Replicas: slices.Clone(nodes), Isr: slices.Clone(nodes),
			},
		}}}
	}
	return out
}

// AlterConfigs returns the record that changes the configs set on the
// topic m names as m asks, nil when they stay as they are; or the error
// code and message to answer with: UNKNOWN_TOPIC_OR_PARTITION,
// INVALID_REQUEST for a key changed twice or a value missing,
// INVALID_CONFIG for an unknown key or a value topic.ParseConfig refuses.
func (im *Image) AlterConfigs(m *messages.AlterTopicConfigsRequest) (*messages.MetadataRecord, messages.ErrorCode, string) {
	name := m.GetTopic()
	t, ok := im.topics[name]
	if !ok {
		return nil, messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, fmt.Sprintf("topic %q does not exist", name)
	}
	changes := make([]topic.Change, len(m.GetChanges()))
	for i, c := range m.GetChanges() {
		changes[i] = topic.Change{Key: c.GetKey(), Op: topic.Op(c.GetOp()), Value: &c.Value}
		if c.GetOp() == messages.ConfigChange_DELETE {
			changes[i].Value = nil
		}
	}
	set, err := topic.ApplyChanges(t.Configs, m.GetReplace(), changes)
	if err == nil {
		_, err = topic.ParseConfig(set)
	}
	switch {
	case errors.Is(err, topic.ErrInvalidChange):
		return nil, messages.ErrorCode_INVALID_REQUEST, fmt.Sprintf("configs of topic %q not changed: %s", name, messages.ErrorText(err))
	case err != nil:
		return nil, messages.ErrorCode_INVALID_CONFIG, fmt.Sprintf("invalid config for topic %q: %s", name, configReason(err))
	}
	if maps.Equal(set, t.Configs) {
		return nil, messages.ErrorCode_NONE, ""
	}
	return &messages.MetadataRecord{Record: &messages.MetadataRecord_TopicConfig{TopicConfig: &messages.TopicConfigRecord{
		Name: name, Configs: set,
	}}}, messages.ErrorCode_NONE, ""
}
