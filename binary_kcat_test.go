package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kcatPath is kcat on PATH. Its absence fails the test rather than
// skipping it: CI installs kcat (.ci/run), and so must a developer.
func kcatPath(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	require.NoError(t, err, "kcat is not on PATH: install it (Debian: apt-get install -y kcat; .ci/run does so in CI)")
	return path
}

// runKcat runs kcat with args and stdin, up to 30 s, and returns its
// standard output; a failure fails the test with its standard error.
func runKcat(t *testing.T, kcat, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "kcat %s did not end in 30 s; stderr:\n%s", strings.Join(args, " "), stderr.String())
	require.NoError(t, err, "kcat %s; stderr:\n%s", strings.Join(args, " "), stderr.String())
	require.NotContains(t, stderr.String(), "ERROR", "kcat %s", strings.Join(args, " "))
	require.NotContains(t, stderr.String(), "PROTOERR", "kcat %s", strings.Join(args, " "))
	return stdout.String()
}

// advertisesFindCoordinatorV0 reports whether the node's ApiVersions
// lists FindCoordinator v0, which librdkafka takes as the sign that a
// broker reads LZ4 (its feature LZ4 dates from Kafka 0.8.2, as
// GroupCoordinator does): without it librdkafka sends lz4 batches
// uncompressed.
func advertisesFindCoordinatorV0(t *testing.T, kafkaAddr string) bool {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	require.NoError(t, err)
	for _, k := range resp.ApiKeys {
		if k.ApiKey == kmsg.FindCoordinator.Int16() {
			return k.MinVersion == 0
		}
	}
	return false
}

// storedCodecs are the compression codecs of the record batches stored in
// partition 0 of topic, read through a raw Fetch.
func storedCodecs(t *testing.T, kafkaAddr, topic string) []int8 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	require.NoError(t, err)
	fetch := kmsg.NewPtrFetchRequest()
	fetch.MaxBytes = 1 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = topic, md.Topics[topic].ID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	resp, err := fetch.RequestWith(ctx, cl)
	require.NoError(t, err)
	got := resp.Topics[0].Partitions[0]
	require.Equal(t, int16(0), got.ErrorCode)
	var codecs []int8
	for raw := got.RecordBatches; len(raw) > 0; {
		var batch kmsg.RecordBatch
		require.NoError(t, batch.ReadFrom(raw))
		codecs = append(codecs, int8(batch.Attributes&0x07))
		raw = raw[12+batch.Length:]
	}
	return codecs
}

// kcat, librdkafka's command-line client, against the built binary's
// Kafka listener: it lists the topic, produces keyed lines, plain,
// idempotent and in each compression codec, and consumes them back
// exactly; the node logs no request it could not answer.
func TestBinaryKcat(t *testing.T) {
	depotBinary(t)
	kcat := kcatPath(t)
	kafkaAddr := unusedAddress(t)
	node, addr := startNodeProcess(t, t.TempDir(), "--kafka-listen", kafkaAddr)
	b := "--brokers=" + addr

	topics := []string{"plain", "idempotent", "gzip", "snappy", "lz4", "zstd"}
	for _, topic := range topics {
		_, stderr, code := runDepot(t, "", "topic", "create", topic, "-p", "1", b)
		require.Equal(t, 0, code, stderr)
	}

	t.Run("metadata", func(t *testing.T) {
		out := runKcat(t, kcat, "", "-b", kafkaAddr, "-L")
		require.Contains(t, out, "broker 1 at "+kafkaAddr)
		for _, topic := range topics {
			require.Contains(t, out, fmt.Sprintf("topic %q with 1 partitions:", topic))
		}
		require.Contains(t, out, "partition 0, leader 1, replicas: 1, isrs: 1")
	})

	// codecs are the compression attribute values of Kafka's record
	// batches, by kcat's -z name; stored are those the node stores.
	codecs := map[string]int8{"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
	stored := map[string]int8{"gzip": 1, "snappy": 2, "lz4": 0, "zstd": 4}
	if advertisesFindCoordinatorV0(t, kafkaAddr) {
		stored["lz4"] = 3
	}
	for _, topic := range topics {
		t.Run(topic, func(t *testing.T) {
			var lines, want strings.Builder
			// 200 records, some 80 KiB uncompressed: a fetch answer large
			// enough to be written with its records spliced in.
			for i := range 200 {
				// Long enough values that every codec shrinks them, as
				// librdkafka sends a batch uncompressed otherwise.
				value := fmt.Sprintf("value %d %s", i, strings.Repeat("abc", 40+i))
				fmt.Fprintf(&lines, "key-%d:%s\n", i, value)
				fmt.Fprintf(&want, "%d key-%d=%s\n", i, i, value)
			}
			args := []string{"-b", kafkaAddr, "-P", "-t", topic, "-K:"}
			if _, compressed := codecs[topic]; compressed {
				args = append(args, "-z", topic)
			}
			if topic == "idempotent" {
				args = append(args, "-X", "enable.idempotence=true")
			}
			runKcat(t, kcat, lines.String(), args...)

			out := runKcat(t, kcat, "", "-b", kafkaAddr, "-C", "-t", topic, "-o", "beginning", "-e", "-f", `%o %k=%s\n`)
			require.Equal(t, want.String(), out)

			got := storedCodecs(t, kafkaAddr, topic)
			require.NotEmpty(t, got)
			for _, c := range got {
				require.Equal(t, stored[topic], c, "batches stored as kcat compressed them (0: none)")
			}

			// From two before the end: ListOffsets, then Fetch.
			out = runKcat(t, kcat, "", "-b", kafkaAddr, "-C", "-t", topic, "-o", "-2", "-e", "-f", `%o %k\n`)
			require.Equal(t, "198 key-198\n199 key-199\n", out)
		})
	}

	logs := node.stderr.String()
	require.NotContains(t, logs, "is not supported", "kcat asked for no API the node does not answer")
	require.NotContains(t, logs, "level=error")
}
