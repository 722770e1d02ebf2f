package kafka

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/messages"
)

// Every topic config Depot knows is described with a Kafka type, the
// broker config of its default and documentation; no other.
func TestTopicConfigKeys(t *testing.T) {
	defaults := topic.DefaultConfig().Map()
	require.Len(t, topicConfigKeys, len(defaults))
	for name := range defaults {
		key, ok := topicConfigKeys[name]
		require.True(t, ok, name)
		require.NotEqual(t, kmsg.ConfigTypeUnknown, key.typ, name)
		require.NotEmpty(t, key.broker, name)
		require.NotEmpty(t, key.doc, name)
	}
	require.Equal(t, kmsg.ConfigTypeList, topicConfigKeys[topic.ConfigCleanupPolicy].typ)
	require.True(t, topic.IsListConfig(topic.ConfigCleanupPolicy), "the list configs are those Kafka types as lists")
}

func TestDescribeTopicConfigs(t *testing.T) {
	effective := topic.DefaultConfig().Map()
	effective["retention.ms"] = "1000"
	got := describeTopicConfigs(effective, map[string]string{"retention.ms": "1000"})
	require.Len(t, got, len(effective))
	for i := 1; i < len(got); i++ {
		require.Less(t, got[i-1].name, got[i].name, "by name")
	}
	byName := map[string]describedConfig{}
	for _, d := range got {
		byName[d.name] = d
	}
	retention := byName["retention.ms"]
	require.Equal(t, "1000", *retention.value)
	require.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, retention.source)
	require.Equal(t, kmsg.ConfigTypeLong, retention.typ)
	require.False(t, retention.readOnly)
	require.Equal(t, []configSynonym{
		{"retention.ms", "1000", kmsg.ConfigSourceDynamicTopicConfig},
		{"log.retention.ms", "604800000", kmsg.ConfigSourceDefaultConfig},
	}, retention.synonyms)
	segment := byName["segment.bytes"]
	require.Equal(t, "1073741824", *segment.value)
	require.Equal(t, kmsg.ConfigSourceDefaultConfig, segment.source)
	require.Equal(t, []configSynonym{{"log.segment.bytes", "1073741824", kmsg.ConfigSourceDefaultConfig}}, segment.synonyms)
}

// A resource's configs as the request asks: the names asked (unknown
// ones left out), synonyms and documentation only when asked.
func TestDescribedFor(t *testing.T) {
	configs := describeTopicConfigs(topic.DefaultConfig().Map(), nil)
	all := describedFor(configs, nil, false, false)
	require.Len(t, all, len(configs))
	for _, c := range all {
		require.Empty(t, c.ConfigSynonyms)
		require.Nil(t, c.Documentation)
		require.True(t, c.IsDefault)
		require.NotEqual(t, kmsg.ConfigTypeUnknown, c.ConfigType)
	}
	some := describedFor(configs, []string{"segment.ms", "no.such.config"}, true, true)
	require.Len(t, some, 1)
	require.Equal(t, "segment.ms", some[0].Name)
	require.Equal(t, "604800000", *some[0].Value)
	require.Len(t, some[0].ConfigSynonyms, 1)
	require.Equal(t, "log.roll.ms", some[0].ConfigSynonyms[0].Name)
	require.NotNil(t, some[0].Documentation)
	require.Empty(t, describedFor(configs, []string{}, false, false), "an empty list asks for none")
}

