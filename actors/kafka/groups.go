package kafka

// What the group APIs (find_coordinator.go to delete_groups.go) share.
//
// Every group request becomes a message to the node's group coordinator
// (Config.Groups), which answers FindCoordinator and ListGroups itself and
// hands the others to the group's actor, or answers NOT_COORDINATOR for a
// group whose __consumer_offsets partition another node leads. Kafka's
// clients speak Kafka's classic group protocol (protocol type "consumer"
// for consumers): the group elects a leader, the leader assigns. A group
// of Depot's own protocol, which the actor client joins, is described and
// listed to Kafka clients as a "consumer" group too, its members'
// subscriptions and assignments encoded as Kafka's consumers encode them,
// so that Kafka's tools show it; a Kafka client cannot join it, nor an
// actor client a group of Kafka clients (INCONSISTENT_GROUP_PROTOCOL).
// Committed offsets are the group's, whoever commits and reads them.

import (
	"net"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/actors/group"
	"github.com/depot-dev/depot/messages"
)

// maxGroupWait bounds the wait for the answer to a JoinGroup or a
// SyncGroup, which the group gives once its generation settles, within the
// rebalance timeout of its members; the group answers every request it
// holds by then, and this bound only frees the connection should it not.
const maxGroupWait = 30 * time.Minute

// groupAskCode is the error code of a group request to which the group
// coordinator gave no answer: retriable, so that the client finds the
// coordinator again.
func groupAskCode(error) int16 { return codeCoordinatorNotAvailable }

// clientHost is where the connection's client is, as Kafka names it in a
// group's description: "/" and its IP address.
func (c *conn) clientHost() string {
	host, _, err := net.SplitHostPort(c.nc.RemoteAddr().String())
	if err != nil {
		return "/" + c.nc.RemoteAddr().String()
	}
	return "/" + host
}

// clientID is the client id of a request's header, "" when null.
func clientID(x *exchange) string {
	if x.req.ClientID == nil {
		return ""
	}
	return *x.req.ClientID
}

// orEmpty is *s, "" for nil.
func orEmpty(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// consumerTopics are the topics of a consumer's protocol metadata, nil
// when it does not decode.
func consumerTopics(metadata []byte) []string {
	var m kmsg.ConsumerMemberMetadata
	if err := m.ReadFrom(metadata); err != nil {
		return nil
	}
	return m.Topics
}

// consumerPartitions are the partitions of a consumer's assignment, nil
// when it does not decode.
func consumerPartitions(assignment []byte) []*messages.TopicPartition {
	var a kmsg.ConsumerMemberAssignment
	if len(assignment) == 0 || a.ReadFrom(assignment) != nil {
		return nil
	}
	var out []*messages.TopicPartition
	for _, t := range a.Topics {
		for _, p := range t.Partitions {
			out = append(out, &messages.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	return out
}

// encodeConsumerMetadata is a subscription to topics as a Kafka consumer
// encodes it in its protocol metadata (version 0).
func encodeConsumerMetadata(topics []string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = slices.Clone(topics)
	return m.AppendTo(nil)
}

// encodeConsumerAssignment is an assignment of partitions as a Kafka
// consumer group's leader encodes it (version 0), topics in their order of
// first appearance.
func encodeConsumerAssignment(partitions []*messages.TopicPartition) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	for _, tp := range partitions {
		i := slices.IndexFunc(a.Topics, func(t kmsg.ConsumerMemberAssignmentTopic) bool { return t.Topic == tp.GetTopic() })
		if i < 0 {
			t := kmsg.NewConsumerMemberAssignmentTopic()
			t.Topic = tp.GetTopic()
			a.Topics = append(a.Topics, t)
			i = len(a.Topics) - 1
		}
		a.Topics[i].Partitions = append(a.Topics[i].Partitions, tp.GetPartition())
	}
	return a.AppendTo(nil)
}

// groupProtocolType is the protocol type a group is shown to Kafka
// clients with: a classic group's own, "consumer" for one of Depot's
// protocol.
func groupProtocolType(protocolType string) string {
	if protocolType == "" {
		return group.ConsumerProtocolType
	}
	return protocolType
}

// topicID is the id of a topic the cache knows, and whether it does.
func (c *conn) topicID(topic string) ([16]byte, bool) {
	tm := c.topics.byName[topic]
	if tm == nil {
		return [16]byte{}, false
	}
	id, err := parseTopicID(tm.GetTopicId())
	return id, err == nil
}
