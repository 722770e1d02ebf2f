package assign

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func tps(topic string, partitions ...int32) []TopicPartition {
	out := []TopicPartition{}
	for _, p := range partitions {
		out = append(out, TopicPartition{Topic: topic, Partition: p})
	}
	return out
}

func join(lists ...[]TopicPartition) []TopicPartition {
	out := []TopicPartition{}
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

func sub(id string, topics ...string) Member { return Member{ID: id, Topics: topics} }

func static(id, instance string, topics ...string) Member {
	return Member{ID: id, InstanceID: instance, Topics: topics}
}

func TestRange(t *testing.T) {
	tests := []struct {
		name       string
		members    []Member
		partitions map[string]int32
		want       Plan
	}{
		{
			name:       "four partitions three members",
			members:    []Member{sub("c", "t0"), sub("a", "t0"), sub("b", "t0")},
			partitions: map[string]int32{"t0": 4},
			want:       Plan{"a": tps("t0", 0, 1), "b": tps("t0", 2), "c": tps("t0", 3)},
		},
		{
			name:       "kafka doc example two topics",
			members:    []Member{sub("C1", "t0", "t1"), sub("C0", "t0", "t1")},
			partitions: map[string]int32{"t0": 3, "t1": 3},
			want:       Plan{"C0": join(tps("t0", 0, 1), tps("t1", 0, 1)), "C1": join(tps("t0", 2), tps("t1", 2))},
		},
		{
			name:       "different subscriptions",
			members:    []Member{sub("a", "t0"), sub("b", "t0", "t1"), sub("c", "t1")},
			partitions: map[string]int32{"t0": 3, "t1": 2},
			want:       Plan{"a": tps("t0", 0, 1), "b": join(tps("t0", 2), tps("t1", 0)), "c": tps("t1", 1)},
		},
		{
			name:       "more members than partitions",
			members:    []Member{sub("a", "t0"), sub("b", "t0"), sub("c", "t0"), sub("d", "t0")},
			partitions: map[string]int32{"t0": 2},
			want:       Plan{"a": tps("t0", 0), "b": tps("t0", 1), "c": {}, "d": {}},
		},
		{
			name:       "one member",
			members:    []Member{sub("a", "t0", "t1")},
			partitions: map[string]int32{"t0": 3, "t1": 1},
			want:       Plan{"a": join(tps("t0", 0, 1, 2), tps("t1", 0))},
		},
		{
			name:       "static members first by instance id",
			members:    []Member{static("m1", "z", "t0"), sub("m0", "t0"), static("m2", "a", "t0")},
			partitions: map[string]int32{"t0": 4},
			want:       Plan{"m2": tps("t0", 0, 1), "m1": tps("t0", 2), "m0": tps("t0", 3)},
		},
		{
			name:       "unknown and empty topics and unsubscribed topics",
			members:    []Member{sub("a", "missing", "empty", "t0", "t0"), sub("b", "t0")},
			partitions: map[string]int32{"t0": 3, "empty": 0, "other": 5},
			want:       Plan{"a": tps("t0", 0, 1), "b": tps("t0", 2)},
		},
		{
			name:       "member without subscription",
			members:    []Member{sub("a"), sub("b", "t0")},
			partitions: map[string]int32{"t0": 2},
			want:       Plan{"a": {}, "b": tps("t0", 0, 1)},
		},
		{
			name:       "repeated member id counts once",
			members:    []Member{sub("a", "t0"), sub("a", "t1"), sub("b", "t0")},
			partitions: map[string]int32{"t0": 2, "t1": 2},
			want:       Plan{"a": tps("t0", 0), "b": tps("t0", 1)},
		},
		{
			name:       "no members",
			partitions: map[string]int32{"t0": 2},
			want:       Plan{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := cloneMembers(tt.members)
			got := Range().Assign(tt.members, tt.partitions)
			require.Equal(t, tt.want, got)
			require.Equal(t, before, tt.members, "input modified")
		})
	}
}

func TestRoundRobin(t *testing.T) {
	tests := []struct {
		name       string
		members    []Member
		partitions map[string]int32
		want       Plan
	}{
		{
			name:       "kafka doc example equal subscriptions",
			members:    []Member{sub("C1", "t0", "t1"), sub("C0", "t0", "t1")},
			partitions: map[string]int32{"t0": 3, "t1": 3},
			want:       Plan{"C0": join(tps("t0", 0, 2), tps("t1", 1)), "C1": join(tps("t0", 1), tps("t1", 0, 2))},
		},
		{
			name: "kafka doc example unequal subscriptions",
			members: []Member{
				sub("C0", "t0"), sub("C1", "t0", "t1"), sub("C2", "t0", "t1", "t2"),
			},
			partitions: map[string]int32{"t0": 1, "t1": 2, "t2": 3},
			want: Plan{
				"C0": tps("t0", 0),
				"C1": tps("t1", 0),
				"C2": join(tps("t1", 1), tps("t2", 0, 1, 2)),
			},
		},
		{
			name:       "four partitions three members",
			members:    []Member{sub("b", "t0"), sub("a", "t0"), sub("c", "t0")},
			partitions: map[string]int32{"t0": 4},
			want:       Plan{"a": tps("t0", 0, 3), "b": tps("t0", 1), "c": tps("t0", 2)},
		},
		{
			name:       "skips across topics keep the cycle",
			members:    []Member{sub("a", "t0", "t1"), sub("b", "t1"), sub("c", "t0", "t1")},
			partitions: map[string]int32{"t0": 3, "t1": 3},
			// t0-0 a, t0-1 c (b skipped), t0-2 a, t1-0 b, t1-1 c, t1-2 a.
			want: Plan{"a": join(tps("t0", 0, 2), tps("t1", 2)), "b": tps("t1", 0), "c": join(tps("t0", 1), tps("t1", 1))},
		},
		{
			name:       "more members than partitions",
			members:    []Member{sub("a", "t0"), sub("b", "t0"), sub("c", "t0")},
			partitions: map[string]int32{"t0": 2},
			want:       Plan{"a": tps("t0", 0), "b": tps("t0", 1), "c": {}},
		},
		{
			name:       "one member",
			members:    []Member{sub("a", "t1", "t0")},
			partitions: map[string]int32{"t0": 2, "t1": 1},
			want:       Plan{"a": join(tps("t0", 0, 1), tps("t1", 0))},
		},
		{
			name:       "static members first by instance id",
			members:    []Member{sub("m0", "t0"), static("m1", "i2", "t0"), static("m2", "i1", "t0")},
			partitions: map[string]int32{"t0": 3},
			want:       Plan{"m2": tps("t0", 0), "m1": tps("t0", 1), "m0": tps("t0", 2)},
		},
		{
			name:       "topic without partitions",
			members:    []Member{sub("a", "gone"), sub("b", "t0")},
			partitions: map[string]int32{"t0": 1},
			want:       Plan{"a": {}, "b": tps("t0", 0)},
		},
		{
			name:    "no members",
			members: nil,
			want:    Plan{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := cloneMembers(tt.members)
			got := RoundRobin().Assign(tt.members, tt.partitions)
			require.Equal(t, tt.want, got)
			require.Equal(t, before, tt.members, "input modified")
		})
	}
}

func TestChoose(t *testing.T) {
	tests := []struct {
		name      string
		supported [][]string
		want      string
		wantErr   error
	}{
		{"one member takes its first", [][]string{{"cooperative-sticky", "range"}}, "cooperative-sticky", nil},
		{"same preferences", [][]string{{"range", "roundrobin"}, {"range", "roundrobin"}}, "range", nil},
		{"majority wins", [][]string{{"range", "roundrobin"}, {"roundrobin", "range"}, {"roundrobin", "range"}}, "roundrobin", nil},
		{"tie goes to the first member's preference", [][]string{{"roundrobin", "range"}, {"range", "roundrobin"}}, "roundrobin", nil},
		{"only common names count", [][]string{{"range", "roundrobin"}, {"roundrobin", "range"}, {"roundrobin"}}, "roundrobin", nil},
		{"vote skips names not common", [][]string{{"x", "range", "roundrobin"}, {"y", "range", "roundrobin"}}, "range", nil},
		{"rolling upgrade to cooperative", [][]string{{"cooperative-sticky", "range"}, {"range"}, {"cooperative-sticky", "range"}}, "range", nil},
		{"upgrade complete", [][]string{{"cooperative-sticky", "range"}, {"cooperative-sticky", "range"}}, "cooperative-sticky", nil},
		{"repeated names", [][]string{{"range", "range", "roundrobin"}, {"roundrobin", "roundrobin", "range"}, {"roundrobin"}}, "roundrobin", nil},
		{"nothing in common", [][]string{{"range"}, {"roundrobin"}}, "", ErrNoCommonAssignor},
		{"member supports nothing", [][]string{{"range"}, {}}, "", ErrNoCommonAssignor},
		{"no members", nil, "", ErrNoMembers},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Choose(tt.supported)
			if tt.wantErr != nil {
				require.Error(t, err)
				require.True(t, errors.Is(err, tt.wantErr), err.Error())
				require.Empty(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestByName(t *testing.T) {
	for _, name := range []string{RangeName, RoundRobinName, CooperativeStickyName} {
		t.Run(name, func(t *testing.T) {
			a, err := ByName(name)
			require.NoError(t, err)
			require.Equal(t, name, a.Name())
		})
	}
	_, err := ByName("sticky")
	require.ErrorIs(t, err, ErrUnknownAssignor)
}

func TestTopicPartitionString(t *testing.T) {
	require.Equal(t, "orders-3", TopicPartition{Topic: "orders", Partition: 3}.String())
}

func cloneMembers(members []Member) []Member {
	if members == nil {
		return nil
	}
	out := make([]Member, len(members))
	for i, m := range members {
		out[i] = m
		out[i].Topics = slices.Clone(m.Topics)
		out[i].Owned = slices.Clone(m.Owned)
	}
	return out
}

// validatePlan checks what every assignor promises: an entry for every
// member, sorted lists, and each partition of a subscribed topic assigned
// exactly once, to a member subscribed to its topic.
func validatePlan(members []Member, partitions map[string]int32, plan Plan) error {
	subscribed := make(map[string]map[string]bool)
	topics := make(map[string]bool)
	for _, m := range members {
		if subscribed[m.ID] != nil {
			continue
		}
		subscribed[m.ID] = make(map[string]bool)
		for _, t := range m.Topics {
			subscribed[m.ID][t] = true
			topics[t] = true
		}
	}
	if len(plan) != len(subscribed) {
		return fmt.Errorf("plan has %d members, group %d", len(plan), len(subscribed))
	}
	owner := make(map[TopicPartition]string)
	for id, list := range plan {
		if subscribed[id] == nil {
			return fmt.Errorf("plan names unknown member %q", id)
		}
		if list == nil {
			return fmt.Errorf("member %q has a nil list", id)
		}
		if !slices.IsSortedFunc(list, compareTopicPartitions) {
			return fmt.Errorf("member %q: list not sorted: %v", id, list)
		}
		for _, tp := range list {
			if prev, ok := owner[tp]; ok {
				return fmt.Errorf("%v assigned to %q and %q", tp, prev, id)
			}
			owner[tp] = id
			if !subscribed[id][tp.Topic] {
				return fmt.Errorf("%v assigned to %q, not subscribed", tp, id)
			}
			if tp.Partition < 0 || tp.Partition >= partitions[tp.Topic] {
				return fmt.Errorf("%v does not exist", tp)
			}
		}
	}
	for topic := range topics {
		for p := int32(0); p < partitions[topic]; p++ {
			if _, ok := owner[TopicPartition{Topic: topic, Partition: p}]; !ok {
				return fmt.Errorf("%s-%d unassigned", topic, p)
			}
		}
	}
	return nil
}

// balancedWithinOne checks that members with the same subscription hold
// counts that differ by at most one.
func balancedWithinOne(members []Member, plan Plan) error {
	counts := make(map[string][]int)
	seen := make(map[string]bool)
	for _, m := range members {
		if seen[m.ID] {
			continue
		}
		seen[m.ID] = true
		topics := slices.Clone(m.Topics)
		slices.Sort(topics)
		topics = slices.Compact(topics)
		key := fmt.Sprint(topics)
		counts[key] = append(counts[key], len(plan[m.ID]))
	}
	for key, c := range counts {
		if slices.Max(c)-slices.Min(c) > 1 {
			return fmt.Errorf("subscription %s: counts %v", key, c)
		}
	}
	return nil
}
