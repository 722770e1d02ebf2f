package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/node"
)

// watchedWriter is a buffer that several goroutines write, and that tells
// when a line containing want was written.
type watchedWriter struct {
	want string
	seen chan struct{}

	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *watchedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := strings.Contains(w.buf.String(), w.want)
	n, err := w.buf.Write(p)
	if !had && strings.Contains(w.buf.String(), w.want) {
		close(w.seen)
	}
	return n, err
}

func (w *watchedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// deleteRecords deletes the records of a topic's partition 0 before offset,
// as retention would.
func deleteRecords(t *testing.T, n *node.Node, topic string, offset int64) {
	t.Helper()
	c, err := client.New(client.Brokers(n.Address()), client.Logger(quietLogger()))
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := c.Metadata(ctx, topic)
	require.NoError(t, err)
	p := md.Topics[0].Partitions[0]
	pid := actor.NewPID(p.LeaderAddress, p.ActorName)
	r, err := actors.Request[*messages.DeleteRecordsResponse](ctx, n.System().Root, pid, &messages.DeleteRecordsRequest{Topic: topic, Offset: offset}, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, messages.ErrorCode_NONE, r.Error, r.ErrorMessage)
	require.Equal(t, offset, r.LowWatermark)
}

// An --offset past the end moves as --reset says, one below the log start
// starts there, and each move is told in a line on stderr, never on stdout.
func TestConsumeOffsetOutOfRange(t *testing.T) {
	n := startTestNode(t)
	addr := n.Address()
	for _, topic := range []string{"past", "deleted"} {
		_, errOut, err := depot(t, "", "topic", "create", topic, b(addr))
		require.NoError(t, err, errOut)
		_, errOut, err = depot(t, numberedLines(0, 9), "produce", topic, b(addr))
		require.NoError(t, err, errOut)
	}
	deleteRecords(t, n, "deleted", 4)

	tests := []struct {
		name       string
		args       []string
		wantOut    string
		wantErrOut string
	}{
		{
			name:       "past the end, earliest",
			args:       []string{"past", "--offset", "99999999", "--reset", "earliest", "-n", "1"},
			wantOut:    "0 line-0\n",
			wantErrOut: "depot: reset past partition 0 from offset 99999999 to 0: past the end (10), --reset earliest\n",
		},
		{
			name:       "below the log start",
			args:       []string{"deleted", "--offset", "2", "-n", "1"},
			wantOut:    "4 line-4\n",
			wantErrOut: "depot: reset deleted partition 0 from offset 2 to 4: below the log start (4): the records before it were deleted\n",
		},
		{
			name:       "below the log start, none",
			args:       []string{"deleted", "--offset", "0", "--reset", "none", "-n", "1"},
			wantOut:    "4 line-4\n",
			wantErrOut: "depot: reset deleted partition 0 from offset 0 to 4: below the log start (4): the records before it were deleted\n",
		},
		{
			name:    "start is the log start",
			args:    []string{"deleted", "--offset", "start", "-n", "1"},
			wantOut: "4 line-4\n",
		},
		{
			name:    "in range",
			args:    []string{"past", "--offset", "9", "--reset", "none", "-n", "1"},
			wantOut: "9 line-9\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, err := depot(t, "", append([]string{"consume", "-f", "%o %v\\n", b(addr)}, tt.args...)...)
			require.NoError(t, err, errOut)
			require.Equal(t, tt.wantOut, out)
			require.Equal(t, tt.wantErrOut, errOut)
		})
	}

	t.Run("past the end, latest by default", func(t *testing.T) {
		stdout := &watchedWriter{seen: make(chan struct{})}
		stderr := &watchedWriter{want: "\n", seen: make(chan struct{})}
		done := make(chan error, 1)
		go func() {
			done <- depotIO(t, strings.NewReader(""), stdout, stderr, nil, "consume", "past", "--offset", "99999999", "-n", "1", "-f", "%o %v\\n", b(addr))
		}()
		select {
		case <-stderr.seen:
		case err := <-done:
			t.Fatalf("consume ended before telling of the reset: %v", err)
		}
		_, errOut, err := depot(t, "new\n", "produce", "past", b(addr))
		require.NoError(t, err, errOut)
		require.NoError(t, <-done)
		require.Equal(t, "10 new\n", stdout.String(), "only what came after the end")
		require.Equal(t, "depot: reset past partition 0 from offset 99999999 to 10: past the end (10), --reset latest\n", stderr.String())
	})

	t.Run("past the end, none", func(t *testing.T) {
		out, errOut, err := depot(t, "", "consume", "past", "--offset", "99999999", "--reset", "none", "-n", "1", b(addr))
		require.ErrorIs(t, err, client.ErrOffsetOutOfRange)
		require.False(t, node.IsUsage(err))
		require.Equal(t, "past-0: offset 99999999 outside [0, 11]", err.Error())
		require.Empty(t, out)
		require.Empty(t, errOut)
	})

	t.Run("-o json", func(t *testing.T) {
		out, errOut, err := depot(t, "", "consume", "deleted", "--offset", "1", "-n", "2", "-o", "json", b(addr))
		require.NoError(t, err, errOut)
		require.Equal(t, "depot: reset deleted partition 0 from offset 1 to 4: below the log start (4): the records before it were deleted\n", errOut)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		require.Len(t, lines, 2, out)
		for i, line := range lines {
			var r map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &r), line)
			require.Equal(t, "deleted", r["topic"])
			require.Equal(t, 0.0, r["partition"])
			require.Equal(t, float64(4+i), r["offset"])
			require.Nil(t, r["key"])
			require.Equal(t, "line-"+string(rune('4'+i)), r["value"])
			require.Positive(t, r["timestamp"])
		}
		_, _, err = depot(t, "", "consume", "deleted", "-o", "json", "-f", "%v", b(addr))
		require.True(t, node.IsUsage(err), "%v", err)
	})

	for _, args := range [][]string{
		{"consume", "past", "--reset", "smallest"},
		{"consume", "past", "-g", "g", "--reset", "none"},
	} {
		_, _, err := depot(t, "", append(args, b(addr))...)
		require.True(t, node.IsUsage(err), "%v: %v", args, err)
	}
}

