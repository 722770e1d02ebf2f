package node

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaAdmin is a kadm client of n's Kafka listener.
func kafkaAdmin(t *testing.T, n *Node) (*kadm.Client, *kgo.Client) {
	t.Helper()
	cl := kafkaClient(t, kgo.SeedBrokers(n.KafkaAddress()))
	return kadm.NewClient(cl), cl
}

// freshMetadata asks a Kafka listener for the metadata of topics, not
// from kgo's cache.
func freshMetadata(t *testing.T, ctx context.Context, cl *kgo.Client, topics ...string) map[string]kmsg.MetadataResponseTopic {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	out := map[string]kmsg.MetadataResponseTopic{}
	for _, rt := range resp.Topics {
		out[*rt.Topic] = rt
	}
	return out
}

// valueOf is c's value, "" for none.
func valueOf(c kadm.Config) string { return c.MaybeValue() }

// configOf is the config key of topic or broker name in rs.
func configOf(t *testing.T, rs kadm.ResourceConfigs, name, key string) kadm.Config {
	t.Helper()
	r, err := rs.On(name, nil)
	require.NoError(t, err)
	require.NoError(t, r.Err, r.ErrMessage)
	for _, c := range r.Configs {
		if c.Key == key {
			return c
		}
	}
	t.Fatalf("%s has no config %s", name, key)
	return kadm.Config{}
}

