package controller

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/actors/metadata"
	"github.com/depot-dev/depot/messages"
)

// change is one change asked of this node as the active controller.
// Changes are proposed one at a time, in order, each generated from the
// image that the one before it left, so that none is validated against an
// image another change in flight is about to alter.
type change struct {
	// req is a request message, or a change of the controller's own
	// (nameCluster, fenceChange).
	req any
	// done answers the change.
	done func(code messages.ErrorCode, msg string)
	// proposal is the number of the change's proposal, once proposed.
	proposal uint64
}

// waitingChange is a change asked while no active controller was known.
type waitingChange struct {
	req    proto.Message
	sender *actor.PID
	since  time.Time
}

// onChange takes a change asked of this node: the active controller
// proposes it, another node forwards it to the active controller, and
// without one it waits a little for an election.
func (a *controllerActor) onChange(ctx actor.Context, m proto.Message) {
	if a.failed != nil {
		a.answer(ctx, ctx.Sender(), refusal(m, messages.ErrorCode_KAFKA_STORAGE_ERROR, messages.ErrorText(a.failed)))
		return
	}
	a.route(ctx, m, ctx.Sender(), a.cfg.Now())
}

// route proposes, forwards or keeps a change.
func (a *controllerActor) route(ctx actor.Context, m proto.Message, sender *actor.PID, since time.Time) {
	switch {
	case a.isLeader():
		a.submit(ctx, m, func(code messages.ErrorCode, msg string) {
			a.answer(ctx, sender, a.response(m, code, msg))
		})
	case a.leader != 0:
		a.sendTo(ctx, a.controllerOf(int32(a.leader)), m, sender)
	default:
		a.waiting = append(a.waiting, waitingChange{req: m, sender: sender, since: since})
	}
}

// retryWaiting routes the changes that waited for an active controller, and
// answers NOT_CONTROLLER to those that waited too long.
func (a *controllerActor) retryWaiting(ctx actor.Context) {
	if len(a.waiting) == 0 {
		return
	}
	waiting := a.waiting
	a.waiting = nil
	now := a.cfg.Now()
	for _, w := range waiting {
		if a.leader == 0 && now.Sub(w.since) > DefaultChangeWait {
			a.answer(ctx, w.sender, refusal(w.req, messages.ErrorCode_NOT_CONTROLLER, "no active controller: the quorum has no leader"))
			continue
		}
		a.route(ctx, w.req, w.sender, w.since)
	}
}

func (a *controllerActor) isLeader() bool {
	return a.peer != nil && a.leader == uint64(a.cfg.NodeID)
}

// answer sends resp to the sender of a request, if it has one.
func (a *controllerActor) answer(ctx actor.Context, sender *actor.PID, resp proto.Message) {
	if sender != nil && resp != nil {
		// A client that reads after its change reads the change.
		a.publish(ctx)
		a.sendTo(ctx, sender, resp, nil)
	}
}

// submit queues a change of the active controller's own.
func (a *controllerActor) submit(ctx actor.Context, m any, done func(code messages.ErrorCode, msg string)) {
	if done == nil {
		done = func(messages.ErrorCode, string) {}
	}
	if !a.isLeader() {
		if a.leader != 0 {
			// Another node's change: forward it, answered by the future.
			msg, ok := m.(proto.Message)
			if !ok {
				done(messages.ErrorCode_NOT_CONTROLLER, fmt.Sprintf("node %d is not the active controller", a.cfg.NodeID))
				return
			}
			future := a.requestTo(ctx, a.controllerOf(int32(a.leader)), msg, DefaultChangeWait)
			ctx.ReenterAfter(future, func(res any, err error) {
				if err != nil {
					done(messages.ErrorCode_REQUEST_TIMED_OUT, fmt.Sprintf("the active controller did not answer: %s", messages.ErrorText(err)))
					return
				}
				code, msg := errorOf(res)
				done(code, msg)
			})
			return
		}
		done(messages.ErrorCode_NOT_CONTROLLER, "no active controller: the quorum has no leader")
		return
	}
	a.changes = append(a.changes, &change{req: m, done: done})
	a.proposeNext(ctx)
}

// proposeNext proposes the first queued change, once the one before it is
// applied. Changes that need no record, or are refused, are answered at
// once.
func (a *controllerActor) proposeNext(ctx actor.Context) {
	for a.isLeader() && a.inflight == nil && len(a.changes) > 0 {
		c := a.changes[0]
		a.changes = a.changes[1:]
		recs, finish, code, msg := a.build(c.req)
		if code != messages.ErrorCode_NONE {
			c.done(code, msg)
			continue
		}
		if len(recs) == 0 {
			finish()
			c.done(messages.ErrorCode_NONE, "")
			continue
		}
		a.proposal++
		data, err := proto.Marshal(&messages.MetadataBatch{Records: recs, Proposer: a.cfg.NodeID, Proposal: a.proposal})
		if err == nil {
			err = a.peer.Propose(data)
		}
		if err != nil {
			c.done(messages.ErrorCode_NOT_CONTROLLER, fmt.Sprintf("change not proposed: %s", messages.ErrorText(err)))
			continue
		}
		c.proposal = a.proposal
		done := c.done
		c.done = func(code messages.ErrorCode, msg string) {
			if code == messages.ErrorCode_NONE {
				finish()
			}
			done(code, msg)
		}
		a.inflight = c
		a.ready(ctx)
	}
}

// committed is told that this node's proposal was applied: its change is
// answered once the partition manager's steps for it ran.
func (a *controllerActor) committed(proposal uint64, outcome *actOutcome) {
	c := a.inflight
	if c == nil || c.proposal != proposal {
		return
	}
	a.inflight = nil
	_, records := c.req.(*messages.AssignReplicaDirsRequest)
	a.acts = append(a.acts, act{outcome: outcome, reply: c.done, direct: records})
}

// failAll answers every change in flight, queued or waiting with code.
func (a *controllerActor) failAll(code messages.ErrorCode, msg string) {
	if a.inflight != nil {
		a.inflight.done(code, msg)
		a.inflight = nil
	}
	for _, c := range a.changes {
		c.done(code, msg)
	}
	a.changes = nil
}

// onLeaderChange follows a change of raft leader: a node that lost the
// lead fails what it had in flight (NOT_CONTROLLER, and the client
// retries), and a node that took it starts as the active controller.
func (a *controllerActor) onLeaderChange(ctx actor.Context, old, leader uint64) {
	a.leader = leader
	a.dirty = true
	a.logger.WithFields(logrus.Fields{"leader": leader, "was": old}).Info("controller leader changed")
	if old == uint64(a.cfg.NodeID) {
		a.failAll(messages.ErrorCode_NOT_CONTROLLER, fmt.Sprintf("node %d is no longer the active controller", a.cfg.NodeID))
	}
	if leader != 0 {
		a.life.newController()
	}
	if leader != uint64(a.cfg.NodeID) {
		a.syncWatches(ctx)
		a.retryWaiting(ctx)
		return
	}
	// Ids handed out by an earlier controller are below the end of the
	// last block reserved.
	a.nextProducerID = a.image.ProducerIDsEnd()
	a.life.becameLeader(a.image, a.cfg.Now())
	a.syncWatches(ctx)
	if a.image.ClusterID() == "" {
		a.submit(ctx, &nameCluster{}, nil)
	}
	a.retryWaiting(ctx)
}

// nameCluster is the active controller's first change in a new quorum: it
// names the cluster, and takes in the metadata of an older single node.
type nameCluster struct{}

