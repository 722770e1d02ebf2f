package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/actors/client"
)

// groupWatch follows a group's consumers: which consumer owns each
// partition, as their callbacks say, and every record each consumed. Safe
// for concurrent use.
type groupWatch struct {
	mu sync.Mutex
	// owner is each partition's owner; twice lists partitions a consumer
	// was given while another still owned them.
	owner map[int32]string
	twice []string
	seen  map[string]int
}

func newGroupWatch() *groupWatch {
	return &groupWatch{owner: map[int32]string{}, seen: map[string]int{}}
}

func (w *groupWatch) assigned(name string, partitions map[string][]int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ps := range partitions {
		for _, p := range ps {
			if o, ok := w.owner[p]; ok && o != name {
				w.twice = append(w.twice, fmt.Sprintf("partition %d given to %s while %s owns it", p, name, o))
			}
			w.owner[p] = name
		}
	}
}

func (w *groupWatch) released(name string, partitions map[string][]int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ps := range partitions {
		for _, p := range ps {
			if w.owner[p] == name {
				delete(w.owner, p)
			}
		}
	}
}

func (w *groupWatch) consumed(rs []*kgo.Record) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range rs {
		w.seen[string(r.Value)]++
	}
}

// owners is how many partitions each consumer owns.
func (w *groupWatch) owners() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for _, o := range w.owner {
		out[o]++
	}
	return out
}

// distinct is how many records were consumed, each counted once, and
// how many were consumed more than once.
func (w *groupWatch) distinct() (n, again int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.seen {
		if c > 1 {
			again++
		}
	}
	return len(w.seen), again
}

// groupConsumer is a kgo consumer of a group, polling until closed.
type groupConsumer struct {
	cl   *kgo.Client
	done chan struct{}
	once sync.Once
}

// close leaves the group (committing what was consumed) and waits for the
// poll loop to end.
func (g *groupConsumer) close() {
	g.once.Do(func() {
		g.cl.Close()
		<-g.done
	})
}

// groupConsumerOpts are a group consumer's options, with short timeouts:
// a member that lapses is noticed within seconds.
func groupConsumerOpts(seeds []string, group, topic string) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(100 * time.Millisecond), kgo.RebalanceTimeout(10 * time.Second),
		kgo.FetchMaxWait(200 * time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AutoCommitInterval(100 * time.Millisecond), kgo.MetadataMinAge(100 * time.Millisecond),
	}
}

// startGroupConsumer starts a consumer named name in group, watched by w,
// with more options: it consumes between rebalances only
// (BlockRebalanceOnPoll), so that what it polled is committed before its
// partitions move.
func startGroupConsumer(t *testing.T, seeds []string, group, topic, name string, balancer kgo.GroupBalancer, w *groupWatch, more ...kgo.Opt) *groupConsumer {
	t.Helper()
	opts := append(append(groupConsumerOpts(seeds, group, topic), more...),
		kgo.ClientID(name), kgo.Balancers(balancer), kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { w.assigned(name, ps) }),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
			// kgo's default: commit what was consumed before letting go.
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				t.Logf("%s: commit on revoke: %v", name, err)
			}
			w.released(name, ps)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { w.released(name, ps) }),
	)
	cl, err := kgo.NewClient(opts...)
	require.NoError(t, err)
	g := &groupConsumer{cl: cl, done: make(chan struct{})}
	go func() {
		defer close(g.done)
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			w.consumed(fs.Records())
			cl.AllowRebalance()
		}
	}()
	t.Cleanup(g.close)
	return g
}

// produceValues produces values from to to (exclusive) to topic, keyed so
// that they spread over its partitions.
func produceValues(t *testing.T, cl *kgo.Client, topic string, from, to int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var rs []*kgo.Record
	for i := from; i < to; i++ {
		rs = append(rs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint("key-", i)), Value: []byte(fmt.Sprint(i))})
	}
	require.NoError(t, cl.ProduceSync(ctx, rs...).FirstErr())
}

// committedTotal is the sum of a group's committed offsets of topic.
func committedTotal(t *testing.T, adm *kadm.Client, group, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offsets, err := adm.FetchOffsets(ctx, group)
	require.NoError(t, err)
	var total int64
	offsets.Each(func(o kadm.OffsetResponse) {
		require.NoError(t, o.Err)
		if o.Topic == topic && o.At > 0 {
			total += o.At
		}
	})
	return total
}

