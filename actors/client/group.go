package client

// Consumer groups, on the client side.
//
// Addressing: every node runs a coordinator actor,
// actor.NewPID(address, GroupsActorName). It answers FindCoordinatorRequest
// with the address and actor name of the group's actor (on the node leading
// the group's partition of __consumer_offsets), and ListGroupsRequest with
// the groups it coordinates. The group actor answers JoinGroup, Heartbeat,
// LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroup and DeleteGroup (see
// messages/groups.proto). NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE and
// COORDINATOR_LOAD_IN_PROGRESS make the client find the coordinator again.
//
// Membership: assignment happens on the server. A JoinGroupResponse carries
// the member's generation and partitions. With "cooperative-sticky" a member
// keeps what it owns across a rebalance and gives up only what the answer no
// longer holds (the answer then says rejoin, and the member joins again);
// with an eager assignor ("range", "roundrobin") a member gives up all its
// partitions before it joins again. Giving up a partition means: stop
// fetching it and drop what was prefetched of it, commit the position of
// what Poll returned of it (with auto-commit), call OnRevoked. A member that
// learns it is no longer in the generation (UNKNOWN_MEMBER_ID,
// ILLEGAL_GENERATION, or no successful heartbeat for the session timeout)
// has lost its partitions: it drops them without committing, calls OnLost,
// and joins again.
//
// Offsets: a committed offset is the offset of the next record to read, as
// in Kafka. Positions committed are always those after records Poll has
// already returned (at least once): auto-commit runs inside Poll, after the
// caller is done with the records of the previous Poll, and inside Close.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/depot-dev/depot/messages"
)

// GroupsActorName is the name of every node's group coordinator actor.
const GroupsActorName = "groups"

// Assignor names, in Kafka's spelling.
const (
	AssignorCooperativeSticky = "cooperative-sticky"
	AssignorRange             = "range"
	AssignorRoundRobin        = "roundrobin"
)

// Sentinels for group error codes.
var (
	ErrCoordinatorNotAvailable = &Error{Code: messages.ErrorCode_COORDINATOR_NOT_AVAILABLE}
	ErrNotCoordinator          = &Error{Code: messages.ErrorCode_NOT_COORDINATOR}
	ErrIllegalGeneration       = &Error{Code: messages.ErrorCode_ILLEGAL_GENERATION}
	ErrUnknownMemberID         = &Error{Code: messages.ErrorCode_UNKNOWN_MEMBER_ID}
	ErrRebalanceInProgress     = &Error{Code: messages.ErrorCode_REBALANCE_IN_PROGRESS}
	ErrInvalidGroupID          = &Error{Code: messages.ErrorCode_INVALID_GROUP_ID}
	ErrNonEmptyGroup           = &Error{Code: messages.ErrorCode_NON_EMPTY_GROUP}
	ErrGroupIDNotFound         = &Error{Code: messages.ErrorCode_GROUP_ID_NOT_FOUND}
	ErrFencedInstanceID        = &Error{Code: messages.ErrorCode_FENCED_INSTANCE_ID}
)

// Errors of the group consumer that do not come from a broker.
var (
	// ErrSessionExpired means no heartbeat succeeded for the session
	// timeout: the member's partitions are lost.
	ErrSessionExpired = errors.New("client: group session expired")
	// ErrCommitFailed means the group rebalanced or dropped the member
	// before the commit arrived; the error also wraps the broker's code.
	ErrCommitFailed = errors.New("client: commit failed")
	// ErrNoOffset means a partition has no committed offset and the reset
	// policy is ResetNone.
	ErrNoOffset = errors.New("client: no committed offset")
)

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String is "topic-partition", as Kafka prints it.
func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// sortPartitions sorts by topic, then partition.
func sortPartitions(tps []TopicPartition) []TopicPartition {
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
	return tps
}

func partitionsOf(set map[TopicPartition]bool) []TopicPartition {
	return sortPartitions(slices.Collect(maps.Keys(set)))
}

// GroupOpt configures a GroupConsumer. Every ConsumerOpt is a GroupOpt too
// and configures the group consumer's fetcher.
type GroupOpt interface{ applyGroup(*groupConfig) }

type groupOpt func(*groupConfig)

func (o groupOpt) applyGroup(c *groupConfig) { o(c) }

func (o ConsumerOpt) applyGroup(c *groupConfig) { c.consumerOpts = append(c.consumerOpts, o) }

// PartitionsCallback is told of partitions given or taken. It runs on the
// goroutine calling Poll (or Close), with that call's context.
type PartitionsCallback func(ctx context.Context, partitions []TopicPartition)

type groupConfig struct {
	sessionTimeout    time.Duration
	rebalanceTimeout  time.Duration
	heartbeatInterval time.Duration
	instanceID        string
	clientID          string
	assignors         []string
	autoCommit        time.Duration
	reset             ResetPolicy
	onAssigned        PartitionsCallback
	onRevoked         PartitionsCallback
	onLost            PartitionsCallback
	consumerOpts      []ConsumerOpt
}

// SessionTimeout is how long the group waits for a heartbeat before it
// drops the member; the member counts its partitions lost after as long
// without a successful heartbeat. Default 10s, as Kafka's
// session.timeout.ms.
func SessionTimeout(d time.Duration) GroupOpt {
	return groupOpt(func(c *groupConfig) { c.sessionTimeout = d })
}

