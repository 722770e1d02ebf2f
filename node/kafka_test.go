package node

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"syscall"
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
	wirekafka "github.com/depot-dev/depot/wire/kafka"
)

// startKafkaNode starts a node with a Kafka listener on a free port.
func startKafkaNode(t *testing.T) *Node {
	t.Helper()
	cfg := testConfig(t, t.TempDir())
	cfg.HTTP, cfg.KafkaListen = "", "127.0.0.1:0"
	return startNode(t, cfg)
}

// kafkaClient is a franz-go client of the nodes' Kafka listeners.
func kafkaClient(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// actorClient is an actor client of n, in n's actor system.
func actorClient(t testing.TB, n *Node) *client.Client {
	t.Helper()
	cl, err := client.New(client.Brokers(n.Address()), client.ActorSystem(n.System(), n.Transport()), client.RequestTimeout(10*time.Second),
		client.Logger(logrus.NewEntry(actortest.Logger(t, logrus.WarnLevel))))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// kafkaConsume reads n records of topic from the start through a new kgo
// consumer.
func kafkaConsume(t *testing.T, seeds []string, topic string, n int) []*kgo.Record {
	t.Helper()
	cl := kafkaClient(t, kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "consumed %d of %d", len(out), n)
		for _, e := range fs.Errors() {
			require.NoError(t, e.Err, "%s/%d", e.Topic, e.Partition)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

func TestKafkaProduceConsume(t *testing.T) {
	n := startKafkaNode(t)
	createTopic(t, n, "orders", 3)
	seeds := []string{n.KafkaAddress()}

	for _, tc := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"idempotent acks=all", nil},
		{"acks=1", []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}},
		{"acks=0", []kgo.Opt{kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite()}},
		{"zstd", []kgo.Opt{kgo.ProducerBatchCompression(kgo.ZstdCompression())}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "t-" + fmt.Sprint(time.Now().UnixNano())
			createTopic(t, n, topic, 3)
			cl := kafkaClient(t, append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic)}, tc.opts...)...)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			const count = 300
			want := map[string]string{}
			var rs []*kgo.Record
			for i := range count {
				k, v := fmt.Sprintf("key-%d", i), fmt.Sprintf("value-%d-%s", i, bytes.Repeat([]byte{'x'}, i))
				want[k] = v
				rs = append(rs, &kgo.Record{Key: []byte(k), Value: []byte(v), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(k)}}})
			}
			require.NoError(t, cl.ProduceSync(ctx, rs...).FirstErr())
			got := kafkaConsume(t, seeds, topic, count)
			require.Len(t, got, count)
			perPartition := map[int32]int64{}
			for _, r := range got {
				require.Equal(t, want[string(r.Key)], string(r.Value))
				require.Equal(t, string(r.Key), string(r.Headers[0].Value))
				require.Equal(t, perPartition[r.Partition], r.Offset, "offsets in order without gaps")
				perPartition[r.Partition]++
			}
		})
	}
}