// build generates the records of a change from the image, and what to do
// once they are applied; or refuses it with code.
func (a *controllerActor) build(req any) (recs []*messages.MetadataRecord, finish func(), code messages.ErrorCode, msg string) {
	finish = func() {}
	switch m := req.(type) {
	case *nameCluster:
		if a.image.ClusterID() != "" {
			return nil, finish, messages.ErrorCode_NONE, ""
		}
		id := a.cfg.ClusterID
		if id == "" {
			id = metadata.NewClusterID()
		}
		recs = append(recs, metadata.NameCluster(id))
		if a.legacy != nil {
			recs = append(recs, a.legacy.Records()...)
		}
		return recs, func() { a.legacy = nil }, messages.ErrorCode_NONE, ""
	case *messages.CreateTopicRequest:
		return a.buildCreate(m)
	case *messages.CreatePartitionsRequest:
		return a.buildCreatePartitions(m)
	case *messages.AlterTopicConfigsRequest:
		rec, code, msg := a.image.AlterConfigs(m)
		if rec == nil || m.GetValidateOnly() {
			return nil, finish, code, msg
		}
		return []*messages.MetadataRecord{rec}, func() {
			a.logger.WithFields(logrus.Fields{"topic": m.GetTopic(), "configs": rec.GetTopicConfig().GetConfigs()}).Info("topic configs changed")
		}, code, msg
	case *messages.DeleteTopicRequest:
		if _, ok := a.image.Topic(m.GetName()); !ok {
			return nil, finish, messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, fmt.Sprintf("topic %q does not exist", m.GetName())
		}
		return []*messages.MetadataRecord{metadata.DeleteTopic(m.GetName())}, finish, messages.ErrorCode_NONE, ""
	case *messages.InitProducerIdRequest:
		if a.nextProducerID < a.image.ProducerIDsEnd() {
			return nil, finish, messages.ErrorCode_NONE, ""
		}
		return []*messages.MetadataRecord{a.image.ReserveProducerIDs(a.nextProducerID)}, finish, messages.ErrorCode_NONE, ""
	case *messages.AssignReplicaDirsRequest:
		return a.image.AssignDirs(m.GetAssignments()), finish, messages.ErrorCode_NONE, ""
	case *messages.RegisterNodeRequest:
		return a.buildRegister(m)
	case *messages.ElectLeadersRequest:
		recs, results := a.image.ElectLeaders(m)
		a.elections[m] = results
		if len(recs) > 0 {
			kind := "preferred"
			if m.GetUnclean() {
				kind = "unclean"
			}
			a.logger.WithFields(logrus.Fields{"partitions": len(recs), "election": kind}).Info("electing leaders")
		}
		return recs, finish, messages.ErrorCode_NONE, ""
	case *messages.AlterPartitionRequest:
		rec, code, msg := a.image.AlterPartition(m)
		if rec == nil {
			return nil, finish, code, msg
		}
		if rec.GetPartitionChange().GetReplicas() != nil {
			// Only the completion of a reassignment changes the replicas.
			finish = func() { a.logReassignment(rec, "partition reassignment completed") }
		}
		return []*messages.MetadataRecord{rec}, finish, code, msg
	case *messages.ReassignPartitionsRequest:
		recs, results := a.image.Reassign(m)
		a.reassignments[m] = results
		return recs, func() {
			for _, rec := range recs {
				a.logReassignment(rec, "partition reassignment applied")
			}
		}, messages.ErrorCode_NONE, ""
	case *fenceChange:
		if m.fenced {
			return a.image.Fence(m.node), finish, messages.ErrorCode_NONE, ""
		}
		return a.image.Unfence(m.node), finish, messages.ErrorCode_NONE, ""
	}
	return nil, finish, messages.ErrorCode_INVALID_REQUEST, fmt.Sprintf("no change is made of %T", req)
}

// logReassignment logs what rec, a change of a partition's replicas, made
// of them.
func (a *controllerActor) logReassignment(rec *messages.MetadataRecord, what string) {
	change := rec.GetPartitionChange()
	a.logger.WithFields(logrus.Fields{
		"topic": change.GetTopic(), "partition": change.GetPartition(), "leader": change.GetLeader(), "isr": change.GetIsr(),
		"replicas": change.GetReplicas().GetReplicas(), "adding": change.GetReplicas().GetAddingReplicas(),
		"removing": change.GetReplicas().GetRemovingReplicas(),
	}).Info(what)
}

func (a *controllerActor) buildCreate(m *messages.CreateTopicRequest) ([]*messages.MetadataRecord, func(), messages.ErrorCode, string) {
	finish := func() {}
	name := m.GetName()
	if t, ok := a.image.Topic(name); ok && m.GetRetried() && sameTopic(t, m) {
		// A retry of a create whose answer was lost.
		return nil, finish, messages.ErrorCode_NONE, ""
	}
	_, code, msg := a.image.ValidateCreate(m)
	if code != messages.ErrorCode_NONE {
		return nil, finish, code, msg
	}
	replicas, err := a.assignReplicas(m)
	if err != nil {
		return nil, finish, messages.ErrorCode_INVALID_REPLICATION_FACTOR, fmt.Sprintf("topic %q not created: %s", name, messages.ErrorText(err))
	}
	rec := metadata.CreateTopic(m, metadata.NewTopicID(), replicas)
	if m.GetValidateOnly() {
		return nil, finish, messages.ErrorCode_NONE, ""
	}
	return []*messages.MetadataRecord{rec}, func() {
		t, _ := a.image.Topic(name)
		a.logger.WithFields(logrus.Fields{"topic": name, "partitions": len(t.Partitions)}).Info("topic created")
	}, messages.ErrorCode_NONE, ""
}

