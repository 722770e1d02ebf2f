package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/node"
)

// --acks takes the spellings of Kafka's producers, as depot bench does, and
// the summary names the level as Kafka's tools do.
func TestProduceAcksSpellings(t *testing.T) {
	n := startTestNode(t)
	b := "--brokers=" + n.Address()
	_, errOut, err := depot(t, "", "topic", "create", "acks", b)
	require.NoError(t, err, errOut)
	tests := []struct {
		acks string
		want string
	}{
		{"0", "acks=0"},
		{"1", "acks=1"},
		{"-1", "acks=all"},
		{"all", "acks=all"},
		{"ALL", "acks=all"},
	}
	for _, tt := range tests {
		t.Run(tt.acks, func(t *testing.T) {
			_, errOut, err := depot(t, "a\nb\n", "produce", "acks", "--acks", tt.acks, b)
			require.NoError(t, err, errOut)
			require.Contains(t, errOut, "produced 2 records")
			require.Contains(t, errOut, tt.want+"\n")
		})
	}
	_, errOut, err = depot(t, "a\n", "produce", "acks", b)
	require.NoError(t, err, errOut)
	require.Contains(t, errOut, "acks=all\n", "all by default")
	for _, bad := range []string{"2", "none", ""} {
		_, _, err := depot(t, "a\n", "produce", "acks", "--acks", bad, b)
		require.True(t, node.IsUsage(err), "--acks %q: %v", bad, err)
		require.EqualError(t, err, fmt.Sprintf("--acks %s: want 0, 1, -1 or all", bad))
	}
}

// -p is a partition count on topic create, so produce and consume name
// their partitions with --partition; their older spellings, -p on both and
// --partitions on consume, are still taken but no longer shown.
func TestPartitionFlagSpellings(t *testing.T) {
	n := startTestNode(t)
	b := "--brokers=" + n.Address()
	_, errOut, err := depot(t, "", "topic", "create", "spelled", "-p", "3", b)
	require.NoError(t, err, errOut)
	_, errOut, err = depot(t, "one\n", "produce", "spelled", "--partition", "1", b)
	require.NoError(t, err, errOut)
	_, errOut, err = depot(t, "two\n", "produce", "spelled", "-p", "2", b)
	require.NoError(t, err, errOut)
	_, _, err = depot(t, "x\n", "produce", "spelled", "--partition", "1", "-p", "2", b)
	require.True(t, node.IsUsage(err), "%v", err)

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"--partition", []string{"--partition", "1", "-n", "1"}, "1 one\n"},
		{"-p", []string{"-p", "2", "-n", "1"}, "2 two\n"},
		{"--partitions", []string{"--partitions", "2", "-n", "1"}, "2 two\n"},
		{"a list", []string{"--partition", "2,1", "-n", "2"}, "1 one\n2 two\n"},
		{"repeated", []string{"--partition", "2", "--partition", "1", "-n", "2"}, "1 one\n2 two\n"},
		{"both spellings", []string{"--partition", "1", "-p", "2", "-n", "2"}, "1 one\n2 two\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"consume", "spelled", "-f", "%p %v\\n", b}, tt.args...)
			out, errOut, err := depot(t, "", args...)
			require.NoError(t, err, errOut)
			lines := strings.SplitAfter(out, "\n")
			sort.Strings(lines)
			require.Equal(t, tt.want, strings.Join(lines, ""))
		})
	}
	_, _, err = depot(t, "", "consume", "spelled", "--partition", "3", b)
	require.EqualError(t, err, "--partition 3: topic spelled has partitions 0 to 2")

	for _, command := range []string{"produce", "consume"} {
		help, _, err := depot(t, "", command, "--help")
		require.NoError(t, err)
		require.Contains(t, help, "--partition ")
		require.NotContains(t, help, "--partitions")
		require.NotContains(t, help, "-p,")
		require.NotContains(t, help, "--p ")
	}
	help, _, err := depot(t, "", "topic", "create", "--help")
	require.NoError(t, err)
	require.Contains(t, help, "-p, --partitions")
}

// stagedInput is standard input given in stages: each stage's before runs
// when the command first reads past the stage before it, then its text is
// read. After the last stage it reads EOF, or, with block set, waits until
// the test ends.
type stagedInput struct {
	t      *testing.T
	stages []inputStage
	block  bool
	next   int
	rest   []byte
}

type inputStage struct {
	before func() error
	text   string
}

func (in *stagedInput) Read(p []byte) (int, error) {
	if len(in.rest) == 0 {
		if in.next == len(in.stages) {
			if in.block {
				<-in.t.Context().Done()
			}
			return 0, io.EOF
		}
		s := in.stages[in.next]
		in.next++
		if s.before != nil {
			if err := s.before(); err != nil {
				return 0, err
			}
		}
		in.rest = []byte(s.text)
	}
	n := copy(p, in.rest)
	in.rest = in.rest[n:]
	return n, nil
}

// numberedLines is lines from to to, each its own line number.
func numberedLines(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "line-%d\n", i)
	}
	return b.String()
}