// waitFor polls cond until it holds, failing with what it says after 30 s.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 30 s for %s: %s", what, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Two, then three consumers of one group share a topic's partitions with
// each of kgo's balancers: no partition has two owners at once, every
// record is consumed exactly once (each consumer commits what it consumed
// before its partitions move), and the committed offsets follow. Then one
// leaves and the others take its partitions over.
func TestKafkaGroupBalancers(t *testing.T) {
	n := startKafkaNode(t)
	seeds := []string{n.KafkaAddress()}
	prod := kafkaClient(t, kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(100*time.Millisecond))
	adm := kadm.NewClient(prod)
	ac := actorClient(t, n)
	const partitions, batch = 6, 120

	for _, tc := range []struct {
		name     string
		balancer kgo.GroupBalancer
	}{
		{"range", kgo.RangeBalancer()},
		{"roundrobin", kgo.RoundRobinBalancer()},
		{"cooperative-sticky", kgo.CooperativeStickyBalancer()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic, group := "balanced-"+tc.name, "group-"+tc.name
			createTopic(t, n, topic, partitions)
			w := newGroupWatch()
			// settled waits for every partition to be owned by members
			// consumers, every record produced so far to be consumed, and
			// the group to have committed them all.
			settled := func(members, produced int) {
				t.Helper()
				waitFor(t, fmt.Sprintf("%d consumers to own the partitions and consume %d records", members, produced), func() (bool, string) {
					owners := w.owners()
					total := 0
					for _, c := range owners {
						total += c
					}
					got, _ := w.distinct()
					return len(owners) == members && total == partitions && got == produced,
						fmt.Sprintf("owners %v, %d records consumed", owners, got)
				})
				waitFor(t, "the group to commit every record", func() (bool, string) {
					total := committedTotal(t, adm, group, topic)
					return total == int64(produced), fmt.Sprintf("%d committed", total)
				})
			}

			produceValues(t, prod, topic, 0, batch)
			first := startGroupConsumer(t, seeds, group, topic, "first", tc.balancer, w)
			startGroupConsumer(t, seeds, group, topic, "second", tc.balancer, w)
			settled(2, batch)

			startGroupConsumer(t, seeds, group, topic, "third", tc.balancer, w)
			produceValues(t, prod, topic, batch, 2*batch)
			settled(3, 2*batch)
			for name, owned := range w.owners() {
				require.Equal(t, partitions/3, owned, "%s's share", name)
			}

			// The actor client sees the Kafka group and its offsets.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			d, err := ac.DescribeGroup(ctx, group)
			require.NoError(t, err)
			require.Equal(t, "Stable", d.State)
			require.Equal(t, "consumer", d.ProtocolType)
			require.Equal(t, tc.name, d.Assignor)
			require.Len(t, d.Members, 3)
			var assigned []int32
			for _, m := range d.Members {
				require.Equal(t, []string{topic}, m.Topics)
				for _, tp := range m.Assignment {
					assigned = append(assigned, tp.Partition)
				}
			}
			slices.Sort(assigned)
			require.Equal(t, []int32{0, 1, 2, 3, 4, 5}, assigned)
			committed, err := ac.CommittedOffsets(ctx, group)
			require.NoError(t, err)
			var total int64
			for _, o := range committed {
				total += o
			}
			require.Equal(t, int64(2*batch), total)

			first.close()
			produceValues(t, prod, topic, 2*batch, 3*batch)
			settled(2, 3*batch)

			w.mu.Lock()
			defer w.mu.Unlock()
			require.Empty(t, w.twice, "no partition owned twice")
			for v, c := range w.seen {
				require.Equal(t, 1, c, "record %s consumed once", v)
			}
		})
	}
}

