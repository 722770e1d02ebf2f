package kafka

// IncrementalAlterConfigs, versions 0 and 1.
//
// v1 is flexible versions. Each config of a resource is SET, DELETEd (it
// takes its default again), or, for a list config (cleanup.policy), has
// items APPENDed or SUBTRACTed, the other configs of the resource staying
// as they are.
//
// A topic's change becomes an AlterTopicConfigsRequest to the metadata
// actor with the operations as they came, applied by the active
// controller to the configs set on the topic at that moment, checked with
// actors/topic and recorded; the topic's partitions apply them once
// recorded. validate_only changes nothing. An unknown key, a bad value,
// or APPEND or SUBTRACT of a key that is not a list, is answered
// INVALID_CONFIG, and the topic keeps its configs; a key named twice, a
// SET without a value or an unknown operation INVALID_REQUEST; a topic
// that does not exist UNKNOWN_TOPIC_OR_PARTITION. A broker's configs are
// the node's settings, not changed while it runs: INVALID_REQUEST, as
// Kafka answers a change of a config it cannot change dynamically.

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/messages"
)

// configOps are the operations of IncrementalAlterConfigs as Depot's.
var configOps = map[kmsg.IncrementalAlterConfigOp]messages.ConfigChange_Op{
	kmsg.IncrementalAlterConfigOpSet:      messages.ConfigChange_SET,
	kmsg.IncrementalAlterConfigOpDelete:   messages.ConfigChange_DELETE,
	kmsg.IncrementalAlterConfigOpAppend:   messages.ConfigChange_APPEND,
	kmsg.IncrementalAlterConfigOpSubtract: messages.ConfigChange_SUBTRACT,
}

func handleIncrementalAlterConfigs(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	keys := make([]resourceKey, len(req.Resources))
	for i, r := range req.Resources {
		keys[i] = resourceKey{r.ResourceType, r.ResourceName}
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		resp.Resources = append(resp.Resources, rr)
	}
	changes := func(i int) (*messages.AlterTopicConfigsRequest, int16, string) {
		r := req.Resources[i]
		m := &messages.AlterTopicConfigsRequest{Topic: r.ResourceName, ValidateOnly: req.ValidateOnly}
		for _, cfg := range r.Configs {
			op, ok := configOps[cfg.Op]
			if !ok {
				return nil, codeInvalidRequest, fmt.Sprintf("config %s: unknown operation %d", cfg.Name, cfg.Op)
			}
			change := &messages.ConfigChange{Key: cfg.Name, Op: op}
			switch {
			case cfg.Value != nil:
				change.Value = *cfg.Value
			case op == messages.ConfigChange_SET || op == messages.ConfigChange_APPEND:
				return nil, codeInvalidRequest, fmt.Sprintf("config %s: %s has no value", cfg.Name, cfg.Op)
			}
			m.Changes = append(m.Changes, change)
		}
		return m, codeNone, ""
	}
	answer := func(i int, code int16, message *string) {
		resp.Resources[i].ErrorCode, resp.Resources[i].ErrorMessage = code, message
	}
	c.alterResources(ctx, keys, changes, answer, func() { c.reply(x, resp) })
}
