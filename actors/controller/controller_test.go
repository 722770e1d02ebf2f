package controller

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/actors/metadata"
	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

const metadataTestTimeout = 5 * time.Second

// fakeManager is a partition manager that records what it was asked and
// answers with answer (NONE by default), or not at all when silent.
type fakeManager struct {
	mu      sync.Mutex
	starts  []*messages.StartPartitionsRequest
	stops   []*messages.StopPartitionsRequest
	configs []*messages.UpdateTopicConfigsRequest
	answer  messages.ErrorCode
	silent  bool
	// dirs are the directories (id, path) the fake chooses in turn for a
	// partition started with none; chosen counts its choices.
	dirs   [][2]string
	chosen int
}

func (f *fakeManager) Receive(ctx actor.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch m := ctx.Message().(type) {
	case *messages.StartPartitionsRequest:
		f.starts = append(f.starts, proto.Clone(m).(*messages.StartPartitionsRequest))
		if f.silent {
			return
		}
		resp := &messages.StartPartitionsResponse{Error: f.answer, ErrorMessage: errorText(f.answer)}
		for _, p := range m.GetPartitions() {
			if f.answer != messages.ErrorCode_NONE || p.GetDirId() != "" || len(f.dirs) == 0 {
				continue
			}
			d := f.dirs[f.chosen%len(f.dirs)]
			f.chosen++
			resp.Assigned = append(resp.Assigned, &messages.PartitionAssignment{
				Topic: p.GetTopic(), Partition: p.GetPartition(), NodeId: p.GetNodeId(), DirId: d[0], LogDir: d[1],
			})
		}
		ctx.Respond(resp)
	case *messages.StopPartitionsRequest:
		f.stops = append(f.stops, proto.Clone(m).(*messages.StopPartitionsRequest))
		if !f.silent {
			ctx.Respond(&messages.StopPartitionsResponse{Error: f.answer, ErrorMessage: errorText(f.answer)})
		}
	case *messages.UpdateTopicConfigsRequest:
		f.configs = append(f.configs, proto.Clone(m).(*messages.UpdateTopicConfigsRequest))
		if !f.silent {
			ctx.Respond(&messages.UpdateTopicConfigsResponse{Error: f.answer, ErrorMessage: errorText(f.answer)})
		}
	}
}

func errorText(code messages.ErrorCode) string {
	if code == messages.ErrorCode_NONE {
		return ""
	}
	return "fake manager says " + code.String()
}

func (f *fakeManager) counts() (starts, stops int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.starts), len(f.stops)
}

// metaHarness runs a metadata actor over a directory that outlives restarts.
type metaHarness struct {
	t       *testing.T
	system  *actor.ActorSystem
	manager *fakeManager
	cfg     Config
	pid     *actor.PID
	// paths are the log directories' paths, by the order of their ids
	// (id0, id1).
	paths []string
}

func newMetaHarness(t *testing.T) *metaHarness {
	t.Helper()
	system := actortest.System(t)
	root := t.TempDir()
	paths := []string{filepath.Join(root, "d0"), filepath.Join(root, "d1")}
	manager := &fakeManager{dirs: [][2]string{{"id0", paths[0]}, {"id1", paths[1]}}}
	managerPID := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return manager }))
	h := &metaHarness{
		t:       t,
		system:  system,
		manager: manager,
		paths:   paths,
		cfg: Config{
			FS:               disk.OS,
			Dir:              filepath.Join(root, "meta"),
			NodeID:           7,
			Address:          "127.0.0.1:9092",
			LogDirs:          map[string]string{"id0": paths[0], "id1": paths[1]},
			PartitionManager: managerPID,
			ManagerTimeout:   2 * time.Second,
		},
	}
	require.NoError(t, h.start())
	t.Cleanup(h.stop)
	return h
}

// start starts the controller and returns once its node is registered
// and unfenced, or with the reason it cannot be.
func (h *metaHarness) start() error {
	h.t.Helper()
	h.pid = h.system.Root.Spawn(NewProps(h.cfg))
	res := h.request(&actors.AwaitRegistration{})
	require.IsType(h.t, &actors.Registration{}, res)
	return res.(*actors.Registration).Err
}

func (h *metaHarness) stop() {
	h.t.Helper()
	if h.pid != nil {
		require.NoError(h.t, h.system.Root.StopFuture(h.pid).Wait())
		h.pid = nil
	}
}

func (h *metaHarness) restart() {
	h.t.Helper()
	h.stop()
	require.NoError(h.t, h.start())
}

func (h *metaHarness) request(msg any) any {
	h.t.Helper()
	res, err := h.system.Root.RequestFuture(h.pid, msg, metadataTestTimeout).Result()
	require.NoError(h.t, err)
	return res
}

