package metadata

import (
	"encoding/base64"

	"github.com/google/uuid"

	"maps"
	"slices"

	"github.com/depot-dev/depot/messages"
)

// Node is one registered node of the cluster.
type Node struct {
	ID           int32
	Address      string
	Rack         string
	KafkaAddress string
	// Incarnation is new on every start of the node's process.
	Incarnation uint64
	DirIDs      []string
	// Fenced is set from registration until the node is unfenced, and
	// again when its session lapses or it shuts down: a fenced node leads
	// no partition.
	Fenced bool
}

// ClusterID is the cluster's id, "" until the quorum names it.
func (im *Image) ClusterID() string { return im.clusterID }

// Node returns the registered node id.
func (im *Image) Node(id int32) (*Node, bool) {
	n, ok := im.nodes[id]
	return n, ok
}

// Nodes returns every registered node, by id.
func (im *Image) Nodes() []*Node {
	ids := slices.Sorted(maps.Keys(im.nodes))
	out := make([]*Node, len(ids))
	for i, id := range ids {
		out[i] = im.nodes[id]
	}
	return out
}

// Address is the actor address of node id, "" when it is not registered.
func (im *Image) Address(id int32) string {
	if n, ok := im.nodes[id]; ok {
		return n.Address
	}
	return ""
}