func TestKafkaAdminCreateAndDeleteTopics(t *testing.T) {
	n := startKafkaNode(t)
	adm, cl := kafkaAdmin(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	created, err := adm.CreateTopic(ctx, 3, -1, map[string]*string{"retention.ms": kmsg.StringPtr("3600000")}, "admin-a")
	require.NoError(t, err)
	require.NoError(t, created.Err)
	require.Equal(t, int32(3), created.NumPartitions)
	require.Equal(t, int16(1), created.ReplicationFactor, "-1: the cluster's default")
	require.NotEqual(t, kadm.TopicID{}, created.ID)
	retention, segment := created.Configs["retention.ms"], created.Configs["segment.bytes"]
	require.Equal(t, "3600000", retention.MaybeValue())
	require.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, retention.Source)
	require.Equal(t, "1073741824", segment.MaybeValue())
	require.Equal(t, kmsg.ConfigSourceDefaultConfig, segment.Source)
	md := freshMetadata(t, ctx, cl, "admin-a")
	require.Equal(t, int16(0), md["admin-a"].ErrorCode)
	require.Len(t, md["admin-a"].Partitions, 3)
	require.Equal(t, [16]byte(created.ID), md["admin-a"].TopicID)

	defaulted, err := adm.CreateTopic(ctx, -1, -1, nil, "admin-default")
	require.NoError(t, err)
	require.NoError(t, defaulted.Err)
	require.Equal(t, int32(1), defaulted.NumPartitions, "-1: num.partitions")

	for _, tc := range []struct {
		name       string
		topic      string
		partitions int32
		rf         int16
		configs    map[string]*string
		err        error
	}{
		{"exists", "admin-a", 1, 1, nil, kerr.TopicAlreadyExists},
		{"bad name", "bad/name", 1, 1, nil, kerr.InvalidTopicException},
		{"name too long", string(make([]byte, 250)), 1, 1, nil, kerr.InvalidTopicException},
		{"unknown config", "admin-b", 1, 1, map[string]*string{"retention.hours": kmsg.StringPtr("1")}, kerr.InvalidConfig},
		{"bad config value", "admin-b", 1, 1, map[string]*string{"retention.ms": kmsg.StringPtr("soon")}, kerr.InvalidConfig},
		{"config without a value", "admin-b", 1, 1, map[string]*string{"retention.ms": nil}, kerr.InvalidConfig},
		{"no partitions", "admin-b", 0, 1, nil, kerr.InvalidPartitions},
		{"more replicas than nodes", "admin-b", 1, 3, nil, kerr.InvalidReplicationFactor},
		{"replication factor 0", "admin-b", 1, 0, nil, kerr.InvalidReplicationFactor},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := adm.CreateTopics(ctx, tc.partitions, tc.rf, tc.configs, tc.topic)
			require.NoError(t, err)
			r := rs[tc.topic]
			require.ErrorIs(t, r.Err, tc.err, r.ErrMessage)
			require.NotEmpty(t, r.ErrMessage)
		})
	}
	require.ElementsMatch(t, []string{"admin-a", "admin-default"}, slices.Collect(maps.Keys(freshMetadata(t, ctx, cl))), "the refusals created nothing")

	// validate_only answers as a create would, and creates nothing.
	checked, err := adm.ValidateCreateTopics(ctx, 4, 1, nil, "admin-checked")
	require.NoError(t, err)
	require.NoError(t, checked["admin-checked"].Err)
	require.Equal(t, int32(4), checked["admin-checked"].NumPartitions)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, freshMetadata(t, ctx, cl, "admin-checked")["admin-checked"].ErrorCode)

	// The replicas of each partition may be named, with -1 for the count
	// and the factor; partitions not numbered from 0 are refused.
	manual := kmsg.NewPtrCreateTopicsRequest()
	for _, tc := range []struct {
		topic      string
		partitions []int32
	}{{"admin-manual", []int32{1, 0}}, {"admin-gap", []int32{0, 2}}} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = tc.topic, -1, -1
		for _, p := range tc.partitions {
			a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			a.Partition, a.Replicas = p, []int32{n.cfg.NodeID}
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
		}
		manual.Topics = append(manual.Topics, rt)
	}
	dup := kmsg.NewCreateTopicsRequestTopic()
	dup.Topic, dup.NumPartitions, dup.ReplicationFactor = "admin-twice", 1, 1
	manual.Topics = append(manual.Topics, dup, dup)
	mresp, err := manual.RequestWith(ctx, cl)
	require.NoError(t, err)
	codes := map[string][]int16{}
	for _, r := range mresp.Topics {
		codes[r.Topic] = append(codes[r.Topic], r.ErrorCode)
	}
	require.Equal(t, map[string][]int16{
		"admin-manual": {0}, "admin-gap": {kerr.InvalidReplicaAssignment.Code},
		"admin-twice": {kerr.InvalidRequest.Code, kerr.InvalidRequest.Code},
	}, codes)
	require.Len(t, freshMetadata(t, ctx, cl, "admin-manual")["admin-manual"].Partitions, 2)

	// Deleted by name, and by id (v6); deleted again, or an id no topic
	// has, is answered so.
	deleted, err := adm.DeleteTopics(ctx, "admin-a", "no-such-topic")
	require.NoError(t, err)
	require.NoError(t, deleted["admin-a"].Err)
	require.ErrorIs(t, deleted["no-such-topic"].Err, kerr.UnknownTopicOrPartition)
	md = freshMetadata(t, ctx, cl, "admin-a", "admin-default")
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, md["admin-a"].ErrorCode)

	byID := kmsg.NewPtrDeleteTopicsRequest()
	for _, id := range [][16]byte{md["admin-default"].TopicID, {1, 2, 3}} {
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.TopicID = id
		byID.Topics = append(byID.Topics, dt)
	}
	dresp, err := byID.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Len(t, dresp.Topics, 2)
	require.Equal(t, int16(0), dresp.Topics[0].ErrorCode)
	require.Equal(t, "admin-default", *dresp.Topics[0].Topic)
	require.Equal(t, kerr.UnknownTopicID.Code, dresp.Topics[1].ErrorCode)
	require.Equal(t, []string{"admin-manual"}, slices.Collect(maps.Keys(freshMetadata(t, ctx, cl))))

	// The name is free again.
	again, err := adm.CreateTopic(ctx, 1, 1, nil, "admin-a")
	require.NoError(t, err)
	require.NoError(t, again.Err)
	require.NotEqual(t, created.ID, again.ID)
}

