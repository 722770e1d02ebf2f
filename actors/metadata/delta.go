package metadata

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/google/uuid"

	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/messages"
)

// LegacyDirs resolves the log directory path that records written before
// directory ids hold (PartitionAssignment.log_dir, PartitionDirRecord.log_dir)
// to the directory's id on nodeID, "" when the path is not one of its
// directories. Nil resolves nothing.
type LegacyDirs func(nodeID int32, path string) string

// Delta is the change that replayed records make to an image. Not safe for
// concurrent use.
type Delta struct {
	image *Image
	// clusterID is the cluster's id after the delta.
	clusterID string
	// nodes are the nodes the delta changed: a copy of each, made once.
	nodes map[int32]*Node
	// topics are the topics the delta changed: a copy of each, made once;
	// nil for a topic it deleted.
	topics map[string]*Topic
	// recreated are the topics of the image that a TopicRecord of the
	// delta created again.
	recreated      map[string]bool
	producerIDsEnd int64
	legacy         LegacyDirs
}

// NewDelta returns an empty delta over image. legacy resolves the paths of
// old records to directory ids.
func NewDelta(image *Image, legacy LegacyDirs) *Delta {
	return &Delta{
		image: image, clusterID: image.clusterID, nodes: map[int32]*Node{},
		topics: map[string]*Topic{}, recreated: map[string]bool{},
		producerIDsEnd: image.producerIDsEnd, legacy: legacy,
	}
}

// Replay folds one record into the delta. It is the only place the
// metadata changes. A record it cannot take as written is skipped, or taken
// in part, and reported by an error wrapping ErrRecord; the delta stays
// usable.
func (d *Delta) Replay(rec *messages.MetadataRecord) error {
	switch r := rec.GetRecord().(type) {
	case *messages.MetadataRecord_Topic:
		return d.replayTopic(r.Topic)
	case *messages.MetadataRecord_TopicDeleted:
		d.topics[r.TopicDeleted.GetName()] = nil
	case *messages.MetadataRecord_ProducerIds:
		d.producerIDsEnd = max(d.producerIDsEnd, r.ProducerIds.GetNextProducerId())
	case *messages.MetadataRecord_PartitionDir:
		d.replayDir(r.PartitionDir)
	case *messages.MetadataRecord_Cluster:
		if d.clusterID == "" {
			d.clusterID = r.Cluster.GetClusterId()
		}
	case *messages.MetadataRecord_Node:
		d.replayNode(r.Node)
	case *messages.MetadataRecord_NodeFence:
		if n := d.changedNode(r.NodeFence.GetNodeId()); n != nil {
			n.Fenced = r.NodeFence.GetFenced()
		}
	case *messages.MetadataRecord_PartitionChange:
		d.replayChange(r.PartitionChange)
	case *messages.MetadataRecord_Partition:
		return d.replayPartition(r.Partition.GetAssignment())
	case *messages.MetadataRecord_TopicConfig:
		return d.replayConfig(r.TopicConfig)
	default:
		return fmt.Errorf("%w: unknown record %T skipped", ErrRecord, r)
	}
	return nil
}

func (d *Delta) replayTopic(r *messages.TopicRecord) error {
	t := &Topic{Name: r.GetName(), ID: r.GetTopicId(), Internal: r.GetInternal(), Configs: maps.Clone(r.GetConfigs())}
	if t.ID == "" {
		t.ID = LegacyTopicID(t.Name)
	}
	var err error
	t.Config, err = topic.ParseConfig(r.GetConfigs())
	if err != nil {
		t.Config = topic.DefaultConfig()
		err = fmt.Errorf("%w: stored config of topic %q no longer valid, using defaults: %w", ErrRecord, t.Name, err)
	}
	t.Partitions = make([]Partition, len(r.GetPartitions()))
	for i, a := range r.GetPartitions() {
		p := Partition{
			Partition: a.GetPartition(), Leader: a.GetNodeId(),
			Replicas: slices.Clone(a.GetReplicas()), ISR: slices.Clone(a.GetIsr()),
			LeaderEpoch: a.GetLeaderEpoch(), PartitionEpoch: a.GetPartitionEpoch(),
			Adding: ids(a.GetAddingReplicas()), Removing: ids(a.GetRemovingReplicas()),
		}
		if len(p.Replicas) == 0 {
			// Written before replicas: the one node that holds it.
			p.Replicas = []int32{a.GetNodeId()}
			p.ISR = []int32{a.GetNodeId()}
		}
		p.Dirs = make([]string, len(p.Replicas))
		if dir := d.dirID(a.GetNodeId(), a.GetDirId(), a.GetLogDir()); dir != "" {
			if j := slices.Index(p.Replicas, a.GetNodeId()); j >= 0 {
				p.Dirs[j] = dir
			}
		}
		t.Partitions[i] = p
	}
	if _, ok := d.image.topics[t.Name]; ok {
		d.recreated[t.Name] = true
	}
	d.topics[t.Name] = t
	return err
}