// sameTopic reports whether t is what m asks to create.
func sameTopic(t *metadata.Topic, m *messages.CreateTopicRequest) bool {
	if int32(len(t.Partitions)) != metadata.PartitionCount(m) || !maps.Equal(t.Configs, m.GetConfigs()) {
		return false
	}
	if given := metadata.Replicas(m.GetAssignments()); given != nil {
		for i, p := range t.Partitions {
			if !slices.Equal(p.Replicas, given[i]) {
				return false
			}
		}
		return true
	}
	return len(t.Partitions) == 0 || metadata.HasReplicationFactor(m, len(t.Partitions[0].Replicas))
}

// buildCreatePartitions generates the records that add the partitions m
// asks for, each placed as a new topic's are unless m names its replicas.
func (a *controllerActor) buildCreatePartitions(m *messages.CreatePartitionsRequest) ([]*messages.MetadataRecord, func(), messages.ErrorCode, string) {
	finish := func() {}
	if t, ok := a.image.Topic(m.GetTopic()); ok && m.GetRetried() && int32(len(t.Partitions)) == m.GetCount() {
		// A retry of a request whose answer was lost.
		return nil, finish, messages.ErrorCode_NONE, ""
	}
	recs, code, msg := a.partitionRecords(m)
	if code != messages.ErrorCode_NONE || m.GetValidateOnly() {
		return nil, finish, code, msg
	}
	return recs, func() {
		a.logger.WithFields(logrus.Fields{"topic": m.GetTopic(), "partitions": m.GetCount(), "added": len(recs)}).Info("partitions added")
	}, messages.ErrorCode_NONE, ""
}

// partitionRecords are the records that add the partitions m asks for, or
// the error code and message to refuse it with.
func (a *controllerActor) partitionRecords(m *messages.CreatePartitionsRequest) ([]*messages.MetadataRecord, messages.ErrorCode, string) {
	t, replicationFactor, code, msg := a.image.ValidateCreatePartitions(m)
	if code != messages.ErrorCode_NONE {
		return nil, code, msg
	}
	nodes := metadata.Replicas(m.GetAssignments())
	if nodes == nil {
		var err error
		nodes, err = a.assignPartitions(int(m.GetCount())-len(t.Partitions), replicationFactor)
		if err != nil {
			return nil, messages.ErrorCode_INVALID_REPLICATION_FACTOR,
				fmt.Sprintf("partitions not added to topic %q: %s", t.Name, messages.ErrorText(err))
		}
	}
	return metadata.AddPartitions(t, nodes), messages.ErrorCode_NONE, ""
}

// response is the answer to a change request once it is applied, or
// refused with code.
func (a *controllerActor) response(req any, code messages.ErrorCode, msg string) proto.Message {
	switch m := req.(type) {
	case *messages.CreateTopicRequest:
		resp := &messages.CreateTopicResponse{Error: code, ErrorMessage: msg}
		if t, ok := a.image.Topic(m.GetName()); ok && code != messages.ErrorCode_TOPIC_ALREADY_EXISTS {
			resp.Topic = a.image.DescribeTopic(t, a.view())
		} else if m.GetValidateOnly() && code == messages.ErrorCode_NONE {
			resp.Topic = a.describeValidated(m)
		}
		return resp
	case *messages.CreatePartitionsRequest:
		resp := &messages.CreatePartitionsResponse{Error: code, ErrorMessage: msg}
		if code != messages.ErrorCode_NONE {
			return resp
		}
		if m.GetValidateOnly() {
			recs, _, _ := a.partitionRecords(m)
			resp.Topic = a.describeAfter(m.GetTopic(), recs)
		} else if t, ok := a.image.Topic(m.GetTopic()); ok {
			resp.Topic = a.image.DescribeTopic(t, a.view())
		}
		return resp
	case *messages.AlterTopicConfigsRequest:
		resp := &messages.AlterTopicConfigsResponse{Error: code, ErrorMessage: msg}
		if code != messages.ErrorCode_NONE {
			return resp
		}
		if m.GetValidateOnly() {
			var recs []*messages.MetadataRecord
			if rec, _, _ := a.image.AlterConfigs(m); rec != nil {
				recs = append(recs, rec)
			}
			resp.Topic = a.describeAfter(m.GetTopic(), recs)
		} else if t, ok := a.image.Topic(m.GetTopic()); ok {
			resp.Topic = a.image.DescribeTopic(t, a.view())
		}
		return resp
	case *messages.InitProducerIdRequest:
		if code != messages.ErrorCode_NONE {
			return &messages.InitProducerIdResponse{Error: code, ErrorMessage: msg}
		}
		id := a.nextProducerID
		a.nextProducerID++
		return &messages.InitProducerIdResponse{ProducerId: id}
	case *messages.ElectLeadersRequest:
		results := a.elections[m]
		delete(a.elections, m)
		return &messages.ElectLeadersResponse{Error: code, ErrorMessage: msg, Results: results}
	case *messages.AlterPartitionRequest:
		resp := &messages.AlterPartitionResponse{Error: code, ErrorMessage: msg}
		if p, ok := a.image.Partition(m.GetTopic(), m.GetPartition()); ok {
			resp.LeaderEpoch, resp.PartitionEpoch, resp.Isr = p.LeaderEpoch, p.PartitionEpoch, slices.Clone(p.ISR)
			resp.Leader, resp.Replicas = p.Leader, slices.Clone(p.Replicas)
		}
		return resp
	case *messages.ReassignPartitionsRequest:
		results := a.reassignments[m]
		delete(a.reassignments, m)
		for _, r := range results {
			if p, ok := a.image.Partition(r.GetTopic(), r.GetPartition()); ok && r.GetError() == messages.ErrorCode_NONE {
				r.Replicas, r.AddingReplicas, r.RemovingReplicas = slices.Clone(p.Replicas), slices.Clone(p.Adding), slices.Clone(p.Removing)
			}
		}
		return &messages.ReassignPartitionsResponse{Error: code, ErrorMessage: msg, Results: results}
	}
	return refusal(req, code, msg)
}

