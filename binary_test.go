package main

import (
	"bytes"
	"context"
	"fmt"
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
	stdout, stderr *bytes.Buffer
	done           chan struct{}
}

// spawn starts the depot binary with args; the test's end stops it by its
// PID if it still runs.
func spawn(t *testing.T, stdin string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(depotBinary(t), args...)
	p := &process{cmd: cmd, stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), p.stdout, p.stderr
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
	args := append([]string{"node", "--data-dir", dataDir, "--listen", addr, "--http", ""}, extra...)
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
			"--listen", unusedAddress(t), "--http", "")
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