// A record batch goes to the partition and back as the bytes it came in;
// the actor client reads what Kafka's protocol wrote.
func TestKafkaBatchesAreStoredAsSent(t *testing.T) {
	n := startKafkaNode(t)
	createTopic(t, n, "raw", 1)
	seeds := []string{n.KafkaAddress()}
	cl := kafkaClient(t, kgo.SeedBrokers(seeds...))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	raw := actortest.Batch(t, "v0", "v1")

	md, err := kadm.NewClient(cl).Metadata(ctx, "raw")
	require.NoError(t, err)
	produce := kmsg.NewPtrProduceRequest()
	produce.Acks, produce.TimeoutMillis = -1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic, pt.TopicID = "raw", md.Topics["raw"].ID
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = raw
	pt.Partitions = append(pt.Partitions, pp)
	produce.Topics = append(produce.Topics, pt)
	for range 2 {
		resp, err := produce.RequestWith(ctx, cl)
		require.NoError(t, err)
		require.Equal(t, int16(0), resp.Topics[0].Partitions[0].ErrorCode)
	}

	fetch := kmsg.NewPtrFetchRequest()
	fetch.MaxBytes = 1 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "raw"
	ft.TopicID = md.Topics["raw"].ID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	resp, err := fetch.RequestWith(ctx, cl)
	require.NoError(t, err)
	got := resp.Topics[0].Partitions[0]
	require.Equal(t, int16(0), got.ErrorCode)
	require.Equal(t, int64(4), got.HighWatermark)
	// The leader writes the base offset and its leader epoch, which the
	// CRC leaves out, and nothing else.
	stored := func(base int64) []byte {
		b := bytes.Clone(raw)
		binary.BigEndian.PutUint64(b, uint64(base))
		binary.BigEndian.PutUint32(b[12:], uint32(md.Topics["raw"].Partitions[0].LeaderEpoch))
		return b
	}
	require.Equal(t, append(stored(0), stored(2)...), got.RecordBatches, "byte for byte")

	// The actor client reads what Kafka's protocol wrote.
	ac := actorClient(t, n)
	off, err := ac.ListOffset(ctx, "raw", 0, client.LatestOffset)
	require.NoError(t, err)
	require.Equal(t, int64(4), off)
}

