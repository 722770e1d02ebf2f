package kafka

// DescribeLogDirs, versions 1 to 5; 0 is refused.
//
// v1 is the oldest Kafka 4.0 takes (KIP-896); v2 flexible versions; v3 a
// top-level error code; v4 each directory's total and usable bytes; v5
// whether it is cordoned (KIP-1066), which Depot's draining is: a draining
// directory takes no new partition.
//
// Answered from this node's placement actor's DescribeLogDirsRequest, as
// `depot disks` shows them: each log directory with its path, its
// partitions (those the request names, or all of them for a null list)
// with the bytes each holds, as its log-dir actor last heard, and, while a
// partition moves into it between log dirs, its future log (IsFuture) with
// its bytes and how many offsets it is behind the partition's log. The
// offset lag of a current log is 0: Kafka's is its high watermark less
// its log end offset, which is never positive here. An offline directory
// answers KAFKA_STORAGE_ERROR and no partitions. Total bytes are the
// directory's capacity (declared, or its file system's) and usable bytes
// what is free of it; -1 when the capacity is not known.

import (
	"slices"
	"strings"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/actors/disks"
	"github.com/depot-dev/depot/messages"
)

func handleDescribeLogDirs(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.DescribeLogDirsRequest)
	c.ask(ctx, c.l.cfg.Placement, &messages.DescribeLogDirsRequest{}, c.l.cfg.RequestTimeout, func(res any, err error) {
		r, ok := res.(*messages.DescribeLogDirsResponse)
		switch {
		case err != nil || !ok:
			c.reply(x, refuseDescribeLogDirs(req, askErrorCode(err)))
		case r.GetError() != messages.ErrorCode_NONE:
			c.reply(x, refuseDescribeLogDirs(req, kafkaCode(r.GetError())))
		default:
			c.reply(x, describeLogDirsResponse(req, r.GetDirs()))
		}
	})
}

// describeLogDirsResponse is the answer to req from the node's log
// directories: in their order, each one's topics by name and partitions
// by number, the current log of a partition before its future one.
func describeLogDirsResponse(req *kmsg.DescribeLogDirsRequest, dirs []*messages.LogDirInfo) *kmsg.DescribeLogDirsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	var asked map[string][]int32
	if req.Topics != nil {
		asked = make(map[string][]int32, len(req.Topics))
		for _, t := range req.Topics {
			asked[t.Topic] = append(asked[t.Topic], t.Partitions...)
		}
	}
	wanted := func(topic string, partition int32) bool {
		partitions, named := asked[topic]
		return asked == nil || (named && slices.Contains(partitions, partition))
	}
	for _, d := range dirs {
		rd := kmsg.NewDescribeLogDirsResponseDir()
		rd.Dir = d.GetPath()
		rd.IsCordoned = d.GetDraining() || d.GetState() == disks.LogDirDraining
		if d.GetState() == disks.LogDirOffline {
			rd.ErrorCode = kafkaCode(messages.ErrorCode_KAFKA_STORAGE_ERROR)
			resp.Dirs = append(resp.Dirs, rd)
			continue
		}
		if d.GetCapacityBytes() > 0 {
			rd.TotalBytes, rd.UsableBytes = d.GetCapacityBytes(), max(d.GetFreeBytes(), 0)
		}
		var parts []describedPartition
		for _, p := range d.GetPartitionUsage() {
			if wanted(p.GetTopic(), p.GetPartition()) {
				parts = append(parts, describedPartition{topic: p.GetTopic(), partition: p.GetPartition(), size: p.GetBytes()})
			}
		}
		for _, f := range d.GetFutures() {
			if wanted(f.GetTopic(), f.GetPartition()) {
				parts = append(parts, describedPartition{topic: f.GetTopic(), partition: f.GetPartition(), size: f.GetBytes(), offsetLag: f.GetOffsetLag(), future: true})
			}
		}
		rd.Topics = describedTopics(parts)
		resp.Dirs = append(resp.Dirs, rd)
	}
	return resp
}

// describedPartition is one log of a partition in a log directory.
type describedPartition struct {
	topic     string
	partition int32
	size      int64
	offsetLag int64
	future    bool
}

// describedTopics groups parts by topic, topics by name and partitions by
// number, a current log before a future one.
func describedTopics(parts []describedPartition) []kmsg.DescribeLogDirsResponseDirTopic {
	slices.SortFunc(parts, func(a, b describedPartition) int {
		if c := strings.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		if a.partition != b.partition {
			return int(a.partition - b.partition)
		}
		switch {
		case a.future == b.future:
			return 0
		case b.future:
			return -1
		}
		return 1
	})
	var out []kmsg.DescribeLogDirsResponseDirTopic
	for _, p := range parts {
		if len(out) == 0 || out[len(out)-1].Topic != p.topic {
			rt := kmsg.NewDescribeLogDirsResponseDirTopic()
			rt.Topic = p.topic
			out = append(out, rt)
		}
		rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		rp.Partition, rp.Size, rp.OffsetLag, rp.IsFuture = p.partition, p.size, p.offsetLag, p.future
		last := &out[len(out)-1]
		last.Partitions = append(last.Partitions, rp)
	}
	return out
}

// refuseDescribeLogDirs answers a request with code, at the top (v3+), as
// Kafka's error answer does: before v3 it is an answer with no log dirs.
func refuseDescribeLogDirs(r kmsg.Request, code int16) kmsg.Response {
	resp := r.(*kmsg.DescribeLogDirsRequest).ResponseKind().(*kmsg.DescribeLogDirsResponse)
	resp.ErrorCode = code
	return resp
}
