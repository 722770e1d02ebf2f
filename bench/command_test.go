package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/node"
)

// runCommand executes `depot bench args...` in an empty environment (so a
// DEPOT_BROKERS of the shell running the tests is not used) and returns
// stdout and stderr.
func runCommand(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	return runCommandEnv(t, nil, args...)
}

// runCommandEnv is runCommand with the environment env.
func runCommandEnv(t *testing.T, env map[string]string, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := newCommand(&stdout, &stderr, func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	})
	cmd.SetArgs(args)
	err := cmd.Execute()
	return stdout.String(), stderr.String(), err
}

// jsonRows parses one JSON object per line of out, keyed by workload.
func jsonRows(t *testing.T, out string) map[string]map[string]any {
	t.Helper()
	rows := map[string]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var row map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &row), sc.Text())
		name, ok := row["workload"].(string)
		require.True(t, ok, "row without workload: %s", sc.Text())
		require.NotContains(t, rows, name, "workload %s twice", name)
		rows[name] = row
	}
	require.NoError(t, sc.Err())
	return rows
}

func TestBenchBothJSON(t *testing.T) {
	dir := t.TempDir()
	stdout, stderr, err := runCommand(t, "--records", "3000", "--record-size", "512", "--partitions", "2",
		"--producers", "2", "--consumers", "2", "--keys", "10", "--dir", dir, "-o", "json")
	require.NoError(t, err, stderr)
	rows := jsonRows(t, stdout)
	require.Len(t, rows, 3)

	positive := []string{"record_size", "records", "records_per_s", "mb_per_s", "p50_ms", "p99_ms", "p999_ms", "max_ms",
		"partitions", "producers", "consumers", "acks", "seconds", "peak_rss_bytes"}
	for _, name := range []string{RowProduce, RowEndToEnd, RowConsume} {
		t.Run(name, func(t *testing.T) {
			row, ok := rows[name]
			require.True(t, ok, "no %s row in %s", name, stdout)
			for _, field := range positive {
				v, ok := row[field].(float64)
				require.True(t, ok, "%s: field %s missing or not a number", name, field)
				require.Positive(t, v, "%s: %s", name, field)
			}
			require.Equal(t, "none", row["compression"])
			require.Equal(t, 512.0, row["record_size"])
			require.Equal(t, 3000.0, row["records"], "every record is acknowledged and read once")
			require.Equal(t, 0.0, row["errors"])
			require.NotContains(t, row, "ratio_to_baseline")
		})
	}
	for _, name := range []string{RowProduce, RowConsume} {
		cores, ok := rows[name]["cpu_cores"].(float64)
		require.True(t, ok, "%s: cpu_cores missing", name)
		require.Positive(t, cores, name)
		require.LessOrEqual(t, cores, float64(runtime.NumCPU())*1.1, "%s: at most every core, give or take the clocks' grain", name)
	}
	require.NotContains(t, rows[RowEndToEnd], "cpu_cores", "the end-to-end row overlaps the produce row")
	require.Positive(t, rows[RowProduce]["peak_buffered_bytes"])
	require.Positive(t, rows[RowProduce]["requests"])
	require.GreaterOrEqual(t, rows[RowProduce]["batches"], rows[RowProduce]["requests"], "a request carries one batch or more")
	require.Equal(t, float64(client.DefaultMaxBufferedBytes+2*client.DefaultBufferedBytesPerPartition), rows[RowProduce]["buffer_bound_bytes"],
		"the client's default for the two partitions written to")
	require.Equal(t, "end-to-end", rows[RowEndToEnd]["latency"])
	// The embedded node's data is gone.
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
	require.Empty(t, stderr, "no progress bar off a terminal")
}