func (h *metaHarness) create(name string, partitions int32, configs map[string]string) *messages.CreateTopicResponse {
	h.t.Helper()
	res := h.request(&messages.CreateTopicRequest{Name: name, Partitions: partitions, Configs: configs})
	require.IsType(h.t, &messages.CreateTopicResponse{}, res)
	return res.(*messages.CreateTopicResponse)
}

func (h *metaHarness) remove(name string) *messages.DeleteTopicResponse {
	h.t.Helper()
	res := h.request(&messages.DeleteTopicRequest{Name: name})
	require.IsType(h.t, &messages.DeleteTopicResponse{}, res)
	return res.(*messages.DeleteTopicResponse)
}

func (h *metaHarness) metadata(topics ...string) *messages.MetadataResponse {
	h.t.Helper()
	res := h.request(&messages.MetadataRequest{Topics: topics})
	require.IsType(h.t, &messages.MetadataResponse{}, res)
	return res.(*messages.MetadataResponse)
}

func (h *metaHarness) producerID() int64 {
	h.t.Helper()
	res := h.request(&messages.InitProducerIdRequest{})
	require.IsType(h.t, &messages.InitProducerIdResponse{}, res)
	r := res.(*messages.InitProducerIdResponse)
	require.Equal(h.t, messages.ErrorCode_NONE, r.GetError(), r.GetErrorMessage())
	return r.GetProducerId()
}

// logBytes is the total size of the raft log's files.
func (h *metaHarness) logBytes() int64 {
	h.t.Helper()
	entries, err := os.ReadDir(filepath.Join(h.cfg.Dir, "raft"))
	require.NoError(h.t, err)
	var total int64
	for _, e := range entries {
		info, err := e.Info()
		require.NoError(h.t, err)
		total += info.Size()
	}
	return total
}

func requireNoError(t *testing.T, code messages.ErrorCode, msg string) {
	t.Helper()
	require.Equal(t, messages.ErrorCode_NONE, code, msg)
}

func TestPartitionActorName(t *testing.T) {
	require.Equal(t, "partitions/orders-0", actors.PartitionActorName("orders", 0))
	require.Equal(t, "partitions/a.b_c-d-12", actors.PartitionActorName("a.b_c-d", 12))
}

func TestMetadataCreateDescribe(t *testing.T) {
	h := newMetaHarness(t)

	resp := h.create("orders", 3, map[string]string{"retention.ms": "3600000"})
	requireNoError(t, resp.GetError(), resp.GetErrorMessage())
	require.Equal(t, "orders", resp.GetTopic().GetName())
	require.Len(t, resp.GetTopic().GetPartitions(), 3)

	starts, stops := h.manager.counts()
	require.Equal(t, 1, starts)
	require.Equal(t, 0, stops)
	start := h.manager.starts[0]
	require.Len(t, start.GetPartitions(), 3)
	for i, p := range start.GetPartitions() {
		require.Equal(t, "orders", p.GetTopic())
		require.Equal(t, int32(i), p.GetPartition())
		require.Equal(t, int32(7), p.GetNodeId())
		require.Empty(t, p.GetLogDir(), "the node chooses the dir of partition %d", i)
		require.Empty(t, p.GetDirId(), "the node chooses the dir of partition %d", i)
	}
	require.Equal(t, "3600000", start.GetConfigs()["retention.ms"])
	parsed, err := topic.ParseConfig(start.GetConfigs())
	require.NoError(t, err)
	require.Equal(t, time.Hour, parsed.Log.RetentionMs)

	md := h.metadata()
	require.Equal(t, []*messages.Broker{{NodeId: 7, Address: "127.0.0.1:9092"}}, stripBrokers(md.GetBrokers()))
	require.Equal(t, int32(7), md.GetControllerId())
	require.Len(t, md.GetTopics(), 1)
	described := md.GetTopics()[0]
	require.Equal(t, "orders", described.GetName())
	requireNoError(t, described.GetError(), described.GetErrorMessage())
	require.False(t, described.GetInternal())
	require.Equal(t, "3600000", described.GetConfigs()["retention.ms"])
	require.Equal(t, "1048588", described.GetConfigs()["max.message.bytes"])
	require.Equal(t, "delete", described.GetConfigs()["cleanup.policy"])
	require.Len(t, described.GetPartitions(), 3)
	for i, p := range described.GetPartitions() {
		require.Equal(t, int32(i), p.GetPartition())
		require.Equal(t, int32(7), p.GetLeader())
		require.Equal(t, "127.0.0.1:9092", p.GetLeaderAddress())
		require.Equal(t, actors.PartitionActorName("orders", int32(i)), p.GetActorName())
		require.Equal(t, h.paths[i%2], p.GetLogDir(), "the dir the node chose")
		require.Equal(t, fmt.Sprintf("id%d", i%2), p.GetDirId())
	}
	require.True(t, proto.Equal(described, resp.GetTopic()), "create answer and describe differ")

	// The fake manager goes on choosing in turn.
	resp = h.create("payments", 3, nil)
	requireNoError(t, resp.GetError(), resp.GetErrorMessage())
	var dirs []string
	for _, p := range resp.GetTopic().GetPartitions() {
		dirs = append(dirs, p.GetLogDir())
	}
	require.Equal(t, []string{h.paths[1], h.paths[0], h.paths[1]}, dirs)

	// Named topics come back in the order asked; unknown and invalid names
	// carry their error.
	md = h.metadata("payments", "missing", "orders", "bad/name")
	require.Len(t, md.GetTopics(), 4)
	require.Equal(t, "payments", md.GetTopics()[0].GetName())
	require.Equal(t, "missing", md.GetTopics()[1].GetName())
	require.Equal(t, messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, md.GetTopics()[1].GetError())
	require.Empty(t, md.GetTopics()[1].GetPartitions())
	require.Equal(t, "orders", md.GetTopics()[2].GetName())
	require.Equal(t, messages.ErrorCode_INVALID_TOPIC, md.GetTopics()[3].GetError())

	// All topics, sorted by name.
	md = h.metadata()
	require.Equal(t, []string{"orders", "payments"}, topicNames(md))
}

