package group

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

func TestCommitError(t *testing.T) {
	for _, tc := range []struct {
		code, want messages.ErrorCode
	}{
		{messages.ErrorCode_NONE, messages.ErrorCode_NONE},
		{messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, messages.ErrorCode_NOT_COORDINATOR},
		{messages.ErrorCode_LEADER_NOT_AVAILABLE, messages.ErrorCode_NOT_COORDINATOR},
		{messages.ErrorCode_FENCED_LEADER_EPOCH, messages.ErrorCode_NOT_COORDINATOR},
		{messages.ErrorCode_UNKNOWN_LEADER_EPOCH, messages.ErrorCode_NOT_COORDINATOR},
		{messages.ErrorCode_KAFKA_STORAGE_ERROR, messages.ErrorCode_NOT_COORDINATOR},
		{messages.ErrorCode_NOT_ENOUGH_REPLICAS, messages.ErrorCode_COORDINATOR_NOT_AVAILABLE},
		{messages.ErrorCode_NOT_ENOUGH_REPLICAS_AFTER_APPEND, messages.ErrorCode_COORDINATOR_NOT_AVAILABLE},
		{messages.ErrorCode_REQUEST_TIMED_OUT, messages.ErrorCode_COORDINATOR_NOT_AVAILABLE},
		{messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, messages.ErrorCode_COORDINATOR_NOT_AVAILABLE},
		{messages.ErrorCode_MESSAGE_TOO_LARGE, messages.ErrorCode_MESSAGE_TOO_LARGE},
	} {
		t.Run(tc.code.String(), func(t *testing.T) {
			require.Equal(t, tc.want, commitError(tc.code))
		})
	}
}

// Messages the tests send their fakes.
type (
	// setLeader has the fake metadata name leader, at address, in epoch,
	// the leader of the offsets partition.
	setLeader struct {
		leader  int32
		address string
		epoch   int32
	}
	// setReplica sets the fake partition's leader epoch, its high
	// watermark (-1: its log end, as it moves), and the code it refuses
	// produces with.
	setReplica struct {
		epoch         int32
		highWatermark int64
		refuse        messages.ErrorCode
	}
	// replicaState asks the fake partition for a replicaStateAnswer.
	replicaState        struct{}
	replicaStateAnswer  struct{ parked, endOffset int }
	parkedFetchTimedOut struct{ seq int }
)

// fakeMetadata answers MetadataRequest for __consumer_offsets, one
// partition, with the leader setLeader last gave.
type fakeMetadata struct {
	leader  int32
	address string
	epoch   int32
}

func (f *fakeMetadata) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *setLeader:
		f.leader, f.address, f.epoch = m.leader, m.address, m.epoch
		ctx.Respond(true)
	case *messages.MetadataRequest:
		pm := &messages.PartitionMetadata{Partition: 0, Leader: f.leader, LeaderAddress: f.address, LeaderEpoch: f.epoch,
			ActorName: actors.PartitionActorName(OffsetsTopic, 0)}
		if f.leader < 0 {
			pm.Error, pm.LeaderAddress = messages.ErrorCode_LEADER_NOT_AVAILABLE, ""
		}
		ctx.Respond(&messages.MetadataResponse{Topics: []*messages.TopicMetadata{{Name: OffsetsTopic, Partitions: []*messages.PartitionMetadata{pm}}}})
	}
}

// fakeOffsetsPartition is a replica of partition 0 of __consumer_offsets
// that this node leads: it refuses fetches in another leader epoch, parks
// a fetch at the high watermark until the watermark rises or its wait
// ends, and appends produces unless told to refuse them.
type fakeOffsetsPartition struct {
	batches       [][]byte
	endOffset     int64
	epoch         int32
	highWatermark int64 // -1: the log end
	refuse        messages.ErrorCode
	parked        map[int]parkedFakeFetch
	seq           int
}

type parkedFakeFetch struct {
	sender *actor.PID
	req    *messages.FetchRequest
}

func (f *fakeOffsetsPartition) hw() int64 {
	if f.highWatermark < 0 {
		return f.endOffset
	}
	return f.highWatermark
}

