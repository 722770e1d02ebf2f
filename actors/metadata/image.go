// Package metadata is the metadata image of a Depot cluster and the changes
// to it, as pure functions, in the model of Kafka's MetadataImage and
// MetadataDelta. Records replay into a Delta; Apply turns the delta into the
// next Image, which shares what did not change with the one before; and a
// delta tells what it changes for one node (LocalChanges). An Image is a
// value: nothing changes it once Apply has returned it, so it may be read
// from anywhere. A Delta is not safe for concurrent use.
//
// Records are generated from an Image without touching it (CreateTopic,
// DeleteTopic, AddPartitions, AlterConfigs, AssignDirs,
// ReserveProducerIDs), persisted, and only then replayed, as Kafka's
// QuorumController does.
//
// It imports no actor runtime.
package metadata

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/messages"
)

// Limits of the metadata.
const (
	// MaxPartitionsPerTopic is the largest partition count a topic may be
	// created with.
	MaxPartitionsPerTopic = 10000
	// ProducerIDBlockSize is how many producer ids one ProducerIdBlockRecord
	// reserves: the metadata log is written once per block, not per id.
	ProducerIDBlockSize = 1000
	// MaxReplicationFactor is the largest replication factor a topic may
	// be created with, as Kafka's (a short); the live nodes bound it first.
	MaxReplicationFactor = 32767
)

// ErrRecord is wrapped by what Replay reports of a record it skipped or
// took in part: an unknown record type, or a stored topic config that is
// no longer valid (the topic keeps the defaults).
var ErrRecord = errors.New("metadata: record not replayed as written")

// NoLeader is the leader of a partition whose replicas are all fenced
// (Kafka's -1).
const NoLeader int32 = -1

// Partition is one partition of a topic: its replicas, which of them are in
// sync, which leads, and the log directory of each.
type Partition struct {
	Partition int32
	// Replicas are the nodes holding the partition, the preferred leader
	// first.
	Replicas []int32
	// ISR are the replicas in sync with the leader.
	ISR []int32
	// Leader is the replica that leads, NoLeader when none can.
	Leader int32
	// LeaderEpoch goes up with every change of leader; PartitionEpoch with
	// every change of the partition (leader or ISR).
	LeaderEpoch    int32
	PartitionEpoch int32
	// Dirs are the ids of the log directories (KIP-858) of Replicas, in
	// their order, "" while a node has not chosen one.
	Dirs []string
	// Adding and Removing are, while a reassignment moves the partition
	// (KIP-455), the replicas of its target the partition did not have
	// and those it had that the target leaves out: Replicas are then the
	// target followed by Removing. Both are nil when no move is in flight.
	Adding   []int32
	Removing []int32
}

// Reassigning reports whether a reassignment of the partition is in
// flight.
func (p *Partition) Reassigning() bool { return len(p.Adding) > 0 || len(p.Removing) > 0 }

// Target is the replicas the partition has once its move in flight
// completes: Replicas without Removing. Without a move, its Replicas.
func (p *Partition) Target() []int32 { return without(p.Replicas, p.Removing) }

// Dir returns the id of nodeID's log directory for the partition, "" when
// it holds no replica or has not chosen one.
func (p *Partition) Dir(nodeID int32) string {
	if i := slices.Index(p.Replicas, nodeID); i >= 0 {
		return p.Dirs[i]
	}
	return ""
}

// Holds reports whether nodeID holds a replica of the partition.
func (p *Partition) Holds(nodeID int32) bool { return slices.Contains(p.Replicas, nodeID) }

// clone returns a copy of p that shares no slice with it.
func (p Partition) clone() Partition {
	p.Replicas = slices.Clone(p.Replicas)
	p.ISR = slices.Clone(p.ISR)
	p.Dirs = slices.Clone(p.Dirs)
	p.Adding = slices.Clone(p.Adding)
	p.Removing = slices.Clone(p.Removing)
	return p
}

