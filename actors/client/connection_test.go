package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/actortest"
	depotremote "github.com/depot-dev/depot/actors/remote"
	"github.com/depot-dev/depot/messages"
)

// The tests of lost connections give every request a minute, and want what
// was in flight done again within promptly of the connection's loss.
const (
	longTimeout = time.Minute
	promptly    = 5 * time.Second
)

// produceAsync produces rs and returns a channel that carries the first
// error, or nil, once every promise has been called.
func produceAsync(ctx context.Context, p *Producer, rs []*Record) <-chan error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	wg.Add(len(rs))
	for _, r := range rs {
		p.Produce(ctx, r, func(_ *Record, err error) {
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
			wg.Done()
		})
	}
	done := make(chan error, 1)
	go func() {
		wg.Wait()
		done <- first
	}()
	return done
}

// promptError waits promptly for an error (or nil) from done: within
// promptly of the event the test caused.
func promptError(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(promptly):
		t.Fatalf("%s: not done within %v (requests time out after %v)", what, promptly, longTimeout)
		return nil
	}
}

// A producer whose batches are in flight to a node when the connection to
// it drops sends them again at once, to the leader the metadata names now,
// from the first unacknowledged one and with their sequences: those the
// node had taken are recognised, not written again, and the partition
// keeps the order they were produced in.
func TestConnectionLostResendsProducesAtOnce(t *testing.T) {
	fc, c := setup(t, RequestTimeout(longTimeout))
	ctx := testContext(t, 30*time.Second)
	require.NoError(t, fc.createTopic("t", 1))
	p, err := c.NewProducer(BatchBytes(1<<10), Linger(0), ProducerRequestTimeout(longTimeout), MaxInFlightPerPartition(5), RetryBackoff(10*time.Millisecond))
	require.NoError(t, err)
	defer p.Close()
	produced := numbered("t", 0, 50)
	require.NoError(t, p.ProduceSync(ctx, produced...))

	// The node takes the next batches, and its answers never come.
	fc.setFaults(faults{loseAnswerEvery: 1})
	more := numbered("t", 50, 300)
	produced = append(produced, more...)
	done := produceAsync(ctx, p, more)
	require.Eventually(t, func() bool { return fc.stats("t").unanswered >= 5 }, 10*time.Second, time.Millisecond)
	fc.setFaults(faults{})
	require.NoError(t, fc.moveLeader("t", 0))
	fc.loseEndpoint(fc.system.Address())
	require.NoError(t, promptError(t, done, "produce"))

	require.Positive(t, fc.stats("t").duplicates, "batches the node took were sent again and recognised")
	requireProducedInOrder(t, produced)
	got := consumeAll(t, ctx, c, "t", len(produced))
	checkExactlyOnce(t, produced, got, 1, true)
}

// refetchSetup is a fake cluster and a client of it with long request
// timeouts, and 200 records produced to the two partitions of topic "t"
// by a producer that stays open until the test ends.
func refetchSetup(t *testing.T) (*fakeCluster, *Client, *Producer, context.Context, []*Record) {
	t.Helper()
	fc, c := setup(t, RequestTimeout(longTimeout))
	ctx := testContext(t, 30*time.Second)
	require.NoError(t, fc.createTopic("t", 2))
	p, err := c.NewProducer(Linger(0))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	produced := numbered("t", 0, 200)
	require.NoError(t, p.ProduceSync(ctx, produced...))
	return fc, c, p, ctx, produced
}

