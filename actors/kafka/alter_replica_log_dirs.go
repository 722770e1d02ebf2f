package kafka

// AlterReplicaLogDirs, versions 1 and 2; 0 is refused.
//
// v1 is the oldest Kafka 4.0 takes (KIP-896); v2 flexible versions.
//
// Moves partitions of this node between its log directories, online, as
// `depot disks` moves them: the request becomes one MoveReplicasRequest to
// the node's placement actor, which answers at once and runs the moves one
// at a time, ahead of its balancer's, each copying the partition into a
// future log in the target directory while it serves, catching up, and
// swapping; DescribeLogDirs shows the future log while the move runs. The
// copy runs under the node's move throttle (--move-throttle). A partition
// already in the directory asked for is answered NONE and not moved. The
// balancer may later move a partition again, as it moves any other.
//
// Each partition answers Kafka's code: UNKNOWN_TOPIC_OR_PARTITION when
// the metadata does not know it, REPLICA_NOT_AVAILABLE when this node
// holds no replica of it (Kafka keeps that code here for compatibility),
// LOG_DIR_NOT_FOUND for a path that is not one of the node's log
// directories, KAFKA_STORAGE_ERROR for one offline or full, and
// INVALID_REQUEST for one draining (cordoned), which takes no partition.
// The answer has no error messages: each refusal is logged.

import (
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/messages"
)

// alterReplicaLogDirsMaxAge is how old the metadata that tells which
// partitions this node holds may be.
const alterReplicaLogDirsMaxAge = time.Second

func handleAlterReplicaLogDirs(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.AlterReplicaLogDirsRequest)
	c.withTopics(ctx, alterReplicaLogDirsMaxAge, func(err error) {
		if err != nil {
			c.reply(x, refuseAlterReplicaLogDirs(req, askErrorCode(err)))
			return
		}
		alterReplicaLogDirs(c, ctx, x, req)
	})
}

// replicaDirSlot is where the answer of one partition of an
// AlterReplicaLogDirs request goes: its topic and place in the answer.
type replicaDirSlot struct{ topic, partition int }

// alterReplicaLogDirs answers the partitions the metadata refuses, and
// asks the placement actor to move the others.
func alterReplicaLogDirs(c *conn, ctx actor.Context, x *exchange, req *kmsg.AlterReplicaLogDirsRequest) {
	resp := req.ResponseKind().(*kmsg.AlterReplicaLogDirsResponse)
	ask := &messages.MoveReplicasRequest{}
	var slots []replicaDirSlot
	forEachReplicaDir(req, resp, func(dir, topic string, partition int32, rp *kmsg.AlterReplicaLogDirsResponseTopicPartition, slot replicaDirSlot) {
		rp.ErrorCode = c.replicaHeld(topic, partition)
		if rp.ErrorCode != codeNone {
			c.logger.WithFields(logrus.Fields{"topic": topic, "partition": partition, "dir": dir, "error": rp.ErrorCode}).Info("AlterReplicaLogDirs refused")
			return
		}
		rp.ErrorCode = codeRequestTimedOut
		ask.Replicas = append(ask.Replicas, &messages.ReplicaMove{Topic: topic, Partition: partition, Dir: dir})
		slots = append(slots, slot)
	})
	if len(ask.Replicas) == 0 {
		c.reply(x, resp)
		return
	}
	c.ask(ctx, c.l.cfg.Placement, ask, c.l.cfg.RequestTimeout, func(res any, err error) {
		r, ok := res.(*messages.MoveReplicasResponse)
		for i, s := range slots {
			rp := &resp.Topics[s.topic].Partitions[s.partition]
			switch {
			case err != nil || !ok:
				rp.ErrorCode = askErrorCode(err)
			case r.GetError() != messages.ErrorCode_NONE:
				rp.ErrorCode = kafkaCode(r.GetError())
			case i < len(r.GetResults()):
				result := r.GetResults()[i]
				rp.ErrorCode = replicaDirCode(result.GetError())
				if rp.ErrorCode != codeNone {
					c.logger.WithFields(logrus.Fields{"topic": result.GetTopic(), "partition": result.GetPartition(), "error": rp.ErrorCode}).
						Info("AlterReplicaLogDirs refused: " + result.GetErrorMessage())
				}
			default:
				rp.ErrorCode = codeUnknownServerError
			}
		}
		c.reply(x, resp)
	})
}