// Topic is one topic of the image.
type Topic struct {
	Name string
	// ID is the topic's id, a UUID in its text form.
	ID       string
	Internal bool
	// Configs are the configs the topic was created with, as given.
	Configs map[string]string
	// Config is the effective configuration.
	Config     topic.Config
	Partitions []Partition
}

// Image is the metadata at one point of the metadata log.
type Image struct {
	clusterID string
	nodes     map[int32]*Node
	topics    map[string]*Topic
	// producerIDsEnd is the end of the last producer id block reserved:
	// ids below it may have been handed out.
	producerIDsEnd int64
}

// Empty is the image of an empty log.
func Empty() *Image { return &Image{nodes: map[int32]*Node{}, topics: map[string]*Topic{}} }

// Topic returns the named topic.
func (im *Image) Topic(name string) (*Topic, bool) {
	t, ok := im.topics[name]
	return t, ok
}

// TopicNames returns the names of every topic, sorted.
func (im *Image) TopicNames() []string {
	names := slices.Collect(maps.Keys(im.topics))
	sort.Strings(names)
	return names
}

// ProducerIDsEnd is the end of the last producer id block reserved.
func (im *Image) ProducerIDsEnd() int64 { return im.producerIDsEnd }

// ValidateCreate checks m against the image and returns the topic's parsed
// config, or the error code and message to answer with.
func (im *Image) ValidateCreate(m *messages.CreateTopicRequest) (topic.Config, messages.ErrorCode, string) {
	name := m.GetName()
	if err := topic.ValidateName(name); err != nil {
		return topic.Config{}, messages.ErrorCode_INVALID_TOPIC, messages.ErrorText(err)
	}
	if _, ok := im.topics[name]; ok {
		return topic.Config{}, messages.ErrorCode_TOPIC_ALREADY_EXISTS, fmt.Sprintf("topic %q already exists", name)
	}
	for other := range im.topics {
		if topic.NamesCollide(name, other) {
			return topic.Config{}, messages.ErrorCode_INVALID_TOPIC,
				fmt.Sprintf("topic %q collides with existing topic %q ('.' and '_' are treated alike)", name, other)
		}
	}
	assignments := m.GetAssignments()
	if len(assignments) > 0 && (m.GetPartitions() != 0 || m.GetReplicationFactor() != 0) {
		return topic.Config{}, messages.ErrorCode_INVALID_REQUEST,
			fmt.Sprintf("topic %q: give either a partition count and replication factor or the replicas of each partition, not both", name)
	}
	if p := PartitionCount(m); p < 1 || p > MaxPartitionsPerTopic {
		return topic.Config{}, messages.ErrorCode_INVALID_PARTITIONS,
			fmt.Sprintf("topic %q cannot have %d partitions: a topic has 1 to %d", name, p, MaxPartitionsPerTopic)
	}
	config, err := topic.ParseConfig(m.GetConfigs())
	if err != nil {
		return topic.Config{}, messages.ErrorCode_INVALID_CONFIG, fmt.Sprintf("invalid config for topic %q: %s", name, configReason(err))
	}
	for i, a := range assignments {
		if code, msg := im.checkAssignment(name, int32(i), a.GetReplicas(), len(assignments[0].GetReplicas())); code != messages.ErrorCode_NONE {
			return topic.Config{}, code, msg
		}
	}
	switch rf := m.GetReplicationFactor(); {
	case rf > MaxReplicationFactor:
		return topic.Config{}, messages.ErrorCode_INVALID_REPLICATION_FACTOR,
			fmt.Sprintf("topic %q cannot have replication factor %d: it is at most %d", name, rf, MaxReplicationFactor)
	case rf < -MaxReplicationFactor:
		return topic.Config{}, messages.ErrorCode_INVALID_REPLICATION_FACTOR,
			fmt.Sprintf("topic %q cannot have replication factor up to %d: it is at most %d", name, -int64(rf), MaxReplicationFactor)
	}
	return config, messages.ErrorCode_NONE, ""
}

