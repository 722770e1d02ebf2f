package client

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/messages"
)

// connectionLost tells an actor that the connection to address dropped:
// the endpoint watcher, from the event stream, and from it the producers'
// senders and the consumers' fetchers, which send again what they had in
// flight there. It never crosses the wire.
type connectionLost struct{ address string }

// connectionFound tells the endpoint watcher that protoactor connected to
// address. It never crosses the wire.
type connectionFound struct{ address string }

// watchConnections asks the endpoint watcher to tell pid of every
// connection lost, until unwatchConnections.
type watchConnections struct{ pid *actor.PID }

// unwatchConnections ends a watchConnections.
type unwatchConnections struct{ pid *actor.PID }

// endpointWatcher is a client's actor. The client subscribes, from New to
// Close, to its actor system's event stream for protoactor remote's
// EndpointTerminatedEvent and EndpointConnectedEvent (see watchEndpoints).
// The stream calls subscribers on the publisher's goroutine (an endpoint
// writer's), so the subscription only hands each event to the watcher as a
// message; the watcher acts on it in its own turn: for a lost connection it
// fails the client's requests awaiting an answer from that address (see
// Client.request), holds the address's partitions leaderless (see
// lostHold), tells the actors that asked to be told, and asks the
// address's metadata actor for cluster info, whose answer says the node is
// reachable after all (a stream dropped, its node still up). Not shared:
// all access is through its mailbox.
type endpointWatcher struct {
	c *Client
	// watchers are told of every connection lost, by PID id.
	watchers map[string]*actor.PID
	// probing are the addresses asked for cluster info, not yet answered.
	probing map[string]bool
}

func newEndpointWatcher(c *Client) *endpointWatcher {
	return &endpointWatcher{c: c, watchers: map[string]*actor.PID{}, probing: map[string]bool{}}
}

// Receive dispatches the watcher's messages.
func (w *endpointWatcher) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
	case *connectionLost:
		w.onLost(ctx, m)
	case *connectionFound:
		w.c.connectionFound(m.address)
	case *watchConnections:
		w.watchers[m.pid.GetId()] = m.pid
	case *unwatchConnections:
		delete(w.watchers, m.pid.GetId())
	default:
		w.c.logger.WithField("type", fmt.Sprintf("%T", m)).Warn("unhandled message")
	}
}

// watchEndpoints starts the client's endpoint watcher and relays the
// endpoint events of its actor system to it, from now until Close: an
// event published once New has returned is not missed. (Subscribe, not
// SubscribeWithPredicate, which sets the predicate after the subscription
// is published, unguarded, while Publish may read it.)
func (c *Client) watchEndpoints() {
	c.watcher = c.root.Spawn(actor.PropsFromProducer(func() actor.Actor { return newEndpointWatcher(c) }))
	root, watcher := c.root, c.watcher
	c.endpointEvents = c.system.EventStream.Subscribe(func(evt any) {
		switch e := evt.(type) {
		case *remote.EndpointTerminatedEvent:
			root.Send(watcher, &connectionLost{address: e.Address})
		case *remote.EndpointConnectedEvent:
			root.Send(watcher, &connectionFound{address: e.Address})
		}
	})
}

// stopWatchingEndpoints ends what watchEndpoints started.
func (c *Client) stopWatchingEndpoints() {
	c.system.EventStream.Unsubscribe(c.endpointEvents)
	_ = c.root.PoisonFuture(c.watcher).Wait()
}

func (w *endpointWatcher) onLost(ctx actor.Context, m *connectionLost) {
	w.c.logger.WithField("address", m.address).Debug("connection lost")
	w.c.connectionLost(m.address)
	for _, pid := range w.watchers {
		ctx.Send(pid, m)
	}
	if w.probing[m.address] {
		return
	}
	w.probing[m.address] = true
	f := ctx.RequestFuture(actor.NewPID(m.address, actors.MetadataActorName), &messages.ClusterInfoRequest{}, lostHold)
	ctx.ReenterAfter(f, func(res any, err error) {
		delete(w.probing, m.address)
		if _, ok := res.(*messages.ClusterInfoResponse); ok && err == nil {
			w.c.connectionFound(m.address)
		}
	})
}
