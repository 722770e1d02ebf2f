package group

import (
	"errors"
	"fmt"
	"sort"
	"unicode/utf16"

	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

// The internal topic of committed offsets.
//
// Committed offsets live in the topic __consumer_offsets (OffsetsTopic), an
// ordinary topic of DefaultOffsetsTopicPartitions partitions. A group's
// offsets all go to one partition, OffsetsPartitionFor(group, partitions):
// abs(Java's String.hashCode of the group id) modulo the partition count, as
// Kafka computes it, so that a group lands on the same partition number as it
// would in Kafka.
//
// Record layout (never to change; new fields only as new protobuf fields):
//
//	key   = proto-marshalled messages.OffsetKey{group, topic, partition}
//	value = proto-marshalled messages.OffsetValue{offset, metadata,
//	        commit_timestamp_ms}, or null (length -1): a tombstone, the
//	        offset is no longer committed
//
// Records are written in ordinary Kafka record batches (no compression, no
// producer id), one batch per commit. The latest record with a key wins; an
// earlier one is superseded. The log itself never compacts, so the owner of
// an offsets partition cleans it: once enough bytes are superseded it writes
// the latest value of every live key again (a snapshot) and deletes every
// record before the snapshot's first offset (DeleteRecordsRequest). A crash
// between the two steps leaves both copies, which replay to the same state.

// OffsetsTopic is the internal topic that holds committed offsets.
const OffsetsTopic = "__consumer_offsets"

// DefaultOffsetsTopicPartitions is Kafka's offsets.topic.num.partitions.
const DefaultOffsetsTopicPartitions = 50

// MaxOffsetMetadataBytes is the longest metadata string a commit may carry
// (Kafka's offset.metadata.max.bytes).
const MaxOffsetMetadataBytes = 4096

// ErrBadOffsetRecord is wrapped by DecodeOffsetRecord for a record of
// __consumer_offsets whose key or value does not decode.
var ErrBadOffsetRecord = errors.New("group: bad offsets record")

// JavaStringHashCode is Java's String.hashCode of s: s[0]*31^(n-1) + ... +
// s[n-1] in int32 arithmetic over s's UTF-16 code units (a character outside
// the Basic Multilingual Plane counts as its two surrogates). Invalid UTF-8
// bytes count as U+FFFD, as Java's decoder would read them.
func JavaStringHashCode(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			h = 31*h + hi
			h = 31*h + lo
			continue
		}
		h = 31*h + r
	}
	return h
}

// OffsetsPartitionFor is the partition of __consumer_offsets that holds
// group's offsets, Kafka's Utils.abs(groupId.hashCode) % partitions (where
// abs of math.MinInt32 is 0). partitions must be positive.
func OffsetsPartitionFor(group string, partitions int32) int32 {
	h := JavaStringHashCode(group)
	if h == -h { // 0 or math.MinInt32
		return 0
	}
	if h < 0 {
		h = -h
	}
	return h % partitions
}

// offsetKey identifies one committed offset, or, with members set, a
// group's stored classic generation.
type offsetKey struct {
	group     string
	topic     string
	partition int32
	members   bool
}

// membersKey is the key of group's stored classic generation.
func membersKey(group string) *messages.OffsetKey {
	return &messages.OffsetKey{Group: group, Members: true}
}

// EncodeOffsetRecord appends the key and value of the record for a commit
// of value (nil: a tombstone) to keyDst and valueDst. The value returned is
// nil for a tombstone.
func EncodeOffsetRecord(keyDst, valueDst []byte, key *messages.OffsetKey, value *messages.OffsetValue) (k, v []byte, err error) {
	opts := proto.MarshalOptions{Deterministic: true}
	k, err = opts.MarshalAppend(keyDst, key)
	if err != nil {
		return nil, nil, fmt.Errorf("group: encode offsets key: %w", err)
	}
	if value == nil {
		return k, nil, nil
	}
	v, err = opts.MarshalAppend(valueDst, value)
	if err != nil {
		return nil, nil, fmt.Errorf("group: encode offsets value: %w", err)
	}
	if v == nil {
		v = []byte{} // an all-default value is empty, not null
	}
	return k, v, nil
}

// DecodeOffsetRecord decodes a record of __consumer_offsets. value is nil
// for a tombstone (a null value). A key without a group or topic, with a
// negative partition, or bytes that do not decode give an error wrapping
// ErrBadOffsetRecord.
func DecodeOffsetRecord(key, value []byte) (*messages.OffsetKey, *messages.OffsetValue, error) {
	if key == nil {
		return nil, nil, fmt.Errorf("%w: null key", ErrBadOffsetRecord)
	}
	k := &messages.OffsetKey{}
	if err := proto.Unmarshal(key, k); err != nil {
		return nil, nil, fmt.Errorf("%w: key: %w", ErrBadOffsetRecord, err)
	}
	switch {
	case k.Members && (k.Group == "" || k.Topic != "" || k.Partition != 0):
		return nil, nil, fmt.Errorf("%w: members key %q/%q/%d", ErrBadOffsetRecord, k.Group, k.Topic, k.Partition)
	case !k.Members && (k.Group == "" || k.Topic == "" || k.Partition < 0):
		return nil, nil, fmt.Errorf("%w: key %q/%q/%d", ErrBadOffsetRecord, k.Group, k.Topic, k.Partition)
	}
	if value == nil {
		return k, nil, nil
	}
	v := &messages.OffsetValue{}
	if err := proto.Unmarshal(value, v); err != nil {
		return nil, nil, fmt.Errorf("%w: value: %w", ErrBadOffsetRecord, err)
	}
	switch {
	case k.Members:
		if err := validateStoredGeneration(v); err != nil {
			return nil, nil, fmt.Errorf("%w: members of group %q: %w", ErrBadOffsetRecord, k.Group, err)
		}
	case v.Classic != nil || v.Depot != nil:
		return nil, nil, fmt.Errorf("%w: offset of %q/%q/%d with a generation", ErrBadOffsetRecord, k.Group, k.Topic, k.Partition)
	}
	return k, v, nil
}