func TestBenchPlot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bench.png")
	stdout, stderr, err := runCommand(t, "--records", "2000", "--acks", "all", "--dir", t.TempDir(), "--plot", path)
	require.NoError(t, err, stderr)
	require.Contains(t, stdout, "end-to-end")
	require.Regexp(t, `batches: \d+ in \d+ requests, [\d.]+ records a batch, [\d.]+ batches a request; CPU [\d.]+ us a batch`, stdout)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")), "not a PNG")
	require.Greater(t, len(b), 10_000)
}

func TestBenchBaseline(t *testing.T) {
	stdout, stderr, err := runCommand(t, "--records", "1000", "--workload", "consume", "--baseline",
		"--baseline-duration", "200ms", "--dir", t.TempDir(), "-o", "json")
	require.NoError(t, err, stderr)
	rows := jsonRows(t, stdout)
	for _, name := range []string{RowFileWrite, RowFileWriteFsync, RowFileRead, RowGroupCommit, RowPacedWrite, RowLoopback} {
		require.Positive(t, rows[name]["mb_per_s"], name)
		require.Positive(t, rows[name]["bytes"], name)
	}
	for _, field := range []string{"p50_ms", "p99_ms", "max_ms"} {
		require.Positive(t, rows[RowPacedWrite][field], field)
		require.NotContains(t, rows[RowFileWrite], field, "only the paced write times its writes")
	}
	require.NotContains(t, rows, RowEndToEnd)
	for _, name := range []string{RowProduce, RowConsume} {
		require.Positive(t, rows[name]["ratio_to_baseline"], name)
		require.Positive(t, rows[name]["ratio_to_loopback"], name)
	}
	require.Equal(t, RowFileWrite, rows[RowProduce]["baseline_row"], "acks=1 is compared with the file write")
	require.Equal(t, RowFileRead, rows[RowConsume]["baseline_row"])
	require.InDelta(t, rows[RowProduce]["mb_per_s"].(float64)/rows[RowFileWrite]["mb_per_s"].(float64), rows[RowProduce]["ratio_to_baseline"], 1e-9)
}

// startTestNode starts a node for the command to benchmark and a client to
// look at it.
func startTestNode(t *testing.T) (*node.Node, *client.Client) {
	t.Helper()
	logger := logrus.New()
	logger.SetLevel(logrus.WarnLevel)
	n, err := node.Start(node.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "", Logger: logger})
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Stop() })
	c, err := client.New(client.Brokers(n.Address()), client.Logger(logrus.NewEntry(logger)))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return n, c
}

// topicRecords is the number of records topic holds across partitions.
func topicRecords(t *testing.T, c *client.Client, topic string, partitions int32) int64 {
	t.Helper()
	total := int64(0)
	for p := range partitions {
		end, err := c.ListOffset(t.Context(), topic, p, client.LatestOffset)
		require.NoError(t, err)
		total += end
	}
	return total
}

func TestBenchAgainstBrokers(t *testing.T) {
	n, c := startTestNode(t)
	tests := []struct {
		name    string
		keep    bool
		exists  bool
		fromEnv bool // the address in DEPOT_BROKERS, not in --brokers
	}{
		{"topic deleted at the end", false, false, false},
		{"topic kept with --keep", true, true, false},
		{"brokers from DEPOT_BROKERS", true, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topic := "bench-" + strings.ReplaceAll(tt.name, " ", "-")
			topic = strings.ReplaceAll(topic, "--", "")
			args := []string{"--topic", topic, "--records", "1500", "--partitions", "3", "--workload", "produce", "-o", "json"}
			env := map[string]string{EnvBrokers: n.Address()}
			if !tt.fromEnv {
				args = append(args, "--brokers", n.Address())
				env = nil
			}
			if tt.keep {
				args = append(args, "--keep")
			}
			stdout, stderr, err := runCommandEnv(t, env, args...)
			require.NoError(t, err, stderr)
			rows := jsonRows(t, stdout)
			require.Equal(t, 1500.0, rows[RowProduce]["records"])
			require.Equal(t, 3.0, rows[RowProduce]["partitions"])

			md, err := c.Metadata(t.Context(), topic)
			require.NoError(t, err)
			require.Len(t, md.Topics, 1)
			if !tt.exists {
				require.Equal(t, messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, md.Topics[0].Error)
				return
			}
			require.Equal(t, messages.ErrorCode_NONE, md.Topics[0].Error)
			require.Equal(t, int64(1500), topicRecords(t, c, topic, 3))
		})
	}
}