func TestMetadataInternalTopic(t *testing.T) {
	h := newMetaHarness(t)
	resp := h.create("__consumer_offsets", 2, nil)
	requireNoError(t, resp.GetError(), resp.GetErrorMessage())
	require.True(t, resp.GetTopic().GetInternal())
	h.restart()
	md := h.metadata("__consumer_offsets")
	require.True(t, md.GetTopics()[0].GetInternal())
}

// A create that asks for up to three replicas gets one on a node alone,
// and a retry of it after a lost answer finds its topic as asked; a retry
// that asks for a factor the topic does not have does not.
func TestMetadataCreateUpToReplicas(t *testing.T) {
	h := newMetaHarness(t)
	req := &messages.CreateTopicRequest{Name: "__consumer_offsets", Partitions: 2, ReplicationFactor: -3}
	resp := h.request(req).(*messages.CreateTopicResponse)
	requireNoError(t, resp.GetError(), resp.GetErrorMessage())
	for _, p := range resp.GetTopic().GetPartitions() {
		require.Equal(t, []int32{7}, p.GetReplicas())
	}
	retry := &messages.CreateTopicRequest{Name: "__consumer_offsets", Partitions: 2, ReplicationFactor: -3, Retried: true}
	resp = h.request(retry).(*messages.CreateTopicResponse)
	requireNoError(t, resp.GetError(), resp.GetErrorMessage())
	retry.ReplicationFactor = 2
	resp = h.request(retry).(*messages.CreateTopicResponse)
	require.Equal(t, messages.ErrorCode_TOPIC_ALREADY_EXISTS, resp.GetError(), resp.GetErrorMessage())
}

func TestMetadataRejectsBadCreates(t *testing.T) {
	h := newMetaHarness(t)
	resp := h.create("orders", 2, nil)
	requireNoError(t, resp.GetError(), resp.GetErrorMessage())

	tests := []struct {
		name       string
		req        *messages.CreateTopicRequest
		wantCode   messages.ErrorCode
		wantInText string
	}{
		{"duplicate", &messages.CreateTopicRequest{Name: "orders", Partitions: 1}, messages.ErrorCode_TOPIC_ALREADY_EXISTS, `"orders" already exists`},
		{"empty name", &messages.CreateTopicRequest{Name: "", Partitions: 1}, messages.ErrorCode_INVALID_TOPIC, "empty"},
		{"dot", &messages.CreateTopicRequest{Name: ".", Partitions: 1}, messages.ErrorCode_INVALID_TOPIC, `"."`},
		{"illegal character", &messages.CreateTopicRequest{Name: "a/b", Partitions: 1}, messages.ErrorCode_INVALID_TOPIC, "'/'"},
		{"too long", &messages.CreateTopicRequest{Name: strings.Repeat("x", 250), Partitions: 1}, messages.ErrorCode_INVALID_TOPIC, "250 characters"},
		{"zero partitions", &messages.CreateTopicRequest{Name: "t", Partitions: 0}, messages.ErrorCode_INVALID_PARTITIONS, "0 partitions"},
		{"negative partitions", &messages.CreateTopicRequest{Name: "t", Partitions: -3}, messages.ErrorCode_INVALID_PARTITIONS, "-3 partitions"},
		{"too many partitions", &messages.CreateTopicRequest{Name: "t", Partitions: 10001}, messages.ErrorCode_INVALID_PARTITIONS, "10000"},
		{"unknown config", &messages.CreateTopicRequest{Name: "t", Partitions: 1, Configs: map[string]string{"colour": "red"}}, messages.ErrorCode_INVALID_CONFIG, `unknown key "colour"`},
		{"bad config value", &messages.CreateTopicRequest{Name: "t", Partitions: 1, Configs: map[string]string{"segment.bytes": "tiny"}}, messages.ErrorCode_INVALID_CONFIG, `segment.bytes "tiny"`},
		{"compaction", &messages.CreateTopicRequest{Name: "t", Partitions: 1, Configs: map[string]string{"cleanup.policy": "compact"}}, messages.ErrorCode_INVALID_CONFIG, "compaction is not supported"},
		{"collides", &messages.CreateTopicRequest{Name: "a_b", Partitions: 1}, messages.ErrorCode_INVALID_TOPIC, "collides"},
	}
	// a.b exists for the collision case.
	resp = h.create("a.b", 1, nil)
	requireNoError(t, resp.GetError(), resp.GetErrorMessage())

	before := h.metadata()
	beforeBytes := h.logBytes()
	beforeStarts, _ := h.manager.counts()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := h.request(tt.req)
			resp := res.(*messages.CreateTopicResponse)
			require.Equal(t, tt.wantCode, resp.GetError())
			require.Contains(t, resp.GetErrorMessage(), tt.wantInText)
			require.Nil(t, resp.GetTopic())
		})
	}
	require.True(t, proto.Equal(before, h.metadata()), "metadata changed")
	require.Equal(t, beforeBytes, h.logBytes(), "something was persisted")
	starts, _ := h.manager.counts()
	require.Equal(t, beforeStarts, starts, "the partition manager was asked")

	h.restart()
	require.True(t, proto.Equal(before, h.metadata()), "metadata changed across restart")
}

