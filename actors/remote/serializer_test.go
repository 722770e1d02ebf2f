package remote

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/messages"
)

var _ remote.Serializer = aliasSerializer{}

func TestAliasSerializerRegistered(t *testing.T) {
	require.Equal(t, "depot.ProduceRequest", produceRequestName)
	require.Equal(t, "depot.FetchResponse", fetchResponseName)
	require.Equal(t, protowire.Number(5), produceRecordsField)
	require.Equal(t, protowire.Number(7), fetchRecordsField)

	// protoactor registers proto (0) and JSON (1) itself; ours follows.
	require.Equal(t, int32(2), aliasSerializerID)
	require.Equal(t, aliasSerializerID, findAliasSerializer())
	v, err := remote.Deserialize(nil, aliasProbeTypeName, aliasSerializerID)
	require.NoError(t, err)
	require.Equal(t, aliasProbe{}, v)

	// Probing does not take ids past the end, nor proto's panic on an
	// unknown name, for ours.
	_, inRange := probeSerializer(maxSerializerProbe * 1000)
	require.False(t, inRange)
	v, inRange = probeSerializer(0)
	require.True(t, inRange)
	require.Nil(t, v)
}

// recordsMessage is a ProduceRequest or FetchResponse with every field set
// and the given records.
func recordsMessage(name string, records []byte) proto.Message {
	if name == produceRequestName {
		return &messages.ProduceRequest{Topic: "orders", Partition: 3, Acks: -1, TimeoutMs: 30000, Records: records, CorrelationId: 1 << 40}
	}
	return &messages.FetchResponse{
		Topic: "orders", Partition: 3, Error: messages.ErrorCode_OFFSET_OUT_OF_RANGE, ErrorMessage: "é",
		HighWatermark: 1 << 33, LogStartOffset: 7, Records: records, CorrelationId: -1, Offset: 99, More: true,
	}
}

func recordsOf(t *testing.T, m any) []byte {
	t.Helper()
	switch m := m.(type) {
	case *messages.ProduceRequest:
		return m.Records
	case *messages.FetchResponse:
		return m.Records
	}
	require.FailNow(t, "not a message with records", "%T", m)
	return nil
}

// allRecordsOf is every Records of m, a message that carries one or a
// ProduceRequests or ReplicaFetchResponse that carries several, in order,
// empty ones included.
func allRecordsOf(t *testing.T, m any) [][]byte {
	t.Helper()
	var all [][]byte
	switch m := m.(type) {
	case *messages.ProduceRequests:
		for _, r := range m.Requests {
			all = append(all, r.Records)
		}
	case *messages.ReplicaFetchResponse:
		for _, p := range m.Partitions {
			all = append(all, p.Records)
		}
	default:
		all = append(all, recordsOf(t, m))
	}
	return all
}

func TestAliasSerializerRoundTrip(t *testing.T) {
	for _, name := range []string{produceRequestName, fetchResponseName} {
		for _, size := range []int{-1, 0, 1, 10, inlineData, 1 << 20} {
			t.Run(fmt.Sprintf("%s/%d", name, size), func(t *testing.T) {
				var records []byte
				if size >= 0 {
					records = patterned(size, byte(size))
				}
				msg := recordsMessage(name, records)
				encoded, err := proto.Marshal(msg)
				require.NoError(t, err)
				input := bytes.Clone(encoded)

				got, err := aliasSerializer{}.Deserialize(name, encoded)
				require.NoError(t, err)
				require.True(t, proto.Equal(msg, got.(proto.Message)), "decoded:\n%v", got)
				require.Equal(t, input, encoded, "Deserialize changed its input")

				// Records alias the input, and end where the field does.
				r := recordsOf(t, got)
				if size <= 0 {
					require.Empty(t, r)
					return
				}
				require.True(t, within(r, encoded), "records copied")
				require.Equal(t, len(r), cap(r))
				at := int(uintptr(unsafe.Pointer(&r[0])) - uintptr(unsafe.Pointer(&encoded[0])))
				require.Equal(t, records, encoded[at:at+size])
				encoded[at+size-1] ^= 0xff
				require.Equal(t, records[size-1]^0xff, r[size-1], "a write to the input is seen in records")
			})
		}
	}
}