func TestDescribeBrokerConfigs(t *testing.T) {
	s := BrokerSettings{
		LogDirs: []string{"/a", "/b"}, Rack: "r1", Listener: "127.0.0.1:9092", Advertised: "kafka-1:9092",
		Voters: "1@h:7070", ReplicaLagMax: 10 * time.Second, RetentionCheckInterval: 10 * time.Second,
		LeaderRebalanceInterval: 30 * time.Second, OffsetsTopicPartitions: 50, OffsetsTopicSegmentBytes: 100 << 20,
		OffsetsTopicReplicationFactor: 3,
	}
	got := describeBrokerConfigs(4, s, 100<<20, 512<<20)
	values := map[string]string{}
	for i, d := range got {
		require.True(t, d.readOnly, d.name)
		require.NotEqual(t, kmsg.ConfigTypeUnknown, d.typ, d.name)
		require.NotEmpty(t, d.doc, d.name)
		if i > 0 {
			require.Less(t, got[i-1].name, d.name, "by name, each once")
		}
		values[d.name] = *d.value
	}
	for name, want := range map[string]string{
		"node.id": "4", "broker.id": "4", "broker.rack": "r1", "log.dirs": "/a,/b",
		"listeners": "PLAINTEXT://127.0.0.1:9092", "advertised.listeners": "PLAINTEXT://kafka-1:9092",
		"controller.quorum.voters": "1@h:7070", "replica.lag.time.max.ms": "10000",
		"log.retention.check.interval.ms": "10000", "auto.leader.rebalance.enable": "true",
		"leader.imbalance.check.interval.seconds": "30", "offsets.topic.num.partitions": "50",
		"offsets.topic.segment.bytes": "104857600", "offsets.topic.replication.factor": "3",
		"socket.request.max.bytes": "104857600", "queued.max.request.bytes": "536870912",
		"num.partitions": "1", "default.replication.factor": "1", "min.insync.replicas": "1",
		"log.segment.bytes": "1073741824", "log.retention.ms": "604800000", "message.max.bytes": "1048588",
		"unclean.leader.election.enable": "false", "auto.create.topics.enable": "false",
	} {
		require.Equal(t, want, values[name], name)
	}

	bare := describeBrokerConfigs(1, BrokerSettings{LeaderRebalanceInterval: -1}, 100, 200)
	names := map[string]string{}
	for _, d := range bare {
		names[d.name] = *d.value
	}
	for _, absent := range []string{"broker.rack", "log.dirs", "listeners", "controller.quorum.voters", "leader.imbalance.check.interval.seconds"} {
		require.NotContains(t, names, absent)
	}
	require.Equal(t, "false", names["auto.leader.rebalance.enable"])
}

func TestCreateTopicRequest(t *testing.T) {
	topicOf := func(partitions int32, rf int16, mutate func(*kmsg.CreateTopicsRequestTopic)) kmsg.CreateTopicsRequestTopic {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = "orders", partitions, rf
		if mutate != nil {
			mutate(&t)
		}
		return t
	}
	assign := func(partition int32, replicas ...int32) kmsg.CreateTopicsRequestTopicReplicaAssignment {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = partition, replicas
		return a
	}
	config := func(name string, value *string) kmsg.CreateTopicsRequestTopicConfig {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = name, value
		return c
	}
	for _, tc := range []struct {
		name  string
		topic kmsg.CreateTopicsRequestTopic
		want  *messages.CreateTopicRequest
		code  int16
	}{
		{"as given", topicOf(3, 2, nil), &messages.CreateTopicRequest{Name: "orders", Partitions: 3, ReplicationFactor: 2}, 0},
		{"defaults", topicOf(-1, -1, nil), &messages.CreateTopicRequest{Name: "orders", Partitions: 1}, 0},
		{"zero partitions go to the controller", topicOf(0, 1, nil), &messages.CreateTopicRequest{Name: "orders", ReplicationFactor: 1}, 0},
		{"replication factor 0", topicOf(1, 0, nil), nil, kerr.InvalidReplicationFactor.Code},
		{"replication factor -2", topicOf(1, -2, nil), nil, kerr.InvalidReplicationFactor.Code},
		{"configs", topicOf(1, 1, func(t *kmsg.CreateTopicsRequestTopic) {
			t.Configs = append(t.Configs, config("retention.ms", kmsg.StringPtr("1")))
		}), &messages.CreateTopicRequest{Name: "orders", Partitions: 1, ReplicationFactor: 1, Configs: map[string]string{"retention.ms": "1"}}, 0},
		{"config without a value", topicOf(1, 1, func(t *kmsg.CreateTopicsRequestTopic) {
			t.Configs = append(t.Configs, config("retention.ms", nil))
		}), nil, kerr.InvalidConfig.Code},
		{"config twice", topicOf(1, 1, func(t *kmsg.CreateTopicsRequestTopic) {
			t.Configs = append(t.Configs, config("retention.ms", kmsg.StringPtr("1")), config("retention.ms", kmsg.StringPtr("2")))
		}), nil, kerr.InvalidRequest.Code},
		{"replicas, in any order", topicOf(-1, -1, func(t *kmsg.CreateTopicsRequestTopic) {
			t.ReplicaAssignment = append(t.ReplicaAssignment, assign(1, 2, 3), assign(0, 3, 1))
		}), &messages.CreateTopicRequest{Name: "orders", Assignments: []*messages.ReplicaAssignment{{Replicas: []int32{3, 1}}, {Replicas: []int32{2, 3}}}}, 0},
		{"replicas and a count", topicOf(2, -1, func(t *kmsg.CreateTopicsRequestTopic) {
			t.ReplicaAssignment = append(t.ReplicaAssignment, assign(0, 1))
		}), nil, kerr.InvalidRequest.Code},
		{"replicas and a factor", topicOf(-1, 1, func(t *kmsg.CreateTopicsRequestTopic) {
			t.ReplicaAssignment = append(t.ReplicaAssignment, assign(0, 1))
		}), nil, kerr.InvalidRequest.Code},
		{"replicas with a gap", topicOf(-1, -1, func(t *kmsg.CreateTopicsRequestTopic) {
			t.ReplicaAssignment = append(t.ReplicaAssignment, assign(0, 1), assign(2, 1))
		}), nil, kerr.InvalidReplicaAssignment.Code},
		{"replicas of a partition twice", topicOf(-1, -1, func(t *kmsg.CreateTopicsRequestTopic) {
			t.ReplicaAssignment = append(t.ReplicaAssignment, assign(0, 1), assign(0, 2))
		}), nil, kerr.InvalidReplicaAssignment.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, code, msg := createTopicRequest(tc.topic, false)
			require.Equal(t, tc.code, code, msg)
			if tc.code != 0 {
				require.Nil(t, got)
				require.Contains(t, msg, `"orders"`)
				return
			}
			require.True(t, proto.Equal(tc.want, got), "want %v\ngot  %v", tc.want, got)
		})
	}
	got, _, _ := createTopicRequest(topicOf(1, 1, nil), true)
	require.True(t, got.GetValidateOnly())
}

