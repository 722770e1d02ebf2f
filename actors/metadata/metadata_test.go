package metadata

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/messages"
)

func create(name string, partitions int32, nodeID int32) *messages.MetadataRecord {
	replicas := make([][]int32, partitions)
	for i := range replicas {
		replicas[i] = []int32{nodeID}
	}
	return CreateTopic(&messages.CreateTopicRequest{Name: name, Partitions: partitions}, LegacyTopicID(name), replicas)
}

func dirRecord(name string, partition, nodeID int32, id string) *messages.MetadataRecord {
	return &messages.MetadataRecord{Record: &messages.MetadataRecord_PartitionDir{PartitionDir: &messages.PartitionDirRecord{
		Topic: name, Partition: partition, NodeId: nodeID, DirId: id,
	}}}
}

// replay folds recs into a delta over image and applies it.
func replay(t *testing.T, image *Image, recs ...*messages.MetadataRecord) (*Image, *Delta) {
	t.Helper()
	d := NewDelta(image, nil)
	for _, r := range recs {
		require.NoError(t, d.Replay(r))
	}
	return d.Apply(), d
}

func dirIDs(t *Topic) []string {
	var ids []string
	for _, p := range t.Partitions {
		ids = append(ids, p.Dirs[0])
	}
	return ids
}

func TestDeltaReplayAndApply(t *testing.T) {
	base, _ := replay(t, Empty(), create("orders", 2, 1), dirRecord("orders", 0, 1, "a"))
	orders, ok := base.Topic("orders")
	require.True(t, ok)
	require.Equal(t, []string{"a", ""}, dirIDs(orders))

	next, _ := replay(t, base, dirRecord("orders", 1, 1, "b"), create("payments", 1, 1), DeleteTopic("orders"), create("orders", 3, 1))
	require.Equal(t, []string{"orders", "payments"}, next.TopicNames())
	recreated, _ := next.Topic("orders")
	require.Len(t, recreated.Partitions, 3)
	require.Equal(t, []string{"", "", ""}, dirIDs(recreated), "a topic created again starts with no dirs")

	// The image the delta was made over is a value: unchanged.
	require.Equal(t, []string{"orders"}, base.TopicNames())
	orders, _ = base.Topic("orders")
	require.Equal(t, []string{"a", ""}, dirIDs(orders))
}

// A directory record changes only the replica it names: another node's, an
// unknown topic or partition change nothing.
func TestDirRecordsChangeTheirReplicaOnly(t *testing.T) {
	base, _ := replay(t, Empty(), create("orders", 2, 1))
	next, _ := replay(t, base,
		dirRecord("orders", 1, 2, "other-node"),
		dirRecord("orders", 5, 1, "no-partition"),
		dirRecord("missing", 0, 1, "no-topic"),
		dirRecord("orders", 1, 1, "b"))
	orders, _ := next.Topic("orders")
	require.Equal(t, []string{"", "b"}, dirIDs(orders))
	require.Equal(t, []string{"orders"}, next.TopicNames())
}

func TestLocalChanges(t *testing.T) {
	base, _ := replay(t, Empty(), create("orders", 2, 1), create("elsewhere", 1, 2), create("gone", 1, 1))
	for _, tc := range []struct {
		name             string
		recs             []*messages.MetadataRecord
		created, deleted []string
	}{
		{"nothing", nil, nil, nil},
		{"created here", []*messages.MetadataRecord{create("new", 2, 1)}, []string{"new"}, nil},
		{"created on another node", []*messages.MetadataRecord{create("new", 2, 2)}, nil, nil},
		{"deleted", []*messages.MetadataRecord{DeleteTopic("gone")}, nil, []string{"gone"}},
		{"deleted on another node", []*messages.MetadataRecord{DeleteTopic("elsewhere")}, nil, nil},
		{"deleted and created again", []*messages.MetadataRecord{DeleteTopic("orders"), create("orders", 2, 1)}, []string{"orders"}, []string{"orders"}},
		{"created then deleted", []*messages.MetadataRecord{create("brief", 1, 1), DeleteTopic("brief")}, nil, nil},
		{"a dir chosen", []*messages.MetadataRecord{dirRecord("orders", 0, 1, "a")}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, d := replay(t, base, tc.recs...)
			changes := d.LocalChanges(1)
			names := func(ts []*Topic) []string {
				var out []string
				for _, t := range ts {
					out = append(out, t.Name)
				}
				return out
			}
			require.Equal(t, tc.created, names(changes.Created))
			require.Equal(t, tc.deleted, names(changes.Deleted))
		})
	}
}