func (f *fakeOffsetsPartition) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *setReplica:
		f.epoch, f.highWatermark, f.refuse = m.epoch, m.highWatermark, m.refuse
		for seq, p := range f.parked {
			if p.req.Offset < f.hw() {
				delete(f.parked, seq)
				ctx.Send(p.sender, f.fetch(p.req))
			}
		}
		ctx.Respond(true)
	case *replicaState:
		ctx.Respond(&replicaStateAnswer{parked: len(f.parked), endOffset: int(f.endOffset)})
	case *messages.FetchRequest:
		resp := f.fetch(m)
		if resp.Error == messages.ErrorCode_NONE && len(resp.Records) == 0 && m.MaxWaitMs > 0 {
			f.seq++
			f.parked[f.seq] = parkedFakeFetch{sender: ctx.Sender(), req: m}
			seq, root, self := f.seq, ctx.ActorSystem().Root, ctx.Self()
			time.AfterFunc(time.Duration(m.MaxWaitMs)*time.Millisecond, func() { root.Send(self, &parkedFetchTimedOut{seq: seq}) })
			return
		}
		ctx.Respond(resp)
	case *parkedFetchTimedOut:
		if p, ok := f.parked[m.seq]; ok {
			delete(f.parked, m.seq)
			ctx.Send(p.sender, f.fetch(p.req))
		}
	case *messages.PartitionStatusRequest:
		ctx.Respond(&messages.PartitionStatusResponse{Topic: OffsetsTopic, LogEndOffset: f.endOffset, HighWatermark: f.hw()})
	case *messages.ProduceRequest:
		if f.refuse != messages.ErrorCode_NONE {
			ctx.Respond(&messages.ProduceResponse{Topic: OffsetsTopic, Error: f.refuse, ErrorMessage: "refused by the test"})
			return
		}
		base := f.append(m.Records)
		ctx.Respond(&messages.ProduceResponse{Topic: OffsetsTopic, BaseOffset: base})
	}
}

// append stores batch at the log end and returns its base offset.
func (f *fakeOffsetsPartition) append(batch []byte) int64 {
	h, err := wire.Validate(batch)
	if err != nil {
		panic(err)
	}
	base := f.endOffset
	b := append([]byte(nil), batch...)
	wire.SetBaseOffset(b, base)
	f.batches = append(f.batches, b)
	f.endOffset = base + int64(h.RecordCount)
	return base
}

func (f *fakeOffsetsPartition) fetch(m *messages.FetchRequest) *messages.FetchResponse {
	resp := &messages.FetchResponse{Topic: OffsetsTopic, Offset: m.Offset, HighWatermark: f.hw(), LeaderEpoch: f.epoch}
	if m.CurrentLeaderEpoch != nil && *m.CurrentLeaderEpoch != f.epoch {
		resp.Error = messages.ErrorCode_UNKNOWN_LEADER_EPOCH
		if *m.CurrentLeaderEpoch < f.epoch {
			resp.Error = messages.ErrorCode_FENCED_LEADER_EPOCH
		}
		return resp
	}
	if m.Offset > f.endOffset {
		resp.Error = messages.ErrorCode_OFFSET_OUT_OF_RANGE
		return resp
	}
	for _, b := range f.batches {
		h, _ := wire.Validate(b)
		if h.BaseOffset >= m.Offset && h.NextOffset() <= f.hw() {
			resp.Records = append(resp.Records, b...)
		}
	}
	return resp
}

// coordinatorHarness is a coordinator of node 1 over the fakes.
type coordinatorHarness struct {
	t         *testing.T
	system    *actor.ActorSystem
	metadata  *actor.PID
	partition *actor.PID
	groups    *actor.PID
}

func newCoordinatorHarness(t *testing.T, partition *fakeOffsetsPartition, leader int32, epoch int32) *coordinatorHarness {
	t.Helper()
	system := actortest.System(t)
	h := &coordinatorHarness{t: t, system: system}
	address := system.Address()
	h.metadata = system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &fakeMetadata{leader: leader, address: address, epoch: epoch}
	}))
	partition.parked = map[int]parkedFakeFetch{}
	var err error
	h.partition, err = system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return partition }), actors.PartitionActorName(OffsetsTopic, 0))
	require.NoError(t, err)
	h.groups, err = system.Root.SpawnNamed(NewGroupsProps(GroupsConfig{
		NodeID: 1, Address: address, Metadata: h.metadata,
		LeaderCheckInterval: 10 * time.Millisecond, RequestTimeout: 2 * time.Second,
		Logger: logrus.NewEntry(actortest.Logger(t, logrus.WarnLevel)),
	}), actors.GroupCoordinatorName)
	require.NoError(t, err)
	return h
}

func (h *coordinatorHarness) request(pid *actor.PID, msg any) any {
	h.t.Helper()
	res, err := h.system.Root.RequestFuture(pid, msg, 5*time.Second).Result()
	require.NoError(h.t, err)
	return res
}