func TestKafkaAdminTopicConfigs(t *testing.T) {
	n := startKafkaNode(t)
	adm, _ := kafkaAdmin(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"retention.ms": kmsg.StringPtr("3600000")}, "conf")
	require.NoError(t, err)
	require.NoError(t, r.Err)

	described, err := adm.DescribeTopicConfigs(ctx, "conf")
	require.NoError(t, err)
	retention := configOf(t, described, "conf", "retention.ms")
	require.Equal(t, "3600000", retention.MaybeValue())
	require.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, retention.Source)
	require.Equal(t, []kadm.ConfigSynonym{
		{Key: "retention.ms", Value: kmsg.StringPtr("3600000"), Source: kmsg.ConfigSourceDynamicTopicConfig},
		{Key: "log.retention.ms", Value: kmsg.StringPtr("604800000"), Source: kmsg.ConfigSourceDefaultConfig},
	}, retention.Synonyms)
	segment := configOf(t, described, "conf", "segment.bytes")
	require.Equal(t, "1073741824", segment.MaybeValue())
	require.Equal(t, kmsg.ConfigSourceDefaultConfig, segment.Source)
	rc, _ := described.On("conf", nil)
	require.Len(t, rc.Configs, 11, "every topic config Depot knows")

	missing, err := adm.DescribeTopicConfigs(ctx, "no-such-topic")
	require.NoError(t, err)
	require.ErrorIs(t, missing[0].Err, kerr.UnknownTopicOrPartition)

	// Incremental: SET and DELETE; the partitions apply the change, as a
	// record too large for the new max.message.bytes shows.
	altered, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "max.message.bytes", Value: kmsg.StringPtr("2000")},
		{Op: kadm.DeleteConfig, Name: "retention.ms"},
	}, "conf")
	require.NoError(t, err)
	require.NoError(t, altered[0].Err, altered[0].ErrMessage)
	described, err = adm.DescribeTopicConfigs(ctx, "conf")
	require.NoError(t, err)
	require.Equal(t, "2000", valueOf(configOf(t, described, "conf", "max.message.bytes")))
	require.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, configOf(t, described, "conf", "max.message.bytes").Source)
	require.Equal(t, "604800000", valueOf(configOf(t, described, "conf", "retention.ms")))
	require.Equal(t, kmsg.ConfigSourceDefaultConfig, configOf(t, described, "conf", "retention.ms").Source)

	prod := kafkaClient(t, kgo.SeedBrokers(n.KafkaAddress()), kgo.DefaultProduceTopic("conf"), kgo.RecordRetries(1),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	err = prod.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 5000)}).FirstErr()
	require.ErrorIs(t, err, kerr.MessageTooLarge)
	require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Value: []byte("small")}).FirstErr())

	// Refused changes change nothing.
	for _, tc := range []struct {
		name    string
		configs []kadm.AlterConfig
		err     error
	}{
		{"unknown key", []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.hours", Value: kmsg.StringPtr("1")}}, kerr.InvalidConfig},
		{"bad value", []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: kmsg.StringPtr("big")}}, kerr.InvalidConfig},
		{"with a good one", []kadm.AlterConfig{
			{Op: kadm.SetConfig, Name: "segment.ms", Value: kmsg.StringPtr("60000")},
			{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: kmsg.StringPtr("0")},
		}, kerr.InvalidConfig},
		{"compaction", []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kmsg.StringPtr("compact")}}, kerr.InvalidConfig},
		{"append to a key that is not a list", []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "retention.ms", Value: kmsg.StringPtr("1")}}, kerr.InvalidConfig},
		{"set without a value", []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms"}}, kerr.InvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := adm.AlterTopicConfigs(ctx, tc.configs, "conf")
			require.NoError(t, err)
			require.ErrorIs(t, rs[0].Err, tc.err, rs[0].ErrMessage)
			require.NotEmpty(t, rs[0].ErrMessage)
		})
	}
	unknown, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kmsg.StringPtr("1")}}, "no-such-topic")
	require.NoError(t, err)
	require.ErrorIs(t, unknown[0].Err, kerr.UnknownTopicOrPartition)
	validated, err := adm.ValidateAlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.ms", Value: kmsg.StringPtr("60000")}}, "conf")
	require.NoError(t, err)
	require.NoError(t, validated[0].Err)
	described, err = adm.DescribeTopicConfigs(ctx, "conf")
	require.NoError(t, err)
	require.Equal(t, "2000", valueOf(configOf(t, described, "conf", "max.message.bytes")))
	require.Equal(t, "604800000", valueOf(configOf(t, described, "conf", "segment.ms")), "validate only, and the refusals, changed nothing")
	require.Equal(t, "1", valueOf(configOf(t, described, "conf", "min.insync.replicas")))

	// Not incremental (AlterConfigs): the configs set become those given,
	// the others taking their defaults again.
	replaced, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "segment.ms", Value: kmsg.StringPtr("60000")}}, "conf")
	require.NoError(t, err)
	require.NoError(t, replaced[0].Err, replaced[0].ErrMessage)
	described, err = adm.DescribeTopicConfigs(ctx, "conf")
	require.NoError(t, err)
	require.Equal(t, "60000", valueOf(configOf(t, described, "conf", "segment.ms")))
	require.Equal(t, kmsg.ConfigSourceDefaultConfig, configOf(t, described, "conf", "max.message.bytes").Source)
	require.Equal(t, "1048588", valueOf(configOf(t, described, "conf", "max.message.bytes")))
	require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 5000)}).FirstErr(), "max.message.bytes back to its default")
	badState, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "colour", Value: kmsg.StringPtr("red")}}, "conf")
	require.NoError(t, err)
	require.ErrorIs(t, badState[0].Err, kerr.InvalidConfig)

	// The actor client reads the configs set apart from the defaults.
	ac := actorClient(t, n)
	tm, err := ac.Metadata(ctx, "conf")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"segment.ms": "60000"}, tm.Topics[0].ConfigsSet)
}

