package node

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/depot-dev/depot/actors/disks"
	"github.com/depot-dev/depot/messages"
)

// startKafkaDisksNode starts a node with a Kafka listener and two log
// dirs of declared capacities, whose log dirs report every 50 ms, whose
// balancer moves nothing by itself, and whose moves copy at most throttle
// bytes a second (unlimited when negative).
func startKafkaDisksNode(t *testing.T, throttle int64) *Node {
	t.Helper()
	data := t.TempDir()
	cfg := diskTestConfig(t, disks.PolicyCount,
		LogDir{Path: filepath.Join(data, "a"), Capacity: 1 << 30}, LogDir{Path: filepath.Join(data, "b"), Capacity: 2 << 30})
	cfg.DataDir = data
	cfg.HTTP, cfg.KafkaListen = "", "127.0.0.1:0"
	cfg.Balance.ThrottleBytesPerS = throttle
	return startNode(t, cfg)
}

// onDiskBytes is the bytes of the segments of topic-partition in the log
// dir path, as the files are: 0 when it holds none.
func onDiskBytes(t *testing.T, path, topic string, partition int32) int64 {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(path, fmt.Sprintf("%s-%d", topic, partition), "*.log"))
	require.NoError(t, err)
	var total int64
	for _, l := range logs {
		st, err := os.Stat(l)
		if err == nil {
			total += st.Size()
		}
	}
	return total
}

// logDirOf is the log dir that describes topic-partition as its current
// log, "" when none does.
func logDirOf(dirs kadm.DescribedLogDirs, topic string, partition int32) string {
	for path, d := range dirs {
		if p, ok := d.Topics[topic][partition]; ok && !p.IsFuture {
			return path
		}
	}
	return ""
}

// DescribeLogDirs lists the node's log dirs, each with its capacity and
// free bytes and the partitions it holds, whose sizes come to the bytes
// their segments hold on disk; a topic set narrows the partitions.
func TestKafkaDescribeLogDirs(t *testing.T) {
	n := startKafkaDisksNode(t, -1)
	createTopic(t, n, "sized", 4)
	cl := kafkaClient(t, kgo.SeedBrokers(n.KafkaAddress()), kgo.DefaultProduceTopic("sized"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for p := range int32(4) {
		var rs []*kgo.Record
		for i := range 50 * int(p+1) {
			rs = append(rs, &kgo.Record{Partition: p, Value: bytes.Repeat([]byte{'v'}, 100+i)})
		}
		require.NoError(t, cl.ProduceSync(ctx, rs...).FirstErr())
	}

	paths := []string{n.cfg.LogDirs[0].Path, n.cfg.LogDirs[1].Path}
	var all kadm.DescribedAllLogDirs
	require.Eventually(t, func() bool {
		var err error
		all, err = adm.DescribeAllLogDirs(ctx, nil)
		require.NoError(t, err)
		dirs := all[n.cfg.NodeID]
		for p := range int32(4) {
			path := logDirOf(dirs, "sized", p)
			if path == "" || dirs[path].Topics["sized"][p].Size != onDiskBytes(t, path, "sized", p) {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "every partition described at its size on disk")

	require.Len(t, all, 1)
	dirs := all[n.cfg.NodeID]
	require.NoError(t, dirs.Error())
	require.ElementsMatch(t, paths, slices.Collect(func(yield func(string) bool) {
		for path := range dirs {
			if !yield(path) {
				return
			}
		}
	}))
	spread := map[string]int{}
	for p := range int32(4) {
		path := logDirOf(dirs, "sized", p)
		spread[path]++
		size := dirs[path].Topics["sized"][p].Size
		require.Greater(t, size, int64(50*int(p+1)*100), "partition %d holds what was produced to it", p)
		for other, d := range dirs {
			if other != path {
				require.NotContains(t, d.Topics["sized"], p, "partition %d is in one dir", p)
			}
		}
	}
	require.Len(t, spread, 2, "the partitions are spread over both dirs")
	for i, path := range paths {
		d := dirs[path]
		require.Equal(t, n.cfg.LogDirs[i].Capacity, d.TotalBytes)
		require.Less(t, d.UsableBytes, d.TotalBytes)
		require.Greater(t, d.UsableBytes, int64(0))
		var held int64
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) { held += p.Size })
		require.Equal(t, d.TotalBytes-held, d.UsableBytes, "usable: the capacity less what the partitions hold")
	}

	one, err := adm.DescribeBrokerLogDirs(ctx, n.cfg.NodeID, kadm.TopicsSet{"sized": {2: {}}})
	require.NoError(t, err)
	var listed []int32
	one.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			require.Equal(t, "sized", p.Topic)
			listed = append(listed, p.Partition)
		})
	})
	require.Equal(t, []int32{2}, listed, "only the partition asked for")
}