func TestMetadataValidateOnly(t *testing.T) {
	h := newMetaHarness(t)
	beforeBytes := h.logBytes()
	res := h.request(&messages.CreateTopicRequest{Name: "orders", Partitions: 4, ValidateOnly: true,
		Configs: map[string]string{"segment.bytes": "1048576"}})
	resp := res.(*messages.CreateTopicResponse)
	requireNoError(t, resp.GetError(), resp.GetErrorMessage())
	require.Len(t, resp.GetTopic().GetPartitions(), 4)
	require.Equal(t, "1048576", resp.GetTopic().GetConfigs()["segment.bytes"])

	res = h.request(&messages.CreateTopicRequest{Name: "orders", Partitions: 4, ValidateOnly: true,
		Configs: map[string]string{"segment.bytes": "1"}})
	require.Equal(t, messages.ErrorCode_INVALID_CONFIG, res.(*messages.CreateTopicResponse).GetError())

	require.Empty(t, h.metadata().GetTopics())
	require.Equal(t, beforeBytes, h.logBytes())
	starts, _ := h.manager.counts()
	require.Zero(t, starts)

	// The name is still free.
	resp = h.create("orders", 1, nil)
	requireNoError(t, resp.GetError(), resp.GetErrorMessage())
}

func TestMetadataDelete(t *testing.T) {
	h := newMetaHarness(t)
	resp := h.create("orders", 2, nil)
	requireNoError(t, resp.GetError(), resp.GetErrorMessage())
	resp = h.create("keep", 1, nil)
	requireNoError(t, resp.GetError(), resp.GetErrorMessage())

	del := h.remove("orders")
	requireNoError(t, del.GetError(), del.GetErrorMessage())
	_, stops := h.manager.counts()
	require.Equal(t, 1, stops)
	stop := h.manager.stops[0]
	require.True(t, stop.GetDelete())
	require.Len(t, stop.GetPartitions(), 2)
	require.Equal(t, "orders", stop.GetPartitions()[0].GetTopic())
	require.Equal(t, int32(0), stop.GetPartitions()[0].GetPartition())
	require.Equal(t, int32(1), stop.GetPartitions()[1].GetPartition())

	md := h.metadata("orders")
	require.Equal(t, messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, md.GetTopics()[0].GetError())
	require.Equal(t, []string{"keep"}, topicNames(h.metadata()))

	beforeBytes := h.logBytes()
	del = h.remove("orders")
	require.Equal(t, messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, del.GetError())
	require.Contains(t, del.GetErrorMessage(), `"orders"`)
	del = h.remove("never")
	require.Equal(t, messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, del.GetError())
	require.Equal(t, beforeBytes, h.logBytes())
	_, stops = h.manager.counts()
	require.Equal(t, 1, stops)

	// The name can be used again, and stays deleted across a restart.
	h.restart()
	require.Equal(t, []string{"keep"}, topicNames(h.metadata()))
	resp = h.create("orders", 1, nil)
	requireNoError(t, resp.GetError(), resp.GetErrorMessage())
	require.Len(t, resp.GetTopic().GetPartitions(), 1)
}