func TestKafkaMetadataAndOffsets(t *testing.T) {
	n := startKafkaNode(t)
	createTopic(t, n, "meta", 4)
	cl := kafkaClient(t, kgo.SeedBrokers(n.KafkaAddress()))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	md, err := adm.Metadata(ctx)
	require.NoError(t, err)
	require.Len(t, md.Brokers, 1)
	host, port, err := net.SplitHostPort(n.KafkaAddress())
	require.NoError(t, err)
	require.Equal(t, host, md.Brokers[0].Host)
	require.Equal(t, port, fmt.Sprint(md.Brokers[0].Port))
	require.Equal(t, n.cfg.NodeID, md.Brokers[0].NodeID)
	require.NotEmpty(t, md.Cluster)
	topic := md.Topics["meta"]
	require.NoError(t, topic.Err)
	require.NotEqual(t, kadm.TopicID{}, topic.ID)
	require.Len(t, topic.Partitions, 4)
	for _, p := range topic.Partitions {
		require.Equal(t, n.cfg.NodeID, p.Leader)
		require.Equal(t, []int32{n.cfg.NodeID}, p.Replicas)
		require.Equal(t, []int32{n.cfg.NodeID}, p.ISR)
	}
	missing, err := adm.Metadata(ctx, "no-such-topic")
	require.NoError(t, err)
	require.ErrorIs(t, missing.Topics["no-such-topic"].Err, kerr.UnknownTopicOrPartition)

	start := time.Now().UnixMilli()
	prod := kafkaClient(t, kgo.SeedBrokers(n.KafkaAddress()), kgo.DefaultProduceTopic("meta"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 10 {
		r := &kgo.Record{Partition: 2, Value: []byte(fmt.Sprint(i)), Timestamp: time.UnixMilli(start + int64(i)*1000)}
		require.NoError(t, prod.ProduceSync(ctx, r).FirstErr())
	}
	earliest, err := adm.ListStartOffsets(ctx, "meta")
	require.NoError(t, err)
	latest, err := adm.ListEndOffsets(ctx, "meta")
	require.NoError(t, err)
	byTime, err := adm.ListOffsetsAfterMilli(ctx, start+4500, "meta")
	require.NoError(t, err)
	for p := int32(0); p < 4; p++ {
		e, _ := earliest.Lookup("meta", p)
		l, _ := latest.Lookup("meta", p)
		require.NoError(t, e.Err)
		require.NoError(t, l.Err)
		require.Equal(t, int64(0), e.Offset)
		if p == 2 {
			require.Equal(t, int64(10), l.Offset)
			bt, _ := byTime.Lookup("meta", p)
			require.NoError(t, bt.Err)
			require.Equal(t, int64(5), bt.Offset)
		} else {
			require.Equal(t, int64(0), l.Offset)
		}
	}

	// OffsetForLeaderEpoch, as a consumer asks it after a leader change.
	epochs := kmsg.NewPtrOffsetForLeaderEpochRequest()
	et := kmsg.NewOffsetForLeaderEpochRequestTopic()
	et.Topic = "meta"
	ep := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	ep.Partition, ep.CurrentLeaderEpoch, ep.LeaderEpoch = 2, topic.Partitions[2].LeaderEpoch, topic.Partitions[2].LeaderEpoch
	et.Partitions = append(et.Partitions, ep)
	epochs.Topics = append(epochs.Topics, et)
	eresp, err := epochs.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Equal(t, int16(0), eresp.Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, int64(10), eresp.Topics[0].Partitions[0].EndOffset)
}

// rawConn is a connection to a Kafka listener that writes frames as they
// are given.
type rawConn struct {
	t  *testing.T
	nc net.Conn
}

func dialKafka(t *testing.T, n *Node) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", n.KafkaListenAddress(), 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}
}

func (c *rawConn) send(req kmsg.Request, correlationID int32) {
	c.t.Helper()
	c.write(wirekafka.AppendRequest(nil, correlationID, kmsg.StringPtr("raw"), req))
}

func (c *rawConn) write(b []byte) {
	c.t.Helper()
	_, err := c.nc.Write(b)
	require.NoError(c.t, err)
}

// response reads one response frame: its correlation id and the rest,
// the tagged fields of a flexible response header included.
func (c *rawConn) response() (int32, []byte) {
	c.t.Helper()
	require.NoError(c.t, c.nc.SetReadDeadline(time.Now().Add(10*time.Second)))
	var size [4]byte
	_, err := io.ReadFull(c.nc, size[:])
	require.NoError(c.t, err)
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err = io.ReadFull(c.nc, frame)
	require.NoError(c.t, err)
	return int32(binary.BigEndian.Uint32(frame)), frame[4:]
}

// requireClosed waits for the listener to close the connection.
func (c *rawConn) requireClosed() {
	c.t.Helper()
	require.NoError(c.t, c.nc.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err := io.Copy(io.Discard, c.nc)
	if errors.Is(err, syscall.ECONNRESET) {
		return // closed with bytes the client sent still unread
	}
	require.NoError(c.t, err, "closed by the listener, not timed out")
}

func TestKafkaBadFramesCloseOnlyTheirConnection(t *testing.T) {
	n := startKafkaNode(t)
	createTopic(t, n, "steady", 1)
	cl := kafkaClient(t, kgo.SeedBrokers(n.KafkaAddress()), kgo.DefaultProduceTopic("steady"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("before")}).FirstErr())
	idle := dialKafka(t, n)

	size := func(n int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(n)) }
	unknownKey := append(size(10), 0x03, 0xe7, 0, 0, 0, 0, 0, 1, 0xff, 0xff)
	garbage := append(size(12), bytes.Repeat([]byte{0xee}, 12)...)
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"larger than socket.request.max.bytes", size(wirekafka.DefaultMaxRequestBytes + 1)},
		{"negative length", size(-5)},
		{"garbage", garbage},
		{"unknown API key", unknownKey},
		{"TLS ClientHello", []byte{0x16, 0x03, 0x01, 0x00, 0xa5, 0x01, 0x00, 0x00, 0xa1, 0x03, 0x03}},
		{"body that does not decode", append(size(14), 0, 3, 0, 9, 0, 0, 0, 1, 0xff, 0xff, 0, 0, 0, 0x7f)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialKafka(t, n)
			c.write(tc.frame)
			c.requireClosed()
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte(tc.name)}).FirstErr(), "the node goes on serving")
		})
	}
	// The idle connection was not closed by the others' bad frames.
	v := kmsg.NewPtrApiVersionsRequest()
	v.SetVersion(3)
	v.ClientSoftwareName, v.ClientSoftwareVersion = "raw", "1"
	idle.send(v, 9)
	corr, _ := idle.response()
	require.Equal(t, int32(9), corr)
}