// AlterReplicaLogDirs moves a partition to the node's other log dir while
// kgo produces to it: DescribeLogDirs shows its future log in the new dir
// while the move runs, then the partition there alone, and every record
// acknowledged is read back once, in order.
func TestKafkaAlterReplicaLogDirsMovesOnline(t *testing.T) {
	n := startKafkaDisksNode(t, 1<<20)
	createTopic(t, n, "moving", 1)
	seeds := []string{n.KafkaAddress()}
	cl := kafkaClient(t, kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("moving"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// About 3 MiB before the move: three seconds of copying at the throttle.
	value := bytes.Repeat([]byte{'m'}, 1000)
	var sent int
	for range 30 {
		var rs []*kgo.Record
		for range 100 {
			rs = append(rs, &kgo.Record{Key: []byte(strconv.Itoa(sent)), Value: value})
			sent++
		}
		require.NoError(t, cl.ProduceSync(ctx, rs...).FirstErr())
	}
	dirs, err := adm.DescribeBrokerLogDirs(ctx, n.cfg.NodeID, nil)
	require.NoError(t, err)
	from := logDirOf(dirs, "moving", 0)
	require.NotEmpty(t, from)
	to := n.cfg.LogDirs[0].Path
	if to == from {
		to = n.cfg.LogDirs[1].Path
	}

	// A steady producer runs through the move.
	var mu sync.Mutex
	acked := sent
	stop := make(chan struct{})
	produced := make(chan error, 1)
	go func() {
		for i := sent; ; i++ {
			select {
			case <-stop:
				produced <- nil
				return
			default:
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte("during")}).FirstErr(); err != nil {
				produced <- err
				return
			}
			mu.Lock()
			acked = i + 1
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()

	var req kadm.AlterReplicaLogDirsReq
	req.Add(to, kadm.TopicsSet{"moving": {0: {}}})
	resp, err := adm.AlterBrokerReplicaLogDirs(ctx, n.cfg.NodeID, req)
	require.NoError(t, err)
	resp.Each(func(r kadm.AlterReplicaLogDirsResponse) {
		require.NoError(t, r.Err, "%s-%d", r.Topic, r.Partition)
		require.Equal(t, to, r.Dir)
	})

	var future kadm.DescribedLogDirPartition
	sawFuture := false
	require.Eventually(t, func() bool {
		dirs, err := adm.DescribeBrokerLogDirs(ctx, n.cfg.NodeID, kadm.TopicsSet{"moving": {0: {}}})
		require.NoError(t, err)
		if p, ok := dirs[to].Topics["moving"][0]; ok && p.IsFuture {
			require.Equal(t, from, logDirOf(dirs, "moving", 0), "the partition serves from its old dir while the move runs")
			future, sawFuture = p, true
		}
		return logDirOf(dirs, "moving", 0) == to
	}, time.Minute, 20*time.Millisecond, "the partition moves to %s", to)
	require.True(t, sawFuture, "DescribeLogDirs showed the future log while the move ran")
	t.Logf("future log seen at %d bytes, %d offsets behind", future.Size, future.OffsetLag)
	require.Greater(t, future.Size, int64(0))
	require.GreaterOrEqual(t, future.OffsetLag, int64(0))

	close(stop)
	require.NoError(t, <-produced)
	mu.Lock()
	total := acked
	mu.Unlock()
	require.Greater(t, total, sent, "records were produced during the move")

	got := kafkaConsume(t, seeds, "moving", total)
	require.Len(t, got, total, "every acknowledged record, once")
	for i, r := range got {
		require.Equal(t, int64(i), r.Offset)
		require.Equal(t, strconv.Itoa(i), string(r.Key), "in order")
	}

	dirs, err = adm.DescribeBrokerLogDirs(ctx, n.cfg.NodeID, nil)
	require.NoError(t, err)
	require.NotContains(t, dirs[from].Topics, "moving", "nothing left in the old dir")
	require.Equal(t, to, logDirOf(dirs, "moving", 0))
	require.Zero(t, onDiskBytes(t, from, "moving", 0))
	require.Eventually(t, func() bool {
		dirs, err := adm.DescribeBrokerLogDirs(ctx, n.cfg.NodeID, nil)
		require.NoError(t, err)
		return dirs[to].Topics["moving"][0].Size == onDiskBytes(t, to, "moving", 0)
	}, 30*time.Second, 50*time.Millisecond, "described at its size in the new dir")
}

// AlterReplicaLogDirs answers Kafka's code for each partition it cannot
// move, and moves nothing for a partition already where it is asked to be.
func TestKafkaAlterReplicaLogDirsRefusals(t *testing.T) {
	n := startKafkaDisksNode(t, -1)
	createTopic(t, n, "stay", 1)
	cl := kafkaClient(t, kgo.SeedBrokers(n.KafkaAddress()))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dirs, err := adm.DescribeBrokerLogDirs(ctx, n.cfg.NodeID, nil)
	require.NoError(t, err)
	here := logDirOf(dirs, "stay", 0)
	require.NotEmpty(t, here)

	for _, c := range []struct {
		name      string
		dir       string
		topic     string
		partition int32
		err       error
	}{
		{"a path that is no log dir", filepath.Join(t.TempDir(), "elsewhere"), "stay", 0, kerr.LogDirNotFound},
		{"an unknown topic", here, "nope", 0, kerr.UnknownTopicOrPartition},
		{"an unknown partition", here, "stay", 7, kerr.UnknownTopicOrPartition},
		{"where it is", here, "stay", 0, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var req kadm.AlterReplicaLogDirsReq
			req.Add(c.dir, kadm.TopicsSet{c.topic: {c.partition: {}}})
			resp, err := adm.AlterBrokerReplicaLogDirs(ctx, n.cfg.NodeID, req)
			require.NoError(t, err)
			got := resp[c.topic][c.partition]
			require.Equal(t, c.partition, got.Partition)
			if c.err == nil {
				require.NoError(t, got.Err)
			} else {
				require.ErrorIs(t, got.Err, c.err)
			}
		})
	}
	dirs, err = adm.DescribeBrokerLogDirs(ctx, n.cfg.NodeID, nil)
	require.NoError(t, err)
	require.Equal(t, here, logDirOf(dirs, "stay", 0), "nothing moved")
	for _, d := range dirs {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) { require.False(t, p.IsFuture) })
	}

	// v0 of each, which Kafka 4.0 no longer takes: AlterReplicaLogDirs
	// answers UNSUPPORTED_VERSION for each partition, DescribeLogDirs no
	// log dir (v0 has no error code to say why), and the connection stays
	// open.
	raw := dialKafka(t, n)
	old := kmsg.NewPtrAlterReplicaLogDirsRequest()
	old.SetVersion(0)
	d := kmsg.NewAlterReplicaLogDirsRequestDir()
	d.Dir = here
	dt := kmsg.NewAlterReplicaLogDirsRequestDirTopic()
	dt.Topic, dt.Partitions = "stay", []int32{0}
	d.Topics = append(d.Topics, dt)
	old.Dirs = append(old.Dirs, d)
	raw.send(old, 1)
	corr, body := raw.response()
	require.Equal(t, int32(1), corr)
	oresp := old.ResponseKind().(*kmsg.AlterReplicaLogDirsResponse)
	require.NoError(t, oresp.ReadFrom(body))
	require.Equal(t, kerr.UnsupportedVersion.Code, oresp.Topics[0].Partitions[0].ErrorCode)

	describe := kmsg.NewPtrDescribeLogDirsRequest()
	describe.SetVersion(0)
	raw.send(describe, 2)
	corr, body = raw.response()
	require.Equal(t, int32(2), corr)
	dresp := describe.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	require.NoError(t, dresp.ReadFrom(body))
	require.Empty(t, dresp.Dirs)
	describe.SetVersion(1)
	raw.send(describe, 3)
	corr, body = raw.response()
	require.Equal(t, int32(3), corr)
	dresp = describe.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	require.NoError(t, dresp.ReadFrom(body))
	require.Len(t, dresp.Dirs, 2, "v1 is taken")
}

