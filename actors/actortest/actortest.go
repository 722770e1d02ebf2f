// Package actortest has what the tests of several packages share: actor
// systems and loggers whose output goes through the test's log, so that a
// passing run prints nothing and a failing test shows what it logged, fuzz
// seeds read from testdata, and record batches.
package actortest

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/wire"
)

// testWriter writes each line to t.Log until the test has ended, and
// discards what comes after: actors may still log while they stop, and
// t.Log after the end of its test panics.
type testWriter struct {
	mu    sync.Mutex
	t     testing.TB
	ended bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ended {
		w.t.Helper()
		w.t.Log(string(bytes.TrimRight(p, "\n")))
	}
	return len(p), nil
}

// Writer returns a writer whose lines go through t.Log until the test
// ends, for loggers other than logrus (a Kafka client's).
func Writer(t testing.TB) io.Writer {
	w := &testWriter{t: t}
	// Cleanups run last registered first: this one, registered before any
	// actor system the test starts, runs after they have stopped.
	t.Cleanup(func() {
		w.mu.Lock()
		w.ended = true
		w.mu.Unlock()
	})
	return w
}

// Logger returns a logger at level whose lines go through t.Log.
func Logger(t testing.TB, level logrus.Level) *logrus.Logger {
	l := logrus.New()
	l.SetOutput(Writer(t))
	l.SetLevel(level)
	return l
}

// System returns an actor system whose own logs (protoactor's) go through
// t.Log at Warn and above; it shuts down when the test ends.
func System(t testing.TB) *actor.ActorSystem {
	system := actors.NewActorSystem(Logger(t, logrus.WarnLevel))
	t.Cleanup(system.Shutdown)
	return system
}

// AddSeedFiles seeds a fuzz target with the raw files in
// testdata/seeds/<name>, when there are any.
func AddSeedFiles(f *testing.F, name string, add func([]byte)) {
	f.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "seeds", name, "*"))
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		add(b)
	}
}

// Batch is a record batch, without a producer, of one record for each of
// values, timestamped now.
func Batch(t testing.TB, values ...string) []byte {
	t.Helper()
	b := wire.NewBuilder(wire.NoProducer)
	for _, v := range values {
		b.Append(time.Now().UnixMilli(), nil, []byte(v), nil)
	}
	out, err := b.AppendTo(nil)
	if err != nil {
		t.Fatalf("actortest: build a batch: %v", err)
	}
	return out
}