// appendBytesField appends field num of wire type bytes holding v.
func appendBytesField(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// Field order is free on the wire and a repeated scalar field's last value
// wins; the serializer reads what proto reads.
func TestAliasSerializerFieldOrder(t *testing.T) {
	for _, name := range []string{produceRequestName, fetchResponseName} {
		field := produceRecordsField
		if name == fetchResponseName {
			field = fetchRecordsField
		}
		others, err := proto.Marshal(recordsMessage(name, nil))
		require.NoError(t, err)
		first, last := patterned(5000, 1), patterned(300, 2)
		cut := proto.Size(&messages.ProduceRequest{Topic: "orders"}) // the end of field 1, topic
		tests := []struct {
			name    string
			b       []byte
			records []byte // what the decoded Records must be
		}{
			{"records first", append(appendBytesField(nil, field, first), others...), first},
			{"records in the middle", append(appendBytesField(others[:cut:cut], field, first), others[cut:]...), first},
			{"records twice, last wins", appendBytesField(append(appendBytesField(nil, field, first), others...), field, last), last},
			{"records twice, then empty", appendBytesField(append(appendBytesField(nil, field, first), others...), field, nil), nil},
			{"records as a varint, an unknown field", protowire.AppendVarint(protowire.AppendTag(appendBytesField(others, field, first), field, protowire.VarintType), 9), first},
			{"unknown fields kept", appendBytesField(protowire.AppendVarint(protowire.AppendTag(appendBytesField(others, field, first), 99, protowire.VarintType), 1), 100, []byte("x")), first},
			{"scalars repeated", append(append(bytes.Clone(others), others...), appendBytesField(nil, field, last)...), last},
		}
		for _, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				want := recordsMessage(name, nil)
				require.NoError(t, proto.Unmarshal(tt.b, want))
				got, err := aliasSerializer{}.Deserialize(name, tt.b)
				require.NoError(t, err)
				require.True(t, proto.Equal(want, got.(proto.Message)), "decoded:\n%v\nwant:\n%v", got, want)
				r := recordsOf(t, got)
				require.Equal(t, len(tt.records), len(r))
				if len(tt.records) > 0 {
					require.Equal(t, tt.records, r)
					require.True(t, within(r, tt.b), "records copied")
				}
			})
		}
	}
}

// Any other type is read as protoactor's proto serializer reads it, and
// Serialize and GetTypeName are proto's.
func TestAliasSerializerOtherTypes(t *testing.T) {
	msgs := []proto.Message{
		&messages.FetchRequest{Topic: "t", Partition: 1, Offset: 5, MaxBytes: 1 << 20, ChunkBytes: 1 << 16},
		&messages.ProduceResponse{Topic: "t", BaseOffset: 10, Error: messages.ErrorCode_NOT_LEADER_OR_FOLLOWER},
		recordsMessage(produceRequestName, patterned(100, 3)),
		recordsMessage(fetchResponseName, patterned(100, 4)),
	}
	for _, msg := range msgs {
		t.Run(string(proto.MessageName(msg)), func(t *testing.T) {
			b, err := aliasSerializer{}.Serialize(msg)
			require.NoError(t, err)
			wantBytes, wantName, err := remote.Serialize(msg, 0)
			require.NoError(t, err)
			require.Equal(t, wantBytes, b)
			name, err := aliasSerializer{}.GetTypeName(msg)
			require.NoError(t, err)
			require.Equal(t, wantName, name)

			got, err := aliasSerializer{}.Deserialize(name, b)
			require.NoError(t, err)
			want, err := remote.Deserialize(b, name, 0)
			require.NoError(t, err)
			require.True(t, proto.Equal(want.(proto.Message), got.(proto.Message)))
			require.True(t, proto.Equal(msg, got.(proto.Message)))
		})
	}
}