// NewCommand reads DEPOT_BROKERS from the process's environment, as the
// other depot commands do, and --brokers wins over it.
func TestBenchReadsDepotBrokers(t *testing.T) {
	n, c := startTestNode(t)
	t.Setenv(EnvBrokers, n.Address())
	var stdout, stderr bytes.Buffer
	cmd := NewCommand(&stdout, &stderr)
	cmd.SetArgs([]string{"--topic", "bench-env", "--keep", "--records", "700", "--workload", "produce"})
	require.NoError(t, cmd.Execute(), stderr.String())
	require.Contains(t, stdout.String(), "depot bench: brokers ["+n.Address()+"]")
	require.Equal(t, int64(700), topicRecords(t, c, "bench-env", 1))

	t.Setenv(EnvBrokers, unusedAddress(t))
	stdout.Reset()
	cmd = NewCommand(&stdout, &stderr)
	cmd.SetArgs([]string{"--brokers", n.Address(), "--topic", "bench-env", "--keep", "--records", "300", "--workload", "produce"})
	require.NoError(t, cmd.Execute(), stderr.String())
	require.Equal(t, int64(1000), topicRecords(t, c, "bench-env", 1))
}

// unusedAddress is a 127.0.0.1 address nothing listens on.
func unusedAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// With neither --brokers nor DEPOT_BROKERS, or with --embedded, the run
// is on an embedded node; --embedded with either of the others is refused
// before anything starts.
func TestBenchEmbedded(t *testing.T) {
	for _, args := range [][]string{{}, {"--embedded"}} {
		t.Run(strings.Join(append([]string{"bench"}, args...), " "), func(t *testing.T) {
			stdout, stderr, err := runCommand(t, append(args, "--records", "300", "--workload", "produce", "--dir", t.TempDir())...)
			require.NoError(t, err, stderr)
			require.Contains(t, stdout, "depot bench: embedded node,")
		})
	}
	refused := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"--embedded and --brokers", nil, []string{"--embedded", "--brokers", "127.0.0.1:1"}, "--embedded and --brokers"},
		{"--embedded and DEPOT_BROKERS", map[string]string{EnvBrokers: "127.0.0.1:1"}, []string{"--embedded"}, "DEPOT_BROKERS=\"127.0.0.1:1\""},
		{"empty --brokers", nil, []string{"--brokers", " , "}, "--brokers \" , \" names no address"},
		{"empty DEPOT_BROKERS", map[string]string{EnvBrokers: ""}, nil, "DEPOT_BROKERS \"\" names no address"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			_, _, err := runCommandEnv(t, tt.env, append(tt.args, "--records", "300")...)
			require.ErrorIs(t, err, ErrConfig)
			require.ErrorContains(t, err, tt.want)
			require.Less(t, time.Since(start), time.Second, "refused before a node or a client starts")
		})
	}
}

func TestRunInterruptedReportsWhatRan(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	rep, err := Run(ctx, Config{Records: 1_000_000, Rate: 2000, Dir: t.TempDir()})
	require.NoError(t, err)
	require.Less(t, time.Since(start), 15*time.Second, "stops well before 1,000,000 records at 2000/s")
	require.True(t, rep.Interrupted)
	require.NotEmpty(t, rep.Results)
	produce := rep.Results[0]
	require.Equal(t, RowProduce, produce.Workload)
	require.Positive(t, produce.Records)
	require.Less(t, produce.Records, int64(1_000_000))
	for _, r := range rep.Results {
		require.NotEqual(t, RowConsume, r.Workload, "no catch-up read after an interrupt")
	}
	var out bytes.Buffer
	require.NoError(t, rep.WriteText(&out))
	require.Contains(t, out.String(), "interrupted")
}