// fetchOffsets asks the coordinator for group's offsets: their code, and
// "topic-partition@offset" of each.
func (h *coordinatorHarness) fetchOffsets(group string) (messages.ErrorCode, []string) {
	h.t.Helper()
	r := h.request(h.groups, &messages.OffsetFetchRequest{GroupId: group}).(*messages.OffsetFetchResponse)
	var out []string
	for _, o := range r.Offsets {
		out = append(out, fmt.Sprintf("%s-%d@%d", o.Topic, o.Partition, o.Offset))
	}
	return r.Error, out
}

func (h *coordinatorHarness) commit(group string, offset int64) *messages.OffsetCommitResponse {
	h.t.Helper()
	return h.request(h.groups, &messages.OffsetCommitRequest{GroupId: group, Generation: -1,
		Offsets: []*messages.PartitionOffset{{Topic: "t", Partition: 0, Offset: offset}}}).(*messages.OffsetCommitResponse)
}

func offsetsBatch(t *testing.T, group string, offset int64) []byte {
	t.Helper()
	batch, _, err := buildOffsetBatch(wire.NewBuilder(wire.NoProducer), 1,
		[]*messages.OffsetKey{{Group: group, Topic: "t", Partition: 0}}, []*messages.OffsetValue{{Offset: offset}})
	require.NoError(t, err)
	return batch
}

// A node that takes the lead of an offsets partition loads it up to the
// log end its replica had then, waiting for the high watermark to get
// there, before its groups answer; one that loses the lead answers
// NOT_COORDINATOR and drops the offsets; one that takes it back loads
// what the replica holds then.
func TestCoordinatorFollowsTheLead(t *testing.T) {
	partition := &fakeOffsetsPartition{highWatermark: 0}
	partition.append(offsetsBatch(t, "g", 5))
	h := newCoordinatorHarness(t, partition, 1, 0)

	// The record is in the replica but not yet below its high watermark,
	// as on a new leader whose followers have not fetched from it yet.
	fetched := h.system.Root.RequestFuture(h.groups, &messages.OffsetFetchRequest{GroupId: "g"}, 10*time.Second)
	require.Eventually(t, func() bool {
		return h.request(h.partition, &replicaState{}).(*replicaStateAnswer).parked > 0
	}, 5*time.Second, 5*time.Millisecond, "the load waits at the high watermark")
	h.request(h.partition, &setReplica{epoch: 0, highWatermark: -1})
	res, err := fetched.Result()
	require.NoError(t, err)
	r := res.(*messages.OffsetFetchResponse)
	require.Equal(t, messages.ErrorCode_NONE, r.Error, r.ErrorMessage)
	require.Len(t, r.Offsets, 1)
	require.Equal(t, int64(5), r.Offsets[0].Offset)

	c := h.commit("g", 7)
	require.Equal(t, messages.ErrorCode_NONE, c.Error, c.ErrorMessage)
	groupPID := actor.NewPID(h.system.Address(), actors.GroupActorName("g"))
	list := h.request(h.groups, &messages.ListGroupsRequest{}).(*messages.ListGroupsResponse)
	require.Len(t, list.Groups, 1)

	// Node 2 leads.
	h.request(h.metadata, &setLeader{leader: 2, address: "127.0.0.1:1", epoch: 1})
	h.request(h.partition, &setReplica{epoch: 1, highWatermark: -1, refuse: messages.ErrorCode_NOT_LEADER_OR_FOLLOWER})
	require.Eventually(t, func() bool {
		code, _ := h.fetchOffsets("g")
		return code == messages.ErrorCode_NOT_COORDINATOR
	}, 5*time.Second, 5*time.Millisecond)
	c = h.commit("g", 8)
	require.Equal(t, messages.ErrorCode_NOT_COORDINATOR, c.Error, c.ErrorMessage)
	list = h.request(h.groups, &messages.ListGroupsRequest{}).(*messages.ListGroupsResponse)
	require.Empty(t, list.Groups)
	// The group's actor stops: a request sent to it straight is a dead
	// letter, or NOT_COORDINATOR while it is stopping.
	require.Eventually(t, func() bool {
		_, err := h.system.Root.RequestFuture(groupPID, &messages.OffsetFetchRequest{GroupId: "g"}, time.Second).Result()
		return err == actor.ErrDeadLetter
	}, 5*time.Second, 5*time.Millisecond)

	// Node 1 leads again, in a new epoch; its replica followed node 2,
	// which took a commit meanwhile.
	h.request(h.partition, &setReplica{epoch: 2, highWatermark: -1})
	partition2 := offsetsBatch(t, "g", 9)
	require.Equal(t, messages.ErrorCode_NONE, h.request(h.partition, &messages.ProduceRequest{Records: partition2}).(*messages.ProduceResponse).Error)
	h.request(h.metadata, &setLeader{leader: 1, address: h.system.Address(), epoch: 2})
	require.Eventually(t, func() bool {
		list := h.request(h.groups, &messages.ListGroupsRequest{}).(*messages.ListGroupsResponse)
		return len(list.Groups) == 1 && list.Groups[0].GroupId == "g"
	}, 5*time.Second, 5*time.Millisecond, "a group with offsets is listed once loaded")
	require.Eventually(t, func() bool {
		code, offsets := h.fetchOffsets("g")
		return code == messages.ErrorCode_NONE && len(offsets) == 1 && offsets[0] == "t-0@9"
	}, 5*time.Second, 5*time.Millisecond)
	c = h.commit("g", 10)
	require.Equal(t, messages.ErrorCode_NONE, c.Error, c.ErrorMessage)
	_, offsets := h.fetchOffsets("g")
	require.Equal(t, []string{"t-0@10"}, offsets)
}

