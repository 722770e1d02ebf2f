package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// saramaVersion is the Kafka version sarama is told it talks to: the
// newest it knows, so it asks for the newest versions of each API it has,
// and chooses among those a node advertises.
var saramaVersion = sarama.MaxVersion

// saramaConfig is a sarama configuration for a test against one node:
// version is the Kafka version it assumes, and retries are quick.
func saramaConfig(version sarama.KafkaVersion) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.ClientID = "depot-sarama-test"
	cfg.Version = version
	cfg.Net.DialTimeout, cfg.Net.ReadTimeout, cfg.Net.WriteTimeout = 5*time.Second, 20*time.Second, 5*time.Second
	cfg.Metadata.Retry.Max, cfg.Metadata.Retry.Backoff = 10, 100*time.Millisecond
	cfg.Producer.Return.Successes = true
	cfg.Producer.Retry.Backoff = 100 * time.Millisecond
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	cfg.Consumer.Group.Rebalance.Retry.Backoff = 200 * time.Millisecond
	return cfg
}

// saramaMessages are count messages for topic, each with a key, a value
// and a header that name it.
func saramaMessages(topic string, count int) []*sarama.ProducerMessage {
	out := make([]*sarama.ProducerMessage, 0, count)
	for i := range count {
		out = append(out, &sarama.ProducerMessage{
			Topic:   topic,
			Key:     sarama.StringEncoder(fmt.Sprint("key-", i)),
			Value:   sarama.StringEncoder(fmt.Sprint("value-", i)),
			Headers: []sarama.RecordHeader{{Key: []byte("i"), Value: []byte(fmt.Sprint(i))}},
		})
	}
	return out
}

// requireSaramaMessages checks that rs are the count messages
// saramaMessages made, each once, in order within each partition without
// gaps.
func requireSaramaMessages(t *testing.T, rs []*kgo.Record, count int) {
	t.Helper()
	require.Len(t, rs, count)
	seen := map[string]bool{}
	next := map[int32]int64{}
	for _, r := range rs {
		i := string(r.Headers[0].Value)
		require.Equal(t, "key-"+i, string(r.Key))
		require.Equal(t, "value-"+i, string(r.Value))
		require.False(t, seen[i], "message %s twice", i)
		seen[i] = true
		require.Equal(t, next[r.Partition], r.Offset, "offsets in order without gaps")
		next[r.Partition]++
	}
}

// sarama's SyncProducer with each acks setting, the idempotent producer
// and each compression codec: kgo reads back every message, once, in
// order.
func TestKafkaSaramaSyncProducer(t *testing.T) {
	n := startKafkaNode(t)
	seeds := []string{n.KafkaAddress()}
	for _, tc := range []struct {
		name string
		set  func(cfg *sarama.Config)
		// codec is the compression of the batches stored (kgo's
		// RecordAttrs.CompressionType), idempotent whether they carry a
		// producer id.
		codec      uint8
		idempotent bool
	}{
		{name: "acks-all", set: func(cfg *sarama.Config) { cfg.Producer.RequiredAcks = sarama.WaitForAll }},
		{name: "acks-1", set: func(cfg *sarama.Config) { cfg.Producer.RequiredAcks = sarama.WaitForLocal }},
		{name: "idempotent", idempotent: true, set: func(cfg *sarama.Config) {
			cfg.Producer.Idempotent, cfg.Producer.RequiredAcks, cfg.Net.MaxOpenRequests = true, sarama.WaitForAll, 1
		}},
		{name: "gzip", codec: 1, set: func(cfg *sarama.Config) { cfg.Producer.Compression = sarama.CompressionGZIP }},
		{name: "snappy", codec: 2, set: func(cfg *sarama.Config) { cfg.Producer.Compression = sarama.CompressionSnappy }},
		{name: "lz4", codec: 3, set: func(cfg *sarama.Config) { cfg.Producer.Compression = sarama.CompressionLZ4 }},
		{name: "zstd", codec: 4, set: func(cfg *sarama.Config) { cfg.Producer.Compression = sarama.CompressionZSTD }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "sarama-sync-" + tc.name
			createTopic(t, n, topic, 3)
			cfg := saramaConfig(saramaVersion)
			tc.set(cfg)
			producer, err := sarama.NewSyncProducer(seeds, cfg)
			require.NoError(t, err)
			defer func() { require.NoError(t, producer.Close()) }()

			const count = 200
			msgs := saramaMessages(topic, count)
			// One at a time, then the rest together.
			partition, offset, err := producer.SendMessage(msgs[0])
			require.NoError(t, err)
			require.Equal(t, int64(0), offset)
			require.NoError(t, producer.SendMessages(msgs[1:]))
			for _, m := range msgs[1:] {
				if m.Partition == partition {
					require.Greater(t, m.Offset, offset)
				}
			}
			got := kafkaConsume(t, seeds, topic, count)
			requireSaramaMessages(t, got, count)
			for _, r := range got {
				require.Equal(t, tc.codec, r.Attrs.CompressionType(), "stored as sarama compressed it")
				require.Equal(t, tc.idempotent, r.ProducerID >= 0, "producer id %d", r.ProducerID)
			}
		})
	}
}