// awaitLogEnd waits until partition 0 of topic, on the node at addr, ends
// at offset end: nothing but the node itself sees the records arrive.
func awaitLogEnd(addr, topic string, end int64) error {
	c, err := client.New(client.Brokers(addr), client.Logger(quietLogger()))
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		got, err := c.ListOffset(ctx, topic, 0, client.LatestOffset)
		if err == nil && got == end {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("log end of %s-0: %d, want %d (%v)", topic, got, end, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func quietLogger() *logrus.Entry {
	l := logrus.New()
	l.SetLevel(logrus.ErrorLevel)
	return logrus.NewEntry(l)
}

// When the node goes away, produce gives up after --delivery-timeout, and
// says how many records were acknowledged and which input lines were not.
func TestProduceReportsWhatWasNotAcknowledged(t *testing.T) {
	n := startTestNode(t)
	addr := n.Address()
	_, errOut, err := depot(t, "", "topic", "create", "lines", b(addr))
	require.NoError(t, err, errOut)
	in := &stagedInput{t: t, stages: []inputStage{
		{text: numberedLines(1, 300)},
		{before: func() error {
			if err := awaitLogEnd(addr, "lines", 300); err != nil {
				return err
			}
			return n.Stop()
		}, text: numberedLines(301, 1000)},
	}}
	start := time.Now()
	_, errOut, err = depotWith(t, in, nil, "produce", "lines", "--acks", "1", "--delivery-timeout", "2s", b(addr))
	require.Less(t, time.Since(start), 10*time.Second, "given up at the delivery timeout")
	require.Error(t, err)
	require.False(t, node.IsUsage(err))
	require.ErrorIs(t, err, client.ErrDeliveryTimeout)
	require.Contains(t, err.Error(), "produce to lines: 300 records acknowledged, 700 not acknowledged (first line 301, last line 1000): delivery timeout")
	require.Empty(t, errOut, "the error says it all, on one line")
}

// Interrupted, produce stops reading, waits for what it has read to be
// acknowledged, and says how far it got; interrupted again, it gives up on
// the records not acknowledged.
func TestProduceInterrupted(t *testing.T) {
	n := startTestNode(t)
	addr := n.Address()
	_, errOut, err := depot(t, "", "topic", "create", "lines", b(addr))
	require.NoError(t, err, errOut)

	t.Run("once", func(t *testing.T) {
		interrupts := make(chan os.Signal, 1)
		in := &stagedInput{t: t, block: true, stages: []inputStage{
			{text: numberedLines(1, 200)},
			{before: func() error {
				if err := awaitLogEnd(addr, "lines", 200); err != nil {
					return err
				}
				interrupts <- os.Interrupt
				return nil
			}},
		}}
		_, _, err := depotWith(t, in, interrupts, "produce", "lines", "--acks", "1", b(addr))
		require.ErrorIs(t, err, node.ErrInterrupted)
		require.EqualError(t, err, "produce to lines interrupted: 200 records acknowledged, 0 not acknowledged; input after line 200 not produced")
	})

	t.Run("twice", func(t *testing.T) {
		interrupts := make(chan os.Signal, 2)
		in := &stagedInput{t: t, block: true, stages: []inputStage{
			// Read once the producer has its id: the records go to
			// a node that is gone.
			{before: n.Stop, text: numberedLines(1, 50)},
			{text: numberedLines(51, 51)},
			// Read once the first 50 records are produced.
			{before: func() error {
				interrupts <- os.Interrupt
				interrupts <- os.Interrupt
				return nil
			}},
		}}
		start := time.Now()
		_, _, err := depotWith(t, in, interrupts, "produce", "lines", "--delivery-timeout", "1m", b(addr))
		require.Less(t, time.Since(start), 30*time.Second, "no wait for the delivery timeout")
		require.ErrorIs(t, err, node.ErrInterrupted)
		m := regexp.MustCompile(`^produce to lines interrupted: 0 records acknowledged, (\d+) not acknowledged \(first line 1, last line (\d+)\)`).FindStringSubmatch(err.Error())
		require.NotNil(t, m, err.Error())
		require.Equal(t, m[1], m[2])
		require.Contains(t, []string{"50", "51"}, m[1], "line 51 may have been produced when the interrupts came")
	})
}

func b(addr string) string { return "--brokers=" + addr }

// With --acks all, produce rides out its node going away and coming back
// at the same address mid-run: the records in flight when the connection
// drops are sent again as soon as the node answers, not after --timeout,
// each kept once and in order, and produce exits 0 with every record
// acknowledged.
func TestProduceAcksAllThroughANodeRestart(t *testing.T) {
	const lines = 50000
	cfg := node.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Logger: actortest.Logger(t, logrus.WarnLevel)}
	n, err := node.Start(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Stop() })
	addr := n.Address()
	cfg.Listen = addr
	_, errOut, err := depot(t, "", "topic", "create", "lines", b(addr))
	require.NoError(t, err, errOut)

	restarted := make(chan error, 1)
	in := &stagedInput{t: t, stages: []inputStage{
		{text: numberedLines(1, 300)},
		{before: func() error {
			if err := awaitLogEnd(addr, "lines", 300); err != nil {
				return err
			}
			// The node stops while the next lines are produced.
			go func() {
				if err := n.Stop(); err != nil {
					restarted <- err
					return
				}
				n2, err := node.Start(cfg)
				if err == nil {
					t.Cleanup(func() { _ = n2.Stop() })
				}
				restarted <- err
			}()
			return nil
		}, text: numberedLines(301, lines)},
	}}
	start := time.Now()
	_, errOut, err = depotWith(t, in, nil, "produce", "lines", "--acks", "all", "--timeout", "60s", "--delivery-timeout", "2m", b(addr))
	require.NoError(t, <-restarted)
	require.NoError(t, err, errOut)
	require.Contains(t, errOut, fmt.Sprintf("produced %d records", lines))
	require.Less(t, time.Since(start), 30*time.Second, "what was in flight was not waited for until --timeout")

	out, errOut, err := depot(t, "", "consume", "lines", "-n", strconv.Itoa(lines), "-f", "%o %v\\n", b(addr))
	require.NoError(t, err, errOut)
	want := make([]string, 0, lines)
	for i := range lines {
		want = append(want, fmt.Sprintf("%d line-%d", i, i+1))
	}
	require.Equal(t, want, strings.Split(strings.TrimSuffix(out, "\n"), "\n"), "every line once, in order")
}