// replicaHeld is the code of a partition asked to move between this
// node's log dirs, as the metadata knows it: NONE when this node holds a
// replica of it.
func (c *conn) replicaHeld(topic string, partition int32) int16 {
	tm := c.topics.byName[topic]
	for _, p := range tm.GetPartitions() {
		if p.GetPartition() != partition {
			continue
		}
		if slices.Contains(p.GetReplicas(), c.l.cfg.NodeID) {
			return codeNone
		}
		return codeReplicaNotAvailable
	}
	return codeUnknownTopicOrPartition
}

// replicaDirCode is the Kafka code of the placement actor's answer for
// one partition: Kafka answers REPLICA_NOT_AVAILABLE, not
// NOT_LEADER_OR_FOLLOWER, for a partition the node does not hold.
func replicaDirCode(code messages.ErrorCode) int16 {
	if code == messages.ErrorCode_NOT_LEADER_OR_FOLLOWER {
		return codeReplicaNotAvailable
	}
	return kafkaCode(code)
}

// alterReplicaLogDirsAnswer is the answer to req with every partition
// NONE: by topic, in the order the request first names each, and each
// topic's partitions in the order named.
func alterReplicaLogDirsAnswer(req *kmsg.AlterReplicaLogDirsRequest) *kmsg.AlterReplicaLogDirsResponse {
	resp := req.ResponseKind().(*kmsg.AlterReplicaLogDirsResponse)
	forEachReplicaDir(req, resp, func(string, string, int32, *kmsg.AlterReplicaLogDirsResponseTopicPartition, replicaDirSlot) {})
	return resp
}

// forEachReplicaDir adds to resp, in the order req names them, a partition
// answer for each partition of req, and calls fn with it, where it
// goes in resp, and the directory asked for it. The answer groups the
// partitions by topic, as Kafka's does.
func forEachReplicaDir(req *kmsg.AlterReplicaLogDirsRequest, resp *kmsg.AlterReplicaLogDirsResponse,
	fn func(dir, topic string, partition int32, rp *kmsg.AlterReplicaLogDirsResponseTopicPartition, slot replicaDirSlot)) {
	byTopic := map[string]int{}
	type named struct {
		dir, topic string
		partition  int32
		slot       replicaDirSlot
	}
	var all []named
	for _, d := range req.Dirs {
		for _, t := range d.Topics {
			ti, ok := byTopic[t.Topic]
			if !ok {
				ti = len(resp.Topics)
				byTopic[t.Topic] = ti
				rt := kmsg.NewAlterReplicaLogDirsResponseTopic()
				rt.Topic = t.Topic
				resp.Topics = append(resp.Topics, rt)
			}
			for _, p := range t.Partitions {
				rp := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
				rp.Partition = p
				resp.Topics[ti].Partitions = append(resp.Topics[ti].Partitions, rp)
				all = append(all, named{dir: d.Dir, topic: t.Topic, partition: p, slot: replicaDirSlot{ti, len(resp.Topics[ti].Partitions) - 1}})
			}
		}
	}
	// fn is called once the answer has every partition: the slices it
	// points into no longer grow.
	for _, n := range all {
		fn(n.dir, n.topic, n.partition, &resp.Topics[n.slot.topic].Partitions[n.slot.partition], n.slot)
	}
}

// refuseAlterReplicaLogDirs answers every partition of a request with
// code.
func refuseAlterReplicaLogDirs(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.AlterReplicaLogDirsRequest)
	resp := alterReplicaLogDirsAnswer(req)
	for ti := range resp.Topics {
		for pi := range resp.Topics[ti].Partitions {
			resp.Topics[ti].Partitions[pi].ErrorCode = code
		}
	}
	return resp
}
