package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/client"
)

// quietClient is a client whose own logs are discarded.
func quietClient(t testing.TB, addr string) *client.Client {
	t.Helper()
	logger := logrus.New()
	logger.SetOutput(io.Discard)
	c, err := client.New(client.Brokers(addr), client.RequestTimeout(5*time.Second), client.Logger(logrus.NewEntry(logger)))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// produceKeyed writes values "i" for i in [from, to) with key "k<i%keys>".
func produceKeyed(t testing.TB, c *client.Client, topic string, from, to, keys int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := c.NewProducer()
	require.NoError(t, err)
	defer p.Close()
	for i := from; i < to; i++ {
		p.Produce(ctx, &client.Record{Topic: topic, Key: []byte(fmt.Sprint("k", i%keys)), Value: []byte(strconv.Itoa(i))}, nil)
	}
	require.NoError(t, p.Flush(ctx))
}

// seenRecords collects what group members read.
type seenRecords struct {
	mu      sync.Mutex
	count   map[string]int
	last    map[int32]int64 // per partition, the last offset read
	ordered bool
}

func newSeen() *seenRecords {
	return &seenRecords{count: map[string]int{}, last: map[int32]int64{}, ordered: true}
}

func (s *seenRecords) add(records []*client.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range records {
		s.count[string(r.Value)]++
		if last, ok := s.last[r.Partition]; ok && r.Offset <= last {
			s.ordered = false
		}
		s.last[r.Partition] = r.Offset
	}
}

func (s *seenRecords) distinct() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.count)
}

// poll reads with gc until stop says so.
func poll(ctx context.Context, gc *client.GroupConsumer, seen *seenRecords, stop func() bool) error {
	for !stop() && ctx.Err() == nil {
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		records, err := gc.Poll(short)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		seen.add(records)
	}
	return nil
}

// Three members of one group read a six-partition topic while it is being
// written: every record is read by exactly one member, once, in order per
// partition.
func TestGroupThreeMembersReadEveryRecordOnce(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	c := quietClient(t, n.Address())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.CreateTopic(ctx, "orders", 6, nil)
	require.NoError(t, err)
	const total = 30_000

	seen := newSeen()
	owners := map[string]map[string]bool{}
	var ownersMu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for m := 0; m < 3; m++ {
		name := fmt.Sprint("member-", m)
		gc, err := quietClient(t, n.Address()).NewGroupConsumer("billing", []string{"orders"},
			client.ResetOffset(client.ResetEarliest), client.HeartbeatInterval(100*time.Millisecond),
			client.OnAssigned(func(_ context.Context, tps []client.TopicPartition) {
				ownersMu.Lock()
				defer ownersMu.Unlock()
				if owners[name] == nil {
					owners[name] = map[string]bool{}
				}
				for _, tp := range tps {
					owners[name][tp.String()] = true
				}
			}),
			client.OnRevoked(func(_ context.Context, tps []client.TopicPartition) {
				ownersMu.Lock()
				defer ownersMu.Unlock()
				for _, tp := range tps {
					delete(owners[name], tp.String())
				}
			}))
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer gc.Close()
			errs[m] = poll(ctx, gc, seen, func() bool { return seen.distinct() >= total })
		}()
	}
	// Once the group has settled with every member holding partitions, the
	// records are written while the three read.
	settled := time.Now()
	require.Eventually(t, func() bool {
		ownersMu.Lock()
		defer ownersMu.Unlock()
		held := 0
		for _, tps := range owners {
			if len(tps) == 0 {
				return false
			}
			held += len(tps)
		}
		return len(owners) == 3 && held == 6
	}, 30*time.Second, 10*time.Millisecond)
	t.Logf("group settled in %v", time.Since(settled).Round(time.Millisecond))
	produceKeyed(t, c, "orders", 0, total, 100)
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	seen.mu.Lock()
	defer seen.mu.Unlock()
	require.Len(t, seen.count, total)
	for value, times := range seen.count {
		require.Equal(t, 1, times, "record %s read %d times", value, times)
	}
	require.True(t, seen.ordered, "offsets go forward in every partition")
}