func TestAssignDirs(t *testing.T) {
	image, _ := replay(t, Empty(), create("orders", 2, 1), dirRecord("orders", 0, 1, "a"))
	recs := image.AssignDirs([]*messages.PartitionAssignment{
		{Topic: "orders", Partition: 0, NodeId: 1, DirId: "a"},  // already there
		{Topic: "orders", Partition: 1, NodeId: 1, DirId: "b"},  // new
		{Topic: "orders", Partition: 1, NodeId: 2, DirId: "c"},  // not that node's
		{Topic: "orders", Partition: 0, NodeId: 1},              // no dir
		{Topic: "missing", Partition: 0, NodeId: 1, DirId: "d"}, // no topic
	})
	require.Len(t, recs, 1)
	require.True(t, proto.Equal(dirRecord("orders", 1, 1, "b"), recs[0]))
}

func TestValidateCreate(t *testing.T) {
	image, _ := replay(t, Empty(), create("a.b", 1, 1))
	for _, tc := range []struct {
		name string
		req  *messages.CreateTopicRequest
		code messages.ErrorCode
		// message is the error message: a statement for people, naming the
		// topic, with no Go package prefix.
		message string
	}{
		{"fine", &messages.CreateTopicRequest{Name: "orders", Partitions: 3}, messages.ErrorCode_NONE, ""},
		{"exists", &messages.CreateTopicRequest{Name: "a.b", Partitions: 3}, messages.ErrorCode_TOPIC_ALREADY_EXISTS, `topic "a.b" already exists`},
		{"collides", &messages.CreateTopicRequest{Name: "a_b", Partitions: 3}, messages.ErrorCode_INVALID_TOPIC, `topic "a_b" collides with existing topic "a.b" ('.' and '_' are treated alike)`},
		{"bad name", &messages.CreateTopicRequest{Name: "bad/name", Partitions: 3}, messages.ErrorCode_INVALID_TOPIC, `invalid topic name "bad/name": byte 3 ('/') is not an ASCII letter, digit, '.', '_' or '-'`},
		{"no partitions", &messages.CreateTopicRequest{Name: "orders"}, messages.ErrorCode_INVALID_PARTITIONS, `topic "orders" cannot have 0 partitions: a topic has 1 to 10000`},
		{"too many partitions", &messages.CreateTopicRequest{Name: "orders", Partitions: MaxPartitionsPerTopic + 1}, messages.ErrorCode_INVALID_PARTITIONS, `topic "orders" cannot have 10001 partitions: a topic has 1 to 10000`},
		{"bad config", &messages.CreateTopicRequest{Name: "orders", Partitions: 1, Configs: map[string]string{"nope": "1"}}, messages.ErrorCode_INVALID_CONFIG, `invalid config for topic "orders": unknown key "nope"`},
		{"bad config value", &messages.CreateTopicRequest{Name: "orders", Partitions: 1, Configs: map[string]string{"retention.ms": "soon"}}, messages.ErrorCode_INVALID_CONFIG, `invalid config for topic "orders": retention.ms "soon" is not an integer`},
		{"up to three replicas", &messages.CreateTopicRequest{Name: "orders", Partitions: 1, ReplicationFactor: -3}, messages.ErrorCode_NONE, ""},
		{"too many replicas", &messages.CreateTopicRequest{Name: "orders", Partitions: 1, ReplicationFactor: MaxReplicationFactor + 1}, messages.ErrorCode_INVALID_REPLICATION_FACTOR,
			`topic "orders" cannot have replication factor 32768: it is at most 32767`},
		{"up to too many replicas", &messages.CreateTopicRequest{Name: "orders", Partitions: 1, ReplicationFactor: -MaxReplicationFactor - 1}, messages.ErrorCode_INVALID_REPLICATION_FACTOR,
			`topic "orders" cannot have replication factor up to 32768: it is at most 32767`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, code, msg := image.ValidateCreate(tc.req)
			require.Equal(t, tc.code, code, msg)
			require.Equal(t, tc.message, msg)
		})
	}
}