// A consumer that stops without leaving (its session lapses) has its
// partitions handed to the others, who start from its last commit.
func TestKafkaGroupSessionExpiry(t *testing.T) {
	n := startKafkaNode(t)
	seeds := []string{n.KafkaAddress()}
	createTopic(t, n, "lapse", 4)
	prod := kafkaClient(t, kgo.SeedBrokers(seeds...))
	produceValues(t, prod, "lapse", 0, 40)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// A raw member joins and syncs itself all four partitions, then never
	// heartbeats.
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = "lapsing", 1000, 2000, "consumer"
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{"lapse"}
	proto := kmsg.NewJoinGroupRequestProtocol()
	proto.Name, proto.Metadata = "range", meta.AppendTo(nil)
	join.Protocols = append(join.Protocols, proto)
	jresp, err := join.RequestWith(ctx, prod)
	require.NoError(t, err)
	require.Equal(t, kerr.MemberIDRequired.Code, jresp.ErrorCode)
	join.MemberID = jresp.MemberID
	jresp, err = join.RequestWith(ctx, prod)
	require.NoError(t, err)
	require.Equal(t, int16(0), jresp.ErrorCode)
	require.Equal(t, join.MemberID, jresp.LeaderID)
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID, sync.Generation = "lapsing", join.MemberID, jresp.Generation
	a := kmsg.NewConsumerMemberAssignment()
	at := kmsg.NewConsumerMemberAssignmentTopic()
	at.Topic, at.Partitions = "lapse", []int32{0, 1, 2, 3}
	a.Topics = append(a.Topics, at)
	sa := kmsg.NewSyncGroupRequestGroupAssignment()
	sa.MemberID, sa.MemberAssignment = join.MemberID, a.AppendTo(nil)
	sync.GroupAssignment = append(sync.GroupAssignment, sa)
	sresp, err := sync.RequestWith(ctx, prod)
	require.NoError(t, err)
	require.Equal(t, int16(0), sresp.ErrorCode)
	require.Equal(t, sa.MemberAssignment, sresp.MemberAssignment)

	// It commits 10 of each partition's records, as its last act.
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.MemberID, commit.Generation = "lapsing", join.MemberID, jresp.Generation
	md, err := kadm.NewClient(prod).Metadata(ctx, "lapse")
	require.NoError(t, err)
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic, ct.TopicID = "lapse", md.Topics["lapse"].ID
	end, err := kadm.NewClient(prod).ListEndOffsets(ctx, "lapse")
	require.NoError(t, err)
	var committed int64
	for p := range int32(4) {
		e, _ := end.Lookup("lapse", p)
		cp := kmsg.NewOffsetCommitRequestTopicPartition()
		cp.Partition, cp.Offset = p, min(e.Offset, 2)
		committed += cp.Offset
		ct.Partitions = append(ct.Partitions, cp)
	}
	commit.Topics = append(commit.Topics, ct)
	cresp, err := commit.RequestWith(ctx, prod)
	require.NoError(t, err)
	for _, p := range cresp.Topics[0].Partitions {
		require.Equal(t, int16(0), p.ErrorCode)
	}

	// A kgo consumer joins: the group waits for the lapsed member until its
	// session ends, then hands every partition to the newcomer, which
	// reads what was not committed.
	w := newGroupWatch()
	startGroupConsumer(t, seeds, "lapsing", "lapse", "heir", kgo.RangeBalancer(), w)
	waitFor(t, "the heir to consume what was not committed", func() (bool, string) {
		got, _ := w.distinct()
		return got == 40-int(committed) && len(w.owners()) == 1, fmt.Sprintf("%d consumed, owners %v", got, w.owners())
	})
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "lapsing", join.MemberID, jresp.Generation
	hresp, err := hb.RequestWith(ctx, prod)
	require.NoError(t, err)
	require.Equal(t, kerr.UnknownMemberID.Code, hresp.ErrorCode, "the lapsed member is gone")
}