func TestAliasSerializerRejects(t *testing.T) {
	_, err := aliasSerializer{}.Serialize(struct{}{})
	require.ErrorIs(t, err, errNotProto)
	_, err = aliasSerializer{}.GetTypeName(42)
	require.ErrorIs(t, err, errNotProto)
	_, err = aliasSerializer{}.Deserialize("depot.NoSuchMessage", nil)
	require.ErrorIs(t, err, errUnknownType)
	_, err = aliasSerializer{}.Deserialize("", []byte{1})
	require.ErrorIs(t, err, errUnknownType)

	valid, err := proto.Marshal(recordsMessage(produceRequestName, patterned(50, 5)))
	require.NoError(t, err)
	tests := []struct {
		name string
		b    []byte
	}{
		{"truncated", valid[:len(valid)-1]},
		{"truncated in records", valid[:len(valid)-20]},
		{"bad tag", []byte{0x80}},
		{"field zero", []byte{0x00, 0x01}},
		{"records longer than input", []byte{0x2a, 0x05, 0x01}},
		{"records length overflows", []byte{0x2a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{"records length unterminated", []byte{0x2a, 0xff}},
		{"topic not UTF-8", []byte{0x0a, 0x01, 0xff}},
		{"stray end group", []byte{0x0c}},
		{"unterminated group", []byte{0x0b, 0x08, 0x01}},
		{"bad varint", []byte{0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
	}
	for _, name := range []string{produceRequestName, fetchResponseName} {
		for _, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				_, err := aliasSerializer{}.Deserialize(name, tt.b)
				require.Error(t, err)
				require.Error(t, proto.Unmarshal(tt.b, recordsMessage(name, nil)), "proto accepts it")
			})
		}
	}
}

func FuzzRemoteSerializerDeserialize(f *testing.F) {
	for _, name := range []string{produceRequestName, fetchResponseName} {
		for _, records := range [][]byte{nil, {}, patterned(40, 6)} {
			b, err := proto.Marshal(recordsMessage(name, records))
			require.NoError(f, err)
			f.Add(b)
		}
	}
	b, err := proto.Marshal(&messages.ProduceRequests{Requests: []*messages.ProduceRequest{
		recordsMessage(produceRequestName, patterned(40, 7)).(*messages.ProduceRequest), {}, {Topic: "t", Records: []byte{1}},
	}})
	require.NoError(f, err)
	f.Add(b)
	b, err = proto.Marshal(&messages.ReplicaFetchResponse{CorrelationId: 3, Partitions: []*messages.ReplicaFetchedPartition{
		{Topic: "t", Partition: 1, FetchOffset: 9, Records: patterned(40, 8)}, {Topic: "u"}, {Error: messages.ErrorCode_OFFSET_OUT_OF_RANGE, Records: []byte{2}},
	}})
	require.NoError(f, err)
	f.Add(b)
	f.Add([]byte{})
	f.Add([]byte{0x2a, 0x02, 0x01, 0x02, 0x3a, 0x01, 0x03, 0x2a, 0x00})
	f.Add([]byte{0x28, 0x01, 0x38, 0x01, 0x0b, 0x2a, 0x00, 0x0c})
	f.Add([]byte{0x0a, 0x03, 0x2a, 0x01, 0x05, 0x08, 0x01, 0x0a, 0x00})
	actortest.AddSeedFiles(f, "FuzzRemoteSerializerDeserialize", func(b []byte) { f.Add(b) })
	f.Fuzz(func(t *testing.T, b []byte) {
		input := bytes.Clone(b)
		for _, name := range []string{produceRequestName, fetchResponseName, produceRequestsName, replicaFetchResponseName} {
			got, err := aliasSerializer{}.Deserialize(name, b)
			require.Equal(t, input, b, "Deserialize changed its input")
			var want proto.Message
			switch name {
			case produceRequestsName:
				want = &messages.ProduceRequests{}
			case replicaFetchResponseName:
				want = &messages.ReplicaFetchResponse{}
			default:
				want = recordsMessage(name, nil)
				proto.Reset(want)
			}
			werr := proto.Unmarshal(b, want)
			require.Equal(t, werr == nil, err == nil, "%s: proto: %v, ours: %v", name, werr, err)
			if err != nil {
				continue
			}
			require.True(t, proto.Equal(want, got.(proto.Message)), "%s: proto:\n%v\nours:\n%v", name, want, got)
			records := allRecordsOf(t, got)
			for _, r := range records {
				require.True(t, within(r, b), "records copied")
				require.Equal(t, len(r), cap(r))
			}
			if name == fetchResponseName {
				continue
			}
			// The codec finds the same records, to hold their buffer.
			var found [][]byte
			n, ok := aliasedRecords(name, b, func(r []byte) { found = append(found, r) })
			require.True(t, ok, "%s: decoded, but the codec finds no records", name)
			records = slices.DeleteFunc(records, func(r []byte) bool { return len(r) == 0 })
			require.Equal(t, len(records), n, "%s", name)
			require.Len(t, found, n)
			for i := range records {
				require.Same(t, &records[i][0], &found[i][0], "%s: records %d", name, i)
				require.Equal(t, len(records[i]), len(found[i]), "%s: records %d", name, i)
			}
		}
	})
}

// recordsSink answers each ProduceRequest with a FetchResponse carrying its
// records, after writing into them as a partition's append does (the base
// offset), and notes whether they came without a copy.
type recordsSink struct {
	aliased chan bool
}

func (s *recordsSink) Receive(ctx actor.Context) {
	m, ok := ctx.Message().(*messages.ProduceRequest)
	if !ok {
		return
	}
	// proto's copy of a bytes field has the capacity of its allocation's
	// size class, over the length for these sizes; an alias ends where
	// the field did.
	s.aliased <- cap(m.Records) == len(m.Records)
	binary.BigEndian.PutUint64(m.Records, uint64(m.CorrelationId))
	ctx.Respond(&messages.FetchResponse{Topic: m.Topic, Records: m.Records, CorrelationId: m.CorrelationId})
}

// newRemoteTestSystem starts an actor system with a remote on loopback,
// with a transport of its own, which it returns too; each of adjust may
// change the remote's config first. Under the race detector it skips the
// test, whose second remote would race with the first in protoactor (see
// raceEnabled).
func newRemoteTestSystem(t *testing.T, adjust ...func(*remote.Config)) (*actor.ActorSystem, *Transport) {
	t.Helper()
	if raceEnabled {
		t.Skip("protoactor's Remote.Start races with the other remotes of the process (grpclog.SetLoggerV2)")
	}
	logger := logrus.New()
	logger.SetOutput(io.Discard)
	system := actors.NewActorSystem(logger)
	tr := NewTransport()
	cfg := tr.Config("127.0.0.1", 0, logrus.NewEntry(logger))
	for _, a := range adjust {
		a(cfg)
	}
	r := remote.NewRemote(system, cfg)
	r.Start()
	t.Cleanup(func() {
		r.Shutdown(false)
		system.Shutdown()
	})
	return system, tr
}

// Between two systems on loopback, large produce requests sent together
// arrive with records aliasing the received message, and writing into one
// request's records touches no other's; the fetch responses that answer
// them come back copied.
func TestRemoteRecordsAliasedEndToEnd(t *testing.T) {
	sender, _ := newRemoteTestSystem(t)
	receiver, _ := newRemoteTestSystem(t)
	sink := &recordsSink{aliased: make(chan bool, 64)}
	pid, err := receiver.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return sink }), "records-sink")
	require.NoError(t, err)
	target := actor.NewPID(receiver.Address(), pid.Id)

	const n = 8
	sizes := make([]int, n)
	futures := make([]*actor.Future, n)
	for i := range n {
		sizes[i] = 100<<10 + 8191*i + 3 // not a size class: a copy shows in its capacity
		req := &messages.ProduceRequest{Topic: "t", Records: patterned(sizes[i], byte(i)), CorrelationId: int64(i) + 1<<40}
		futures[i] = sender.Root.RequestFuture(target, req, 10*time.Second)
	}
	for i, f := range futures {
		res, err := f.Result()
		require.NoError(t, err, "request %d", i)
		resp, ok := res.(*messages.FetchResponse)
		require.True(t, ok, "request %d answered %T", i, res)
		want := patterned(sizes[i], byte(i))
		binary.BigEndian.PutUint64(want, uint64(int64(i)+1<<40))
		require.Equal(t, want, resp.Records, "request %d", i)
		require.NotEqual(t, len(resp.Records), cap(resp.Records), "response %d aliases the received message", i)
	}
	for i := range n {
		require.True(t, <-sink.aliased, "request %d copied", i)
	}
}