// sarama's AsyncProducer: every message is acknowledged, and kgo reads
// each back once.
func TestKafkaSaramaAsyncProducer(t *testing.T) {
	n := startKafkaNode(t)
	seeds := []string{n.KafkaAddress()}
	createTopic(t, n, "sarama-async", 3)
	cfg := saramaConfig(saramaVersion)
	// Batches of 20 messages, and whatever is left after 5 ms: without a
	// frequency, sarama keeps a remainder below 20 until it is closed.
	cfg.Producer.Flush.Messages, cfg.Producer.Flush.Frequency = 20, 5*time.Millisecond
	producer, err := sarama.NewAsyncProducer(seeds, cfg)
	require.NoError(t, err)

	const count = 500
	go func() {
		for _, m := range saramaMessages("sarama-async", count) {
			producer.Input() <- m
		}
	}()
	for range count {
		select {
		case m := <-producer.Successes():
			require.GreaterOrEqual(t, m.Offset, int64(0))
		case e := <-producer.Errors():
			t.Fatalf("produce failed: %v", e)
		case <-time.After(30 * time.Second):
			t.Fatal("no acknowledgement in 30 s")
		}
	}
	require.NoError(t, producer.Close())
	requireSaramaMessages(t, kafkaConsume(t, seeds, "sarama-async", count), count)
}

// saramaConsume reads count messages of topic's partitions from the oldest
// offset through a sarama Consumer.
func saramaConsume(t *testing.T, seeds []string, cfg *sarama.Config, topic string, count int) []*sarama.ConsumerMessage {
	t.Helper()
	consumer, err := sarama.NewConsumer(seeds, cfg)
	require.NoError(t, err)
	defer func() { require.NoError(t, consumer.Close()) }()
	partitions, err := consumer.Partitions(topic)
	require.NoError(t, err)
	merged := make(chan *sarama.ConsumerMessage)
	failed := make(chan error, len(partitions))
	var pcs []sarama.PartitionConsumer
	for _, p := range partitions {
		pc, err := consumer.ConsumePartition(topic, p, sarama.OffsetOldest)
		require.NoError(t, err)
		pcs = append(pcs, pc)
		go func() {
			for m := range pc.Messages() {
				merged <- m
			}
		}()
		go func() {
			for e := range pc.Errors() {
				failed <- e
			}
		}()
	}
	var out []*sarama.ConsumerMessage
	timeout := time.After(30 * time.Second)
	for len(out) < count {
		select {
		case m := <-merged:
			out = append(out, m)
		case err := <-failed:
			t.Fatalf("consume failed: %v", err)
		case <-timeout:
			t.Fatalf("consumed %d of %d in 30 s", len(out), count)
		}
	}
	for _, pc := range pcs {
		pc.AsyncClose()
	}
	return out
}