// kadm against a group: list, describe, fetch, commit, delete offsets and
// delete the group, and the refusals while the group has a member. The
// actor client sees what Kafka clients commit, and the reverse.
func TestKafkaGroupAdmin(t *testing.T) {
	n := startKafkaNode(t)
	seeds := []string{n.KafkaAddress()}
	createTopic(t, n, "admin", 3)
	createTopic(t, n, "other", 1)
	cl := kafkaClient(t, kgo.SeedBrokers(seeds...))
	adm := kadm.NewClient(cl)
	ac := actorClient(t, n)
	produceValues(t, cl, "admin", 0, 30)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// An admin commits to a group that has no member.
	toCommit := kadm.Offsets{}
	toCommit.Add(kadm.Offset{Topic: "admin", Partition: 0, At: 3, LeaderEpoch: -1, Metadata: "by kadm"})
	toCommit.Add(kadm.Offset{Topic: "other", Partition: 0, At: 0, LeaderEpoch: -1})
	toCommit.Add(kadm.Offset{Topic: "admin", Partition: 9, At: 1, LeaderEpoch: -1})
	toCommit.Add(kadm.Offset{Topic: "nowhere", Partition: 0, At: 1, LeaderEpoch: -1})
	resps, err := adm.CommitOffsets(ctx, "admin-group", toCommit)
	require.NoError(t, err)
	r, _ := resps.Lookup("admin", 0)
	require.NoError(t, r.Err)
	r, _ = resps.Lookup("admin", 9)
	require.ErrorIs(t, r.Err, kerr.UnknownTopicOrPartition)
	r, _ = resps.Lookup("nowhere", 0)
	require.ErrorIs(t, r.Err, kerr.UnknownTopicOrPartition)
	// The actor client commits to the same group, and each side sees both.
	require.NoError(t, ac.AlterGroupOffsets(ctx, "admin-group", map[client.TopicPartition]int64{{Topic: "admin", Partition: 1}: 4}))
	fetched, err := adm.FetchOffsets(ctx, "admin-group")
	require.NoError(t, err)
	o, ok := fetched.Lookup("admin", 0)
	require.True(t, ok)
	require.Equal(t, int64(3), o.At)
	require.Equal(t, "by kadm", o.Metadata)
	o, _ = fetched.Lookup("admin", 1)
	require.Equal(t, int64(4), o.At)
	actorView, err := ac.CommittedOffsets(ctx, "admin-group")
	require.NoError(t, err)
	require.Equal(t, map[client.TopicPartition]int64{{Topic: "admin", Partition: 0}: 3, {Topic: "admin", Partition: 1}: 4, {Topic: "other", Partition: 0}: 0}, actorView)

	listed, err := adm.ListGroups(ctx)
	require.NoError(t, err)
	require.Contains(t, listed.Groups(), "admin-group")
	require.Equal(t, "Empty", listed["admin-group"].State)
	require.Equal(t, "consumer", listed["admin-group"].ProtocolType)

	// A member joins; the group starts from the committed offsets.
	w := newGroupWatch()
	member := startGroupConsumer(t, seeds, "admin-group", "admin", "member", kgo.RangeBalancer(), w)
	waitFor(t, "the member to consume what is past the commits", func() (bool, string) {
		got, _ := w.distinct()
		end, err := adm.ListEndOffsets(ctx, "admin")
		require.NoError(t, err)
		var want int64
		end.Each(func(e kadm.ListedOffset) { want += e.Offset - map[int32]int64{0: 3, 1: 4}[e.Partition] })
		return int64(got) == want, fmt.Sprintf("%d of %d consumed", got, want)
	})
	waitFor(t, "the group to be stable", func() (bool, string) {
		described, err := adm.DescribeGroups(ctx, "admin-group")
		require.NoError(t, err)
		return described["admin-group"].State == "Stable", described["admin-group"].State
	})
	described, err := adm.DescribeGroups(ctx, "admin-group")
	require.NoError(t, err)
	g := described["admin-group"]
	require.NoError(t, g.Err)
	require.Equal(t, "consumer", g.ProtocolType)
	require.Equal(t, "range", g.Protocol)
	require.Len(t, g.Members, 1)
	require.Equal(t, "member", g.Members[0].ClientID)
	require.Equal(t, "/127.0.0.1", g.Members[0].ClientHost)
	assigned, ok := g.Members[0].Assigned.AsConsumer()
	require.True(t, ok)
	require.Len(t, assigned.Topics, 1)
	require.Equal(t, []int32{0, 1, 2}, assigned.Topics[0].Partitions)
	stable, err := adm.ListGroups(ctx, "stable")
	require.NoError(t, err)
	require.Contains(t, stable.Groups(), "admin-group")
	empty, err := adm.ListGroups(ctx, "Empty")
	require.NoError(t, err)
	require.NotContains(t, empty.Groups(), "admin-group")

	// While it has a member: an admin's commit, deleting the offsets of the
	// topic it consumes and deleting the group are refused; the offsets of
	// a topic it does not consume go.
	resps, err = adm.CommitOffsets(ctx, "admin-group", toCommit)
	require.NoError(t, err)
	r, _ = resps.Lookup("admin", 0)
	require.ErrorIs(t, r.Err, kerr.UnknownMemberID)
	deleted, err := adm.DeleteOffsets(ctx, "admin-group", kadm.TopicsSet{"admin": {0: {}}, "other": {0: {}}})
	require.NoError(t, err)
	require.ErrorIs(t, deleted["admin"][0], kerr.GroupSubscribedToTopic)
	require.NoError(t, deleted["other"][0])
	dg, err := adm.DeleteGroups(ctx, "admin-group")
	require.NoError(t, err)
	require.ErrorIs(t, dg["admin-group"].Err, kerr.NonEmptyGroup)

	// Once it leaves, everything goes.
	member.close()
	described, err = adm.DescribeGroups(ctx, "admin-group")
	require.NoError(t, err)
	require.Equal(t, "Empty", described["admin-group"].State)
	require.Empty(t, described["admin-group"].Members)
	fetched, err = adm.FetchOffsets(ctx, "admin-group")
	require.NoError(t, err)
	_, ok = fetched.Lookup("other", 0)
	require.False(t, ok, "deleted")
	o, _ = fetched.Lookup("admin", 2)
	end, err := adm.ListEndOffsets(ctx, "admin")
	require.NoError(t, err)
	e, _ := end.Lookup("admin", 2)
	require.Equal(t, e.Offset, o.At, "the member committed what it consumed as it left")
	deleted, err = adm.DeleteOffsets(ctx, "admin-group", kadm.TopicsSet{"admin": {0: {}}})
	require.NoError(t, err)
	require.NoError(t, deleted["admin"][0])
	dg, err = adm.DeleteGroups(ctx, "admin-group")
	require.NoError(t, err)
	require.NoError(t, dg["admin-group"].Err)
	described, err = adm.DescribeGroups(ctx, "admin-group")
	require.NoError(t, err)
	require.ErrorIs(t, described["admin-group"].Err, kerr.GroupIDNotFound)
	listed, err = adm.ListGroups(ctx)
	require.NoError(t, err)
	require.NotContains(t, listed.Groups(), "admin-group")
	_, err = ac.DescribeGroup(ctx, "admin-group")
	require.ErrorIs(t, err, client.ErrGroupIDNotFound)
}

