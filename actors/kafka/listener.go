// Package kafka is a node's Kafka protocol listener: Kafka clients (kcat,
// franz-go, the Java client) connect to it as to a Kafka broker, and each
// request becomes the protobuf messages Depot's own actor client sends, to
// the same actors: the metadata actor, the partition manager, the
// partition actors. Nothing bypasses them.
//
// Each connection is an actor (conn) that holds the connection's requests
// in the order they came and answers them in that order, many in flight at
// once (pipelining), as Kafka requires. Blocking socket I/O stays out of
// the actor: a reader goroutine owns the socket's read side and hands the
// actor each request, decoded; a writer goroutine owns its write side and
// writes the answers the actor hands it.
//
// kmsg (github.com/twmb/franz-go/pkg/kmsg) encodes and decodes every
// request and response; package wire/kafka reads the frames around them.
// The APIs answered, and their versions, are the table in apis.go, one
// file per API beside it.
//
// Bounds: a frame above MaxRequestBytes closes its connection, as a
// negative size, a frame that does not decode, an unknown API key and TLS
// bytes do, each with a log line; QueuedMaxRequestBytes bounds the bytes
// of requests read and not yet answered on all connections together, and
// MaxInFlight the requests of one connection read and not yet written
// back, so that a slow client holds back only itself.
package kafka

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/remote"
	wirekafka "github.com/depot-dev/depot/wire/kafka"
)

// Defaults of a Config.
const (
	// DefaultQueuedMaxRequestBytes bounds the request bytes in flight on
	// all of a listener's connections: 512 MiB.
	DefaultQueuedMaxRequestBytes = 512 << 20
	// DefaultMaxInFlight bounds the requests of one connection read and
	// not yet answered.
	DefaultMaxInFlight = 64
	// DefaultRequestTimeout bounds each wait for an actor's answer.
	DefaultRequestTimeout = 30 * time.Second
)

// Config is what a listener needs.
type Config struct {
	// Listener is the bound socket; Serve accepts on it, and Close
	// closes it.
	Listener net.Listener
	// NodeID is the node's id, as Kafka's broker.id.
	NodeID int32
	// Metadata is the node's metadata actor and PartitionManager its
	// partition manager. Partition actors are reached by their names
	// (actors.PartitionActorName) on the node's actor address.
	Metadata         *actor.PID
	PartitionManager *actor.PID
	// Transport is the remote state of the node's actor system: produce
	// requests are read into buffers of its pool, and fetch frames are
	// handed back to it once written. Nil: buffers are allocated, and left
	// to the garbage collector.
	Transport *remote.Transport
	// Groups is the node's group coordinator and Placement its placement
	// actor, which own the answers of the group and log-dir APIs.
	Groups    *actor.PID
	Placement *actor.PID
	// MaxRequestBytes is Kafka's socket.request.max.bytes: a larger
	// frame closes its connection. Default 100 MiB.
	MaxRequestBytes int32
	// QueuedMaxRequestBytes is Kafka's queued.max.request.bytes: the
	// bytes of requests read and not yet answered on all connections
	// together; past it, connections wait before reading more. Default
	// DefaultQueuedMaxRequestBytes, and never below MaxRequestBytes.
	QueuedMaxRequestBytes int64
	// MaxInFlight bounds the requests of one connection read and not yet
	// written back. Default DefaultMaxInFlight.
	MaxInFlight int
	// RequestTimeout bounds each wait for an actor's answer. Default
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Broker are the node's settings that DescribeConfigs gives as its
	// broker configs. Default: Depot's fixed ones alone.
	Broker BrokerSettings
	// MaxFetchSessions is Kafka's
	// max.incremental.fetch.session.cache.slots: the incremental fetch
	// sessions the listener holds for all its connections. Default
	// DefaultMaxFetchSessions.
	MaxFetchSessions int
	// FetchSessionEvictionAge is Kafka's
	// min.incremental.fetch.session.eviction.ms: a session unused this
	// long makes room for any new one. Default
	// DefaultFetchSessionEvictionAge.
	FetchSessionEvictionAge time.Duration
	Logger                  *logrus.Entry
}

func (c Config) withDefaults() Config {
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = wirekafka.DefaultMaxRequestBytes
	}
	if c.QueuedMaxRequestBytes <= 0 {
		c.QueuedMaxRequestBytes = DefaultQueuedMaxRequestBytes
	}
	c.QueuedMaxRequestBytes = max(c.QueuedMaxRequestBytes, int64(c.MaxRequestBytes))
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.MaxFetchSessions <= 0 {
		c.MaxFetchSessions = DefaultMaxFetchSessions
	}
	if c.FetchSessionEvictionAge <= 0 {
		c.FetchSessionEvictionAge = DefaultFetchSessionEvictionAge
	}
	if c.Logger == nil {
		c.Logger = actors.DiscardLogger()
	}
	return c
}

