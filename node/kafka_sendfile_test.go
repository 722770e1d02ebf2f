package node

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	wirekafka "github.com/depot-dev/depot/wire/kafka"
)

// sendfileSegmentBytes is the segment.bytes of the sendfile tests' topic:
// a fetch's records lie in one segment, so a few segments make a fetch of
// several answers.
const sendfileSegmentBytes = 256 << 10

// startSendfileNode starts a node of two log dirs with a Kafka listener
// whose fetches use sendfile or not, and a file cache of few
// descriptors, and creates the topic "sf" of one partition with small
// segments holding records records of 2000 bytes, keyed by their offset.
func startSendfileNode(t *testing.T, sendfile bool, records int) (*Node, *kgo.Client) {
	t.Helper()
	data := t.TempDir()
	cfg := testConfig(t, data)
	cfg.LogDirs = []LogDir{{Path: filepath.Join(data, "a")}, {Path: filepath.Join(data, "b")}}
	cfg.HTTP, cfg.KafkaListen = "", "127.0.0.1:0"
	cfg.KafkaSendfile = sendfile
	cfg.MaxOpenFiles = 24
	n := startNode(t, cfg)
	cl := kafkaClient(t, kgo.SeedBrokers(n.KafkaAddress()), kgo.DefaultProduceTopic("sf"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	created, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": kadm.StringPtr(strconv.Itoa(sendfileSegmentBytes))}, "sf")
	require.NoError(t, err)
	require.NoError(t, created.Err)
	for sent := 0; sent < records; {
		var rs []*kgo.Record
		for range 40 {
			rs = append(rs, &kgo.Record{Key: []byte(strconv.Itoa(sent)), Value: sendfileValue(sent)})
			sent++
		}
		require.NoError(t, cl.ProduceSync(ctx, rs...).FirstErr())
	}
	return n, cl
}

// sendfileValue is the value of the record at offset i: 2000 bytes that
// only it has.
func sendfileValue(i int) []byte {
	return bytes.Repeat([]byte(strconv.Itoa(i)+"|"), 2000)[:2000]
}

// segmentFiles are the bytes of the .log files of sf-0, by name, as they
// are now.
func segmentFiles(t *testing.T, n *Node) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, d := range n.cfg.LogDirs {
		paths, err := filepath.Glob(filepath.Join(d.Path, "sf-0", "*.log"))
		require.NoError(t, err)
		for _, p := range paths {
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			out[filepath.Base(p)] = b
		}
	}
	require.NotEmpty(t, out)
	return out
}

// firstSegment is the name of the first segment's .log.
const firstSegment = "00000000000000000000.log"

// sendfileFetch is a Fetch v12 of sf-0 from offset 0, up to 1 MiB; the
// topic's id names it in the versions after, for a client that picks the
// newest it can.
func sendfileFetch(topicID [16]byte) *kmsg.FetchRequest {
	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(12)
	fetch.MaxBytes = 1 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = "sf", topicID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	return fetch
}

// deletedFilesOpen are the process's descriptors of files under dir that
// have been deleted.
func deletedFilesOpen(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd to look at descriptors in")
	}
	var out []string
	for _, e := range entries {
		link, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(link, dir) && strings.HasSuffix(link, " (deleted)") {
			out = append(out, link)
		}
	}
	return out
}

// With sendfile on, a fetch on a plain TCP connection sends its records
// from their segment file: they are the file's bytes, byte for byte, as a
// node without sendfile reads them into memory, and kgo consumes every
// record once, in order, either way. No file stays pinned once the
// answers are written.
func TestKafkaFetchBySendfile(t *testing.T) {
	for _, sendfile := range []bool{true, false} {
		t.Run(fmt.Sprintf("sendfile %v", sendfile), func(t *testing.T) {
			const records = 600
			n, cl := startSendfileNode(t, sendfile, records)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			segments := segmentFiles(t, n)
			var log []byte // the segments one after another
			for _, name := range slices.Sorted(maps.Keys(segments)) {
				log = append(log, segments[name]...)
			}

			md, err := kadm.NewClient(cl).Metadata(ctx, "sf")
			require.NoError(t, err)
			resp, err := sendfileFetch(md.Topics["sf"].ID).RequestWith(ctx, cl)
			require.NoError(t, err)
			got := resp.Topics[0].Partitions[0]
			require.Equal(t, int16(0), got.ErrorCode)
			require.Greater(t, len(got.RecordBatches), 100<<10)
			require.Equal(t, log[:len(got.RecordBatches)], got.RecordBatches, "the segments' bytes")

			consumed := kafkaConsume(t, []string{n.KafkaAddress()}, "sf", records)
			require.Len(t, consumed, records)
			for i, r := range consumed {
				require.Equal(t, int64(i), r.Offset)
				require.Equal(t, strconv.Itoa(i), string(r.Key), "in order")
				require.Equal(t, sendfileValue(i), r.Value)
			}
			if sendfile {
				require.GreaterOrEqual(t, n.kafka.SentFromFiles(), int64(len(got.RecordBatches)))
			} else {
				require.Zero(t, n.kafka.SentFromFiles())
			}
			require.Eventually(t, func() bool { return n.OpenFiles().Pinned == 0 }, 10*time.Second, 10*time.Millisecond,
				"no file pinned once the answers are written")
		})
	}
}

