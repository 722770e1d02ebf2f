package kafka

// OffsetFetch, versions 1 to 10; 0 is refused.
//
// v0 read offsets kept in ZooKeeper, and Kafka 4.0 no longer takes it
// (KIP-896): it is answered UNSUPPORTED_VERSION. v2 adds a null topic
// list, for all the group's offsets, and an error of the group's own; v3
// the throttle time; v5 each offset's leader epoch, always -1 here (not
// kept); v6 flexible versions; v7 require stable, met at once (there are
// no transactions to wait for); v8 several groups in one request
// (KIP-709); v9 the member id and epoch of KIP-848's groups, not read
// (a classic group checks neither); v10 topics named by id.
//
// Each group becomes an OffsetFetchRequest to the node's group
// coordinator and on to the group's actor. A partition with no committed
// offset is answered offset -1, as is every partition of a group that does
// not exist; for a null topic list, every committed offset of the group
// (at v10, those of topics that still exist, which have ids). The group's
// error (NOT_COORDINATOR and the like) is the group's in the answer, or
// before v2 every partition's.

import (
	"cmp"
	"slices"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/messages"
)

// Versions of OffsetFetch.
const (
	offsetFetchGroupErrorVersion = 2
	offsetFetchGroupsVersion     = 8
	offsetFetchTopicIDsVersion   = 10
)

// fetchedGroup is one group of an OffsetFetch: what was asked (all, or
// topics) and, once answered, its error and offsets.
type fetchedGroup struct {
	group  string
	all    bool
	topics []*fetchedTopic
	code   int16
}

type fetchedTopic struct {
	name       string
	id         [16]byte
	partitions []*fetchedPartition
}

type fetchedPartition struct {
	partition int32
	offset    int64
	metadata  string
	code      int16
}

func handleOffsetFetch(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.OffsetFetchRequest)
	var groups []*fetchedGroup
	if req.Version < offsetFetchGroupsVersion {
		g := &fetchedGroup{group: req.Group, all: req.Topics == nil && req.Version >= offsetFetchGroupErrorVersion}
		for _, t := range req.Topics {
			g.topics = append(g.topics, askedTopic(t.Topic, [16]byte{}, t.Partitions))
		}
		groups = append(groups, g)
	} else {
		for _, rg := range req.Groups {
			g := &fetchedGroup{group: rg.Group, all: rg.Topics == nil}
			for _, t := range rg.Topics {
				g.topics = append(g.topics, askedTopic(t.Topic, t.TopicID, t.Partitions))
			}
			groups = append(groups, g)
		}
	}
	if req.Version < offsetFetchTopicIDsVersion {
		fetchOffsets(c, ctx, x, req, groups)
		return
	}
	var ids [][16]byte
	for _, g := range groups {
		for _, t := range g.topics {
			ids = append(ids, t.id)
		}
	}
	c.withTopicIDs(ctx, ids, func(error) {
		for _, g := range groups {
			for _, t := range g.topics {
				if tm := c.topics.byID[t.id]; tm != nil {
					t.name = tm.GetName()
				}
			}
		}
		fetchOffsets(c, ctx, x, req, groups)
	})
}

// askedTopic is a topic asked for, each partition -1 until answered.
func askedTopic(name string, id [16]byte, partitions []int32) *fetchedTopic {
	t := &fetchedTopic{name: name, id: id}
	for _, p := range partitions {
		t.partitions = append(t.partitions, &fetchedPartition{partition: p, offset: -1})
	}
	return t
}

// fetchOffsets asks each group for its offsets and answers once all have.
func fetchOffsets(c *conn, ctx actor.Context, x *exchange, req *kmsg.OffsetFetchRequest, groups []*fetchedGroup) {
	waiting := 0
	for _, g := range groups {
		ask := &messages.OffsetFetchRequest{GroupId: g.group}
		for _, t := range g.topics {
			if t.name == "" {
				// A topic id this node does not know.
				for _, p := range t.partitions {
					p.code = codeUnknownTopicID
				}
				continue
			}
			for _, p := range t.partitions {
				ask.Partitions = append(ask.Partitions, &messages.TopicPartition{Topic: t.name, Partition: p.partition})
			}
		}
		if !g.all && len(ask.Partitions) == 0 {
			continue // nothing to ask: an empty list, or only unknown ids
		}
		waiting++
		done := func() {
			waiting--
			if waiting == 0 {
				c.reply(x, offsetFetchResponse(req, groups))
			}
		}
		c.ask(ctx, c.l.cfg.Groups, ask, c.l.cfg.RequestTimeout, func(res any, err error) {
			r, ok := res.(*messages.OffsetFetchResponse)
			switch {
			case err != nil || !ok:
				g.code = groupAskCode(err)
			case r.GetError() != messages.ErrorCode_NONE:
				g.code = kafkaCode(r.GetError())
			case g.all && req.Version >= offsetFetchTopicIDsVersion:
				// The answer names topics by id: the cache must know
				// every topic the group committed to that still exists.
				var names []string
				for _, o := range r.GetOffsets() {
					names = append(names, o.GetTopic())
				}
				c.withTopicNames(ctx, names, func(error) {
					g.take(c, r.GetOffsets(), true)
					done()
				})
				return
			default:
				g.take(c, r.GetOffsets(), req.Version >= offsetFetchTopicIDsVersion)
			}
			done()
		})
	}
	if waiting == 0 {
		c.reply(x, offsetFetchResponse(req, groups))
	}
}