// RebalanceTimeout is how long the group waits for members to rejoin during
// a rebalance. Default 30s.
func RebalanceTimeout(d time.Duration) GroupOpt {
	return groupOpt(func(c *groupConfig) { c.rebalanceTimeout = d })
}

// HeartbeatInterval is the time between heartbeats, sent in the background
// whether or not Poll is called. Default 3s, as Kafka's
// heartbeat.interval.ms; it must be below the session timeout.
func HeartbeatInterval(d time.Duration) GroupOpt {
	return groupOpt(func(c *groupConfig) { c.heartbeatInterval = d })
}

// InstanceID makes the member static (Kafka's group.instance.id): a restart
// within the session timeout keeps its partitions without a rebalance, and
// Close does not leave the group. Default: dynamic membership.
func InstanceID(id string) GroupOpt {
	return groupOpt(func(c *groupConfig) { c.instanceID = id })
}

// GroupClientID is the client id the group shows for this member. Default
// "depot".
func GroupClientID(id string) GroupOpt {
	return groupOpt(func(c *groupConfig) { c.clientID = id })
}

// Assignors names the assignors this member supports, in preference order:
// AssignorCooperativeSticky, AssignorRange, AssignorRoundRobin. Default
// cooperative-sticky, then range.
func Assignors(names ...string) GroupOpt {
	return groupOpt(func(c *groupConfig) { c.assignors = append([]string(nil), names...) })
}

// AutoCommit commits the positions of records already returned, at most
// every interval, from within Poll, and on Close and before giving up
// partitions. Default on, every 5s; 0 disables.
func AutoCommit(interval time.Duration) GroupOpt {
	return groupOpt(func(c *groupConfig) { c.autoCommit = interval })
}

// ResetOffset says where a partition with no committed offset starts
// (ResetEarliest or ResetLatest; ResetNone makes Poll fail with
// ErrNoOffset), and where a committed offset out of range restarts.
// Default ResetLatest, as Kafka's auto.offset.reset. It overrides a Reset
// consumer option.
func ResetOffset(p ResetPolicy) GroupOpt {
	return groupOpt(func(c *groupConfig) { c.reset = p })
}

// OnAssigned is called with the partitions newly given to this member,
// after each join that gives some, before fetching them. Default none.
func OnAssigned(fn PartitionsCallback) GroupOpt {
	return groupOpt(func(c *groupConfig) { c.onAssigned = fn })
}

// OnRevoked is called with the partitions this member gives up in a
// rebalance or on Close, after fetching them stopped and (with auto-commit)
// their positions were committed; a commit inside the callback still works.
// No record of them is returned after it. Default none.
func OnRevoked(fn PartitionsCallback) GroupOpt {
	return groupOpt(func(c *groupConfig) { c.onRevoked = fn })
}

// OnLost is called with the partitions this member lost without a chance to
// commit (the group dropped it, or its session expired); others may already
// own them. Default none.
func OnLost(fn PartitionsCallback) GroupOpt {
	return groupOpt(func(c *groupConfig) { c.onLost = fn })
}

// coordinatorCache finds a group's coordinator and remembers it. Safe for
// concurrent use.
type coordinatorCache struct {
	group string
	mu    sync.Mutex
	pid   *actor.PID
}

func (cc *coordinatorCache) get(ctx context.Context, c *Client) (*actor.PID, error) {
	cc.mu.Lock()
	pid := cc.pid
	cc.mu.Unlock()
	if pid != nil {
		return pid, nil
	}
	pid, err := c.findCoordinator(ctx, cc.group)
	if err != nil {
		return nil, err
	}
	cc.mu.Lock()
	cc.pid = pid
	cc.mu.Unlock()
	return pid, nil
}

// forget drops pid, so the next request finds the coordinator again.
func (cc *coordinatorCache) forget(pid *actor.PID) {
	cc.mu.Lock()
	if cc.pid != nil && pid != nil && cc.pid.Equal(pid) {
		cc.pid = nil
	}
	cc.mu.Unlock()
}

// coordinatorMoved reports whether code means: ask for the coordinator again.
func coordinatorMoved(code messages.ErrorCode) bool {
	return code == messages.ErrorCode_NOT_COORDINATOR ||
		code == messages.ErrorCode_COORDINATOR_NOT_AVAILABLE ||
		code == messages.ErrorCode_COORDINATOR_LOAD_IN_PROGRESS
}

// coordinatorAttempts bounds the tries of one request to a coordinator that
// moves or does not answer; the pauses between them grow from 50ms to 1s.
const coordinatorAttempts = 10

