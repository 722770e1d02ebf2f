package kafka

// DescribeConfigs, versions 1 to 4; 0 is refused.
//
// Kafka 4.0 removed v0 (KIP-896). v1 adds each config's source and, when
// asked, its synonyms; v2 nothing new; v3 each config's type and, when
// asked, its documentation; v4 flexible versions.
//
// A topic's configs come from the metadata actor's MetadataRequest: every
// topic config Depot knows (actors/topic), with its value in effect, from
// the topic's own setting (DYNAMIC_TOPIC_CONFIG) or its default
// (DEFAULT_CONFIG), as kafka-configs.sh --describe --all shows them; the
// synonyms are the topic's setting, then the broker config of its
// default. A broker's configs, asked of the broker itself, are the node's
// settings that Kafka names as broker configs (BrokerSettings) and
// Depot's fixed ones, all read-only; those of "" (the cluster's dynamic
// defaults) are none, as Depot has no dynamic broker configs. A topic
// that does not exist is answered UNKNOWN_TOPIC_OR_PARTITION, a bad name
// INVALID_TOPIC_EXCEPTION; another broker's id, a broker logger, or
// another resource type, INVALID_REQUEST.

import (
	"fmt"
	"strconv"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/messages"
)

func handleDescribeConfigs(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.DescribeConfigsRequest)
	var topics []string
	for _, r := range req.Resources {
		if r.ResourceType == kmsg.ConfigResourceTypeTopic {
			topics = append(topics, r.ResourceName)
		}
	}
	if len(topics) == 0 {
		c.reply(x, describeConfigs(c, req, nil, nil))
		return
	}
	c.ask(ctx, c.l.cfg.Metadata, &messages.MetadataRequest{Topics: topics}, c.l.cfg.RequestTimeout, func(res any, err error) {
		md, ok := res.(*messages.MetadataResponse)
		if err == nil && !ok {
			err = fmt.Errorf("kafka: metadata answered %T", res)
		}
		c.reply(x, describeConfigs(c, req, md, err))
	})
}

// describeConfigs answers req, its topics' configs from md, or, when the
// metadata could not be asked, err.
func describeConfigs(c *conn, req *kmsg.DescribeConfigsRequest, md *messages.MetadataResponse, err error) *kmsg.DescribeConfigsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	byName := map[string]*messages.TopicMetadata{}
	for _, t := range md.GetTopics() {
		byName[t.GetName()] = t
	}
	for _, r := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		var configs []describedConfig
		switch r.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			t := byName[r.ResourceName]
			switch {
			case err != nil:
				rr.ErrorCode = askErrorCode(err)
			case t == nil:
				rr.ErrorCode = codeUnknownTopicOrPartition
			case t.GetError() != messages.ErrorCode_NONE:
				rr.ErrorCode, rr.ErrorMessage = kafkaCode(t.GetError()), errorText(t.GetErrorMessage())
			default:
				configs = describeTopicConfigs(t.GetConfigs(), t.GetConfigsSet())
			}
		case kmsg.ConfigResourceTypeBroker:
			switch id, parseErr := strconv.ParseInt(r.ResourceName, 10, 32); {
			case r.ResourceName == "":
			case parseErr != nil || int32(id) != c.l.cfg.NodeID:
				rr.ErrorCode = codeInvalidRequest
				rr.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("broker %q asked of node %d: a node describes its own broker configs", r.ResourceName, c.l.cfg.NodeID))
			default:
				configs = describeBrokerConfigs(c.l.cfg.NodeID, c.l.cfg.Broker, c.l.cfg.MaxRequestBytes, c.l.cfg.QueuedMaxRequestBytes)
			}
		case kmsg.ConfigResourceTypeBrokerLogger:
			rr.ErrorCode = codeInvalidRequest
			rr.ErrorMessage = kmsg.StringPtr("broker loggers are not described: a node's log level is its --log-level")
		default:
			rr.ErrorCode = codeInvalidRequest
			rr.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("resource type %s has no configs here: topics and brokers do", r.ResourceType))
		}
		if rr.ErrorCode == codeNone {
			rr.Configs = describedFor(configs, r.ConfigNames, req.IncludeSynonyms, req.IncludeDocumentation)
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}

// refuseDescribeConfigs answers every resource of a request with code.
func refuseDescribeConfigs(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, res := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName, rr.ErrorCode = res.ResourceType, res.ResourceName, code
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}
