package partition

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/actors/remote"
	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

const fetchesTestTimeout = 20 * time.Second

// fetchesFixture is a partition manager with partitions t-0 to t-(n-1)
// started in one log directory.
type fetchesFixture struct {
	system  *actor.ActorSystem
	manager *actor.PID
	// parked gets a token each time a gather parks.
	parked chan struct{}
}

func newFetchesFixture(t *testing.T, partitions int) *fetchesFixture {
	t.Helper()
	f := &fetchesFixture{system: actortest.System(t), parked: make(chan struct{}, 64)}
	dir := t.TempDir()
	f.manager = f.system.Root.Spawn(NewPartitionManagerProps(PartitionManagerConfig{
		FS: disk.OS, NodeID: 1, Transport: remote.NewTransport(), LogDirs: map[string]*actor.PID{dir: nil},
		Logger:       logrus.NewEntry(actortest.Logger(t, logrus.WarnLevel)),
		gatherParked: func() { f.parked <- struct{}{} },
	}))
	start := &messages.StartPartitionsRequest{}
	for i := range partitions {
		start.Partitions = append(start.Partitions, &messages.PartitionAssignment{Topic: "t", Partition: int32(i), NodeId: 1, LogDir: dir})
	}
	resp, err := actors.Request[*messages.StartPartitionsResponse](context.Background(), f.system.Root, f.manager, start, fetchesTestTimeout)
	require.NoError(t, err)
	require.Equal(t, messages.ErrorCode_NONE, resp.GetError(), resp.GetErrorMessage())
	return f
}

// partition is the PID of partition t-i, a child of the manager.
func (f *fetchesFixture) partition(i int) *actor.PID {
	return actor.NewPID(f.manager.Address, f.manager.Id+"/"+disk.PartitionDirName(disk.TopicPartition{Topic: "t", Partition: int32(i)}))
}

// produce appends one batch of values to partition t-i.
func (f *fetchesFixture) produce(t *testing.T, i int, values ...string) {
	t.Helper()
	records, err := encodeBatch(values...)
	require.NoError(t, err)
	resp, err := actors.Request[*messages.ProduceResponse](context.Background(), f.system.Root, f.partition(i),
		&messages.ProduceRequest{Topic: "t", Partition: int32(i), Acks: 1, Records: records}, fetchesTestTimeout)
	require.NoError(t, err)
	require.Equal(t, messages.ErrorCode_NONE, resp.GetError(), resp.GetErrorMessage())
}

// fetch sends req to the manager and returns a channel of its answer.
func (f *fetchesFixture) fetch(t *testing.T, req *messages.FetchPartitionsRequest) chan *messages.FetchPartitionsResponse {
	t.Helper()
	answer := make(chan *messages.FetchPartitionsResponse, 1)
	go func() {
		resp, err := actors.Request[*messages.FetchPartitionsResponse](context.Background(), f.system.Root, f.manager, req, fetchesTestTimeout)
		if err != nil {
			resp = &messages.FetchPartitionsResponse{Error: messages.ErrorCode_UNKNOWN_SERVER_ERROR, ErrorMessage: err.Error()}
		}
		answer <- resp
	}()
	return answer
}

// answerOf waits for a fetch's answer, which must be one.
func answerOf(t *testing.T, answer chan *messages.FetchPartitionsResponse) *messages.FetchPartitionsResponse {
	t.Helper()
	resp := <-answer
	require.NotEqual(t, messages.ErrorCode_UNKNOWN_SERVER_ERROR, resp.GetError(), resp.GetErrorMessage())
	return resp
}

// waitParked waits until a gather parks.
func (f *fetchesFixture) waitParked(t *testing.T) {
	t.Helper()
	select {
	case <-f.parked:
	case <-time.After(fetchesTestTimeout):
		t.Fatal("the fetch did not park")
	}
}

// sync returns once the manager has handled what was sent to it before.
func (f *fetchesFixture) sync(t *testing.T) {
	t.Helper()
	_, err := actors.Request[*messages.UpdatePartitionsResponse](context.Background(), f.system.Root, f.manager, &messages.UpdatePartitionsRequest{}, fetchesTestTimeout)
	require.NoError(t, err)
}

