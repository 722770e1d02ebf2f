package controller

import (
	"maps"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/metadata"
	"github.com/depot-dev/depot/messages"
)

// The controller persists raft's entries, fsync included, in its Receive:
// a metadata read waiting behind that would wait for the disk. So reads are
// answered by the actor the node spawns (the reader), from the image the
// controller, its child, last published; everything else it forwards to the
// controller, in order.

// published is what the controller last applied, as reads need it: an
// image is a value, so it is shared as it is.
type published struct {
	image    *metadata.Image
	dirPaths map[string]string
	info     *messages.ClusterInfoResponse
}

// reader answers metadata reads from what the controller published. Not
// shared: all access is through its mailbox.
type reader struct {
	cfg        Config
	logger     *logrus.Entry
	controller *actor.PID
	view       *published
}

func (r *reader) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		cfg, logger := r.cfg, r.logger
		r.controller = ctx.Spawn(actors.Props(func() actor.Actor {
			return &controllerActor{cfg: cfg, logger: logger}
		}, logger))
	case *actor.Stopping, *actor.Stopped, *actor.Restarting, *actor.Terminated:
	case *published:
		r.view = m
	case *messages.MetadataRequest:
		if r.view == nil {
			ctx.Forward(r.controller)
			return
		}
		ctx.Respond(describe(r.view.image, r.view.dirPaths, r.cfg.NodeID, r.view.info, m))
	case *messages.ClusterInfoRequest:
		if r.view == nil {
			ctx.Forward(r.controller)
			return
		}
		ctx.Respond(r.view.info)
	default:
		ctx.Forward(r.controller)
	}
}

// publish sends the reader what reads need, when it changed.
func (a *controllerActor) publish(ctx actor.Context) {
	if !a.dirty || ctx.Parent() == nil {
		return
	}
	a.dirty = false
	ctx.Send(ctx.Parent(), &published{image: a.image, dirPaths: maps.Clone(a.dirPaths), info: a.clusterInfo()})
}

// describe answers a MetadataRequest from image: every topic sorted by
// name, or the named ones in the order asked, an unknown or invalid name
// with its error.
func describe(image *metadata.Image, dirPaths map[string]string, nodeID int32, info *messages.ClusterInfoResponse, m *messages.MetadataRequest) *messages.MetadataResponse {
	var brokers []*messages.Broker
	for _, b := range info.GetNodes() {
		if _, ok := image.Node(b.GetNodeId()); ok {
			brokers = append(brokers, b)
		}
	}
	return &messages.MetadataResponse{
		Brokers:      brokers,
		ControllerId: info.GetControllerLeader(),
		ClusterId:    image.ClusterID(),
		Topics:       image.Describe(m.GetTopics(), dirView(nodeID, dirPaths)),
	}
}