func TestMetadataManagerErrors(t *testing.T) {
	h := newMetaHarness(t)
	h.manager.mu.Lock()
	h.manager.answer = messages.ErrorCode_KAFKA_STORAGE_ERROR
	h.manager.mu.Unlock()
	resp := h.create("orders", 1, nil)
	require.Equal(t, messages.ErrorCode_KAFKA_STORAGE_ERROR, resp.GetError())
	require.Contains(t, resp.GetErrorMessage(), "fake manager says")
	// The topic is recorded: its partitions are what failed.
	require.Equal(t, []string{"orders"}, topicNames(h.metadata()))

	h.manager.mu.Lock()
	h.manager.answer = messages.ErrorCode_NONE
	h.manager.silent = true
	h.manager.mu.Unlock()
	h.cfg.ManagerTimeout = 200 * time.Millisecond
	h.restart()
	del := h.remove("orders")
	require.Equal(t, messages.ErrorCode_REQUEST_TIMED_OUT, del.GetError())
	require.Contains(t, del.GetErrorMessage(), "did not answer")
	require.Empty(t, h.metadata().GetTopics())
}

func TestMetadataRestart(t *testing.T) {
	h := newMetaHarness(t)
	resp := h.create("orders", 3, map[string]string{"retention.bytes": "1048576", "segment.ms": "60000"})
	requireNoError(t, resp.GetError(), resp.GetErrorMessage())
	resp = h.create("payments", 2, nil)
	requireNoError(t, resp.GetError(), resp.GetErrorMessage())
	resp = h.create("gone", 1, nil)
	requireNoError(t, resp.GetError(), resp.GetErrorMessage())
	del := h.remove("gone")
	requireNoError(t, del.GetError(), del.GetErrorMessage())
	before := h.metadata()

	h.restart()
	after := h.metadata()
	require.True(t, proto.Equal(before, after), "before %v\nafter %v", before, after)
	require.Equal(t, "1048576", after.GetTopics()[0].GetConfigs()["retention.bytes"])
	require.Equal(t, "60000", after.GetTopics()[0].GetConfigs()["segment.ms"])

	// The dirs chosen were recorded: every partition has one.
	for _, topic := range after.GetTopics() {
		for _, p := range topic.GetPartitions() {
			require.NotEmpty(t, p.GetDirId(), "%s-%d", topic.GetName(), p.GetPartition())
			require.Contains(t, h.paths, p.GetLogDir())
		}
	}
	resp = h.create("more", 1, nil)
	requireNoError(t, resp.GetError(), resp.GetErrorMessage())
	require.Equal(t, h.paths[0], resp.GetTopic().GetPartitions()[0].GetLogDir(), "the fake's seventh choice")

	h.restart()
	h.restart()
	require.Equal(t, []string{"more", "orders", "payments"}, topicNames(h.metadata()))
}

func TestMetadataProducerIDs(t *testing.T) {
	h := newMetaHarness(t)
	var ids []int64
	for range 5 {
		ids = append(ids, h.producerID())
	}
	require.Equal(t, []int64{0, 1, 2, 3, 4}, ids)
	bytesAfterBlock := h.logBytes()
	require.Equal(t, int64(5), h.producerID())
	require.Equal(t, bytesAfterBlock, h.logBytes(), "an id inside the reserved block wrote to the log")

	h.restart()
	first := h.producerID()
	require.Equal(t, int64(metadata.ProducerIDBlockSize), first)
	h.restart()
	second := h.producerID()
	require.Equal(t, int64(2*metadata.ProducerIDBlockSize), second)

	// Use up a whole block: the next one is reserved and ids keep rising.
	last := second
	for range metadata.ProducerIDBlockSize + 10 {
		id := h.producerID()
		require.Equal(t, last+1, id)
		last = id
	}
	h.restart()
	require.Greater(t, h.producerID(), last)
}

// TestMetadataTornTail cuts a few bytes off the raft log, as a crash in the
// middle of an append would: the last entry is lost, the others are back,
// and the log takes new entries.
func TestMetadataTornTail(t *testing.T) {
	h := newMetaHarness(t)
	resp := h.create("first", 1, nil)
	requireNoError(t, resp.GetError(), resp.GetErrorMessage())
	resp = h.create("second", 2, nil)
	requireNoError(t, resp.GetError(), resp.GetErrorMessage())
	withBoth := h.logBytes()
	resp = h.create("torn", 1, nil)
	requireNoError(t, resp.GetError(), resp.GetErrorMessage())
	h.stop()

	raftDir := filepath.Join(h.cfg.Dir, "raft")
	var wals []string
	entries, err := os.ReadDir(raftDir)
	require.NoError(t, err)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".wal") {
			wals = append(wals, filepath.Join(raftDir, e.Name()))
		}
	}
	sort.Strings(wals)
	require.Len(t, wals, 1, "no snapshot yet: one write-ahead log")
	info, err := os.Stat(wals[0])
	require.NoError(t, err)
	// The create of "torn" wrote its topic, then its partition's directory:
	// cut into the first.
	cut := info.Size() - (h.logBytes() - withBoth) + 10
	require.NoError(t, os.Truncate(wals[0], cut))

	require.NoError(t, h.start())
	require.Equal(t, []string{"first", "second"}, topicNames(h.metadata()))

	resp = h.create("third", 1, nil)
	requireNoError(t, resp.GetError(), resp.GetErrorMessage())
	h.restart()
	require.Equal(t, []string{"first", "second", "third"}, topicNames(h.metadata()))
}

