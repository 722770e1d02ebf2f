package main

import (
	"bytes"
	"io"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/node"
)

// depot runs the depot command in-process.
func depot(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), code
}

func startTestNode(t *testing.T) *node.Node {
	t.Helper()
	n, err := node.Start(node.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Logger: actortest.Logger(t, logrus.WarnLevel)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Stop() })
	return n
}

func TestCLIErrors(t *testing.T) {
	n := startTestNode(t)
	b := "--brokers=" + n.Address()
	_, errOut, code := depot(t, "", "topic", "create", "small", "-c", "max.message.bytes=200", b)
	require.Equal(t, 0, code, errOut)

	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		code  int
		want  string
	}{
		{"unknown topic", "", []string{"consume", "nope", "-n", "1", b}, 1, `depot: topic "nope" does not exist`},
		{"unknown topic on produce", "x\n", []string{"produce", "nope", b}, 1, `depot: topic "nope" does not exist`},
		{"record too large", strings.Repeat("x", 500) + "\n", []string{"produce", "small", b}, 1, "depot: small-0: batch 0 of "},
		{"node unreachable", "", []string{"topic", "list", "--brokers", unusedAddress(t)}, 1, "depot: no node answered at 127.0.0.1:"},
		{"bad flag", "", []string{"topic", "list", "--no-such-flag"}, 2, "unknown flag"},
		{"bad acks", "", []string{"produce", "small", "--acks", "7", b}, 2, "--acks 7"},
		{"bad offset", "", []string{"consume", "small", "--offset", "soon", b}, 2, "--offset"},
		{"bad config", "", []string{"topic", "create", "x", "-c", "retention.ms", b}, 2, "key=value"},
		{"invalid config value", "", []string{"topic", "create", "x", "-c", "retention.ms=soon", b}, 1, `depot: invalid config for topic "x": retention.ms "soon" is not an integer`},
		{"invalid topic name", "", []string{"topic", "create", "bad/name", b}, 1, `depot: invalid topic name "bad/name": byte 3 ('/') is not an ASCII letter, digit, '.', '_' or '-'`},
		{"topic exists", "", []string{"topic", "create", "small", b}, 1, `depot: topic "small" already exists`},
		{"too many partitions", "", []string{"topic", "create", "x", "-p", "20000", b}, 1, `depot: topic "x" cannot have 20000 partitions: a topic has 1 to 10000`},
		{"describe an unknown topic", "", []string{"topic", "describe", "nope", b}, 1, `depot: topic "nope" does not exist`},
		{"delete an unknown topic", "", []string{"topic", "delete", "nope", b}, 1, `depot: topic "nope" does not exist`},
		{"describe an unknown group", "", []string{"group", "describe", "nope", b}, 1, `depot: group "nope" does not exist`},
		{"add a missing log dir", "", []string{"disks", "add", "/no/such/dir", b}, 1, "depot: /no/such/dir does not exist: create the directory (or mount its disk) first"},
		{"drain an unknown log dir", "", []string{"disks", "drain", "/no/such/dir", b}, 1, "depot: no log dir /no/such/dir on this node"},
		{"bad output", "", []string{"topic", "list", "-o", "yaml", b}, 2, "-o"},
		{"missing argument", "", []string{"topic", "describe", b}, 2, "arg"},
		{"bad log dirs", "", []string{"node", "--log-dirs", "/tmp/a=lots", "--listen", "127.0.0.1:0"}, 2, "bad size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := depot(t, tc.stdin, tc.args...)
			require.Equal(t, tc.code, code, errOut)
			require.Contains(t, errOut, tc.want)
			require.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, "one line: %q", errOut)
			require.NotRegexp(t, `\b(client|topic|disks|controller|metadata|partition|group|disk|wire): |[A-Z]+_[A-Z_]+: `, errOut,
				"no Go package prefix and no error code name before the message")
		})
	}
	// Nothing was created or written by the refused commands.
	out, _, _ := depot(t, "", "topic", "list", b)
	require.NotContains(t, out, "\nx ")
	out, _, _ = depot(t, "", "topic", "describe", "small", "-o", "json", b)
	require.Contains(t, out, `"log_end_offset": 0`)
}

