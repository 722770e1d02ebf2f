package remote

import (
	"context"
	"encoding/binary"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/depot-dev/depot/messages"
)

// pingCounter counts the HTTP/2 PING frames, acks left out, that the
// connections it dials read: the pings their peers send.
type pingCounter struct {
	pings atomic.Int64
}

func (c *pingCounter) dial(ctx context.Context, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &pingCountingConn{Conn: conn, c: c}, nil
}

// pingCountingConn parses the frames it reads: a 9-byte header (24-bit
// length, type, flags, stream id), then the payload, which it skips.
type pingCountingConn struct {
	net.Conn
	c      *pingCounter
	header []byte
	skip   int
}

func (p *pingCountingConn) Read(b []byte) (int, error) {
	n, err := p.Conn.Read(b)
	for rest := b[:n]; len(rest) > 0; {
		if p.skip > 0 {
			k := min(p.skip, len(rest))
			p.skip -= k
			rest = rest[k:]
			continue
		}
		k := min(9-len(p.header), len(rest))
		p.header = append(p.header, rest[:k]...)
		rest = rest[k:]
		if len(p.header) < 9 {
			continue
		}
		const typePing, flagAck = 0x6, 0x1
		if p.header[3] == typePing && p.header[4]&flagAck == 0 {
			p.c.pings.Add(1)
		}
		p.skip = int(binary.BigEndian.Uint32(append([]byte{0}, p.header[:3]...)))
		p.header = p.header[:0]
	}
	return n, err
}

// echo answers each ProduceRequest.
type echo struct{}

func (echo) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*messages.ProduceRequest); ok {
		ctx.Respond(&messages.ProduceResponse{Topic: m.Topic, CorrelationId: m.CorrelationId})
	}
}

// The streams between two nodes keep a window of RemoteStreamWindowBytes:
// a node does not ping its peer to estimate the bandwidth-delay product,
// as gRPC does by default with nearly every exchange of small messages.
func TestStreamsSendNoBandwidthPings(t *testing.T) {
	receiver, _ := newRemoteTestSystem(t)
	pid, err := receiver.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return echo{} }), "echo")
	require.NoError(t, err)
	target := actor.NewPID(receiver.Address(), pid.Id)
	counter := &pingCounter{}
	sender, _ := newRemoteTestSystem(t, func(cfg *remote.Config) {
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithContextDialer(counter.dial))
	})

	// The answers come back on the receiver's own connection to the
	// sender; the sender's connection carries the requests, and the
	// receiver would ping on it as their data arrives.
	for i := range 50 {
		req := &messages.ProduceRequest{Topic: "t", Records: patterned(8<<10, byte(i)), CorrelationId: int64(i)}
		_, err := sender.Root.RequestFuture(target, req, 10*time.Second).Result()
		require.NoError(t, err, "request %d", i)
	}
	require.Zero(t, counter.pings.Load(), "pings from the receiver")
}