// Records written before directory ids name paths: replay resolves them to
// the ids of the node's directories there, and an unknown path to none.
func TestLegacyPathsResolveToIDs(t *testing.T) {
	legacy := func(nodeID int32, path string) string {
		if nodeID == 1 && path == "/data/logs-0" {
			return "id0"
		}
		return ""
	}
	d := NewDelta(Empty(), legacy)
	require.NoError(t, d.Replay(&messages.MetadataRecord{Record: &messages.MetadataRecord_Topic{Topic: &messages.TopicRecord{
		Name: "orders",
		Partitions: []*messages.PartitionAssignment{
			{Topic: "orders", Partition: 0, NodeId: 1, LogDir: "/data/logs-0"},
			{Topic: "orders", Partition: 1, NodeId: 1, LogDir: "/data/logs-1"},
			{Topic: "orders", Partition: 2, NodeId: 1, LogDir: "/data/logs-1"},
		},
	}}}))
	require.NoError(t, d.Replay(&messages.MetadataRecord{Record: &messages.MetadataRecord_PartitionDir{PartitionDir: &messages.PartitionDirRecord{
		Topic: "orders", Partition: 2, NodeId: 1, LogDir: "/data/logs-0",
	}}}))
	orders, _ := d.Apply().Topic("orders")
	require.Equal(t, []string{"id0", "", "id0"}, dirIDs(orders))
}

func TestReplayReportsWhatItCouldNotTake(t *testing.T) {
	d := NewDelta(Empty(), nil)
	require.ErrorIs(t, d.Replay(&messages.MetadataRecord{}), ErrRecord)
	err := d.Replay(&messages.MetadataRecord{Record: &messages.MetadataRecord_Topic{Topic: &messages.TopicRecord{Name: "bad", Configs: map[string]string{"x": "y"}}}})
	require.ErrorIs(t, err, ErrRecord)
	bad, ok := d.Apply().Topic("bad")
	require.True(t, ok, "the topic is kept, with default configs")
	require.Equal(t, "1048588", bad.Config.Map()["max.message.bytes"])
}

func TestDescribe(t *testing.T) {
	image, _ := replay(t, Empty(),
		RegisterNode(&messages.RegisterNodeRequest{NodeId: 1, Address: "127.0.0.1:7070"}),
		create("orders", 2, 1), dirRecord("orders", 1, 1, "b"))
	view := View{
		DirPath: func(nodeID int32, id string) string {
			if id == "b" {
				return "/data/logs-1"
			}
			return ""
		},
	}
	md := image.Describe(nil, view)
	require.Len(t, md, 1)
	require.Equal(t, []*messages.PartitionMetadata{
		{Partition: 0, Leader: 1, LeaderAddress: "127.0.0.1:7070", ActorName: actors.PartitionActorName("orders", 0),
			Replicas: []int32{1}, Isr: []int32{1}, ReplicaDirs: []*messages.ReplicaDir{{Node: 1, LogEndOffset: -1}}},
		{Partition: 1, Leader: 1, LeaderAddress: "127.0.0.1:7070", ActorName: actors.PartitionActorName("orders", 1), LogDir: "/data/logs-1", DirId: "b",
			Replicas: []int32{1}, Isr: []int32{1}, ReplicaDirs: []*messages.ReplicaDir{{Node: 1, LogDir: "/data/logs-1", DirId: "b", LogEndOffset: -1}}},
	}, md[0].Partitions)
	require.Equal(t, LegacyTopicID("orders"), md[0].TopicId)
	md = image.Describe([]string{"missing", "bad/name"}, view)
	require.Equal(t, messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, md[0].Error)
	require.Equal(t, messages.ErrorCode_INVALID_TOPIC, md[1].Error)
	require.Equal(t, `topic "missing" does not exist`, md[0].ErrorMessage)
	require.Equal(t, `invalid topic name "bad/name": byte 3 ('/') is not an ASCII letter, digit, '.', '_' or '-'`, md[1].ErrorMessage)
}