func TestCreatedTopic(t *testing.T) {
	rt := kmsg.NewCreateTopicsResponseTopic()
	createdTopic(&rt, nil)
	require.Equal(t, int32(-1), rt.NumPartitions, "nothing known: Kafka's -1")
	md := &messages.TopicMetadata{
		Name: "orders", TopicId: "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
		Partitions: []*messages.PartitionMetadata{{Replicas: []int32{1, 2}}, {Replicas: []int32{2, 3}}},
		Configs:    topic.DefaultConfig().Map(), ConfigsSet: map[string]string{"retention.ms": "604800000"},
	}
	createdTopic(&rt, md)
	require.Equal(t, int32(2), rt.NumPartitions)
	require.Equal(t, int16(2), rt.ReplicationFactor)
	require.Equal(t, byte(0x0f), rt.TopicID[0])
	require.Len(t, rt.Configs, len(md.Configs))
	for _, c := range rt.Configs {
		want := kmsg.ConfigSourceDefaultConfig
		if c.Name == "retention.ms" {
			want = kmsg.ConfigSourceDynamicTopicConfig
		}
		require.Equal(t, int8(want), c.Source, c.Name)
	}
}

func TestDuplicateResources(t *testing.T) {
	topicA := resourceKey{kmsg.ConfigResourceTypeTopic, "a"}
	brokerA := resourceKey{kmsg.ConfigResourceTypeBroker, "a"}
	require.Equal(t, map[resourceKey]bool{topicA: true}, namedTwice([]resourceKey{topicA, brokerA, topicA}))
	require.Empty(t, namedTwice([]resourceKey{topicA, brokerA}))
}

func TestDescribeCluster(t *testing.T) {
	info := &messages.ClusterInfoResponse{ClusterId: "c1", ControllerLeader: 2, Nodes: []*messages.Broker{
		{NodeId: 3, KafkaAddress: "h3:9094", Rack: "r3"},
		{NodeId: 1, KafkaAddress: "h1:9092"},
		{NodeId: 2, KafkaAddress: "h2:9093", Fenced: true},
		{NodeId: 4}, // a voter not registered: no Kafka listener known
	}}
	resp := kmsg.NewPtrDescribeClusterResponse()
	describeCluster(resp, info, false)
	require.Equal(t, "c1", resp.ClusterID)
	require.Equal(t, int32(2), resp.ControllerID)
	require.Len(t, resp.Brokers, 2)
	require.Equal(t, int32(1), resp.Brokers[0].NodeID)
	require.Nil(t, resp.Brokers[0].Rack)
	require.Equal(t, "h3", resp.Brokers[1].Host)
	require.Equal(t, int32(9094), resp.Brokers[1].Port)
	require.Equal(t, "r3", *resp.Brokers[1].Rack)

	withFenced := kmsg.NewPtrDescribeClusterResponse()
	describeCluster(withFenced, info, true)
	require.Len(t, withFenced.Brokers, 3)
	require.True(t, withFenced.Brokers[1].IsFenced)
}