// A consumer whose fetches are in flight to a node when the connection to
// it drops fetches again at once, from the same offsets, from the leaders
// the metadata names now: no record is skipped or read twice.
func TestConnectionLostRefetchesAtOnce(t *testing.T) {
	fc, c, p, ctx, produced := refetchSetup(t)
	cons, err := c.NewConsumer(ConsumerRequestTimeout(longTimeout), FetchMaxWait(100*time.Millisecond), PartitionMaxBytes(4<<10), ConsumerRetryBackoff(10*time.Millisecond))
	require.NoError(t, err)
	defer cons.Close()
	cons.AssignTopic("t", AtStart())
	got := pollUntil(t, cons, nil, len(produced), 10*time.Second)

	// The fetches waiting for more records are never answered.
	fc.setFaults(faults{dropFetchEvery: 1})
	dropped := fc.stats("t").fetchDropped
	require.Eventually(t, func() bool { return fc.stats("t").fetchDropped >= dropped+2 }, 10*time.Second, time.Millisecond)
	more := numbered("t", 200, 200)
	require.NoError(t, p.ProduceSync(ctx, more...))
	produced = append(produced, more...)
	fc.setFaults(faults{})
	require.NoError(t, fc.moveLeader("t", 0))
	require.NoError(t, fc.moveLeader("t", 1))
	fc.loseEndpoint(fc.system.Address())
	got = pollUntil(t, cons, got, len(produced), promptly)
	checkExactlyOnce(t, produced, got, 2, true)
}

// A consumer whose fetch goes to an actor that is not there (a node's
// partition manager stopped, or not yet started again) hears of it at once
// and fetches again after its retry backoff, not after its request
// timeout: no record is skipped or read twice.
func TestDeadLetterRefetchesAtOnce(t *testing.T) {
	fc, c, _, _, produced := refetchSetup(t)

	manager := actor.NewPID(fc.system.Address(), actors.PartitionManagerName)
	require.NoError(t, fc.system.Root.PoisonFuture(manager).Wait())
	errs := make(chan error, 64)
	cons, err := c.NewConsumer(ConsumerRequestTimeout(longTimeout), FetchMaxWait(100*time.Millisecond), ConsumerRetryBackoff(10*time.Millisecond),
		OnFetchError(func(e FetchError) {
			select {
			case errs <- e.Err:
			default:
			}
		}))
	require.NoError(t, err)
	defer cons.Close()
	cons.AssignTopic("t", AtStart())
	for deadLetter := false; !deadLetter; {
		select {
		case err := <-errs:
			deadLetter = errors.Is(err, actor.ErrDeadLetter)
		case <-time.After(promptly):
			t.Fatalf("no fetch failed within %v of going to a stopped actor (requests time out after %v)", promptly, longTimeout)
		}
	}
	_, err = fc.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return newFakeManager(fc) }), actors.PartitionManagerName)
	require.NoError(t, err)
	got := pollUntil(t, cons, nil, len(produced), promptly)
	checkExactlyOnce(t, produced, got, 2, true)
}

// A request awaiting an answer from an address fails with
// ErrConnectionLost as soon as the connection to that address drops, and
// not when another's does; ListOffset sends its request again to the
// leader the metadata names now, and CreateTopic to the next broker,
// saying that it asks again.
func TestConnectionLostFailsRequestsAtOnce(t *testing.T) {
	fc, c := setup(t, RequestTimeout(longTimeout))
	ctx := testContext(t, 30*time.Second)

	received := make(chan struct{})
	silent := c.root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*messages.ListOffsetsRequest); ok {
			close(received)
		}
	}))
	failed := make(chan error, 1)
	go func() {
		_, err := c.request(ctx, silent, &messages.ListOffsetsRequest{}, longTimeout)
		failed <- err
	}()
	<-received
	fc.loseEndpoint("127.0.0.1:1")
	select {
	case err := <-failed:
		t.Fatalf("a request to %s ended when the connection to another address dropped: %v", silent.GetAddress(), err)
	case <-time.After(100 * time.Millisecond):
	}
	fc.loseEndpoint(silent.GetAddress())
	err := promptError(t, failed, "request")
	require.ErrorIs(t, err, ErrConnectionLost)
	require.ErrorContains(t, err, silent.GetAddress())

	require.NoError(t, fc.createTopic("t", 1))
	fc.setFaults(faults{dropListOffsets: true})
	listed := make(chan error, 1)
	go func() {
		end, err := c.ListOffset(ctx, "t", 0, LatestOffset)
		if err == nil && end != 0 {
			err = fmt.Errorf("log end %d, want 0", end)
		}
		listed <- err
	}()
	require.Eventually(t, func() bool { return fc.stats("t").listsDropped > 0 }, 10*time.Second, time.Millisecond)
	fc.setFaults(faults{})
	require.NoError(t, fc.moveLeader("t", 0))
	fc.loseEndpoint(fc.system.Address())
	require.NoError(t, promptError(t, listed, "list offsets"))

	// Two brokers, both this system: the create's answer is lost, and the
	// second broker is asked again, finding the topic as asked.
	c2, err := New(ActorSystem(fc.system, nil), Brokers(fc.system.Address(), fc.system.Address()), RequestTimeout(longTimeout))
	require.NoError(t, err)
	defer c2.Close()
	_, err = c2.Metadata(ctx) // contacted: the request timeout applies
	require.NoError(t, err)
	fc.mu.Lock()
	fc.loseCreates = 1
	fc.mu.Unlock()
	created := make(chan error, 1)
	go func() {
		_, err := c2.CreateTopic(ctx, "created", 2, nil)
		created <- err
	}()
	require.Eventually(t, func() bool {
		fc.mu.Lock()
		defer fc.mu.Unlock()
		return fc.loseCreates == 0
	}, 10*time.Second, time.Millisecond)
	fc.loseEndpoint(fc.system.Address())
	require.NoError(t, promptError(t, created, "create topic"))
}