// fetchAll asks for partitions t-0 to t-(n-1) from offset 0.
func fetchAll(n int, minBytes, maxWaitMs, maxBytes int32) *messages.FetchPartitionsRequest {
	req := &messages.FetchPartitionsRequest{CorrelationId: 7, MinBytes: minBytes, MaxWaitMs: maxWaitMs, MaxBytes: maxBytes}
	for i := range n {
		req.Partitions = append(req.Partitions, &messages.FetchPartition{Topic: "t", Partition: int32(i), MaxBytes: 1 << 20})
	}
	return req
}

// valuesOf decodes the values of records.
func valuesOf(t *testing.T, records []byte) []string {
	t.Helper()
	var values []string
	rest, err := wire.Batches(records, func(batch []byte, _ wire.Header) error {
		return wire.Records(batch, func(r wire.Record) error {
			values = append(values, string(r.Value))
			return nil
		})
	})
	require.NoError(t, err)
	require.Empty(t, rest, "whole batches")
	return values
}

// requireParts checks that resp answers req's parts in order, each with
// the values of want (none where nil) and no error.
func requireParts(t *testing.T, req *messages.FetchPartitionsRequest, resp *messages.FetchPartitionsResponse, want ...[]string) {
	t.Helper()
	require.Equal(t, messages.ErrorCode_NONE, resp.GetError(), resp.GetErrorMessage())
	require.Equal(t, req.GetCorrelationId(), resp.GetCorrelationId())
	require.Len(t, resp.GetPartitions(), len(req.GetPartitions()))
	for i, p := range resp.GetPartitions() {
		require.Equal(t, req.GetPartitions()[i].GetPartition(), p.GetPartition(), "part %d", i)
		require.Equal(t, messages.ErrorCode_NONE, p.GetError(), "part %d: %s", i, p.GetErrorMessage())
		require.Equal(t, req.GetCorrelationId(), p.GetCorrelationId())
		require.Equal(t, want[i], valuesOf(t, p.GetRecords()), "part %d", i)
	}
}

// A fetch of several partitions whose records reach min_bytes is answered
// at once, each part with its own records, in the request's order; so is
// one with a part the node has no replica of.
func TestFetchPartitionsAnsweredAtOnce(t *testing.T) {
	f := newFetchesFixture(t, 3)
	f.produce(t, 0, "a", "b")
	f.produce(t, 2, "c")
	req := fetchAll(3, 1, int32(time.Minute/time.Millisecond), 0)
	requireParts(t, req, answerOf(t, f.fetch(t, req)), []string{"a", "b"}, nil, []string{"c"})

	// Enough only together.
	f.produce(t, 1, "d")
	req = fetchAll(3, 0, 0, 0)
	all := answerOf(t, f.fetch(t, req))
	req = fetchAll(3, int32(len(all.GetPartitions()[0].GetRecords())+len(all.GetPartitions()[1].GetRecords())+1), int32(time.Minute/time.Millisecond), 0)
	requireParts(t, req, answerOf(t, f.fetch(t, req)), []string{"a", "b"}, []string{"d"}, []string{"c"})

	req = fetchAll(2, 1<<20, int32(time.Minute/time.Millisecond), 0)
	req.Partitions[1].Topic = "elsewhere"
	resp := answerOf(t, f.fetch(t, req))
	require.Equal(t, []string{"a", "b"}, valuesOf(t, resp.GetPartitions()[0].GetRecords()))
	require.Equal(t, messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, resp.GetPartitions()[1].GetError(), "no replica of it here")
	require.Equal(t, "elsewhere", resp.GetPartitions()[1].GetTopic())
}