// TestMetadataFailedLog answers every change with a storage error when the
// metadata log cannot be opened, and still answers metadata.
func TestMetadataFailedLog(t *testing.T) {
	h := newMetaHarness(t)
	h.stop()
	// A file where the directory should be.
	h.cfg.Dir = filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(h.cfg.Dir, []byte("x"), 0o644))
	require.ErrorContains(t, h.start(), "metadata log")

	resp := h.create("orders", 1, nil)
	require.Equal(t, messages.ErrorCode_KAFKA_STORAGE_ERROR, resp.GetError())
	require.Contains(t, resp.GetErrorMessage(), "metadata log")
	res := h.request(&messages.InitProducerIdRequest{})
	require.Equal(t, messages.ErrorCode_KAFKA_STORAGE_ERROR, res.(*messages.InitProducerIdResponse).GetError())
	require.Empty(t, h.metadata().GetTopics())
	starts, _ := h.manager.counts()
	require.Zero(t, starts)
}

func topicNames(md *messages.MetadataResponse) []string {
	var names []string
	for _, t := range md.GetTopics() {
		names = append(names, t.GetName())
	}
	return names
}

// stripBrokers copies brokers into fresh structs so require.Equal compares
// fields, not protobuf internals.
func stripBrokers(brokers []*messages.Broker) []*messages.Broker {
	out := make([]*messages.Broker, len(brokers))
	for i, b := range brokers {
		out[i] = &messages.Broker{NodeId: b.GetNodeId(), Address: b.GetAddress()}
	}
	return out
}

// TestMetadataAnswersWhileManagerIsBusy checks that a create waiting for the
// partition manager does not block the actor: a duplicate create and a
// metadata request are answered meanwhile.
func TestMetadataAnswersWhileManagerIsBusy(t *testing.T) {
	h := newMetaHarness(t)
	h.manager.mu.Lock()
	h.manager.silent = true
	h.manager.mu.Unlock()
	h.cfg.ManagerTimeout = 500 * time.Millisecond
	h.restart()

	pending := h.system.Root.RequestFuture(h.pid, &messages.CreateTopicRequest{Name: "orders", Partitions: 2}, metadataTestTimeout)
	dup := h.create("orders", 1, nil)
	require.Equal(t, messages.ErrorCode_TOPIC_ALREADY_EXISTS, dup.GetError())
	require.Equal(t, []string{"orders"}, topicNames(h.metadata()))

	res, err := pending.Result()
	require.NoError(t, err)
	resp := res.(*messages.CreateTopicResponse)
	require.Equal(t, messages.ErrorCode_REQUEST_TIMED_OUT, resp.GetError())
	require.Len(t, resp.GetTopic().GetPartitions(), 2)
	starts, _ := h.manager.counts()
	require.Equal(t, 1, starts)
}

// writeLegacyLog writes recs to the metadata log in dir as the version
// before directory ids did: one record a batch, partitions naming their
// log dir by path.
func writeLegacyLog(t *testing.T, dir string, recs ...*messages.MetadataRecord) {
	t.Helper()
	log, err := disk.Open(disk.OS, dir, disk.Options{Config: disk.DefaultConfig(), LeaderEpoch: disk.NoLeaderEpoch})
	require.NoError(t, err)
	for _, rec := range recs {
		value, err := proto.Marshal(rec)
		require.NoError(t, err)
		b := wire.NewBuilder(wire.NoProducer)
		b.Append(time.Now().UnixMilli(), nil, value, nil)
		batch, err := b.AppendTo(nil)
		require.NoError(t, err)
		_, err = log.Append(batch)
		require.NoError(t, err)
	}
	require.NoError(t, log.Close())
}

// A metadata log written before directory ids names log dirs by path: it
// replays into ids of the node's directories, and describes with their
// paths; a path that is no directory of the node leaves the partition with
// none, for the node to find or choose.
func TestMetadataReadsLogDirPaths(t *testing.T) {
	h := newMetaHarness(t)
	h.stop()
	require.NoError(t, os.RemoveAll(h.cfg.Dir))
	writeLegacyLog(t, h.cfg.Dir,
		&messages.MetadataRecord{Record: &messages.MetadataRecord_Topic{Topic: &messages.TopicRecord{
			Name: "orders",
			Partitions: []*messages.PartitionAssignment{
				{Topic: "orders", Partition: 0, NodeId: 7, LogDir: h.paths[0]},
				{Topic: "orders", Partition: 1, NodeId: 7, LogDir: h.paths[1]},
				{Topic: "orders", Partition: 2, NodeId: 7, LogDir: "/gone"},
			},
		}}},
		&messages.MetadataRecord{Record: &messages.MetadataRecord_PartitionDir{PartitionDir: &messages.PartitionDirRecord{
			Topic: "orders", Partition: 1, NodeId: 7, LogDir: h.paths[0],
		}}},
	)
	require.NoError(t, h.start())
	md := h.metadata("orders")
	requireNoError(t, md.GetTopics()[0].GetError(), md.GetTopics()[0].GetErrorMessage())
	var got [][2]string
	for _, p := range md.GetTopics()[0].GetPartitions() {
		got = append(got, [2]string{p.GetDirId(), p.GetLogDir()})
	}
	require.Equal(t, [][2]string{{"id0", h.paths[0]}, {"id0", h.paths[0]}, {"", ""}}, got)

	// A restart reads the same.
	h.restart()
	require.True(t, proto.Equal(md, h.metadata("orders")))
}

