package kafka

// ElectLeaders, versions 0 to 2.
//
// v0 elects preferred leaders; v1 adds the election type (0 preferred, 1
// unclean) and a top-level error code; v2 flexible versions. Kafka 4.0
// takes all three.
//
// The request becomes one ElectLeadersRequest to the metadata actor, which
// hands it to the active controller, as `depot topic elect-leaders` does:
// the partitions named, or every partition of every topic for a null
// list. Each partition answers what the controller decided, once its new
// leader is committed: ELECTION_NOT_NEEDED where the election has nothing
// to do, PREFERRED_LEADER_NOT_AVAILABLE where the preferred replica is
// fenced or out of the ISR, UNKNOWN_TOPIC_OR_PARTITION. An unclean
// election gives a partition with no leader a live member of its ISR, or,
// when none is live, its first live replica, but only where the topic
// allows it (unclean.leader.election.enable): Kafka's admin request
// overrides the topic, Depot's does not lose acknowledged records unless
// the topic says it may, and answers ELIGIBLE_LEADERS_NOT_AVAILABLE. As
// Kafka's controller does, a null list leaves out the partitions whose
// election was not needed. Another election type is INVALID_REQUEST.

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/messages"
)

// Kafka's election types.
const (
	electionPreferred int8 = 0
	electionUnclean   int8 = 1
)

func handleElectLeaders(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.ElectLeadersRequest)
	if req.ElectionType != electionPreferred && req.ElectionType != electionUnclean {
		c.reply(x, refuseElectLeaders(req, codeInvalidRequest))
		return
	}
	ask := electLeadersAsk(req)
	if ask == nil {
		c.reply(x, req.ResponseKind())
		return
	}
	c.ask(ctx, c.l.cfg.Metadata, ask, c.controllerTimeout(req.TimeoutMillis), func(res any, err error) {
		r, ok := res.(*messages.ElectLeadersResponse)
		switch {
		case err != nil || !ok:
			c.reply(x, refuseElectLeaders(req, askErrorCode(err)))
		case r.GetError() != messages.ErrorCode_NONE:
			c.reply(x, refuseElectLeaders(req, kafkaCode(r.GetError())))
		default:
			c.reply(x, electLeadersResponse(req, r.GetResults()))
		}
	})
}

// electLeadersAsk is the controller's request for req: nil when req names
// no partition, and so asks for nothing.
func electLeadersAsk(req *kmsg.ElectLeadersRequest) *messages.ElectLeadersRequest {
	ask := &messages.ElectLeadersRequest{Unclean: req.ElectionType == electionUnclean}
	if req.Topics == nil {
		return ask
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			ask.TopicPartitions = append(ask.TopicPartitions, &messages.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	if len(ask.TopicPartitions) == 0 {
		return nil
	}
	return ask
}

// electLeadersResponse is the answer to req from the controller's
// results: by topic, in the order the results name them, and, for a null
// list, without the partitions whose election was not needed.
func electLeadersResponse(req *kmsg.ElectLeadersRequest, results []*messages.ElectionResult) *kmsg.ElectLeadersResponse {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	byTopic := map[string]int{}
	for _, r := range results {
		if req.Topics == nil && r.GetError() == messages.ErrorCode_ELECTION_NOT_NEEDED {
			continue
		}
		i, ok := byTopic[r.GetTopic()]
		if !ok {
			i = len(resp.Topics)
			byTopic[r.GetTopic()] = i
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = r.GetTopic()
			resp.Topics = append(resp.Topics, rt)
		}
		rp := kmsg.NewElectLeadersResponseTopicPartition()
		rp.Partition, rp.ErrorCode, rp.ErrorMessage = r.GetPartition(), kafkaCode(r.GetError()), errorText(r.GetErrorMessage())
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return resp
}

// refuseElectLeaders answers req with code: at the top (v1+) and for each
// partition it names.
func refuseElectLeaders(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	resp.ErrorCode = code
	for _, t := range req.Topics {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// controllerTimeout is how long a change asked of the controller is
// waited for: the request's own timeout, or the listener's
// RequestTimeout when it gives none.
func (c *conn) controllerTimeout(timeoutMillis int32) time.Duration {
	if timeoutMillis > 0 {
		return time.Duration(timeoutMillis) * time.Millisecond
	}
	return c.l.cfg.RequestTimeout
}