// Live returns the ids of the registered nodes that are not fenced, sorted.
func (im *Image) Live() []int32 {
	var out []int32
	for id, n := range im.nodes {
		if !n.Fenced {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// NameCluster returns the record that names the cluster.
func NameCluster(id string) *messages.MetadataRecord {
	return &messages.MetadataRecord{Record: &messages.MetadataRecord_Cluster{Cluster: &messages.ClusterRecord{ClusterId: id}}}
}

// Register returns the records that register the node m describes, as
// RegisterNode's, after, for a new incarnation of a node the image holds
// unfenced, the records that fence it (Fence's): the old process is gone,
// and its leaderships and ISR places go with it, as Kafka's controller
// fences a broker that registers with a new epoch. Registered alone, the
// node would be fenced with them kept, and a partition it led would wait
// for a leader that no election replaces.
func (im *Image) Register(m *messages.RegisterNodeRequest) []*messages.MetadataRecord {
	var out []*messages.MetadataRecord
	if n, ok := im.nodes[m.GetNodeId()]; ok && n.Incarnation != m.GetIncarnation() {
		out = im.Fence(m.GetNodeId())
	}
	return append(out, RegisterNode(m))
}

// RegisterNode returns the record that registers the node m describes. The
// node is fenced until Unfence.
func RegisterNode(m *messages.RegisterNodeRequest) *messages.MetadataRecord {
	return &messages.MetadataRecord{Record: &messages.MetadataRecord_Node{Node: &messages.NodeRecord{
		NodeId: m.GetNodeId(), Address: m.GetAddress(), Rack: m.GetRack(), Incarnation: m.GetIncarnation(),
		KafkaAddress: m.GetKafkaAddress(), DirIds: slices.Clone(m.GetDirIds()),
	}}}
}

// Fence returns the records that fence node id: the node's record, and a
// change of every partition whose ISR has it: it leaves the ISR, and a
// partition it leads gets another live replica of its ISR for leader, or,
// where there is none, a live replica outside it when the topic allows an
// unclean election, or NoLeader. The node stays in the ISR of a
// partition it was the last member of, so that it can lead again without
// losing what it acknowledged. Nil when the node is unknown or fenced.
func (im *Image) Fence(id int32) []*messages.MetadataRecord {
	n, ok := im.nodes[id]
	if !ok || n.Fenced {
		return nil
	}
	out := []*messages.MetadataRecord{fenceRecord(id, true)}
	im.eachPartition(func(t *Topic, p *Partition) {
		if !slices.Contains(p.ISR, id) {
			return
		}
		isr := p.ISR
		if len(isr) > 1 {
			isr = slices.DeleteFunc(slices.Clone(isr), func(r int32) bool { return r == id })
		}
		leader := p.Leader
		if leader == id {
			leader = im.electLeader(isr, id)
			if leader == NoLeader {
				if unclean := im.uncleanLeader(t, p, id); unclean != NoLeader {
					leader, isr = unclean, []int32{unclean}
				}
			}
		}
		if leader != p.Leader || len(isr) != len(p.ISR) {
			out = append(out, changeRecord(t.Name, p, leader, isr))
		}
	})
	return out
}

// Unfence returns the records that unfence node id, and elect it leader of
// the partitions that have none and have it in their ISR, or, where the
// topic allows an unclean election, hold a replica of it. Nil when the node
// is unknown or not fenced.
func (im *Image) Unfence(id int32) []*messages.MetadataRecord {
	n, ok := im.nodes[id]
	if !ok || !n.Fenced {
		return nil
	}
	out := []*messages.MetadataRecord{fenceRecord(id, false)}
	im.eachPartition(func(t *Topic, p *Partition) {
		switch {
		case p.Leader != NoLeader:
		case slices.Contains(p.ISR, id):
			out = append(out, changeRecord(t.Name, p, id, p.ISR))
		case p.Holds(id) && t.Config.UncleanLeaderElection:
			// No member of the ISR is back: an unclean election, which the
			// topic allows, makes this replica the ISR.
			out = append(out, changeRecord(t.Name, p, id, []int32{id}))
		}
	})
	return out
}

// electLeader picks the first member of isr, other than except, that is
// registered and not fenced, or NoLeader.
func (im *Image) electLeader(isr []int32, except int32) int32 {
	for _, r := range isr {
		if n, ok := im.nodes[r]; ok && r != except && !n.Fenced {
			return r
		}
	}
	return NoLeader
}

// eachPartition calls fn for every partition, by topic name and partition.
func (im *Image) eachPartition(fn func(t *Topic, p *Partition)) {
	for _, name := range im.TopicNames() {
		t := im.topics[name]
		for i := range t.Partitions {
			fn(t, &t.Partitions[i])
		}
	}
}

func fenceRecord(id int32, fenced bool) *messages.MetadataRecord {
	return &messages.MetadataRecord{Record: &messages.MetadataRecord_NodeFence{NodeFence: &messages.NodeFenceRecord{NodeId: id, Fenced: fenced}}}
}

// changeRecord is the record that gives p leader and isr, with the epochs
// that go with the change.
func changeRecord(topicName string, p *Partition, leader int32, isr []int32) *messages.MetadataRecord {
	s := stateOf(p)
	s.leader, s.isr = leader, isr
	return s.record(topicName, p)
}

// Records returns the records that rebuild the image from an empty one: the
// data of a snapshot.
func (im *Image) Records() []*messages.MetadataRecord {
	var out []*messages.MetadataRecord
	if im.clusterID != "" {
		out = append(out, NameCluster(im.clusterID))
	}
	for _, n := range im.Nodes() {
		out = append(out, &messages.MetadataRecord{Record: &messages.MetadataRecord_Node{Node: &messages.NodeRecord{
			NodeId: n.ID, Address: n.Address, Rack: n.Rack, Incarnation: n.Incarnation,
			KafkaAddress: n.KafkaAddress, DirIds: slices.Clone(n.DirIDs),
		}}})
		if !n.Fenced {
			out = append(out, fenceRecord(n.ID, false))
		}
	}
	for _, name := range im.TopicNames() {
		t := im.topics[name]
		record := &messages.TopicRecord{Name: t.Name, TopicId: t.ID, Configs: maps.Clone(t.Configs), Internal: t.Internal}
		var dirs []*messages.MetadataRecord
		for _, p := range t.Partitions {
			record.Partitions = append(record.Partitions, &messages.PartitionAssignment{
				Topic: t.Name, Partition: p.Partition, NodeId: p.Leader,
				Replicas: slices.Clone(p.Replicas), Isr: slices.Clone(p.ISR),
				LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
				AddingReplicas: slices.Clone(p.Adding), RemovingReplicas: slices.Clone(p.Removing),
			})
			for i, r := range p.Replicas {
				if p.Dirs[i] != "" {
					dirs = append(dirs, &messages.MetadataRecord{Record: &messages.MetadataRecord_PartitionDir{PartitionDir: &messages.PartitionDirRecord{
						Topic: t.Name, Partition: p.Partition, NodeId: r, DirId: p.Dirs[i],
					}}})
				}
			}
		}
		out = append(out, &messages.MetadataRecord{Record: &messages.MetadataRecord_Topic{Topic: record}})
		out = append(out, dirs...)
	}
	if im.producerIDsEnd > 0 {
		out = append(out, &messages.MetadataRecord{Record: &messages.MetadataRecord_ProducerIds{ProducerIds: &messages.ProducerIdBlockRecord{NextProducerId: im.producerIDsEnd}}})
	}
	return out
}

// NewClusterID returns a new cluster id, as Kafka's: a random UUID in
// URL-safe base64 without padding.
func NewClusterID() string {
	id := uuid.New()
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// Diff is what changes for nodeID's partitions from one image to another,
// as LocalChanges tells it of a delta: the topics, known by id, that only
// one of them has with a partition there, and of the others the replicas
// added, removed and changed.
func Diff(before, after *Image, nodeID int32) LocalChanges {
	var out LocalChanges
	for _, name := range before.TopicNames() {
		t := before.topics[name]
		if a, ok := after.topics[name]; (!ok || a.ID != t.ID) && t.holds(nodeID) {
			out.Deleted = append(out.Deleted, t)
		}
	}
	for _, name := range after.TopicNames() {
		t := after.topics[name]
		b, ok := before.topics[name]
		if (!ok || b.ID != t.ID) && t.holds(nodeID) {
			out.Created = append(out.Created, t)
		}
		if ok && b.ID == t.ID {
			out.changed(after, b, t, nodeID)
		}
	}
	return out
}
