// Package client is Depot's actor client: admin calls, a batching idempotent
// producer and a prefetching long-poll consumer, all speaking protobuf
// messages to a node's actors over protoactor (locally when the client shares
// the node's actor system, over remote otherwise).
//
// Addressing: a node's metadata actor is actor.NewPID(brokerAddress,
// "metadata"); it answers MetadataRequest, CreateTopicRequest,
// DeleteTopicRequest, CreatePartitionsRequest, AlterTopicConfigsRequest
// and InitProducerIdRequest. Metadata names, for each
// partition, the leader's address and the partition actor's name, and the
// partition actor is actor.NewPID(leader_address, actor_name). It answers
// ProduceRequest, FetchRequest, ListOffsetsRequest and PartitionStatusRequest.
//
// Delivery between actor systems is at most once: a message can vanish with no
// error. Every request therefore has a timeout and is retried; produce retries
// are safe because the producer is idempotent (a producer id, an epoch, and a
// sequence number per partition in each record batch, checked by the
// partition actor).
//
// A connection that drops is not waited out: the client's actor hears of it
// from protoactor remote (EndpointTerminatedEvent on the actor system's event
// stream) and fails at once, with ErrConnectionLost, every request awaiting
// an answer from that address. Producers and consumers send theirs again to
// the partition's leader as a metadata refresh names it, producers from the
// first batch not acknowledged, in sequence order; until the node is heard
// from again, or the metadata names a new leadership (a higher leader epoch),
// its partitions count as leaderless.
//
// The producer does not send one message per record. Callers append records
// straight into a per-partition wire.Builder under the producer's mutex; a
// sealed batch (at BatchBytes, or when Linger expires) goes to the producer's
// sender actor as one message, and the sender keeps up to
// MaxInFlightPerPartition ProduceRequests in flight per partition, each
// carrying one record batch (Kafka RecordBatch v2, see package wire).
package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/sirupsen/logrus"

	"github.com/depot-dev/depot/actors"
	depotremote "github.com/depot-dev/depot/actors/remote"
	"github.com/depot-dev/depot/messages"
)

// Errors that do not come from a broker's error code.
var (
	// ErrUnreachable means no broker answered within the first-contact
	// timeout; the error names the addresses tried.
	ErrUnreachable = errors.New("client: node unreachable")
	// ErrClosed means the client, producer or consumer is closed.
	ErrClosed = errors.New("client: closed")
	// ErrTimeout means a request got no answer within its timeout.
	ErrTimeout = errors.New("client: request timed out")
	// ErrDeliveryTimeout means a record was not acknowledged within the
	// producer's DeliveryTimeout, retries included.
	ErrDeliveryTimeout = errors.New("client: delivery timeout")
	// ErrBadResponse means a broker answered with a message of the wrong type.
	ErrBadResponse = errors.New("client: unexpected response")
	// ErrConnectionLost means the connection to the node a request went to
	// dropped before its answer came. The request may or may not have been
	// carried out; it is retriable, after a metadata refresh when it went to
	// a partition's leader.
	ErrConnectionLost = errors.New("client: connection to node lost")
)

// Error is an error code returned by a broker, with its detail.
// errors.Is(err, ErrUnknownTopic) and the like compare codes only; Code is
// there for callers that branch on it.
type Error struct {
	Code    messages.ErrorCode
	Message string
}

