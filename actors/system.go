package actors

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	cmap "github.com/orcaman/concurrent-map"
	"github.com/sirupsen/logrus"
	logrusslog "github.com/sirupsen/logrus/hooks/slog"
)

// NewActorSystem returns an actor system whose own logs (slog) go to logger.
func NewActorSystem(logger *logrus.Logger) *actor.ActorSystem {
	handler := logrusslog.NewHandler(logger, &logrusslog.HandlerOptions{
		LevelMapper: quietLevels,
	})
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(endpointChatter{handler})
	}))
	shrinkRegistry(system)
	return system
}

// registryBuckets is how many concurrent maps of 32 shards each the
// process registry of an actor system spreads its actors over: protoactor
// makes 1,024, 32,768 Go maps in all (about 9 MB of small objects that
// every garbage collection marks, in every actor system of the process);
// 64 still give 2,048 locks to actors spawned and stopped at once.
const registryBuckets = 64

// shrinkRegistry spreads the process registry of system over
// registryBuckets buckets, with the processes it already holds (its event
// stream, its dead letters): before anything else uses the system.
func shrinkRegistry(system *actor.ActorSystem) {
	old := system.ProcessRegistry.LocalPIDs
	buckets := &actor.SliceMap{LocalPIDs: make([]cmap.ConcurrentMap, registryBuckets)}
	for i := range buckets.LocalPIDs {
		buckets.LocalPIDs[i] = cmap.New()
	}
	for _, bucket := range old.LocalPIDs {
		for id, process := range bucket.Items() {
			buckets.GetBucket(id).Set(id, process)
		}
	}
	system.ProcessRegistry.LocalPIDs = buckets
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

// LogPanics is receiver middleware that logs a panic inside an actor at
// Error with its stack and its actor's id, then lets it continue to the supervisor (protoactor
// itself logs it without a stack, at a low level).
func LogPanics(logger *logrus.Entry) actor.ReceiverMiddleware {
	return func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, envelope *actor.MessageEnvelope) {
			defer func() {
				if r := recover(); r != nil {
					logger.WithFields(logrus.Fields{
						"pid":     c.Self().GetId(),
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

// DiscardLogger returns a logger that writes nothing, the default of actors
// given none.
func DiscardLogger() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return logrus.NewEntry(l)
}