// dialSlowKafka connects to n's Kafka listener with a receive buffer so
// small that answers wait in the node until the test reads them.
func dialSlowKafka(t *testing.T, n *Node) *rawConn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	nc, err := d.Dial("tcp", n.KafkaListenAddress())
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}
}

// While answers that send a segment's records wait on a client that does
// not read, the segment is deleted by retention, the partition moves to
// the other log dir, the file cache closes what it can, or the client
// closes the connection: every answer the client reads holds the records
// as they were, and once the answers are written or dropped no file stays
// pinned, nor any descriptor of a deleted file open.
func TestKafkaSendfilePendingSends(t *testing.T) {
	for _, tc := range []struct {
		name   string
		meddle func(t *testing.T, n *Node, cl *kgo.Client, c *rawConn)
		// closes says the meddling closed the connection.
		closes bool
	}{
		{name: "segment deleted by retention", meddle: func(t *testing.T, n *Node, cl *kgo.Client, _ *rawConn) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			adm := kadm.NewClient(cl)
			ends, err := adm.ListEndOffsets(ctx, "sf")
			require.NoError(t, err)
			end, _ := ends.Lookup("sf", 0)
			deleted, err := adm.DeleteRecords(ctx, kadm.Offsets{"sf": {0: kadm.Offset{At: end.Offset}}})
			require.NoError(t, err)
			require.NoError(t, deleted.Error())
			require.NotContains(t, segmentFiles(t, n), firstSegment)
		}},
		{name: "partition moved to the other log dir", meddle: func(t *testing.T, n *Node, cl *kgo.Client, _ *rawConn) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			adm := kadm.NewClient(cl)
			dirs, err := adm.DescribeBrokerLogDirs(ctx, n.cfg.NodeID, nil)
			require.NoError(t, err)
			from := logDirOf(dirs, "sf", 0)
			to := n.cfg.LogDirs[0].Path
			if to == from {
				to = n.cfg.LogDirs[1].Path
			}
			var req kadm.AlterReplicaLogDirsReq
			req.Add(to, kadm.TopicsSet{"sf": {0: {}}})
			resp, err := adm.AlterBrokerReplicaLogDirs(ctx, n.cfg.NodeID, req)
			require.NoError(t, err)
			resp.Each(func(r kadm.AlterReplicaLogDirsResponse) { require.NoError(t, r.Err) })
			require.Eventually(t, func() bool { return onDiskBytes(t, from, "sf", 0) == 0 }, 30*time.Second, 20*time.Millisecond,
				"the old copy is deleted")
		}},
		{name: "file cache closing what it can", meddle: func(t *testing.T, n *Node, cl *kgo.Client, _ *rawConn) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			evictions := n.OpenFiles().Evictions
			created, err := kadm.NewClient(cl).CreateTopic(ctx, 12, 1, map[string]*string{"segment.bytes": kadm.StringPtr("8192")}, "crowd")
			require.NoError(t, err)
			require.NoError(t, created.Err)
			var rs []*kgo.Record
			for i := range 240 {
				rs = append(rs, &kgo.Record{Topic: "crowd", Partition: int32(i % 12), Value: make([]byte, 1000)})
			}
			require.NoError(t, cl.ProduceSync(ctx, rs...).FirstErr())
			require.Greater(t, n.OpenFiles().Evictions, evictions, "the cache closed descriptors to make room")
		}},
		{name: "connection closed", closes: true, meddle: func(t *testing.T, _ *Node, _ *kgo.Client, c *rawConn) {
			require.NoError(t, c.nc.Close())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, cl := startSendfileNode(t, true, 600)
			first := segmentFiles(t, n)[firstSegment]
			c := dialSlowKafka(t, n)
			const fetches = 40
			var many []byte
			for i := range fetches {
				many = wirekafka.AppendRequest(many, int32(i), nil, sendfileFetch([16]byte{}))
			}
			go func() { _, _ = c.nc.Write(many) }()
			require.Eventually(t, func() bool { return n.OpenFiles().Pinned > 0 }, 10*time.Second, 5*time.Millisecond,
				"an answer waits with its segment pinned")

			tc.meddle(t, n, cl, c)
			if !tc.closes {
				answered := 0
				for i := range fetches {
					correlationID, body := c.response()
					require.Equal(t, int32(i), correlationID)
					resp := kmsg.NewPtrFetchResponse()
					resp.SetVersion(12)
					require.NoError(t, resp.ReadFrom(body[1:]), "fetch %d", i)
					p := resp.Topics[0].Partitions[0]
					if p.ErrorCode != 0 {
						// Answered after the meddling: from where the log is now.
						continue
					}
					require.LessOrEqual(t, len(p.RecordBatches), len(first), "fetch %d", i)
					require.Equal(t, first[:len(p.RecordBatches)], p.RecordBatches, "fetch %d: the records as they were", i)
					answered++
				}
				require.Positive(t, answered, "answers from the first segment were read")
			}
			require.Eventually(t, func() bool { return n.OpenFiles().Pinned == 0 }, 10*time.Second, 10*time.Millisecond,
				"no file stays pinned")
			require.Empty(t, deletedFilesOpen(t, n.cfg.DataDir), "no descriptor of a deleted file stays open")
		})
	}
}
