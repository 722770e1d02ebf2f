package group

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

func TestJavaStringHashCode(t *testing.T) {
	// Values of "...".hashCode() as Java computes them.
	for _, tc := range []struct {
		in   string
		want int32
	}{
		{"", 0},
		{"a", 97},
		{"abc", 96354},
		{"Aa", 2112},
		{"BB", 2112},
		{"hello", 99162322},
		{"hello world", 1794106052},
		{"polygenelubricants", math.MinInt32},
		{"é", 233},
		{"日本", 26085*31 + 26412},
		// U+1F600 is the surrogate pair D83D DE00 in UTF-16.
		{"\U0001F600", 0xD83D*31 + 0xDE00},
	} {
		t.Run(tc.in, func(t *testing.T) {
			require.Equal(t, tc.want, JavaStringHashCode(tc.in))
		})
	}
}

func TestOffsetsPartitionFor(t *testing.T) {
	for _, tc := range []struct {
		group      string
		partitions int32
		want       int32
	}{
		{"hello", 50, 99162322 % 50},
		{"hello world", 50, 1794106052 % 50},
		{"polygenelubricants", 50, 0}, // abs(MinInt32) is 0, as Kafka's Utils.abs
		{"", 50, 0},
		{"a", 3, 97 % 3},
	} {
		t.Run(tc.group, func(t *testing.T) {
			require.Equal(t, tc.want, OffsetsPartitionFor(tc.group, tc.partitions))
		})
	}
	// A negative hash maps to its absolute value: "hello-world-group" and
	// friends land in range for every count.
	for _, g := range []string{"zzzzzzzzzzzz", "consumer-group-with-a-long-name", "日本語のグループ"} {
		h := JavaStringHashCode(g)
		p := OffsetsPartitionFor(g, 50)
		require.True(t, p >= 0 && p < 50, "%s: %d", g, p)
		if h < 0 && h != math.MinInt32 {
			require.Equal(t, (-h)%50, p)
		}
	}
}

func TestGroupActorName(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, tc := range []struct {
		group string
		want  string
	}{
		{"orders-app", "groups/orders-app"},
		{"My_Group.1", "groups/My_Group.1"},
		{"a/b", "groups/a%2Fb"},
		{"50%", "groups/50%25"},
		{"sp ace", "groups/sp%20ace"},
		{"é", "groups/%C3%A9"},
	} {
		t.Run(tc.group, func(t *testing.T) {
			require.Equal(t, tc.want, actors.GroupActorName(tc.group))
		})
	}
	name := actors.GroupActorName(long)
	require.LessOrEqual(t, len(name), len("groups/")+180)
	require.Contains(t, name, "~")
	require.NotEqual(t, name, actors.GroupActorName(long+"y"), "long ids stay distinct")
	require.NotEqual(t, actors.GroupActorName("a/b"), actors.GroupActorName("a%2Fb"), "escapes do not collide")
}

func TestOffsetRecordRoundTrip(t *testing.T) {
	key := &messages.OffsetKey{Group: "g", Topic: "t", Partition: 3}
	for _, tc := range []struct {
		name  string
		value *messages.OffsetValue
	}{
		{"value", &messages.OffsetValue{Offset: 42, Metadata: "m", CommitTimestampMs: 1700000000000}},
		{"zero value", &messages.OffsetValue{}},
		{"tombstone", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, v, err := EncodeOffsetRecord(nil, nil, key, tc.value)
			require.NoError(t, err)
			require.Equal(t, tc.value == nil, v == nil)
			gotKey, gotValue, err := DecodeOffsetRecord(k, v)
			require.NoError(t, err)
			require.True(t, proto.Equal(key, gotKey))
			if tc.value == nil {
				require.Nil(t, gotValue)
			} else {
				require.True(t, proto.Equal(tc.value, gotValue))
			}
		})
	}
}

// testGeneration is a stored generation of two consumers.
func testGeneration() *messages.ClassicGeneration {
	return &messages.ClassicGeneration{ProtocolType: ConsumerProtocolType, Generation: 4, Protocol: "range", Leader: "a-1", Members: []*messages.ClassicMember{
		{MemberId: "a-1", ClientId: "a", ClientHost: "/127.0.0.1", SessionTimeoutMs: 10000, RebalanceTimeoutMs: 20000,
			Protocols: []*messages.GroupProtocol{{Name: "range", Metadata: []byte("a/range")}}, Topics: []string{"t"}, Assignment: []byte("A"),
			Partitions: []*messages.TopicPartition{{Topic: "t", Partition: 0}}},
		{MemberId: "b-2", GroupInstanceId: "b", ClientId: "b", SessionTimeoutMs: 45000, RebalanceTimeoutMs: 60000,
			Protocols: []*messages.GroupProtocol{{Name: "range", Metadata: []byte("b/range")}}, Topics: []string{"t"}, Assignment: []byte("B")},
	}}
}