// Error implements error: the broker's message, a statement of what is
// wrong that names what it is about (`topic "orders" does not exist`), or
// the code's name (UNKNOWN_TOPIC_OR_PARTITION) when the broker gave none.
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code.String()
	}
	return e.Message
}

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels for the broker error codes a caller most often tests for.
var (
	ErrUnknownTopic         = &Error{Code: messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION}
	ErrNotLeader            = &Error{Code: messages.ErrorCode_NOT_LEADER_OR_FOLLOWER}
	ErrOffsetOutOfRange     = &Error{Code: messages.ErrorCode_OFFSET_OUT_OF_RANGE}
	ErrTopicAlreadyExists   = &Error{Code: messages.ErrorCode_TOPIC_ALREADY_EXISTS}
	ErrInvalidTopic         = &Error{Code: messages.ErrorCode_INVALID_TOPIC}
	ErrInvalidPartitions    = &Error{Code: messages.ErrorCode_INVALID_PARTITIONS}
	ErrMessageTooLarge      = &Error{Code: messages.ErrorCode_MESSAGE_TOO_LARGE}
	ErrOutOfOrderSequence   = &Error{Code: messages.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER}
	ErrInvalidProducerEpoch = &Error{Code: messages.ErrorCode_INVALID_PRODUCER_EPOCH}
	ErrCorruptMessage       = &Error{Code: messages.ErrorCode_CORRUPT_MESSAGE}
	ErrUnknownServerError   = &Error{Code: messages.ErrorCode_UNKNOWN_SERVER_ERROR}
	ErrNotEnoughReplicas    = &Error{Code: messages.ErrorCode_NOT_ENOUGH_REPLICAS}
	// ErrNotEnoughReplicasAfterAppend means the leader wrote the batch but
	// too few replicas are in sync to acknowledge it with acks=all; sent
	// again, an idempotent producer's batch is recognised, not written twice.
	ErrNotEnoughReplicasAfterAppend = &Error{Code: messages.ErrorCode_NOT_ENOUGH_REPLICAS_AFTER_APPEND}
	// ErrFencedLeaderEpoch means the request named a leader epoch older than
	// the partition's: the client's metadata is stale.
	ErrFencedLeaderEpoch = &Error{Code: messages.ErrorCode_FENCED_LEADER_EPOCH}
	// ErrUnknownLeaderEpoch means the request named a leader epoch newer
	// than the replica knows: it has not yet heard of its leadership.
	ErrUnknownLeaderEpoch = &Error{Code: messages.ErrorCode_UNKNOWN_LEADER_EPOCH}
	// ErrLeaderNotAvailable means the partition has no leader for now, or
	// its leader's connection was lost.
	ErrLeaderNotAvailable     = &Error{Code: messages.ErrorCode_LEADER_NOT_AVAILABLE}
	ErrKafkaStorageError      = &Error{Code: messages.ErrorCode_KAFKA_STORAGE_ERROR}
	ErrRequestTimedOut        = &Error{Code: messages.ErrorCode_REQUEST_TIMED_OUT}
	ErrUnsupportedCompression = &Error{Code: messages.ErrorCode_UNSUPPORTED_COMPRESSION_TYPE}
)

// answer checks that res, the answer to a request like msg, is a T, and
// returns it with its error code as an error.
func answer[T codedResponse](res, msg any) (T, error) {
	r, ok := res.(T)
	if !ok {
		var zero T
		return zero, fmt.Errorf("%w: %T to a %T", ErrBadResponse, res, msg)
	}
	return r, codeError(r.GetError(), r.GetErrorMessage())
}

// codeError returns nil for NONE, else an *Error.
func codeError(code messages.ErrorCode, msg string) error {
	if code == messages.ErrorCode_NONE {
		return nil
	}
	return &Error{Code: code, Message: msg}
}

// retriable reports whether a request failing with code may succeed when
// sent again, possibly after a metadata refresh. NOT_ENOUGH_REPLICAS_AFTER_APPEND
// is among them: the batch is in the leader's log, and its resend, with the
// same producer id and sequence, is recognised rather than written again.
func retriable(code messages.ErrorCode) bool {
	switch code {
	case messages.ErrorCode_NOT_LEADER_OR_FOLLOWER,
		messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION,
		messages.ErrorCode_LEADER_NOT_AVAILABLE,
		messages.ErrorCode_FENCED_LEADER_EPOCH,
		messages.ErrorCode_UNKNOWN_LEADER_EPOCH,
		messages.ErrorCode_NOT_CONTROLLER,
		messages.ErrorCode_REQUEST_TIMED_OUT,
		messages.ErrorCode_NOT_ENOUGH_REPLICAS,
		messages.ErrorCode_NOT_ENOUGH_REPLICAS_AFTER_APPEND,
		messages.ErrorCode_KAFKA_STORAGE_ERROR,
		messages.ErrorCode_OFFSET_NOT_AVAILABLE,
		messages.ErrorCode_CORRUPT_MESSAGE:
		return true
	}
	return false
}

// needsMetadata reports whether code means the client's routing is stale:
// the leader moved or is not known, or the leader epoch the client named is
// older (FENCED_LEADER_EPOCH) or newer (UNKNOWN_LEADER_EPOCH) than the
// replica's.
func needsMetadata(code messages.ErrorCode) bool {
	switch code {
	case messages.ErrorCode_NOT_LEADER_OR_FOLLOWER,
		messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION,
		messages.ErrorCode_LEADER_NOT_AVAILABLE,
		messages.ErrorCode_FENCED_LEADER_EPOCH,
		messages.ErrorCode_UNKNOWN_LEADER_EPOCH,
		messages.ErrorCode_KAFKA_STORAGE_ERROR:
		return true
	}
	return false
}