// replayPartition adds a partition to its topic; it must be the topic's
// next.
func (d *Delta) replayPartition(a *messages.PartitionAssignment) error {
	t := d.changed(a.GetTopic())
	switch {
	case t == nil:
		return fmt.Errorf("%w: partition %d of topic %q, which does not exist, skipped", ErrRecord, a.GetPartition(), a.GetTopic())
	case a.GetPartition() != int32(len(t.Partitions)):
		return fmt.Errorf("%w: partition %d of topic %q skipped: the topic has %d", ErrRecord, a.GetPartition(), a.GetTopic(), len(t.Partitions))
	}
	p := Partition{
		Partition: a.GetPartition(), Leader: a.GetNodeId(),
		Replicas: slices.Clone(a.GetReplicas()), ISR: slices.Clone(a.GetIsr()),
		LeaderEpoch: a.GetLeaderEpoch(), PartitionEpoch: a.GetPartitionEpoch(),
	}
	if len(p.Replicas) == 0 {
		p.Replicas, p.ISR = []int32{a.GetNodeId()}, []int32{a.GetNodeId()}
	}
	p.Dirs = make([]string, len(p.Replicas))
	t.Partitions = append(t.Partitions, p)
	return nil
}

// replayConfig replaces the configs set on a topic. Configs that are no
// longer valid leave the topic as it was.
func (d *Delta) replayConfig(r *messages.TopicConfigRecord) error {
	t := d.changed(r.GetName())
	if t == nil {
		return fmt.Errorf("%w: configs of topic %q, which does not exist, skipped", ErrRecord, r.GetName())
	}
	config, err := topic.ParseConfig(r.GetConfigs())
	if err != nil {
		return fmt.Errorf("%w: configs of topic %q no longer valid, skipped: %w", ErrRecord, r.GetName(), err)
	}
	t.Configs, t.Config = maps.Clone(r.GetConfigs()), config
	return nil
}

func (d *Delta) replayNode(r *messages.NodeRecord) {
	d.nodes[r.GetNodeId()] = &Node{
		ID: r.GetNodeId(), Address: r.GetAddress(), Rack: r.GetRack(), KafkaAddress: r.GetKafkaAddress(),
		Incarnation: r.GetIncarnation(), DirIDs: slices.Clone(r.GetDirIds()), Fenced: true,
	}
}

func (d *Delta) replayChange(r *messages.PartitionChangeRecord) {
	t := d.changed(r.GetTopic())
	if t == nil {
		return
	}
	for i := range t.Partitions {
		p := &t.Partitions[i]
		if p.Partition != r.GetPartition() {
			continue
		}
		p.Leader = r.GetLeader()
		p.ISR = slices.Clone(r.GetIsr())
		p.LeaderEpoch = r.GetLeaderEpoch()
		p.PartitionEpoch = r.GetPartitionEpoch()
		if set := r.GetReplicas(); set != nil {
			// A replica kept keeps its directory; one added has none yet.
			dirs := make([]string, len(set.GetReplicas()))
			for j, id := range set.GetReplicas() {
				dirs[j] = p.Dir(id)
			}
			p.Replicas, p.Dirs = slices.Clone(set.GetReplicas()), dirs
			p.Adding, p.Removing = ids(set.GetAddingReplicas()), ids(set.GetRemovingReplicas())
		}
	}
}

// ids is a copy of list, nil when it is empty.
func ids(list []int32) []int32 {
	if len(list) == 0 {
		return nil
	}
	return slices.Clone(list)
}

// changedNode returns the delta's own copy of node id, made on first use,
// or nil when neither the delta nor the image has it.
func (d *Delta) changedNode(id int32) *Node {
	if n, ok := d.nodes[id]; ok {
		return n
	}
	n, ok := d.image.nodes[id]
	if !ok {
		return nil
	}
	c := *n
	d.nodes[id] = &c
	return &c
}

func (d *Delta) replayDir(r *messages.PartitionDirRecord) {
	t := d.changed(r.GetTopic())
	if t == nil {
		return
	}
	for i := range t.Partitions {
		p := &t.Partitions[i]
		if p.Partition != r.GetPartition() {
			continue
		}
		if j := slices.Index(p.Replicas, r.GetNodeId()); j >= 0 {
			p.Dirs[j] = d.dirID(r.GetNodeId(), r.GetDirId(), r.GetLogDir())
		}
	}
}

// dirID is the directory id a record names: its own, or the one its
// legacy path resolves to.
func (d *Delta) dirID(nodeID int32, id, legacyPath string) string {
	if id != "" || legacyPath == "" || d.legacy == nil {
		return id
	}
	return d.legacy(nodeID, legacyPath)
}

// changed returns the delta's own copy of the named topic, made on first
// use, or nil when neither the delta nor the image has it.
func (d *Delta) changed(name string) *Topic {
	if t, ok := d.topics[name]; ok {
		return t
	}
	t, ok := d.image.topics[name]
	if !ok {
		return nil
	}
	c := *t
	c.Partitions = make([]Partition, len(t.Partitions))
	for i, p := range t.Partitions {
		c.Partitions[i] = p.clone()
	}
	d.topics[name] = &c
	return &c
}