// sleepCtx pauses for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// findCoordinator asks the brokers' coordinator actors in turn where
// group's actor lives.
func (c *Client) findCoordinator(ctx context.Context, group string) (*actor.PID, error) {
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		var unreachable []string
		var lastErr error
		for range c.cfg.brokers {
			_, addr := c.metadataPID()
			res, err := c.request(ctx, actor.NewPID(addr, GroupsActorName), &messages.FindCoordinatorRequest{GroupId: group}, c.contactTimeout())
			if err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				switch {
				case errors.Is(err, ErrTimeout), errors.Is(err, ErrConnectionLost):
					unreachable = append(unreachable, addr)
					lastErr = fmt.Errorf("%w: %s", ErrUnreachable, addr)
				case errors.Is(err, actor.ErrDeadLetter):
					lastErr = fmt.Errorf("%w: %s has no %q actor", ErrCoordinatorNotAvailable, addr, GroupsActorName)
				default:
					lastErr = err
				}
				continue
			}
			c.contacted.Store(true)
			r, ok := res.(*messages.FindCoordinatorResponse)
			if !ok {
				return nil, fmt.Errorf("%w: %T to a FindCoordinatorRequest", ErrBadResponse, res)
			}
			if r.GetError() == messages.ErrorCode_NONE {
				if r.GetAddress() == "" || r.GetActorName() == "" {
					return nil, fmt.Errorf("%w: coordinator of %q without an address", ErrBadResponse, group)
				}
				return actor.NewPID(r.GetAddress(), r.GetActorName()), nil
			}
			lastErr = codeError(r.GetError(), r.GetErrorMessage())
			if !coordinatorMoved(r.GetError()) {
				return nil, fmt.Errorf("client: find coordinator of group %q: %w", group, lastErr)
			}
			break
		}
		if len(unreachable) == len(c.cfg.brokers) || attempt >= coordinatorAttempts {
			return nil, fmt.Errorf("client: find coordinator of group %q: %w", group, lastErr)
		}
		if err := sleepCtx(ctx, backoff); err != nil {
			return nil, err
		}
		backoff = min(2*backoff, time.Second)
	}
}

// codedResponse is every group response: an error code and its detail.
type codedResponse interface {
	GetError() messages.ErrorCode
	GetErrorMessage() string
}

// callCoordinator sends msg to the group's coordinator, finding it again
// and resending when it moved, did not answer, or its connection dropped.
// It returns the response and, for an error code other than NONE, an
// *Error.
func callCoordinator[T codedResponse](ctx context.Context, c *Client, cc *coordinatorCache, msg any, timeout time.Duration) (T, error) {
	var zero T
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		pid, err := cc.get(ctx, c)
		if err != nil {
			return zero, err
		}
		res, err := c.request(ctx, pid, msg, timeout)
		if err == nil {
			r, ok := res.(T)
			if !ok {
				return zero, fmt.Errorf("%w: %T to a %T", ErrBadResponse, res, msg)
			}
			if !coordinatorMoved(r.GetError()) || attempt >= coordinatorAttempts {
				return r, codeError(r.GetError(), r.GetErrorMessage())
			}
		} else if ctx.Err() != nil || attempt >= coordinatorAttempts ||
			!(errors.Is(err, ErrTimeout) || errors.Is(err, actor.ErrDeadLetter) || errors.Is(err, ErrConnectionLost)) {
			return zero, err
		}
		cc.forget(pid)
		if err := sleepCtx(ctx, backoff); err != nil {
			return zero, err
		}
		backoff = min(2*backoff, time.Second)
	}
}

// ---- admin ----

// checkGroupID refuses an empty group id.
func checkGroupID(group string) error {
	if group == "" {
		return &Error{Code: messages.ErrorCode_INVALID_GROUP_ID, Message: "empty group id"}
	}
	return nil
}

// ListGroups asks every node's coordinator for its groups and returns them
// all, sorted by id.
func (c *Client) ListGroups(ctx context.Context) ([]*messages.GroupListing, error) {
	md, err := c.Metadata(ctx)
	if err != nil {
		return nil, err
	}
	var addrs []string
	for _, b := range md.GetBrokers() {
		if b.GetAddress() != "" && !slices.Contains(addrs, b.GetAddress()) {
			addrs = append(addrs, b.GetAddress())
		}
	}
	if len(addrs) == 0 {
		addrs = c.cfg.brokers
	}
	seen := map[string]bool{}
	groups := []*messages.GroupListing{}
	for _, addr := range addrs {
		r, err := nodeRequest[*messages.ListGroupsResponse](ctx, c, addr, GroupsActorName, &messages.ListGroupsRequest{})
		if err != nil {
			return nil, fmt.Errorf("client: list groups: %w", err)
		}
		if err := codeError(r.GetError(), r.GetErrorMessage()); err != nil {
			return nil, fmt.Errorf("client: list groups on %s: %w", addr, err)
		}
		for _, g := range r.GetGroups() {
			if !seen[g.GetGroupId()] {
				seen[g.GetGroupId()] = true
				groups = append(groups, g)
			}
		}
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].GetGroupId() < groups[j].GetGroupId() })
	return groups, nil
}

// DescribeGroup returns a group's state, generation, assignor, members with
// their assignments, and committed offsets. A group that does not exist is
// ErrGroupIDNotFound.
func (c *Client) DescribeGroup(ctx context.Context, group string) (*messages.DescribeGroupResponse, error) {
	if err := checkGroupID(group); err != nil {
		return nil, err
	}
	r, err := callCoordinator[*messages.DescribeGroupResponse](ctx, c, &coordinatorCache{group: group}, &messages.DescribeGroupRequest{GroupId: group}, c.cfg.requestTimeout)
	if err != nil {
		return nil, fmt.Errorf("client: describe group %q: %w", group, err)
	}
	if r.GetState() == "Dead" && len(r.GetMembers()) == 0 && len(r.GetOffsets()) == 0 {
		return nil, fmt.Errorf("client: describe group %q: %w", group, &Error{Code: messages.ErrorCode_GROUP_ID_NOT_FOUND, Message: group})
	}
	return r, nil
}