func TestRunRateBoundsThroughput(t *testing.T) {
	// 2000 records at 4000/s take at least half a second; unthrottled they
	// take a few milliseconds. Only the lower bound is asserted.
	rep, err := Run(t.Context(), Config{Records: 2000, Rate: 4000, Producers: 2, Workload: WorkloadProduce, Dir: t.TempDir()})
	require.NoError(t, err)
	require.Len(t, rep.Results, 1)
	require.Equal(t, int64(2000), rep.Results[0].Records)
	require.GreaterOrEqual(t, rep.Results[0].Seconds, 0.4)
}

func TestBenchRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--acks", "2"},
		{"--compression", "brotli"},
		{"--workload", "read"},
		{"-o", "yaml"},
		{"--record-size", "4"},
		{"--buffer-bytes", "-1"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			_, _, err := runCommand(t, args...)
			require.ErrorIs(t, err, ErrConfig)
		})
	}
}

// --duration without --records runs for the duration, with no record
// bound; with both, whichever ends first; either given as 0 is refused.
func TestBenchDurationAlone(t *testing.T) {
	stdout, stderr, err := runCommand(t, "--duration", "700ms", "--rate", "5000", "--workload", "produce", "--dir", t.TempDir(), "-o", "json")
	require.NoError(t, err, stderr)
	row := jsonRows(t, stdout)[RowProduce]
	require.GreaterOrEqual(t, row["seconds"].(float64), 0.6, "ended by time")
	require.Positive(t, row["records"].(float64))

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"duration alone", []string{"--duration", "300ms"}, "for 300ms (no record bound)"},
		{"records alone", []string{"--records", "200"}, "200 records or 1m0s, whichever first"},
		{"both", []string{"--records", "200", "--duration", "5s"}, "200 records or 5s, whichever first"},
		{"neither", nil, "1000000 records or 1m0s, whichever first"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append(tt.args, "--rate", "2000", "--workload", "produce", "--dir", t.TempDir())
			if tt.args == nil {
				// The default run, cut short: only its heading is looked at.
				ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
				defer cancel()
				var stdout, stderr bytes.Buffer
				cmd := newCommand(&stdout, &stderr, func(string) (string, bool) { return "", false })
				cmd.SetArgs(args)
				require.NoError(t, cmd.ExecuteContext(ctx), stderr.String())
				require.Contains(t, stdout.String(), tt.want)
				return
			}
			stdout, stderr, err := runCommand(t, args...)
			require.NoError(t, err, stderr)
			require.Contains(t, stdout, tt.want)
		})
	}
	for _, args := range [][]string{{"--records", "0"}, {"--duration", "0s"}, {"--records", "0", "--duration", "1s"}} {
		_, _, err := runCommand(t, args...)
		require.ErrorIs(t, err, ErrConfig, args)
	}
}

// --acks takes the four spellings of Kafka's producers, -1 included (not
// taken for a flag), and reports all for -1.
func TestBenchAcksSpellings(t *testing.T) {
	tests := []struct {
		acks     string
		wantJSON float64
		wantText string
	}{
		{"0", 0, "acks=0"},
		{"1", 1, "acks=1"},
		{"-1", -1, "acks=all"},
		{"all", -1, "acks=all"},
	}
	for _, tt := range tests {
		t.Run(tt.acks, func(t *testing.T) {
			stdout, stderr, err := runCommand(t, "--acks", tt.acks, "--records", "300", "--workload", "produce", "--dir", t.TempDir(), "-o", "json")
			require.NoError(t, err, stderr)
			require.Equal(t, tt.wantJSON, jsonRows(t, stdout)[RowProduce]["acks"])

			stdout, stderr, err = runCommand(t, "--acks="+tt.acks, "--records", "300", "--workload", "produce", "--dir", t.TempDir())
			require.NoError(t, err, stderr)
			require.Contains(t, stdout, tt.wantText+",")
		})
	}
	_, _, err := runCommand(t, "--acks", "2")
	require.ErrorIs(t, err, ErrConfig)
	require.EqualError(t, err, `bench: invalid config: acks "2": want 0, 1, -1 or all (all is -1)`)
}

