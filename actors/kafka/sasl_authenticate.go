package kafka

// SASLAuthenticate, versions 0 to 2.
//
// v1 adds the session lifetime, v2 flexible versions. The listener is
// PLAINTEXT only, and a handshake never succeeds (see SASLHandshake), so
// every request is answered ILLEGAL_SASL_STATE with a message saying so,
// as Kafka answers one on a listener without SASL, rather than closing
// the connection.

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleSASLAuthenticate(c *conn, _ actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.ErrorCode = codeIllegalSASLState
	resp.ErrorMessage = kmsg.StringPtr("this Kafka listener is PLAINTEXT only: it has no SASL mechanism to authenticate with")
	c.logger.Info("SASL authentication refused: this Kafka listener is PLAINTEXT only")
	c.reply(x, resp)
}