// Opt configures a Client.
type Opt func(*config)

type config struct {
	brokers             []string
	system              *actor.ActorSystem
	transport           *depotremote.Transport
	listenAddress       string
	requestTimeout      time.Duration
	firstContactTimeout time.Duration
	logger              *logrus.Entry
}

// Brokers sets the addresses (host:port of a node's actor system) tried in
// turn for metadata. Default "127.0.0.1:7070".
func Brokers(addrs ...string) Opt {
	return func(c *config) { c.brokers = append([]string(nil), addrs...) }
}

// ActorSystem makes the client use an existing actor system, for example one
// embedded with a node in the same process, with the transport its remote
// was configured with (nil when it has none); it must have remote started
// if the brokers are in other systems. Close does not shut it down.
// Default: New starts its own system with remote listening on
// ListenAddress.
func ActorSystem(sys *actor.ActorSystem, transport *depotremote.Transport) Opt {
	return func(c *config) { c.system, c.transport = sys, transport }
}

// ListenAddress is where the client's own actor system listens so that
// responses can come back. Default "127.0.0.1:0" (any free port). Ignored
// with ActorSystem.
func ListenAddress(addr string) Opt {
	return func(c *config) { c.listenAddress = addr }
}

// RequestTimeout bounds each request to a broker. Default 30s.
func RequestTimeout(d time.Duration) Opt {
	return func(c *config) { c.requestTimeout = d }
}

// FirstContactTimeout bounds a metadata request to a broker that has not
// answered yet, so that an unreachable node is reported quickly. Default 3s.
func FirstContactTimeout(d time.Duration) Opt {
	return func(c *config) { c.firstContactTimeout = d }
}

// Logger sets the client's logger. Default: the standard logrus logger.
func Logger(l *logrus.Entry) Opt {
	return func(c *config) { c.logger = l }
}

// Client talks to a Depot cluster through actors. Safe for concurrent use.
type Client struct {
	cfg    config
	system *actor.ActorSystem
	root   *actor.RootContext
	remote *remote.Remote
	// transport is the remote state of system, nil when it has none.
	transport *depotremote.Transport
	ownSystem bool
	logger    *logrus.Entry

	// watcher is the client's actor, and endpointEvents its subscription
	// to the actor system's event stream: see endpointWatcher.
	watcher        *actor.PID
	endpointEvents *eventstream.Subscription

	nextBroker atomic.Uint32
	contacted  atomic.Bool
	closed     atomic.Bool
	// done is closed by Close: what runs in the background for the
	// client stops on it.
	done chan struct{}

	mu     sync.RWMutex
	routes map[string]*topicRoute
	// unanswered are the brokers that last failed to answer, and when:
	// the rotation passes them by for brokerRetryAfter while another is
	// left. Guarded by mu.
	unanswered map[string]time.Time
	// endpoints are the addresses requests have awaited answers from, by
	// address. Guarded by mu.
	endpoints map[string]*endpoint
}

// brokerRetryAfter is how long a broker that did not answer is passed by.
const brokerRetryAfter = 10 * time.Second

// lostHold is how long after its connection dropped an address's partitions
// count as leaderless while nothing says the node is back: about as long as
// protoactor's endpoint writer tries to connect to an unreachable address
// (five tries, two seconds apart) before it gives up on what was sent there.
const lostHold = brokerRetryAfter

// endpoint is what the client knows of its connection to one address.
type endpoint struct {
	// lost is closed when the connection drops, and then replaced: a
	// request awaiting an answer from the address waits on it too.
	lost chan struct{}
	// lostAt is when the connection last dropped; zero once the node was
	// heard from since.
	lostAt time.Time
}

// topicRoute is what the client knows of a topic's partitions.
type topicRoute struct {
	leaders []*actor.PID // nil where the partition has no leader
	// epochs are the partitions' leader epochs.
	epochs []int32
}

