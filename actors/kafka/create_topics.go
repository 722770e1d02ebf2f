package kafka

// CreateTopics, versions 2 to 7; 0 and 1 are refused.
//
// Kafka 4.0 removed v0 and v1 (KIP-896). v4 lets a topic leave its
// partition count and replication factor to the broker (-1, KIP-464:
// num.partitions, 1, and default.replication.factor, Depot's default, 1),
// v5 flexible versions and the created topic's partition count,
// replication factor and configs in the answer (KIP-525), v6 nothing new
// here, v7 the topic's id.
//
// Each topic becomes a CreateTopicRequest to the metadata actor, which
// hands it to the active controller, as the actor client's create does:
// its partitions placed by the controller, or on the replicas the request
// names for each (all its partitions, numbered from 0, each with as many
// replicas, with a count and factor of -1), its configs checked by
// actors/topic, validate_only changing nothing. A topic that exists is
// answered TOPIC_ALREADY_EXISTS, a bad name INVALID_TOPIC_EXCEPTION, a
// replication factor of 0 or below -1, or above the live nodes,
// INVALID_REPLICATION_FACTOR, an unknown config or a bad value
// INVALID_CONFIG; a topic named twice in one request is refused
// INVALID_REQUEST, as Kafka does.

import (
	"fmt"
	"slices"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/messages"
)

func handleCreateTopics(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	names := make([]string, len(req.Topics))
	for i, t := range req.Topics {
		names[i] = t.Topic
	}
	twice := namedTwice(names)
	waiting := 0
	for i, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		resp.Topics = append(resp.Topics, rt)
		if twice[t.Topic] {
			resp.Topics[i].ErrorCode = codeInvalidRequest
			resp.Topics[i].ErrorMessage = kmsg.StringPtr(fmt.Sprintf("topic %q is named more than once in the request", t.Topic))
			continue
		}
		create, code, msg := createTopicRequest(t, req.ValidateOnly)
		if code != codeNone {
			resp.Topics[i].ErrorCode, resp.Topics[i].ErrorMessage = code, kmsg.StringPtr(msg)
			continue
		}
		waiting++
		slot := &resp.Topics[i]
		c.ask(ctx, c.l.cfg.Metadata, create, c.l.cfg.RequestTimeout, func(res any, err error) {
			waiting--
			r, ok := res.(*messages.CreateTopicResponse)
			switch {
			case err != nil || !ok:
				slot.ErrorCode = askErrorCode(err)
			case r.GetError() != messages.ErrorCode_NONE:
				slot.ErrorCode, slot.ErrorMessage = kafkaCode(r.GetError()), errorText(r.GetErrorMessage())
			default:
				createdTopic(slot, r.GetTopic())
			}
			if waiting == 0 {
				c.reply(x, resp)
			}
		})
	}
	if waiting == 0 {
		c.reply(x, resp)
	}
}

// createTopicRequest is the CreateTopicRequest of t, or the code and
// message to refuse it with: a replication factor Depot's request would
// read otherwise (0, below -1), a count or factor given with replicas, the
// replicas of partitions not numbered from 0 without a gap, a config named
// twice or without a value.
func createTopicRequest(t kmsg.CreateTopicsRequestTopic, validateOnly bool) (*messages.CreateTopicRequest, int16, string) {
	m := &messages.CreateTopicRequest{Name: t.Topic, ValidateOnly: validateOnly, Partitions: t.NumPartitions}
	switch {
	case t.ReplicationFactor == 0 || t.ReplicationFactor < -1:
		return nil, codeInvalidReplicationFactor,
			fmt.Sprintf("topic %q cannot have replication factor %d: it is at least 1, or -1 for the default", t.Topic, t.ReplicationFactor)
	case t.ReplicationFactor > 0:
		m.ReplicationFactor = int32(t.ReplicationFactor)
	}
	if len(t.ReplicaAssignment) > 0 {
		if t.NumPartitions != -1 || t.ReplicationFactor != -1 {
			return nil, codeInvalidRequest,
				fmt.Sprintf("topic %q: give either a partition count and replication factor or the replicas of each partition, not both", t.Topic)
		}
		m.Partitions = 0
		m.Assignments = make([]*messages.ReplicaAssignment, len(t.ReplicaAssignment))
		for _, a := range t.ReplicaAssignment {
			if a.Partition < 0 || int(a.Partition) >= len(t.ReplicaAssignment) || m.Assignments[a.Partition] != nil {
				return nil, codeInvalidReplicaAssignment,
					fmt.Sprintf("topic %q: the replicas given are of partitions that are not numbered 0 to %d, each once", t.Topic, len(t.ReplicaAssignment)-1)
			}
			m.Assignments[a.Partition] = &messages.ReplicaAssignment{Replicas: slices.Clone(a.Replicas)}
		}
	} else if t.NumPartitions == -1 {
		m.Partitions = defaultNumPartitions
	}
	for _, cfg := range t.Configs {
		if cfg.Value == nil {
			return nil, codeInvalidConfig, fmt.Sprintf("invalid config for topic %q: %s has no value", t.Topic, cfg.Name)
		}
		if _, twice := m.Configs[cfg.Name]; twice {
			return nil, codeInvalidRequest, fmt.Sprintf("topic %q: config %s is given twice", t.Topic, cfg.Name)
		}
		if m.Configs == nil {
			m.Configs = map[string]string{}
		}
		m.Configs[cfg.Name] = *cfg.Value
	}
	return m, codeNone, ""
}

// createdTopic fills rt with what v5+ answers of a created topic: its
// partition count, replication factor, configs and id.
func createdTopic(rt *kmsg.CreateTopicsResponseTopic, md *messages.TopicMetadata) {
	if md == nil {
		return
	}
	rt.NumPartitions = int32(len(md.GetPartitions()))
	if len(md.GetPartitions()) > 0 {
		rt.ReplicationFactor = int16(len(md.GetPartitions()[0].GetReplicas()))
	}
	rt.Configs = createdConfigs(md)
	if id, err := parseTopicID(md.GetTopicId()); err == nil {
		rt.TopicID = id
	}
}

// refuseCreateTopics answers every topic of a request with code.
func refuseCreateTopics(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.ErrorCode = t.Topic, code
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