// A fetch whose partitions hold too little parks, and is answered once
// what they append makes up its min_bytes: one partition's append wakes
// it, and appends too small together only with others.
func TestFetchPartitionsParkedThenWoken(t *testing.T) {
	f := newFetchesFixture(t, 3)
	req := fetchAll(3, 1, int32(time.Minute/time.Millisecond), 0)
	answer := f.fetch(t, req)
	f.waitParked(t)
	f.produce(t, 1, "a")
	requireParts(t, req, answerOf(t, answer), nil, []string{"a"}, nil)

	one, err := encodeBatch("b")
	require.NoError(t, err)
	req = fetchAll(3, int32(2*len(one)), int32(time.Minute/time.Millisecond), 0)
	req.Partitions[1].Offset = 1
	answer = f.fetch(t, req)
	f.waitParked(t)
	f.produce(t, 0, "b")
	f.sync(t) // the manager heard of the append: one batch is too little
	select {
	case resp := <-answer:
		t.Fatalf("answered with too little: %v", resp)
	default:
	}
	f.produce(t, 2, "c")
	requireParts(t, req, answerOf(t, answer), []string{"b"}, nil, []string{"c"})
}

// A fetch whose partitions append nothing is answered with nothing once
// its max wait has passed.
func TestFetchPartitionsAnsweredAtMaxWait(t *testing.T) {
	f := newFetchesFixture(t, 3)
	req := fetchAll(3, 1, 100, 0)
	answer := f.fetch(t, req)
	f.waitParked(t)
	requireParts(t, req, answerOf(t, answer), nil, nil, nil)
}

// A fetch that replaces a parked one of the same sender ends its wait: the
// one replaced is answered with what there is, and the new one waits on.
func TestFetchPartitionsReplaced(t *testing.T) {
	f := newFetchesFixture(t, 2)
	first := make(chan *messages.FetchPartitionsResponse, 2)
	sender := f.system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *messages.FetchPartitionsRequest:
			ctx.Request(f.manager, m)
		case *messages.FetchPartitionsResponse:
			first <- m
		}
	}))
	req := fetchAll(1, 1, int32(time.Minute/time.Millisecond), 0)
	f.system.Root.Send(sender, req)
	f.waitParked(t)
	again := fetchAll(2, 1, int32(time.Minute/time.Millisecond), 0)
	again.CorrelationId, again.Replaces = 8, req.GetCorrelationId()
	f.system.Root.Send(sender, again)
	replaced := answerOf(t, first)
	requireParts(t, req, replaced, nil)
	f.waitParked(t)
	f.produce(t, 1, "a")
	requireParts(t, again, answerOf(t, first), nil, []string{"a"})
}

// A partition that stops leading while a fetch waits for it answers its
// part at once, with the error a consumer refreshes its metadata for.
func TestFetchPartitionsPartThatStopsLeading(t *testing.T) {
	f := newFetchesFixture(t, 2)
	req := fetchAll(2, 1, int32(time.Minute/time.Millisecond), 0)
	answer := f.fetch(t, req)
	f.waitParked(t)
	f.system.Root.Send(f.partition(1), &messages.PartitionState{Topic: "t", Partition: 1, Leader: 2, LeaderEpoch: 1, Replicas: []int32{1, 2}, Isr: []int32{1, 2}})
	resp := answerOf(t, answer)
	require.Equal(t, messages.ErrorCode_NONE, resp.GetPartitions()[0].GetError())
	require.Equal(t, messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, resp.GetPartitions()[1].GetError(), resp.GetPartitions()[1].GetErrorMessage())
}

// The answer's records are trimmed to the request's max_bytes, whole
// batches at a time: the first part with records whole, whatever its
// size, the next what room is left, the last none.
func TestFetchPartitionsMaxBytes(t *testing.T) {
	f := newFetchesFixture(t, 3)
	value := func(p, i int) string { return fmt.Sprintf("%d-%d-%0500d", p, i, 0) }
	for p := range 3 {
		for i := range 4 {
			f.produce(t, p, value(p, i))
		}
	}
	batch, err := encodeBatch(value(0, 0))
	require.NoError(t, err)
	req := fetchAll(3, 1, 0, int32(len(batch)*5+len(batch)/2))
	resp := answerOf(t, f.fetch(t, req))
	requireParts(t, req, resp,
		[]string{value(0, 0), value(0, 1), value(0, 2), value(0, 3)},
		[]string{value(1, 0)},
		nil)
	require.Equal(t, int64(4), resp.GetPartitions()[2].GetHighWatermark(), "the part cut tells what there is")
}

