package controller

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/actors/metadata"
	"github.com/depot-dev/depot/messages"
)

// stateMachine is the controller as raft's state machine: the metadata
// image. Its methods run inside Peer.Handle, on the actor's goroutine.
type stateMachine controllerActor

// Apply folds one committed entry, a messages.MetadataBatch, into the
// image, queues what it changes for this node's partitions, and, for this
// node's own proposal, the answer to the request that caused it.
func (s *stateMachine) Apply(index uint64, data []byte) {
	a := (*controllerActor)(s)
	a.applied = index
	var batch messages.MetadataBatch
	if err := proto.Unmarshal(data, &batch); err != nil {
		// Every node skips it alike: the image stays the same everywhere.
		a.logger.WithError(err).WithField("index", index).Error("metadata log entry does not decode; skipped")
		return
	}
	delta := a.replay(a.image, batch.GetRecords())
	outcome := &actOutcome{}
	// The founding entry of a quorum seeded by a single node's metadata
	// brings topics whose partitions that node starts itself, each where
	// it finds it on disk.
	founding := len(batch.GetRecords()) > 0 && batch.GetRecords()[0].GetCluster() != nil
	if !a.replaying && !founding {
		a.queueActs(delta.LocalChanges(a.cfg.NodeID), outcome)
	}
	if batch.GetProposer() == a.cfg.NodeID {
		a.committed(batch.GetProposal(), outcome)
	}
}

// Snapshot is the image as the records that rebuild it.
func (s *stateMachine) Snapshot() ([]byte, error) {
	a := (*controllerActor)(s)
	return proto.Marshal(&messages.MetadataBatch{Records: a.image.Records()})
}

// Restore replaces the image by a snapshot's, and has this node's
// partitions act on the difference.
func (s *stateMachine) Restore(data []byte) error {
	a := (*controllerActor)(s)
	var batch messages.MetadataBatch
	if err := proto.Unmarshal(data, &batch); err != nil {
		return fmt.Errorf("%w: snapshot does not decode: %w", ErrMetadataLog, err)
	}
	before := a.image
	a.replay(metadata.Empty(), batch.GetRecords())
	a.queueActs(metadata.Diff(before, a.image, a.cfg.NodeID), &actOutcome{})
	a.logger.WithFields(logrus.Fields{"topics": len(a.image.TopicNames()), "nodes": len(a.image.Nodes())}).Info("metadata restored from a snapshot")
	return nil
}

// replay folds recs into a delta over base, logging what it could not
// take, makes the result the image, and returns the delta.
func (a *controllerActor) replay(base *metadata.Image, recs []*messages.MetadataRecord) *metadata.Delta {
	delta := metadata.NewDelta(base, a.legacyDir)
	for _, rec := range recs {
		if err := delta.Replay(rec); err != nil {
			a.logger.WithError(err).Warn("metadata record not replayed as written")
		}
	}
	before := a.image
	a.image = delta.Apply()
	a.afterApply(before)
	return delta
}

// afterApply keeps what derives from the image in step with it.
func (a *controllerActor) afterApply(before *metadata.Image) {
	a.dirty = true
	if id := a.image.ClusterID(); id != "" && before.ClusterID() == "" {
		a.onClusterNamed(id)
	}
}

// act is one step of the partition manager's, or, without a request, the
// answer of the change whose steps came before it.
type act struct {
	req         proto.Message
	what, topic string
	outcome     *actOutcome
	reply       func(code messages.ErrorCode, msg string)
	// direct answers without waiting for directories to be recorded: the
	// answer of a change that records them.
	direct bool
}

// actOutcome is the first failure of the steps of one entry.
type actOutcome struct {
	code messages.ErrorCode
	msg  string
}

// queueActs queues the steps that have the partition manager do what
// changes says for this node: stop and delete the partitions of deleted
// topics and the replicas reassignments removed, start those of created
// topics and the replicas reassignments and new partitions added (each in
// a directory the node chooses, as for a new topic), hand the others their
// new states, and their topics' configs that changed.
func (a *controllerActor) queueActs(changes metadata.LocalChanges, outcome *actOutcome) {
	for _, t := range changes.Deleted {
		stop := &messages.StopPartitionsRequest{Delete: true}
		for _, p := range t.Assignments(a.cfg.NodeID) {
			stop.Partitions = append(stop.Partitions, &messages.TopicPartition{Topic: p.Topic, Partition: p.Partition})
		}
		a.acts = append(a.acts, act{req: stop, what: "stop partitions", topic: t.Name, outcome: outcome})
	}
	if len(changes.Removed) > 0 {
		stop := &messages.StopPartitionsRequest{Partitions: changes.Removed, Delete: true, MovedAway: true}
		a.acts = append(a.acts, act{req: stop, what: "stop replicas moved away", topic: changes.Removed[0].Topic, outcome: outcome})
	}
	for _, t := range changes.Created {
		a.queueStart(t, t.Assignments(a.cfg.NodeID), "start partitions", outcome)
	}
	for rest := changes.Added; len(rest) > 0; {
		n := 1
		for n < len(rest) && rest[n].Topic == rest[0].Topic {
			n++
		}
		if t, ok := a.image.Topic(rest[0].Topic); ok {
			a.queueStart(t, rest[:n], "start replicas moved here", outcome)
		}
		rest = rest[n:]
	}
	if len(changes.Updated) > 0 {
		update := &messages.UpdatePartitionsRequest{Partitions: changes.Updated}
		a.acts = append(a.acts, act{req: update, what: "update partitions", topic: changes.Updated[0].Topic, outcome: outcome})
	}
	for _, t := range changes.Reconfigured {
		update := &messages.UpdateTopicConfigsRequest{Topic: t.Name, Configs: t.Config.Map()}
		a.acts = append(a.acts, act{req: update, what: "update topic configs", topic: t.Name, outcome: outcome})
	}
}

