package remote

import (
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/messages"
)

// framedParts lays out parts as a partition manager gathers them: the
// parts with at least inlineData bytes of records in frames of tr's pool,
// as fetchAt reads them, the others as they are. records gives a part's
// Records field. It returns the parts laid out and their frames, and
// copies of the parts to compare with.
func framedParts[P proto.Message](tr *Transport, parts []P, records func(P) *[]byte) (laid []P, frames [][]byte, want []P) {
	frames = make([][]byte, len(parts))
	for i, p := range parts {
		want = append(want, proto.Clone(p).(P))
		r := proto.Clone(p).(P)
		if len(*records(p)) >= inlineData {
			var framed *messages.FetchResponse
			framed, frames[i] = fetchFrameOf(tr, *records(p))
			*records(r) = framed.Records
		}
		laid = append(laid, r)
	}
	return laid, frames, want
}

// fetchesOf is framedParts for the answers of several partitions to a
// consumer: the response, its frames, and a copy to compare with.
func fetchesOf(tr *Transport, corrID int64, parts []*messages.FetchResponse) (*messages.FetchPartitionsResponse, [][]byte, *messages.FetchPartitionsResponse) {
	laid, frames, want := framedParts(tr, parts, func(p *messages.FetchResponse) *[]byte { return &p.Records })
	return &messages.FetchPartitionsResponse{CorrelationId: corrID, Partitions: laid}, frames,
		&messages.FetchPartitionsResponse{CorrelationId: corrID, Partitions: want}
}

// fuzzedParts makes n%16 parts with part: by turns one with large bytes of
// records, one with small, and one with none, which failed when failed is
// set. No records are nil records, as proto decodes them.
func fuzzedParts[P any](n uint8, small, large uint16, failed bool, part func(i int, records []byte, failed bool) P) []P {
	var parts []P
	for i := range int(n % 16) {
		var records []byte
		switch i % 3 {
		case 0:
			records = patterned(int(large), byte(i))
		case 1:
			records = patterned(int(small), byte(i))
		}
		if len(records) == 0 {
			records = nil
		}
		parts = append(parts, part(i, records, failed && i%3 == 2))
	}
	return parts
}

// requireReadsBack checks that g, gathered when ok, is in frames exactly
// when some part is, and reads back with proto, into got, as want.
func requireReadsBack(t *testing.T, g gatheredPieces, ok bool, frames [][]byte, want, got proto.Message) {
	t.Helper()
	require.Equal(t, countFrames(frames) > 0, ok)
	if !ok {
		return
	}
	var b []byte
	for _, p := range g.pieces {
		b = append(b, p...)
	}
	require.Len(t, b, g.size)
	require.NoError(t, proto.Unmarshal(b, got))
	require.True(t, proto.Equal(want, got), "got %v", got)
}

// The answers of several partitions to another actor system go as a
// token, and the stream writes their fields and each frame as it lies,
// then hands the frames back to the pool: the records are not copied, and
// the message decodes to the same response. Parts without a frame (an
// error, few records) travel copied beside them.
func TestFetchesMessage(t *testing.T) {
	system := actortest.System(t)
	far := actor.NewPID("127.0.0.1:9092", "consumer")
	for _, parts := range [][]*messages.FetchResponse{
		{{Topic: "orders", Partition: 2, HighWatermark: 1 << 40, Offset: 7, CorrelationId: 9, LeaderEpoch: 3, Records: patterned(64<<10, 1)}},
		{
			{Topic: "a", Partition: 0, Offset: 1, Records: patterned(100, 2)},
			{Topic: "a", Partition: 1, Error: messages.ErrorCode_NOT_LEADER_OR_FOLLOWER, ErrorMessage: "node 1 follows"},
			{Topic: strings.Repeat("t", maxTopicNameLength), Partition: math.MaxInt32, HighWatermark: math.MaxInt64, LogStartOffset: -1,
				CorrelationId: math.MinInt64, Offset: -2, LeaderEpoch: -1, Records: patterned(inlineData, 3)},
			{Topic: "b", Partition: 7},
			{Topic: "b", Partition: 8, Records: patterned(1<<20, 4)},
			{Topic: "b", Partition: 9, Records: patterned(5<<10, 5)},
		},
	} {
		tr := NewTransport()
		resp, frames, want := fetchesOf(tr, 42, parts)
		msg := tr.FetchesMessage(system, far, resp, frames)
		require.IsType(t, &encodedMessage{}, msg)
		before := tr.PoolStats()
		out, got := sendThroughCodec(t, tr, msg.(proto.Message))
		require.True(t, proto.Equal(want, got), "got %v", got)
		handedOver := 0
		for i, p := range resp.Partitions {
			if frames[i] == nil {
				continue
			}
			for _, buf := range out {
				if within(p.Records, buf.ReadOnlyData()) {
					handedOver++
				}
			}
		}
		require.Equal(t, countFrames(frames), handedOver, "each frame written as it lies")
		require.Zero(t, tr.outgoing.pending(), "the stream took the frames")
		out.Free()
		require.Equal(t, before.Puts+int64(countFrames(frames)), tr.PoolStats().Puts, "each frame back in the pool once written")
	}
}