// take fills the group's partitions with the offsets the group answered;
// for a group asked for all its offsets, each becomes a partition (byID:
// named by topic id, leaving out topics whose id the node does not know).
func (g *fetchedGroup) take(c *conn, offsets []*messages.PartitionOffset, byID bool) {
	type key struct {
		topic     string
		partition int32
	}
	if g.all {
		for _, o := range offsets {
			if o.GetOffset() < 0 {
				continue
			}
			var id [16]byte
			if byID {
				var ok bool
				if id, ok = c.topicID(o.GetTopic()); !ok {
					continue
				}
			}
			i := slices.IndexFunc(g.topics, func(t *fetchedTopic) bool { return t.name == o.GetTopic() })
			if i < 0 {
				g.topics = append(g.topics, &fetchedTopic{name: o.GetTopic(), id: id})
				i = len(g.topics) - 1
			}
			g.topics[i].partitions = append(g.topics[i].partitions, &fetchedPartition{partition: o.GetPartition(), offset: o.GetOffset(), metadata: o.GetMetadata()})
		}
		slices.SortFunc(g.topics, func(a, b *fetchedTopic) int { return cmp.Compare(a.name, b.name) })
		return
	}
	byKey := make(map[key]*messages.PartitionOffset, len(offsets))
	for _, o := range offsets {
		byKey[key{o.GetTopic(), o.GetPartition()}] = o
	}
	for _, t := range g.topics {
		for _, p := range t.partitions {
			if o := byKey[key{t.name, p.partition}]; o != nil && p.code == codeNone {
				p.offset, p.metadata = o.GetOffset(), o.GetMetadata()
			}
		}
	}
}

// offsetFetchResponse is the answer, at req's version, of groups.
func offsetFetchResponse(req *kmsg.OffsetFetchRequest, groups []*fetchedGroup) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version < offsetFetchGroupsVersion {
		g := groups[0]
		if req.Version >= offsetFetchGroupErrorVersion {
			resp.ErrorCode = g.code
		}
		for _, t := range g.topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.name
			for _, p := range t.partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.partition, p.offset, -1, kmsg.StringPtr(p.metadata), p.code
				if p.code == codeNone && req.Version < offsetFetchGroupErrorVersion {
					rp.ErrorCode = g.code
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	for _, g := range groups {
		rg := kmsg.NewOffsetFetchResponseGroup()
		rg.Group, rg.ErrorCode = g.group, g.code
		for _, t := range g.topics {
			rt := kmsg.NewOffsetFetchResponseGroupTopic()
			rt.Topic, rt.TopicID = t.name, t.id
			for _, p := range t.partitions {
				rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.partition, p.offset, -1, kmsg.StringPtr(p.metadata), p.code
				rt.Partitions = append(rt.Partitions, rp)
			}
			rg.Topics = append(rg.Topics, rt)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

// refuseOffsetFetch answers a fetch with code: the group's, or before v2
// every partition's.
func refuseOffsetFetch(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.OffsetFetchRequest)
	var groups []*fetchedGroup
	if req.Version < offsetFetchGroupsVersion {
		g := &fetchedGroup{group: req.Group, code: code}
		for _, t := range req.Topics {
			g.topics = append(g.topics, askedTopic(t.Topic, [16]byte{}, t.Partitions))
		}
		groups = append(groups, g)
	} else {
		for _, rg := range req.Groups {
			groups = append(groups, &fetchedGroup{group: rg.Group, code: code})
		}
	}
	return offsetFetchResponse(req, groups)
}