// unusedAddress is a loopback address where nothing listens.
func unusedAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func TestCLIGroupUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"empty group id on consume", []string{"consume", "orders", "-g", ""}, "empty group id"},
		{"partitions with a group", []string{"consume", "orders", "-g", "g", "--partition", "0"}, "--partition cannot be used with -g"},
		{"partitions with a group, older spelling", []string{"consume", "orders", "-g", "g", "-p", "0"}, "--partition cannot be used with -g"},
		{"exact offset with a group", []string{"consume", "orders", "-g", "g", "--offset", "5"}, "want start or end"},
		{"empty group id on describe", []string{"group", "describe", ""}, "empty group id"},
		{"empty group id on delete", []string{"group", "delete", ""}, "empty group id"},
		{"empty group id on reset", []string{"group", "reset-offsets", "", "--topic", "t", "--to-earliest"}, "empty group id"},
		{"reset without a target", []string{"group", "reset-offsets", "g", "--topic", "t"}, "exactly one of"},
		{"reset with two targets", []string{"group", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--to-latest"}, "exactly one of"},
		{"reset without a topic", []string{"group", "reset-offsets", "g", "--to-earliest"}, "--topic is required"},
		{"reset to a bad time", []string{"group", "reset-offsets", "g", "--topic", "t", "--to-datetime", "yesterday"}, "RFC 3339"},
		{"reset to a negative offset", []string{"group", "reset-offsets", "g", "--topic", "t", "--to-offset", "-3"}, "non-negative"},
		{"describe without a group", []string{"group", "describe"}, "arg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Refused before any node is contacted.
			_, errOut, code := depot(t, "", append(tc.args, "--brokers", unusedAddress(t))...)
			require.Equal(t, 2, code, errOut)
			require.Contains(t, errOut, tc.want)
			require.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, "one line: %q", errOut)
		})
	}
}

// Cobra's own refusals (a flag that does not parse, a wrong number of
// arguments, an unknown command) exit with the usage status whichever
// command they are given to; a command's failure does not.
func TestCommandLineErrorsExitWithUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown command", []string{"nope"}, 2, `unknown command "nope" for "depot"; ; Did you mean this?; 	node`},
		{"unknown flag", []string{"--nope"}, 2, "unknown flag: --nope"},
		{"unknown shorthand", []string{"topic", "create", "x", "-x"}, 2, "unknown shorthand flag: 'x' in -x"},
		{"flag without its value", []string{"disks", "--node"}, 2, "flag needs an argument: --node"},
		{"flag value that does not parse", []string{"node", "--node-id", "x"}, 2, `invalid argument "x" for "--node-id" flag`},
		{"bad global flag", []string{"--timeout", "x", "topic", "list"}, 2, `invalid argument "x" for "--timeout" flag`},
		{"too few arguments", []string{"topic", "create"}, 2, "requires at least 1 arg(s), only received 0"},
		{"too many arguments", []string{"topic", "describe", "a", "b"}, 2, "accepts 1 arg(s), received 2"},
		{"argument to a command that takes none", []string{"node", "extra"}, 2, `unknown command "extra" for "depot node"`},
		{"argument to bench", []string{"bench", "extra"}, 2, `unknown command "extra" for "depot bench"`},
		{"unknown bench flag", []string{"bench", "--nope"}, 2, "unknown flag: --nope"},
		{"argument to completion", []string{"completion", "bash", "extra"}, 2, `unknown command "extra" for "depot completion bash"`},
		{"bench config it cannot run", []string{"bench", "--acks", "7"}, 2, `bench: invalid config: acks "7"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := depot(t, "", tc.args...)
			require.Equal(t, tc.code, code, errOut)
			require.True(t, strings.HasPrefix(errOut, "depot: "+tc.want), "%q", errOut)
			require.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, "one line: %q", errOut)
		})
	}
}

// interruptingInput gives its text, then, read again, interrupts the
// process (as Ctrl-C does) and waits until the test ends.
type interruptingInput struct {
	t    *testing.T
	text string
	sent bool
}

func (in *interruptingInput) Read(p []byte) (int, error) {
	if !in.sent {
		in.sent = true
		return copy(p, in.text), nil
	}
	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		return 0, err
	}
	if err := self.Signal(os.Interrupt); err != nil {
		return 0, err
	}
	<-in.t.Context().Done()
	return 0, io.EOF
}

// An interrupted produce exits with 130, as a shell reports a command
// ended by SIGINT, after saying how far it got.
func TestInterruptedProduceExitStatus(t *testing.T) {
	n := startTestNode(t)
	b := "--brokers=" + n.Address()
	_, errOut, code := depot(t, "", "topic", "create", "t", b)
	require.Equal(t, 0, code, errOut)
	var out, stderr bytes.Buffer
	code = run([]string{"produce", "t", b}, &interruptingInput{t: t, text: "a\nb\n"}, &out, &stderr)
	require.Equal(t, 130, code, stderr.String())
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	require.Regexp(t, `^depot: produce to t interrupted: \d records acknowledged`, lines[len(lines)-1])
}