func TestKafkaAdminBrokerConfigs(t *testing.T) {
	n := startKafkaNode(t)
	adm, _ := kafkaAdmin(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id := n.cfg.NodeID
	name := strconv.Itoa(int(id))

	described, err := adm.DescribeBrokerConfigs(ctx, id)
	require.NoError(t, err)
	var dirs string
	for i, d := range n.cfg.LogDirs {
		if i > 0 {
			dirs += ","
		}
		dirs += d.Path
	}
	for key, want := range map[string]string{
		"log.dirs":                     dirs,
		"broker.id":                    name,
		"node.id":                      name,
		"replica.lag.time.max.ms":      fmt.Sprint(n.cfg.ReplicaLagMax.Milliseconds()),
		"num.partitions":               "1",
		"default.replication.factor":   "1",
		"min.insync.replicas":          "1",
		"log.retention.ms":             "604800000",
		"auto.create.topics.enable":    "false",
		"advertised.listeners":         "PLAINTEXT://" + n.KafkaAddress(),
		"offsets.topic.num.partitions": fmt.Sprint(n.cfg.OffsetsTopicPartitions),
	} {
		c := configOf(t, described, name, key)
		require.Equal(t, want, c.MaybeValue(), key)
	}
	require.Equal(t, kmsg.ConfigSourceStaticBrokerConfig, configOf(t, described, name, "log.dirs").Source)
	require.Equal(t, kmsg.ConfigSourceDefaultConfig, configOf(t, described, name, "num.partitions").Source)

	cluster, err := adm.DescribeBrokerConfigs(ctx)
	require.NoError(t, err)
	require.Len(t, cluster, 1)
	require.NoError(t, cluster[0].Err)
	require.Empty(t, cluster[0].Configs, "no dynamic cluster-wide broker configs")

	// A broker's configs are its settings: changing them is refused, and
	// changes nothing.
	for _, alter := range []func() (kadm.AlterConfigsResponses, error){
		func() (kadm.AlterConfigsResponses, error) {
			return adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: kmsg.StringPtr("1")}}, id)
		},
		func() (kadm.AlterConfigsResponses, error) {
			return adm.AlterBrokerConfigsState(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: kmsg.StringPtr("1")}}, id)
		},
	} {
		rs, err := alter()
		require.NoError(t, err)
		require.ErrorIs(t, rs[0].Err, kerr.InvalidRequest)
		require.Contains(t, rs[0].ErrMessage, "broker configs cannot be changed while the node runs")
	}
	described, err = adm.DescribeBrokerConfigs(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "604800000", valueOf(configOf(t, described, name, "log.retention.ms")))
}

