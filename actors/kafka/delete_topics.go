package kafka

// DeleteTopics, versions 1 to 6; 0 is refused.
//
// Kafka 4.0 removed v0 (KIP-896). v1 to v3 are the same here, v4 flexible
// versions, v5 an error message, v6 topics named by name or by id
// (KIP-516), and the id of each in the answer.
//
// Each topic becomes a DeleteTopicRequest to the metadata actor, which
// hands it to the active controller, as the actor client's delete does; a
// topic named by id is found in the metadata first. A topic that does not
// exist is answered UNKNOWN_TOPIC_OR_PARTITION, an id no topic has
// UNKNOWN_TOPIC_ID, a topic named by both name and id, or named twice,
// INVALID_REQUEST, as Kafka does.

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/messages"
)

func handleDeleteTopics(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.DeleteTopicsRequest)
	if req.Version < 6 {
		deleteTopics(c, ctx, x, req)
		return
	}
	// Names are looked up for the ids the answer gives, ids for names.
	c.withTopics(ctx, 0, func(error) { deleteTopics(c, ctx, x, req) })
}

// deleteTopics asks for the deletion of every topic req names, with the
// cache filled when it names them as v6 does.
func deleteTopics(c *conn, ctx actor.Context, x *exchange, req *kmsg.DeleteTopicsRequest) {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	topics := req.Topics
	if req.Version < 6 {
		topics = nil
		for _, name := range req.TopicNames {
			t := kmsg.NewDeleteTopicsRequestTopic()
			t.Topic = kmsg.StringPtr(name)
			topics = append(topics, t)
		}
	}
	// names are the topics to delete, by their place in resp, "" for one
	// refused here.
	names := make([]string, len(topics))
	for i, t := range topics {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		var zero [16]byte
		switch {
		case t.Topic != nil && t.TopicID != zero:
			rt.ErrorCode, rt.ErrorMessage = codeInvalidRequest, kmsg.StringPtr("a topic is named by its name or by its id, not both")
		case t.Topic != nil:
			names[i] = *t.Topic
			if tm := c.topics.byName[*t.Topic]; tm != nil && req.Version >= 6 {
				rt.TopicID, _ = parseTopicID(tm.GetTopicId())
			}
		default:
			tm := c.topics.byID[t.TopicID]
			if tm == nil {
				rt.ErrorCode = codeUnknownTopicID
				rt.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("no topic has id %s", uuid.UUID(t.TopicID)))
				break
			}
			names[i] = tm.GetName()
			rt.Topic = kmsg.StringPtr(tm.GetName())
		}
		resp.Topics = append(resp.Topics, rt)
	}
	twice := namedTwice(names)
	waiting := 0
	for i, name := range names {
		if name == "" {
			continue
		}
		rt := &resp.Topics[i]
		if twice[name] {
			rt.ErrorCode, rt.ErrorMessage = codeInvalidRequest, kmsg.StringPtr(fmt.Sprintf("topic %q is named more than once in the request", name))
			continue
		}
		waiting++
		c.ask(ctx, c.l.cfg.Metadata, &messages.DeleteTopicRequest{Name: name}, c.l.cfg.RequestTimeout, func(res any, err error) {
			waiting--
			r, ok := res.(*messages.DeleteTopicResponse)
			switch {
			case err != nil || !ok:
				rt.ErrorCode = askErrorCode(err)
			default:
				rt.ErrorCode, rt.ErrorMessage = kafkaCode(r.GetError()), errorText(r.GetErrorMessage())
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

// refuseDeleteTopics answers every topic of a request with code.
func refuseDeleteTopics(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	for _, name := range req.TopicNames {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.ErrorCode = kmsg.StringPtr(name), code
		resp.Topics = append(resp.Topics, rt)
	}
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, code
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
