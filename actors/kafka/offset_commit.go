package kafka

// OffsetCommit, versions 2 to 10; 0 and 1 are refused.
//
// Kafka 4.0 no longer takes v0 and v1 (KIP-896): they are answered
// UNSUPPORTED_VERSION. v2 to v4 carry a retention time, not read:
// committed offsets do not expire by age; v3 adds the throttle time; v6
// the leader epoch of the committed record, not kept (OffsetFetch answers
// -1, which asks the consumer for no check); v7 the group instance id of a
// static member (KIP-345); v8 flexible versions; v10 topics named by id.
//
// A commit becomes one OffsetCommitRequest to the node's group
// coordinator and on to the group's actor: of a member of the group's
// generation, or of an admin (generation -1, no member id) while the group
// has no member; the group writes it to __consumer_offsets. As Kafka's
// broker does before its coordinator sees them, a partition of a topic
// this node does not know, or past the topic's partitions, is answered
// UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID for an id), and metadata
// longer than the group takes OFFSET_METADATA_TOO_LARGE; the other
// partitions are committed together, or refused together with the
// group's error.

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/actors/group"
	"github.com/depot-dev/depot/messages"
)

// offsetCommitTopicIDsVersion is the first version that names topics by
// id.
const offsetCommitTopicIDsVersion = 10

func handleOffsetCommit(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.OffsetCommitRequest)
	if req.Version >= offsetCommitTopicIDsVersion {
		partitions := make(map[[16]byte][]int32, len(req.Topics))
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				partitions[t.TopicID] = append(partitions[t.TopicID], p.Partition)
			}
		}
		c.withPartitionsByID(ctx, partitions, func(error) { offsetCommit(c, ctx, x, req) })
		return
	}
	partitions := make(map[string][]int32, len(req.Topics))
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			partitions[t.Topic] = append(partitions[t.Topic], p.Partition)
		}
	}
	c.withPartitions(ctx, partitions, func(error) { offsetCommit(c, ctx, x, req) })
}

// offsetCommit hands req's partitions that the node knows to the group and
// answers with what it says.
func offsetCommit(c *conn, ctx actor.Context, x *exchange, req *kmsg.OffsetCommitRequest) {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	ask := &messages.OffsetCommitRequest{GroupId: req.Group, MemberId: req.MemberID, Generation: req.Generation, GroupInstanceId: orEmpty(req.InstanceID)}
	// slots are where each offset asked for answers in resp.
	type slot struct{ topic, partition int }
	var slots []slot
	for ti, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		name, known := t.Topic, true
		if req.Version >= offsetCommitTopicIDsVersion {
			tm := c.topics.byID[t.TopicID]
			if known = tm != nil; known {
				name = tm.GetName()
			}
		}
		for pi, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			switch {
			case !known:
				rp.ErrorCode = codeUnknownTopicID
			case !c.partitionKnown(name, p.Partition):
				rp.ErrorCode = codeUnknownTopicOrPartition
			case len(orEmpty(p.Metadata)) > group.MaxOffsetMetadataBytes:
				rp.ErrorCode = codeOffsetMetadataTooLarge
			default:
				ask.Offsets = append(ask.Offsets, &messages.PartitionOffset{Topic: name, Partition: p.Partition, Offset: p.Offset, Metadata: orEmpty(p.Metadata)})
				slots = append(slots, slot{ti, pi})
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(slots) == 0 {
		c.reply(x, resp)
		return
	}
	c.ask(ctx, c.l.cfg.Groups, ask, c.l.cfg.RequestTimeout, func(res any, err error) {
		r, ok := res.(*messages.OffsetCommitResponse)
		for i, s := range slots {
			rp := &resp.Topics[s.topic].Partitions[s.partition]
			switch {
			case err != nil || !ok:
				rp.ErrorCode = groupAskCode(err)
			case i < len(r.GetOffsets()) && r.GetOffsets()[i].GetError() != messages.ErrorCode_NONE:
				rp.ErrorCode = kafkaCode(r.GetOffsets()[i].GetError())
			default:
				rp.ErrorCode = kafkaCode(r.GetError())
			}
		}
		c.reply(x, resp)
	})
}

// refuseOffsetCommit answers every partition of a commit with code.
func refuseOffsetCommit(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