func TestReserveProducerIDs(t *testing.T) {
	image, _ := replay(t, Empty(), Empty().ReserveProducerIDs(0))
	require.Equal(t, int64(ProducerIDBlockSize), image.ProducerIDsEnd())
	image, _ = replay(t, image, image.ReserveProducerIDs(10))
	require.Equal(t, int64(2*ProducerIDBlockSize), image.ProducerIDsEnd(), "from the end of the last block")
}

// FuzzReplay replays arbitrary bytes as metadata records, as a damaged or
// foreign log would hold, then describes the image and assigns dirs in it:
// nothing panics, and every topic is described.
func FuzzReplay(f *testing.F) {
	seeds := []*messages.MetadataRecord{
		create("orders", 2, 1),
		{Record: &messages.MetadataRecord_Topic{Topic: &messages.TopicRecord{
			Name: "orders", Configs: map[string]string{"segment.bytes": "4096"},
			Partitions: []*messages.PartitionAssignment{{Topic: "orders", Partition: 7, NodeId: 1, LogDir: "d0"}},
		}}},
		{Record: &messages.MetadataRecord_Topic{Topic: &messages.TopicRecord{Name: "bad", Configs: map[string]string{"x": "y"}}}},
		{Record: &messages.MetadataRecord_Topic{}},
		DeleteTopic("orders"),
		dirRecord("orders", 0, 1, "a"),
		{Record: &messages.MetadataRecord_ProducerIds{ProducerIds: &messages.ProducerIdBlockRecord{NextProducerId: 1000}}},
		{},
		RegisterNode(&messages.RegisterNodeRequest{NodeId: 1, Address: "a:1", Rack: "r", DirIds: []string{"x"}}),
		fenceRecord(1, false),
		NameCluster("c"),
		CreateTopic(&messages.CreateTopicRequest{Name: "r3", Partitions: 2}, "id", [][]int32{{1, 2, 3}, {2, 3, 1}}),
		changeRecord("r3", &Partition{Partition: 1}, NoLeader, []int32{3}),
	}
	for _, s := range seeds {
		b, err := proto.Marshal(s)
		require.NoError(f, err)
		f.Add(b, b)
	}
	f.Add([]byte{0xff, 0x01}, []byte{})
	view := View{DirPath: func(int32, string) string { return "" }}
	f.Fuzz(func(t *testing.T, first, second []byte) {
		d := NewDelta(Empty(), func(int32, string) string { return "id" })
		for _, value := range [][]byte{first, second} {
			var rec messages.MetadataRecord
			if proto.Unmarshal(value, &rec) == nil {
				_ = d.Replay(&rec)
			}
		}
		image := d.Apply()
		described := image.Describe(nil, view)
		require.Len(t, described, len(image.TopicNames()))
		// A snapshot's records rebuild the same image.
		rd := NewDelta(Empty(), nil)
		for _, r := range image.Records() {
			_ = rd.Replay(r) // a stored config no longer valid is reported again
		}
		rebuilt := rd.Apply()
		require.Equal(t, image.Nodes(), rebuilt.Nodes())
		require.Equal(t, image.ClusterID(), rebuilt.ClusterID())
		require.Equal(t, image.ProducerIDsEnd(), rebuilt.ProducerIDsEnd())
		require.Equal(t, len(described), len(rebuilt.Describe(nil, view)))
		for i, md := range rebuilt.Describe(nil, view) {
			require.True(t, proto.Equal(described[i], md), "topic %s: %v != %v", md.Name, described[i], md)
		}
		for _, n := range image.Nodes() {
			for _, recs := range [][]*messages.MetadataRecord{image.Fence(n.ID), image.Unfence(n.ID)} {
				d := NewDelta(image, nil)
				for _, r := range recs {
					require.NoError(t, d.Replay(r))
				}
				_ = d.Apply()
			}
		}
		for _, name := range image.TopicNames() {
			topic, _ := image.Topic(name)
			for _, a := range topic.Assignments(1) {
				a.DirId = "x"
				_ = image.AssignDirs([]*messages.PartitionAssignment{a})
			}
		}
		_ = d.LocalChanges(1)
	})
}

