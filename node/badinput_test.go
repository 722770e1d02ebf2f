package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

// endOffset asks a partition for its log end offset.
func endOffset(t *testing.T, n *Node, pid *actor.PID) int64 {
	t.Helper()
	st := request[*messages.PartitionStatusResponse](t, n, pid, &messages.PartitionStatusRequest{})
	require.Equal(t, messages.ErrorCode_NONE, st.Error, st.ErrorMessage)
	return st.LogEndOffset
}

func TestBadProduceRequestsChangeNothing(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	created := request[*messages.CreateTopicResponse](t, n, n.Metadata(), &messages.CreateTopicRequest{
		Name: "events", Partitions: 1, Configs: map[string]string{"max.message.bytes": "2000"},
	})
	require.Equal(t, messages.ErrorCode_NONE, created.Error, created.ErrorMessage)
	pid := partitionPID(t, n, "events", 0)
	good := request[*messages.ProduceResponse](t, n, pid, &messages.ProduceRequest{Topic: "events", Acks: 1, Records: actortest.Batch(t, "first")})
	require.Equal(t, messages.ErrorCode_NONE, good.Error)

	flipped := actortest.Batch(t, "x", "y")
	flipped[len(flipped)-1] ^= 0x01
	oversized := actortest.Batch(t, string(make([]byte, 3000)))
	truncated := actortest.Batch(t, "z")
	truncated = truncated[:len(truncated)-3]
	badMagic := actortest.Batch(t, "m")
	badMagic[16] = 1

	for _, tc := range []struct {
		name    string
		acks    int32
		records []byte
		want    messages.ErrorCode
	}{
		{"bad crc", 1, flipped, messages.ErrorCode_CORRUPT_MESSAGE},
		{"bad crc after a good batch", -1, append(actortest.Batch(t, "ok"), flipped...), messages.ErrorCode_CORRUPT_MESSAGE},
		{"truncated batch", 1, truncated, messages.ErrorCode_CORRUPT_MESSAGE},
		{"bad magic", 1, badMagic, messages.ErrorCode_CORRUPT_MESSAGE},
		{"empty request", 1, nil, messages.ErrorCode_CORRUPT_MESSAGE},
		{"garbage", 1, []byte("this is not a record batch at all, not even close"), messages.ErrorCode_CORRUPT_MESSAGE},
		{"oversized batch", -1, oversized, messages.ErrorCode_MESSAGE_TOO_LARGE},
		{"bad acks", 2, actortest.Batch(t, "a"), messages.ErrorCode_INVALID_REQUIRED_ACKS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := request[*messages.ProduceResponse](t, n, pid, &messages.ProduceRequest{Topic: "events", Acks: tc.acks, Records: tc.records})
			require.Equal(t, tc.want, resp.Error, resp.ErrorMessage)
			require.NotEmpty(t, resp.ErrorMessage)
			if tc.want == messages.ErrorCode_MESSAGE_TOO_LARGE {
				require.Equal(t, int32(2000), resp.MaxMessageBytes, "the refusal names the topic's limit")
			} else {
				require.Zero(t, resp.MaxMessageBytes)
			}
			require.Equal(t, int64(1), endOffset(t, n, pid), "a refused request must append nothing")
		})
	}
	require.Equal(t, []string{"0:first"}, fetchValues(t, n, pid, "events", 0))

	// Fetches out of range are refused with the range.
	resp := request[*messages.FetchResponse](t, n, pid, &messages.FetchRequest{Topic: "events", Offset: 5})
	require.Equal(t, messages.ErrorCode_OFFSET_OUT_OF_RANGE, resp.Error)
	require.Equal(t, int64(1), resp.HighWatermark)
}