// stallFS holds every Sync of a file under dir while stalled is set, as a
// disk that takes its time would.
type stallFS struct {
	disk.FS
	dir     string
	stalled atomic.Bool
	release chan struct{}
}

func (s *stallFS) OpenFile(name string, flag int, perm os.FileMode) (disk.File, error) {
	f, err := s.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &stallFile{File: f, fs: s}, nil
}

type stallFile struct {
	disk.File
	fs *stallFS
}

func (f *stallFile) Sync() error {
	if f.fs.stalled.Load() && strings.HasPrefix(f.Name(), f.fs.dir) {
		<-f.fs.release
	}
	return f.File.Sync()
}

// Metadata reads are answered while the controller waits for its disk: a
// change stalled in its fsync holds up no read.
func TestMetadataReadsDoNotWaitForTheDisk(t *testing.T) {
	h := newMetaHarness(t)
	h.stop()
	fsys := &stallFS{FS: disk.OS, dir: h.cfg.Dir, release: make(chan struct{})}
	h.cfg.FS = fsys
	require.NoError(t, h.start())
	resp := h.create("before", 1, nil)
	requireNoError(t, resp.GetError(), resp.GetErrorMessage())

	fsys.stalled.Store(true)
	pending := h.system.Root.RequestFuture(h.pid, &messages.CreateTopicRequest{Name: "stalled", Partitions: 1}, metadataTestTimeout)
	for range 10 {
		md := h.metadata()
		require.Equal(t, []string{"before"}, topicNames(md), "the stalled change is not applied")
	}
	fsys.stalled.Store(false)
	close(fsys.release)
	res, err := pending.Result()
	require.NoError(t, err)
	requireNoError(t, res.(*messages.CreateTopicResponse).GetError(), res.(*messages.CreateTopicResponse).GetErrorMessage())
	require.Equal(t, []string{"before", "stalled"}, topicNames(h.metadata()))
}

// Partitions added to a topic are started on the node, recorded, and
// kept across a restart; a count that does not raise the topic's is
// refused and changes nothing, and a retry of a request whose answer was
// lost succeeds.
func TestMetadataCreatePartitions(t *testing.T) {
	h := newMetaHarness(t)
	resp := h.create("orders", 2, nil)
	requireNoError(t, resp.GetError(), resp.GetErrorMessage())
	add := func(m *messages.CreatePartitionsRequest) *messages.CreatePartitionsResponse {
		t.Helper()
		res := h.request(m)
		require.IsType(t, &messages.CreatePartitionsResponse{}, res)
		return res.(*messages.CreatePartitionsResponse)
	}

	beforeBytes := h.logBytes()
	check := add(&messages.CreatePartitionsRequest{Topic: "orders", Count: 4, ValidateOnly: true})
	requireNoError(t, check.GetError(), check.GetErrorMessage())
	require.Len(t, check.GetTopic().GetPartitions(), 4)
	require.Len(t, h.metadata("orders").GetTopics()[0].GetPartitions(), 2, "validate only")
	require.Equal(t, beforeBytes, h.logBytes())

	added := add(&messages.CreatePartitionsRequest{Topic: "orders", Count: 4})
	requireNoError(t, added.GetError(), added.GetErrorMessage())
	require.Len(t, added.GetTopic().GetPartitions(), 4)
	for _, p := range added.GetTopic().GetPartitions() {
		require.Equal(t, []int32{7}, p.GetReplicas())
		require.NotEmpty(t, p.GetLogDir(), "answered once the node chose its dir")
	}
	starts, _ := h.manager.counts()
	require.Equal(t, 2, starts, "the topic's start, then the new partitions'")
	h.manager.mu.Lock()
	last := h.manager.starts[1]
	h.manager.mu.Unlock()
	require.Len(t, last.GetPartitions(), 2)
	require.Equal(t, []int32{2, 3}, []int32{last.GetPartitions()[0].GetPartition(), last.GetPartitions()[1].GetPartition()})
	require.Equal(t, int32(7), last.GetPartitions()[0].GetLeader())

	beforeBytes = h.logBytes()
	for _, tc := range []struct {
		req  *messages.CreatePartitionsRequest
		code messages.ErrorCode
	}{
		{&messages.CreatePartitionsRequest{Topic: "orders", Count: 3}, messages.ErrorCode_INVALID_PARTITIONS},
		{&messages.CreatePartitionsRequest{Topic: "orders", Count: 4}, messages.ErrorCode_INVALID_PARTITIONS},
		{&messages.CreatePartitionsRequest{Topic: "nope", Count: 4}, messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION},
		{&messages.CreatePartitionsRequest{Topic: "orders", Count: 5, Assignments: []*messages.ReplicaAssignment{{Replicas: []int32{8}}}},
			messages.ErrorCode_INVALID_REPLICA_ASSIGNMENT},
	} {
		r := add(tc.req)
		require.Equal(t, tc.code, r.GetError(), r.GetErrorMessage())
		require.NotEmpty(t, r.GetErrorMessage())
	}
	require.Equal(t, beforeBytes, h.logBytes(), "refusals write nothing")
	retried := add(&messages.CreatePartitionsRequest{Topic: "orders", Count: 4, Retried: true})
	requireNoError(t, retried.GetError(), retried.GetErrorMessage())

	h.restart()
	require.Len(t, h.metadata("orders").GetTopics()[0].GetPartitions(), 4)
}