// describeValidated describes the topic m would create.
func (a *controllerActor) describeValidated(m *messages.CreateTopicRequest) *messages.TopicMetadata {
	replicas, err := a.assignReplicas(m)
	if err != nil {
		return nil
	}
	return a.describeAfter(m.GetName(), []*messages.MetadataRecord{metadata.CreateTopic(m, metadata.NewTopicID(), replicas)})
}

// describeAfter describes the named topic as recs, not proposed, would
// leave it: the answer of a change asked with validate_only.
func (a *controllerActor) describeAfter(name string, recs []*messages.MetadataRecord) *messages.TopicMetadata {
	delta := metadata.NewDelta(a.image, nil)
	for _, rec := range recs {
		_ = delta.Replay(rec)
	}
	image := delta.Apply()
	t, ok := image.Topic(name)
	if !ok {
		return nil
	}
	return image.DescribeTopic(t, a.view())
}

// refusal is the answer to a request refused with code.
func refusal(req any, code messages.ErrorCode, msg string) proto.Message {
	switch req.(type) {
	case *messages.CreateTopicRequest:
		return &messages.CreateTopicResponse{Error: code, ErrorMessage: msg}
	case *messages.DeleteTopicRequest:
		return &messages.DeleteTopicResponse{Error: code, ErrorMessage: msg}
	case *messages.CreatePartitionsRequest:
		return &messages.CreatePartitionsResponse{Error: code, ErrorMessage: msg}
	case *messages.AlterTopicConfigsRequest:
		return &messages.AlterTopicConfigsResponse{Error: code, ErrorMessage: msg}
	case *messages.InitProducerIdRequest:
		return &messages.InitProducerIdResponse{Error: code, ErrorMessage: msg}
	case *messages.AssignReplicaDirsRequest:
		return &messages.AssignReplicaDirsResponse{Error: code, ErrorMessage: msg}
	case *messages.RegisterNodeRequest:
		return &messages.RegisterNodeResponse{Error: code, ErrorMessage: msg}
	case *messages.NodeHeartbeatRequest:
		return &messages.NodeHeartbeatResponse{Error: code, ErrorMessage: msg}
	case *messages.AlterPartitionRequest:
		return &messages.AlterPartitionResponse{Error: code, ErrorMessage: msg}
	case *messages.ElectLeadersRequest:
		return &messages.ElectLeadersResponse{Error: code, ErrorMessage: msg}
	case *messages.ReassignPartitionsRequest:
		return &messages.ReassignPartitionsResponse{Error: code, ErrorMessage: msg}
	}
	return nil
}

// errorOf is the error code and message of an answer to a change.
func errorOf(res any) (messages.ErrorCode, string) {
	if r, ok := res.(interface {
		GetError() messages.ErrorCode
		GetErrorMessage() string
	}); ok {
		return r.GetError(), r.GetErrorMessage()
	}
	return messages.ErrorCode_UNKNOWN_SERVER_ERROR, fmt.Sprintf("the active controller answered %T", res)
}