// A partition that cannot be read is warned of at its first failure, then
// at most once an interval while it keeps failing; each partition on its
// own.
func TestFetchWarnerRepeatsAtMostEveryInterval(t *testing.T) {
	var out bytes.Buffer
	start := time.Unix(1000, 0)
	var now time.Time
	warn := fetchWarner(&out, 5*time.Second, func() time.Time { return now })
	offline := &client.Error{Code: messages.ErrorCode_KAFKA_STORAGE_ERROR, Message: "partition t-0 is offline: I/O error\nin /data"}
	for _, f := range []struct {
		at        time.Duration
		partition int32
		offset    int64
	}{{0, 0, -1}, {time.Second, 1, 7}, {2 * time.Second, 0, -1}, {4900 * time.Millisecond, 0, 3}, {5 * time.Second, 0, 3}, {5100 * time.Millisecond, 0, 3}, {12 * time.Second, 0, 3}} {
		now = start.Add(f.at)
		warn(client.FetchError{Topic: "t", Partition: f.partition, Offset: f.offset, Err: offline})
	}
	require.Equal(t, ""+
		"depot: warning: cannot read t partition 0, retrying: partition t-0 is offline: I/O error; in /data\n"+
		"depot: warning: cannot read t partition 1 at offset 7, retrying: partition t-0 is offline: I/O error; in /data\n"+
		"depot: warning: cannot read t partition 0 at offset 3, retrying: partition t-0 is offline: I/O error; in /data\n"+
		"depot: warning: cannot read t partition 0 at offset 3, retrying: partition t-0 is offline: I/O error; in /data\n",
		out.String())
}

// consume of a partition that is offline warns on stderr, in one line
// naming the partition and the broker's error, instead of waiting in
// silence; it goes on until interrupted.
func TestConsumeWarnsOfAnOfflinePartition(t *testing.T) {
	fsys := disk.NewErrorFS(disk.NewMemFS())
	n, err := node.Start(node.Config{DataDir: "/data", FS: fsys, Listen: "127.0.0.1:0", Logger: actortest.Logger(t, logrus.FatalLevel)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Stop() })
	addr := n.Address()
	_, errOut, err := depot(t, "", "topic", "create", "t", b(addr))
	require.NoError(t, err, errOut)
	_, errOut, err = depot(t, numberedLines(0, 3), "produce", "t", b(addr))
	require.NoError(t, err, errOut)

	// An I/O error in the partition's next append takes its dir offline.
	fsys.InjectWritesOnly(true)
	fsys.InjectSticky(true)
	fsys.InjectAt(1)
	_, _, err = depot(t, "lost\n", "produce", "t", "--delivery-timeout", "1s", b(addr))
	require.Error(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.Eventually(t, func() bool {
		r, err := actors.Request[*messages.DescribeLogDirsResponse](ctx, n.System().Root, n.Placement(), &messages.DescribeLogDirsRequest{}, time.Second)
		return err == nil && slices.ContainsFunc(r.Dirs, func(d *messages.LogDirInfo) bool { return d.State == "offline" })
	}, 10*time.Second, 20*time.Millisecond)
	fsys.InjectAt(0) // the file system is sound again; the dir stays offline

	stdout := &watchedWriter{seen: make(chan struct{})}
	stderr := &watchedWriter{want: "\n", seen: make(chan struct{})}
	interrupts := make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() {
		done <- depotIO(t, strings.NewReader(""), stdout, stderr, interrupts, "consume", "t", b(addr))
	}()
	select {
	case <-stderr.seen:
	case err := <-done:
		t.Fatalf("consume ended before warning: %v", err)
	case <-ctx.Done():
		t.Fatal("consume waited in silence")
	}
	interrupts <- os.Interrupt
	require.NoError(t, <-done)
	require.Empty(t, stdout.String())
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	require.Len(t, lines, 1, "one warning a partition in %v", fetchWarnEvery)
	require.Regexp(t, `^depot: warning: cannot read t partition 0, retrying: partition t-0 is offline: .*injected`, lines[0])
}
