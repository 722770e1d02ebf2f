package node

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafkajsDir is the kafkajs project the test installs and runs: a pinned
// package.json and package-lock.json, and the script clients.js.
const kafkajsDir = "testdata/kafkajs"

// kafkajsProject copies the kafkajs project into a temporary directory and
// installs it there with npm ci, so nothing is written into the tree. It
// fails the test when node or npm is missing.
func kafkajsProject(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not on PATH: install Node.js and npm (Debian: apt-get install -y nodejs npm) to run the kafkajs test", tool)
		}
	}
	dir := t.TempDir()
	for _, name := range []string{"package.json", "package-lock.json", "clients.js"} {
		b, err := os.ReadFile(filepath.Join(kafkajsDir, name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "npm ci: %s", out)
	return dir
}

// kafkajsSteps are the JSON lines clients.js printed, by step, in order.
type kafkajsSteps map[string][]json.RawMessage

// step decodes the i-th line of a step into T.
func step[T any](t *testing.T, steps kafkajsSteps, name string, i int) T {
	t.Helper()
	require.Greater(t, len(steps[name]), i, "step %s printed", name)
	var v T
	require.NoError(t, json.Unmarshal(steps[name][i], &v), "%s: %s", name, steps[name][i])
	return v
}

// kafkajs (the Node.js client, pinned in testdata/kafkajs) creates topics
// and reads their metadata; two consumers of one group share a topic
// before it is produced to with acks -1 and 1 and gzip, and commit all they
// read; its admin reads the group's offsets and description, rewinds
// another group, sets and deletes offsets of a third, adds partitions and
// deletes a topic. The Go side checks each step's JSON line and reads the
// records back with kgo.
func TestKafkaKafkajs(t *testing.T) {
	if testing.Short() {
		t.Skip("installs kafkajs with npm")
	}
	dir := kafkajsProject(t)
	n := startKafkaNode(t)
	const topic, scratch, group, perBatch = "kafkajs-orders", "kafkajs-scratch", "kafkajs-billing", 50

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "clients.js")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "DEPOT_KAFKA="+n.KafkaAddress(), "DEPOT_TOPIC="+topic, "DEPOT_SCRATCH="+scratch, "DEPOT_GROUP="+group)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("kafkajs log:\n%s", stderr.String())
	require.NoError(t, err, "clients.js: %s", stdout.String())

	steps := kafkajsSteps{}
	var order []string
	scanner := bufio.NewScanner(&stdout)
	scanner.Buffer(nil, 16<<20)
	for scanner.Scan() {
		var s struct {
			Step  string `json:"step"`
			Error string `json:"error"`
		}
		line := slices.Clone(scanner.Bytes())
		require.NoError(t, json.Unmarshal(line, &s), "line %q", line)
		require.NotEqual(t, "failed", s.Step, s.Error)
		steps[s.Step] = append(steps[s.Step], line)
		order = append(order, s.Step)
	}
	require.NoError(t, scanner.Err())
	require.NotEmpty(t, order)
	require.Equal(t, "done", order[len(order)-1], "every step ran: %v", order)

	created := step[struct{ Created, Again bool }](t, steps, "createTopics", 0)
	require.True(t, created.Created)
	require.False(t, created.Again, "an existing topic is not created again")
	require.Subset(t, step[struct{ Topics []string }](t, steps, "listTopics", 0).Topics, []string{topic, scratch})

	described := step[struct {
		Topics []struct {
			Name       string
			Partitions []struct {
				Partition, Leader int32
				Replicas, ISR     []int32
			}
		}
	}](t, steps, "fetchTopicMetadata", 0).Topics
	require.Len(t, described, 1)
	require.Equal(t, topic, described[0].Name)
	require.Len(t, described[0].Partitions, 3)
	for _, p := range described[0].Partitions {
		require.Equal(t, n.cfg.NodeID, p.Leader)
		require.Equal(t, []int32{n.cfg.NodeID}, p.Replicas)
		require.Equal(t, []int32{n.cfg.NodeID}, p.ISR)
	}

	var names []string
	for i := range steps["produce"] {
		s := step[struct {
			Name    string
			Results []struct {
				Partition  int32
				ErrorCode  int16
				BaseOffset string
			}
		}](t, steps, "produce", i)
		names = append(names, s.Name)
		require.NotEmpty(t, s.Results, s.Name)
		for _, r := range s.Results {
			require.Equal(t, int16(0), r.ErrorCode, s.Name)
		}
	}
	require.Equal(t, []string{"acks=-1", "acks=1", "gzip"}, names)

	const total = 3 * perBatch
	consumed := step[struct {
		Messages []struct {
			Partition                            int32
			Consumer, Offset, Key, Value, Header string
		}
	}](t, steps, "consume", 0).Messages
	require.Len(t, consumed, total)
	seen := map[string]bool{}
	owners := map[int32]string{}
	for _, m := range consumed {
		require.Equal(t, "key-"+m.Header, m.Key)
		require.Equal(t, "value-"+m.Header, m.Value)
		seen[m.Header] = true
		if owner, ok := owners[m.Partition]; ok {
			require.Equal(t, owner, m.Consumer, "partition %d read by one consumer", m.Partition)
		}
		owners[m.Partition] = m.Consumer
	}
	require.Len(t, seen, total, "every message once")
	require.ElementsMatch(t, []string{"a", "b"}, slices.Compact(slices.Sorted(maps.Values(owners))), "both consumers read")

	// What kafkajs committed, as kafkajs and as kadm read it: the end of
	// every partition.
	adm := kadm.NewClient(kafkaClient(t, kgo.SeedBrokers(n.KafkaAddress())))
	ends, err := adm.ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	committed, err := adm.FetchOffsets(ctx, group)
	require.NoError(t, err)
	fetched := step[struct {
		Offsets []struct {
			Topic      string
			Partitions []struct {
				Partition int32
				Offset    string
			}
		}
	}](t, steps, "fetchOffsets", 0).Offsets
	require.Len(t, fetched, 1)
	require.Len(t, fetched[0].Partitions, 3)
	for _, p := range fetched[0].Partitions {
		end, ok := ends.Lookup(topic, p.Partition)
		require.True(t, ok)
		require.Equal(t, strconv.FormatInt(end.Offset, 10), p.Offset, "partition %d as kafkajs reads it", p.Partition)
		c, ok := committed.Lookup(topic, p.Partition)
		require.True(t, ok)
		require.Equal(t, end.Offset, c.At, "partition %d as kadm reads it", p.Partition)
	}

	type describedGroups struct {
		Groups []struct {
			GroupID                       string `json:"groupId"`
			State, ProtocolType, Protocol string
			Members                       []struct {
				ClientID   string `json:"clientId"`
				Assignment bool
			}
		}
	}
	joined := step[describedGroups](t, steps, "joined", 0).Groups
	require.Len(t, joined, 1)
	require.Equal(t, "Stable", joined[0].State)
	require.Len(t, joined[0].Members, 2, "both consumers joined before the records came")
	groups := step[describedGroups](t, steps, "describeGroups", 0).Groups
	require.Len(t, groups, 1)
	require.Equal(t, group, groups[0].GroupID)
	require.Equal(t, "Stable", groups[0].State)
	require.Equal(t, "consumer", groups[0].ProtocolType)
	require.Equal(t, "RoundRobinAssigner", groups[0].Protocol)
	require.Len(t, groups[0].Members, 2)
	for _, m := range groups[0].Members {
		require.Equal(t, "depot-kafkajs-test", m.ClientID)
		require.True(t, m.Assignment)
	}

	type listedGroups struct {
		Groups []struct {
			GroupID      string `json:"groupId"`
			ProtocolType string
		}
	}
	listed := map[string]string{}
	for _, g := range step[listedGroups](t, steps, "listGroups", 0).Groups {
		listed[g.GroupID] = g.ProtocolType
	}
	require.Equal(t, map[string]string{group: "consumer", group + "-rewound": "consumer"}, listed)

	cluster := step[struct {
		Brokers []struct {
			NodeID int32 `json:"nodeId"`
			Host   string
			Port   int
		}
		Controller int32
	}](t, steps, "describeCluster", 0)
	require.Len(t, cluster.Brokers, 1)
	require.Equal(t, n.cfg.NodeID, cluster.Brokers[0].NodeID)
	require.Equal(t, n.KafkaAddress(), net.JoinHostPort(cluster.Brokers[0].Host, strconv.Itoa(cluster.Brokers[0].Port)))
	require.Equal(t, n.cfg.NodeID, cluster.Controller)

	offsets := step[struct {
		Partitions []struct {
			Partition         int32
			Offset, High, Low string
		}
	}](t, steps, "fetchTopicOffsets", 0).Partitions
	require.Len(t, offsets, 3)
	var produced int64
	for _, p := range offsets {
		require.Equal(t, "0", p.Low)
		require.Equal(t, p.High, p.Offset)
		high, err := strconv.ParseInt(p.High, 10, 64)
		require.NoError(t, err)
		produced += high
	}
	require.Equal(t, int64(total), produced)

	type fetchedOffsets struct {
		Offsets []struct {
			Partitions []struct {
				Partition int32
				Offset    string
			}
		}
	}
	for name, want := range map[string]string{"resetOffsets": "-2", "resolveOffsets": "0"} {
		reset := step[fetchedOffsets](t, steps, name, 0).Offsets
		require.Len(t, reset, 1)
		require.Len(t, reset[0].Partitions, 3)
		for _, p := range reset[0].Partitions {
			require.Equal(t, want, p.Offset, "%s: partition %d", name, p.Partition)
		}
	}

	set := step[struct {
		Offsets []struct {
			Partitions []struct {
				Partition int32
				Offset    string
			}
		}
	}](t, steps, "setOffsets", 0).Offsets
	require.Len(t, set, 1)
	for _, p := range set[0].Partitions {
		want := "-1"
		if p.Partition == 1 {
			want = "3"
		}
		require.Equal(t, want, p.Offset, "partition %d", p.Partition)
	}

	require.Equal(t, 4, step[struct{ Partitions int }](t, steps, "createPartitions", 0).Partitions)
	deleted := step[struct {
		Topics []string
		listedGroups
	}](t, steps, "deleted", 0)
	require.Contains(t, deleted.Topics, topic)
	require.NotContains(t, deleted.Topics, scratch)
	require.Len(t, deleted.Groups, 2, "the scratch group deleted, the others kept")
	for _, g := range deleted.Groups {
		require.NotEqual(t, group+"-scratch", g.GroupID)
	}

	// kgo reads back what kafkajs produced, the gzip batch as it came.
	records := kafkaConsume(t, []string{n.KafkaAddress()}, topic, total)
	gzip := 0
	for _, r := range records {
		require.Equal(t, "value-"+string(r.Headers[0].Value), string(r.Value))
		if r.Attrs.CompressionType() == 1 {
			gzip++
		}
	}
	require.Equal(t, perBatch, gzip, "the gzip batch stored as sent")

}
