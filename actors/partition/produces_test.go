package partition

import (
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/actors/remote"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
)

// gatherHost is the produce path of a partition manager alone:
// produceGathers over children that are test partitions.
type gatherHost struct {
	g        produceGathers
	children map[disk.TopicPartition]*actor.PID
}

func (h *gatherHost) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.ProduceRequests:
		h.g.route(ctx, m, h.children, "")
	case *messages.ProduceResponse:
		h.g.answered(ctx, m)
	case *gatherTick:
		h.g.expire(ctx, h.g.now())
	}
}

// testClock is a clock that moves only when a test advances it. Safe for
// concurrent use: the test moves it while actors read it.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock(start time.Time) *testClock {
	return &testClock{now: start}
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// testPartition answers each produce request with acks after delay, its
// base offset the count of requests it took before, and reports every
// request it takes; a silent one never answers.
type testPartition struct {
	delay  time.Duration
	silent bool
	taken  chan *messages.ProduceRequest
	count  int64
}

func (p *testPartition) Receive(ctx actor.Context) {
	m, ok := ctx.Message().(*messages.ProduceRequest)
	if !ok {
		return
	}
	p.taken <- m
	resp := &messages.ProduceResponse{Topic: m.Topic, Partition: m.Partition, CorrelationId: m.CorrelationId, BaseOffset: p.count}
	p.count++
	if p.silent || m.Acks == 0 {
		return
	}
	time.Sleep(p.delay)
	ctx.Respond(resp)
}

// inbox is an actor that hands what it receives to a channel.
type inbox chan any

func (in inbox) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(actor.SystemMessage); ok {
		return
	}
	switch ctx.Message().(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped:
		return
	}
	in <- ctx.Message()
}

func (in inbox) next(t *testing.T) any {
	t.Helper()
	select {
	case m := <-in:
		return m
	case <-time.After(5 * time.Second):
		require.FailNow(t, "nothing came")
		return nil
	}
}

func (in inbox) none(t *testing.T, wait time.Duration) {
	t.Helper()
	select {
	case m := <-in:
		require.FailNow(t, "unexpected message", "%T %v", m, m)
	case <-time.After(wait):
	}
}

// setupGathers spawns a gatherHost over partitions 0 (quick), 1 (slow) and
// 2 (silent) of topic "t", with its clock, and an inbox for its answers.
func setupGathers(t *testing.T) (system *actor.ActorSystem, host *actor.PID, parts []*testPartition, answers inbox, clock *testClock) {
	system = actortest.System(t)
	parts = []*testPartition{{}, {delay: 30 * time.Millisecond}, {silent: true}}
	clock = newTestClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	h := &gatherHost{g: newProduceGathers(1, remote.NewTransport(), actors.NewOutboxes(logrus.NewEntry(logrus.New()))), children: map[disk.TopicPartition]*actor.PID{}}
	h.g.now = clock.Now
	for i, p := range parts {
		p.taken = make(chan *messages.ProduceRequest, 16)
		h.children[disk.TopicPartition{Topic: "t", Partition: int32(i)}] = system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return p }))
	}
	host = system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return h }))
	answers = make(inbox, 16)
	return system, host, parts, answers, clock
}

func request(partition int32, acks int32, corrID int64) *messages.ProduceRequest {
	return &messages.ProduceRequest{Topic: "t", Partition: partition, Acks: acks, TimeoutMs: 1000, CorrelationId: corrID}
}

// The requests of a ProduceRequests reach their partitions in order, and
// their answers come back together in one ProduceResponses, in the order
// of the requests, with the producer's correlation ids, once the slowest
// partition has answered. A partition the node does not have is answered
// NOT_LEADER_OR_FOLLOWER; requests with acks 0 are handed on unanswered.
func TestProduceRequestsAnsweredTogether(t *testing.T) {
	system, host, parts, answers, _ := setupGathers(t)
	to := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return answers }))
	system.Root.RequestWithCustomSender(host, &messages.ProduceRequests{Requests: []*messages.ProduceRequest{
		request(1, 1, 101), request(0, -1, 102), request(9, 1, 103), request(0, 1, 104), request(0, 0, 105),
	}}, to)

	resps, ok := answers.next(t).(*messages.ProduceResponses)
	require.True(t, ok)
	got := resps.GetResponses()
	require.Len(t, got, 4)
	for i, want := range []struct {
		partition int32
		corrID    int64
		code      messages.ErrorCode
		offset    int64
	}{{1, 101, messages.ErrorCode_NONE, 0}, {0, 102, messages.ErrorCode_NONE, 0}, {9, 103, messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, -1}, {0, 104, messages.ErrorCode_NONE, 1}} {
		require.Equal(t, want.partition, got[i].GetPartition(), "answer %d", i)
		require.Equal(t, want.corrID, got[i].GetCorrelationId(), "answer %d", i)
		require.Equal(t, want.code, got[i].GetError(), "answer %d", i)
		require.Equal(t, want.offset, got[i].GetBaseOffset(), "answer %d", i)
	}
	require.Contains(t, got[2].GetErrorMessage(), "not on node 1")
	answers.none(t, 50*time.Millisecond)
	require.Len(t, parts[0].taken, 3, "partition 0 took its three requests")
	require.Equal(t, int32(-1), (<-parts[0].taken).GetAcks())
	require.Equal(t, int32(1), (<-parts[0].taken).GetAcks())
	require.Equal(t, int32(0), (<-parts[0].taken).GetAcks())
}

// A partition that never answers holds its ProduceRequests' answer until
// twice the requests' timeout, then is answered REQUEST_TIMED_OUT with the
// others' answers; a late answer is dropped. Gathers that do not wait on
// it are answered meanwhile.
func TestProduceRequestsExpire(t *testing.T) {
	system, host, parts, answers, clock := setupGathers(t)
	to := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return answers }))
	quick, stuck := request(0, 1, 200), request(2, 1, 201)
	quick.TimeoutMs, stuck.TimeoutMs = 100, 100
	system.Root.RequestWithCustomSender(host, &messages.ProduceRequests{Requests: []*messages.ProduceRequest{quick, stuck}}, to)
	system.Root.RequestWithCustomSender(host, &messages.ProduceRequests{Requests: []*messages.ProduceRequest{request(0, 1, 202)}}, to)

	resps := answers.next(t).(*messages.ProduceResponses).GetResponses()
	require.Len(t, resps, 1)
	require.Equal(t, int64(202), resps[0].GetCorrelationId())
	taken := <-parts[2].taken
	clock.Advance(199 * time.Millisecond) // short of twice the timeout
	system.Root.Send(host, &gatherTick{})
	answers.none(t, 50*time.Millisecond)

	clock.Advance(time.Millisecond) // at twice the timeout
	system.Root.Send(host, &gatherTick{})
	resps = answers.next(t).(*messages.ProduceResponses).GetResponses()
	require.Len(t, resps, 2)
	require.Equal(t, int64(200), resps[0].GetCorrelationId())
	require.Equal(t, messages.ErrorCode_NONE, resps[0].GetError())
	require.Equal(t, int64(201), resps[1].GetCorrelationId())
	require.Equal(t, int32(2), resps[1].GetPartition())
	require.Equal(t, messages.ErrorCode_REQUEST_TIMED_OUT, resps[1].GetError())

	// The partition answers at last: nobody waits.
	system.Root.Send(host, &messages.ProduceResponse{Topic: "t", Partition: 2, CorrelationId: taken.GetCorrelationId()})
	answers.none(t, 50*time.Millisecond)
}