// A commit awaiting the coordinator's answer when the connection drops is
// sent again at once, and its answer counts.
func TestConnectionLostResendsGroupRequests(t *testing.T) {
	fc, c := setup(t, RequestTimeout(longTimeout))
	fg := newFakeGroups(t, fc)
	require.NoError(t, fc.createTopic("orders", 1))
	ctx := testContext(t, 30*time.Second)
	produceTo(t, ctx, c, "orders", 0, 0, 3)
	g, err := c.NewGroupConsumer("g", []string{"orders"}, ResetOffset(ResetEarliest), AutoCommit(0))
	require.NoError(t, err)
	defer g.Close()
	pollN(t, ctx, g, 3)

	commits := 0
	fg.with("g", func(gr *fakeGroup) {
		gr.loseCommitAnswers = 1
		commits = len(gr.commits)
	})
	done := make(chan error, 1)
	go func() { done <- g.CommitSync(ctx) }()
	require.Eventually(t, func() bool {
		n := 0
		fg.with("g", func(gr *fakeGroup) { n = len(gr.commits) })
		return n > commits
	}, 10*time.Second, time.Millisecond)
	fc.loseEndpoint(fc.system.Address())
	require.NoError(t, promptError(t, done, "commit"))
	require.Equal(t, map[TopicPartition]int64{tp(0): 3}, fg.committed("g"))
	fg.with("g", func(gr *fakeGroup) { require.Len(t, gr.commits, commits+2, "sent again once") })
}

// newRemoteNode is an actor system with remote on 127.0.0.1, any port, and
// its remote, which the test may shut down as a node that dies.
func newRemoteNode(t *testing.T) (*actor.ActorSystem, *remote.Remote) {
	t.Helper()
	sys := actortest.System(t)
	r := remote.NewRemote(sys, depotremote.NewTransport().Config("127.0.0.1", 0, logrus.NewEntry(actortest.Logger(t, logrus.WarnLevel))))
	r.Start()
	t.Cleanup(func() { r.Shutdown(false) })
	return sys, r
}

// moveLeaderTo makes a new actor in sys lead a partition, as moveLeader
// does in the cluster's own system.
func (fc *fakeCluster) moveLeaderTo(topic string, partition int, sys *actor.ActorSystem) error {
	p := fc.partition(topic, partition)
	p.mu.Lock()
	p.moves++
	name := fmt.Sprintf("partition-%s-%d-%d", topic, partition, p.moves)
	p.mu.Unlock()
	pid, err := sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &fakePartitionActor{p} }), name)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.name, p.pid, p.moved = name, pid, true
	p.epoch++
	p.announced = p.epoch
	p.mu.Unlock()
	return nil
}

