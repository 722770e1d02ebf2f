package kafka

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/depot-dev/depot/messages"
)

// topicCache is what a connection last heard of every topic from the
// metadata actor, for the requests that name topics by id (Fetch v13+,
// Produce v13) and the leader epochs ListOffsets gives. Metadata requests
// themselves always ask afresh.
type topicCache struct {
	at     time.Time
	byID   map[[16]byte]*messages.TopicMetadata
	byName map[string]*messages.TopicMetadata
}

// topicsMaxAge is how old the cache may be for a topic id it knows; an id
// it does not know asks afresh.
const topicsMaxAge = 5 * time.Second

// fresh reports whether the cache was filled less than maxAge ago.
func (t *topicCache) fresh(maxAge time.Duration) bool {
	return t.byName != nil && time.Since(t.at) < maxAge
}

// fill replaces the cache with md's topics.
func (t *topicCache) fill(md *messages.MetadataResponse) {
	t.at = time.Now()
	t.byID = make(map[[16]byte]*messages.TopicMetadata, len(md.GetTopics()))
	t.byName = make(map[string]*messages.TopicMetadata, len(md.GetTopics()))
	for _, tm := range md.GetTopics() {
		if tm.GetError() != messages.ErrorCode_NONE {
			continue
		}
		t.byName[tm.GetName()] = tm
		if id, err := parseTopicID(tm.GetTopicId()); err == nil {
			t.byID[id] = tm
		}
	}
}

// withTopics calls then once the cache is at most maxAge old, asking the
// metadata actor for every topic when it is older; err is that request's.
func (c *conn) withTopics(ctx actor.Context, maxAge time.Duration, then func(err error)) {
	if c.topics.fresh(maxAge) {
		then(nil)
		return
	}
	c.ask(ctx, c.l.cfg.Metadata, &messages.MetadataRequest{}, c.l.cfg.RequestTimeout, func(res any, err error) {
		if err == nil {
			md, ok := res.(*messages.MetadataResponse)
			if !ok {
				err = fmt.Errorf("kafka: metadata answered %T", res)
			} else {
				c.topics.fill(md)
			}
		}
		then(err)
	})
}

// withTopicIDs calls then once the cache knows every id of ids, or has
// been filled afresh to find those it did not.
func (c *conn) withTopicIDs(ctx actor.Context, ids [][16]byte, then func(err error)) {
	maxAge := topicsMaxAge
	for _, id := range ids {
		if _, ok := c.topics.byID[id]; !ok {
			maxAge = 0
			break
		}
	}
	c.withTopics(ctx, maxAge, then)
}

// parseTopicID reads a topic id in its text form, a UUID
// (8-4-4-4-12 hex digits), into Kafka's 16 bytes.
func parseTopicID(s string) ([16]byte, error) {
	var id [16]byte
	b, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err != nil || len(b) != len(id) {
		return id, fmt.Errorf("kafka: topic id %q is not a UUID", s)
	}
	copy(id[:], b)
	return id, nil
}

// withTopicNames calls then once the connection's cache knows every topic
// of names, or has been filled afresh to find those it did not; err is
// that request's.
func (c *conn) withTopicNames(ctx actor.Context, names []string, then func(err error)) {
	maxAge := topicsMaxAge
	for _, name := range names {
		if _, ok := c.topics.byName[name]; !ok {
			maxAge = 0
			break
		}
	}
	c.withTopics(ctx, maxAge, then)
}

// withPartitions calls then once the connection's cache knows every
// partition of partitions, by topic name, or has been filled afresh to
// find those it did not: a topic or a partition created since the cache
// was filled is known at once. err is that request's.
func (c *conn) withPartitions(ctx actor.Context, partitions map[string][]int32, then func(err error)) {
	maxAge := topicsMaxAge
	for name, ps := range partitions {
		if !slices.ContainsFunc(ps, func(p int32) bool { return !c.partitionKnown(name, p) }) {
			continue
		}
		maxAge = 0
		break
	}
	c.withTopics(ctx, maxAge, then)
}

// withPartitionsByID is withPartitions for topics named by id.
func (c *conn) withPartitionsByID(ctx actor.Context, partitions map[[16]byte][]int32, then func(err error)) {
	maxAge := topicsMaxAge
	for id, ps := range partitions {
		tm, ok := c.topics.byID[id]
		if ok && !slices.ContainsFunc(ps, func(p int32) bool { return !c.partitionKnown(tm.GetName(), p) }) {
			continue
		}
		maxAge = 0
		break
	}
	c.withTopics(ctx, maxAge, then)
}

// partitionKnown reports whether the cache has the topic and partition.
func (c *conn) partitionKnown(topicName string, partition int32) bool {
	tm, ok := c.topics.byName[topicName]
	return ok && slices.ContainsFunc(tm.GetPartitions(), func(p *messages.PartitionMetadata) bool { return p.GetPartition() == partition })
}
