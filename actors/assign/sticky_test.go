package assign

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func owning(id string, generation int32, owned []TopicPartition, topics ...string) Member {
	return Member{ID: id, Topics: topics, Owned: owned, Generation: generation}
}

// changedOwners counts the partitions that plan gives to a member that did
// not claim them (in Owned): the partitions that change hands.
func changedOwners(members []Member, plan Plan) int {
	before := make(map[TopicPartition]map[string]bool)
	for _, m := range members {
		for _, tp := range m.Owned {
			if before[tp] == nil {
				before[tp] = make(map[string]bool)
			}
			before[tp][m.ID] = true
		}
	}
	changed := 0
	for id, list := range plan {
		for _, tp := range list {
			if !before[tp][id] {
				changed++
			}
		}
	}
	return changed
}

func TestCooperativeSticky(t *testing.T) {
	tests := []struct {
		name        string
		members     []Member
		partitions  map[string]int32
		want        Plan
		changed     int
		revocations map[string][]TopicPartition
		withheld    Plan
	}{
		{
			name:        "fresh group deals in member order",
			members:     []Member{sub("c", "t0"), sub("b", "t0"), sub("a", "t0")},
			partitions:  map[string]int32{"t0": 7},
			want:        Plan{"a": tps("t0", 0, 3, 6), "b": tps("t0", 1, 4), "c": tps("t0", 2, 5)},
			changed:     7,
			revocations: map[string][]TopicPartition{},
			withheld:    Plan{"a": tps("t0", 0, 3, 6), "b": tps("t0", 1, 4), "c": tps("t0", 2, 5)},
		},
		{
			name: "stable group keeps everything",
			members: []Member{
				owning("a", 4, tps("t0", 0, 1, 5), "t0"),
				owning("b", 4, tps("t0", 2, 3), "t0"),
				owning("c", 4, tps("t0", 4, 6), "t0"),
			},
			partitions:  map[string]int32{"t0": 7},
			want:        Plan{"a": tps("t0", 0, 1, 5), "b": tps("t0", 2, 3), "c": tps("t0", 4, 6)},
			changed:     0,
			revocations: map[string][]TopicPartition{},
			withheld:    Plan{"a": tps("t0", 0, 1, 5), "b": tps("t0", 2, 3), "c": tps("t0", 4, 6)},
		},
		{
			name: "a member joins",
			members: []Member{
				owning("a", 1, tps("t0", 0, 1, 2), "t0"),
				owning("b", 1, tps("t0", 3, 4, 5), "t0"),
				sub("c", "t0"),
			},
			partitions:  map[string]int32{"t0": 6},
			want:        Plan{"a": tps("t0", 0, 1), "b": tps("t0", 3, 4), "c": tps("t0", 2, 5)},
			changed:     2,
			revocations: map[string][]TopicPartition{"a": tps("t0", 2), "b": tps("t0", 5)},
			withheld:    Plan{"a": tps("t0", 0, 1), "b": tps("t0", 3, 4), "c": {}},
		},
		{
			name: "a member leaves",
			members: []Member{
				owning("a", 2, tps("t0", 0, 1), "t0"),
				owning("b", 2, tps("t0", 3, 4), "t0"),
			},
			partitions:  map[string]int32{"t0": 6},
			want:        Plan{"a": tps("t0", 0, 1, 2), "b": tps("t0", 3, 4, 5)},
			changed:     2,
			revocations: map[string][]TopicPartition{},
			withheld:    Plan{"a": tps("t0", 0, 1, 2), "b": tps("t0", 3, 4, 5)},
		},
		{
			name: "higher generation wins a conflict",
			members: []Member{
				owning("a", 3, tps("t0", 0, 1), "t0"),
				owning("b", 2, tps("t0", 1, 2), "t0"),
			},
			partitions:  map[string]int32{"t0": 4},
			want:        Plan{"a": tps("t0", 0, 1), "b": tps("t0", 2, 3)},
			changed:     1,
			revocations: map[string][]TopicPartition{"b": tps("t0", 1)},
			withheld:    Plan{"a": tps("t0", 0, 1), "b": tps("t0", 2, 3)},
		},
		{
			name: "higher generation wins whatever the member order",
			members: []Member{
				owning("a", 2, tps("t0", 0, 1), "t0"),
				owning("b", 3, tps("t0", 1, 2), "t0"),
			},
			partitions:  map[string]int32{"t0": 4},
			want:        Plan{"a": tps("t0", 0, 3), "b": tps("t0", 1, 2)},
			changed:     1,
			revocations: map[string][]TopicPartition{"a": tps("t0", 1)},
			withheld:    Plan{"a": tps("t0", 0, 3), "b": tps("t0", 1, 2)},
		},
		{
			name: "same generation conflict owned by neither",
			members: []Member{
				owning("a", 3, tps("t0", 0, 1), "t0"),
				owning("b", 3, tps("t0", 1, 2), "t0"),
			},
			partitions:  map[string]int32{"t0": 4},
			want:        Plan{"a": tps("t0", 0, 1), "b": tps("t0", 2, 3)},
			changed:     1,
			revocations: map[string][]TopicPartition{"b": tps("t0", 1)},
			withheld:    Plan{"a": tps("t0", 0), "b": tps("t0", 2, 3)},
		},
		{
			name: "claims on unsubscribed and missing partitions dropped",
			members: []Member{
				owning("a", 5, join(tps("gone", 0), tps("t0", 0, 1, 9), tps("t1", 0)), "t0", "t1"),
				owning("b", 5, join(tps("t0", 2), tps("t1", 1)), "t0"),
			},
			partitions: map[string]int32{"t0": 4, "t1": 2},
			// b no longer subscribes to t1: its t1-1 is free and only a can
			// take it; t0-3 goes to b, the less loaded; then a, at 4 to b's
			// 2, gives b its highest t0 partition.
			want:        Plan{"a": join(tps("t0", 0), tps("t1", 0, 1)), "b": tps("t0", 1, 2, 3)},
			changed:     3,
			revocations: map[string][]TopicPartition{"a": tps("t0", 1), "b": tps("t1", 1)},
			withheld:    Plan{"a": join(tps("t0", 0), tps("t1", 0)), "b": tps("t0", 2, 3)},
		},
		{
			name: "unequal subscriptions new member takes only what balance needs",
			members: []Member{
				owning("a", 1, join(tps("t0", 0, 1, 2, 3), tps("t1", 0, 1)), "t0", "t1"),
				sub("b", "t0"),
			},
			partitions:  map[string]int32{"t0": 4, "t1": 2},
			want:        Plan{"a": join(tps("t0", 0), tps("t1", 0, 1)), "b": tps("t0", 1, 2, 3)},
			changed:     3,
			revocations: map[string][]TopicPartition{"a": tps("t0", 1, 2, 3)},
			withheld:    Plan{"a": join(tps("t0", 0), tps("t1", 0, 1)), "b": {}},
		},
		{
			name: "more members than partitions owners keep theirs",
			members: []Member{
				sub("a", "t0"),
				owning("b", 1, tps("t0", 1), "t0"),
				owning("c", 1, tps("t0", 0), "t0"),
			},
			partitions:  map[string]int32{"t0": 2},
			want:        Plan{"a": {}, "b": tps("t0", 1), "c": tps("t0", 0)},
			changed:     0,
			revocations: map[string][]TopicPartition{},
			withheld:    Plan{"a": {}, "b": tps("t0", 1), "c": tps("t0", 0)},
		},
		{
			name: "repeated member id counts once",
			members: []Member{
				owning("a", 1, tps("t0", 0, 1), "t0"),
				owning("a", 7, tps("t0", 2, 3), "t0"),
				sub("b", "t0"),
			},
			partitions:  map[string]int32{"t0": 4},
			want:        Plan{"a": tps("t0", 0, 1), "b": tps("t0", 2, 3)},
			changed:     2,
			revocations: map[string][]TopicPartition{},
			withheld:    Plan{"a": tps("t0", 0, 1), "b": tps("t0", 2, 3)},
		},
		{
			name:        "no members",
			partitions:  map[string]int32{"t0": 2},
			want:        Plan{},
			revocations: map[string][]TopicPartition{},
			withheld:    Plan{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := cloneMembers(tt.members)
			got := CooperativeSticky().Assign(tt.members, tt.partitions)
			require.Equal(t, tt.want, got)
			require.NoError(t, validatePlan(tt.members, tt.partitions, got))
			require.Equal(t, tt.changed, changedOwners(tt.members, got))
			require.Equal(t, tt.revocations, Revocations(tt.members, got))
			require.Equal(t, tt.withheld, Withhold(tt.members, got))
			require.Equal(t, before, tt.members, "input modified")
		})
	}
}

