package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The built depot binary, as a user runs it: built once per test run.
var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

func depotBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the depot binary")
	}
	binaryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "depot-binary")
		if err != nil {
			binaryErr = err
			return
		}
		binaryPath = filepath.Join(dir, "depot")
		out, err := exec.Command("go", "build", "-o", binaryPath, ".").CombinedOutput()
		if err != nil {
			binaryErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	require.NoError(t, binaryErr)
	return binaryPath
}

// process is a depot command running as its own process.
type process struct {
	cmd            *exec.Cmd
	stdout, stderr *output
	done           chan struct{}
}

// output is what a process wrote: safe to read while it still writes.
type output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// spawn starts the depot binary with args; the test's end stops it by its
// PID if it still runs.
func spawn(t *testing.T, stdin string, args ...string) *process {
	t.Helper()
	return spawnReading(t, strings.NewReader(stdin), args...)
}

// spawnReading is spawn with stdin read from r.
func spawnReading(t *testing.T, stdin io.Reader, args ...string) *process {
	t.Helper()
	cmd := exec.Command(depotBinary(t), args...)
	p := &process{cmd: cmd, stdout: &output{}, stderr: &output{}, done: make(chan struct{})}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, p.stdout, p.stderr
	cmd.Env = append(os.Environ(), "DEPOT_BROKERS=")
	require.NoError(t, cmd.Start())
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-p.done
			}
		}
	})
	return p
}

// wait waits up to timeout for the process to end and returns its exit
// status.
func (p *process) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("%s did not end in %s; stderr:\n%s", strings.Join(p.cmd.Args, " "), timeout, p.stderr)
		return -1
	}
}

// runDepot runs the depot binary to its end, up to a minute.
func runDepot(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	p := spawn(t, stdin, args...)
	code = p.wait(t, time.Minute)
	return p.stdout.String(), p.stderr.String(), code
}

// startNodeProcess starts `depot node` on dataDir with extra flags, and
// waits until it answers at its address.
func startNodeProcess(t *testing.T, dataDir string, extra ...string) (*process, string) {
	t.Helper()
	addr := unusedAddress(t)
	args := append([]string{"node", "--data-dir", dataDir, "--listen", addr, "--http", "", "--kafka-listen", ""}, extra...)
	p := spawn(t, "", args...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if _, _, code := runDepot(t, "", "topic", "list", "--brokers", addr, "--timeout", "1s"); code == 0 {
			return p, addr
		}
		select {
		case <-p.done:
			t.Fatalf("node ended: %s", p.stderr)
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatalf("node did not answer at %s: %s", addr, p.stderr)
	return nil, ""
}

// A newcomer's first steps with the built binary: a second node naming a
// log dir another node holds is refused in one line; disks add of a path
// that does not exist is refused and creates nothing; a drain is undone.
func TestBinaryAsANewcomer(t *testing.T) {
	shared := t.TempDir()
	_, addr := startNodeProcess(t, t.TempDir(), "--log-dirs", shared)
	b := "--brokers=" + addr

	t.Run("two nodes, one log dir", func(t *testing.T) {
		second := spawn(t, "", "node", "--node-id", "2", "--data-dir", t.TempDir(), "--log-dirs", shared,
			"--listen", unusedAddress(t), "--http", "", "--kafka-listen", "")
		require.Equal(t, 1, second.wait(t, 30*time.Second))
		lines := strings.Split(strings.TrimSpace(second.stderr.String()), "\n")
		last := lines[len(lines)-1]
		require.Contains(t, last, "log dir "+shared+" is in use by another node")
		require.Contains(t, last, "node=1")
	})

	t.Run("disks add of a missing path", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "mnt", "typo")
		_, stderr, code := runDepot(t, "", "disks", "add", missing, b)
		require.Equal(t, 1, code)
		require.Contains(t, stderr, missing+" does not exist")
		require.NoDirExists(t, filepath.Dir(missing))
	})

	t.Run("a drain, undrained", func(t *testing.T) {
		other := t.TempDir()
		_, stderr, code := runDepot(t, "", "disks", "add", other+"=1GiB", b)
		require.Equal(t, 0, code, stderr)
		_, stderr, code = runDepot(t, "", "topic", "create", "t", "-p", "2", b)
		require.Equal(t, 0, code, stderr)
		_, stderr, code = runDepot(t, "", "disks", "drain", shared, b)
		require.Equal(t, 0, code, stderr)
		stdout, _, _ := runDepot(t, "", "disks", "-o", "json", b)
		require.Contains(t, stdout, `"state": "draining"`)
		require.Contains(t, stdout, `"draining": true`)
		_, stderr, code = runDepot(t, "", "disks", "undrain", shared, b)
		require.Equal(t, 0, code, stderr)
		stdout, _, _ = runDepot(t, "", "disks", "-o", "json", b)
		require.NotContains(t, stdout, `"state": "draining"`)
		require.NotContains(t, stdout, `"draining": true`)
		_, stderr, code = runDepot(t, "", "disks", "undrain", shared, b)
		require.Equal(t, 1, code)
		require.Contains(t, stderr, "not draining")
	})
}

// produce against a node that is killed: with --delivery-timeout 5s it ends
// within 10 s, saying how many records were acknowledged and which lines
// were not; consume past the end resets, and says so on stderr.
func TestBinaryProduceToAKilledNodeAndConsumePastTheEnd(t *testing.T) {
	node, addr := startNodeProcess(t, t.TempDir())
	b := "--brokers=" + addr
	_, stderr, code := runDepot(t, "", "topic", "create", "t", "-p", "1", b)
	require.Equal(t, 0, code, stderr)
	_, stderr, code = runDepot(t, "a\nb\nc\n", "produce", "t", b)
	require.Equal(t, 0, code, stderr)

	stdout, stderr, code := runDepot(t, "", "consume", "t", "--offset", "99999999", "--reset", "earliest", "-n", "1", "-f", "%v\n", b)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "a\n", stdout)
	require.Contains(t, stderr, "reset t partition 0 from offset 99999999 to 0")
	_, stderr, code = runDepot(t, "", "consume", "t", "--offset", "99999999", "--reset", "none", "-n", "1", b)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "outside [0, 3]")

	produce := spawnReading(t, &lineReader{max: 50_000_000}, "produce", "t", "--delivery-timeout", "5s", b)
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, node.cmd.Process.Kill())
	killed := time.Now()
	require.Equal(t, 1, produce.wait(t, 30*time.Second))
	require.Less(t, time.Since(killed), 10*time.Second, "produce waited past its delivery timeout")
	require.Regexp(t, `\d+ records acknowledged, \d+ not acknowledged \(first line \d+, last line \d+\)`, produce.stderr.String())
}

// lineReader reads "line-N\n" for N from 1 to max: input for a produce
// that outlasts the test's kill, bounded all the same.
type lineReader struct {
	n, max int
	buf    []byte
}

func (r *lineReader) Read(p []byte) (int, error) {
	for len(r.buf) < len(p) && r.n < r.max {
		r.n++
		r.buf = fmt.Appendf(r.buf, "line-%d\n", r.n)
	}
	if len(r.buf) == 0 {
		return 0, io.EOF
	}
	k := copy(p, r.buf)
	r.buf = r.buf[k:]
	return k, nil
}
