package node

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/actors/assign"
	"github.com/depot-dev/depot/actors/group"
	"github.com/depot-dev/depot/messages"
)

// groupTestConfig is a node config with few offsets partitions, so that
// tests create __consumer_offsets quickly.
func groupTestConfig(t *testing.T, dir string) Config {
	t.Helper()
	cfg := testConfig(t, dir)
	cfg.OffsetsTopicPartitions = 3
	cfg.GroupMetadataInterval = 200 * time.Millisecond
	return cfg
}

func createTopic(t *testing.T, n *Node, name string, partitions int32) {
	t.Helper()
	resp := request[*messages.CreateTopicResponse](t, n, n.Metadata(), &messages.CreateTopicRequest{Name: name, Partitions: partitions})
	require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
}

// findGroup asks the coordinator where group's actor is.
func findGroup(t *testing.T, n *Node, group string) *actor.PID {
	t.Helper()
	resp := request[*messages.FindCoordinatorResponse](t, n, n.Groups(), &messages.FindCoordinatorRequest{GroupId: group})
	require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
	require.Equal(t, n.Address(), resp.Address)
	require.Equal(t, actors.GroupActorName(group), resp.ActorName)
	return actor.NewPID(resp.Address, resp.ActorName)
}

// memberSpec is how a simulated consumer joins.
type memberSpec struct {
	group, instance, client string
	topics                  []string
	assignor                string
	session                 time.Duration
	heartbeat               time.Duration
}

// member simulates a consumer's group protocol: join, rejoin when told,
// heartbeat. Its view of its assignment is what the coordinator last
// answered.
type member struct {
	t    *testing.T
	n    *Node
	pid  *actor.PID
	spec memberSpec

	mu            sync.Mutex
	id            string
	generation    int32
	assignment    []string
	joins         int
	rejoins       int // answers with rejoin=true
	lastHeartbeat time.Time
	fenced        bool

	stop  chan bool // true: leave the group; false: die silently
	done  chan struct{}
	ready chan struct{}
}

func startMember(t *testing.T, n *Node, spec memberSpec) *member {
	t.Helper()
	if spec.session == 0 {
		spec.session = 3 * time.Second
	}
	if spec.heartbeat == 0 {
		spec.heartbeat = 100 * time.Millisecond
	}
	m := &member{t: t, n: n, pid: findGroup(t, n, spec.group), spec: spec, stop: make(chan bool, 1), done: make(chan struct{}), ready: make(chan struct{})}
	go m.run()
	t.Cleanup(func() { m.kill() })
	select {
	case <-m.ready:
	case <-time.After(20 * time.Second):
		t.Fatalf("member %s never joined", spec.client)
	}
	return m
}

func (m *member) request(msg any) (any, error) {
	return m.n.System().Root.RequestFuture(m.pid, msg, 20*time.Second).Result()
}

