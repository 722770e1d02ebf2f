package kafka

// SASLHandshake, versions 0 and 1.
//
// The listener is PLAINTEXT only: every mechanism is answered
// UNSUPPORTED_SASL_MECHANISM with an empty list of mechanisms, so that a
// client configured for SASL fails at once with Kafka's own error rather
// than hanging. A SaslAuthenticate after it is answered
// ILLEGAL_SASL_STATE (see SASLAuthenticate).

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleSASLHandshake(c *conn, _ actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.ErrorCode = codeUnsupportedSASLMechanism
	resp.SupportedMechanisms = []string{}
	c.logger.WithField("mechanism", req.Mechanism).Info("SASL refused: this Kafka listener is PLAINTEXT only")
	c.reply(x, resp)
}
