package quorum

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/depot-dev/depot/disk"
)

// testWriter writes each line to t.Log until the test has ended.
type testWriter struct {
	mu    sync.Mutex
	t     testing.TB
	ended bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ended {
		w.t.Log(string(bytes.TrimRight(p, "\n")))
	}
	return len(p), nil
}

// testLogger returns a logger at level whose lines go through t.Log, with
// the field node set to node.
func testLogger(t testing.TB, level logrus.Level, node uint64) *logrus.Entry {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.ended = true
		w.mu.Unlock()
	})
	l := logrus.New()
	l.SetOutput(w)
	l.SetLevel(level)
	return logrus.NewEntry(l).WithField("node", node)
}

// entries returns entries first..last of term, their data naming them.
func entries(first, last, term uint64) []*raftpb.Entry {
	var out []*raftpb.Entry
	for i := first; i <= last; i++ {
		out = append(out, &raftpb.Entry{
			Index: new(i),
			Term:  new(term),
			Type:  raftpb.EntryNormal.Enum(),
			Data:  fmt.Appendf(nil, "entry %d of term %d", i, term),
		})
	}
	return out
}

func hardState(term, vote, commit uint64) *raftpb.HardState {
	return &raftpb.HardState{Term: new(term), Vote: new(vote), Commit: new(commit)}
}

// openStorage opens the storage in dir of fsys, failing the test on error.
func openStorage(t *testing.T, fsys disk.FS, dir string) *Storage {
	t.Helper()
	s, err := OpenStorage(fsys, dir, testLogger(t, logrus.WarnLevel, 0))
	require.NoError(t, err)
	return s
}

// logOf returns the entries of s from its first index on, as "index/term
// data" lines.
func logOf(t *testing.T, s *Storage) []string {
	t.Helper()
	first, err := s.FirstIndex()
	require.NoError(t, err)
	last, err := s.LastIndex()
	require.NoError(t, err)
	if last < first {
		return nil
	}
	ents, err := s.Entries(first, last+1, 1<<62)
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		out = append(out, fmt.Sprintf("%d/%d %s", e.GetIndex(), e.GetTerm(), e.GetData()))
	}
	return out
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }
