package node

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/client"
)

// The test binary doubles as `depot node` when DEPOT_TEST_NODE is set, so
// that tests can run nodes as processes and kill them.
func TestMain(m *testing.M) {
	if os.Getenv("DEPOT_TEST_NODE") == "1" {
		cmd := NewCommand(os.Stderr)
		cmd.SetArgs(os.Args[1:])
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		if err := cmd.Execute(); err != nil {
			fmt.Fprintf(os.Stderr, "depot: %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// clearSettingsEnv unsets, for the test, every DEPOT_* variable that `depot
// node` reads.
func clearSettingsEnv(t *testing.T) {
	t.Helper()
	NewCommand(io.Discard).Flags().VisitAll(func(f *pflag.Flag) {
		env := "DEPOT_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		t.Setenv(env, "")
		require.NoError(t, os.Unsetenv(env))
	})
}

// parseCommandFlags parses args as `depot node` does and returns the Config
// they make.
func parseCommandFlags(t *testing.T, args ...string) (Config, error) {
	t.Helper()
	flags := pflag.NewFlagSet("node", pflag.ContinueOnError)
	f := newCommandFlags(flags)
	require.NoError(t, flags.Parse(args))
	return f.config()
}

// Every flag of `depot node` defaults to DefaultConfig's setting, so that a
// command line giving none makes DefaultConfig exactly.
func TestCommandFlagDefaultsAreConfigDefaults(t *testing.T) {
	clearSettingsEnv(t)
	cfg, err := parseCommandFlags(t)
	require.NoError(t, err)
	require.Equal(t, DefaultConfig(), cfg)

	// The command's flags are the ones parsed above, defaults and all.
	direct := pflag.NewFlagSet("node", pflag.ContinueOnError)
	newCommandFlags(direct)
	defaults := func(flags *pflag.FlagSet) map[string]string {
		m := map[string]string{}
		flags.VisitAll(func(f *pflag.Flag) { m[f.Name] = f.DefValue })
		return m
	}
	require.Equal(t, defaults(direct), defaults(NewCommand(io.Discard).Flags()))
}

func TestCommandFlagsSetConfig(t *testing.T) {
	clearSettingsEnv(t)
	for _, tc := range []struct {
		args []string
		want func(*Config)
	}{
		{[]string{"--node-id", "7"}, func(c *Config) { c.NodeID = 7 }},
		{[]string{"--data-dir", "/srv/depot"}, func(c *Config) { c.DataDir = "/srv/depot" }},
		{[]string{"--log-dirs", "/mnt/a=100GiB,/mnt/b"}, func(c *Config) { c.LogDirs = []LogDir{{Path: "/mnt/a", Capacity: 100 << 30}, {Path: "/mnt/b"}} }},
		{[]string{"--listen", "0.0.0.0:9092"}, func(c *Config) { c.Listen = "0.0.0.0:9092" }},
		{[]string{"--http", ""}, func(c *Config) { c.HTTP = "" }},
		{[]string{"--kafka-listen", ""}, func(c *Config) { c.KafkaListen = "" }},
		{[]string{"--kafka-listen", "127.0.0.1:19092", "--kafka-advertised", "kafka-1.example:9092"}, func(c *Config) {
			c.KafkaListen, c.KafkaAdvertised = "127.0.0.1:19092", "kafka-1.example:9092"
		}},
		{[]string{"--log-level", "debug"}, func(c *Config) { c.LogLevel = "debug" }},
		{[]string{"--placement-policy", "count"}, func(c *Config) { c.Policy = "count" }},
		{[]string{"--balance-interval", "-1s"}, func(c *Config) { c.Balance.Interval = -time.Second }},
		{[]string{"--balance-max-deviation", "0.2"}, func(c *Config) { c.Balance.MaxDeviation = 0.2 }},
		{[]string{"--balance-high-water", "0.9"}, func(c *Config) { c.Balance.HighWater = 0.9 }},
		{[]string{"--move-throttle", "1GiB"}, func(c *Config) { c.Balance.ThrottleBytesPerS = 1 << 30 }},
		{[]string{"--move-throttle", "0"}, func(c *Config) { c.Balance.ThrottleBytesPerS = -1 }},
		{[]string{"--metadata-snapshot-every", "50"}, func(c *Config) { c.Quorum.SnapshotEvery = 50 }},
		{[]string{"--max-open-files", "500"}, func(c *Config) { c.MaxOpenFiles = 500 }},
		{[]string{"--syncfs-partitions", "64"}, func(c *Config) { c.SyncfsPartitions = 64 }},
		{[]string{"--syncfs-partitions", "0"}, func(c *Config) { c.SyncfsPartitions = -1 }},
		{[]string{"--replica-fetch-linger", "2ms"}, func(c *Config) { c.ReplicaFetchLinger = 2 * time.Millisecond }},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			want := DefaultConfig()
			tc.want(&want)
			cfg, err := parseCommandFlags(t, tc.args...)
			require.NoError(t, err)
			require.Equal(t, want, cfg)
		})
	}
	for _, args := range [][]string{{"--log-dirs", "/tmp/a=lots"}, {"--move-throttle", "lots"}, {"--config", "/nonexistent"}} {
		_, err := parseCommandFlags(t, args...)
		require.Error(t, err)
		require.True(t, IsUsage(err), "%v: %v", args, err)
	}
}

func TestNodeSettingsFromEnvAndFile(t *testing.T) {
	dir := t.TempDir()
	config := dir + "/depot.yaml"
	require.NoError(t, os.WriteFile(config, []byte("log-level: warn\nlog-dirs:\n  - "+dir+"/a\n  - "+dir+"/b\nhttp: \"\"\n"), 0o644))
	t.Setenv("DEPOT_DATA_DIR", dir+"/data")
	t.Setenv("DEPOT_LISTEN", "127.0.0.1:0")

	// A bad key in the file is refused before anything starts.
	bad := dir + "/bad.yaml"
	require.NoError(t, os.WriteFile(bad, []byte("data-dri: x\n"), 0o644))
	cmd := NewCommand(io.Discard)
	cmd.SetArgs([]string{"--config", bad})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	require.True(t, IsUsage(err), "%v", err)
	require.ErrorContains(t, err, `unknown setting "data-dri"`)

	// A good file and env: the node starts with them; a SIGTERM stops it.
	proc := exec.Command(os.Args[0], "--config", config)
	proc.Env = append(os.Environ(), "DEPOT_TEST_NODE=1")
	var stderr bytes.Buffer
	proc.Stderr = &stderr
	require.NoError(t, proc.Start())
	require.Eventually(t, func() bool {
		_, errA := os.Stat(dir + "/a")
		_, errB := os.Stat(dir + "/data/meta")
		return errA == nil && errB == nil
	}, 20*time.Second, 20*time.Millisecond)
	require.NoError(t, proc.Process.Signal(syscall.SIGTERM))
	require.NoError(t, proc.Wait(), stderr.String())
	_, err = os.Stat(dir + "/b")
	require.NoError(t, err)
}

// unusedAddress is a loopback address where nothing listens.
func unusedAddress(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// nodeProcess is a depot node run as a child process.
type nodeProcess struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// contains reports whether what was written holds text.
func (l *lockedBuffer) contains(text string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Contains(l.b.Bytes(), []byte(text))
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startNodeProcess(t testing.TB, dataDir, listen string, flags ...string) *nodeProcess {
	t.Helper()
	args := append([]string{"--data-dir", dataDir, "--listen", listen, "--http", "", "--kafka-listen", "", "--log-level", "warn"}, flags...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "DEPOT_TEST_NODE=1")
	p := &nodeProcess{cmd: cmd, stderr: &lockedBuffer{}}
	cmd.Stderr = p.stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return p
}

func (p *nodeProcess) kill(t testing.TB) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	_ = p.cmd.Wait()
}

// waitReady polls the node's metadata until it answers.
func waitReady(t testing.TB, c *client.Client, p *nodeProcess) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.Metadata(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node not ready: %v\n%s", err, p.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