// A sarama Consumer reads every partition from the oldest offset: what kgo
// produced, once, in order.
func TestKafkaSaramaConsumer(t *testing.T) {
	n := startKafkaNode(t)
	seeds := []string{n.KafkaAddress()}
	createTopic(t, n, "sarama-consume", 4)
	cl := kafkaClient(t, kgo.SeedBrokers(seeds...))
	produceValues(t, cl, "sarama-consume", 0, 400)

	got := saramaConsume(t, seeds, saramaConfig(saramaVersion), "sarama-consume", 400)
	seen := map[string]bool{}
	next := map[int32]int64{}
	for _, m := range got {
		require.Equal(t, "key-"+string(m.Value), string(m.Key))
		require.False(t, seen[string(m.Value)])
		seen[string(m.Value)] = true
		require.Equal(t, next[m.Partition], m.Offset)
		next[m.Partition]++
	}
	require.Len(t, next, 4, "every partition read")
}

// saramaMember is one member of a sarama consumer group: its claims in the
// latest session, and what it consumed.
type saramaMember struct {
	mu         sync.Mutex
	generation int32
	claims     []int32
	consumed   []string
}

func (m *saramaMember) Setup(s sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ps := range s.Claims() {
		m.claims = slices.Clone(ps)
	}
	m.generation = s.GenerationID()
	return nil
}

func (m *saramaMember) Cleanup(sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.claims = nil
	return nil
}

func (m *saramaMember) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		m.mu.Lock()
		m.consumed = append(m.consumed, string(msg.Value))
		m.mu.Unlock()
		s.MarkMessage(msg, "")
	}
	return nil
}

func (m *saramaMember) state() (int32, []int32, []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.generation, slices.Clone(m.claims), slices.Clone(m.consumed)
}

// startSaramaMember runs m as a member of group, consuming topic, until
// the test ends; what fails goes to failed when it has room.
func startSaramaMember(t *testing.T, seeds []string, cfg *sarama.Config, group, topic string, m *saramaMember, failed chan<- error) {
	t.Helper()
	g, err := sarama.NewConsumerGroup(seeds, group, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	report := func(err error) {
		select {
		case failed <- err:
		default:
		}
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{topic}, m); err != nil {
				if !errors.Is(err, sarama.ErrClosedConsumerGroup) {
					report(err)
				}
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for err := range g.Errors() {
			report(err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, g.Close())
		wg.Wait()
	})
}

// Two sarama consumers of one group share a topic with each of sarama's
// strategies: each holds partitions of the same generation and none twice,
// every record is consumed, and the group's committed offsets, read with
// kadm, reach the end of every partition.
func TestKafkaSaramaConsumerGroup(t *testing.T) {
	n := startKafkaNode(t)
	seeds := []string{n.KafkaAddress()}
	cl := kafkaClient(t, kgo.SeedBrokers(seeds...))
	adm := kadm.NewClient(cl)
	for _, tc := range []struct {
		name     string
		strategy sarama.BalanceStrategy
	}{
		{"range", sarama.NewBalanceStrategyRange()},
		{"roundrobin", sarama.NewBalanceStrategyRoundRobin()},
		{"sticky", sarama.NewBalanceStrategySticky()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic, group := "sarama-group-"+tc.name, "sarama-"+tc.name
			const partitions, count = 6, 300
			createTopic(t, n, topic, partitions)
			cfg := saramaConfig(saramaVersion)
			cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{tc.strategy}

			members := []*saramaMember{{}, {}}
			failed := make(chan error, 16)
			for _, m := range members {
				startSaramaMember(t, seeds, cfg, group, topic, m, failed)
			}

			// Both members hold partitions of one generation before the
			// records come.
			waitFor(t, "two members sharing the topic", func() (bool, string) {
				select {
				case err := <-failed:
					t.Fatalf("consumer group failed: %v", err)
				default:
				}
				g0, c0, _ := members[0].state()
				g1, c1, _ := members[1].state()
				all := append(c0, c1...)
				slices.Sort(all)
				ok := g0 == g1 && len(c0) > 0 && len(c1) > 0 && len(slices.Compact(all)) == partitions && len(all) == partitions
				return ok, fmt.Sprintf("generation %d holds %v, generation %d holds %v", g0, c0, g1, c1)
			})
			produceValues(t, cl, topic, 0, count)

			waitFor(t, "every record consumed and committed", func() (bool, string) {
				seen := map[string]bool{}
				for _, m := range members {
					_, _, consumed := m.state()
					for _, v := range consumed {
						seen[v] = true
					}
				}
				committed := committedTotal(t, adm, group, topic)
				return len(seen) == count && committed == count, fmt.Sprintf("%d consumed, %d committed", len(seen), committed)
			})
			offsets, err := adm.FetchOffsets(context.Background(), group)
			require.NoError(t, err)
			ends, err := adm.ListEndOffsets(context.Background(), topic)
			require.NoError(t, err)
			ends.Each(func(e kadm.ListedOffset) {
				o, ok := offsets.Lookup(topic, e.Partition)
				require.True(t, ok, "partition %d committed", e.Partition)
				require.Equal(t, e.Offset, o.At, "partition %d", e.Partition)
			})
		})
	}
}