// A topic's configs change through the log: the node's partitions are
// handed the effective configs, the metadata shows those set, a restart
// keeps them, and a refused change writes nothing.
func TestMetadataAlterTopicConfigs(t *testing.T) {
	h := newMetaHarness(t)
	resp := h.create("orders", 2, map[string]string{"segment.bytes": "1048576"})
	requireNoError(t, resp.GetError(), resp.GetErrorMessage())
	alter := func(m *messages.AlterTopicConfigsRequest) *messages.AlterTopicConfigsResponse {
		t.Helper()
		res := h.request(m)
		require.IsType(t, &messages.AlterTopicConfigsResponse{}, res)
		return res.(*messages.AlterTopicConfigsResponse)
	}
	set := func(k, v string) *messages.ConfigChange {
		return &messages.ConfigChange{Key: k, Op: messages.ConfigChange_SET, Value: v}
	}

	check := alter(&messages.AlterTopicConfigsRequest{Topic: "orders", ValidateOnly: true, Changes: []*messages.ConfigChange{set("retention.ms", "60000")}})
	requireNoError(t, check.GetError(), check.GetErrorMessage())
	require.Equal(t, map[string]string{"segment.bytes": "1048576", "retention.ms": "60000"}, check.GetTopic().GetConfigsSet())
	require.Equal(t, map[string]string{"segment.bytes": "1048576"}, h.metadata("orders").GetTopics()[0].GetConfigsSet(), "validate only")

	changed := alter(&messages.AlterTopicConfigsRequest{Topic: "orders", Changes: []*messages.ConfigChange{
		set("retention.ms", "60000"), {Key: "segment.bytes", Op: messages.ConfigChange_DELETE},
	}})
	requireNoError(t, changed.GetError(), changed.GetErrorMessage())
	require.Equal(t, map[string]string{"retention.ms": "60000"}, changed.GetTopic().GetConfigsSet())
	require.Equal(t, "1073741824", changed.GetTopic().GetConfigs()["segment.bytes"], "back to its default")
	h.manager.mu.Lock()
	require.Len(t, h.manager.configs, 1)
	update := h.manager.configs[0]
	h.manager.mu.Unlock()
	require.Equal(t, "orders", update.GetTopic())
	require.Equal(t, "60000", update.GetConfigs()["retention.ms"])
	require.Equal(t, "1073741824", update.GetConfigs()["segment.bytes"])

	beforeBytes := h.logBytes()
	for _, tc := range []struct {
		changes []*messages.ConfigChange
		code    messages.ErrorCode
	}{
		{[]*messages.ConfigChange{set("colour", "red")}, messages.ErrorCode_INVALID_CONFIG},
		{[]*messages.ConfigChange{set("retention.ms", "soon")}, messages.ErrorCode_INVALID_CONFIG},
		{[]*messages.ConfigChange{set("retention.ms", "1"), set("retention.ms", "2")}, messages.ErrorCode_INVALID_REQUEST},
	} {
		r := alter(&messages.AlterTopicConfigsRequest{Topic: "orders", Changes: tc.changes})
		require.Equal(t, tc.code, r.GetError(), r.GetErrorMessage())
	}
	same := alter(&messages.AlterTopicConfigsRequest{Topic: "orders", Changes: []*messages.ConfigChange{set("retention.ms", "60000")}})
	requireNoError(t, same.GetError(), same.GetErrorMessage())
	require.Equal(t, beforeBytes, h.logBytes(), "refusals, and a change to what is set, write nothing")
	h.manager.mu.Lock()
	require.Len(t, h.manager.configs, 1)
	h.manager.mu.Unlock()

	h.restart()
	require.Equal(t, map[string]string{"retention.ms": "60000"}, h.metadata("orders").GetTopics()[0].GetConfigsSet())
}