// PartitionCount is the number of partitions m creates: one for each
// assignment when it names replicas, otherwise the count it asks for.
func PartitionCount(m *messages.CreateTopicRequest) int32 {
	if a := m.GetAssignments(); len(a) > 0 {
		return int32(len(a))
	}
	return m.GetPartitions()
}

// Replicas are the replicas assignments name, one list for each
// partition in order; nil for none.
func Replicas(assignments []*messages.ReplicaAssignment) [][]int32 {
	if len(assignments) == 0 {
		return nil
	}
	out := make([][]int32, len(assignments))
	for i, a := range assignments {
		out[i] = slices.Clone(a.GetReplicas())
	}
	return out
}

// checkAssignment reports what makes replicas unfit as the replicas of
// partition p of the topic name (Kafka's manual assignment): none, a
// count other than replicationFactor, a node named twice, or a node not
// registered or fenced.
func (im *Image) checkAssignment(name string, p int32, replicas []int32, replicationFactor int) (messages.ErrorCode, string) {
	if len(replicas) == 0 {
		return messages.ErrorCode_INVALID_REPLICA_ASSIGNMENT, fmt.Sprintf("partition %d of topic %q is given no replicas", p, name)
	}
	if len(replicas) != replicationFactor {
		return messages.ErrorCode_INVALID_REPLICA_ASSIGNMENT,
			fmt.Sprintf("partition %d of topic %q is given %d replicas where its other partitions have %d: every partition has as many", p, name, len(replicas), replicationFactor)
	}
	for i, id := range replicas {
		if slices.Contains(replicas[:i], id) {
			return messages.ErrorCode_INVALID_REPLICA_ASSIGNMENT, fmt.Sprintf("partition %d of topic %q names node %d twice", p, name, id)
		}
		n, ok := im.nodes[id]
		switch {
		case !ok:
			return messages.ErrorCode_INVALID_REPLICA_ASSIGNMENT, fmt.Sprintf("partition %d of topic %q names node %d, which is not registered", p, name, id)
		case n.Fenced:
			return messages.ErrorCode_INVALID_REPLICA_ASSIGNMENT, fmt.Sprintf("partition %d of topic %q names node %d, which is fenced", p, name, id)
		}
	}
	return messages.ErrorCode_NONE, ""
}

// configReason is what is wrong in err, a topic.ParseConfig error, without
// the sentinel it wraps, which the message names already.
func configReason(err error) string {
	return messages.CleanErrorText(strings.TrimPrefix(err.Error(), topic.ErrInvalidConfig.Error()+": "))
}

// ReplicationFactor is the replication factor m asks for with the image's
// live nodes: the default (1) for none, and for a negative factor -n as many
// as there are live nodes, up to n, and at least 1 (so that a create with no
// live node fails as any other would, for want of nodes).
func (im *Image) ReplicationFactor(m *messages.CreateTopicRequest) int32 {
	return replicationFactor(m.GetReplicationFactor(), len(im.Live()))
}

// replicationFactor is ReplicationFactor of a request asking for asked
// with live nodes unfenced.
func replicationFactor(asked int32, live int) int32 {
	switch {
	case asked == 0:
		return 1
	case asked < 0:
		return int32(max(1, min(-int64(asked), int64(live))))
	}
	return asked
}

// HasReplicationFactor reports whether a topic whose partitions have
// replicas replicas each is what m asks for: the factor asked, or, for a
// negative factor -n, any from 1 to n, since the live nodes it was decided
// by may have changed since.
func HasReplicationFactor(m *messages.CreateTopicRequest, replicas int) bool {
	switch asked := int64(m.GetReplicationFactor()); {
	case asked < 0:
		return replicas >= 1 && int64(replicas) <= -asked
	case asked == 0:
		return replicas == 1
	default:
		return int64(replicas) == asked
	}
}

