package node

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

const requestTimeout = 10 * time.Second

func testConfig(t testing.TB, dir string) Config {
	t.Helper()
	return Config{DataDir: dir, Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", Logger: actortest.Logger(t, logrus.WarnLevel)}
}

func startNode(t testing.TB, cfg Config) *Node {
	t.Helper()
	n, err := Start(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Stop() })
	return n
}

func request[T any](t testing.TB, n *Node, pid *actor.PID, msg any) T {
	t.Helper()
	res, err := actors.Request[T](context.Background(), n.System().Root, pid, msg, requestTimeout)
	require.NoError(t, err)
	return res
}

func partitionPID(t testing.TB, n *Node, topic string, partition int32) *actor.PID {
	t.Helper()
	md := request[*messages.MetadataResponse](t, n, n.Metadata(), &messages.MetadataRequest{Topics: []string{topic}})
	require.Len(t, md.Topics, 1)
	require.Equal(t, messages.ErrorCode_NONE, md.Topics[0].Error)
	for _, p := range md.Topics[0].Partitions {
		if p.Partition == partition {
			return actor.NewPID(p.LeaderAddress, p.ActorName)
		}
	}
	t.Fatalf("no partition %d in %v", partition, md.Topics[0])
	return nil
}

func fetchValues(t *testing.T, n *Node, pid *actor.PID, topic string, offset int64) []string {
	t.Helper()
	resp := request[*messages.FetchResponse](t, n, pid, &messages.FetchRequest{Topic: topic, Offset: offset, MaxBytes: 1 << 20})
	require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
	var values []string
	_, err := wire.Batches(resp.Records, func(batch []byte, _ wire.Header) error {
		return wire.Records(batch, func(r wire.Record) error {
			values = append(values, fmt.Sprintf("%d:%s", r.Offset, r.Value))
			return nil
		})
	})
	require.NoError(t, err)
	return values
}

func TestNodeProduceFetchRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	n := startNode(t, cfg)

	created := request[*messages.CreateTopicResponse](t, n, n.Metadata(), &messages.CreateTopicRequest{Name: "orders", Partitions: 2})
	require.Equal(t, messages.ErrorCode_NONE, created.Error, created.ErrorMessage)

	pid := partitionPID(t, n, "orders", 1)
	for _, acks := range []int32{1, -1} {
		resp := request[*messages.ProduceResponse](t, n, pid, &messages.ProduceRequest{Topic: "orders", Partition: 1, Acks: acks, Records: actortest.Batch(t, "a", "b")})
		require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
	}
	require.Equal(t, []string{"0:a", "1:b", "2:a", "3:b"}, fetchValues(t, n, pid, "orders", 0))

	// Health and metrics answer.
	res, err := http.Get("http://" + n.HTTPAddress() + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, string(body), "go_goroutines")
	require.Contains(t, string(body), `depot_log_dir_bytes{dir="`+filepath.Join(dir, "logs-1")+`",state="online"}`)

	require.NoError(t, n.Stop())
	// A clean stop leaves a checkpoint with the partition's end offset.
	n2 := startNode(t, cfg)
	pid = partitionPID(t, n2, "orders", 1)
	require.Equal(t, []string{"0:a", "1:b", "2:a", "3:b"}, fetchValues(t, n2, pid, "orders", 0))
	st := request[*messages.PartitionStatusResponse](t, n2, pid, &messages.PartitionStatusRequest{})
	require.Equal(t, int64(4), st.LogEndOffset)
	require.Equal(t, int64(4), st.RecoveryPoint)
	require.Equal(t, filepath.Join(dir, "logs-1"), st.LogDir)
}

func TestSecondNodeOnSameDataDirRefused(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	startNode(t, cfg)
	_, err := Start(cfg)
	require.ErrorContains(t, err, "in use by another node")
}

// Each log dir is locked, not only the data dir: a second node naming a log
// dir that a running node uses is refused, in one line naming the holder,
// and changes nothing there.
func TestSecondNodeOnSameLogDirRefused(t *testing.T) {
	shared := t.TempDir()
	first := testConfig(t, t.TempDir())
	first.LogDirs = []LogDir{{Path: shared}}
	startNode(t, first)
	before, err := os.ReadDir(shared)
	require.NoError(t, err)

	second := testConfig(t, t.TempDir())
	second.NodeID = 2
	second.LogDirs = []LogDir{{Path: filepath.Join(t.TempDir(), "own")}, {Path: shared}}
	_, err = Start(second)
	require.ErrorContains(t, err, "log dir "+shared+" is in use by another node")
	require.ErrorContains(t, err, fmt.Sprintf("pid=%d node=1", os.Getpid()))
	require.NotContains(t, err.Error(), "\n")
	after, err := os.ReadDir(shared)
	require.NoError(t, err)
	require.Equal(t, before, after)
}