func register(id int32) []*messages.MetadataRecord {
	return []*messages.MetadataRecord{
		RegisterNode(&messages.RegisterNodeRequest{NodeId: id, Address: fmt.Sprintf("127.0.0.1:%d", 7000+id)}),
		fenceRecord(id, false),
	}
}

// A negative replication factor -n asks for as many replicas as there are
// live nodes, up to n; a topic created so is what a retry of the same
// create asks for with any factor from 1 to n.
func TestReplicationFactor(t *testing.T) {
	three, _ := replay(t, Empty(), append(append(register(1), register(2)...), register(3)...)...)
	oneFenced, _ := replay(t, three, three.Fence(3)...)
	for _, tc := range []struct {
		name  string
		image *Image
		asked int32
		want  int32
	}{
		{"default", three, 0, 1},
		{"as asked", three, 2, 2},
		{"as asked, above the live nodes", three, 5, 5},
		{"up to three of three", three, -3, 3},
		{"up to three of two live", oneFenced, -3, 2},
		{"up to one", three, -1, 1},
		{"up to five of three", three, -5, 3},
		{"no live node", Empty(), -3, 1},
		{"the least int32", three, math.MinInt32, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.image.ReplicationFactor(&messages.CreateTopicRequest{ReplicationFactor: tc.asked}))
		})
	}
	for _, tc := range []struct {
		asked    int32
		replicas int
		want     bool
	}{
		{0, 1, true}, {0, 2, false},
		{3, 3, true}, {3, 2, false},
		{-3, 1, true}, {-3, 2, true}, {-3, 3, true}, {-3, 4, false}, {-3, 0, false},
	} {
		t.Run(fmt.Sprintf("asked %d has %d", tc.asked, tc.replicas), func(t *testing.T) {
			require.Equal(t, tc.want, HasReplicationFactor(&messages.CreateTopicRequest{ReplicationFactor: tc.asked}, tc.replicas))
		})
	}
}

