package metadata

import (
	"fmt"
	"maps"
	"slices"
	"sort"

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
	return &Delta{image: image, topics: map[string]*Topic{}, recreated: map[string]bool{}, producerIDsEnd: image.producerIDsEnd, legacy: legacy}
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
	default:
		return fmt.Errorf("%w: unknown record %T skipped", ErrRecord, r)
	}
	return nil
}

func (d *Delta) replayTopic(r *messages.TopicRecord) error {
	t := &Topic{Name: r.GetName(), Internal: r.GetInternal(), Configs: maps.Clone(r.GetConfigs())}
	var err error
	t.Config, err = topic.ParseConfig(r.GetConfigs())
	if err != nil {
		t.Config = topic.DefaultConfig()
		err = fmt.Errorf("%w: stored config of topic %q no longer valid, using defaults: %w", ErrRecord, t.Name, err)
	}
	t.Partitions = make([]Partition, len(r.GetPartitions()))
	for i, p := range r.GetPartitions() {
		t.Partitions[i] = Partition{Partition: p.GetPartition(), NodeID: p.GetNodeId(), DirID: d.dirID(p.GetNodeId(), p.GetDirId(), p.GetLogDir())}
	}
	if _, ok := d.image.topics[t.Name]; ok {
		d.recreated[t.Name] = true
	}
	d.topics[t.Name] = t
	return err
}

func (d *Delta) replayDir(r *messages.PartitionDirRecord) {
	t := d.changed(r.GetTopic())
	if t == nil {
		return
	}
	for i := range t.Partitions {
		p := &t.Partitions[i]
		if p.Partition == r.GetPartition() && p.NodeID == r.GetNodeId() {
			p.DirID = d.dirID(r.GetNodeId(), r.GetDirId(), r.GetLogDir())
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
	c.Partitions = slices.Clone(t.Partitions)
	d.topics[name] = &c
	return &c
}

// Apply returns the image the delta leads to. The image the delta was made
// over is unchanged.
func (d *Delta) Apply() *Image {
	next := &Image{topics: make(map[string]*Topic, len(d.image.topics)+len(d.topics)), producerIDsEnd: d.producerIDsEnd}
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
}

// LocalChanges tells what the delta changes for nodeID: the topics created
// and deleted that have partitions there, each in name order.
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
	}
	return out
}

// holds reports whether nodeID holds a partition of t.
func (t *Topic) holds(nodeID int32) bool {
	return slices.ContainsFunc(t.Partitions, func(p Partition) bool { return p.NodeID == nodeID })
}