func countFrames(frames [][]byte) int {
	n := 0
	for _, f := range frames {
		if f != nil {
			n++
		}
	}
	return n
}

// To a local consumer, with no frame, or without a transport, the
// response goes as it is.
func TestFetchesMessageAsItIs(t *testing.T) {
	system := actortest.System(t)
	far, near := actor.NewPID("127.0.0.1:9092", "consumer"), system.NewLocalPID("consumer")
	tr := NewTransport()
	resp, frames, _ := fetchesOf(tr, 1, []*messages.FetchResponse{{Topic: "t", Records: patterned(64<<10, 1)}})
	require.Same(t, resp, tr.FetchesMessage(system, near, resp, frames))
	var none *Transport
	require.Same(t, resp, none.FetchesMessage(system, far, resp, frames))
	small, noFrames, _ := fetchesOf(tr, 1, []*messages.FetchResponse{{Topic: "t", Records: patterned(100, 1)}, {Topic: "t", Partition: 1}})
	require.Same(t, small, tr.FetchesMessage(system, far, small, noFrames))
	bad, badFrames, _ := fetchesOf(tr, 1, []*messages.FetchResponse{{Topic: "\xff", Records: patterned(100, 1)}, {Topic: "t", Records: patterned(64<<10, 1)}})
	require.Same(t, bad, tr.FetchesMessage(system, far, bad, badFrames), "proto refuses what is not UTF-8, and says so when it sends it")
	require.Zero(t, tr.outgoing.pending())
}

// However its parts are laid out, a response gathered as pieces reads back
// with proto as the same message.
func FuzzGatherFetchResponses(f *testing.F) {
	f.Add(int64(7), "orders", uint8(3), uint16(100), uint16(5000), int32(2), int64(99), false)
	f.Add(int64(-1), "", uint8(1), uint16(0), uint16(0), int32(-1), int64(-1), true)
	f.Add(int64(math.MaxInt64), strings.Repeat("x", maxTopicNameLength), uint8(8), uint16(65535), uint16(4096), int32(math.MaxInt32), int64(math.MinInt64), false)
	f.Fuzz(func(t *testing.T, corrID int64, topic string, n uint8, small, large uint16, partition int32, offset int64, failed bool) {
		if len(topic) > maxTopicNameLength || !utf8.ValidString(topic) {
			return // no partition has such a topic
		}
		parts := fuzzedParts(n, small, large, failed, func(i int, records []byte, failed bool) *messages.FetchResponse {
			p := &messages.FetchResponse{Topic: topic, Partition: partition + int32(i), Offset: offset, HighWatermark: offset + int64(i), CorrelationId: corrID, Records: records}
			if failed {
				p.Error, p.ErrorMessage = messages.ErrorCode_KAFKA_STORAGE_ERROR, topic
			}
			return p
		})
		resp, frames, want := fetchesOf(NewTransport(), corrID, parts)
		g, ok := gatherFetchResponses(resp, frames)
		requireReadsBack(t, g, ok, frames, want, &messages.FetchPartitionsResponse{})
	})
}