// New returns a client. Unless ActorSystem is given it starts an actor system
// with remote listening on ListenAddress. It does not contact a broker.
func New(opts ...Opt) (*Client, error) {
	cfg := config{
		brokers:             []string{"127.0.0.1:7070"},
		listenAddress:       "127.0.0.1:0",
		requestTimeout:      30 * time.Second,
		firstContactTimeout: 3 * time.Second,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if len(cfg.brokers) == 0 {
		return nil, errors.New("client: no brokers")
	}
	if cfg.requestTimeout <= 0 || cfg.firstContactTimeout <= 0 {
		return nil, errors.New("client: timeouts must be positive")
	}
	if cfg.logger == nil {
		cfg.logger = logrus.NewEntry(logrus.StandardLogger())
	}
	c := &Client{cfg: cfg, logger: cfg.logger.WithField("actor", "client"), routes: map[string]*topicRoute{}, endpoints: map[string]*endpoint{},
		done: make(chan struct{})}
	if cfg.system != nil {
		c.system = cfg.system
		c.transport = cfg.transport
	} else {
		if err := c.startSystem(); err != nil {
			return nil, err
		}
		c.ownSystem = true
	}
	c.root = c.system.Root
	c.watchEndpoints()
	return c, nil
}

// startSystem starts the client's own actor system and remote.
func (c *Client) startSystem() (err error) {
	host, portText, err := net.SplitHostPort(c.cfg.listenAddress)
	if err != nil {
		return fmt.Errorf("client: listen address %q: %w", c.cfg.listenAddress, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return fmt.Errorf("client: listen address %q: %w", c.cfg.listenAddress, err)
	}
	c.system = actors.NewActorSystem(c.cfg.logger.Logger)
	c.transport = depotremote.NewTransport()
	rcfg := c.transport.Config(host, port, c.logger)
	c.remote = remote.NewRemote(c.system, rcfg)
	defer func() {
		if r := recover(); r != nil {
			c.system.Shutdown()
			err = fmt.Errorf("client: start remote on %s: %v", c.cfg.listenAddress, r)
		}
	}()
	c.remote.Start()
	return nil
}

// System is the actor system the client uses.
func (c *Client) System() *actor.ActorSystem { return c.system }

// Close stops the client's own actor system, if it started one. Producers
// and consumers should be closed first: a producer that was not fails the
// records it holds, and those produced after, with ErrClosed; a consumer
// that was not stops fetching, and its Poll returns ErrClosed; a group
// consumer that was not stops its heartbeats too.
func (c *Client) Close() {
	if !c.closed.CompareAndSwap(false, true) {
		return
	}
	close(c.done)
	c.stopWatchingEndpoints()
	if c.ownSystem {
		c.remote.Shutdown(false)
		c.system.Shutdown()
	}
}

// metadataPID is the metadata actor of the next broker in rotation,
// passing by those that did not answer lately while another is left.
func (c *Client) metadataPID() (*actor.PID, string) {
	now := time.Now()
	c.mu.RLock()
	defer c.mu.RUnlock()
	var addr string
	for range c.cfg.brokers {
		i := c.nextBroker.Add(1) - 1
		addr = c.cfg.brokers[int(i)%len(c.cfg.brokers)]
		if failed, ok := c.unanswered[addr]; !ok || now.Sub(failed) > brokerRetryAfter {
			break
		}
	}
	return actor.NewPID(addr, actors.MetadataActorName), addr
}

// answered records whether the broker at addr answered: one that did is
// no longer passed by, and its connection no longer counts as lost.
func (c *Client) answered(addr string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ok {
		delete(c.unanswered, addr)
		if e := c.endpoints[addr]; e != nil {
			e.lostAt = time.Time{}
		}
		return
	}
	if c.unanswered == nil {
		c.unanswered = map[string]time.Time{}
	}
	c.unanswered[addr] = time.Now()
}

// contactTimeout is the timeout for a metadata request: short until some
// broker has answered.
func (c *Client) contactTimeout() time.Duration {
	if c.contacted.Load() {
		return c.cfg.requestTimeout
	}
	return min(c.cfg.firstContactTimeout, c.cfg.requestTimeout)
}

// request sends msg to pid and waits for the answer, at most timeout and
// never past ctx's deadline, and no longer than pid's address keeps its
// connection (ErrConnectionLost when it drops). When the wait ends at ctx's
// deadline, the error is ctx's (context.DeadlineExceeded), not ErrTimeout,
// even if ctx has not yet been marked done: its timer and the request's fire
// apart.
func (c *Client) request(ctx context.Context, pid *actor.PID, msg any, timeout time.Duration) (any, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	untilDeadline := false
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); left < timeout {
			timeout, untilDeadline = left, true
		}
	}
	if timeout <= 0 {
		return nil, context.DeadlineExceeded
	}
	lost := c.lostSignal(pid.GetAddress())
	f := c.root.RequestFuture(pid, msg, timeout)
	done := make(chan struct{})
	var res any
	var err error
	go func() {
		res, err = f.Result()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-lost:
		return nil, fmt.Errorf("%w: %T to %s", ErrConnectionLost, msg, pid.GetAddress())
	}
	if errors.Is(err, actor.ErrTimeout) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if untilDeadline {
			return nil, context.DeadlineExceeded
		}
		return nil, fmt.Errorf("%w: %T to %s after %v", ErrTimeout, msg, pid.Address, timeout)
	}
	if err != nil {
		return nil, fmt.Errorf("client: %T to %s: %w", msg, pid.Address, err)
	}
	return res, nil
}

