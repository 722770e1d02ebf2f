package group

import (
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/depot-dev/depot/actors/assign"
	"github.com/depot-dev/depot/messages"
)

// A group's generation is stored in __consumer_offsets under its members
// key once it is assigned, and deleted once the group is empty, as Kafka's
// GroupMetadata record is: the next coordinator of the group, after the
// lead of its offsets partition moves, restores it, and the members go on
// heartbeating and committing in their generation without a rebalance.

// storeGeneration writes the group's generation (value nil: deletes the
// one stored) after the writes before it. A write that fails is written
// again after generationRetryBackoff, while it is still the latest the
// group asked for and the node still coordinates the group: a generation
// left unstored would cost a rebalance should the group's coordinator
// move, as its members would then join again.
func (g *groupActor) storeGeneration(ctx actor.Context, value *messages.OffsetValue) {
	g.writeGeneration(ctx, value, 0)
}

// writeGeneration is storeGeneration's write, again for the attempt-th
// time; only the first failure is logged.
func (g *groupActor) writeGeneration(ctx actor.Context, value *messages.OffsetValue, attempt int) {
	if value == nil && !g.generationStored {
		return
	}
	g.generationSeq++
	seq := g.generationSeq
	req := &appendOffsets{group: g.cfg.id, keys: []*messages.OffsetKey{membersKey(g.cfg.id)}, values: []*messages.OffsetValue{value}}
	g.write(ctx, req, func(code messages.ErrorCode, text string) {
		switch {
		case code == messages.ErrorCode_NONE:
			// Writes complete in order: the log holds the latest.
			g.generationStored = value != nil
		case code == messages.ErrorCode_NOT_COORDINATOR || g.mode != modeServing:
			// The next coordinator restores what its log holds.
		case seq == g.generationSeq:
			if attempt == 0 {
				g.logger.WithField("error", code.String()).Warn("group generation not stored; writing it again until it is: " + text)
			}
			g.timers.SendOnce(generationRetryBackoff, ctx.Self(), &storeGenerationAgain{seq: seq, value: value, attempt: attempt + 1})
		}
	})
}

// generationRetryBackoff is how long a group waits before it writes again
// a generation whose write failed.
const generationRetryBackoff = 500 * time.Millisecond

// storeGenerationAgain has the group write again the generation whose
// write seq failed, unless it asked for a later one since.
type storeGenerationAgain struct {
	seq     uint64
	value   *messages.OffsetValue
	attempt int
}

func (g *groupActor) onStoreGenerationAgain(ctx actor.Context, m *storeGenerationAgain) {
	if m.seq == g.generationSeq && g.mode == modeServing {
		g.writeGeneration(ctx, m.value, m.attempt)
	}
}

// storeDepot stores the generation of Depot's protocol the group has, or
// deletes the stored one when the group is empty.
func (g *groupActor) storeDepot(ctx actor.Context) {
	if len(g.members) == 0 {
		g.storeGeneration(ctx, nil)
		return
	}
	gen := &messages.DepotGeneration{Generation: g.generation, Assignor: g.assignor, PartitionCounts: maps.Clone(g.counts)}
	for _, mem := range g.sortedMembers() {
		gen.Members = append(gen.Members, &messages.DepotMember{
			MemberId: mem.id, GroupInstanceId: mem.instanceID, ClientId: mem.clientID,
			Topics: mem.topics, Assignors: mem.assignors, Owned: toMessagePartitions(mem.owned),
			SessionTimeoutMs: int32(mem.sessionTimeout.Milliseconds()), RebalanceTimeoutMs: int32(mem.rebalanceTimeout.Milliseconds()),
			Assignment: toMessagePartitions(mem.assignment), AssignedGeneration: mem.assignedGeneration, MustRejoin: mem.mustRejoin,
		})
	}
	g.storeGeneration(ctx, &messages.OffsetValue{Depot: gen})
}