// testDepotGeneration is a stored generation of Depot's protocol.
func testDepotGeneration() *messages.DepotGeneration {
	return &messages.DepotGeneration{Generation: 3, Assignor: "range", PartitionCounts: map[string]int32{"t": 2}, Members: []*messages.DepotMember{
		{MemberId: "a-1", ClientId: "a", Topics: []string{"t"}, Assignors: []string{"range"}, SessionTimeoutMs: 10000, RebalanceTimeoutMs: 60000,
			Assignment: []*messages.TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}}, AssignedGeneration: 3},
	}}
}

// A group's stored generation travels under its members key.
func TestGenerationRecordRoundTrip(t *testing.T) {
	for _, value := range []*messages.OffsetValue{{Classic: testGeneration()}, {Depot: testDepotGeneration()}, nil} {
		k, v, err := EncodeOffsetRecord(nil, nil, membersKey("g"), value)
		require.NoError(t, err)
		gotKey, gotValue, err := DecodeOffsetRecord(k, v)
		require.NoError(t, err)
		require.True(t, gotKey.Members)
		require.Equal(t, "g", gotKey.Group)
		require.True(t, proto.Equal(value, gotValue))
	}
}

func TestDecodeOffsetRecordBadInput(t *testing.T) {
	good, _, err := EncodeOffsetRecord(nil, nil, &messages.OffsetKey{Group: "g", Topic: "t"}, nil)
	require.NoError(t, err)
	noGroup, _, err := EncodeOffsetRecord(nil, nil, &messages.OffsetKey{Topic: "t"}, nil)
	require.NoError(t, err)
	negative, _, err := EncodeOffsetRecord(nil, nil, &messages.OffsetKey{Group: "g", Topic: "t", Partition: -1}, nil)
	require.NoError(t, err)
	for _, tc := range []struct {
		name       string
		key, value []byte
	}{
		{"null key", nil, nil},
		{"garbage key", []byte{0xff, 0xff, 0xff}, nil},
		{"key without group", noGroup, nil},
		{"negative partition", negative, nil},
		{"garbage value", good, []byte{0x08}},
		{"members key with a topic", encodeKey(t, &messages.OffsetKey{Group: "g", Topic: "t", Members: true}), nil},
		{"members key without a group", encodeKey(t, &messages.OffsetKey{Members: true}), nil},
		{"members without a generation", encodeKey(t, membersKey("g")), encodeValue(t, &messages.OffsetValue{Offset: 3})},
		{"an offset with a generation", good, encodeValue(t, &messages.OffsetValue{Offset: 3, Classic: testGeneration()})},
		{"a generation without members", encodeKey(t, membersKey("g")), encodeValue(t, &messages.OffsetValue{Classic: &messages.ClassicGeneration{Generation: 1}})},
		{"a leader that is not a member", encodeKey(t, membersKey("g")), encodeGeneration(t, func(g *messages.ClassicGeneration) { g.Leader = "c-3" })},
		{"a member named twice", encodeKey(t, membersKey("g")), encodeGeneration(t, func(g *messages.ClassicGeneration) { g.Members[1].MemberId = "a-1" })},
		{"a member without an id", encodeKey(t, membersKey("g")), encodeGeneration(t, func(g *messages.ClassicGeneration) { g.Members[1].MemberId = "" })},
		{"a session out of bounds", encodeKey(t, membersKey("g")), encodeGeneration(t, func(g *messages.ClassicGeneration) { g.Members[0].SessionTimeoutMs = 0 })},
		{"no rebalance timeout", encodeKey(t, membersKey("g")), encodeGeneration(t, func(g *messages.ClassicGeneration) { g.Members[0].RebalanceTimeoutMs = -1 })},
		{"a negative generation", encodeKey(t, membersKey("g")), encodeGeneration(t, func(g *messages.ClassicGeneration) { g.Generation = -1 })},
		{"both protocols' generations", encodeKey(t, membersKey("g")), encodeValue(t, &messages.OffsetValue{Classic: testGeneration(), Depot: testDepotGeneration()})},
		{"an offset with Depot's generation", good, encodeValue(t, &messages.OffsetValue{Depot: testDepotGeneration()})},
		{"Depot's generation without members", encodeKey(t, membersKey("g")), encodeValue(t, &messages.OffsetValue{Depot: &messages.DepotGeneration{Generation: 1}})},
		{"Depot's member named twice", encodeKey(t, membersKey("g")), encodeDepotGeneration(t, func(g *messages.DepotGeneration) { g.Members = append(g.Members, g.Members[0]) })},
		{"Depot's member without a session", encodeKey(t, membersKey("g")), encodeDepotGeneration(t, func(g *messages.DepotGeneration) { g.Members[0].SessionTimeoutMs = 0 })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := DecodeOffsetRecord(tc.key, tc.value)
			require.ErrorIs(t, err, ErrBadOffsetRecord)
		})
	}
}