func TestKafkaAdminPartitionsAndRecords(t *testing.T) {
	n := startKafkaNode(t)
	adm, cl := kafkaAdmin(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := adm.CreateTopic(ctx, 1, 1, nil, "grow")
	require.NoError(t, err)
	require.NoError(t, r.Err)

	checked, err := adm.ValidateCreatePartitions(ctx, 5, "grow")
	require.NoError(t, err)
	require.NoError(t, checked["grow"].Err)
	added, err := adm.CreatePartitions(ctx, 2, "grow")
	require.NoError(t, err)
	require.NoError(t, added["grow"].Err, added["grow"].ErrMessage)
	grown := freshMetadata(t, ctx, cl, "grow")["grow"]
	require.Len(t, grown.Partitions, 3, "1 and 2 added; the validation added none")
	for _, p := range grown.Partitions {
		require.Equal(t, n.cfg.NodeID, p.Leader)
	}

	for _, tc := range []struct {
		name string
		set  int
		err  error
	}{{"fewer", 2, kerr.InvalidPartitions}, {"as many", 3, kerr.InvalidPartitions}} {
		rs, err := adm.UpdatePartitions(ctx, tc.set, "grow")
		require.NoError(t, err)
		require.ErrorIs(t, rs["grow"].Err, tc.err, tc.name)
		require.NotEmpty(t, rs["grow"].ErrMessage)
	}
	rs, err := adm.UpdatePartitions(ctx, 4, "no-such-topic")
	require.NoError(t, err)
	require.ErrorIs(t, rs["no-such-topic"].Err, kerr.UnknownTopicOrPartition)

	// A new partition takes records and gives them back.
	prod := kafkaClient(t, kgo.SeedBrokers(n.KafkaAddress()), kgo.DefaultProduceTopic("grow"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 10 {
		require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Partition: 2, Value: []byte(fmt.Sprint("new-", i))}).FirstErr())
	}
	cons := kafkaClient(t, kgo.SeedBrokers(n.KafkaAddress()), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		"grow": {2: kgo.NewOffset().At(0)},
	}), kgo.FetchMaxWait(200*time.Millisecond))
	var got []string
	for len(got) < 10 {
		fs := cons.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		require.NoError(t, fs.Err())
		for _, rec := range fs.Records() {
			require.Equal(t, int32(2), rec.Partition)
			got = append(got, string(rec.Value))
		}
	}
	require.Equal(t, "new-0", got[0])
	require.Equal(t, "new-9", got[9])

	// DeleteRecords moves the log start offset, as ListOffsets shows.
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: "grow", Partition: 2, At: 4})
	deleted, err := adm.DeleteRecords(ctx, offsets)
	require.NoError(t, err)
	d, ok := deleted.Lookup("grow", 2)
	require.True(t, ok)
	require.NoError(t, d.Err)
	require.Equal(t, int64(4), d.LowWatermark)
	starts, err := adm.ListStartOffsets(ctx, "grow")
	require.NoError(t, err)
	start, _ := starts.Lookup("grow", 2)
	require.Equal(t, int64(4), start.Offset)

	raw := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = "grow"
	for _, p := range []struct {
		partition int32
		offset    int64
	}{{2, 99}, {7, 0}, {2, -1}} {
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = p.partition, p.offset
		rt.Partitions = append(rt.Partitions, rp)
	}
	raw.Topics = append(raw.Topics, rt)
	missing := kmsg.NewDeleteRecordsRequestTopic()
	missing.Topic = "no-such-topic"
	missing.Partitions = append(missing.Partitions, kmsg.NewDeleteRecordsRequestTopicPartition())
	raw.Topics = append(raw.Topics, missing)
	resp, err := raw.RequestWith(ctx, cl.Broker(int(n.cfg.NodeID)))
	require.NoError(t, err)
	require.Equal(t, kerr.OffsetOutOfRange.Code, resp.Topics[0].Partitions[0].ErrorCode, "past the high watermark")
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, resp.Topics[0].Partitions[1].ErrorCode)
	require.Equal(t, int16(0), resp.Topics[0].Partitions[2].ErrorCode)
	require.Equal(t, int64(10), resp.Topics[0].Partitions[2].LowWatermark, "-1: the high watermark")
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, resp.Topics[1].Partitions[0].ErrorCode)
	starts, err = adm.ListStartOffsets(ctx, "grow")
	require.NoError(t, err)
	start, _ = starts.Lookup("grow", 2)
	require.Equal(t, int64(10), start.Offset)
}

// describeCluster asks a Kafka listener for DescribeCluster.
func describeCluster(t *testing.T, ctx context.Context, cl kmsg.Requestor, version int16, endpointType int8) *kmsg.DescribeClusterResponse {
	t.Helper()
	req := kmsg.NewPtrDescribeClusterRequest()
	req.SetVersion(version)
	req.EndpointType = endpointType
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	return resp
}