// Apply returns the image the delta leads to. The image the delta was made
// over is unchanged.
func (d *Delta) Apply() *Image {
	next := &Image{
		clusterID:      d.clusterID,
		nodes:          maps.Clone(d.image.nodes),
		topics:         make(map[string]*Topic, len(d.image.topics)+len(d.topics)),
		producerIDsEnd: d.producerIDsEnd,
	}
	maps.Copy(next.nodes, d.nodes)
	maps.Copy(next.topics, d.image.topics)
	for name, t := range d.topics {
		if t == nil {
			delete(next.topics, name)
		} else {
			next.topics[name] = t
		}
	}
	return next
}

// LocalChanges is what a delta changes for one node's partitions.
type LocalChanges struct {
	// Created are the topics the delta created, with the partitions the
	// node holds; a topic deleted and created again in one delta is in
	// both lists.
	Created []*Topic
	// Deleted are the topics the delta deleted, with the partitions the
	// node held.
	Deleted []*Topic
	// Added are the replicas of topics neither created nor deleted that
	// the node holds after the delta and did not before, a reassignment
	// having moved them there or their partitions being new: it starts
	// them, each in a directory it chooses. By topic name, then partition.
	Added []*messages.PartitionAssignment
	// Removed are the partitions of topics neither created nor deleted
	// whose replica the node held before the delta and no longer holds: it
	// stops them and deletes their logs. By topic name, then partition.
	Removed []*messages.TopicPartition
	// Updated are the partitions the node holds before and after, of topics
	// neither created nor deleted, whose leader, epochs, replicas, ISR or
	// replicas being added changed, as their replicas act on them.
	Updated []*messages.PartitionState
	// Reconfigured are the topics neither created nor deleted whose
	// effective config changed, with partitions on the node before and
	// after, in name order: their partitions take the new config.
	Reconfigured []*Topic
}

// LocalChanges tells what the delta changes for nodeID: the topics created
// and deleted that have partitions there, each in name order, the
// replicas a reassignment or new partitions add there or a reassignment
// removes, the states of those it keeps that changed, and the topics
// whose config changed.
func (d *Delta) LocalChanges(nodeID int32) LocalChanges {
	var out LocalChanges
	names := slices.Collect(maps.Keys(d.topics))
	sort.Strings(names)
	for _, name := range names {
		before, existed := d.image.topics[name]
		after := d.topics[name]
		replaced := existed && after != nil && d.recreated[name]
		if existed && (after == nil || replaced) && before.holds(nodeID) {
			out.Deleted = append(out.Deleted, before)
		}
		if after != nil && (!existed || replaced) && after.holds(nodeID) {
			out.Created = append(out.Created, after)
		}
		if existed && after != nil && !replaced {
			out.changed(d.after(), before, after, nodeID)
		}
	}
	return out
}

// after is the image the delta leads to, for the addresses of leaders:
// the delta's nodes over the image's.
func (d *Delta) after() *Image {
	return &Image{nodes: mergedNodes(d.image.nodes, d.nodes)}
}

func mergedNodes(base, changed map[int32]*Node) map[int32]*Node {
	if len(changed) == 0 {
		return base
	}
	out := maps.Clone(base)
	maps.Copy(out, changed)
	return out
}

// changed adds what changed for nodeID's replicas from topic before to
// after, the same topic, with im the image after: the replicas added to
// the node, those removed from it, and the states of those it keeps that
// differ.
func (out *LocalChanges) changed(im *Image, before, after *Topic, nodeID int32) {
	if before.Config != after.Config && before.holds(nodeID) && after.holds(nodeID) {
		out.Reconfigured = append(out.Reconfigured, after)
	}
	for i := range after.Partitions {
		p := &after.Partitions[i]
		held := i < len(before.Partitions) && before.Partitions[i].Holds(nodeID)
		switch holds := p.Holds(nodeID); {
		case holds && !held:
			out.Added = append(out.Added, after.assignment(p, nodeID))
		case !holds && held:
			out.Removed = append(out.Removed, &messages.TopicPartition{Topic: after.Name, Partition: p.Partition})
		case holds && !sameState(&before.Partitions[i], p):
			out.Updated = append(out.Updated, im.State(after, p))
		}
	}
}

// holds reports whether nodeID holds a partition of t.
func (t *Topic) holds(nodeID int32) bool {
	return slices.ContainsFunc(t.Partitions, func(p Partition) bool { return p.Holds(nodeID) })
}

// legacyTopicSpace is the UUID namespace of the ids derived for topics
// created before topic ids.
var legacyTopicSpace = uuid.MustParse("5c1d8e8a-2f0b-4d47-9f3e-6a0d2c1b7e44")

// LegacyTopicID is the id of a topic created before topic ids: a name-based
// UUID (version 5), the same on every node that replays its record.
func LegacyTopicID(name string) string { return uuid.NewSHA1(legacyTopicSpace, []byte(name)).String() }

// NewTopicID returns a new random topic id.
func NewTopicID() string { return uuid.NewString() }