// CreateTopic returns the record that creates the topic m asks for, with
// id, partition i on the nodes replicas[i] (the first leads), every replica
// in sync and no log directory chosen yet. m must have passed
// ValidateCreate.
func CreateTopic(m *messages.CreateTopicRequest, id string, replicas [][]int32) *messages.MetadataRecord {
	name := m.GetName()
	record := &messages.TopicRecord{
		Name:     name,
		TopicId:  id,
		Configs:  maps.Clone(m.GetConfigs()),
		Internal: topic.IsInternal(name),
	}
	for i, nodes := range replicas {
		record.Partitions = append(record.Partitions, &messages.PartitionAssignment{
			Topic: name, Partition: int32(i), NodeId: nodes[0],
			Replicas: slices.Clone(nodes), Isr: slices.Clone(nodes),
		})
	}
	return &messages.MetadataRecord{Record: &messages.MetadataRecord_Topic{Topic: record}}
}

// DeleteTopic returns the record that deletes the named topic.
func DeleteTopic(name string) *messages.MetadataRecord {
	return &messages.MetadataRecord{Record: &messages.MetadataRecord_TopicDeleted{TopicDeleted: &messages.TopicDeletedRecord{Name: name}}}
}

// ReserveProducerIDs returns the record that reserves the next block of
// producer ids, from the end of the last one or from next, whichever is
// later.
func (im *Image) ReserveProducerIDs(next int64) *messages.MetadataRecord {
	return &messages.MetadataRecord{Record: &messages.MetadataRecord_ProducerIds{
		ProducerIds: &messages.ProducerIdBlockRecord{NextProducerId: max(next, im.producerIDsEnd) + ProducerIDBlockSize},
	}}
}

// AssignDirs returns the records that put each of assignments in the log
// directory it names by id, leaving out those that name a topic or
// partition the image does not have, a node that does not hold it, no
// directory, or the directory it is already in.
func (im *Image) AssignDirs(assignments []*messages.PartitionAssignment) []*messages.MetadataRecord {
	var out []*messages.MetadataRecord
	for _, a := range assignments {
		t, ok := im.topics[a.GetTopic()]
		if !ok || a.GetDirId() == "" {
			continue
		}
		i := slices.IndexFunc(t.Partitions, func(p Partition) bool {
			return p.Partition == a.GetPartition() && p.Holds(a.GetNodeId())
		})
		if i < 0 || t.Partitions[i].Dir(a.GetNodeId()) == a.GetDirId() {
			continue
		}
		out = append(out, &messages.MetadataRecord{Record: &messages.MetadataRecord_PartitionDir{PartitionDir: &messages.PartitionDirRecord{
			Topic: a.GetTopic(), Partition: a.GetPartition(), NodeId: a.GetNodeId(), DirId: a.GetDirId(),
		}}})
	}
	return out
}

// View is what describing the image needs to know of the nodes beyond
// what the image holds.
type View struct {
	// DirPath is the path of a node's log directory by id, "" when
	// unknown.
	DirPath func(nodeID int32, dirID string) string
}

// Describe answers a metadata request for names: every topic sorted by name
// when names is empty, or the named ones in the order asked, an unknown or
// invalid name with its error.
func (im *Image) Describe(names []string, view View) []*messages.TopicMetadata {
	if len(names) == 0 {
		names = im.TopicNames()
	}
	out := make([]*messages.TopicMetadata, 0, len(names))
	for _, name := range names {
		if t, ok := im.topics[name]; ok {
			out = append(out, im.DescribeTopic(t, view))
			continue
		}
		if err := topic.ValidateName(name); err != nil {
			out = append(out, &messages.TopicMetadata{Name: name, Error: messages.ErrorCode_INVALID_TOPIC, ErrorMessage: messages.ErrorText(err)})
			continue
		}
		out = append(out, &messages.TopicMetadata{
			Name: name, Error: messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION,
			ErrorMessage: fmt.Sprintf("topic %q does not exist", name),
			Internal:     topic.IsInternal(name),
		})
	}
	return out
}