// sarama's ClusterAdmin: topics created, listed, described, their configs
// read, their partitions added, their records deleted, and a group of
// sarama consumers listed and described, with its committed offsets.
func TestKafkaSaramaClusterAdmin(t *testing.T) {
	n := startKafkaNode(t)
	seeds := []string{n.KafkaAddress()}
	cfg := saramaConfig(saramaVersion)
	admin, err := sarama.NewClusterAdmin(seeds, cfg)
	require.NoError(t, err)
	defer func() { require.NoError(t, admin.Close()) }()

	retention := "3600000"
	require.NoError(t, admin.CreateTopic("payments", &sarama.TopicDetail{
		NumPartitions: 2, ReplicationFactor: 1, ConfigEntries: map[string]*string{"retention.ms": &retention},
	}, false))
	err = admin.CreateTopic("payments", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false)
	require.ErrorIs(t, err, sarama.ErrTopicAlreadyExists)
	err = admin.CreateTopic("bad name!", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false)
	require.ErrorIs(t, err, sarama.ErrInvalidTopic)
	require.NoError(t, admin.CreateTopic("checked-only", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, true))

	topics, err := admin.ListTopics()
	require.NoError(t, err)
	require.Contains(t, topics, "payments")
	require.NotContains(t, topics, "checked-only", "validate only creates nothing")
	require.Equal(t, int32(2), topics["payments"].NumPartitions)
	require.Equal(t, int16(1), topics["payments"].ReplicationFactor)
	require.Equal(t, retention, *topics["payments"].ConfigEntries["retention.ms"])

	described, err := admin.DescribeTopics([]string{"payments", "no-such-topic"})
	require.NoError(t, err)
	require.Len(t, described, 2)
	require.Equal(t, "payments", described[0].Name)
	require.Equal(t, sarama.ErrNoError, described[0].Err)
	require.Len(t, described[0].Partitions, 2)
	for _, p := range described[0].Partitions {
		require.Equal(t, n.cfg.NodeID, p.Leader)
		require.Equal(t, []int32{n.cfg.NodeID}, p.Replicas)
		require.Equal(t, []int32{n.cfg.NodeID}, p.Isr)
	}
	require.Equal(t, sarama.ErrUnknownTopicOrPartition, described[1].Err)

	entries, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: "payments"})
	require.NoError(t, err)
	byName := map[string]sarama.ConfigEntry{}
	for _, e := range entries {
		byName[e.Name] = e
	}
	require.Equal(t, retention, byName["retention.ms"].Value)
	require.Equal(t, sarama.SourceTopic, byName["retention.ms"].Source)
	require.Contains(t, byName, "cleanup.policy")
	require.Equal(t, sarama.SourceDefault, byName["cleanup.policy"].Source)

	retention = "7200000"
	require.NoError(t, admin.IncrementalAlterConfig(sarama.TopicResource, "payments", map[string]sarama.IncrementalAlterConfigsEntry{
		"retention.ms": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &retention},
	}, false))
	entries, err = admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: "payments", ConfigNames: []string{"retention.ms"}})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, retention, entries[0].Value)

	brokers, controller, err := admin.DescribeCluster()
	require.NoError(t, err)
	require.Len(t, brokers, 1)
	require.Equal(t, n.cfg.NodeID, brokers[0].ID())
	require.Equal(t, n.KafkaAddress(), brokers[0].Addr())
	require.Equal(t, n.cfg.NodeID, controller)

	require.NoError(t, admin.CreatePartitions("payments", 4, nil, false))
	err = admin.CreatePartitions("payments", 3, nil, false)
	require.ErrorIs(t, err, sarama.ErrInvalidPartitions, "partitions are never removed")
	described, err = admin.DescribeTopics([]string{"payments"})
	require.NoError(t, err)
	require.Len(t, described[0].Partitions, 4)

	cl := kafkaClient(t, kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 10 {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "payments", Partition: 3, Value: []byte(fmt.Sprint(i))}).FirstErr())
	}
	require.NoError(t, admin.DeleteRecords("payments", map[int32]int64{3: 4}))
	starts, err := kadm.NewClient(cl).ListStartOffsets(ctx, "payments")
	require.NoError(t, err)
	start, _ := starts.Lookup("payments", 3)
	require.Equal(t, int64(4), start.Offset)
	err = admin.DeleteRecords("payments", map[int32]int64{3: 11})
	require.ErrorIs(t, err, sarama.ErrOffsetOutOfRange, "past the high watermark")

	// A group of one sarama consumer, which consumes all of payments and
	// commits.
	member := &saramaMember{}
	failed := make(chan error, 16)
	startSaramaMember(t, seeds, cfg, "ledger", "payments", member, failed)
	waitFor(t, "the member consuming and committing", func() (bool, string) {
		_, claims, consumed := member.state()
		committed := committedTotal(t, kadm.NewClient(cl), "ledger", "payments")
		return len(claims) == 4 && len(consumed) == 6 && committed == 10,
			fmt.Sprintf("holds %v, consumed %d, committed %d", claims, len(consumed), committed)
	})
	groups, err := admin.ListConsumerGroups()
	require.NoError(t, err)
	require.Equal(t, map[string]string{"ledger": "consumer"}, groups)
	descriptions, err := admin.DescribeConsumerGroups([]string{"ledger"})
	require.NoError(t, err)
	require.Len(t, descriptions, 1)
	group := descriptions[0]
	require.Equal(t, sarama.ErrNoError, group.Err)
	require.Equal(t, "Stable", group.State)
	require.Equal(t, "consumer", group.ProtocolType)
	require.Equal(t, "range", group.Protocol)
	require.Len(t, group.Members, 1)
	for _, m := range group.Members {
		require.Equal(t, cfg.ClientID, m.ClientId)
		assignment, err := m.GetMemberAssignment()
		require.NoError(t, err)
		partitions := assignment.Topics["payments"]
		slices.Sort(partitions)
		require.Equal(t, []int32{0, 1, 2, 3}, partitions)
	}
	offsets, err := admin.ListConsumerGroupOffsets("ledger", map[string][]int32{"payments": {0, 3}})
	require.NoError(t, err)
	require.Equal(t, sarama.ErrNoError, offsets.Err)
	require.Equal(t, int64(-1), offsets.GetBlock("payments", 0).Offset, "nothing there: nothing committed")
	require.Equal(t, int64(10), offsets.GetBlock("payments", 3).Offset)
	all, err := admin.ListConsumerGroupOffsets("ledger", nil)
	require.NoError(t, err)
	require.Equal(t, int64(10), all.GetBlock("payments", 3).Offset)

	// Offsets committed for a group without members, then deleted.
	committed, err := admin.AlterConsumerGroupOffsets("audit", map[string]map[int32]sarama.OffsetAndMetadata{"payments": {2: {Offset: 0}, 3: {Offset: 7}}}, nil)
	require.NoError(t, err)
	require.Equal(t, sarama.ErrNoError, committed.Errors["payments"][3])
	listed, err := admin.ListOffsets(map[string]map[int32]int64{"payments": {3: sarama.OffsetOldest}}, nil)
	require.NoError(t, err)
	require.Equal(t, int64(4), listed["payments"][3].Offset)
	offsets, err = admin.ListConsumerGroupOffsets("audit", nil)
	require.NoError(t, err)
	require.Equal(t, int64(7), offsets.GetBlock("payments", 3).Offset)
	require.NoError(t, admin.DeleteConsumerGroupOffset("audit", "payments", 3))
	offsets, err = admin.ListConsumerGroupOffsets("audit", nil)
	require.NoError(t, err)
	require.Equal(t, int64(0), offsets.GetBlock("payments", 2).Offset)
	require.Nil(t, offsets.GetBlock("payments", 3))
	require.NoError(t, admin.DeleteConsumerGroup("audit"))
	require.ErrorIs(t, admin.DeleteConsumerGroup("audit"), sarama.ErrGroupIDNotFound)

	require.NoError(t, admin.DeleteTopic("payments"))
	require.ErrorIs(t, admin.DeleteTopic("payments"), sarama.ErrUnknownTopicOrPartition)
	topics, err = admin.ListTopics()
	require.NoError(t, err)
	require.NotContains(t, topics, "payments")
}