// Requests that name what the group does not know are refused with
// Kafka's codes, and change nothing.
func TestKafkaGroupRefusals(t *testing.T) {
	n := startKafkaNode(t)
	createTopic(t, n, "refused", 1)
	cl := kafkaClient(t, kgo.SeedBrokers(n.KafkaAddress()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// FindCoordinator: this node for groups, one key or several; a
	// transactional id is refused.
	find := kmsg.NewPtrFindCoordinatorRequest()
	find.CoordinatorKeys = []string{"g1", "g2"}
	fresp, err := find.RequestWith(ctx, cl.Broker(int(n.cfg.NodeID)))
	require.NoError(t, err)
	require.Len(t, fresp.Coordinators, 2)
	for _, c := range fresp.Coordinators {
		require.Equal(t, int16(0), c.ErrorCode)
		require.Equal(t, n.cfg.NodeID, c.NodeID)
		require.Equal(t, n.KafkaAddress(), fmt.Sprintf("%s:%d", c.Host, c.Port))
	}
	raw := dialKafka(t, n)
	old := kmsg.NewPtrFindCoordinatorRequest()
	old.SetVersion(2)
	old.CoordinatorKey = "g1"
	raw.send(old, 1)
	_, body := raw.response()
	oresp := old.ResponseKind().(*kmsg.FindCoordinatorResponse)
	require.NoError(t, oresp.ReadFrom(body))
	require.Equal(t, int16(0), oresp.ErrorCode)
	require.Equal(t, n.cfg.NodeID, oresp.NodeID)
	require.Equal(t, n.KafkaAddress(), fmt.Sprintf("%s:%d", oresp.Host, oresp.Port))
	txn := kmsg.NewPtrFindCoordinatorRequest()
	txn.CoordinatorType, txn.CoordinatorKeys = 1, []string{"txn"}
	tresp, err := txn.RequestWith(ctx, cl.Broker(int(n.cfg.NodeID)))
	require.NoError(t, err)
	require.Equal(t, kerr.InvalidRequest.Code, tresp.Coordinators[0].ErrorCode)
	require.Contains(t, *tresp.Coordinators[0].ErrorMessage, "transactions are not supported")

	joinOf := func(member string, protocolType string) *kmsg.JoinGroupRequest {
		join := kmsg.NewPtrJoinGroupRequest()
		join.Group, join.MemberID, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = "refusals", member, 6000, 6000, protocolType
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name = "range"
		join.Protocols = append(join.Protocols, p)
		return join
	}
	md, err := kadm.NewClient(cl).Metadata(ctx, "refused")
	require.NoError(t, err)
	refusedID := md.Topics["refused"].ID
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "refusals", "nobody", 1
	hresp, err := hb.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Equal(t, kerr.UnknownMemberID.Code, hresp.ErrorCode)

	jresp, err := joinOf("", "consumer").RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Equal(t, kerr.MemberIDRequired.Code, jresp.ErrorCode)
	member := jresp.MemberID
	jresp, err = joinOf(member, "consumer").RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Equal(t, int16(0), jresp.ErrorCode)
	generation := jresp.Generation

	for _, tc := range []struct {
		name string
		req  kmsg.Request
		code func(kmsg.Response) int16
		want int16
	}{
		{"heartbeat of another generation", func() kmsg.Request {
			r := kmsg.NewPtrHeartbeatRequest()
			r.Group, r.MemberID, r.Generation = "refusals", member, generation+1
			return r
		}(), func(r kmsg.Response) int16 { return r.(*kmsg.HeartbeatResponse).ErrorCode }, kerr.IllegalGeneration.Code},
		{"sync of another generation", func() kmsg.Request {
			r := kmsg.NewPtrSyncGroupRequest()
			r.Group, r.MemberID, r.Generation = "refusals", member, generation+1
			return r
		}(), func(r kmsg.Response) int16 { return r.(*kmsg.SyncGroupResponse).ErrorCode }, kerr.IllegalGeneration.Code},
		{"commit of another generation", func() kmsg.Request {
			r := kmsg.NewPtrOffsetCommitRequest()
			r.Group, r.MemberID, r.Generation = "refusals", member, generation+1
			t := kmsg.NewOffsetCommitRequestTopic()
			t.Topic, t.TopicID = "refused", refusedID
			t.Partitions = append(t.Partitions, kmsg.NewOffsetCommitRequestTopicPartition())
			r.Topics = append(r.Topics, t)
			return r
		}(), func(r kmsg.Response) int16 { return r.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode }, kerr.IllegalGeneration.Code},
		{"commit of an unknown member", func() kmsg.Request {
			r := kmsg.NewPtrOffsetCommitRequest()
			r.Group, r.MemberID, r.Generation = "refusals", "nobody", generation
			t := kmsg.NewOffsetCommitRequestTopic()
			t.Topic, t.TopicID = "refused", refusedID
			t.Partitions = append(t.Partitions, kmsg.NewOffsetCommitRequestTopicPartition())
			r.Topics = append(r.Topics, t)
			return r
		}(), func(r kmsg.Response) int16 { return r.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode }, kerr.UnknownMemberID.Code},
		{"join of another protocol type", joinOf("", "connect"),
			func(r kmsg.Response) int16 { return r.(*kmsg.JoinGroupResponse).ErrorCode }, kerr.InconsistentGroupProtocol.Code},
		{"join with no protocol type", joinOf("", ""),
			func(r kmsg.Response) int16 { return r.(*kmsg.JoinGroupResponse).ErrorCode }, kerr.InconsistentGroupProtocol.Code},
		{"join with a session timeout too short", func() kmsg.Request {
			r := joinOf("", "consumer")
			r.SessionTimeoutMillis = 10
			return r
		}(), func(r kmsg.Response) int16 { return r.(*kmsg.JoinGroupResponse).ErrorCode }, kerr.InvalidSessionTimeout.Code},
		{"leave of an unknown member", func() kmsg.Request {
			r := kmsg.NewPtrLeaveGroupRequest()
			r.Group = "refusals"
			m := kmsg.NewLeaveGroupRequestMember()
			m.MemberID = "nobody"
			r.Members = append(r.Members, m)
			return r
		}(), func(r kmsg.Response) int16 { return r.(*kmsg.LeaveGroupResponse).Members[0].ErrorCode }, kerr.UnknownMemberID.Code},
		{"a group with no id", func() kmsg.Request {
			r := kmsg.NewPtrHeartbeatRequest()
			r.MemberID = member
			return r
		}(), func(r kmsg.Response) int16 { return r.(*kmsg.HeartbeatResponse).ErrorCode }, kerr.InvalidGroupID.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := cl.Broker(int(n.cfg.NodeID)).Request(ctx, tc.req)
			require.NoError(t, err)
			require.Equal(t, tc.want, tc.code(resp))
			hb := kmsg.NewPtrHeartbeatRequest()
			hb.Group, hb.MemberID, hb.Generation = "refusals", member, generation
			hresp, err := hb.RequestWith(ctx, cl)
			require.NoError(t, err)
			require.Contains(t, []int16{0, kerr.RebalanceInProgress.Code}, hresp.ErrorCode, "the member is still in its generation")
		})
	}

	// JoinGroup v1 is no longer taken (KIP-896).
	v1 := joinOf("", "consumer")
	v1.SetVersion(1)
	raw.send(v1, 5)
	corr, body := raw.response()
	require.Equal(t, int32(5), corr)
	resp := v1.ResponseKind().(*kmsg.JoinGroupResponse)
	require.NoError(t, resp.ReadFrom(body))
	require.Equal(t, kerr.UnsupportedVersion.Code, resp.ErrorCode)
	// Nor OffsetCommit v1 and OffsetFetch v0.
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.SetVersion(1)
	commit.Group = "refusals"
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "refused"
	ct.Partitions = append(ct.Partitions, kmsg.NewOffsetCommitRequestTopicPartition())
	commit.Topics = append(commit.Topics, ct)
	raw.send(commit, 6)
	_, body = raw.response()
	cresp := commit.ResponseKind().(*kmsg.OffsetCommitResponse)
	require.NoError(t, cresp.ReadFrom(body))
	require.Equal(t, kerr.UnsupportedVersion.Code, cresp.Topics[0].Partitions[0].ErrorCode)
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.SetVersion(0)
	fetch.Group = "refusals"
	ft := kmsg.NewOffsetFetchRequestTopic()
	ft.Topic, ft.Partitions = "refused", []int32{0}
	fetch.Topics = append(fetch.Topics, ft)
	raw.send(fetch, 7)
	_, body = raw.response()
	fresp2 := fetch.ResponseKind().(*kmsg.OffsetFetchResponse)
	require.NoError(t, fresp2.ReadFrom(body))
	require.Equal(t, kerr.UnsupportedVersion.Code, fresp2.Topics[0].Partitions[0].ErrorCode)
}

// A group of Depot's own protocol refuses a Kafka client, and a group of
// Kafka clients an actor client; the first is described to Kafka's tools
// as a consumer group with its members' partitions.
func TestKafkaGroupProtocolsDoNotMix(t *testing.T) {
	n := startKafkaNode(t)
	createTopic(t, n, "mixed", 2)
	cl := kafkaClient(t, kgo.SeedBrokers(n.KafkaAddress()))
	adm := kadm.NewClient(cl)
	ac := actorClient(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	depotMember, err := ac.NewGroupConsumer("depot-group", []string{"mixed"})
	require.NoError(t, err)
	defer depotMember.Close()
	waitFor(t, "the actor client's member to be assigned", func() (bool, string) {
		pollCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		_, _ = depotMember.Poll(pollCtx)
		return len(depotMember.Assigned()) == 2, fmt.Sprint(depotMember.Assigned())
	})

	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.SessionTimeoutMillis, join.ProtocolType = "depot-group", 6000, "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name = "range"
	join.Protocols = append(join.Protocols, p)
	jresp, err := join.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Equal(t, kerr.InconsistentGroupProtocol.Code, jresp.ErrorCode)

	described, err := adm.DescribeGroups(ctx, "depot-group")
	require.NoError(t, err)
	g := described["depot-group"]
	require.NoError(t, g.Err)
	require.Equal(t, "Stable", g.State)
	require.Equal(t, "consumer", g.ProtocolType)
	require.Len(t, g.Members, 1)
	assigned, ok := g.Members[0].Assigned.AsConsumer()
	require.True(t, ok)
	require.Equal(t, "mixed", assigned.Topics[0].Topic)
	sort.Slice(assigned.Topics[0].Partitions, func(i, j int) bool { return assigned.Topics[0].Partitions[i] < assigned.Topics[0].Partitions[j] })
	require.Equal(t, []int32{0, 1}, assigned.Topics[0].Partitions)
	subscribed, ok := g.Members[0].Join.AsConsumer()
	require.True(t, ok)
	require.Equal(t, []string{"mixed"}, subscribed.Topics)

	w := newGroupWatch()
	startGroupConsumer(t, []string{n.KafkaAddress()}, "kafka-group", "mixed", "kafka-member", kgo.RangeBalancer(), w)
	waitFor(t, "the Kafka member to be assigned", func() (bool, string) {
		return len(w.owners()) == 1, fmt.Sprint(w.owners())
	})
	intruder, err := ac.NewGroupConsumer("kafka-group", []string{"mixed"})
	require.NoError(t, err)
	defer intruder.Close()
	pollCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = intruder.Poll(pollCtx)
	require.Error(t, err)
	var ce *client.Error
	require.True(t, errors.As(err, &ce), "%v", err)
	require.Equal(t, "INCONSISTENT_GROUP_PROTOCOL", ce.Code.String())
}

// In a cluster, every node names the same coordinator for a group, at its
// Kafka address; another node answers the group's requests
// NOT_COORDINATOR; and kgo's consumers find the coordinator and share the
// partitions.
func TestKafkaGroupCoordinatorInCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of three")
	}
	c := newTestClusterOf(t, 3, fastQuorum, func(cfg *Config) {
		cfg.KafkaListen = "127.0.0.1:0"
		cfg.OffsetsTopicPartitions = 3
		// The coordinators' notes (joins, rebalances and their reasons)
		// show with a failure.
		cfg.Logger = actortest.Logger(t, logrus.InfoLevel)
	})
	var seeds []string
	addrs := map[int32]string{}
	for id, n := range c.nodes {
		seeds = append(seeds, n.KafkaAddress())
		addrs[id] = n.KafkaAddress()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := c.client().CreateTopicReplicated(ctx, "spread", 4, 3, nil)
	require.NoError(t, err)
	c.agree()

	cl := kafkaClient(t, kgo.SeedBrokers(seeds...))
	coordinator := int32(-1)
	waitFor(t, "every node to name the coordinator", func() (bool, string) {
		var named []int32
		for id := range c.nodes {
			find := kmsg.NewPtrFindCoordinatorRequest()
			find.CoordinatorKeys = []string{"spread-group"}
			resp, err := find.RequestWith(ctx, cl.Broker(int(id)))
			require.NoError(t, err)
			fc := resp.Coordinators[0]
			if fc.ErrorCode != 0 {
				return false, fmt.Sprintf("node %d: %s", id, kerr.ErrorForCode(fc.ErrorCode))
			}
			require.Equal(t, addrs[fc.NodeID], fmt.Sprintf("%s:%d", fc.Host, fc.Port))
			named = append(named, fc.NodeID)
		}
		coordinator = named[0]
		return !slices.ContainsFunc(named, func(id int32) bool { return id != coordinator }), fmt.Sprint(named)
	})
	for id := range c.nodes {
		if id == coordinator {
			continue
		}
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Group, hb.MemberID = "spread-group", "nobody"
		resp, err := hb.RequestWith(ctx, cl.Broker(int(id)))
		require.NoError(t, err)
		require.Equal(t, kerr.NotCoordinator.Code, resp.ErrorCode, "node %d", id)
		fetch := kmsg.NewPtrOffsetFetchRequest()
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = "spread-group"
		fetch.Groups = append(fetch.Groups, g)
		fresp, err := fetch.RequestWith(ctx, cl.Broker(int(id)))
		require.NoError(t, err)
		require.Equal(t, kerr.NotCoordinator.Code, fresp.Groups[0].ErrorCode, "node %d", id)
	}

	produceValues(t, cl, "spread", 0, 80)
	w := newGroupWatch()
	for _, name := range []string{"a", "b"} {
		// Kafka's default session timeout: a client learns of its
		// coordinator's move only once it has given up on the old one.
		startGroupConsumer(t, seeds, "spread-group", "spread", name, kgo.CooperativeStickyBalancer(), w, kgo.SessionTimeout(45*time.Second),
			kgo.WithLogger(kgo.BasicLogger(actortest.Writer(t), kgo.LogLevelInfo, func() string { return name + ": " })))
	}
	waitFor(t, "two consumers to share the partitions and read every record", func() (bool, string) {
		got, _ := w.distinct()
		return got == 80 && len(w.owners()) == 2, fmt.Sprintf("%d consumed, owners %v", got, w.owners())
	})
	adm := kadm.NewClient(cl)
	waitFor(t, "the group to commit every record", func() (bool, string) {
		total := committedTotal(t, adm, "spread-group", "spread")
		return total == 80, fmt.Sprint(total)
	})

	// The coordinator's node goes: the next leader of the group's offsets
	// partition restores the stored generation, and the members, under the
	// same member ids, heartbeat, commit and consume on with it, without a
	// rebalance.
	members := func() ([]string, string) {
		described, err := adm.DescribeGroups(ctx, "spread-group")
		if err != nil {
			return nil, err.Error()
		}
		d := described["spread-group"]
		if d.Err != nil || d.State != "Stable" {
			return nil, fmt.Sprintf("%s: %v", d.State, d.Err)
		}
		var ids []string
		for _, m := range d.Members {
			ids = append(ids, m.MemberID)
		}
		slices.Sort(ids)
		return ids, fmt.Sprint(ids)
	}
	var before []string
	waitFor(t, "a stable group of two", func() (bool, string) {
		var state string
		before, state = members()
		return len(before) == 2, state
	})
	require.NoError(t, killInProcess(c.nodes[coordinator]))
	delete(c.nodes, coordinator)
	left := kafkaClient(t, kgo.SeedBrokers(seedsBut(seeds, addrs[coordinator])...))
	adm = kadm.NewClient(left)
	produceValues(t, left, "spread", 80, 160)
	waitFor(t, "the records produced after the move to be read and committed", func() (bool, string) {
		got, again := w.distinct()
		offsets, err := adm.FetchOffsets(ctx, "spread-group")
		if err == nil {
			err = offsets.Error()
		}
		if err != nil {
			return false, fmt.Sprintf("%d consumed (%d again); committed offsets: %v", got, again, err)
		}
		var committed int64
		offsets.Each(func(o kadm.OffsetResponse) { committed += max(o.At, 0) })
		return got == 160 && committed == 160, fmt.Sprintf("%d consumed (%d again), %d committed", got, again, committed)
	})
	after, state := members()
	require.Equal(t, before, after, "the same members, in the same generation, without a rebalance: %s", state)
}

// seedsBut is seeds without gone.
func seedsBut(seeds []string, gone string) []string {
	return slices.DeleteFunc(slices.Clone(seeds), func(s string) bool { return s == gone })
}

// A static member (group.instance.id) that restarts within its session
// timeout comes back to its partitions without a rebalance: the group's
// generation does not move, and the other member keeps what it had.
func TestKafkaGroupStaticMemberRestarts(t *testing.T) {
	n := startKafkaNode(t)
	seeds := []string{n.KafkaAddress()}
	createTopic(t, n, "static", 4)
	ac := actorClient(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := func(instance string, w *groupWatch) *groupConsumer {
		return startGroupConsumer(t, seeds, "statics", "static", instance, kgo.RangeBalancer(), w, kgo.InstanceID(instance))
	}
	w := newGroupWatch()
	first := start("instance-a", w)
	start("instance-b", w)
	describe := func() (int32, map[string][]int32) {
		owned := map[string][]int32{}
		d, err := ac.DescribeGroup(ctx, "statics")
		if errors.Is(err, client.ErrGroupIDNotFound) {
			return 0, owned // no member has joined yet
		}
		require.NoError(t, err)
		for _, m := range d.Members {
			for _, tp := range m.Assignment {
				owned[m.GroupInstanceId] = append(owned[m.GroupInstanceId], tp.Partition)
			}
		}
		return d.Generation, owned
	}
	waitFor(t, "both static members to own two partitions", func() (bool, string) {
		_, owned := describe()
		return len(owned["instance-a"]) == 2 && len(owned["instance-b"]) == 2, fmt.Sprint(owned)
	})
	generation, before := describe()

	// A static member's close does not leave the group; it comes back
	// under a new member id and takes its old one's place.
	first.close()
	again := newGroupWatch()
	start("instance-a", again)
	waitFor(t, "the restarted member to own its partitions again", func() (bool, string) {
		return again.owners()["instance-a"] == 2, fmt.Sprint(again.owners())
	})
	after, owned := describe()
	require.Equal(t, generation, after, "no rebalance")
	require.Equal(t, before, owned)
}