// replicaFetchOf is framedParts for a leader's answer to a follower: the
// response, its frames, and a copy to compare with.
func replicaFetchOf(tr *Transport, corrID uint64, parts []*messages.ReplicaFetchedPartition) (*messages.ReplicaFetchResponse, [][]byte, *messages.ReplicaFetchResponse) {
	laid, frames, want := framedParts(tr, parts, func(p *messages.ReplicaFetchedPartition) *[]byte { return &p.Records })
	return &messages.ReplicaFetchResponse{CorrelationId: corrID, Partitions: laid}, frames,
		&messages.ReplicaFetchResponse{CorrelationId: corrID, Partitions: want}
}

// A leader's answer to a follower on another node goes as a token, as a
// consumer's does: the stream writes each frame as it lies and hands it
// back to the pool, and the message decodes to the same response. To a
// local follower, with no frame, or without a transport, it goes as it is.
func TestReplicaFetchMessage(t *testing.T) {
	system := actortest.System(t)
	far, near := actor.NewPID("127.0.0.1:9092", "fetcher"), system.NewLocalPID("fetcher")
	parts := []*messages.ReplicaFetchedPartition{
		{Topic: "orders", Partition: 2, FetchOffset: 7, HighWatermark: 1 << 40, LogStartOffset: 3, Records: patterned(64<<10, 1)},
		{Topic: "orders", Partition: 3, Error: messages.ErrorCode_FENCED_LEADER_EPOCH, ErrorMessage: "epoch 4 is past"},
		{Topic: strings.Repeat("t", maxTopicNameLength), Partition: math.MaxInt32, FetchOffset: math.MaxInt64, HighWatermark: -1, LogStartOffset: -1, Records: patterned(inlineData, 2)},
		{Topic: "b", Partition: 9, Records: patterned(100, 3)},
	}
	tr := NewTransport()
	resp, frames, want := replicaFetchOf(tr, math.MaxUint64, parts)
	msg := tr.ReplicaFetchMessage(system, far, resp, frames)
	require.IsType(t, &encodedMessage{}, msg)
	before := tr.PoolStats()
	out, got := sendThroughCodec(t, tr, msg.(proto.Message))
	require.True(t, proto.Equal(want, got), "got %v", got)
	require.Zero(t, tr.outgoing.pending(), "the stream took the frames")
	out.Free()
	require.Equal(t, before.Puts+int64(countFrames(frames)), tr.PoolStats().Puts, "each frame back in the pool once written")

	resp, frames, _ = replicaFetchOf(tr, 1, parts)
	require.Same(t, resp, tr.ReplicaFetchMessage(system, near, resp, frames))
	var none *Transport
	require.Same(t, resp, none.ReplicaFetchMessage(system, far, resp, frames))
	small, noFrames, _ := replicaFetchOf(tr, 1, parts[1:2])
	require.Same(t, small, tr.ReplicaFetchMessage(system, far, small, noFrames))
	require.Zero(t, tr.outgoing.pending())
}

// However its parts are laid out, a leader's answer gathered as pieces
// reads back with proto as the same message.
func FuzzGatherReplicaFetch(f *testing.F) {
	f.Add(uint64(7), "orders", uint8(3), uint16(100), uint16(5000), int32(2), int64(99), false)
	f.Add(uint64(0), "", uint8(1), uint16(0), uint16(0), int32(-1), int64(-1), true)
	f.Add(uint64(math.MaxUint64), strings.Repeat("x", maxTopicNameLength), uint8(8), uint16(65535), uint16(4096), int32(math.MaxInt32), int64(math.MinInt64), false)
	f.Fuzz(func(t *testing.T, corrID uint64, topic string, n uint8, small, large uint16, partition int32, offset int64, failed bool) {
		if len(topic) > maxTopicNameLength || !utf8.ValidString(topic) {
			return // no partition has such a topic
		}
		parts := fuzzedParts(n, small, large, failed, func(i int, records []byte, failed bool) *messages.ReplicaFetchedPartition {
			p := &messages.ReplicaFetchedPartition{Topic: topic, Partition: partition + int32(i), FetchOffset: offset, HighWatermark: offset + int64(i), LogStartOffset: -offset, Records: records}
			if failed {
				p.Error, p.ErrorMessage = messages.ErrorCode_KAFKA_STORAGE_ERROR, topic
			}
			return p
		})
		resp, frames, want := replicaFetchOf(NewTransport(), corrID, parts)
		g, ok := gatherReplicaFetch(resp, frames)
		requireReadsBack(t, g, ok, frames, want, &messages.ReplicaFetchResponse{})
	})
}