// TestCooperativeStickyTwoPhase runs a join and a leave through the two
// rebalances of the cooperative protocol.
func TestCooperativeStickyTwoPhase(t *testing.T) {
	partitions := map[string]int32{"t0": 5, "t1": 4}
	a := CooperativeSticky()
	members := []Member{sub("a", "t0", "t1"), sub("b", "t0", "t1")}
	plan := a.Assign(members, partitions)
	require.Equal(t, Plan{"a": join(tps("t0", 0, 2, 4), tps("t1", 1, 3)), "b": join(tps("t0", 1, 3), tps("t1", 0, 2))}, plan)

	// c joins: a and b give up what c will take, c waits a rebalance.
	members = []Member{
		owning("a", 1, plan["a"], "t0", "t1"),
		owning("b", 1, plan["b"], "t0", "t1"),
		sub("c", "t0", "t1"),
	}
	target := a.Assign(members, partitions)
	require.NoError(t, validatePlan(members, partitions, target))
	require.Equal(t, 3, changedOwners(members, target), "9 partitions over 3 members: c takes 3")
	revoked := Revocations(members, target)
	first := Withhold(members, target)
	require.Empty(t, first["c"])
	for _, id := range []string{"a", "b"} {
		require.Len(t, target[id], 3)
		require.Subset(t, plan[id], target[id], "%s keeps what it is not asked to give up", id)
		require.ElementsMatch(t, plan[id], append(slices.Clone(target[id]), revoked[id]...))
		require.Equal(t, target[id], first[id])
	}

	// Second rebalance: owners have revoked; c gets the rest, nobody else moves.
	members = []Member{
		owning("a", 2, first["a"], "t0", "t1"),
		owning("b", 2, first["b"], "t0", "t1"),
		owning("c", 2, first["c"], "t0", "t1"),
	}
	second := a.Assign(members, partitions)
	require.NoError(t, validatePlan(members, partitions, second))
	require.Empty(t, Revocations(members, second))
	require.Equal(t, second, Withhold(members, second))
	require.Equal(t, target, second)

	// b leaves: its partitions go to a and c, which keep all of theirs.
	members = []Member{
		owning("a", 3, second["a"], "t0", "t1"),
		owning("c", 3, second["c"], "t0", "t1"),
	}
	afterLeave := a.Assign(members, partitions)
	require.NoError(t, validatePlan(members, partitions, afterLeave))
	require.Equal(t, len(second["b"]), changedOwners(members, afterLeave))
	require.Subset(t, afterLeave["a"], second["a"])
	require.Subset(t, afterLeave["c"], second["c"])
	require.Empty(t, Revocations(members, afterLeave))
}

