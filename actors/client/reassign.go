package client

import (
	"context"
	"fmt"
	"slices"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/depot-dev/depot/messages"
)

// ReassignPartition moves a partition's replicas to the nodes of
// replicas, the first its preferred leader, online, as Kafka's
// kafka-reassign-partitions.sh does (KIP-455): the replicas the target
// adds start on their nodes and catch up from the leader, under those
// nodes' replication throttle; once all of them are in the ISR the
// partition's replicas become the target, a leader it leaves out hands
// over to a member of it, and the replicas it leaves out are deleted. It
// returns once the move is recorded, with the partition's replicas, and
// those being added and removed (none when the move completed at once: a
// target that only reorders or drops replicas in sync). A partition
// already moving is given the new target in place of the old.
func (c *Client) ReassignPartition(ctx context.Context, topic string, partition int32, replicas []int32) (*messages.ReassignmentResult, error) {
	return c.reassign(ctx, &messages.PartitionReassignment{Topic: topic, Partition: partition, Replicas: slices.Clone(replicas)})
}

// CancelReassignment takes a partition's move in flight back to the
// replicas it had before: the replicas the move added stop and are
// deleted. It fails with NO_REASSIGNMENT_IN_PROGRESS when none is.
func (c *Client) CancelReassignment(ctx context.Context, topic string, partition int32) (*messages.ReassignmentResult, error) {
	return c.reassign(ctx, &messages.PartitionReassignment{Topic: topic, Partition: partition, Cancel: true})
}

func (c *Client) reassign(ctx context.Context, p *messages.PartitionReassignment) (*messages.ReassignmentResult, error) {
	req := &messages.ReassignPartitionsRequest{Partitions: []*messages.PartitionReassignment{p}}
	res, err := c.adminChange(ctx, req, func() { req.Retried = true })
	if err != nil {
		return nil, err
	}
	r, err := answer[*messages.ReassignPartitionsResponse](res, req)
	if err != nil {
		return nil, err
	}
	c.forget(p.GetTopic())
	if len(r.GetResults()) != 1 {
		return nil, fmt.Errorf("%w: %d results to a reassignment of one partition", ErrBadResponse, len(r.GetResults()))
	}
	result := r.GetResults()[0]
	return result, codeError(result.GetError(), result.GetErrorMessage())
}

// Reassignment is a partition's move in flight, as Reassignments
// describes it.
type Reassignment struct {
	Topic     string
	Partition int32
	// Replicas are the partition's replicas during the move: Target, then
	// Removing. Adding are the replicas of Target it did not have.
	Replicas, Target, Adding, Removing []int32
	ISR                                []int32
	Leader                             int32
	// LeaderLogEnd is the leader's log end offset, -1 when it did not
	// answer.
	LeaderLogEnd int64
	// Progress is how far each replica of Adding, in its order, has caught
	// up.
	Progress []ReplicaProgress
}

// ReplicaProgress is how far a replica a reassignment adds has caught up
// with its leader.
type ReplicaProgress struct {
	Node int32
	// LogEndOffset is the replica's log end offset, -1 when its node did
	// not answer for it (its replica has not started yet, or the node is
	// down).
	LogEndOffset int64
	InSync       bool
}

// Reassignments describes the reassignments in flight of the named
// topics, every topic's when none is named, by topic and partition as the
// metadata lists them: each one's target, the replicas it adds and
// removes, and each added replica's log end against its leader's, asked
// of their nodes. A topic that does not exist is an error.
func (c *Client) Reassignments(ctx context.Context, topics ...string) ([]Reassignment, error) {
	md, err := c.Metadata(ctx, topics...)
	if err != nil {
		return nil, err
	}
	addresses := map[int32]string{}
	for _, b := range md.GetBrokers() {
		addresses[b.GetNodeId()] = b.GetAddress()
	}
	var out []Reassignment
	for _, t := range md.GetTopics() {
		if t.GetError() != messages.ErrorCode_NONE {
			return nil, &Error{Code: t.GetError(), Message: t.GetErrorMessage()}
		}
		for _, p := range t.GetPartitions() {
			if len(p.GetAddingReplicas()) == 0 && len(p.GetRemovingReplicas()) == 0 {
				continue
			}
			r := Reassignment{
				Topic: t.GetName(), Partition: p.GetPartition(), Replicas: p.GetReplicas(), Adding: p.GetAddingReplicas(),
				Removing: p.GetRemovingReplicas(), ISR: p.GetIsr(), Leader: p.GetLeader(), LeaderLogEnd: -1,
			}
			for _, id := range p.GetReplicas() {
				if !slices.Contains(r.Removing, id) {
					r.Target = append(r.Target, id)
				}
			}
			if p.GetLeaderAddress() != "" {
				r.LeaderLogEnd = c.replicaLogEnd(ctx, actor.NewPID(p.GetLeaderAddress(), p.GetActorName()))
			}
			for _, id := range r.Adding {
				progress := ReplicaProgress{Node: id, LogEndOffset: -1, InSync: slices.Contains(r.ISR, id)}
				if addr := addresses[id]; addr != "" {
					progress.LogEndOffset = c.replicaLogEnd(ctx, actor.NewPID(addr, p.GetActorName()))
				}
				r.Progress = append(r.Progress, progress)
			}
			out = append(out, r)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// replicaLogEnd is the log end offset of the partition replica pid, -1
// when it does not answer within the first-contact timeout: a node that
// is down costs a status no more than that.
func (c *Client) replicaLogEnd(ctx context.Context, pid *actor.PID) int64 {
	res, err := c.request(ctx, pid, &messages.PartitionStatusRequest{}, min(c.cfg.firstContactTimeout, c.cfg.requestTimeout))
	if err != nil {
		return -1
	}
	st, err := answer[*messages.PartitionStatusResponse](res, &messages.PartitionStatusRequest{})
	if err != nil {
		return -1
	}
	return st.GetLogEndOffset()
}