func TestKafkaVersions(t *testing.T) {
	n := startKafkaNode(t)
	c := dialKafka(t, n)

	// ApiVersions at a version from the future: a v0 answer, with the
	// supported list (KIP-511).
	future := kmsg.NewPtrApiVersionsRequest()
	future.SetVersion(5)
	frame := wirekafka.AppendRequest(nil, 1, nil, future)
	binary.BigEndian.PutUint16(frame[6:], 99)
	c.write(frame)
	corr, body := c.response()
	require.Equal(t, int32(1), corr)
	v0 := kmsg.NewPtrApiVersionsResponse()
	v0.SetVersion(0)
	require.NoError(t, v0.ReadFrom(body))
	require.Equal(t, int16(35), v0.ErrorCode)
	versions := map[int16][2]int16{}
	for _, k := range v0.ApiKeys {
		versions[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	require.Equal(t, [2]int16{0, 5}, versions[18])
	require.Equal(t, [2]int16{4, 18}, versions[1])

	// Every version advertised answers; at each, the listed list is the
	// same.
	for v := int16(0); v <= 5; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(v)
		req.ClientSoftwareName, req.ClientSoftwareVersion = "raw", "1"
		c.send(req, int32(100+v))
		corr, body := c.response()
		require.Equal(t, int32(100+v), corr)
		resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
		require.NoError(t, resp.ReadFrom(body), "v%d", v)
		require.Equal(t, int16(0), resp.ErrorCode)
		require.Equal(t, v0.ApiKeys, resp.ApiKeys)
	}

	// A known API at a version not taken: UNSUPPORTED_VERSION, and the
	// connection stays open.
	for _, tc := range []struct {
		req  kmsg.Request
		code func(kmsg.Response) int16
	}{
		{func() kmsg.Request {
			r := kmsg.NewPtrFetchRequest()
			r.SetVersion(3)
			t := kmsg.NewFetchRequestTopic()
			t.Topic = "x"
			t.Partitions = append(t.Partitions, kmsg.NewFetchRequestTopicPartition())
			r.Topics = append(r.Topics, t)
			return r
		}(), func(r kmsg.Response) int16 { return r.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode }},
		{func() kmsg.Request {
			r := kmsg.NewPtrProduceRequest()
			r.SetVersion(2)
			t := kmsg.NewProduceRequestTopic()
			t.Topic = "x"
			t.Partitions = append(t.Partitions, kmsg.NewProduceRequestTopicPartition())
			r.Topics = append(r.Topics, t)
			return r
		}(), func(r kmsg.Response) int16 { return r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode }},
		{func() kmsg.Request {
			r := kmsg.NewPtrListOffsetsRequest()
			r.SetVersion(7)
			t := kmsg.NewListOffsetsRequestTopic()
			t.Topic = "x"
			t.Partitions = append(t.Partitions, kmsg.NewListOffsetsRequestTopicPartition())
			r.Topics = append(r.Topics, t)
			return r
		}(), func(r kmsg.Response) int16 { return r.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode }},
		{func() kmsg.Request { r := kmsg.NewPtrDescribeACLsRequest(); r.SetVersion(0); return r }(),
			func(r kmsg.Response) int16 { return r.(*kmsg.DescribeACLsResponse).ErrorCode }},
	} {
		c.send(tc.req, 7)
		corr, body := c.response()
		require.Equal(t, int32(7), corr)
		resp := tc.req.ResponseKind()
		if resp.IsFlexible() {
			require.Equal(t, byte(0), body[0], "no tagged fields in the response header")
			body = body[1:]
		}
		require.NoError(t, resp.ReadFrom(body))
		require.Equal(t, kerr.UnsupportedVersion.Code, tc.code(resp), "%s v%d", kmsg.NameForKey(tc.req.Key()), tc.req.GetVersion())
	}
}

func TestKafkaRefusals(t *testing.T) {
	n := startKafkaNode(t)
	cl := kafkaClient(t, kgo.SeedBrokers(n.KafkaAddress()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	acls := kmsg.NewPtrDescribeACLsRequest()
	aresp, err := acls.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Equal(t, kerr.SecurityDisabled.Code, aresp.ErrorCode)

	sasl := kmsg.NewPtrSASLHandshakeRequest()
	sasl.Mechanism = "PLAIN"
	sresp, err := sasl.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Equal(t, kerr.UnsupportedSaslMechanism.Code, sresp.ErrorCode)
	require.Empty(t, sresp.SupportedMechanisms)

	txn := kmsg.NewPtrInitProducerIDRequest()
	txn.TransactionalID = kmsg.StringPtr("txn-1")
	// Sent to the node itself: kgo sends it to the transaction coordinator,
	// which FindCoordinator names.
	tresp, err := txn.RequestWith(ctx, cl.Broker(int(n.cfg.NodeID)))
	require.NoError(t, err)
	require.Equal(t, kerr.InvalidRequest.Code, tresp.ErrorCode)

	idem := kmsg.NewPtrInitProducerIDRequest()
	iresp, err := idem.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Equal(t, int16(0), iresp.ErrorCode)
	require.GreaterOrEqual(t, iresp.ProducerID, int64(0))
	again, err := idem.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.NotEqual(t, iresp.ProducerID, again.ProducerID, "each producer its own id")
}

// Requests on one connection are answered in the order they came, however
// their answers are ready: a fetch that waits for data holds back the
// answer to a later ApiVersions, and a produce with acks=0, which wakes
// the fetch, takes no place among the answers.
func TestKafkaPipelinedAnswersInOrder(t *testing.T) {
	n := startKafkaNode(t)
	createTopic(t, n, "pipe", 1)
	c := dialKafka(t, n)

	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(12)
	fetch.MaxWaitMillis, fetch.MinBytes, fetch.MaxBytes = 10000, 1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "pipe"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)

	versions := kmsg.NewPtrApiVersionsRequest()
	versions.SetVersion(3)
	versions.ClientSoftwareName, versions.ClientSoftwareVersion = "raw", "1"

	produce := kmsg.NewPtrProduceRequest()
	produce.SetVersion(9)
	produce.Acks, produce.TimeoutMillis = 0, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "pipe"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = actortest.Batch(t, "woken")
	pt.Partitions = append(pt.Partitions, pp)
	produce.Topics = append(produce.Topics, pt)

	start := time.Now()
	c.send(fetch, 1)
	c.send(versions, 2)
	c.send(produce, 3)
	c.send(versions, 4)

	corr, body := c.response()
	require.Equal(t, int32(1), corr, "the fetch first")
	require.Less(t, time.Since(start), 5*time.Second, "woken by the produce, not at its max wait")
	resp := fetch.ResponseKind().(*kmsg.FetchResponse)
	require.NoError(t, resp.ReadFrom(body[1:]))
	got := resp.Topics[0].Partitions[0]
	require.Equal(t, int16(0), got.ErrorCode)
	require.Equal(t, int64(1), got.HighWatermark)
	require.Equal(t, pp.Records[wireRecordsFrom:], got.RecordBatches[wireRecordsFrom:])
	for _, want := range []int32{2, 4} {
		corr, _ := c.response()
		require.Equal(t, want, corr)
	}
}

// wireRecordsFrom is where a stored batch's bytes start to be those the
// producer sent: the base offset and partition leader epoch come before.
const wireRecordsFrom = 16

// A consumer waiting on an empty partition gets its records once they are
// produced; one at an offset past the end is told OFFSET_OUT_OF_RANGE.
func TestKafkaFetchWaitsAndRefuses(t *testing.T) {
	n := startKafkaNode(t)
	createTopic(t, n, "wait", 2)
	seeds := []string{n.KafkaAddress()}
	cons := kafkaClient(t, kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		"wait": {1: kgo.NewOffset().At(0)},
	}), kgo.FetchMaxWait(5*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	polled := make(chan kgo.Fetches, 1)
	go func() { polled <- cons.PollFetches(ctx) }()
	time.Sleep(300 * time.Millisecond) // the fetch is parked by then, or sent soon after
	prod := kafkaClient(t, kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("wait"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	sent := time.Now()
	require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("late")}).FirstErr())
	fs := <-polled
	require.NoError(t, fs.Err())
	require.Len(t, fs.Records(), 1)
	require.Equal(t, "late", string(fs.Records()[0].Value))
	require.Less(t, time.Since(sent), 4*time.Second, "answered as the record came, not at max wait")

	cl := kafkaClient(t, kgo.SeedBrokers(seeds...))
	md, err := kadm.NewClient(cl).Metadata(ctx, "wait")
	require.NoError(t, err)
	fetch := kmsg.NewPtrFetchRequest()
	fetch.MaxBytes = 1 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = "wait", md.Topics["wait"].ID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = 1, 99, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	resp, err := fetch.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Equal(t, kerr.OffsetOutOfRange.Code, resp.Topics[0].Partitions[0].ErrorCode)
	require.NotNil(t, resp.Topics[0].Partitions[0].RecordBatches, "empty records, not null, which librdkafka cannot read")
	require.Equal(t, int32(0), resp.SessionID, "a sessionless fetch (epoch -1) makes no session")
}

// Three nodes, each with its Kafka listener: metadata names every node at
// its own Kafka address and each partition's leader, replicas and ISR;
// kgo produces to each partition's leader and follows the leaders that
// move when a node stops.
func TestKafkaClusterOfThree(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and stops a cluster of three")
	}
	c := newTestClusterOf(t, 3, fastQuorum, func(cfg *Config) { cfg.KafkaListen = "127.0.0.1:0" })
	var seeds []string
	addrs := map[int32]string{}
	for id, n := range c.nodes {
		seeds = append(seeds, n.KafkaAddress())
		addrs[id] = n.KafkaAddress()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := c.client().CreateTopicReplicated(ctx, "spread", 6, 3, nil)
	require.NoError(t, err)
	c.agree()

	cl := kafkaClient(t, kgo.SeedBrokers(seeds[0]), kgo.DefaultProduceTopic("spread"), kgo.RecordRetries(100),
		kgo.RetryTimeout(30*time.Second), kgo.MetadataMinAge(100*time.Millisecond))
	adm := kadm.NewClient(cl)
	md, err := adm.Metadata(ctx, "spread")
	require.NoError(t, err)
	require.Len(t, md.Brokers, 3)
	for _, b := range md.Brokers {
		require.Equal(t, addrs[b.NodeID], net.JoinHostPort(b.Host, fmt.Sprint(b.Port)))
	}
	leaders := map[int32]bool{}
	for _, p := range md.Topics["spread"].Partitions {
		require.NoError(t, p.Err)
		require.ElementsMatch(t, []int32{1, 2, 3}, p.Replicas)
		require.Contains(t, p.Replicas, p.Leader)
		require.NotEmpty(t, p.ISR)
		leaders[p.Leader] = true
	}
	require.Len(t, leaders, 3, "leaders spread over the nodes")

	produce := func(from, to int) {
		var rs []*kgo.Record
		for i := from; i < to; i++ {
			rs = append(rs, &kgo.Record{Key: []byte(fmt.Sprint("k", i)), Value: []byte(fmt.Sprint(i))})
		}
		require.NoError(t, cl.ProduceSync(ctx, rs...).FirstErr())
	}
	produce(0, 300)
	stopped := int32(2)
	require.NoError(t, c.nodes[stopped].Stop())
	delete(c.nodes, stopped)
	produce(300, 600)

	var live []string
	for _, n := range c.nodes {
		live = append(live, n.KafkaAddress())
	}
	got := kafkaConsume(t, live, "spread", 600)
	seen := map[string]bool{}
	for _, r := range got {
		require.False(t, seen[string(r.Value)], "once: %s", r.Value)
		seen[string(r.Value)] = true
	}
	require.Len(t, seen, 600)
}

// A client that sends fetches and never reads their answers holds back
// only itself: the node goes on serving another.
func TestKafkaSlowClientHoldsBackOnlyItself(t *testing.T) {
	n := startKafkaNode(t)
	createTopic(t, n, "big", 1)
	seeds := []string{n.KafkaAddress()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prod := kafkaClient(t, kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("big"))
	value := bytes.Repeat([]byte{'v'}, 100<<10)
	for range 20 {
		require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr())
	}

	slow := dialKafka(t, n)
	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(12)
	fetch.MaxBytes = 4 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "big"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 4 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	frame := wirekafka.AppendRequest(nil, 1, nil, fetch)
	var many []byte
	for range 300 {
		many = append(many, frame...)
	}
	go func() { _, _ = slow.nc.Write(many) }() // blocks once the node stops reading

	got := kafkaConsume(t, seeds, "big", 20)
	require.Len(t, got, 20)
	require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr())
}

