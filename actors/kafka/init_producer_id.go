package kafka

// InitProducerID, versions 0 to 5.
//
// v1 has nothing new; v2 flexible versions; v3 the producer id and epoch
// an idempotent producer holds, to bump its epoch (KIP-360); v4 and v5
// nothing a non-transactional producer sends. An idempotent producer gets
// a new producer id from the metadata actor's InitProducerIdRequest, as
// the actor client's producer does; the id and epoch it names are not
// reused. Transactions are not built: a request with a transactional id
// is answered INVALID_REQUEST, which no client retries.

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/messages"
)

func handleInitProducerID(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	if req.TransactionalID != nil && *req.TransactionalID != "" {
		c.logger.WithField("transactional_id", *req.TransactionalID).Info("InitProducerID refused: transactions are not supported")
		resp.ErrorCode = codeInvalidRequest
		c.reply(x, resp)
		return
	}
	c.ask(ctx, c.l.cfg.Metadata, &messages.InitProducerIdRequest{}, c.l.cfg.RequestTimeout, func(res any, err error) {
		r, ok := res.(*messages.InitProducerIdResponse)
		switch {
		case err != nil || !ok:
			resp.ErrorCode = askErrorCode(err)
		case r.GetError() != messages.ErrorCode_NONE:
			resp.ErrorCode = kafkaCode(r.GetError())
		default:
			resp.ProducerID, resp.ProducerEpoch = r.GetProducerId(), int16(r.GetProducerEpoch())
		}
		c.reply(x, resp)
	})
}