// restoreDepot takes a stored generation (validateDepotGeneration's) into
// a group without members: it is stable, and each member's session starts
// now, so that those gone meanwhile lapse.
func (g *groupActor) restoreDepot(gen *messages.DepotGeneration) {
	if len(g.members) > 0 {
		return
	}
	g.generation, g.assignor, g.counts = gen.Generation, gen.Assignor, maps.Clone(gen.PartitionCounts)
	for _, stored := range gen.Members {
		mem := &groupMember{
			id: stored.MemberId, instanceID: stored.GroupInstanceId, clientID: stored.ClientId,
			topics: stored.Topics, assignors: stored.Assignors, owned: fromMessagePartitions(stored.Owned),
			sessionTimeout:     time.Duration(stored.SessionTimeoutMs) * time.Millisecond,
			rebalanceTimeout:   time.Duration(stored.RebalanceTimeoutMs) * time.Millisecond,
			assignment:         fromMessagePartitions(stored.Assignment),
			assignedGeneration: stored.AssignedGeneration,
			mustRejoin:         stored.MustRejoin,
		}
		g.members[mem.id] = mem
		if mem.instanceID != "" {
			g.static[mem.instanceID] = mem.id
		}
		g.startSession(mem)
	}
	g.state = groupStable
	g.logger.WithFields(logrus.Fields{"generation": g.generation, "assignor": g.assignor, "members": len(g.members)}).Info("generation restored")
}

func fromMessagePartitions(tps []*messages.TopicPartition) []assign.TopicPartition {
	if len(tps) == 0 {
		return nil
	}
	out := make([]assign.TopicPartition, len(tps))
	for i, tp := range tps {
		out[i] = assign.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}
	}
	return out
}

// validateStoredGeneration checks the value of a members key read back:
// exactly one generation, valid for its protocol.
func validateStoredGeneration(v *messages.OffsetValue) error {
	switch {
	case (v.Classic == nil) == (v.Depot == nil):
		return errors.New("not exactly one generation")
	case v.Classic != nil:
		return validateClassicGeneration(v.Classic)
	}
	return validateDepotGeneration(v.Depot)
}

// validateDepotGeneration checks a stored generation of Depot's protocol:
// its members, as validateMembers checks them.
func validateDepotGeneration(gen *messages.DepotGeneration) error {
	_, err := validateMembers(gen.Generation, gen.Members)
	return err
}

// validateClassicGeneration checks a stored classic generation: its
// members, as validateMembers checks them, and a leader among them.
func validateClassicGeneration(gen *messages.ClassicGeneration) error {
	ids, err := validateMembers(gen.Generation, gen.Members)
	if err != nil {
		return err
	}
	if !ids[gen.Leader] {
		return fmt.Errorf("leader %q is not a member", gen.Leader)
	}
	return nil
}

// storedMember is what validateMembers reads of a stored member of either
// protocol.
type storedMember interface {
	GetMemberId() string
	GetGroupInstanceId() string
	GetSessionTimeoutMs() int32
	GetRebalanceTimeoutMs() int32
}

// validateMembers checks a stored generation's number and members: at
// least one, with ids, each once, a group instance id at most once, and
// timeouts within the bounds a join may ask. It returns their ids.
func validateMembers[M storedMember](generation int32, members []M) (map[string]bool, error) {
	if generation < 0 {
		return nil, fmt.Errorf("generation %d", generation)
	}
	if len(members) == 0 {
		return nil, errors.New("no members")
	}
	ids, instances := map[string]bool{}, map[string]bool{}
	for _, mem := range members {
		id, instance := mem.GetMemberId(), mem.GetGroupInstanceId()
		session := time.Duration(mem.GetSessionTimeoutMs()) * time.Millisecond
		switch {
		case id == "" || ids[id]:
			return nil, fmt.Errorf("member id %q empty or named twice", id)
		case instance != "" && instances[instance]:
			return nil, fmt.Errorf("group instance %q named twice", instance)
		case session < MinSessionTimeout || session > MaxSessionTimeout:
			return nil, fmt.Errorf("member %q: session timeout %d ms", id, mem.GetSessionTimeoutMs())
		case mem.GetRebalanceTimeoutMs() <= 0:
			return nil, fmt.Errorf("member %q: rebalance timeout %d ms", id, mem.GetRebalanceTimeoutMs())
		}
		ids[id] = true
		if instance != "" {
			instances[instance] = true
		}
	}
	return ids, nil
}