// adminRequest sends msg to the metadata actor of each broker in turn until
// one answers; resend, when not nil, is called before msg goes to the next
// broker, which may find it carried out already.
func (c *Client) adminRequest(ctx context.Context, msg any, resend func()) (any, error) {
	var tried []string
	var lastErr error
	var busy error // a contacted node's timeout
	for i := range c.cfg.brokers {
		if i > 0 && resend != nil {
			resend()
		}
		pid, addr := c.metadataPID()
		if !c.contacted.Load() {
			// First contact: a node that answers a cheap request is
			// reachable, and then has the whole request timeout for msg,
			// which may be long work (a topic of thousands of partitions).
			if _, err := c.request(ctx, pid, &messages.ClusterInfoRequest{}, c.contactTimeout()); err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				c.answered(addr, false)
				tried = append(tried, addr)
				lastErr = err
				continue
			}
			c.contacted.Store(true)
		}
		res, err := c.request(ctx, pid, msg, c.contactTimeout())
		if err == nil {
			c.contacted.Store(true)
			c.answered(addr, true)
			return res, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		c.answered(addr, false)
		tried = append(tried, addr)
		lastErr = err
		if busy == nil && errors.Is(err, ErrTimeout) {
			busy = err
		}
	}
	if busy != nil {
		// A node answered and then took longer than the request timeout:
		// it is busy, not unreachable.
		return nil, busy
	}
	if errors.Is(lastErr, ErrTimeout) || errors.Is(lastErr, actor.ErrDeadLetter) || errors.Is(lastErr, ErrConnectionLost) {
		return nil, fmt.Errorf("%w: %s", ErrUnreachable, strings.Join(tried, ", "))
	}
	return nil, lastErr
}

// Metadata asks the brokers in turn for the metadata of topics (all topics
// when none are named) and refreshes the client's routing with it.
func (c *Client) Metadata(ctx context.Context, topics ...string) (*messages.MetadataResponse, error) {
	res, err := c.adminRequest(ctx, &messages.MetadataRequest{Topics: topics}, nil)
	if err != nil {
		return nil, err
	}
	md, ok := res.(*messages.MetadataResponse)
	if !ok {
		return nil, fmt.Errorf("%w: %T to a MetadataRequest", ErrBadResponse, res)
	}
	c.updateRoutes(md)
	return md, nil
}

// updateRoutes stores the partition leaders of each topic in md, and their
// leader epochs. A leader on an address whose connection was lost, in an
// epoch above the one the client knew, was chosen since: the node is back.
func (c *Client) updateRoutes(md *messages.MetadataResponse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range md.GetTopics() {
		if t.GetError() != messages.ErrorCode_NONE {
			delete(c.routes, t.GetName())
			continue
		}
		n := len(t.GetPartitions())
		r := &topicRoute{leaders: make([]*actor.PID, n), epochs: make([]int32, n)}
		prev := c.routes[t.GetName()]
		for _, p := range t.GetPartitions() {
			i := int(p.GetPartition())
			if i < 0 || i >= len(r.leaders) || p.GetError() != messages.ErrorCode_NONE || p.GetLeaderAddress() == "" {
				continue
			}
			r.leaders[i] = actor.NewPID(p.GetLeaderAddress(), p.GetActorName())
			r.epochs[i] = p.GetLeaderEpoch()
			if e := c.endpoints[p.GetLeaderAddress()]; e != nil && prev != nil && i < len(prev.epochs) && p.GetLeaderEpoch() > prev.epochs[i] {
				e.lostAt = time.Time{}
			}
		}
		c.routes[t.GetName()] = r
	}
}

// route returns the cached route of topic, or nil.
func (c *Client) route(topic string) *topicRoute {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.routes[topic]
}