// sarama told of older Kafka versions asks for older API versions: down to
// Kafka 0.11, the oldest whose produce and fetch versions Kafka 4.0 still
// takes (KIP-896), it produces, consumes and joins a group; before that
// its produce, fetch and join are answered UNSUPPORTED_VERSION, which it
// reports at once, and so is its admin's DescribeConfig before 1.1.
func TestKafkaSaramaVersions(t *testing.T) {
	n := startKafkaNode(t)
	seeds := []string{n.KafkaAddress()}
	cl := kafkaClient(t, kgo.SeedBrokers(seeds...))
	adm := kadm.NewClient(cl)
	for _, version := range []sarama.KafkaVersion{sarama.V0_11_0_0, sarama.V2_1_0_0, sarama.DefaultVersion, sarama.V3_6_0_0} {
		t.Run(version.String(), func(t *testing.T) {
			topic := "sarama-v" + version.String()
			createTopic(t, n, topic, 2)
			cfg := saramaConfig(version)
			producer, err := sarama.NewSyncProducer(seeds, cfg)
			require.NoError(t, err)
			const count = 50
			require.NoError(t, producer.SendMessages(saramaMessages(topic, count)))
			require.NoError(t, producer.Close())
			got := saramaConsume(t, seeds, cfg, topic, count)
			require.Len(t, got, count)
			for _, m := range got {
				require.Equal(t, "value-"+string(m.Headers[0].Value), string(m.Value))
			}

			member := &saramaMember{}
			failed := make(chan error, 16)
			startSaramaMember(t, seeds, cfg, topic, topic, member, failed)
			waitFor(t, "the member consuming and committing", func() (bool, string) {
				select {
				case err := <-failed:
					t.Fatalf("consumer group failed: %v", err)
				default:
				}
				_, claims, consumed := member.state()
				committed := committedTotal(t, adm, topic, topic)
				return len(claims) == 2 && len(consumed) == count && committed == count,
					fmt.Sprintf("holds %v, consumed %d, committed %d", claims, len(consumed), committed)
			})
		})
	}

	t.Run("refused", func(t *testing.T) {
		topic := "sarama-too-old"
		createTopic(t, n, topic, 1)
		cfg := saramaConfig(sarama.V0_10_2_0)
		cfg.Producer.Retry.Max = 1
		producer, err := sarama.NewSyncProducer(seeds, cfg)
		require.NoError(t, err)
		_, _, err = producer.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder("v")})
		require.ErrorIs(t, err, sarama.ErrUnsupportedVersion)
		require.NoError(t, producer.Close())

		consumer, err := sarama.NewConsumer(seeds, cfg)
		require.NoError(t, err)
		defer func() { require.NoError(t, consumer.Close()) }()
		pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
		require.NoError(t, err)
		defer pc.AsyncClose()
		select {
		case err := <-pc.Errors():
			require.ErrorIs(t, err, sarama.ErrUnsupportedVersion)
		case m := <-pc.Messages():
			t.Fatalf("consumed %v", m)
		case <-time.After(30 * time.Second):
			t.Fatal("no answer in 30 s")
		}

		cfg.Consumer.Group.Rebalance.Retry.Max = 0
		group, err := sarama.NewConsumerGroup(seeds, topic, cfg)
		require.NoError(t, err)
		defer func() { require.NoError(t, group.Close()) }()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err = group.Consume(ctx, []string{topic}, &saramaMember{})
		require.ErrorIs(t, err, sarama.ErrUnsupportedVersion)
		require.NoError(t, ctx.Err(), "answered, not timed out")

		// Told of Kafka 1.0, the admin describes configs with
		// DescribeConfigs v0, which Kafka 4.0 removed too; from 1.1 it
		// asks v1.
		for version, want := range map[sarama.KafkaVersion]error{sarama.V1_0_0_0: sarama.ErrUnsupportedVersion, sarama.V1_1_0_0: nil} {
			admin, err := sarama.NewClusterAdmin(seeds, saramaConfig(version))
			require.NoError(t, err)
			_, err = admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
			if want == nil {
				require.NoError(t, err, "%s", version)
			} else {
				require.ErrorIs(t, err, want, "%s", version)
			}
			require.NoError(t, admin.Close())
		}
	})
}