// randomGroup builds a group of up to 8 members over up to 4 topics. With
// equal set, every member subscribes to the same topics.
func randomGroup(r *rand.Rand, equal bool) ([]Member, map[string]int32) {
	topics := []string{"a", "b", "c", "d"}[:1+r.IntN(4)]
	partitions := make(map[string]int32)
	for _, t := range topics {
		if r.IntN(8) > 0 {
			partitions[t] = int32(r.IntN(13))
		}
	}
	if r.IntN(4) == 0 {
		partitions["unsubscribed"] = 3
	}
	subscription := func() []string {
		var s []string
		for _, t := range topics {
			if r.IntN(2) == 0 {
				s = append(s, t)
			}
		}
		if len(s) == 0 {
			s = append(s, topics[r.IntN(len(topics))])
		}
		return s
	}
	common := subscription()
	n := 1 + r.IntN(8)
	ids := r.Perm(100)
	members := make([]Member, n)
	for i := range members {
		m := Member{ID: fmt.Sprintf("m%02d", ids[i])}
		if r.IntN(3) == 0 {
			m.InstanceID = fmt.Sprintf("i%d", r.IntN(10))
		}
		if equal {
			m.Topics = slices.Clone(common)
		} else {
			m.Topics = subscription()
		}
		members[i] = m
	}
	return members, partitions
}

// randomOwnership gives members claims: mostly what plan gave them, with
// some stale or invented claims at random generations.
func randomOwnership(r *rand.Rand, members []Member, plan Plan, partitions map[string]int32) {
	for i := range members {
		m := &members[i]
		m.Generation = int32(r.IntN(4))
		for _, tp := range plan[m.ID] {
			if r.IntN(6) > 0 {
				m.Owned = append(m.Owned, tp)
			}
		}
		for range r.IntN(3) {
			topic := []string{"a", "b", "c", "d", "gone"}[r.IntN(5)]
			m.Owned = append(m.Owned, TopicPartition{Topic: topic, Partition: int32(r.IntN(int(partitions[topic]) + 2))})
		}
	}
}