// storedOffset is the latest record of one key in an offsets partition.
type storedOffset struct {
	value *messages.OffsetValue // nil: tombstone
	bytes int64                 // size of the record that wrote it
}

// offsetsState is the content of one offsets partition: the latest value
// of every key, and how many bytes of the log earlier records that were
// since superseded (or tombstones) take. It is pure and not safe for
// concurrent use; the coordinator owns it.
type offsetsState struct {
	latest     map[offsetKey]*storedOffset
	superseded int64
}

func newOffsetsState() *offsetsState {
	return &offsetsState{latest: map[offsetKey]*storedOffset{}}
}

// apply records that a record of size bytes wrote value (nil: tombstone)
// for key.
func (s *offsetsState) apply(key *messages.OffsetKey, value *messages.OffsetValue, size int64) {
	k := offsetKey{group: key.Group, topic: key.Topic, partition: key.Partition, members: key.Members}
	if old, ok := s.latest[k]; ok {
		s.superseded += old.bytes
	}
	if value == nil {
		// The tombstone itself is garbage once it is the latest word.
		s.superseded += size
		delete(s.latest, k)
		return
	}
	s.latest[k] = &storedOffset{value: value, bytes: size}
}

// group returns the live offsets of group.
func (s *offsetsState) group(group string) map[offsetKey]*messages.OffsetValue {
	out := map[offsetKey]*messages.OffsetValue{}
	for k, v := range s.latest {
		if k.group == group {
			out[k] = v.value
		}
	}
	return out
}

// groups returns the ids of the groups with live offsets, sorted.
func (s *offsetsState) groups() []string {
	seen := map[string]bool{}
	for k := range s.latest {
		seen[k.group] = true
	}
	out := make([]string, 0, len(seen))
	for g := range seen {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

// snapshot returns the live keys in order (group, its members first, then
// topic and partition) with their values, for the cleaner to write again.
func (s *offsetsState) snapshot() ([]*messages.OffsetKey, []*messages.OffsetValue) {
	keys := make([]offsetKey, 0, len(s.latest))
	for k := range s.latest {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.group != b.group {
			return a.group < b.group
		}
		if a.members != b.members {
			return a.members
		}
		if a.topic != b.topic {
			return a.topic < b.topic
		}
		return a.partition < b.partition
	})
	ks := make([]*messages.OffsetKey, len(keys))
	vs := make([]*messages.OffsetValue, len(keys))
	for i, k := range keys {
		ks[i] = &messages.OffsetKey{Group: k.group, Topic: k.topic, Partition: k.partition, Members: k.members}
		vs[i] = s.latest[k].value
	}
	return ks, vs
}

// offsetRecordSize is the bytes a record of key and value takes in a batch,
// the measure of superseded bytes.
func offsetRecordSize(key, value []byte) int64 {
	return int64(wire.RecordSize(0, 0, key, value, nil))
}

// decodeOffsetBatches applies every record of the whole batches at the
// start of data to s and returns the offset after the last whole batch (or
// from when none is whole). A record that does not decode is skipped and
// counted in bad, so one damaged record does not hide the others.
func decodeOffsetBatches(s *offsetsState, data []byte, from int64) (next int64, bad int, err error) {
	next = from
	_, err = wire.Batches(data, func(batch []byte, h wire.Header) error {
		err := wire.Records(batch, func(r wire.Record) error {
			key, value, err := DecodeOffsetRecord(r.Key, r.Value)
			if err != nil {
				bad++
				return nil
			}
			s.apply(key, value, offsetRecordSize(r.Key, r.Value))
			return nil
		})
		if err != nil {
			return err
		}
		next = h.NextOffset()
		return nil
	})
	return next, bad, err
}

// buildOffsetBatch encodes one batch holding a record per key (values[i]
// nil: a tombstone) and returns it with the size of each record.
func buildOffsetBatch(b *wire.Builder, now int64, keys []*messages.OffsetKey, values []*messages.OffsetValue) ([]byte, []int64, error) {
	b.Reset(wire.NoProducer)
	sizes := make([]int64, len(keys))
	for i, key := range keys {
		k, v, err := EncodeOffsetRecord(nil, nil, key, values[i])
		if err != nil {
			return nil, nil, err
		}
		b.Append(now, k, v, nil)
		sizes[i] = offsetRecordSize(k, v)
	}
	batch, err := b.AppendTo(nil)
	if err != nil {
		return nil, nil, fmt.Errorf("group: build offsets batch: %w", err)
	}
	return batch, sizes, nil
}