// Listener is a running Kafka listener. Its methods are safe for
// concurrent use.
type Listener struct {
	cfg    Config
	system *actor.ActorSystem
	// parent is the listener's actor, parent and supervisor of the
	// connections' actors.
	parent *actor.PID
	budget *budget
	// sessions are the incremental fetch sessions of every connection,
	// guarded by sessionsMu.
	sessionsMu sync.Mutex
	sessions   *fetchSessionCache
	logger     *logrus.Entry
	// goroutines are the accept loop and each connection's reader and
	// writer; Close waits for them.
	goroutines sync.WaitGroup
	closing    chan struct{}
	closeOnce  sync.Once
}

// Serve starts answering Kafka clients on cfg.Listener, with the actors of
// system, and returns at once.
func Serve(system *actor.ActorSystem, cfg Config) (*Listener, error) {
	if cfg.Listener == nil {
		return nil, errors.New("kafka: no listener")
	}
	cfg = cfg.withDefaults()
	l := &Listener{
		cfg:    cfg,
		system: system,
		budget: newBudget(cfg.QueuedMaxRequestBytes),
		sessions: newFetchSessionCache(cfg.MaxFetchSessions, cfg.FetchSessionEvictionAge,
			rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(cfg.NodeID)))),
		logger:  cfg.Logger.WithFields(logrus.Fields{"actor": "kafka", "listen": cfg.Listener.Addr().String()}),
		closing: make(chan struct{}),
	}
	supervisor := actor.NewOneForOneStrategy(0, time.Minute, func(reason any) actor.Directive {
		l.logger.WithField("reason", fmt.Sprint(reason)).Error("kafka connection failed; closing it")
		return actor.StopDirective
	})
	parent, err := system.Root.SpawnNamed(actors.Props(func() actor.Actor { return &listenerActor{l: l} }, l.logger,
		actor.WithSupervisor(supervisor)), actors.KafkaListenerName)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	l.parent = parent
	l.goroutines.Add(1)
	go l.accept()
	l.logger.Info("kafka listener started")
	return l, nil
}

// Addr is the address the listener accepts on.
func (l *Listener) Addr() net.Addr { return l.cfg.Listener.Addr() }

// Close stops accepting, closes every connection and waits until their
// goroutines have ended.
func (l *Listener) Close() {
	l.closeOnce.Do(func() {
		close(l.closing)
		_ = l.cfg.Listener.Close()
		_ = l.system.Root.StopFuture(l.parent).Wait()
		l.goroutines.Wait()
		l.logger.Info("kafka listener stopped")
	})
}

// accept hands each new connection to the listener's actor.
func (l *Listener) accept() {
	defer l.goroutines.Done()
	backoff := 5 * time.Millisecond
	for {
		nc, err := l.cfg.Listener.Accept()
		if err != nil {
			select {
			case <-l.closing:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: wait, as net/http does.
			l.logger.WithError(err).Warn("kafka listener: accept failed")
			select {
			case <-time.After(backoff):
			case <-l.closing:
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		select {
		case <-l.closing:
			nc.Close()
			return
		default:
		}
		l.system.Root.Send(l.parent, &accepted{conn: nc})
	}
}

// accepted is a connection the accept loop took.
type accepted struct{ conn net.Conn }

// listenerActor spawns an actor for each connection, and stops them all
// when it stops. Not shared: its mailbox is its only way in.
type listenerActor struct {
	l    *Listener
	next uint64
}

func (a *listenerActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *accepted:
		a.next++
		props := actors.Props(func() actor.Actor { return newConn(a.l, m.conn, a.next) }, a.l.logger)
		if _, err := ctx.SpawnNamed(props, fmt.Sprintf("conn-%d", a.next)); err != nil {
			a.l.logger.WithError(err).Warn("kafka connection not served")
			m.conn.Close()
		}
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
	case actor.AutoReceiveMessage, actor.SystemMessage:
	default:
		a.l.logger.WithField("type", fmt.Sprintf("%T", m)).Warn("unhandled message")
	}
}

// budget bounds the bytes of requests read and not yet answered on all of
// a listener's connections (queued.max.request.bytes). Safe for concurrent
// use: readers take from it, connection actors give back.
type budget struct {
	total int64
	mu    sync.Mutex
	free  int64
	// freed is closed, and replaced, whenever bytes are given back.
	freed chan struct{}
}

func newBudget(total int64) *budget {
	return &budget{total: total, free: total, freed: make(chan struct{})}
}

// acquire takes n bytes, at most the whole budget, waiting while fewer
// are free, and returns what it took; 0 and false when done closes first.
func (b *budget) acquire(n int64, done <-chan struct{}) (int64, bool) {
	n = min(n, b.total)
	for {
		b.mu.Lock()
		if b.free >= n {
			b.free -= n
			b.mu.Unlock()
			return n, true
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-done:
			return 0, false
		}
	}
}

// release gives back n bytes that acquire took.
func (b *budget) release(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	b.free += n
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}

// inUse is the bytes taken and not given back.
func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total - b.free
}