func (m *member) join(owned []*messages.TopicPartition) (*messages.JoinGroupResponse, error) {
	m.mu.Lock()
	req := &messages.JoinGroupRequest{
		GroupId: m.spec.group, MemberId: m.id, GroupInstanceId: m.spec.instance, ClientId: m.spec.client,
		SessionTimeoutMs: int32(m.spec.session.Milliseconds()), RebalanceTimeoutMs: 10000,
		Topics: m.spec.topics, Assignors: []string{m.spec.assignor}, Owned: owned,
	}
	m.mu.Unlock()
	res, err := m.request(req)
	if err != nil {
		return nil, err
	}
	resp := res.(*messages.JoinGroupResponse)
	m.mu.Lock()
	defer m.mu.Unlock()
	if resp.Error == messages.ErrorCode_NONE {
		m.id, m.generation = resp.MemberId, resp.Generation
		m.assignment = m.assignment[:0]
		for _, tp := range resp.Assignment {
			m.assignment = append(m.assignment, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
		}
		sort.Strings(m.assignment)
		m.joins++
		if resp.Rejoin {
			m.rejoins++
		}
	}
	return resp, nil
}

func (m *member) run() {
	defer close(m.done)
	var owned []*messages.TopicPartition
	first := true
	for {
		resp, err := m.join(owned)
		if err != nil || resp.Error != messages.ErrorCode_NONE {
			if resp != nil && resp.Error == messages.ErrorCode_FENCED_INSTANCE_ID {
				m.mu.Lock()
				m.fenced = true
				m.mu.Unlock()
				return
			}
			if resp != nil && resp.Error == messages.ErrorCode_UNKNOWN_MEMBER_ID {
				m.mu.Lock()
				m.id = ""
				m.mu.Unlock()
			}
			select {
			case <-m.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		// Eager assignors give everything up before rejoining; the
		// cooperative one keeps what it was given.
		owned = nil
		if m.spec.assignor == assign.CooperativeStickyName {
			owned = resp.Assignment
		}
		if resp.Rejoin {
			continue
		}
		if first {
			first = false
			close(m.ready)
		}
		if leave, stopped := m.heartbeatUntilRebalance(); stopped {
			if leave {
				m.mu.Lock()
				req := &messages.LeaveGroupRequest{GroupId: m.spec.group, MemberId: m.id, GroupInstanceId: m.spec.instance}
				m.mu.Unlock()
				_, _ = m.request(req)
			}
			return
		}
	}
}

// heartbeatUntilRebalance heartbeats until the group rebalances or the
// member is stopped.
func (m *member) heartbeatUntilRebalance() (leave, stopped bool) {
	ticker := time.NewTicker(m.spec.heartbeat)
	defer ticker.Stop()
	for {
		select {
		case leave := <-m.stop:
			return leave, true
		case <-ticker.C:
		}
		m.mu.Lock()
		req := &messages.HeartbeatRequest{GroupId: m.spec.group, MemberId: m.id, Generation: m.generation, GroupInstanceId: m.spec.instance}
		m.lastHeartbeat = time.Now()
		m.mu.Unlock()
		res, err := m.request(req)
		if err != nil {
			continue
		}
		switch res.(*messages.HeartbeatResponse).Error {
		case messages.ErrorCode_NONE:
		case messages.ErrorCode_FENCED_INSTANCE_ID:
			m.mu.Lock()
			m.fenced = true
			m.mu.Unlock()
			return false, true
		case messages.ErrorCode_UNKNOWN_MEMBER_ID:
			m.mu.Lock()
			m.id = ""
			m.mu.Unlock()
			return false, false
		default:
			return false, false
		}
	}
}

// kill stops the member without leaving: it just stops heartbeating.
func (m *member) kill() time.Time {
	select {
	case m.stop <- false:
	default:
	}
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastHeartbeat
}

// leave stops the member after a LeaveGroup.
func (m *member) leave() {
	select {
	case m.stop <- true:
	default:
	}
	<-m.done
}

func (m *member) view() (id string, generation int32, assignment []string, joins int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.id, m.generation, slices.Clone(m.assignment), m.joins
}

func describeGroup(t *testing.T, n *Node, group string) *messages.DescribeGroupResponse {
	t.Helper()
	return request[*messages.DescribeGroupResponse](t, n, n.Groups(), &messages.DescribeGroupRequest{GroupId: group})
}

// waitSettled waits until the group is stable with exactly members, every
// member's own view agrees with the coordinator's, and every partition of
// topic (partitions of them) is assigned to exactly one member. It returns
// the assignment by member id.
func waitSettled(t *testing.T, n *Node, group, topic string, partitions int, members ...*member) map[string][]string {
	t.Helper()
	var last string
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		d := describeGroup(t, n, group)
		last = fmt.Sprintf("%v", d)
		if settled(d, topic, partitions, members) {
			out := map[string][]string{}
			for _, dm := range d.Members {
				var tps []string
				for _, tp := range dm.Assignment {
					tps = append(tps, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
				}
				out[dm.MemberId] = tps
			}
			return out
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("group %s did not settle: %s", group, last)
	return nil
}

func settled(d *messages.DescribeGroupResponse, topic string, partitions int, members []*member) bool {
	if d.Error != messages.ErrorCode_NONE || d.State != "Stable" || len(d.Members) != len(members) {
		return false
	}
	byID := map[string]*messages.GroupMember{}
	seen := map[string]int{}
	for _, dm := range d.Members {
		byID[dm.MemberId] = dm
		for _, tp := range dm.Assignment {
			seen[fmt.Sprintf("%s-%d", tp.Topic, tp.Partition)]++
		}
	}
	if len(seen) != partitions {
		return false
	}
	for p := 0; p < partitions; p++ {
		if seen[fmt.Sprintf("%s-%d", topic, p)] != 1 {
			return false
		}
	}
	for _, m := range members {
		id, gen, assignment, _ := m.view()
		dm, ok := byID[id]
		if !ok || gen != d.Generation {
			return false
		}
		var want []string
		for _, tp := range dm.Assignment {
			want = append(want, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
		}
		sort.Strings(want)
		if !slices.Equal(want, assignment) {
			return false
		}
	}
	return true
}

func counts(plan map[string][]string) []int {
	var out []int
	for _, tps := range plan {
		out = append(out, len(tps))
	}
	sort.Ints(out)
	return out
}

func TestGroupJoinThreeMembersSixPartitions(t *testing.T) {
	n := startNode(t, groupTestConfig(t, t.TempDir()))
	createTopic(t, n, "six", 6)
	for _, assignor := range []string{assign.RangeName, assign.CooperativeStickyName, assign.RoundRobinName} {
		t.Run(assignor, func(t *testing.T) {
			group := "g-" + assignor
			spec := memberSpec{group: group, topics: []string{"six"}, assignor: assignor}
			var ms []*member
			for i := 0; i < 3; i++ {
				spec.client = fmt.Sprintf("c%d", i)
				ms = append(ms, startMember(t, n, spec))
				// Each member joins a settled group, so partitions move.
				plan := waitSettled(t, n, group, "six", 6, ms...)
				require.Len(t, plan, i+1)
			}
			plan := waitSettled(t, n, group, "six", 6, ms...)
			require.Equal(t, []int{2, 2, 2}, counts(plan), "%v", plan)
			d := describeGroup(t, n, group)
			require.Equal(t, assignor, d.Assignor)
			rejoins := 0
			for _, m := range ms {
				m.mu.Lock()
				rejoins += m.rejoins
				m.mu.Unlock()
			}
			if assignor == assign.CooperativeStickyName {
				require.Positive(t, rejoins, "a member that gives up partitions is told to rejoin first")
			} else {
				require.Zero(t, rejoins)
			}
		})
	}
}

func TestGroupMemberDeathReassigns(t *testing.T) {
	n := startNode(t, groupTestConfig(t, t.TempDir()))
	createTopic(t, n, "six", 6)
	for _, assignor := range []string{assign.RangeName, assign.CooperativeStickyName} {
		t.Run(assignor, func(t *testing.T) {
			group := "death-" + assignor
			spec := memberSpec{group: group, topics: []string{"six"}, assignor: assignor, session: time.Second}
			var ms []*member
			for i := 0; i < 3; i++ {
				spec.client = fmt.Sprintf("c%d", i)
				ms = append(ms, startMember(t, n, spec))
			}
			waitSettled(t, n, group, "six", 6, ms...)
			deadID, _, deadPartitions, _ := ms[0].view()
			require.Len(t, deadPartitions, 2)
			lastHeartbeat := ms[0].kill()
			plan := waitSettled(t, n, group, "six", 6, ms[1:]...)
			took := time.Since(lastHeartbeat)
			require.NotContains(t, plan, deadID)
			require.Equal(t, []int{3, 3}, counts(plan))
			t.Logf("%s: partitions of a dead member reassigned %v after its last heartbeat (session timeout 1 s)", assignor, took.Round(time.Millisecond))
		})
	}
}

func TestGroupMoreMembersThanPartitions(t *testing.T) {
	n := startNode(t, groupTestConfig(t, t.TempDir()))
	createTopic(t, n, "two", 2)
	spec := memberSpec{group: "many", topics: []string{"two"}, assignor: assign.RangeName}
	var ms []*member
	for i := 0; i < 4; i++ {
		spec.client = fmt.Sprintf("c%d", i)
		ms = append(ms, startMember(t, n, spec))
	}
	plan := waitSettled(t, n, "many", "two", 2, ms...)
	require.Equal(t, []int{0, 0, 1, 1}, counts(plan))
	// A member with a partition leaves: one of the idle ones takes it.
	var leaver int
	for i, m := range ms {
		if _, _, a, _ := m.view(); len(a) == 1 {
			leaver = i
			break
		}
	}
	ms[leaver].leave()
	rest := slices.Delete(slices.Clone(ms), leaver, leaver+1)
	plan = waitSettled(t, n, "many", "two", 2, rest...)
	require.Equal(t, []int{0, 1, 1}, counts(plan))
}

func TestGroupStaticMemberRestartKeepsPartitions(t *testing.T) {
	n := startNode(t, groupTestConfig(t, t.TempDir()))
	createTopic(t, n, "six", 6)
	spec := memberSpec{group: "static", topics: []string{"six"}, assignor: assign.RangeName}
	spec.client, spec.instance = "a", "instance-a"
	a := startMember(t, n, spec)
	spec.client, spec.instance = "b", "instance-b"
	b := startMember(t, n, spec)
	waitSettled(t, n, "static", "six", 6, a, b)
	oldID, generation, assigned, _ := a.view()
	_, _, _, bJoins := b.view()

	a.kill()
	spec.client, spec.instance = "a", "instance-a"
	a2 := startMember(t, n, spec)
	newID, generation2, assigned2, _ := a2.view()
	require.NotEqual(t, oldID, newID)
	require.Equal(t, generation, generation2, "no rebalance")
	require.Equal(t, assigned, assigned2, "same partitions")
	waitSettled(t, n, "static", "six", 6, a2, b)
	_, _, _, bJoins2 := b.view()
	require.Equal(t, bJoins, bJoins2, "the other member never rejoined")
	require.Equal(t, generation, describeGroup(t, n, "static").Generation)

	// The old member id is fenced.
	hb := request[*messages.HeartbeatResponse](t, n, n.Groups(), &messages.HeartbeatRequest{GroupId: "static", MemberId: oldID, Generation: generation, GroupInstanceId: "instance-a"})
	require.Equal(t, messages.ErrorCode_FENCED_INSTANCE_ID, hb.Error, hb.ErrorMessage)
	commit := request[*messages.OffsetCommitResponse](t, n, n.Groups(), &messages.OffsetCommitRequest{GroupId: "static", MemberId: oldID, Generation: generation,
		Offsets: []*messages.PartitionOffset{{Topic: "six", Partition: 0, Offset: 5}}})
	require.Equal(t, messages.ErrorCode_UNKNOWN_MEMBER_ID, commit.Error, commit.ErrorMessage)
}

func TestGroupPartitionCountChangeRebalances(t *testing.T) {
	n := startNode(t, groupTestConfig(t, t.TempDir()))
	createTopic(t, n, "grows", 2)
	m := startMember(t, n, memberSpec{group: "grow", client: "c", topics: []string{"grows"}, assignor: assign.RangeName})
	waitSettled(t, n, "grow", "grows", 2, m)
	del := request[*messages.DeleteTopicResponse](t, n, n.Metadata(), &messages.DeleteTopicRequest{Name: "grows"})
	require.Equal(t, messages.ErrorCode_NONE, del.Error, del.ErrorMessage)
	createTopic(t, n, "grows", 5)
	waitSettled(t, n, "grow", "grows", 5, m)
}

func offsetFetch(t *testing.T, n *Node, group string) []string {
	t.Helper()
	resp := request[*messages.OffsetFetchResponse](t, n, n.Groups(), &messages.OffsetFetchRequest{GroupId: group})
	require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
	var out []string
	for _, o := range resp.Offsets {
		out = append(out, fmt.Sprintf("%s-%d@%d:%s", o.Topic, o.Partition, o.Offset, o.Metadata))
	}
	return out
}

func commit(t *testing.T, n *Node, req *messages.OffsetCommitRequest) *messages.OffsetCommitResponse {
	t.Helper()
	return request[*messages.OffsetCommitResponse](t, n, n.Groups(), req)
}

func TestGroupCommitsSurviveRestart(t *testing.T) {
	cfg := groupTestConfig(t, t.TempDir())
	n := startNode(t, cfg)
	createTopic(t, n, "six", 6)
	m := startMember(t, n, memberSpec{group: "keeper", client: "c", topics: []string{"six"}, assignor: assign.RangeName})
	waitSettled(t, n, "keeper", "six", 6, m)
	id, generation, _, _ := m.view()
	for i, offset := range []int64{10, 20, 30} {
		resp := commit(t, n, &messages.OffsetCommitRequest{GroupId: "keeper", MemberId: id, Generation: generation, Offsets: []*messages.PartitionOffset{
			{Topic: "six", Partition: 0, Offset: offset, Metadata: fmt.Sprint("m", i)},
			{Topic: "six", Partition: 3, Offset: offset + 1},
		}})
		require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
		require.Len(t, resp.Offsets, 2)
	}
	m.leave()
	admin := commit(t, n, &messages.OffsetCommitRequest{GroupId: "admin", Generation: -1, Offsets: []*messages.PartitionOffset{{Topic: "six", Partition: 5, Offset: 7}}})
	require.Equal(t, messages.ErrorCode_NONE, admin.Error, admin.ErrorMessage)
	doomed := commit(t, n, &messages.OffsetCommitRequest{GroupId: "doomed", Generation: -1, Offsets: []*messages.PartitionOffset{{Topic: "six", Partition: 1, Offset: 9}}})
	require.Equal(t, messages.ErrorCode_NONE, doomed.Error, doomed.ErrorMessage)
	del := request[*messages.DeleteGroupResponse](t, n, n.Groups(), &messages.DeleteGroupRequest{GroupId: "doomed"})
	require.Equal(t, messages.ErrorCode_NONE, del.Error, del.ErrorMessage)

	want := []string{"six-0@30:m2", "six-3@31:"}
	require.Equal(t, want, offsetFetch(t, n, "keeper"))
	require.NoError(t, n.Stop())

	n2 := startNode(t, cfg)
	require.Equal(t, want, offsetFetch(t, n2, "keeper"))
	require.Equal(t, []string{"six-5@7:"}, offsetFetch(t, n2, "admin"))
	require.Empty(t, offsetFetch(t, n2, "doomed"))
	one := request[*messages.OffsetFetchResponse](t, n2, n2.Groups(), &messages.OffsetFetchRequest{GroupId: "keeper",
		Partitions: []*messages.TopicPartition{{Topic: "six", Partition: 3}, {Topic: "six", Partition: 4}}})
	require.Equal(t, int64(31), one.Offsets[0].Offset)
	require.Equal(t, int64(-1), one.Offsets[1].Offset)

	list := request[*messages.ListGroupsResponse](t, n2, n2.Groups(), &messages.ListGroupsRequest{})
	var names []string
	for _, g := range list.Groups {
		names = append(names, g.GroupId+"/"+g.State)
	}
	require.Equal(t, []string{"admin/Empty", "keeper/Empty"}, names)
	d := describeGroup(t, n2, "doomed")
	require.Equal(t, messages.ErrorCode_GROUP_ID_NOT_FOUND, d.Error)
}

func TestGroupBadInputChangesNothing(t *testing.T) {
	n := startNode(t, groupTestConfig(t, t.TempDir()))
	createTopic(t, n, "six", 6)
	m := startMember(t, n, memberSpec{group: "busy", client: "c", topics: []string{"six"}, assignor: assign.RangeName})
	waitSettled(t, n, "busy", "six", 6, m)
	id, generation, _, _ := m.view()
	ok := commit(t, n, &messages.OffsetCommitRequest{GroupId: "busy", MemberId: id, Generation: generation, Offsets: []*messages.PartitionOffset{{Topic: "six", Partition: 2, Offset: 42}}})
	require.Equal(t, messages.ErrorCode_NONE, ok.Error, ok.ErrorMessage)
	before := describeGroup(t, n, "busy")
	offsetsBefore := offsetFetch(t, n, "busy")

	one := []*messages.PartitionOffset{{Topic: "six", Partition: 2, Offset: 99}}
	for _, tc := range []struct {
		name string
		msg  any
		want messages.ErrorCode
	}{
		{"find empty group id", &messages.FindCoordinatorRequest{}, messages.ErrorCode_INVALID_GROUP_ID},
		{"join empty group id", &messages.JoinGroupRequest{Topics: []string{"six"}, Assignors: []string{"range"}}, messages.ErrorCode_INVALID_GROUP_ID},
		{"commit empty group id", &messages.OffsetCommitRequest{Generation: -1, Offsets: one}, messages.ErrorCode_INVALID_GROUP_ID},
		{"commit unknown member", &messages.OffsetCommitRequest{GroupId: "busy", MemberId: "nobody", Generation: generation, Offsets: one}, messages.ErrorCode_UNKNOWN_MEMBER_ID},
		{"commit old generation", &messages.OffsetCommitRequest{GroupId: "busy", MemberId: id, Generation: generation - 1, Offsets: one}, messages.ErrorCode_ILLEGAL_GENERATION},
		{"commit future generation", &messages.OffsetCommitRequest{GroupId: "busy", MemberId: id, Generation: generation + 5, Offsets: one}, messages.ErrorCode_ILLEGAL_GENERATION},
		{"admin commit with active members", &messages.OffsetCommitRequest{GroupId: "busy", Generation: -1, Offsets: one}, messages.ErrorCode_NON_EMPTY_GROUP},
		{"commit metadata too long", &messages.OffsetCommitRequest{GroupId: "busy", MemberId: id, Generation: generation,
			Offsets: []*messages.PartitionOffset{{Topic: "six", Partition: 2, Offset: 100}, {Topic: "six", Partition: 1, Offset: 5, Metadata: strings.Repeat("m", group.MaxOffsetMetadataBytes+1)}}}, messages.ErrorCode_INVALID_REQUEST},
		{"commit bad topic", &messages.OffsetCommitRequest{GroupId: "busy", MemberId: id, Generation: generation,
			Offsets: []*messages.PartitionOffset{{Topic: "no/such", Partition: 0, Offset: 1}}}, messages.ErrorCode_INVALID_REQUEST},
		{"delete non-empty group", &messages.DeleteGroupRequest{GroupId: "busy"}, messages.ErrorCode_NON_EMPTY_GROUP},
		{"delete unknown group", &messages.DeleteGroupRequest{GroupId: "never-seen"}, messages.ErrorCode_GROUP_ID_NOT_FOUND},
		{"describe unknown group", &messages.DescribeGroupRequest{GroupId: "never-seen"}, messages.ErrorCode_GROUP_ID_NOT_FOUND},
		{"heartbeat unknown member", &messages.HeartbeatRequest{GroupId: "busy", MemberId: "nobody", Generation: generation}, messages.ErrorCode_UNKNOWN_MEMBER_ID},
		{"heartbeat old generation", &messages.HeartbeatRequest{GroupId: "busy", MemberId: id, Generation: generation - 1}, messages.ErrorCode_ILLEGAL_GENERATION},
		{"leave unknown member", &messages.LeaveGroupRequest{GroupId: "busy", MemberId: "nobody"}, messages.ErrorCode_UNKNOWN_MEMBER_ID},
		{"join unknown member id", &messages.JoinGroupRequest{GroupId: "busy", MemberId: "nobody", Topics: []string{"six"}, Assignors: []string{"range"}}, messages.ErrorCode_UNKNOWN_MEMBER_ID},
		{"join session too short", &messages.JoinGroupRequest{GroupId: "busy", SessionTimeoutMs: 500, Topics: []string{"six"}, Assignors: []string{"range"}}, messages.ErrorCode_INVALID_SESSION_TIMEOUT},
		{"join session too long", &messages.JoinGroupRequest{GroupId: "busy", SessionTimeoutMs: 301000, Topics: []string{"six"}, Assignors: []string{"range"}}, messages.ErrorCode_INVALID_SESSION_TIMEOUT},
		{"join unknown assignor", &messages.JoinGroupRequest{GroupId: "busy", Topics: []string{"six"}, Assignors: []string{"magic"}}, messages.ErrorCode_INCONSISTENT_GROUP_PROTOCOL},
		{"join assignor the group lacks", &messages.JoinGroupRequest{GroupId: "busy", Topics: []string{"six"}, Assignors: []string{"roundrobin"}}, messages.ErrorCode_INCONSISTENT_GROUP_PROTOCOL},
		{"join bad topic", &messages.JoinGroupRequest{GroupId: "busy", Topics: []string{"bad topic"}, Assignors: []string{"range"}}, messages.ErrorCode_INVALID_TOPIC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := actors.Request[any](context.Background(), n.System().Root, n.Groups(), tc.msg, requestTimeout)
			require.NoError(t, err)
			code, text := responseError(t, res)
			require.Equal(t, tc.want, code, text)
			require.NotEmpty(t, text, "every error has a message")
		})
	}
	after := describeGroup(t, n, "busy")
	require.Equal(t, before.Generation, after.Generation)
	require.Equal(t, "Stable", after.State)
	require.Len(t, after.Members, 1)
	require.Equal(t, offsetsBefore, offsetFetch(t, n, "busy"))
	_, generationNow, _, _ := m.view()
	require.Equal(t, generation, generationNow)
}

// responseError returns the error code and message of a group response.
func responseError(t *testing.T, res any) (messages.ErrorCode, string) {
	t.Helper()
	r, ok := res.(interface {
		GetError() messages.ErrorCode
		GetErrorMessage() string
	})
	require.True(t, ok, "%T", res)
	return r.GetError(), r.GetErrorMessage()
}

func TestOffsetsCleaning(t *testing.T) {
	cfg := groupTestConfig(t, t.TempDir())
	cfg.OffsetsTopicPartitions = 1
	cfg.OffsetsTopicSegmentBytes = 4096
	cfg.OffsetsCleanBytes = 8192
	n := startNode(t, cfg)
	const commits = 300
	var written int64
	for i := 0; i < commits; i++ {
		for _, group := range []string{"alpha", "beta"} {
			resp := commit(t, n, &messages.OffsetCommitRequest{GroupId: group, Generation: -1, Offsets: []*messages.PartitionOffset{
				{Topic: "orders", Partition: 0, Offset: int64(i)},
				{Topic: "orders", Partition: 1, Offset: int64(2 * i), Metadata: "some metadata to make the record longer"},
			}})
			require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
			written += 2
		}
	}
	pid := partitionPID(t, n, group.OffsetsTopic, 0)
	st := request[*messages.PartitionStatusResponse](t, n, pid, &messages.PartitionStatusRequest{})
	require.Equal(t, messages.ErrorCode_NONE, st.Error, st.ErrorMessage)
	t.Logf("after %d records: log start %d, end %d, %d bytes in %d segments", written, st.LogStartOffset, st.LogEndOffset, st.SizeBytes, st.Segments)
	require.Positive(t, st.LogStartOffset, "cleaning deleted the superseded records")
	require.Less(t, st.LogEndOffset-st.LogStartOffset, written/4, "most records are gone")
	require.Less(t, st.SizeBytes, 3*cfg.OffsetsCleanBytes, "the partition stays small")

	want := []string{
		fmt.Sprintf("orders-0@%d:", commits-1),
		fmt.Sprintf("orders-1@%d:some metadata to make the record longer", 2*(commits-1)),
	}
	require.Equal(t, want, offsetFetch(t, n, "alpha"))
	require.NoError(t, n.Stop())
	n2 := startNode(t, cfg)
	require.Equal(t, want, offsetFetch(t, n2, "alpha"))
	require.Equal(t, want, offsetFetch(t, n2, "beta"))
}

func TestDeleteRecords(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	resp := request[*messages.CreateTopicResponse](t, n, n.Metadata(), &messages.CreateTopicRequest{Name: "d", Partitions: 1, Configs: map[string]string{"segment.bytes": "100"}})
	require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
	pid := partitionPID(t, n, "d", 0)
	for i := 0; i < 5; i++ {
		p := request[*messages.ProduceResponse](t, n, pid, &messages.ProduceRequest{Topic: "d", Acks: 1, Records: actortest.Batch(t, fmt.Sprint("value-", i))})
		require.Equal(t, messages.ErrorCode_NONE, p.Error, p.ErrorMessage)
	}
	for _, tc := range []struct {
		name   string
		offset int64
		want   messages.ErrorCode
		low    int64
	}{
		{"past the end", 6, messages.ErrorCode_OFFSET_OUT_OF_RANGE, 0},
		{"negative", -2, messages.ErrorCode_OFFSET_OUT_OF_RANGE, 0},
		{"before 3", 3, messages.ErrorCode_NONE, 3},
		{"lower does nothing", 1, messages.ErrorCode_NONE, 3},
		{"high watermark", -1, messages.ErrorCode_NONE, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := request[*messages.DeleteRecordsResponse](t, n, pid, &messages.DeleteRecordsRequest{Topic: "d", Offset: tc.offset})
			require.Equal(t, tc.want, r.Error, r.ErrorMessage)
			require.Equal(t, tc.low, r.LowWatermark)
			st := request[*messages.PartitionStatusResponse](t, n, pid, &messages.PartitionStatusRequest{})
			require.Equal(t, tc.low, st.LogStartOffset)
			require.Equal(t, int64(5), st.LogEndOffset)
		})
	}
}
