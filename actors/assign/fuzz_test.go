package assign

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// groupFromBytes reads a group from data, one byte per choice: up to 4
// topics and their partition counts (possibly negative), then members with
// ids, instance ids, subscriptions, claims and generations. Every byte string
// makes a group; a repeated member id is allowed.
func groupFromBytes(data []byte) ([]Member, map[string]int32) {
	next := func() int {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return int(b)
	}
	topics := []string{"a", "b", "c", "d"}
	partitions := make(map[string]int32)
	for _, t := range topics[:1+next()%4] {
		partitions[t] = int32(next()%40) - 4
	}
	var members []Member
	for n := next() % 12; len(members) < n; {
		m := Member{ID: fmt.Sprintf("m%d", next()%16), Generation: int32(next()%5) - 1}
		if next()%3 == 0 {
			m.InstanceID = fmt.Sprintf("i%d", next()%8)
		}
		mask := next()
		for i, t := range append(topics, "x") {
			if mask&(1<<i) != 0 {
				m.Topics = append(m.Topics, t)
			}
		}
		for range next() % 8 {
			m.Owned = append(m.Owned, TopicPartition{Topic: topics[next()%4], Partition: int32(next()%48) - 4})
		}
		members = append(members, m)
	}
	return members, partitions
}

// FuzzAssign checks every assignor's promises on arbitrary groups, and that
// Revocations, Withhold and Choose accept whatever they are given.
func FuzzAssign(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 4, 3, 1, 0, 1, 0})
	f.Add([]byte{3, 7, 9, 0, 3, 5, 2, 1, 0, 15, 2, 0, 1, 3, 1, 2, 0, 2, 9, 0, 5, 3, 2, 9, 1, 0, 2, 2, 4})
	f.Add([]byte{1, 39, 0, 11, 1, 4, 3, 3, 3, 7, 0, 1, 0, 2, 4, 1, 3, 3, 2, 2, 1, 3, 1, 7, 1, 0, 0, 9, 0, 4, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		members, partitions := groupFromBytes(data)
		for _, a := range []Assignor{Range(), RoundRobin(), CooperativeSticky()} {
			plan := a.Assign(members, partitions)
			require.NoError(t, validatePlan(members, partitions, plan), a.Name())
			if a.Name() == CooperativeStickyName {
				require.NoError(t, balancedWithinOne(members, plan))
			}
			revocations := Revocations(members, plan)
			for id, list := range revocations {
				require.Empty(t, intersect(list, plan[id]), "%s revokes what it keeps", id)
			}
			// The first cooperative phase never gives a partition to a
			// member while another claimant could still be using it, unless
			// the member's own claim is the newest.
			first := Withhold(members, plan)
			require.Len(t, first, len(plan))
			for id, list := range first {
				require.Subset(t, plan[id], list)
				for _, tp := range list {
					requireSoleOrNewestClaim(t, members, id, tp)
				}
			}
		}
		var supported [][]string
		for _, m := range members {
			supported = append(supported, m.Topics)
		}
		if name, err := Choose(supported); err == nil {
			for _, names := range supported {
				require.Contains(t, names, name)
			}
		}
	})
}

func requireSoleOrNewestClaim(t *testing.T, members []Member, id string, tp TopicPartition) {
	t.Helper()
	seen := make(map[string]bool)
	var own *Member
	var others []*Member
	for i := range members {
		m := &members[i]
		if seen[m.ID] {
			continue
		}
		seen[m.ID] = true
		if !slices.Contains(m.Owned, tp) {
			continue
		}
		if m.ID == id {
			own = m
		} else {
			others = append(others, m)
		}
	}
	for _, other := range others {
		require.NotNil(t, own, "%v handed to %s while %s claims it", tp, id, other.ID)
		require.Greater(t, own.Generation, other.Generation, "%v handed to %s while %s claims it", tp, id, other.ID)
	}
}

func intersect(a, b []TopicPartition) []TopicPartition {
	var out []TopicPartition
	for _, tp := range a {
		for _, other := range b {
			if tp == other {
				out = append(out, tp)
			}
		}
	}
	return out
}
