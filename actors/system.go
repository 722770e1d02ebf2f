package actors

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/sirupsen/logrus"
	logrusslog "github.com/sirupsen/logrus/hooks/slog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/status"
)

const (
	// MaxRemoteMessageBytes is the largest gRPC message a node or client
	// accepts from a peer. A message carries one envelope (see
	// RemoteWriterBatchSize), but a produce request may carry up to its
	// topic's max.message.bytes, and gRPC's default limit (4 MiB) would drop
	// the whole stream, and every message queued on it, for one larger
	// request.
	MaxRemoteMessageBytes = 256 << 20
	// RemoteWriterBatchSize is how many envelopes protoactor packs into one
	// gRPC message (its default is 1000): one. gRPC delivers a message only
	// once it has all of it, and the codec copies it into one buffer, so
	// envelopes packed together wait for the last of them: requests of
	// 1 MiB travelled ten at a time. Small messages lose nothing, since
	// gRPC's writer gathers their frames into one write anyway. Against 64,
	// in interleaved pairs: produce 862k-975k records/s of 1 KiB against
	// 685k-870k, acks=all 593k-696k against 394k-615k, eight partitions
	// with four producers 708k-734k against 637k-644k, 4 KiB batches of
	// 100 B records 443k-465k against 394k-420k; consume unchanged.
	RemoteWriterBatchSize = 1
	// RemoteWriterQueueSize is the first size of the queue of messages
	// waiting for a peer's endpoint writer, which doubles when full.
	// protoactor starts it at a million slots: 16 MiB per peer, every
	// pointer of which the garbage collector scans in every cycle.
	RemoteWriterQueueSize = 1024
)

// NewActorSystem returns an actor system whose own logs (slog) go to logger.
func NewActorSystem(logger *logrus.Logger) *actor.ActorSystem {
	handler := logrusslog.NewHandler(logger, &logrusslog.HandlerOptions{
		LevelMapper: quietLevels,
	})
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(endpointChatter{handler})
	}))
}

// endpointChatter demotes protoactor remote's connection messages to Debug.
// It logs every peer that goes away ("EndpointWriter lost connection") at
// Error, but a client that exits is the normal course of things; requests
// that matter have their own timeouts and report their own failures.
type endpointChatter struct{ slog.Handler }

func (h endpointChatter) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "Endpoint") && r.Level > slog.LevelDebug {
		demoted := slog.NewRecord(r.Time, slog.LevelDebug, r.Message, r.PC)
		r.Attrs(func(a slog.Attr) bool {
			demoted.AddAttrs(a)
			return true
		})
		r = demoted
	}
	return h.Handler.Handle(ctx, r)
}

func (h endpointChatter) WithAttrs(attrs []slog.Attr) slog.Handler {
	return endpointChatter{h.Handler.WithAttrs(attrs)}
}

func (h endpointChatter) WithGroup(name string) slog.Handler {
	return endpointChatter{h.Handler.WithGroup(name)}
}

// quietLevels maps protoactor's Info chatter (remote connects, endpoint
// lifecycle) to Debug: a node's Info log is for its own lifecycle.
func quietLevels(l slog.Level) logrus.Level {
	switch {
	case l >= slog.LevelError:
		return logrus.ErrorLevel
	case l >= slog.LevelWarn:
		return logrus.WarnLevel
	default:
		return logrus.DebugLevel
	}
}

// RemoteConfig returns protoactor remote settings for host:port with the
// remedies for its known hazards: a peer that sends a message type this
// binary does not know makes the deserializer panic on the gRPC stream's
// goroutine, which would kill the process, so a stream interceptor recovers
// and drops that stream instead; and gRPC's message size limit is raised
// while the writer batch is lowered, so a burst of large messages is not
// silently dropped. Streams use remoteCodec and a buffer pool that does not
// clear, which take copies off the path of record bytes.
func RemoteConfig(host string, port int, logger *logrus.Entry) *remote.Config {
	return remote.Configure(host, port,
		remote.WithEndpointWriterBatchSize(RemoteWriterBatchSize),
		remote.WithEndpointWriterQueueSize(RemoteWriterQueueSize),
		remote.WithServerOptions(
			grpc.MaxRecvMsgSize(MaxRemoteMessageBytes),
			grpc.ChainStreamInterceptor(recoverStream(logger)),
			grpc.ForceServerCodecV2(remoteCodec{}),
			experimental.BufferPool(remoteBuffers),
		),
		remote.WithDialOptions(
			grpc.WithInsecure(), //nolint:staticcheck // protoactor's own default; peers are on a trusted network
			grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(MaxRemoteMessageBytes), grpc.MaxCallRecvMsgSize(MaxRemoteMessageBytes), grpc.ForceCodecV2(remoteCodec{})),
			experimental.WithBufferPool(remoteBuffers),
		),
	)
}

// recoverStream is the server streams' interceptor: it recovers a panic of
// the deserializer, and hands the handler a heldStream, which lets go of
// each decoded message's buffer on the next read.
func recoverStream(logger *logrus.Entry) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		defer func() {
			if r := recover(); r != nil {
				logger.WithField("panic", fmt.Sprint(r)).Warn("dropped a remote stream carrying a message this node cannot decode")
				err = status.Errorf(codes.InvalidArgument, "depot: undecodable message: %v", r)
			}
		}()
		hs := &heldStream{ServerStream: ss}
		defer hs.releaseLast()
		return handler(srv, hs)
	}
}

// LogPanics is receiver middleware that logs a panic inside an actor at
// Error with its stack, then lets it continue to the supervisor (protoactor
// itself logs it without a stack, at a low level).
func LogPanics(logger *logrus.Entry) actor.ReceiverMiddleware {
	return func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, envelope *actor.MessageEnvelope) {
			defer func() {
				if r := recover(); r != nil {
					logger.WithFields(logrus.Fields{
						"panic":   fmt.Sprint(r),
						"message": fmt.Sprintf("%T", envelope.Message),
						"stack":   string(debug.Stack()),
					}).Error("actor panicked")
					panic(r)
				}
			}()
			next(c, envelope)
		}
	}
}

// Props returns props for an actor made by producer, with panics logged.
func Props(producer actor.Producer, logger *logrus.Entry, opts ...actor.PropsOption) *actor.Props {
	opts = append([]actor.PropsOption{actor.WithReceiverMiddleware(LogPanics(logger))}, opts...)
	return actor.PropsFromProducer(producer, opts...)
}

// Request sends msg to pid from outside any actor and waits for the answer,
// up to timeout or ctx's end. The answer's type is checked: a response of an
// unexpected type is an error, not a panic.
func Request[T any](ctx context.Context, root *actor.RootContext, pid *actor.PID, msg any, timeout time.Duration) (T, error) {
	var zero T
	if deadline, ok := ctx.Deadline(); ok {
		if d := time.Until(deadline); d < timeout {
			timeout = d
		}
	}
	if timeout <= 0 {
		return zero, context.DeadlineExceeded
	}
	res, err := root.RequestFuture(pid, msg, timeout).Result()
	if err != nil {
		return zero, err
	}
	v, ok := res.(T)
	if !ok {
		return zero, fmt.Errorf("actors: %s answered %T, want %T", pid.Id, res, zero)
	}
	return v, nil
}