// sarama against a cluster of three, seeded with one node: the admin
// creates a topic of three replicas through it, the idempotent producer
// writes to every partition's leader with acks=all, and a group of two
// consumers, whose coordinator may be any node, reads and commits it all.
func TestKafkaSaramaClusterOfThree(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of three")
	}
	c := newTestClusterOf(t, 3, fastQuorum, func(cfg *Config) { cfg.KafkaListen = "127.0.0.1:0" })
	seeds := []string{c.nodes[1].KafkaAddress()}
	cfg := saramaConfig(saramaVersion)
	cfg.Producer.Idempotent, cfg.Producer.RequiredAcks, cfg.Net.MaxOpenRequests = true, sarama.WaitForAll, 1
	cfg.Producer.Retry.Max = 20

	client, err := sarama.NewClient(seeds, cfg)
	require.NoError(t, err)
	admin, err := sarama.NewClusterAdminFromClient(client)
	require.NoError(t, err)
	defer func() { require.NoError(t, admin.Close()) }()
	const topic, group, count = "sarama-spread", "sarama-spread", 600
	require.NoError(t, admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 6, ReplicationFactor: 3}, false))
	c.agree()
	brokers, _, err := admin.DescribeCluster()
	require.NoError(t, err)
	require.Len(t, brokers, 3)
	waitFor(t, "leaders on every node", func() (bool, string) {
		described, err := admin.DescribeTopics([]string{topic})
		require.NoError(t, err)
		leaders := map[int32]bool{}
		for _, p := range described[0].Partitions {
			if len(p.Isr) == 3 {
				leaders[p.Leader] = true
			}
		}
		return len(leaders) == 3, fmt.Sprint("leaders with a full ISR: ", leaders)
	})

	members := []*saramaMember{{}, {}}
	failed := make(chan error, 16)
	for _, m := range members {
		startSaramaMember(t, seeds, cfg, group, topic, m, failed)
	}
	producer, err := sarama.NewSyncProducer(seeds, cfg)
	require.NoError(t, err)
	require.NoError(t, producer.SendMessages(saramaMessages(topic, count)))
	require.NoError(t, producer.Close())

	adm := kadm.NewClient(kafkaClient(t, kgo.SeedBrokers(seeds...)))
	waitFor(t, "every record consumed and committed", func() (bool, string) {
		select {
		case err := <-failed:
			t.Fatalf("consumer group failed: %v", err)
		default:
		}
		seen := map[string]bool{}
		holding := 0
		for _, m := range members {
			_, claims, consumed := m.state()
			if len(claims) > 0 {
				holding++
			}
			for _, v := range consumed {
				seen[v] = true
			}
		}
		committed := committedTotal(t, adm, group, topic)
		return len(seen) == count && committed == count && holding == 2,
			fmt.Sprintf("%d consumed, %d committed, %d members holding partitions", len(seen), committed, holding)
	})
	// sarama hands back a group's error in DescribeGroups as it came, with
	// no state, and keeps the coordinator it asked; on a loaded machine the
	// answer can be such an error (a coordinator that moved with its
	// offsets partition, an ask past its timeout). So ask again, the
	// coordinator looked up anew, until the group is described.
	waitFor(t, "the group described as stable with both members", func() (bool, string) {
		descriptions, err := admin.DescribeConsumerGroups([]string{group})
		require.NoError(t, err)
		d := descriptions[0]
		if d.State == "Stable" && len(d.Members) == 2 {
			return true, ""
		}
		_ = client.RefreshCoordinator(group)
		return false, fmt.Sprintf("state %q, %d members, error %v", d.State, len(d.Members), d.Err)
	})
}