// leader returns the cached partition actor of a partition, or nil; see
// leaderOf.
func (c *Client) leader(topic string, partition int32) *actor.PID {
	pid, _ := c.leaderOf(topic, partition)
	return pid
}

// leaderOf returns the cached partition actor of a partition and its
// leader epoch, or nil when the metadata names no leader or the leader's
// connection was lost (see lostHold).
func (c *Client) leaderOf(topic string, partition int32) (*actor.PID, int32) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	r := c.routes[topic]
	if r == nil || partition < 0 || int(partition) >= len(r.leaders) {
		return nil, 0
	}
	pid := r.leaders[partition]
	if pid == nil || c.lostLocked(pid.GetAddress()) {
		return nil, 0
	}
	return pid, r.epochs[partition]
}

// lostLocked reports whether the connection to addr dropped less than
// lostHold ago and nothing since says the node is back. c.mu is held.
func (c *Client) lostLocked(addr string) bool {
	e := c.endpoints[addr]
	return e != nil && !e.lostAt.IsZero() && time.Since(e.lostAt) < lostHold
}

// lostSignal returns the channel closed when the connection to addr drops.
func (c *Client) lostSignal(addr string) <-chan struct{} {
	c.mu.RLock()
	e := c.endpoints[addr]
	c.mu.RUnlock()
	if e != nil {
		return e.lost
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.endpointLocked(addr).lost
}

// endpointLocked returns the state of addr, creating it. c.mu is held.
func (c *Client) endpointLocked(addr string) *endpoint {
	e := c.endpoints[addr]
	if e == nil {
		e = &endpoint{lost: make(chan struct{})}
		c.endpoints[addr] = e
	}
	return e
}

// connectionLost fails the requests awaiting an answer from addr, holds
// its partitions leaderless, and passes the broker by. Called by the
// client's actor.
func (c *Client) connectionLost(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.endpointLocked(addr)
	close(e.lost)
	e.lost = make(chan struct{})
	e.lostAt = time.Now()
	if c.unanswered == nil {
		c.unanswered = map[string]time.Time{}
	}
	c.unanswered[addr] = e.lostAt
}

// connectionFound records that addr is reachable again.
func (c *Client) connectionFound(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.endpoints[addr]; e != nil {
		e.lostAt = time.Time{}
	}
	delete(c.unanswered, addr)
}

// topicRoute returns topic's route, asking for metadata when it is not
// cached. It fails with ErrUnknownTopic when the topic does not exist.
func (c *Client) topicRoute(ctx context.Context, topic string) (*topicRoute, error) {
	if r := c.route(topic); r != nil {
		return r, nil
	}
	md, err := c.Metadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	for _, t := range md.GetTopics() {
		if t.GetName() != topic {
			continue
		}
		if err := codeError(t.GetError(), t.GetErrorMessage()); err != nil {
			return nil, err
		}
	}
	if r := c.route(topic); r != nil {
		return r, nil
	}
	return nil, &Error{Code: messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, Message: fmt.Sprintf("topic %q does not exist", topic)}
}

// partitionLeader returns the partition actor of topic's partition, asking
// for metadata when it is not known.
func (c *Client) partitionLeader(ctx context.Context, topic string, partition int32) (*actor.PID, error) {
	r, err := c.topicRoute(ctx, topic)
	if err != nil {
		return nil, err
	}
	if partition < 0 || int(partition) >= len(r.leaders) {
		return nil, &Error{Code: messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, Message: fmt.Sprintf("topic %q has no partition %d", topic, partition)}
	}
	if pid := c.leader(topic, partition); pid != nil {
		return pid, nil
	}
	if _, err := c.Metadata(ctx, topic); err != nil {
		return nil, err
	}
	if pid := c.leader(topic, partition); pid != nil {
		return pid, nil
	}
	if r := c.route(topic); r != nil && int(partition) < len(r.leaders) && r.leaders[partition] != nil {
		return nil, &Error{Code: messages.ErrorCode_LEADER_NOT_AVAILABLE, Message: fmt.Sprintf("the connection to %s, the leader of partition %s-%d, was lost", r.leaders[partition].GetAddress(), topic, partition)}
	}
	return nil, &Error{Code: messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, Message: fmt.Sprintf("partition %s-%d has no leader", topic, partition)}
}

// forget drops topic's cached route, so the next use asks for metadata.
func (c *Client) forget(topic string) {
	c.mu.Lock()
	delete(c.routes, topic)
	c.mu.Unlock()
}

// CreateTopic creates a topic with the given number of partitions and
// configs, one replica each, and returns its metadata.
func (c *Client) CreateTopic(ctx context.Context, name string, partitions int32, configs map[string]string) (*messages.TopicMetadata, error) {
	return c.CreateTopicReplicated(ctx, name, partitions, 0, configs)
}

// CreateTopicReplicated creates a topic with the given number of partitions,
// replication factor (0: the cluster's default) and configs, and returns
// its metadata. While the cluster elects its active controller, or when an
// answer is lost, it asks again, within ctx and the request timeout; a
// create asked again that finds its topic as asked succeeds.
func (c *Client) CreateTopicReplicated(ctx context.Context, name string, partitions, replicationFactor int32, configs map[string]string) (*messages.TopicMetadata, error) {
	req := &messages.CreateTopicRequest{Name: name, Partitions: partitions, ReplicationFactor: replicationFactor, Configs: configs}
	res, err := c.adminChange(ctx, req, func() { req.Retried = true })
	if err != nil {
		return nil, err
	}
	r, err := answer[*messages.CreateTopicResponse](res, &messages.CreateTopicRequest{})
	if err != nil {
		return nil, err
	}
	c.forget(name)
	return r.GetTopic(), nil
}

// adminChange sends a change to the brokers as adminRequest does, and asks
// again, after retry(), while the answer is NOT_CONTROLLER or
// REQUEST_TIMED_OUT, until the request timeout has passed; retry() is also
// called before the change goes to another broker when one gave no answer.
func (c *Client) adminChange(ctx context.Context, msg any, retry func()) (any, error) {
	return c.askAgain(ctx, func() (any, error) { return c.adminRequest(ctx, msg, retry) }, func(code messages.ErrorCode) bool {
		if code == messages.ErrorCode_NOT_CONTROLLER || code == messages.ErrorCode_REQUEST_TIMED_OUT {
			retry()
			return true
		}
		return false
	})
}

// askAgain calls ask, and again after a backoff (50 ms, doubling up to a
// second) while its answer's code is one again accepts, until the request
// timeout has passed; the last answer is returned.
func (c *Client) askAgain(ctx context.Context, ask func() (any, error), again func(messages.ErrorCode) bool) (any, error) {
	deadline := time.Now().Add(c.cfg.requestTimeout)
	backoff := 50 * time.Millisecond
	for {
		res, err := ask()
		if err != nil {
			return nil, err
		}
		r, ok := res.(codedResponse)
		if !ok || time.Now().Add(backoff).After(deadline) || !again(r.GetError()) {
			return res, nil
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		backoff = min(2*backoff, time.Second)
	}
}

// ClusterInfo asks the brokers in turn what they know of the cluster: its
// id, its nodes, and the active controller.
func (c *Client) ClusterInfo(ctx context.Context) (*messages.ClusterInfoResponse, error) {
	res, err := c.adminRequest(ctx, &messages.ClusterInfoRequest{}, nil)
	if err != nil {
		return nil, err
	}
	r, ok := res.(*messages.ClusterInfoResponse)
	if !ok {
		return nil, fmt.Errorf("%w: %T to a ClusterInfoRequest", ErrBadResponse, res)
	}
	return r, nil
}

// DeleteTopic deletes a topic.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	res, err := c.adminChange(ctx, &messages.DeleteTopicRequest{Name: name}, func() {})
	if err != nil {
		return err
	}
	_, err = answer[*messages.DeleteTopicResponse](res, &messages.DeleteTopicRequest{})
	if !errors.Is(err, ErrBadResponse) {
		c.forget(name)
	}
	return err
}

// AddPartitions raises a topic's partition count to count, as Kafka's
// CreatePartitions (kafka-topics.sh --alter --partitions), and returns
// the topic's metadata after it. The new partitions are placed as a new
// topic's are, with the replication factor of the topic's first. A count
// that does not raise the topic's is refused INVALID_PARTITIONS: a
// topic's partitions are never removed. An answer lost and asked again
// that finds the topic with count partitions succeeds.
func (c *Client) AddPartitions(ctx context.Context, topic string, count int32) (*messages.TopicMetadata, error) {
	req := &messages.CreatePartitionsRequest{Topic: topic, Count: count}
	res, err := c.adminChange(ctx, req, func() { req.Retried = true })
	if err != nil {
		return nil, err
	}
	r, err := answer[*messages.CreatePartitionsResponse](res, req)
	if err != nil {
		return nil, err
	}
	c.forget(topic)
	return r.GetTopic(), nil
}

// AlterTopicConfigs changes the configs set on a topic, as Kafka's
// IncrementalAlterConfigs (kafka-configs.sh --alter --add-config,
// --delete-config): each key of set takes its value, each of remove its
// default again, the others stay as they are. An unknown key or a bad
// value is refused INVALID_CONFIG and changes nothing. It returns the
// topic's metadata after the change; its partitions apply the configs as
// they are recorded.
func (c *Client) AlterTopicConfigs(ctx context.Context, topic string, set map[string]string, remove []string) (*messages.TopicMetadata, error) {
	req := &messages.AlterTopicConfigsRequest{Topic: topic}
	for _, key := range slices.Sorted(maps.Keys(set)) {
		req.Changes = append(req.Changes, &messages.ConfigChange{Key: key, Op: messages.ConfigChange_SET, Value: set[key]})
	}
	for _, key := range remove {
		req.Changes = append(req.Changes, &messages.ConfigChange{Key: key, Op: messages.ConfigChange_DELETE})
	}
	res, err := c.adminChange(ctx, req, func() {})
	if err != nil {
		return nil, err
	}
	r, err := answer[*messages.AlterTopicConfigsResponse](res, req)
	if err != nil {
		return nil, err
	}
	return r.GetTopic(), nil
}

// initProducerID asks a broker for a new producer id and epoch.
func (c *Client) initProducerID(ctx context.Context) (int64, int16, error) {
	res, err := c.adminChange(ctx, &messages.InitProducerIdRequest{}, func() {})
	if err != nil {
		return 0, 0, err
	}
	r, err := answer[*messages.InitProducerIdResponse](res, &messages.InitProducerIdRequest{})
	if err != nil {
		return 0, 0, err
	}
	return r.GetProducerId(), int16(r.GetProducerEpoch()), nil
}

// partitionRequest sends msg to a partition's leader, refreshing metadata
// and sending it again once when the leader is not known or has moved, or
// its connection dropped before the answer came.
func (c *Client) partitionRequest(ctx context.Context, topic string, partition int32, msg any) (any, error) {
	for attempt := 0; ; attempt++ {
		pid, err := c.partitionLeader(ctx, topic, partition)
		if err != nil {
			return nil, err
		}
		res, err := c.request(ctx, pid, msg, c.cfg.requestTimeout)
		if errors.Is(err, ErrConnectionLost) && attempt == 0 {
			if _, err := c.Metadata(ctx, topic); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		if r, ok := res.(codedResponse); ok && attempt == 0 && needsMetadata(r.GetError()) {
			c.forget(topic)
			continue
		}
		return res, nil
	}
}

// PartitionStatus returns a partition's log state from its leader.
func (c *Client) PartitionStatus(ctx context.Context, topic string, partition int32) (*messages.PartitionStatusResponse, error) {
	res, err := c.partitionRequest(ctx, topic, partition, &messages.PartitionStatusRequest{})
	if err != nil {
		return nil, err
	}
	return answer[*messages.PartitionStatusResponse](res, &messages.PartitionStatusRequest{})
}

// Timestamps with a special meaning in ListOffset.
const (
	// LatestOffset asks for the offset after the last record.
	LatestOffset int64 = -1
	// EarliestOffset asks for the first offset still stored.
	EarliestOffset int64 = -2
)

// ListOffset returns the first offset whose timestamp (ms) is at or after
// timestamp, or, for EarliestOffset (-2) and LatestOffset (-1), the log start
// and end offsets. It returns -1 when no record is that recent.
// A new leader answers OFFSET_NOT_AVAILABLE until its high watermark has
// caught up (KIP-207); ListOffset asks again until the request timeout.
func (c *Client) ListOffset(ctx context.Context, topic string, partition int32, timestamp int64) (int64, error) {
	req := &messages.ListOffsetsRequest{Topic: topic, Partition: partition, Timestamp: timestamp}
	res, err := c.askAgain(ctx, func() (any, error) { return c.partitionRequest(ctx, topic, partition, req) }, func(code messages.ErrorCode) bool {
		return code == messages.ErrorCode_OFFSET_NOT_AVAILABLE
	})
	if err != nil {
		return 0, err
	}
	r, err := answer[*messages.ListOffsetsResponse](res, &messages.ListOffsetsRequest{})
	if err != nil {
		return 0, err
	}
	return r.GetOffset(), nil
}
