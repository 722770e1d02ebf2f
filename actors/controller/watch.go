package controller

import (
	"context"
	"net"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
)

// The active controller watches every other registered node with a
// connection of its own to the node's actor address: an HTTP/2 connection
// to its gRPC server that carries no call. A process that dies takes its
// sockets with it, so the connection drops at once, and a connection to an
// address nobody listens on is refused at once; either makes the node
// unreachable, which fences it after the short grace of a lost connection
// (lostGrace) rather than after its session. That is what fences a node
// killed while it was the active controller soon after a new one is
// elected: the new one grants every node a full session, and only its
// watch finds that this one is gone. A peer that vanishes without a reset
// (a host down, a cable out) is found by TCP keepalive, within
// watchKeepAlive times watchKeepAliveProbes+1 of silence. HTTP/2 pings
// would find a hung process as well, but gRPC's client sends them no more
// often than every 10 s, when the node's session has lapsed anyway; TCP
// keepalive asks nothing of the node's server.
//
// A watch runs on a goroutine of its own, never on the actor's: it dials,
// waits on the connection's state and reports each change of reachability
// to the controller as a nodeReachability message. Watches start when the
// controller becomes active, or at the tick after a node registers, and
// stop when it stops being active, the node's address changes, or the
// controller stops.
const (
	// watchKeepAlive is the idle time before the first TCP keepalive probe
	// of a watch's connection, and the time between probes.
	watchKeepAlive = time.Second
	// watchKeepAliveProbes is how many unanswered probes drop the
	// connection.
	watchKeepAliveProbes = 2
	// watchConnectTimeout bounds one connection attempt.
	watchConnectTimeout = 2 * time.Second
	// watchRetryMax is the longest wait between connection attempts to a
	// node that is unreachable, so that one back is found soon.
	watchRetryMax = time.Second
)

// nodeReachability is what a watch reports: whether its node's address
// accepts its connection. cause says why one does not (causeDropped,
// causeConnectFailed). watch tells the reports of the node's current watch
// from those of one already stopped.
type nodeReachability struct {
	node      int32
	watch     *nodeWatch
	reachable bool
	cause     string
}

// nodeWatch is the controller's handle on one node's watch.
type nodeWatch struct {
	address string
	cancel  context.CancelFunc
}

// watchAddress watches address until ctx ends, and calls report with each
// change of its reachability: true once it connects, false when a
// connection attempt fails before any did, or the connection drops. The
// connection is dialled again after a drop, and its attempts repeat while
// it fails, so that a node that comes back is reported reachable.
// Blocking: run it on a goroutine of its own.
// Why a watch finds a node unreachable.
const (
	causeDropped       = "dropped"
	causeConnectFailed = "connect failed"
)

func watchAddress(ctx context.Context, address string, report func(reachable bool, cause string)) {
	dialer := &net.Dialer{KeepAliveConfig: net.KeepAliveConfig{
		Enable: true, Idle: watchKeepAlive, Interval: watchKeepAlive, Count: watchKeepAliveProbes,
	}}
	conn, err := grpc.NewClient("passthrough:///"+address,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return dialer.DialContext(ctx, "tcp", addr)
		}),
		grpc.WithIdleTimeout(0),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: watchRetryMax},
			MinConnectTimeout: watchConnectTimeout,
		}),
	)
	if err != nil {
		report(false, err.Error())
		return
	}
	defer conn.Close()
	conn.Connect()
	// known is the reachability last reported, nil before the first, and
	// told its cause.
	var known *bool
	var told string
	tell := func(reachable bool, cause string) {
		if known == nil || *known != reachable || told != cause {
			known, told = &reachable, cause
			report(reachable, cause)
		}
	}
	for {
		state := conn.GetState()
		switch state {
		case connectivity.Ready:
			tell(true, "")
		case connectivity.TransientFailure:
			// A drop is reported first, then the failure to connect again:
			// a node whose process died refuses at once.
			tell(false, causeConnectFailed)
		case connectivity.Idle, connectivity.Connecting:
			// A ready connection that drops goes idle, or straight to
			// connecting again.
			if known != nil && *known {
				tell(false, causeDropped)
			}
			if state == connectivity.Idle {
				conn.Connect()
			}
		case connectivity.Shutdown:
			return
		}
		if !conn.WaitForStateChange(ctx, state) {
			return
		}
	}
}

// syncWatches has the active controller watch every registered node but
// its own, at its registered address, and any other controller watch none.
func (a *controllerActor) syncWatches(ctx actor.Context) {
	want := map[int32]string{}
	if a.isLeader() {
		for _, n := range a.image.Nodes() {
			if n.ID != a.cfg.NodeID && n.Address != "" {
				want[n.ID] = n.Address
			}
		}
	}
	for id, w := range a.watches {
		if want[id] != w.address {
			w.cancel()
			delete(a.watches, id)
		}
	}
	for id, address := range want {
		if _, ok := a.watches[id]; !ok {
			a.startWatch(ctx, id, address)
		}
	}
}

// startWatch starts the watch of node id at address.
func (a *controllerActor) startWatch(ctx actor.Context, id int32, address string) {
	w := &nodeWatch{address: address}
	watchCtx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	a.watches[id] = w
	root, self := ctx.ActorSystem().Root, a.self
	go watchAddress(watchCtx, address, func(reachable bool, cause string) {
		if watchCtx.Err() == nil {
			root.Send(self, &nodeReachability{node: id, watch: w, reachable: reachable, cause: cause})
		}
	})
}

// stopWatches stops every watch.
func (a *controllerActor) stopWatches() {
	for id, w := range a.watches {
		w.cancel()
		delete(a.watches, id)
	}
}

// onReachability takes a watch's report: a node unreachable is treated as
// one whose connection dropped, a node reachable again as one that came
// back before its grace ended.
func (a *controllerActor) onReachability(m *nodeReachability) {
	w := a.watches[m.node]
	if w == nil || w != m.watch {
		return
	}
	if m.reachable {
		a.life.reachable(m.node)
		return
	}
	a.logger.WithFields(logrus.Fields{"unreachable": m.node, "address": w.address, "why": m.cause}).Info("node unreachable")
	if a.peer != nil {
		a.peer.ReportUnreachable(uint64(m.node))
	}
	a.life.lost(m.node, a.cfg.Now(), m.cause == causeConnectFailed)
}