// DeleteGroup removes an empty group and its committed offsets; a group
// with members is ErrNonEmptyGroup.
func (c *Client) DeleteGroup(ctx context.Context, group string) error {
	if err := checkGroupID(group); err != nil {
		return err
	}
	_, err := callCoordinator[*messages.DeleteGroupResponse](ctx, c, &coordinatorCache{group: group}, &messages.DeleteGroupRequest{GroupId: group}, c.cfg.requestTimeout)
	if err != nil {
		return fmt.Errorf("client: delete group %q: %w", group, err)
	}
	return nil
}

// CommittedOffsets returns the group's committed offsets (the next offset
// to read) of every partition it committed.
func (c *Client) CommittedOffsets(ctx context.Context, group string) (map[TopicPartition]int64, error) {
	if err := checkGroupID(group); err != nil {
		return nil, err
	}
	return offsetFetch(ctx, c, &coordinatorCache{group: group}, nil)
}

// offsetFetch returns the committed offsets of tps (all the group's when
// empty); a partition with nothing committed is absent.
func offsetFetch(ctx context.Context, c *Client, cc *coordinatorCache, tps []TopicPartition) (map[TopicPartition]int64, error) {
	req := &messages.OffsetFetchRequest{GroupId: cc.group}
	for _, tp := range tps {
		req.Partitions = append(req.Partitions, &messages.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
	}
	r, err := callCoordinator[*messages.OffsetFetchResponse](ctx, c, cc, req, c.cfg.requestTimeout)
	if err != nil {
		return nil, fmt.Errorf("client: fetch offsets of group %q: %w", cc.group, err)
	}
	out := map[TopicPartition]int64{}
	for _, o := range r.GetOffsets() {
		tp := TopicPartition{o.GetTopic(), o.GetPartition()}
		if err := codeError(o.GetError(), ""); err != nil {
			return nil, fmt.Errorf("client: fetch offset of group %q, %s: %w", cc.group, tp, err)
		}
		if o.GetOffset() >= 0 {
			out[tp] = o.GetOffset()
		}
	}
	return out, nil
}

// AlterGroupOffsets sets a group's committed offsets (an admin commit:
// generation -1, no member). The group must have no member; otherwise the
// group refuses, with ErrNonEmptyGroup or the like.
func (c *Client) AlterGroupOffsets(ctx context.Context, group string, offsets map[TopicPartition]int64) error {
	if err := checkGroupID(group); err != nil {
		return err
	}
	return offsetCommit(ctx, c, &coordinatorCache{group: group}, "", -1, offsets)
}

// offsetCommit commits offsets as member of generation and checks each
// partition's answer.
func offsetCommit(ctx context.Context, c *Client, cc *coordinatorCache, member string, generation int32, offsets map[TopicPartition]int64) error {
	req := &messages.OffsetCommitRequest{GroupId: cc.group, MemberId: member, Generation: generation}
	for _, tp := range sortPartitions(slices.Collect(maps.Keys(offsets))) {
		req.Offsets = append(req.Offsets, &messages.PartitionOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: offsets[tp]})
	}
	r, err := callCoordinator[*messages.OffsetCommitResponse](ctx, c, cc, req, c.cfg.requestTimeout)
	if err != nil {
		return fmt.Errorf("client: commit offsets of group %q: %w", cc.group, err)
	}
	for _, o := range r.GetOffsets() {
		if err := codeError(o.GetError(), ""); err != nil {
			return fmt.Errorf("client: commit offset of group %q, %s-%d: %w", cc.group, o.GetTopic(), o.GetPartition(), err)
		}
	}
	return nil
}

// ---- the group consumer ----

// GroupConsumer consumes topics as a member of a consumer group: the group
// assigns it partitions, it fetches them from their committed offsets, and
// commits how far it got. Poll, the Commit methods and Close are called
// from one goroutine (Kafka's rule); callbacks run on it. Heartbeats go out
// from a goroutine of the consumer's own, and commits are sent in order by
// another.
type GroupConsumer struct {
	client *Client
	cons   *Consumer
	group  string
	topics []string
	cfg    groupConfig
	coord  *coordinatorCache
	logger *logrus.Entry

	// Owned by the goroutine calling Poll.
	joined         bool
	cooperative    bool
	assigned       map[TopicPartition]bool  // owned in the current generation
	unstarted      map[TopicPartition]bool  // owned, start offset not yet known
	positions      map[TopicPartition]int64 // offset after the last record returned
	lastAutoCommit time.Time

	mu         sync.Mutex // guards what the heartbeat and commit goroutines share
	memberID   string
	generation int32
	assignor   string
	joining    bool
	// pendingJoin is a JoinGroupRequest sent and not yet answered; owned by
	// the goroutine calling Poll.
	pendingJoin   <-chan joinResult
	rejoin        bool  // the group is rebalancing
	lost          error // the member is out of its generation
	lastHeartbeat time.Time
	committed     map[TopicPartition]int64 // last acknowledged commit

	closed        atomic.Bool
	autoPending   atomic.Bool
	commits       chan commitJob
	commitsDone   chan struct{}
	stop          chan struct{}
	heartbeatDone chan struct{}
}

// commitJob is one commit, sent by the commit goroutine in queue order.
type commitJob struct {
	ctx        context.Context
	offsets    map[TopicPartition]int64
	memberID   string
	generation int32
	done       func(error)
}