// Requests for several partitions in one ProduceRequests are each answered
// as their partition would answer them alone, in one ProduceResponses in
// their order; a bad one changes nothing and keeps none of the others from
// landing, and a partition the node does not have is answered
// NOT_LEADER_OR_FOLLOWER.
func TestProduceRequestsAnsweredEachAsAlone(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	created := request[*messages.CreateTopicResponse](t, n, n.Metadata(), &messages.CreateTopicRequest{Name: "events", Partitions: 2})
	require.Equal(t, messages.ErrorCode_NONE, created.Error, created.ErrorMessage)
	flipped := actortest.Batch(t, "x")
	flipped[len(flipped)-1] ^= 0x01
	reqs := []*messages.ProduceRequest{
		{Topic: "events", Partition: 0, Acks: 1, Records: actortest.Batch(t, "a"), CorrelationId: 1},
		{Topic: "events", Partition: 1, Acks: 1, Records: flipped, CorrelationId: 2},
		{Topic: "nope", Partition: 0, Acks: 1, Records: actortest.Batch(t, "b"), CorrelationId: 3},
		{Topic: "events", Partition: -1, Acks: -1, Records: actortest.Batch(t, "c"), CorrelationId: 4},
		{Topic: "events", Partition: 1, Acks: 2, Records: actortest.Batch(t, "d"), CorrelationId: 5},
		{Topic: "events", Partition: 1, Acks: -1, Records: actortest.Batch(t, "e"), CorrelationId: 6},
		{Topic: "events", Partition: 0, Acks: 1, Records: actortest.Batch(t, "f"), CorrelationId: 7},
	}
	manager := actor.NewPID(n.System().Address(), actors.PartitionManagerName)
	resp := request[*messages.ProduceResponses](t, n, manager, &messages.ProduceRequests{Requests: reqs})
	want := []struct {
		code   messages.ErrorCode
		offset int64
	}{
		{messages.ErrorCode_NONE, 0},
		{messages.ErrorCode_CORRUPT_MESSAGE, -1},
		{messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, -1},
		{messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, -1},
		{messages.ErrorCode_INVALID_REQUIRED_ACKS, -1},
		{messages.ErrorCode_NONE, 0},
		{messages.ErrorCode_NONE, 1},
	}
	require.Len(t, resp.Responses, len(want))
	for i, r := range resp.Responses {
		require.Equal(t, reqs[i].CorrelationId, r.CorrelationId, "answer %d", i)
		require.Equal(t, reqs[i].Topic, r.Topic, "answer %d", i)
		require.Equal(t, reqs[i].Partition, r.Partition, "answer %d", i)
		require.Equal(t, want[i].code, r.Error, "answer %d: %s", i, r.ErrorMessage)
		require.Equal(t, want[i].offset, r.BaseOffset, "answer %d", i)
	}
	require.Equal(t, []string{"0:a", "1:f"}, fetchValues(t, n, partitionPID(t, n, "events", 0), "events", 0))
	require.Equal(t, []string{"0:e"}, fetchValues(t, n, partitionPID(t, n, "events", 1), "events", 0))
}

// A producer's partition leader epoch is not kept: the leader stamps its
// own on each batch it appends, as Kafka's does.
func TestLeaderStampsItsEpoch(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	created := request[*messages.CreateTopicResponse](t, n, n.Metadata(), &messages.CreateTopicRequest{Name: "events", Partitions: 1})
	require.Equal(t, messages.ErrorCode_NONE, created.Error, created.ErrorMessage)
	pid := partitionPID(t, n, "events", 0)
	for i, epoch := range []int32{7, -1, 1 << 30} {
		b := actortest.Batch(t, fmt.Sprint(i))
		wire.SetLeaderEpoch(b, epoch)
		resp := request[*messages.ProduceResponse](t, n, pid, &messages.ProduceRequest{Topic: "events", Acks: 1, Records: b})
		require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
	}
	fetched := request[*messages.FetchResponse](t, n, pid, &messages.FetchRequest{Topic: "events", MaxBytes: 1 << 20})
	require.Equal(t, messages.ErrorCode_NONE, fetched.Error, fetched.ErrorMessage)
	var epochs []int32
	_, err := wire.Batches(fetched.Records, func(_ []byte, h wire.Header) error {
		epochs = append(epochs, h.LeaderEpoch)
		return nil
	})
	require.NoError(t, err)
	// The epoch the metadata gave the partition's leader, 0 for a new one,
	// whatever the producer wrote.
	require.Equal(t, []int32{0, 0, 0}, epochs)
	require.Equal(t, []string{"0:0", "1:1", "2:2"}, fetchValues(t, n, pid, "events", 0))
}