// A commit whose write the offsets partition refuses is answered with a
// code that sends the client to find the coordinator again, and changes
// nothing.
func TestCoordinatorCommitRefused(t *testing.T) {
	for _, tc := range []struct {
		refuse, want messages.ErrorCode
	}{
		{messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, messages.ErrorCode_NOT_COORDINATOR},
		{messages.ErrorCode_LEADER_NOT_AVAILABLE, messages.ErrorCode_NOT_COORDINATOR},
		{messages.ErrorCode_NOT_ENOUGH_REPLICAS, messages.ErrorCode_COORDINATOR_NOT_AVAILABLE},
		{messages.ErrorCode_NOT_ENOUGH_REPLICAS_AFTER_APPEND, messages.ErrorCode_COORDINATOR_NOT_AVAILABLE},
	} {
		t.Run(tc.refuse.String(), func(t *testing.T) {
			partition := &fakeOffsetsPartition{highWatermark: -1}
			h := newCoordinatorHarness(t, partition, 1, 0)
			c := h.commit("g", 3)
			require.Equal(t, messages.ErrorCode_NONE, c.Error, c.ErrorMessage)
			h.request(h.partition, &setReplica{epoch: 0, highWatermark: -1, refuse: tc.refuse})
			c = h.commit("g", 4)
			require.Equal(t, tc.want, c.Error, c.ErrorMessage)
			require.Equal(t, tc.want, c.Offsets[0].Error)
			code, offsets := h.fetchOffsets("g")
			require.Equal(t, messages.ErrorCode_NONE, code)
			require.Equal(t, []string{"t-0@3"}, offsets)
		})
	}
}

// A generation whose write fails is written again once the offsets
// partition takes writes: left unstored, it would be lost to a coordinator
// move, which would restore none and cost the group a rebalance.
func TestCoordinatorStoresAFailedGenerationAgain(t *testing.T) {
	partition := &fakeOffsetsPartition{highWatermark: -1, refuse: messages.ErrorCode_NOT_ENOUGH_REPLICAS}
	h := newCoordinatorHarness(t, partition, 1, 0)
	join := h.request(h.groups, joinRequest("", "a", "range")).(*messages.JoinGroupResponse)
	require.Equal(t, messages.ErrorCode_NONE, join.Error, join.ErrorMessage)
	require.Equal(t, int32(1), join.Generation)
	sync := h.request(h.groups, &messages.SyncGroupRequest{GroupId: "g", MemberId: join.MemberId, Generation: 1,
		Assignments: assignment(map[string]string{join.MemberId: "A"})}).(*messages.SyncGroupResponse)
	require.Equal(t, messages.ErrorCode_NONE, sync.Error, sync.ErrorMessage)

	// The first write was refused; the partition takes the next.
	time.Sleep(100 * time.Millisecond)
	require.Zero(t, h.request(h.partition, &replicaState{}).(*replicaStateAnswer).endOffset)
	h.request(h.partition, &setReplica{epoch: 0, highWatermark: -1})
	require.Eventually(t, func() bool {
		return h.request(h.partition, &replicaState{}).(*replicaStateAnswer).endOffset > 0
	}, 5*time.Second, 20*time.Millisecond)
	state := newOffsetsState()
	_, bad, err := decodeOffsetBatches(state, slices.Concat(partition.batches...), 0)
	require.NoError(t, err)
	require.Zero(t, bad)
	var gen *messages.ClassicGeneration
	for k, v := range state.group("g") {
		if k.members {
			gen = v.Classic
		}
	}
	require.NotNil(t, gen, "the generation is stored")
	require.Equal(t, int32(1), gen.Generation)
	require.Equal(t, join.MemberId, gen.Leader)
}