func encodeKey(t *testing.T, key *messages.OffsetKey) []byte {
	t.Helper()
	k, _, err := EncodeOffsetRecord(nil, nil, key, nil)
	require.NoError(t, err)
	return k
}

func encodeValue(t *testing.T, value *messages.OffsetValue) []byte {
	t.Helper()
	_, v, err := EncodeOffsetRecord(nil, nil, &messages.OffsetKey{Group: "g", Topic: "t"}, value)
	require.NoError(t, err)
	return v
}

// encodeGeneration is testGeneration, edited, as a record's value.
func encodeGeneration(t *testing.T, edit func(*messages.ClassicGeneration)) []byte {
	gen := testGeneration()
	edit(gen)
	return encodeValue(t, &messages.OffsetValue{Classic: gen})
}

// encodeDepotGeneration is testDepotGeneration, edited, as a record's value.
func encodeDepotGeneration(t *testing.T, edit func(*messages.DepotGeneration)) []byte {
	gen := testDepotGeneration()
	edit(gen)
	return encodeValue(t, &messages.OffsetValue{Depot: gen})
}

func TestOffsetsStateSupersededAndSnapshot(t *testing.T) {
	s := newOffsetsState()
	k1 := &messages.OffsetKey{Group: "g", Topic: "t", Partition: 0}
	k2 := &messages.OffsetKey{Group: "g", Topic: "t", Partition: 1}
	k3 := &messages.OffsetKey{Group: "h", Topic: "t", Partition: 0}
	s.apply(k1, &messages.OffsetValue{Offset: 1}, 10)
	s.apply(k2, &messages.OffsetValue{Offset: 2}, 20)
	require.Zero(t, s.superseded)
	s.apply(k1, &messages.OffsetValue{Offset: 3}, 11)
	require.Equal(t, int64(10), s.superseded)
	s.apply(k3, &messages.OffsetValue{Offset: 4}, 12)
	s.apply(k2, nil, 5) // tombstone: the old record and itself are garbage
	require.Equal(t, int64(35), s.superseded)
	require.Equal(t, []string{"g", "h"}, s.groups())
	g := s.group("g")
	require.Len(t, g, 1)
	require.Equal(t, int64(3), g[offsetKey{group: "g", topic: "t"}].Offset)

	keys, values := s.snapshot()
	require.Len(t, keys, 2)
	require.Equal(t, "g", keys[0].Group)
	require.Equal(t, int64(3), values[0].Offset)
	require.Equal(t, "h", keys[1].Group)
	require.Equal(t, int64(4), values[1].Offset)

	// A group's stored generation is one more key of it, which its next
	// generation supersedes, and which the snapshot writes first.
	s.apply(membersKey("h"), &messages.OffsetValue{Classic: testGeneration()}, 30)
	s.apply(membersKey("h"), &messages.OffsetValue{Classic: testGeneration()}, 31)
	require.Equal(t, int64(65), s.superseded)
	require.Len(t, s.group("h"), 2)
	keys, values = s.snapshot()
	require.Len(t, keys, 3)
	require.True(t, keys[1].Members)
	require.Equal(t, "h", keys[1].Group)
	require.NotNil(t, values[1].Classic)
	require.False(t, keys[2].Members)
	s.apply(membersKey("h"), nil, 5)
	require.Equal(t, []string{"g", "h"}, s.groups(), "h keeps its offset")
	require.Len(t, s.group("h"), 1)
}

