package kafka

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/messages"
	wirekafka "github.com/depot-dev/depot/wire/kafka"
)

// heldMetadata is a metadata actor that holds every MetadataRequest until
// it is told to answer, and from then on answers at once.
type heldMetadata struct {
	received  chan<- int // the count of requests held, after each
	held      []*actor.PID
	answering bool
}

// answerHeld makes heldMetadata answer what it holds, and what comes.
type answerHeld struct{}

func (a *heldMetadata) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *messages.MetadataRequest:
		if a.answering {
			ctx.Respond(&messages.MetadataResponse{ClusterId: "held"})
			return
		}
		a.held = append(a.held, ctx.Sender())
		a.received <- len(a.held)
	case *answerHeld:
		a.answering = true
		for _, to := range a.held {
			ctx.Send(to, &messages.MetadataResponse{ClusterId: "held"})
		}
		a.held = nil
	}
}

// startHeld starts a listener whose metadata actor is a heldMetadata.
func startHeld(t *testing.T, cfg Config) (*Listener, *actor.PID, <-chan int) {
	t.Helper()
	system := actor.NewActorSystem()
	t.Cleanup(system.Shutdown)
	received := make(chan int, 100)
	md := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &heldMetadata{received: received} }))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg.Listener, cfg.Metadata, cfg.PartitionManager, cfg.NodeID = ln, md, md, 1
	l, err := Serve(system, cfg)
	require.NoError(t, err)
	t.Cleanup(l.Close)
	return l, md, received
}

type testConn struct {
	t  *testing.T
	nc net.Conn
}

func dial(t *testing.T, l *Listener) *testConn {
	t.Helper()
	nc, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	return &testConn{t: t, nc: nc}
}

func (c *testConn) send(req kmsg.Request, correlationID int32) {
	c.t.Helper()
	_, err := c.nc.Write(wirekafka.AppendRequest(nil, correlationID, nil, req))
	require.NoError(c.t, err)
}

// answer reads a response's correlation id, within wait; ok is false when
// none came.
func (c *testConn) answer(wait time.Duration) (int32, bool) {
	c.t.Helper()
	require.NoError(c.t, c.nc.SetReadDeadline(time.Now().Add(wait)))
	var size [4]byte
	if _, err := io.ReadFull(c.nc, size[:]); err != nil {
		var ne net.Error
		require.ErrorAs(c.t, err, &ne)
		require.True(c.t, ne.Timeout(), "%v", err)
		return 0, false
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(c.nc, frame)
	require.NoError(c.t, err)
	return int32(binary.BigEndian.Uint32(frame)), true
}

// metadataOf is a metadata request of about size bytes.
func metadataOf(size int) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(8)
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(strings.Repeat("m", size))
	req.Topics = append(req.Topics, t)
	return req
}

func apiVersions() *kmsg.ApiVersionsRequest {
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
	return req
}

// The bytes of requests not yet answered are bounded on all connections
// together: while one connection's request holds them, another's waits
// to be read, and is answered once they are given back.
func TestQueuedRequestBytesBoundEveryConnection(t *testing.T) {
	l, md, received := startHeld(t, Config{MaxRequestBytes: 1024, QueuedMaxRequestBytes: 1024})
	big, small := dial(t, l), dial(t, l)
	big.send(metadataOf(1000), 1)
	require.Equal(t, 1, <-received)
	small.send(apiVersions(), 2)
	_, answered := small.answer(300 * time.Millisecond)
	require.False(t, answered, "not read while the budget is held")
	require.Greater(t, l.budget.inUse(), int64(1000-100))

	l.system.Root.Send(md, &answerHeld{})
	corr, ok := big.answer(5 * time.Second)
	require.True(t, ok)
	require.Equal(t, int32(1), corr)
	corr, ok = small.answer(5 * time.Second)
	require.True(t, ok)
	require.Equal(t, int32(2), corr)
	require.Eventually(t, func() bool { return l.budget.inUse() == 0 }, 5*time.Second, 10*time.Millisecond)
}

// One connection has at most MaxInFlight requests read and not answered;
// the others it sent wait in the socket, and a slow connection holds back
// no other.
func TestInFlightBoundPerConnection(t *testing.T) {
	l, md, received := startHeld(t, Config{MaxInFlight: 2})
	slow, other := dial(t, l), dial(t, l)
	for i := range 5 {
		slow.send(metadataOf(10), int32(i))
	}
	require.Equal(t, 1, <-received)
	require.Equal(t, 2, <-received)
	select {
	case n := <-received:
		t.Fatalf("%d requests read, 2 may be", n)
	case <-time.After(200 * time.Millisecond):
	}
	other.send(apiVersions(), 42)
	corr, ok := other.answer(5 * time.Second)
	require.True(t, ok, "another connection is served")
	require.Equal(t, int32(42), corr)

	// Answered, the first two let the next ones in, in order.
	l.system.Root.Send(md, &answerHeld{})
	for want := range 5 {
		corr, ok := slow.answer(5 * time.Second)
		require.True(t, ok)
		require.Equal(t, int32(want), corr)
	}
}

// Closing the listener closes its connections and ends their goroutines,
// and gives back every byte they held.
func TestCloseEndsConnections(t *testing.T) {
	l, _, received := startHeld(t, Config{})
	c := dial(t, l)
	c.send(metadataOf(100), 1)
	<-received
	l.Close()
	require.NoError(t, c.nc.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err := io.ReadAll(c.nc)
	require.NoError(t, err)
	require.Zero(t, l.budget.inUse())
}

// TLS bytes on the plain-text port close the connection with a warning
// that says what happened.
func TestTLSOnPlainPortClosesWithALogLine(t *testing.T) {
	logger, hook := logtest.NewNullLogger()
	l, _, _ := startHeld(t, Config{Logger: logrus.NewEntry(logger)})
	c := dial(t, l)
	_, err := c.nc.Write([]byte{0x16, 0x03, 0x01, 0x00, 0xa5, 0x01, 0x00, 0x00, 0xa1, 0x03, 0x03})
	require.NoError(t, err)
	require.NoError(t, c.nc.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = io.ReadAll(c.nc)
	if !errors.Is(err, syscall.ECONNRESET) { // closed with bytes unread
		require.NoError(t, err, "closed by the listener, not timed out")
	}
	var warned []string
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel {
			warned = append(warned, e.Message)
		}
	}
	require.Len(t, warned, 1)
	require.Contains(t, warned[0], "TLS")
	require.Contains(t, warned[0], "PLAINTEXT")
}