// NewGroupConsumer returns a consumer of topics in group. It joins the
// group on the first Poll.
func (c *Client) NewGroupConsumer(group string, topics []string, opts ...GroupOpt) (*GroupConsumer, error) {
	if err := checkGroupID(group); err != nil {
		return nil, err
	}
	if len(topics) == 0 || slices.Contains(topics, "") {
		return nil, errors.New("client: a group consumer needs topics")
	}
	cfg := groupConfig{
		sessionTimeout:    10 * time.Second,
		rebalanceTimeout:  30 * time.Second,
		heartbeatInterval: 3 * time.Second,
		clientID:          "depot",
		assignors:         []string{AssignorCooperativeSticky, AssignorRange},
		autoCommit:        5 * time.Second,
		reset:             ResetLatest,
	}
	for _, o := range opts {
		o.applyGroup(&cfg)
	}
	if cfg.sessionTimeout <= 0 || cfg.rebalanceTimeout <= 0 || cfg.heartbeatInterval <= 0 || cfg.autoCommit < 0 {
		return nil, errors.New("client: group timeouts must be positive")
	}
	if cfg.heartbeatInterval >= cfg.sessionTimeout {
		return nil, fmt.Errorf("client: heartbeat interval %v must be below the session timeout %v", cfg.heartbeatInterval, cfg.sessionTimeout)
	}
	if len(cfg.assignors) == 0 || slices.Contains(cfg.assignors, "") {
		return nil, errors.New("client: a group consumer needs assignors")
	}
	cons, err := c.NewConsumer(append(slices.Clone(cfg.consumerOpts), Reset(cfg.reset))...)
	if err != nil {
		return nil, err
	}
	g := &GroupConsumer{
		client:        c,
		cons:          cons,
		group:         group,
		topics:        slices.Clone(topics),
		cfg:           cfg,
		coord:         &coordinatorCache{group: group},
		logger:        c.logger.WithFields(logrus.Fields{"actor": "group-consumer", "group": group}),
		assigned:      map[TopicPartition]bool{},
		unstarted:     map[TopicPartition]bool{},
		positions:     map[TopicPartition]int64{},
		generation:    -1,
		committed:     map[TopicPartition]int64{},
		commits:       make(chan commitJob, 64),
		commitsDone:   make(chan struct{}),
		stop:          make(chan struct{}),
		heartbeatDone: make(chan struct{}),
	}
	go g.heartbeatLoop()
	go g.commitLoop()
	return g, nil
}

// Group is the group's id.
func (g *GroupConsumer) Group() string { return g.group }

// MemberID is the member id the group gave this consumer, empty before the
// first join. Safe for concurrent use.
func (g *GroupConsumer) MemberID() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.memberID
}

// Generation is the group generation this consumer is in, -1 when none.
// Safe for concurrent use.
func (g *GroupConsumer) Generation() int32 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.generation
}

// Assigned returns the partitions this consumer owns, sorted.
func (g *GroupConsumer) Assigned() []TopicPartition { return partitionsOf(g.assigned) }

// Poll joins the group if needed, handles a rebalance or a lost membership
// the heartbeats reported, commits when auto-commit is due, then waits
// until records of the owned partitions arrive, or ctx ends. It returns at
// most MaxPollRecords records (500 by default), in offset order within
// each partition.
func (g *GroupConsumer) Poll(ctx context.Context) ([]*Record, error) {
	for {
		if g.closed.Load() {
			return nil, ErrClosed
		}
		if err := g.ensureActive(ctx); err != nil {
			return nil, err
		}
		g.maybeAutoCommit()
		records, err := g.cons.poll(ctx, g.interrupted)
		out := records[:0]
		for _, r := range records {
			tp := TopicPartition{r.Topic, r.Partition}
			if !g.assigned[tp] || g.unstarted[tp] {
				continue // given up while it was being decoded
			}
			out = append(out, r)
			g.positions[tp] = r.Offset + 1
		}
		if err != nil || len(out) > 0 {
			return out, err
		}
	}
}

// interrupted reports whether the heartbeats asked Poll to act.
func (g *GroupConsumer) interrupted() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.rejoin || g.lost != nil
}

// ensureActive brings the membership up to date: lost partitions are
// dropped, a rebalance is joined, start offsets are resolved.
func (g *GroupConsumer) ensureActive(ctx context.Context) error {
	g.mu.Lock()
	lost, rejoin := g.lost, g.rejoin
	g.mu.Unlock()
	if lost != nil {
		g.handleLost(ctx, lost)
	}
	if rejoin || lost != nil {
		g.joined = false
	}
	if !g.joined {
		if err := g.join(ctx); err != nil {
			return err
		}
	}
	if len(g.unstarted) > 0 {
		return g.startPartitions(ctx)
	}
	return nil
}

// handleLost drops every owned partition without committing, tells OnLost,
// and leaves the member to join again.
func (g *GroupConsumer) handleLost(ctx context.Context, cause error) {
	lost := partitionsOf(g.assigned)
	g.logger.WithError(cause).WithField("partitions", len(lost)).Warn("group membership lost")
	if err := g.cons.unassign(ctx, g.assigned); err != nil {
		g.logger.WithError(err).Warn("stop fetching lost partitions")
	}
	g.assigned, g.unstarted, g.positions = map[TopicPartition]bool{}, map[TopicPartition]bool{}, map[TopicPartition]int64{}
	g.mu.Lock()
	g.lost = nil
	g.generation = -1
	if errors.Is(cause, ErrUnknownMemberID) || errors.Is(cause, ErrSessionExpired) {
		g.memberID = ""
	}
	g.mu.Unlock()
	if g.cfg.onLost != nil && len(lost) > 0 {
		g.cfg.onLost(ctx, lost)
	}
}