// A member that dies without leaving loses its partitions within the session
// timeout; the survivor resumes them from the last commit, so nothing is
// lost and only what was read after that commit is read twice.
func TestGroupKilledMemberResumesFromLastCommit(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	c := quietClient(t, n.Address())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.CreateTopic(ctx, "events", 4, nil)
	require.NoError(t, err)
	const total = 8_000
	produceKeyed(t, c, "events", 0, total, 64)

	seen := newSeen()
	opts := []client.GroupOpt{
		client.ResetOffset(client.ResetEarliest), client.HeartbeatInterval(100 * time.Millisecond),
		client.SessionTimeout(time.Second), client.AutoCommit(0),
	}
	// The victim reads a little, commits, reads more, then its process dies:
	// its client goes away without leaving the group.
	victimClient, err := client.New(client.Brokers(n.Address()), client.Logger(logrus.NewEntry(logrus.New())))
	require.NoError(t, err)
	victim, err := victimClient.NewGroupConsumer("audit", []string{"events"}, opts...)
	require.NoError(t, err)
	committed := newSeen()
	for committed.distinct() < 1000 {
		records, err := victim.Poll(ctx)
		require.NoError(t, err)
		committed.add(records)
	}
	require.NoError(t, victim.CommitSync(ctx))
	uncommitted := newSeen()
	for uncommitted.distinct() < 500 {
		records, err := victim.Poll(ctx)
		require.NoError(t, err)
		uncommitted.add(records)
	}
	died := time.Now()
	victimClient.Close()

	survivor, err := quietClient(t, n.Address()).NewGroupConsumer("audit", []string{"events"}, opts...)
	require.NoError(t, err)
	defer survivor.Close()
	require.NoError(t, poll(ctx, survivor, seen, func() bool {
		seen.mu.Lock()
		defer seen.mu.Unlock()
		for i := 0; i < total; i++ {
			value := strconv.Itoa(i)
			if committed.count[value] == 0 && seen.count[value] == 0 {
				return false
			}
		}
		return true
	}))
	took := time.Since(died)
	seen.mu.Lock()
	defer seen.mu.Unlock()
	// Everything not committed by the victim was read by the survivor, the
	// victim's uncommitted reads again included; nothing committed came back.
	for i := 0; i < total; i++ {
		value := strconv.Itoa(i)
		if committed.count[value] > 0 {
			require.Zero(t, seen.count[value], "committed record %s read again", value)
			continue
		}
		require.Equal(t, 1, seen.count[value], "record %s", value)
	}
	redelivered := 0
	for value := range uncommitted.count {
		if seen.count[value] > 0 {
			redelivered++
		}
	}
	require.Equal(t, len(uncommitted.count), redelivered, "what the victim read after its last commit is read again")
	t.Logf("survivor read the rest %v after the victim died (session timeout 1 s); %d records read twice", took.Round(10*time.Millisecond), redelivered)
}

// Two members share a topic, one leaves mid-way, and every record is read
// at least once with the group's offsets at the end of the log.
func TestGroupMembersShareAndHandOver(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	logger := logrus.New()
	logger.SetOutput(io.Discard)
	c, err := client.New(client.Brokers(n.Address()), client.Logger(logrus.NewEntry(logger)))
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err = c.CreateTopic(ctx, "shared", 4, nil)
	require.NoError(t, err)
	p, err := c.NewProducer()
	require.NoError(t, err)
	defer p.Close()
	const first, total = 4000, 5000
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			p.Produce(ctx, &client.Record{Topic: "shared", Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))}, nil)
		}
		require.NoError(t, p.Flush(ctx))
	}
	produce(0, first)

	var mu sync.Mutex
	seen := map[string]int{}
	owners := map[string][]client.TopicPartition{}
	newMember := func(name string) *client.GroupConsumer {
		gc, err := c.NewGroupConsumer("sharers", []string{"shared"}, client.ResetOffset(client.ResetEarliest),
			client.HeartbeatInterval(100*time.Millisecond), client.SessionTimeout(3*time.Second), client.AutoCommit(100*time.Millisecond),
			client.OnAssigned(func(_ context.Context, tps []client.TopicPartition) {
				mu.Lock()
				owners[name] = append(owners[name], tps...)
				mu.Unlock()
			}))
		require.NoError(t, err)
		return gc
	}
	a, b := newMember("a"), newMember("b")
	consume := func(gc *client.GroupConsumer, stop func() bool) error {
		for !stop() {
			short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			records, err := gc.Poll(short)
			cancel()
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			mu.Lock()
			for _, r := range records {
				seen[string(r.Value)]++
			}
			mu.Unlock()
		}
		return nil
	}
	var bothOwned atomic.Bool
	var wg sync.WaitGroup
	var errA error
	wg.Add(1)
	go func() {
		defer wg.Done()
		errA = consume(a, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(seen) == total
		})
	}()
	// b reads until both members have partitions, then leaves.
	require.NoError(t, consume(b, func() bool {
		mu.Lock()
		defer mu.Unlock()
		if len(owners["a"]) > 0 && len(owners["b"]) > 0 {
			bothOwned.Store(true)
		}
		return bothOwned.Load() || ctx.Err() != nil
	}))
	b.Close()
	// What comes after b left is all a's to read, on every partition.
	produce(first, total)
	wg.Wait()
	require.NoError(t, errA)
	require.True(t, bothOwned.Load(), "the group never split the partitions")
	require.Len(t, a.Assigned(), 4)
	require.NoError(t, a.CommitSync(ctx))
	mu.Lock()
	require.Len(t, seen, total)
	mu.Unlock()
	a.Close()
	committed, err := c.CommittedOffsets(ctx, "sharers")
	require.NoError(t, err)
	var sumCommitted int64
	for _, o := range committed {
		sumCommitted += o
	}
	require.Equal(t, int64(total), sumCommitted)
}