// DescribeTopic is t's metadata: its partitions with their replicas and
// their leader's actor, and its effective configs.
func (im *Image) DescribeTopic(t *Topic, view View) *messages.TopicMetadata {
	md := &messages.TopicMetadata{Name: t.Name, TopicId: t.ID, Configs: t.Config.Map(), ConfigsSet: maps.Clone(t.Configs), Internal: t.Internal}
	md.Partitions = make([]*messages.PartitionMetadata, len(t.Partitions))
	for i, p := range t.Partitions {
		pm := &messages.PartitionMetadata{
			Partition:        p.Partition,
			Leader:           p.Leader,
			ActorName:        actorName(t.Name, p.Partition),
			Replicas:         slices.Clone(p.Replicas),
			Isr:              slices.Clone(p.ISR),
			LeaderEpoch:      p.LeaderEpoch,
			PartitionEpoch:   p.PartitionEpoch,
			AddingReplicas:   slices.Clone(p.Adding),
			RemovingReplicas: slices.Clone(p.Removing),
		}
		for j, r := range p.Replicas {
			pm.ReplicaDirs = append(pm.ReplicaDirs, &messages.ReplicaDir{Node: r, DirId: p.Dirs[j], LogDir: view.DirPath(r, p.Dirs[j]), LogEndOffset: -1})
		}
		if p.Leader == NoLeader {
			pm.Error = messages.ErrorCode_LEADER_NOT_AVAILABLE
		} else {
			pm.LeaderAddress = im.Address(p.Leader)
			pm.DirId = p.Dir(p.Leader)
			pm.LogDir = view.DirPath(p.Leader, pm.DirId)
		}
		md.Partitions[i] = pm
	}
	return md
}

// Assignments are the replicas of the topic's partitions that nodeID
// holds, as its partition manager is asked to start them, each with the
// partition's leader, replicas, ISR and epochs.
func (t *Topic) Assignments(nodeID int32) []*messages.PartitionAssignment {
	var out []*messages.PartitionAssignment
	for i := range t.Partitions {
		if p := &t.Partitions[i]; p.Holds(nodeID) {
			out = append(out, t.assignment(p, nodeID))
		}
	}
	return out
}

// assignment is nodeID's replica of p, as its partition manager is asked
// to start it.
func (t *Topic) assignment(p *Partition, nodeID int32) *messages.PartitionAssignment {
	return &messages.PartitionAssignment{
		Topic: t.Name, Partition: p.Partition, NodeId: nodeID, DirId: p.Dir(nodeID),
		Leader: p.Leader, Replicas: slices.Clone(p.Replicas), Isr: slices.Clone(p.ISR),
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
		AddingReplicas: slices.Clone(p.Adding), RemovingReplicas: slices.Clone(p.Removing),
	}
}

// State is the state of partition p of t for its replicas' nodes.
func (im *Image) State(t *Topic, p *Partition) *messages.PartitionState {
	s := &messages.PartitionState{
		Topic: t.Name, Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
		PartitionEpoch: p.PartitionEpoch, Replicas: slices.Clone(p.Replicas), Isr: slices.Clone(p.ISR),
		AddingReplicas: slices.Clone(p.Adding),
	}
	if p.Leader != NoLeader {
		s.LeaderAddress = im.Address(p.Leader)
	}
	return s
}

// sameState reports whether a and b give a replica the same leader,
// epochs, replicas, ISR and replicas being added.
func sameState(a, b *Partition) bool {
	return a.Leader == b.Leader && a.LeaderEpoch == b.LeaderEpoch && a.PartitionEpoch == b.PartitionEpoch &&
		slices.Equal(a.Replicas, b.Replicas) && slices.Equal(a.ISR, b.ISR) && slices.Equal(a.Adding, b.Adding)
}

// actorName is actors.PartitionActorName, which this package does not
// import: "partitions/<topic>-<partition>".
func actorName(topicName string, partition int32) string {
	return fmt.Sprintf("partitions/%s-%d", topicName, partition)
}