// revoke gives up partitions: stop fetching them and drop what was
// prefetched, commit their positions (with auto-commit), tell OnRevoked,
// forget them.
func (g *GroupConsumer) revoke(ctx context.Context, revoked []TopicPartition) {
	set := map[TopicPartition]bool{}
	for _, tp := range revoked {
		set[tp] = true
	}
	if err := g.cons.unassign(ctx, set); err != nil {
		g.logger.WithError(err).Warn("stop fetching revoked partitions")
	}
	if g.cfg.autoCommit > 0 {
		offsets := map[TopicPartition]int64{}
		for _, tp := range revoked {
			if pos, ok := g.positions[tp]; ok && !g.unstarted[tp] {
				offsets[tp] = pos
			}
		}
		if err := g.CommitOffsets(ctx, offsets); err != nil {
			g.logger.WithError(err).Warn("commit revoked partitions")
		}
	}
	g.logger.WithField("partitions", revoked).Info("partitions revoked")
	if g.cfg.onRevoked != nil {
		g.cfg.onRevoked(ctx, revoked)
	}
	for _, tp := range revoked {
		delete(g.assigned, tp)
		delete(g.unstarted, tp)
		delete(g.positions, tp)
	}
}

// join joins the group until a generation settles with this member in it.
func (g *GroupConsumer) join(ctx context.Context) error {
	backoff := 50 * time.Millisecond
	pause := func() error {
		err := sleepCtx(ctx, backoff)
		backoff = min(2*backoff, time.Second)
		return err
	}
	for {
		if !g.cooperative && len(g.assigned) > 0 {
			g.revoke(ctx, partitionsOf(g.assigned)) // eager: give all up first
		}
		req := &messages.JoinGroupRequest{
			GroupId:            g.group,
			GroupInstanceId:    g.cfg.instanceID,
			SessionTimeoutMs:   int32(g.cfg.sessionTimeout.Milliseconds()),
			RebalanceTimeoutMs: int32(g.cfg.rebalanceTimeout.Milliseconds()),
			Topics:             g.topics,
			Assignors:          g.cfg.assignors,
			ClientId:           g.cfg.clientID,
		}
		for _, tp := range partitionsOf(g.assigned) {
			req.Owned = append(req.Owned, &messages.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
		}
		if g.pendingJoin == nil {
			g.mu.Lock()
			req.MemberId = g.memberID
			g.joining = true
			g.mu.Unlock()
			g.pendingJoin = g.sendJoin(req)
		}
		// A join outlives the Poll that sent it: the group may hold it until
		// every member has rejoined, and sending another would make this
		// consumer a second member. A Poll that ends first leaves it pending
		// for the next.
		var r *messages.JoinGroupResponse
		var err error
		select {
		case res := <-g.pendingJoin:
			r, err = res.response, res.err
		case <-ctx.Done():
			return ctx.Err()
		}
		g.pendingJoin = nil
		g.mu.Lock()
		g.joining = false
		g.mu.Unlock()
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, ErrUnknownMemberID), errors.Is(err, ErrIllegalGeneration):
			if len(g.assigned) > 0 {
				g.handleLost(ctx, err)
			}
			g.mu.Lock()
			g.memberID, g.generation = "", -1
			g.mu.Unlock()
			continue
		case errors.Is(err, ErrRebalanceInProgress), errors.Is(err, ErrTimeout), errors.Is(err, ErrNotCoordinator),
			errors.Is(err, ErrCoordinatorNotAvailable), errors.Is(err, ErrConnectionLost):
			if err := pause(); err != nil {
				return err
			}
			continue
		default:
			return fmt.Errorf("client: join group %q: %w", g.group, err)
		}
		g.applyAssignment(ctx, r)
		if !g.joined {
			continue // the answer asked for another join
		}
		return nil
	}
}

// joinResult is the outcome of a JoinGroupRequest.
type joinResult struct {
	response *messages.JoinGroupResponse
	err      error
}

// sendJoin sends req to the coordinator on its own goroutine, bounded by the
// rebalance timeout plus the request timeout, not by the caller's context.
func (g *GroupConsumer) sendJoin(req *messages.JoinGroupRequest) <-chan joinResult {
	done := make(chan joinResult, 1)
	timeout := g.cfg.rebalanceTimeout + g.client.cfg.requestTimeout
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		r, err := callCoordinator[*messages.JoinGroupResponse](ctx, g.client, g.coord, req, timeout)
		done <- joinResult{response: r, err: err}
	}()
	return done
}