// A request refused whole changes nothing and says why; a part with sizes
// its partition refuses is answered with the error, the others as they
// are.
func TestFetchPartitionsBadInput(t *testing.T) {
	f := newFetchesFixture(t, 2)
	f.produce(t, 0, "a")
	req := fetchAll(2, 1, 0, -1)
	require.Equal(t, messages.ErrorCode_INVALID_FETCH_SIZE, answerOf(t, f.fetch(t, req)).GetError())
	req = fetchAll(2, 1, 0, 0)
	req.Partitions = append(req.Partitions, proto.CloneOf(req.Partitions[0]))
	resp := answerOf(t, f.fetch(t, req))
	require.Equal(t, messages.ErrorCode_INVALID_REQUEST, resp.GetError())
	require.Empty(t, resp.GetPartitions())
	req = fetchAll(2, 1, 0, 0)
	req.Partitions[1].MaxBytes = -5
	resp = answerOf(t, f.fetch(t, req))
	require.Equal(t, []string{"a"}, valuesOf(t, resp.GetPartitions()[0].GetRecords()))
	require.Equal(t, messages.ErrorCode_INVALID_FETCH_SIZE, resp.GetPartitions()[1].GetError())
}

// A fetch is answered even when one of its partitions stopped with the
// part in its mailbox, or never answers: those parts with
// REQUEST_TIMED_OUT, the others as they are, once the fetch's max wait and
// a second have passed.
func TestFetchPartitionsNotHeldBackByAStoppedPartition(t *testing.T) {
	system := actortest.System(t)
	logger := logrus.NewEntry(actortest.Logger(t, logrus.WarnLevel))
	config, err := topic.ParseConfig(nil)
	require.NoError(t, err)
	spawn := func(partition int32) *actor.PID {
		return system.Root.Spawn(NewPartitionProps(PartitionConfig{
			Topic: "t", Partition: partition, FS: disk.OS, LogDir: t.TempDir(), Config: config, Logger: logger,
		}))
	}
	stopped, live := spawn(0), spawn(1)
	require.NoError(t, system.Root.PoisonFuture(stopped).Wait())
	records, err := encodeBatch("a")
	require.NoError(t, err)
	produced, err := actors.Request[*messages.ProduceResponse](context.Background(), system.Root, live,
		&messages.ProduceRequest{Topic: "t", Partition: 1, Acks: 1, Records: records}, fetchesTestTimeout)
	require.NoError(t, err)
	require.Equal(t, messages.ErrorCode_NONE, produced.GetError())
	silent := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	m := &partitionManager{
		cfg: PartitionManagerConfig{NodeID: 1, Logger: logger},
		children: map[disk.TopicPartition]*actor.PID{
			{Topic: "t", Partition: 0}: stopped, {Topic: "t", Partition: 1}: live, {Topic: "t", Partition: 2}: silent,
		},
		gathers:  newGathers(),
		outboxes: actors.NewOutboxes(logger),
		logger:   logger,
	}
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return m }))
	req := fetchAll(3, 1, 100, 0)
	start := time.Now()
	resp, err := actors.Request[*messages.FetchPartitionsResponse](context.Background(), system.Root, pid, req, fetchesTestTimeout)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), gatherSlack, "the live partition alone is not all")
	require.Len(t, resp.GetPartitions(), 3)
	require.Equal(t, messages.ErrorCode_REQUEST_TIMED_OUT, resp.GetPartitions()[0].GetError())
	require.Equal(t, []string{"a"}, valuesOf(t, resp.GetPartitions()[1].GetRecords()))
	require.Equal(t, messages.ErrorCode_REQUEST_TIMED_OUT, resp.GetPartitions()[2].GetError())
}