// --buffer-bytes bounds each producer's unacknowledged bytes, and the JSON
// reports the bound and a peak within it.
func TestBenchBufferBytes(t *testing.T) {
	stdout, stderr, err := runCommand(t, "--records", "3000", "--workload", "produce", "--buffer-bytes", "262144", "--batch-bytes", "65536", "-o", "json")
	require.NoError(t, err, stderr)
	rows := jsonRows(t, stdout)
	require.Equal(t, 262144.0, rows[RowProduce]["buffer_bound_bytes"])
	require.Positive(t, rows[RowProduce]["peak_buffered_bytes"])
	require.LessOrEqual(t, rows[RowProduce]["peak_buffered_bytes"], 262144.0)
	require.Equal(t, 3000.0, rows[RowProduce]["records"])
}

func TestBenchUnderRootWithPersistentFlags(t *testing.T) {
	// The depot root command has persistent --brokers and -o/--output; the
	// bench command's own flags of those names take precedence.
	var stdout, stderr bytes.Buffer
	root := &cobra.Command{Use: "depot", SilenceUsage: true, SilenceErrors: true}
	root.PersistentFlags().String("brokers", "127.0.0.1:1", "")
	root.PersistentFlags().StringP("output", "o", "text", "")
	root.AddCommand(NewCommand(&stdout, &stderr))
	root.SetArgs([]string{"bench", "--records", "500", "--workload", "produce", "--dir", t.TempDir(), "-o", "json"})
	require.NoError(t, root.Execute(), stderr.String())
	rows := jsonRows(t, stdout.String())
	require.Equal(t, 500.0, rows[RowProduce]["records"])
}

// A warm-up leaves its records out of the produce row: what was produced
// during it and what was counted after it add up to every record.
func TestBenchWarmupLeavesRecordsOut(t *testing.T) {
	stdout, stderr, err := runCommand(t, "--records", "3000", "--rate", "10000", "--warmup", "100ms",
		"--workload", "produce", "--dir", t.TempDir(), "-o", "json")
	require.NoError(t, err, stderr)
	row := jsonRows(t, stdout)[RowProduce]
	require.NotNil(t, row, stdout)
	warm, ok := row["warmup_records"].(float64)
	require.True(t, ok, "warmup_records missing: %s", stdout)
	counted := row["records"].(float64)
	require.Positive(t, warm)
	require.Positive(t, counted)
	require.Equal(t, 3000.0, warm+counted)
	// The rate is measured after the warm-up: at most 10k records/s (only
	// the bound the pacing guarantees is asserted).
	require.GreaterOrEqual(t, row["seconds"].(float64), 0.8*counted/10000)

	_, _, err = runCommand(t, "--warmup", "-1s")
	require.ErrorIs(t, err, ErrConfig)
}

// With acks=0 a record is done when handed to the stream, before it reaches
// its partition; the reads still find every record produced, rather than
// stop at the end offsets of the moment production ended.
func TestBenchAcksZeroReadsEverything(t *testing.T) {
	stdout, stderr, err := runCommand(t, "--records", "300000", "--acks", "0", "--partitions", "2", "-o", "json")
	require.NoError(t, err, stderr)
	rows := jsonRows(t, stdout)
	require.Equal(t, float64(300000), rows[RowProduce]["records"])
	require.Equal(t, float64(300000), rows[RowEndToEnd]["records"], "tailing consumers")
	require.Equal(t, float64(300000), rows[RowConsume]["records"], "the read from the start")
}
