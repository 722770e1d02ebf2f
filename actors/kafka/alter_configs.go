package kafka

// AlterConfigs, versions 0 to 2.
//
// v1 is the same as v0, v2 flexible versions. Kafka's older way of
// changing configs, which IncrementalAlterConfigs replaces: a resource's
// configs become exactly those given, every other key taking its default
// again.
//
// A topic's change becomes an AlterTopicConfigsRequest to the metadata
// actor that replaces the configs set on the topic, which the active
// controller checks with actors/topic and records; the topic's partitions
// apply them once recorded. validate_only changes nothing. An unknown key
// or a bad value is answered INVALID_CONFIG, and the topic keeps its
// configs; a key given twice or without a value INVALID_REQUEST; a topic
// that does not exist UNKNOWN_TOPIC_OR_PARTITION. A broker's configs are
// the node's settings, not changed while it runs: INVALID_REQUEST, as
// Kafka answers a change of a config it cannot change dynamically.

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/messages"
)

func handleAlterConfigs(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	keys := make([]resourceKey, len(req.Resources))
	for i, r := range req.Resources {
		keys[i] = resourceKey{r.ResourceType, r.ResourceName}
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		resp.Resources = append(resp.Resources, rr)
	}
	changes := func(i int) (*messages.AlterTopicConfigsRequest, int16, string) {
		r := req.Resources[i]
		m := &messages.AlterTopicConfigsRequest{Topic: r.ResourceName, Replace: true, ValidateOnly: req.ValidateOnly}
		for _, cfg := range r.Configs {
			change := &messages.ConfigChange{Key: cfg.Name, Op: messages.ConfigChange_SET}
			if cfg.Value == nil {
				return nil, codeInvalidRequest, "config " + cfg.Name + " has no value: leave it out for its default"
			}
			change.Value = *cfg.Value
			m.Changes = append(m.Changes, change)
		}
		return m, codeNone, ""
	}
	answer := func(i int, code int16, message *string) {
		resp.Resources[i].ErrorCode, resp.Resources[i].ErrorMessage = code, message
	}
	c.alterResources(ctx, keys, changes, answer, func() { c.reply(x, resp) })
}
