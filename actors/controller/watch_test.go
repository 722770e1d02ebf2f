package controller

import (
	"context"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/depot-dev/depot/messages"
)

// reachability is one report of a watch.
type reachability struct {
	reachable bool
	cause     string
}

// serve starts a gRPC server with no service on address (127.0.0.1:0 for
// any port) and returns it with the address it listens on.
func serve(t *testing.T, address string) (*grpc.Server, string) {
	t.Helper()
	l, err := net.Listen("tcp", address)
	require.NoError(t, err)
	s := grpc.NewServer()
	go s.Serve(l)
	t.Cleanup(s.Stop)
	return s, l.Addr().String()
}

// startWatch watches address on a goroutine; the channel it returns is
// closed once watchAddress has returned.
func startWatch(t *testing.T, ctx context.Context, address string) (<-chan reachability, <-chan struct{}) {
	t.Helper()
	reports := make(chan reachability, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		watchAddress(ctx, address, func(reachable bool, cause string) {
			reports <- reachability{reachable, cause}
		})
	}()
	return reports, done
}

func next(t *testing.T, reports <-chan reachability) reachability {
	t.Helper()
	select {
	case r := <-reports:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no report from the watch")
		return reachability{}
	}
}

// A watch reports a server it connects to reachable, the same server
// stopped (its connection dropped, then connecting again failed)
// unreachable, and reachable again once a
// server listens there anew; an address nobody listens on is unreachable
// at once. Cancelled, a watch returns, and the goroutines of its
// connection end with it.
func TestWatchAddress(t *testing.T) {
	before := runtime.NumGoroutine()
	s, address := serve(t, "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	reports, done := startWatch(t, ctx, address)
	require.Equal(t, reachability{true, ""}, next(t, reports))

	s.Stop()
	require.Equal(t, reachability{false, "dropped"}, next(t, reports))
	require.Equal(t, reachability{false, "connect failed"}, next(t, reports), "connecting again, to an address nobody listens on, fails")
	again, _ := serve(t, address)
	require.Equal(t, reachability{true, ""}, next(t, reports))

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	unused := l.Addr().String()
	l.Close()
	refusedCtx, cancelRefused := context.WithCancel(context.Background())
	refused, refusedDone := startWatch(t, refusedCtx, unused)
	require.Equal(t, reachability{false, "connect failed"}, next(t, refused))

	cancel()
	cancelRefused()
	<-done
	<-refusedDone
	select {
	case r := <-reports:
		t.Fatalf("a report after the watch ended: %v", r)
	default:
	}
	again.Stop()
	// Polled here, not by require.Eventually, whose checks run on
	// goroutines of their own.
	for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > before && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), before, "goroutines left")
}

// fenced is node id's state in h's cluster info; ok is false when it is
// not registered.
func (h *metaHarness) fenced(id int32) (fenced, ok bool) {
	h.t.Helper()
	info := h.request(&messages.ClusterInfoRequest{}).(*messages.ClusterInfoResponse)
	for _, n := range info.GetNodes() {
		if n.GetNodeId() == id {
			return n.GetFenced(), true
		}
	}
	return false, false
}

// heartbeatUntilUnfenced heartbeats as node id until it is unfenced.
func (h *metaHarness) heartbeatUntilUnfenced(id int32, incarnation uint64) {
	h.t.Helper()
	require.Eventually(h.t, func() bool {
		res := h.request(&messages.NodeHeartbeatRequest{NodeId: id, Incarnation: incarnation, Applied: 1 << 40})
		r := res.(*messages.NodeHeartbeatResponse)
		return r.GetError() == messages.ErrorCode_NONE && !r.GetFenced()
	}, 20*time.Second, 50*time.Millisecond, "node %d unfenced", id)
}

// The active controller watches another node at its registered address:
// once the node's server stops, the node is fenced after the short grace
// of a lost connection, long before its session (a minute here) would
// lapse, and once a server listens there again it heartbeats its way back.
// The watch's goroutines end with the controller.
func TestWatchFencesANodeThatIsGone(t *testing.T) {
	h := newMetaHarness(t)
	h.cfg.SessionTimeout = time.Minute
	h.restart()
	before := runtime.NumGoroutine()

	s, address := serve(t, "127.0.0.1:0")
	res := h.request(&messages.RegisterNodeRequest{NodeId: 8, Address: address, Incarnation: 3})
	require.Equal(t, messages.ErrorCode_NONE, res.(*messages.RegisterNodeResponse).GetError())
	h.heartbeatUntilUnfenced(8, 3)

	s.Stop()
	start := time.Now()
	require.Eventually(t, func() bool {
		fenced, ok := h.fenced(8)
		return ok && fenced
	}, 30*time.Second, 20*time.Millisecond, "node 8 fenced")
	require.Less(t, time.Since(start), h.cfg.SessionTimeout, "fenced before its session lapsed")

	again, _ := serve(t, address)
	h.heartbeatUntilUnfenced(8, 3)

	h.stop()
	again.Stop()
	for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > before && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), before, "goroutines left")
}

// A node whose registration or heartbeats leave it fenced says so at
// warning level once that has lasted fencedWarnAfter, then at most once
// each fencedWarnAfter, and starts counting again once it is unfenced.
func TestNoteFencedWarnsOnceItLasts(t *testing.T) {
	logger, hook := logtest.NewNullLogger()
	now := time.Unix(1000, 0)
	a := &controllerActor{logger: logrus.NewEntry(logger)}
	a.cfg.Now = func() time.Time { return now }

	a.noteFenced("registered, not yet unfenced")
	now = now.Add(fencedWarnAfter - time.Second)
	a.noteFenced("heartbeats answered with the node fenced")
	require.Empty(t, hook.AllEntries(), "not before fencedWarnAfter")
	now = now.Add(time.Second)
	a.noteFenced("heartbeats answered with the node fenced")
	require.Len(t, hook.AllEntries(), 1)
	require.Equal(t, logrus.WarnLevel, hook.LastEntry().Level)
	require.Equal(t, "heartbeats answered with the node fenced", hook.LastEntry().Data["last"])
	require.Equal(t, "10s", hook.LastEntry().Data["for"])
	now = now.Add(time.Second)
	a.noteFenced("NOT_CONTROLLER: no active controller")
	require.Len(t, hook.AllEntries(), 1, "not again within fencedWarnAfter")
	now = now.Add(fencedWarnAfter)
	a.noteFenced("NOT_CONTROLLER: no active controller")
	require.Len(t, hook.AllEntries(), 2)

	a.life.fencedSince = time.Time{} // unfenced, as onLifecycleAnswer does
	now = now.Add(time.Minute)
	a.noteFenced("heartbeats answered with the node fenced")
	require.Len(t, hook.AllEntries(), 2, "a new lapse is counted from its start")
}