// A client configured for SASL fails at once with Kafka's error for an
// unsupported mechanism; a SaslAuthenticate sent anyway is answered
// ILLEGAL_SASL_STATE and the connection stays open.
func TestKafkaSASLRefused(t *testing.T) {
	n := startKafkaNode(t)
	cl := kafkaClient(t, kgo.SeedBrokers(n.KafkaAddress()), kgo.SASL(plain.Auth{User: "user", Pass: "secret"}.AsMechanism()), kgo.RequestRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := kadm.NewClient(cl).Metadata(ctx)
	require.ErrorIs(t, err, kerr.UnsupportedSaslMechanism)

	c := dialKafka(t, n)
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SetVersion(2)
	auth.SASLAuthBytes = []byte("\x00user\x00secret")
	c.send(auth, 5)
	corr, body := c.response()
	require.Equal(t, int32(5), corr)
	resp := auth.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	require.NoError(t, resp.ReadFrom(body[1:]))
	require.Equal(t, kerr.IllegalSaslState.Code, resp.ErrorCode)
	require.NotNil(t, resp.ErrorMessage)

	v := kmsg.NewPtrApiVersionsRequest()
	v.SetVersion(3)
	v.ClientSoftwareName, v.ClientSoftwareVersion = "raw", "1"
	c.send(v, 6)
	corr, _ = c.response()
	require.Equal(t, int32(6), corr, "the connection is still served")
}

// Three nodes: kadm moves a replica of a partition to the node that holds
// none, which ListPartitionReassignments shows in flight, cancels the
// move, moves it again and lets it complete; reorders the replicas, and
// ElectLeaders makes the new preferred replica lead. Every record produced
// before is read back, in order; refusals carry Kafka's codes.
func TestKafkaReassignAndElect(t *testing.T) {
	if testing.Short() {
		t.Skip("moves a partition between nodes under a throttle")
	}
	const throttle = 128 << 10
	c := newTestClusterOf(t, 3, fastQuorum, func(cfg *Config) {
		cfg.KafkaListen = "127.0.0.1:0"
		cfg.Balance.ThrottleBytesPerS = throttle
	})
	var seeds []string
	for _, n := range c.nodes {
		seeds = append(seeds, n.KafkaAddress())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, err := c.client().CreateTopicReplicated(ctx, "re", 1, 2, nil)
	require.NoError(t, err)
	c.agree()

	cl := kafkaClient(t, kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("re"), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.RetryTimeout(time.Minute))
	adm := kadm.NewClient(cl)
	const records = 800
	pad := bytes.Repeat([]byte{'p'}, 1000)
	var rs []*kgo.Record
	for i := range records {
		rs = append(rs, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: pad})
	}
	require.NoError(t, cl.ProduceSync(ctx, rs...).FirstErr())
	c.waitReplicated("re")

	md, err := adm.Metadata(ctx, "re")
	require.NoError(t, err)
	before := md.Topics["re"].Partitions[0]
	spare := c.spareNodes(&messages.PartitionMetadata{Replicas: before.Replicas})[0]
	gone, kept := before.Replicas[0], before.Replicas[1]
	target := []int32{kept, spare}

	var move kadm.AlterPartitionAssignmentsReq
	move.Assign("re", 0, target)
	resp, err := adm.AlterPartitionAssignments(ctx, move)
	require.NoError(t, err)
	require.NoError(t, resp.Error())

	// About 800 KB at 128 KiB/s: the new replica takes seconds to catch up.
	// Each node lists what it has applied: the one asked may apply the
	// move a little after the controller answered.
	var inFlight kadm.ListPartitionReassignmentsResponse
	require.Eventually(t, func() bool {
		listed, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"re": {0: {}}, "nope": {0: {}}})
		require.NoError(t, err)
		require.NotContains(t, listed, "nope", "a topic that does not exist is left out")
		var ok bool
		inFlight, ok = listed["re"][0]
		return ok
	}, 10*time.Second, 10*time.Millisecond, "the move is listed while it runs")
	require.Equal(t, []int32{kept, spare, gone}, inFlight.Replicas)
	require.Equal(t, []int32{spare}, inFlight.AddingReplicas)
	require.Equal(t, []int32{gone}, inFlight.RemovingReplicas)
	// A null list, which kadm does not send, lists every move.
	every := kmsg.NewPtrListPartitionReassignmentsRequest()
	everyResp, err := every.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Len(t, everyResp.Topics, 1)
	require.Equal(t, "re", everyResp.Topics[0].Topic)
	require.Equal(t, inFlight.AddingReplicas, everyResp.Topics[0].Partitions[0].AddingReplicas)

	var cancelMove kadm.AlterPartitionAssignmentsReq
	cancelMove.CancelAssign("re", 0)
	resp, err = adm.AlterPartitionAssignments(ctx, cancelMove)
	require.NoError(t, err)
	require.NoError(t, resp.Error(), "null replicas cancel the move")
	// As Kafka's revert leaves them: the replicas kept, then those the move
	// was removing.
	c.waitMoved("re", 0, []int32{kept, gone})
	listed, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"re": {0: {}}})
	require.NoError(t, err)
	require.Empty(t, listed)
	resp, err = adm.AlterPartitionAssignments(ctx, cancelMove)
	require.NoError(t, err)
	require.ErrorIs(t, resp["re"][0].Err, kerr.NoReassignmentInProgress)

	for _, bad := range []struct {
		name string
		ctx  context.Context
		req  kadm.AlterPartitionAssignmentsReq
		err  error
	}{
		{"a node not registered", ctx, kadm.AlterPartitionAssignmentsReq{"re": {0: {kept, 9}}}, kerr.InvalidReplicaAssignment},
		{"a node twice", ctx, kadm.AlterPartitionAssignmentsReq{"re": {0: {kept, kept}}}, kerr.InvalidReplicaAssignment},
		{"an unknown topic", ctx, kadm.AlterPartitionAssignmentsReq{"nope": {0: {kept}}}, kerr.UnknownTopicOrPartition},
		{"a replication factor change forbidden", kadm.ForbidAlterRf(ctx), kadm.AlterPartitionAssignmentsReq{"re": {0: {1, 2, 3}}}, kerr.InvalidReplicationFactor},
	} {
		resp, err := adm.AlterPartitionAssignments(bad.ctx, bad.req)
		require.NoError(t, err, bad.name)
		resp.Each(func(r kadm.AlterPartitionAssignmentsResponse) {
			require.ErrorIs(t, r.Err, bad.err, "%s: %s", bad.name, r.ErrMessage)
			require.NotEmpty(t, r.ErrMessage, bad.name)
		})
	}

	resp, err = adm.AlterPartitionAssignments(ctx, move)
	require.NoError(t, err)
	require.NoError(t, resp.Error())
	after := c.waitMoved("re", 0, target)
	require.Equal(t, kept, after.Leader, "the node the move kept leads")
	require.Eventually(t, func() bool { return len(c.replicaFiles(gone, "re", 0)) == 0 }, 30*time.Second, 20*time.Millisecond)

	// Reordered, the partition's preferred replica is the node the move
	// added, which does not lead until it is elected.
	var reorder kadm.AlterPartitionAssignmentsReq
	reorder.Assign("re", 0, []int32{spare, kept})
	resp, err = adm.AlterPartitionAssignments(ctx, reorder)
	require.NoError(t, err)
	require.NoError(t, resp.Error())
	require.Equal(t, kept, c.waitMoved("re", 0, []int32{spare, kept}).Leader)

	unclean, err := adm.ElectLeaders(ctx, kadm.ElectLiveReplica, kadm.TopicsSet{"re": {0: {}}})
	require.NoError(t, err)
	require.ErrorIs(t, unclean["re"][0].Err, kerr.ElectionNotNeeded, "the partition has a leader")

	elected, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"re": {0: {}}, "nope": {0: {}}})
	require.NoError(t, err)
	require.NoError(t, elected["re"][0].Err)
	require.ErrorIs(t, elected["nope"][0].Err, kerr.UnknownTopicOrPartition)
	require.Equal(t, spare, c.waitMoved("re", 0, []int32{spare, kept}).Leader, "the preferred replica leads")
	again, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"re": {0: {}}})
	require.NoError(t, err)
	require.ErrorIs(t, again["re"][0].Err, kerr.ElectionNotNeeded)
	all, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil)
	require.NoError(t, err)
	require.NotContains(t, all["re"], int32(0), "a null list leaves out the partitions that needed no election")

	// The node the move took the partition from holds no replica of it.
	var off kadm.AlterReplicaLogDirsReq
	off.Add(c.cfgs[gone].withDefaults().LogDirs[0].Path, kadm.TopicsSet{"re": {0: {}}})
	offResp, err := adm.AlterBrokerReplicaLogDirs(ctx, gone, off)
	require.NoError(t, err)
	require.ErrorIs(t, offResp["re"][0].Err, kerr.ReplicaNotAvailable)

	got := kafkaConsume(t, seeds, "re", records)
	require.Len(t, got, records)
	for i, r := range got {
		require.Equal(t, strconv.Itoa(i), string(r.Key), "in order, once")
	}
}