// kgo fetches with incremental fetch sessions (KIP-227), as it does by
// default: its consumer reads every record once, in order, through one
// session that the node answers incrementally.
func TestKafkaFetchSessionsWithKgo(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.KafkaListen = "127.0.0.1:0"
	n := startNode(t, cfg)
	createTopic(t, n, "sessions", 4)
	seeds := []string{n.KafkaAddress()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prod := kafkaClient(t, kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("sessions"))
	produce := func(from, to int) {
		var rs []*kgo.Record
		for i := from; i < to; i++ {
			rs = append(rs, &kgo.Record{Key: []byte(fmt.Sprint("k", i)), Value: []byte(fmt.Sprint(i))})
		}
		require.NoError(t, prod.ProduceSync(ctx, rs...).FirstErr())
	}
	cons := kafkaClient(t, kgo.SeedBrokers(seeds...), kgo.ConsumeTopics("sessions"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	seen := map[string]bool{}
	next := map[int32]int64{}
	consume := func(total int) {
		for len(seen) < total {
			fs := cons.PollFetches(ctx)
			require.NoError(t, ctx.Err(), "consumed %d of %d", len(seen), total)
			for _, e := range fs.Errors() {
				require.NoError(t, e.Err, "%s/%d", e.Topic, e.Partition)
			}
			for _, r := range fs.Records() {
				require.False(t, seen[string(r.Value)], "once: %s", r.Value)
				seen[string(r.Value)] = true
				require.Equal(t, next[r.Partition], r.Offset, "in order, without gaps")
				next[r.Partition]++
			}
		}
	}
	// Caught up, then fed in rounds: each round's records come through
	// fetches of the session.
	produce(0, 100)
	consume(100)
	for round := 1; round <= 5; round++ {
		produce(round*100, round*100+100)
		consume(round*100 + 100)
	}
	require.Len(t, seen, 600)

	st := n.kafka.FetchSessionStats()
	require.Positive(t, st.Created)
	require.Equal(t, 1, st.Sessions, "the consumer's session, held")
	require.Equal(t, 4, st.Partitions)
	require.GreaterOrEqual(t, st.Incremental, uint64(5), "the rounds came through incremental fetches")
	require.Zero(t, st.Evicted)
	metrics := scrape(t, n)
	require.Contains(t, metrics, "depot_kafka_fetch_sessions 1\n")
	require.Contains(t, metrics, "depot_kafka_fetch_session_partitions 4\n")
	require.Regexp(t, `depot_kafka_fetch_sessions_created_total [1-9]\d*\n`, metrics)
	require.Regexp(t, `depot_kafka_fetch_session_incremental_fetches_total [1-9]\d*\n`, metrics)
}

// sessionFetch is a Fetch of the partitions of topic (by id) from offset,
// in session id at epoch.
func sessionFetch(topicID [16]byte, sessionID, epoch int32, offsets map[int32]int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SessionID, req.SessionEpoch = sessionID, epoch
	req.MaxBytes, req.MaxWaitMillis = 1<<20, 50
	if len(offsets) > 0 {
		ft := kmsg.NewFetchRequestTopic()
		ft.TopicID = topicID
		for _, p := range slices.Sorted(maps.Keys(offsets)) {
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = p, offsets[p], 1<<20
			ft.Partitions = append(ft.Partitions, fp)
		}
		req.Topics = append(req.Topics, ft)
	}
	return req
}

// namedPartitions are the partitions a fetch answer names, each with the
// bytes of its records.
func namedPartitions(resp *kmsg.FetchResponse) map[int32]int {
	out := map[int32]int{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = len(p.RecordBatches)
		}
	}
	return out
}

// Fetch sessions on the wire: created by a full fetch, answered
// incrementally with only what changed, usable from another connection of
// the same node and from no other node; a wrong epoch, an unknown id and a
// session of ids fetched by names are refused with Kafka's codes; epoch -1
// closes the session.
func TestKafkaFetchSessionsOnTheWire(t *testing.T) {
	n := startKafkaNode(t)
	other := startKafkaNode(t)
	createTopic(t, n, "wire", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := kafkaClient(t, kgo.SeedBrokers(n.KafkaAddress()))
	md, err := kadm.NewClient(cl).Metadata(ctx, "wire")
	require.NoError(t, err)
	id := md.Topics["wire"].ID
	fetch := func(cl *kgo.Client, req *kmsg.FetchRequest) *kmsg.FetchResponse {
		t.Helper()
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		return resp
	}

	full := fetch(cl, sessionFetch(id, 0, 0, map[int32]int64{0: 0, 1: 0}))
	require.Equal(t, int16(0), full.ErrorCode)
	session := full.SessionID
	require.NotZero(t, session, "a full fetch with epoch 0 creates a session")
	require.Equal(t, map[int32]int{0: 0, 1: 0}, namedPartitions(full))

	nothing := fetch(cl, sessionFetch(id, session, 1, nil))
	require.Equal(t, int16(0), nothing.ErrorCode)
	require.Equal(t, session, nothing.SessionID)
	require.Empty(t, nothing.Topics, "nothing changed, nothing named")

	prod := kafkaClient(t, kgo.SeedBrokers(n.KafkaAddress()), kgo.DefaultProduceTopic("wire"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("new")}).FirstErr())
	changed := fetch(cl, sessionFetch(id, session, 2, nil))
	require.Equal(t, int16(0), changed.ErrorCode)
	got := namedPartitions(changed)
	require.Len(t, got, 1, "only the partition that changed")
	require.Positive(t, got[1])

	again := fetch(cl, sessionFetch(id, session, 2, nil))
	require.Equal(t, kerr.InvalidFetchSessionEpoch.Code, again.ErrorCode, "an epoch already used")

	// Another connection to the same node takes the session on.
	cl2 := kafkaClient(t, kgo.SeedBrokers(n.KafkaAddress()))
	moved := fetch(cl2, sessionFetch(id, session, 3, map[int32]int64{1: 1}))
	require.Equal(t, int16(0), moved.ErrorCode)
	require.Equal(t, session, moved.SessionID)

	// Another node in the same process does not know it.
	elsewhere := kafkaClient(t, kgo.SeedBrokers(other.KafkaAddress()))
	unknown := fetch(elsewhere, sessionFetch(id, session, 4, nil))
	require.Equal(t, kerr.FetchSessionIDNotFound.Code, unknown.ErrorCode)
	require.Zero(t, other.kafka.FetchSessionStats().Sessions)

	// The session names topics by id: a v12 fetch of it is refused.
	raw := dialKafka(t, n)
	v12 := kmsg.NewPtrFetchRequest()
	v12.SetVersion(12)
	v12.SessionID, v12.SessionEpoch = session, 4
	raw.send(v12, 1)
	corr, body := raw.response()
	require.Equal(t, int32(1), corr)
	resp12 := v12.ResponseKind().(*kmsg.FetchResponse)
	require.NoError(t, resp12.ReadFrom(body[1:]))
	require.Equal(t, kerr.FetchSessionTopicIDError.Code, resp12.ErrorCode)

	closed := fetch(cl, sessionFetch(id, session, -1, map[int32]int64{0: 0}))
	require.Equal(t, int16(0), closed.ErrorCode)
	require.Zero(t, closed.SessionID, "epoch -1 closes the session")
	require.Len(t, namedPartitions(closed), 1)
	gone := fetch(cl, sessionFetch(id, session, 4, nil))
	require.Equal(t, kerr.FetchSessionIDNotFound.Code, gone.ErrorCode)
	require.Zero(t, n.kafka.FetchSessionStats().Sessions)
}