// applyAssignment takes a join's answer: give up what it no longer holds,
// take what it adds, and say whether the member is done joining.
func (g *GroupConsumer) applyAssignment(ctx context.Context, r *messages.JoinGroupResponse) {
	next := map[TopicPartition]bool{}
	for _, tp := range r.GetAssignment() {
		next[TopicPartition{tp.GetTopic(), tp.GetPartition()}] = true
	}
	var revoked, added []TopicPartition
	for tp := range g.assigned {
		if !next[tp] {
			revoked = append(revoked, tp)
		}
	}
	for tp := range next {
		if !g.assigned[tp] {
			added = append(added, tp)
		}
	}
	g.mu.Lock()
	g.memberID, g.generation, g.assignor = r.GetMemberId(), r.GetGeneration(), r.GetAssignor()
	g.lastHeartbeat = time.Now()
	g.rejoin = false
	g.mu.Unlock()
	g.cooperative = r.GetAssignor() == AssignorCooperativeSticky
	if g.lastAutoCommit.IsZero() {
		g.lastAutoCommit = time.Now()
	}
	g.logger.WithFields(logrus.Fields{"generation": r.GetGeneration(), "assignor": r.GetAssignor(), "partitions": len(next), "rejoin": r.GetRejoin()}).Info("joined group")
	if len(revoked) > 0 {
		g.revoke(ctx, sortPartitions(revoked))
	}
	if len(added) > 0 {
		sortPartitions(added)
		for _, tp := range added {
			g.assigned[tp] = true
			g.unstarted[tp] = true
		}
		if g.cfg.onAssigned != nil {
			g.cfg.onAssigned(ctx, added)
		}
	}
	// Partitions given up cooperatively go to others only in another round.
	g.joined = !r.GetRejoin() && !(g.cooperative && len(revoked) > 0)
}

// startPartitions fetches the committed offsets of newly owned partitions
// (the reset policy where none is committed) and starts fetching them.
func (g *GroupConsumer) startPartitions(ctx context.Context) error {
	tps := partitionsOf(g.unstarted)
	committed, err := offsetFetch(ctx, g.client, g.coord, tps)
	if err != nil {
		return err
	}
	for _, tp := range tps {
		offset, ok := committed[tp]
		if !ok {
			var at int64
			switch g.cfg.reset {
			case ResetEarliest:
				at = EarliestOffset
			case ResetLatest:
				at = LatestOffset
			default:
				return fmt.Errorf("%w: group %q, %s", ErrNoOffset, g.group, tp)
			}
			if offset, err = g.client.ListOffset(ctx, tp.Topic, tp.Partition, at); err != nil {
				return fmt.Errorf("client: reset offset of %s: %w", tp, err)
			}
		}
		if ok {
			g.mu.Lock()
			g.committed[tp] = offset
			g.mu.Unlock()
		}
		g.positions[tp] = offset
		delete(g.unstarted, tp)
		g.cons.Assign(tp.Topic, tp.Partition, AtOffset(offset))
	}
	return nil
}

// snapshot is the position of every started owned partition.
func (g *GroupConsumer) snapshot() map[TopicPartition]int64 {
	out := make(map[TopicPartition]int64, len(g.positions))
	for tp, pos := range g.positions {
		if g.assigned[tp] && !g.unstarted[tp] {
			out[tp] = pos
		}
	}
	return out
}

// maybeAutoCommit queues a commit of the positions that moved, when the
// interval has passed and no auto-commit is still in flight.
func (g *GroupConsumer) maybeAutoCommit() {
	if g.cfg.autoCommit <= 0 || !g.joined || time.Since(g.lastAutoCommit) < g.cfg.autoCommit || g.autoPending.Load() {
		return
	}
	g.lastAutoCommit = time.Now()
	offsets := g.snapshot()
	g.mu.Lock()
	for tp, pos := range offsets {
		if c, ok := g.committed[tp]; ok && c == pos {
			delete(offsets, tp)
		}
	}
	g.mu.Unlock()
	if len(offsets) == 0 {
		return
	}
	g.autoPending.Store(true)
	g.enqueue(context.Background(), offsets, func(err error) {
		g.autoPending.Store(false)
		if err != nil {
			g.logger.WithError(err).Warn("auto-commit")
		}
	})
}

// CommitSync commits the position after the last record Poll returned of
// every owned partition, and waits for the answer.
func (g *GroupConsumer) CommitSync(ctx context.Context) error {
	return g.CommitOffsets(ctx, g.snapshot())
}

// CommitAsync queues a commit of the positions CommitSync would commit;
// done, if not nil, is called with them and the outcome from another
// goroutine. Commits are sent in the order they were asked for.
func (g *GroupConsumer) CommitAsync(done func(offsets map[TopicPartition]int64, err error)) {
	offsets := g.snapshot()
	g.enqueue(context.Background(), offsets, func(err error) {
		if done != nil {
			done(offsets, err)
		}
	})
}