// TestAssignorsProperties checks, over seeded random groups, that every
// assignor places each subscribed partition exactly once with a subscribed
// member, and the balance each promises.
func TestAssignorsProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		equal := i%2 == 0
		members, partitions := randomGroup(r, equal)
		previous := CooperativeSticky().Assign(members, partitions)
		randomOwnership(r, members, previous, partitions)
		for _, a := range []Assignor{Range(), RoundRobin(), CooperativeSticky()} {
			plan := a.Assign(members, partitions)
			require.NoError(t, validatePlan(members, partitions, plan), "case %d %s: %+v %v", i, a.Name(), members, partitions)
			if a.Name() == CooperativeStickyName || (a.Name() == RoundRobinName && equal) {
				require.NoError(t, balancedWithinOne(members, plan), "case %d %s: %+v %v", i, a.Name(), members, partitions)
			}
			require.Equal(t, plan, a.Assign(members, partitions), "case %d %s: not deterministic", i, a.Name())
		}
	}
}

// TestCooperativeStickyMinimalMoves checks stickiness over seeded random
// groups with equal subscriptions: members join and leave a settled group,
// and each remaining member either keeps all it had or gives up partitions
// without taking any, so only partitions that must move change owner; the
// second cooperative rebalance then moves nothing more.
func TestCooperativeStickyMinimalMoves(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	a := CooperativeSticky()
	for i := range 2000 {
		members, partitions := randomGroup(r, true)
		settled := a.Assign(members, partitions)
		for j := range members {
			members[j].Owned = settled[members[j].ID]
			members[j].Generation = 1
		}
		require.Equal(t, settled, a.Assign(members, partitions), "case %d: a settled group moves", i)

		// Some leave, some join.
		var next []Member
		for _, m := range members {
			if r.IntN(4) > 0 {
				next = append(next, m)
			}
		}
		for j := range r.IntN(3) {
			next = append(next, Member{ID: fmt.Sprintf("new%d", j), Topics: slices.Clone(members[0].Topics)})
		}
		if len(next) == 0 {
			continue
		}
		target := a.Assign(next, partitions)
		require.NoError(t, validatePlan(next, partitions, target), "case %d", i)
		require.NoError(t, balancedWithinOne(next, target), "case %d", i)

		gained := 0
		revoked := Revocations(next, target)
		for _, m := range next {
			old, now := m.Owned, target[m.ID]
			keepsAll := isSubset(old, now)
			onlyGivesUp := isSubset(now, old)
			require.True(t, keepsAll || onlyGivesUp, "case %d member %s: had %v, now %v", i, m.ID, old, now)
			if onlyGivesUp {
				require.Len(t, revoked[m.ID], len(old)-len(now), "case %d member %s", i, m.ID)
			} else {
				gained += len(now) - len(old)
				require.Empty(t, revoked[m.ID], "case %d member %s", i, m.ID)
			}
		}
		require.Equal(t, gained, changedOwners(next, target), "case %d", i)

		// Two-phase: owners revoke, the second rebalance hands on the rest
		// and takes nothing from anyone.
		first := Withhold(next, target)
		for j := range next {
			next[j].Owned = first[next[j].ID]
			next[j].Generation = 2
		}
		second := a.Assign(next, partitions)
		require.NoError(t, validatePlan(next, partitions, second), "case %d", i)
		require.Empty(t, Revocations(next, second), "case %d", i)
		for _, m := range next {
			require.Subset(t, second[m.ID], first[m.ID], "case %d member %s", i, m.ID)
		}
	}
}

// TestCooperativeStickyTwoPhaseConverges checks, for groups with messy
// claims, that the cooperative protocol settles: after owners revoke what the
// target takes from them, the next rebalance revokes nothing when
// subscriptions are equal, and at most once more when they are not.
func TestCooperativeStickyTwoPhaseConverges(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	a := CooperativeSticky()
	for i := range 3000 {
		equal := i%3 == 0
		members, partitions := randomGroup(r, equal)
		randomOwnership(r, members, a.Assign(members, partitions), partitions)
		target := a.Assign(members, partitions)
		for round := 1; ; round++ {
			first := Withhold(members, target)
			for j := range members {
				members[j].Owned = first[members[j].ID]
				members[j].Generation++
			}
			target = a.Assign(members, partitions)
			require.NoError(t, validatePlan(members, partitions, target), "case %d", i)
			require.NoError(t, balancedWithinOne(members, target), "case %d", i)
			revocations := Revocations(members, target)
			if len(revocations) == 0 {
				break
			}
			require.False(t, equal, "case %d: equal subscriptions revoke in round %d: %v", i, round, revocations)
			require.Less(t, round, 2, "case %d: still revoking %v", i, revocations)
		}
	}
}

func isSubset(small, big []TopicPartition) bool {
	for _, tp := range small {
		if !slices.Contains(big, tp) {
			return false
		}
	}
	return true
}