func TestUnknownTopicAndBadTopicRequests(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	md := request[*messages.MetadataResponse](t, n, n.Metadata(), &messages.MetadataRequest{Topics: []string{"nope"}})
	require.Len(t, md.Topics, 1)
	require.Equal(t, messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, md.Topics[0].Error)

	for _, tc := range []struct {
		req  *messages.CreateTopicRequest
		want messages.ErrorCode
	}{
		{&messages.CreateTopicRequest{Name: "bad name", Partitions: 1}, messages.ErrorCode_INVALID_TOPIC},
		{&messages.CreateTopicRequest{Name: "", Partitions: 1}, messages.ErrorCode_INVALID_TOPIC},
		{&messages.CreateTopicRequest{Name: "t", Partitions: 0}, messages.ErrorCode_INVALID_PARTITIONS},
		{&messages.CreateTopicRequest{Name: "t", Partitions: 1, Configs: map[string]string{"retention.ms": "soon"}}, messages.ErrorCode_INVALID_CONFIG},
		{&messages.CreateTopicRequest{Name: "t", Partitions: 1, Configs: map[string]string{"no.such.config": "1"}}, messages.ErrorCode_INVALID_CONFIG},
	} {
		resp := request[*messages.CreateTopicResponse](t, n, n.Metadata(), tc.req)
		require.Equal(t, tc.want, resp.Error, "%v: %s", tc.req, resp.ErrorMessage)
	}
	md = request[*messages.MetadataResponse](t, n, n.Metadata(), &messages.MetadataRequest{})
	require.Empty(t, md.Topics, "refused creates must leave no topic behind")

	del := request[*messages.DeleteTopicResponse](t, n, n.Metadata(), &messages.DeleteTopicRequest{Name: "nope"})
	require.Equal(t, messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, del.Error)
}

// TestUnknownMessageTypeFromPeer sends the node a protoactor message batch
// naming a type this binary does not know. Without the stream interceptor
// the deserializer's panic would kill the process; the node must survive and
// keep serving.
func TestUnknownMessageTypeFromPeer(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	conn, err := grpc.NewClient(n.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := remote.NewRemotingClient(conn).Receive(ctx)
	require.NoError(t, err)
	require.NoError(t, stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{
		ConnectRequest: &remote.ConnectRequest{ConnectionType: &remote.ConnectRequest_ServerConnection{
			ServerConnection: &remote.ServerConnection{SystemId: "intruder", Address: "127.0.0.1:1"},
		}},
	}}))
	require.NoError(t, stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{
		MessageBatch: &remote.MessageBatch{
			TypeNames: []string{"evil.NoSuchMessage"},
			Targets:   []*actor.PID{{Address: n.Address(), Id: actors.MetadataActorName}},
			Envelopes: []*remote.MessageEnvelope{{TypeId: 0, MessageData: []byte{0x0a, 0x01, 'x'}, Target: 0}},
		},
	}}))
	// The node drops the stream: the next receive fails.
	for {
		if _, err := stream.Recv(); err != nil {
			break
		}
	}
	// And it still serves.
	created := request[*messages.CreateTopicResponse](t, n, n.Metadata(), &messages.CreateTopicRequest{Name: "after", Partitions: 1})
	require.Equal(t, messages.ErrorCode_NONE, created.Error, created.ErrorMessage)
	pid := partitionPID(t, n, "after", 0)
	resp := request[*messages.ProduceResponse](t, n, pid, &messages.ProduceRequest{Topic: "after", Acks: 1, Records: actortest.Batch(t, "v")})
	require.Equal(t, messages.ErrorCode_NONE, resp.Error)
}