// CommitOffsets commits the given offsets (each the next offset to read) as
// a member of the current generation, and waits for the answer.
func (g *GroupConsumer) CommitOffsets(ctx context.Context, offsets map[TopicPartition]int64) error {
	result := make(chan error, 1)
	g.enqueue(ctx, offsets, func(err error) { result <- err })
	select {
	case err := <-result:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// enqueue hands a commit to the commit goroutine.
func (g *GroupConsumer) enqueue(ctx context.Context, offsets map[TopicPartition]int64, done func(error)) {
	if g.closed.Load() {
		done(ErrClosed)
		return
	}
	if len(offsets) == 0 {
		done(nil)
		return
	}
	g.mu.Lock()
	job := commitJob{ctx: ctx, offsets: maps.Clone(offsets), memberID: g.memberID, generation: g.generation, done: done}
	g.mu.Unlock()
	g.commits <- job
}

// commitLoop sends queued commits one at a time, so they arrive in order.
func (g *GroupConsumer) commitLoop() {
	defer close(g.commitsDone)
	for job := range g.commits {
		job.done(g.commit(job))
	}
}

func (g *GroupConsumer) commit(job commitJob) error {
	if job.memberID == "" || job.generation < 0 {
		return fmt.Errorf("%w: group %q: not a member of a generation", ErrCommitFailed, g.group)
	}
	ctx, cancel := context.WithTimeout(job.ctx, g.client.cfg.requestTimeout)
	defer cancel()
	err := offsetCommit(ctx, g.client, g.coord, job.memberID, job.generation, job.offsets)
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case err == nil:
		maps.Copy(g.committed, job.offsets)
		return nil
	case errors.Is(err, ErrUnknownMemberID), errors.Is(err, ErrIllegalGeneration), errors.Is(err, ErrFencedInstanceID):
		if job.generation == g.generation && g.lost == nil {
			g.lost = err
			g.cons.wake()
		}
	case errors.Is(err, ErrRebalanceInProgress):
		if job.generation == g.generation {
			g.rejoin = true
			g.cons.wake()
		}
	default:
		return err
	}
	return fmt.Errorf("%w: %w", ErrCommitFailed, err)
}

// heartbeatLoop sends a heartbeat every interval while the member is in a
// settled generation, until Close or until its client is closed.
func (g *GroupConsumer) heartbeatLoop() {
	defer close(g.heartbeatDone)
	ticker := time.NewTicker(g.cfg.heartbeatInterval)
	defer ticker.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-g.client.done:
			return // a closed client answers no heartbeat
		case <-ticker.C:
		}
		g.heartbeat()
	}
}

// heartbeat sends one heartbeat and records what it says: rebalance (the
// next Poll rejoins), lost membership (the next Poll drops the partitions),
// or a coordinator to find again. No success for the session timeout is a
// lost membership too.
func (g *GroupConsumer) heartbeat() {
	g.mu.Lock()
	if g.memberID == "" || g.generation < 0 || g.joining || g.lost != nil {
		g.mu.Unlock()
		return
	}
	req := &messages.HeartbeatRequest{GroupId: g.group, MemberId: g.memberID, Generation: g.generation, GroupInstanceId: g.cfg.instanceID}
	generation, last := g.generation, g.lastHeartbeat
	if time.Since(last) > g.cfg.sessionTimeout {
		g.lost = fmt.Errorf("%w: no heartbeat answered for %v", ErrSessionExpired, time.Since(last).Round(time.Millisecond))
		g.mu.Unlock()
		g.cons.wake()
		return
	}
	g.mu.Unlock()

	timeout := min(max(g.cfg.heartbeatInterval, 200*time.Millisecond), g.client.cfg.requestTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var code messages.ErrorCode
	var err error
	pid, err := g.coord.get(ctx, g.client)
	if err == nil {
		var res any
		if res, err = g.client.request(ctx, pid, req, timeout); err == nil {
			r, ok := res.(*messages.HeartbeatResponse)
			if !ok {
				err = fmt.Errorf("%w: %T to a HeartbeatRequest", ErrBadResponse, res)
			} else {
				code = r.GetError()
				err = codeError(code, r.GetErrorMessage())
			}
		}
		if errors.Is(err, ErrTimeout) || errors.Is(err, actor.ErrDeadLetter) || errors.Is(err, ErrConnectionLost) || coordinatorMoved(code) {
			g.coord.forget(pid)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.generation != generation || g.memberID != req.MemberId {
		return // answered for an earlier generation
	}
	switch code {
	case messages.ErrorCode_NONE:
		if err == nil {
			g.lastHeartbeat = time.Now()
		}
	case messages.ErrorCode_REBALANCE_IN_PROGRESS:
		g.lastHeartbeat = time.Now()
		if !g.rejoin {
			g.rejoin = true
			g.cons.wake()
		}
	case messages.ErrorCode_UNKNOWN_MEMBER_ID, messages.ErrorCode_ILLEGAL_GENERATION, messages.ErrorCode_FENCED_INSTANCE_ID:
		g.lost = err
		g.cons.wake()
	}
	if err != nil && code != messages.ErrorCode_REBALANCE_IN_PROGRESS {
		g.logger.WithError(err).Debug("heartbeat")
	}
}

// Close commits the positions of what Poll returned (with auto-commit),
// gives up the owned partitions (OnRevoked), leaves the group unless the
// member is static, and stops fetching. Poll then returns ErrClosed.
func (g *GroupConsumer) Close() {
	if g.closed.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.client.cfg.requestTimeout)
	defer cancel()
	if g.cfg.autoCommit > 0 && g.joined {
		if err := g.CommitSync(ctx); err != nil {
			g.logger.WithError(err).Warn("commit on close")
		}
	}
	if owned := partitionsOf(g.assigned); len(owned) > 0 && g.cfg.onRevoked != nil {
		g.cfg.onRevoked(ctx, owned)
	}
	g.closed.Store(true)
	close(g.stop)
	<-g.heartbeatDone
	close(g.commits)
	<-g.commitsDone
	g.mu.Lock()
	member := g.memberID
	g.mu.Unlock()
	if member != "" && g.cfg.instanceID == "" {
		_, err := callCoordinator[*messages.LeaveGroupResponse](ctx, g.client, g.coord, &messages.LeaveGroupRequest{GroupId: g.group, MemberId: member}, g.client.cfg.requestTimeout)
		if err != nil {
			g.logger.WithError(err).Warn("leave group")
		}
	}
	g.assigned, g.unstarted, g.positions = map[TopicPartition]bool{}, map[TopicPartition]bool{}, map[TopicPartition]int64{}
	g.cons.Close()
}