// A fenced node leads no partition: its partitions go to another live
// member of their ISR, or to no leader where it was the only one, and come
// back to it when it is unfenced.
func TestFenceAndUnfence(t *testing.T) {
	recs := append(append(append(register(1), register(2)...), register(3)...),
		CreateTopic(&messages.CreateTopicRequest{Name: "one", Partitions: 1}, "id1", [][]int32{{1}}),
		CreateTopic(&messages.CreateTopicRequest{Name: "three", Partitions: 1}, "id3", [][]int32{{1, 2, 3}}))
	image, _ := replay(t, Empty(), recs...)
	require.Equal(t, []int32{1, 2, 3}, image.Live())

	fenced, _ := replay(t, image, image.Fence(1)...)
	require.Equal(t, []int32{2, 3}, fenced.Live())
	one, _ := fenced.Topic("one")
	require.Equal(t, NoLeader, one.Partitions[0].Leader)
	require.Equal(t, []int32{1}, one.Partitions[0].ISR, "the last member stays in the ISR")
	require.Equal(t, int32(1), one.Partitions[0].LeaderEpoch)
	md := fenced.Describe([]string{"one"}, View{DirPath: func(int32, string) string { return "" }})
	require.Equal(t, messages.ErrorCode_LEADER_NOT_AVAILABLE, md[0].Partitions[0].Error)
	require.Empty(t, md[0].Partitions[0].LeaderAddress)
	three, _ := fenced.Topic("three")
	require.Equal(t, int32(2), three.Partitions[0].Leader)
	require.Equal(t, []int32{2, 3}, three.Partitions[0].ISR)
	require.Nil(t, fenced.Fence(1), "fencing twice changes nothing")

	back, _ := replay(t, fenced, fenced.Unfence(1)...)
	one, _ = back.Topic("one")
	require.Equal(t, int32(1), one.Partitions[0].Leader)
	require.Equal(t, int32(2), one.Partitions[0].LeaderEpoch)
	require.Equal(t, int32(2), one.Partitions[0].PartitionEpoch)
	three, _ = back.Topic("three")
	require.Equal(t, int32(2), three.Partitions[0].Leader, "a partition with a leader keeps it")
	require.Nil(t, back.Unfence(1))

	// The image a delta was made over is a value.
	one, _ = image.Topic("one")
	require.Equal(t, int32(1), one.Partitions[0].Leader)
	require.Equal(t, int32(0), one.Partitions[0].LeaderEpoch)
}

func TestRegisterAgainFences(t *testing.T) {
	image, _ := replay(t, Empty(), register(1)...)
	n, _ := image.Node(1)
	require.False(t, n.Fenced)
	image, _ = replay(t, image, RegisterNode(&messages.RegisterNodeRequest{NodeId: 1, Address: "127.0.0.1:9", Incarnation: 2}))
	n, _ = image.Node(1)
	require.True(t, n.Fenced, "a node registered again is fenced until it is unfenced")
	require.Equal(t, "127.0.0.1:9", image.Address(1))
}

// A new incarnation of a node that the image holds live fences the old one
// first, as Fence does: a partition it led gets another member of its ISR
// for leader, in a new epoch, and the node leaves the ISRs; the same
// incarnation registering again changes no partition.
func TestRegisterNewIncarnationFencesTheOld(t *testing.T) {
	recs := append(append(register(1), register(2)...),
		CreateTopic(&messages.CreateTopicRequest{Name: "two", Partitions: 1}, "id2", [][]int32{{1, 2}}))
	image, _ := replay(t, Empty(), recs...)
	two, _ := image.Topic("two")
	require.Equal(t, int32(1), two.Partitions[0].Leader)
	n, _ := image.Node(1)

	same := image.Register(&messages.RegisterNodeRequest{NodeId: 1, Address: n.Address, Incarnation: n.Incarnation})
	require.Len(t, same, 1, "the same incarnation: its registration alone")

	again, _ := replay(t, image, image.Register(&messages.RegisterNodeRequest{NodeId: 1, Address: n.Address, Incarnation: n.Incarnation + 1})...)
	two, _ = again.Topic("two")
	require.Equal(t, int32(2), two.Partitions[0].Leader, "another member of the ISR leads")
	require.Equal(t, []int32{2}, two.Partitions[0].ISR)
	require.Equal(t, int32(1), two.Partitions[0].LeaderEpoch)
	n, _ = again.Node(1)
	require.True(t, n.Fenced)
	require.Equal(t, []int32{2}, again.Live())

	// Fenced already (its old process lapsed), it registers alone.
	fenced, _ := replay(t, image, image.Fence(1)...)
	require.Len(t, fenced.Register(&messages.RegisterNodeRequest{NodeId: 1, Address: n.Address, Incarnation: n.Incarnation + 2}), 1)
}