// Across actor systems, as between a client and its nodes: when the node
// leading a partition dies, protoactor remote tells the client's system,
// and the producer and the consumer carry on with the new leader as soon
// as the metadata names it, not after their requests time out, and without
// sending anything to the dead node meanwhile (a send there would wait
// about ten seconds for protoactor to give up connecting).
func TestNodeDiesUnderProducerAndConsumer(t *testing.T) {
	first, _ := newRemoteNode(t)
	second, secondRemote := newRemoteNode(t)
	fc := newFakeCluster(t, first)
	_, err := second.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return newFakeManager(fc) }), actors.PartitionManagerName)
	require.NoError(t, err)
	require.NoError(t, fc.createTopic("t", 1))
	require.NoError(t, fc.moveLeaderTo("t", 0, second))

	c, err := New(Brokers(first.Address()), RequestTimeout(longTimeout), Logger(logrus.NewEntry(actortest.Logger(t, logrus.WarnLevel))))
	require.NoError(t, err)
	defer c.Close()
	ctx := testContext(t, 60*time.Second)
	p, err := c.NewProducer(BatchBytes(1<<10), Linger(0), ProducerRequestTimeout(longTimeout), MaxInFlightPerPartition(5), RetryBackoff(10*time.Millisecond))
	require.NoError(t, err)
	defer p.Close()
	produced := numbered("t", 0, 50)
	require.NoError(t, p.ProduceSync(ctx, produced...))
	cons, err := c.NewConsumer(ConsumerRequestTimeout(longTimeout), FetchMaxWait(100*time.Millisecond), ConsumerRetryBackoff(10*time.Millisecond))
	require.NoError(t, err)
	defer cons.Close()
	cons.Assign("t", 0, AtStart())
	got := pollUntil(t, cons, nil, len(produced), 10*time.Second)

	fc.setFaults(faults{loseAnswerEvery: 1})
	more := numbered("t", 50, 300)
	produced = append(produced, more...)
	done := produceAsync(ctx, p, more)
	require.Eventually(t, func() bool { return fc.stats("t").unanswered >= 5 }, 10*time.Second, time.Millisecond)
	secondRemote.Shutdown(false)
	fc.setFaults(faults{})
	// The cluster takes a moment to elect another leader; meanwhile its
	// metadata still names the dead one.
	time.AfterFunc(500*time.Millisecond, func() { _ = fc.moveLeaderTo("t", 0, first) })
	require.NoError(t, promptError(t, done, "produce"))
	requireProducedInOrder(t, produced)
	got = pollUntil(t, cons, got, len(produced), promptly)
	checkExactlyOnce(t, produced, got, 1, true)
}

// A producer whose client is closed under it fails what it holds with
// ErrClosed at once, rather than retrying it against the nodes until its
// delivery timeout, and so does a record produced after; Flush returns.
func TestProducerFailsWithItsClient(t *testing.T) {
	fc, c := setup(t, RequestTimeout(longTimeout))
	ctx := testContext(t, 30*time.Second)
	require.NoError(t, fc.createTopic("t", 2))
	p, err := c.NewProducer(Linger(0), ProducerRequestTimeout(longTimeout), DeliveryTimeout(2*longTimeout))
	require.NoError(t, err)
	defer p.Close()
	require.NoError(t, p.ProduceSync(ctx, numbered("t", 0, 10)...))

	// The node takes the next batches, and its answers never come.
	fc.setFaults(faults{loseAnswerEvery: 1})
	done := produceAsync(ctx, p, numbered("t", 10, 100))
	require.Eventually(t, func() bool { return fc.stats("t").unanswered >= 1 }, 10*time.Second, time.Millisecond)
	c.Close()
	require.ErrorIs(t, promptError(t, done, "produce"), ErrClosed)
	require.ErrorIs(t, p.ProduceSync(ctx, numbered("t", 110, 1)...), ErrClosed)
	flushed := make(chan error, 1)
	go func() { flushed <- p.Flush(ctx) }()
	require.NoError(t, promptError(t, flushed, "flush"))
}