// Versions Kafka 4.0 removed are refused UNSUPPORTED_VERSION, and the
// connection stays open.
func TestKafkaAdminVersions(t *testing.T) {
	n := startKafkaNode(t)
	c := dialKafka(t, n)
	create := kmsg.NewPtrCreateTopicsRequest()
	create.SetVersion(1)
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "old", 1, 1
	create.Topics = append(create.Topics, ct)
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.SetVersion(0)
	del.TopicNames = []string{"old"}
	describe := kmsg.NewPtrDescribeConfigsRequest()
	describe.SetVersion(0)
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeTopic, "old"
	describe.Resources = append(describe.Resources, dr)
	for _, tc := range []struct {
		req  kmsg.Request
		code func(kmsg.Response) int16
	}{
		{create, func(r kmsg.Response) int16 { return r.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode }},
		{del, func(r kmsg.Response) int16 { return r.(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode }},
		{describe, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode }},
	} {
		c.send(tc.req, 5)
		corr, body := c.response()
		require.Equal(t, int32(5), corr)
		resp := tc.req.ResponseKind()
		require.False(t, resp.IsFlexible())
		require.NoError(t, resp.ReadFrom(body))
		require.Equal(t, kerr.UnsupportedVersion.Code, tc.code(resp), "%s v%d", kmsg.NameForKey(tc.req.Key()), tc.req.GetVersion())
	}

	cl := kafkaClient(t, kgo.SeedBrokers(n.KafkaAddress()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	controllers := describeCluster(t, ctx, cl, 1, 2)
	require.Equal(t, kerr.UnsupportedEndpointType.Code, controllers.ErrorCode)
	one := describeCluster(t, ctx, cl, 0, 1)
	require.Equal(t, int16(0), one.ErrorCode)
	require.Len(t, one.Brokers, 1)
	require.Equal(t, n.cfg.NodeID, one.ControllerID)
}

// Three nodes in one process: DescribeCluster names them at their Kafka
// addresses and the active controller; partitions added to a replicated
// topic are spread as a new topic's are, and take records.
func TestKafkaAdminClusterOfThree(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of three")
	}
	c := newTestClusterOf(t, 3, fastQuorum, func(cfg *Config) { cfg.KafkaListen = "127.0.0.1:0" })
	addrs := map[int32]string{}
	var seeds []string
	for id, n := range c.nodes {
		addrs[id] = n.KafkaAddress()
		seeds = append(seeds, n.KafkaAddress())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := kafkaClient(t, kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(100*time.Millisecond))
	adm := kadm.NewClient(cl)

	info, err := c.client().ClusterInfo(ctx)
	require.NoError(t, err)
	for id := range c.nodes {
		resp := describeCluster(t, ctx, cl.Broker(int(id)), 2, 1)
		require.Equal(t, int16(0), resp.ErrorCode)
		require.Equal(t, info.ClusterId, resp.ClusterID)
		require.Equal(t, info.ControllerLeader, resp.ControllerID, "the active controller, asked of node %d", id)
		require.Len(t, resp.Brokers, 3)
		for _, b := range resp.Brokers {
			require.Equal(t, addrs[b.NodeID], net.JoinHostPort(b.Host, fmt.Sprint(b.Port)))
			require.False(t, b.IsFenced)
		}
	}

	created, err := adm.CreateTopic(ctx, 3, 3, nil, "spread")
	require.NoError(t, err)
	require.NoError(t, created.Err, created.ErrMessage)
	require.Equal(t, int16(3), created.ReplicationFactor)
	added, err := adm.UpdatePartitions(ctx, 6, "spread")
	require.NoError(t, err)
	require.NoError(t, added["spread"].Err, added["spread"].ErrMessage)
	c.agree()
	spread := freshMetadata(t, ctx, cl, "spread")["spread"]
	require.Len(t, spread.Partitions, 6)
	leaders := map[int32]int{}
	for _, p := range spread.Partitions {
		require.ElementsMatch(t, []int32{1, 2, 3}, p.Replicas)
		if p.Partition >= 3 {
			leaders[p.Leader]++
		}
	}
	require.Len(t, leaders, 3, "the new partitions' leaders spread over the nodes: %v", leaders)

	// A change asked of any node is made by the active controller: each
	// node forwards it there.
	for id := range c.nodes {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "spread"
		rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		rc.Name, rc.Op, rc.Value = "retention.ms", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(fmt.Sprint(3600000*id))
		rr.Configs = append(rr.Configs, rc)
		req.Resources = append(req.Resources, rr)
		resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
		require.NoError(t, err)
		require.Equal(t, int16(0), resp.Resources[0].ErrorCode, "asked of node %d", id)
		c.agree() // every node's metadata has applied the change
		described, err := adm.DescribeTopicConfigs(ctx, "spread")
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint(3600000*id), valueOf(configOf(t, described, "spread", "retention.ms")))
	}

	prod := kafkaClient(t, kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("spread"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MetadataMinAge(100*time.Millisecond))
	for i := range 5 {
		require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Partition: 5, Value: []byte(fmt.Sprint(i))}).FirstErr())
	}
	end, err := adm.ListEndOffsets(ctx, "spread")
	require.NoError(t, err)
	o, _ := end.Lookup("spread", 5)
	require.NoError(t, o.Err)
	require.Equal(t, int64(5), o.Offset)
}