// queueStart queues the start of partitions, replicas of t on this node,
// each told its leader's address.
func (a *controllerActor) queueStart(t *metadata.Topic, partitions []*messages.PartitionAssignment, what string, outcome *actOutcome) {
	for _, p := range partitions {
		p.LeaderAddress = a.image.Address(p.Leader)
	}
	start := &messages.StartPartitionsRequest{Partitions: partitions, Configs: t.Config.Map()}
	a.acts = append(a.acts, act{req: start, what: what, topic: t.Name, outcome: outcome})
}

// runActs runs the queued steps one after the other, each once the one
// before it is answered, and the answers of changes once their steps ran.
func (a *controllerActor) runActs(ctx actor.Context) {
	for !a.acting && len(a.acts) > 0 {
		next := a.acts[0]
		a.acts = a.acts[1:]
		if next.req == nil {
			reply, outcome := next.reply, next.outcome
			if next.direct {
				reply(outcome.code, outcome.msg)
			} else {
				a.afterDirChanges(func() { reply(outcome.code, outcome.msg) })
			}
			continue
		}
		a.acting = true
		future := ctx.RequestFuture(a.cfg.PartitionManager, next.req, a.cfg.ManagerTimeout)
		ctx.ReenterAfter(future, func(res any, err error) {
			a.acting = false
			a.actDone(ctx, next, res, err)
			a.runActs(ctx)
		})
	}
}

// actDone takes the partition manager's answer to one step: its failure
// for the change's answer, the directories it chose as a change of their
// own.
func (a *controllerActor) actDone(ctx actor.Context, step act, res any, err error) {
	code, msg := managerAnswer(res, err, step.what)
	if code != messages.ErrorCode_NONE {
		a.logger.WithFields(logrus.Fields{"topic": step.topic, "error": msg}).Error("partition manager failed to " + step.what)
		if step.outcome.code == messages.ErrorCode_NONE {
			step.outcome.code, step.outcome.msg = code, msg
		}
		return
	}
	if r, ok := res.(*messages.StartPartitionsResponse); ok && len(r.GetAssigned()) > 0 {
		a.learnDirs(r.GetAssigned())
		a.dirChanges++
		a.submit(ctx, &messages.AssignReplicaDirsRequest{Assignments: r.GetAssigned()}, func(code messages.ErrorCode, msg string) {
			if code != messages.ErrorCode_NONE {
				a.logger.WithFields(logrus.Fields{"topic": step.topic, "error": msg}).Warn("the log dirs chosen were not recorded")
			}
			a.dirChanges--
			if a.dirChanges == 0 {
				waiting := a.afterDirs
				a.afterDirs = nil
				for _, fn := range waiting {
					fn()
				}
			}
		})
	}
}

// afterDirChanges calls fn once the directories chosen so far are
// recorded, so that a create is answered with its partitions' directories.
func (a *controllerActor) afterDirChanges(fn func()) {
	if a.dirChanges == 0 {
		fn()
		return
	}
	a.afterDirs = append(a.afterDirs, fn)
}

// managerAnswer turns the partition manager's answer (or its absence) into
// the error code and message for the client.
func managerAnswer(res any, err error, what string) (messages.ErrorCode, string) {
	if err != nil {
		return messages.ErrorCode_REQUEST_TIMED_OUT, fmt.Sprintf("%s: partition manager did not answer: %s", what, messages.ErrorText(err))
	}
	switch res.(type) {
	case *messages.StartPartitionsResponse, *messages.StopPartitionsResponse, *messages.UpdatePartitionsResponse, *messages.UpdateTopicConfigsResponse:
		if code, msg := errorOf(res); code != messages.ErrorCode_NONE {
			return code, fmt.Sprintf("%s: %s", what, msg)
		}
		return messages.ErrorCode_NONE, ""
	}
	return messages.ErrorCode_UNKNOWN_SERVER_ERROR, fmt.Sprintf("%s: partition manager answered %T", what, res)
}