func TestDecodeOffsetBatches(t *testing.T) {
	b := wire.NewBuilder(wire.NoProducer)
	var data []byte
	batch, _, err := buildOffsetBatch(b, 1, []*messages.OffsetKey{{Group: "g", Topic: "t", Partition: 0}, {Group: "g", Topic: "t", Partition: 1}},
		[]*messages.OffsetValue{{Offset: 5}, {Offset: 6}})
	require.NoError(t, err)
	data = append(data, batch...)
	second, _, err := buildOffsetBatch(b, 2, []*messages.OffsetKey{{Group: "g", Topic: "t", Partition: 0}}, []*messages.OffsetValue{nil})
	require.NoError(t, err)
	wire.SetBaseOffset(second, 2)
	data = append(data, second...)
	// A record that is not an offsets record is skipped, not fatal.
	b.Reset(wire.NoProducer)
	b.Append(3, []byte("junk"), []byte("junk"), nil)
	junk, err := b.AppendTo(nil)
	require.NoError(t, err)
	wire.SetBaseOffset(junk, 3)
	data = append(data, junk...)

	s := newOffsetsState()
	next, bad, err := decodeOffsetBatches(s, data[:len(data)-5], 0)
	require.NoError(t, err)
	require.Equal(t, int64(3), next, "the torn last batch is left for the next fetch")
	require.Zero(t, bad)
	k := offsetKey{group: "g", topic: "t", partition: 1}
	require.Equal(t, map[offsetKey]*messages.OffsetValue{k: s.latest[k].value}, s.group("g"))

	s = newOffsetsState()
	next, bad, err = decodeOffsetBatches(s, data, 0)
	require.NoError(t, err)
	require.Equal(t, int64(4), next)
	require.Equal(t, 1, bad)
}

func FuzzDecodeOffsetRecord(f *testing.F) {
	k, v, _ := EncodeOffsetRecord(nil, nil, &messages.OffsetKey{Group: "g", Topic: "t", Partition: 1}, &messages.OffsetValue{Offset: 7, Metadata: "m"})
	f.Add(k, v, false)
	f.Add(k, []byte(nil), true)
	f.Add([]byte{0xff}, []byte{0x08}, false)
	k, v, _ = EncodeOffsetRecord(nil, nil, membersKey("g"), &messages.OffsetValue{Classic: testGeneration()})
	f.Add(k, v, false)
	_, v, _ = EncodeOffsetRecord(nil, nil, membersKey("g"), &messages.OffsetValue{Depot: testDepotGeneration()})
	f.Add(k, v, false)
	actortest.AddSeedFiles(f, "FuzzDecodeOffsetRecord", func(b []byte) { f.Add(b, b, false) })
	f.Fuzz(func(t *testing.T, key, value []byte, tombstone bool) {
		if tombstone {
			value = nil
		}
		gotKey, gotValue, err := DecodeOffsetRecord(key, value)
		if err != nil {
			require.ErrorIs(t, err, ErrBadOffsetRecord)
			return
		}
		require.NotEmpty(t, gotKey.Group)
		require.Equal(t, value == nil, gotValue == nil)
		// What decodes encodes back to a record that decodes the same.
		k2, v2, err := EncodeOffsetRecord(nil, nil, gotKey, gotValue)
		require.NoError(t, err)
		againKey, againValue, err := DecodeOffsetRecord(k2, v2)
		require.NoError(t, err)
		require.True(t, proto.Equal(gotKey, againKey))
		require.True(t, proto.Equal(gotValue, againValue))
	})
}

func FuzzDecodeOffsetBatches(f *testing.F) {
	b := wire.NewBuilder(wire.NoProducer)
	batch, _, _ := buildOffsetBatch(b, 1, []*messages.OffsetKey{{Group: "g", Topic: "t"}}, []*messages.OffsetValue{{Offset: 1}})
	f.Add(batch)
	f.Add(batch[:len(batch)-1])
	f.Add([]byte("not a batch"))
	actortest.AddSeedFiles(f, "FuzzDecodeOffsetBatches", func(b []byte) { f.Add(b) })
	f.Fuzz(func(t *testing.T, data []byte) {
		s := newOffsetsState()
		next, bad, _ := decodeOffsetBatches(s, data, 10)
		require.GreaterOrEqual(t, bad, 0)
		require.GreaterOrEqual(t, s.superseded, int64(0))
		if next == 10 {
			require.Empty(t, s.latest, "nothing applied without a whole batch")
		}
	})
}
