package assign

import (
	"cmp"
	"slices"
)

// CooperativeSticky returns Kafka's CooperativeStickyAssignor
// ("cooperative-sticky"), following AbstractStickyAssignor.
//
// Ownership. A member's claim (Member.Owned) on a partition counts when the
// partition exists and the member still subscribes to its topic. When several
// members claim a partition, the claim of the highest Generation wins; when
// the highest generation is shared, Kafka treats the partition as owned by
// none of them, and so does this assignor. (Kafka's equal-subscriptions path
// additionally drops every claim of a member whose generation is below the
// group's highest; here claims are weighed partition by partition, so a
// member that missed a generation keeps what nobody newer claims.)
//
// Equal subscriptions (every member subscribes to the same topics that have
// partitions) use Kafka's constrained algorithm: with P partitions and C
// members, P%C members end with ceil(P/C) partitions and the rest with
// floor(P/C); each member keeps as many of its owned partitions as its quota
// allows (the lowest ones, in topic and partition order), and the partitions
// left over are dealt round-robin to the members below quota, in member
// order. A member moves a partition only when it holds more than its quota,
// so the number of partitions that change owner is the least any balanced
// assignment allows.
//
// Unequal subscriptions use the general algorithm: owned partitions stay;
// unowned ones go, those with the fewest possible members first, to the
// subscribed member with the fewest partitions; then partitions move from a
// member to a subscribed member holding at least two fewer until no such
// move is left (each move narrows the spread, so this ends), newly placed
// partitions moving before owned ones. Members with the same subscriptions
// end within one partition of each other, and no partition could go to a
// member two below its owner.
//
// Assign returns the target assignment, with every subscribed partition
// placed. In the cooperative protocol a partition changes owner in two
// rebalances: first its current owner revokes it (Revocations) while the
// group runs on Withhold's plan, which leaves it unassigned; the owner
// rejoins without it, and the next Assign hands it on. With equal
// subscriptions that next Assign revokes nothing. With unequal ones it can,
// rarely, place the handed-on partitions differently from the target and ask
// for one more revocation, which the protocol absorbs with one more
// rebalance; Kafka promises no more.
func CooperativeSticky() Assignor { return stickyAssignor{} }

type stickyAssignor struct{}

func (stickyAssignor) Name() string { return CooperativeStickyName }

func (stickyAssignor) Assign(members []Member, partitions map[string]int32) Plan {
	ms := prepare(members)
	plan := newPlan(ms)
	if len(ms) == 0 {
		return plan
	}
	exists := func(tp TopicPartition) bool {
		return tp.Partition >= 0 && tp.Partition < partitions[tp.Topic]
	}
	kept := make(map[*member][]TopicPartition, len(ms))
	for tp, m := range resolveClaims(ms, exists) {
		if m.topics[tp.Topic] {
			kept[m] = append(kept[m], tp)
		}
	}
	for _, tps := range kept {
		slices.SortFunc(tps, compareTopicPartitions)
	}
	if topics, equal := commonTopics(ms, partitions); equal {
		constrainedAssign(ms, topics, partitions, kept, plan)
	} else {
		generalAssign(ms, partitions, kept, plan)
	}
	sortPlan(plan)
	return plan
}

// resolveClaims returns, for each partition that exists and that some member
// claims, the member whose claim wins: the one with the strictly highest
// generation. A partition whose highest generation is claimed twice has no
// winner. A member listing a partition twice claims it once.
func resolveClaims(ms []*member, exists func(TopicPartition) bool) map[TopicPartition]*member {
	type claim struct {
		member *member
		tied   bool
	}
	claims := make(map[TopicPartition]*claim)
	for _, m := range ms {
		for _, tp := range m.Owned {
			if !exists(tp) {
				continue
			}
			c := claims[tp]
			switch {
			case c == nil:
				claims[tp] = &claim{member: m}
			case c.member == m:
			case m.Generation > c.member.Generation:
				*c = claim{member: m}
			case m.Generation == c.member.Generation:
				c.tied = true
			}
		}
	}
	winners := make(map[TopicPartition]*member, len(claims))
	for tp, c := range claims {
		if !c.tied {
			winners[tp] = c.member
		}
	}
	return winners
}

// commonTopics reports whether every member subscribes to the same topics
// among those with partitions, and returns them sorted.
func commonTopics(ms []*member, partitions map[string]int32) ([]string, bool) {
	existing := func(m *member) []string {
		var topics []string
		for t := range m.topics {
			if partitions[t] > 0 {
				topics = append(topics, t)
			}
		}
		slices.Sort(topics)
		return topics
	}
	first := existing(ms[0])
	for _, m := range ms[1:] {
		if !slices.Equal(first, existing(m)) {
			return nil, false
		}
	}
	return first, true
}

// constrainedAssign is AbstractStickyAssignor.constrainedAssign: every member
// subscribes to topics. It fills plan.
func constrainedAssign(ms []*member, topics []string, partitions map[string]int32, kept map[*member][]TopicPartition, plan Plan) {
	var all []TopicPartition
	for _, t := range topics {
		for p := int32(0); p < partitions[t]; p++ {
			all = append(all, TopicPartition{Topic: t, Partition: p})
		}
	}
	minQuota := len(all) / len(ms)
	maxQuota := (len(all) + len(ms) - 1) / len(ms)
	// Members that end with maxQuota when minQuota < maxQuota.
	expectedOverMin := len(all) % len(ms)
	currentOverMin := 0

	assigned := make(map[TopicPartition]bool, len(all))
	keep := func(m *member, tps []TopicPartition) {
		plan[m.ID] = append(plan[m.ID], tps...)
		for _, tp := range tps {
			assigned[tp] = true
		}
	}
	var underMin, exactlyMin []*member
	for _, m := range ms {
		owned := kept[m]
		switch {
		case len(owned) < minQuota:
			keep(m, owned)
			underMin = append(underMin, m)
		case len(owned) >= maxQuota && currentOverMin < expectedOverMin:
			keep(m, owned[:maxQuota])
			currentOverMin++
			if currentOverMin == expectedOverMin {
				exactlyMin = nil
			}
		default:
			keep(m, owned[:minQuota])
			if currentOverMin < expectedOverMin {
				exactlyMin = append(exactlyMin, m)
			}
		}
	}

	// Deal the rest round-robin to the members below minQuota, then one each
	// to members at minQuota until expectedOverMin members are at maxQuota.
	next := 0
	for _, tp := range all {
		if assigned[tp] {
			continue
		}
		var m *member
		fromUnderMin := len(underMin) > 0
		switch {
		case fromUnderMin:
			if next >= len(underMin) {
				next = 0
			}
			m = underMin[next]
		case len(exactlyMin) > 0:
			m = exactlyMin[0]
			exactlyMin = exactlyMin[1:]
		default:
			// The quotas add up to the partition count, so this is not
			// reached; should it be, the partition still gets an owner.
			m = leastLoaded(ms, func(m *member) int { return len(plan[m.ID]) })
		}
		plan[m.ID] = append(plan[m.ID], tp)
		n := len(plan[m.ID])
		switch {
		case fromUnderMin && n == minQuota:
			underMin = slices.Delete(underMin, next, next+1)
			if currentOverMin < expectedOverMin {
				exactlyMin = append(exactlyMin, m)
			}
		case fromUnderMin:
			next++
		case n == maxQuota && minQuota < maxQuota:
			currentOverMin++
			if currentOverMin == expectedOverMin {
				exactlyMin = nil
			}
		}
	}
}

// leastLoaded returns the first of candidates (in their order) with the
// smallest load.
func leastLoaded(candidates []*member, load func(*member) int) *member {
	best := candidates[0]
	for _, m := range candidates[1:] {
		if load(m) < load(best) {
			best = m
		}
	}
	return best
}

// generalAssign is the sticky assignment for unequal subscriptions. It fills
// plan.
func generalAssign(ms []*member, partitions map[string]int32, kept map[*member][]TopicPartition, plan Plan) {
	topics := subscribedTopics(ms, partitions)
	subscribers := make(map[string][]*member, len(topics))
	for _, t := range topics {
		for _, m := range ms {
			if m.topics[t] {
				subscribers[t] = append(subscribers[t], m)
			}
		}
	}
	owner := make(map[TopicPartition]*member)
	count := make(map[*member]int, len(ms))
	load := func(m *member) int { return count[m] }
	for m, tps := range kept {
		for _, tp := range tps {
			owner[tp] = m
		}
		count[m] = len(tps)
	}
	previous := make(map[TopicPartition]*member, len(owner))
	for tp, m := range owner {
		previous[tp] = m
	}

	var all, unowned []TopicPartition
	for _, t := range topics {
		for p := int32(0); p < partitions[t]; p++ {
			tp := TopicPartition{Topic: t, Partition: p}
			all = append(all, tp)
			if owner[tp] == nil {
				unowned = append(unowned, tp)
			}
		}
	}
	// The most constrained partitions first.
	slices.SortStableFunc(unowned, func(a, b TopicPartition) int {
		return cmp.Compare(len(subscribers[a.Topic]), len(subscribers[b.Topic]))
	})
	for _, tp := range unowned {
		m := leastLoaded(subscribers[tp.Topic], load)
		owner[tp] = m
		count[m]++
	}

	// Balance. Partitions placed above move first, as they change owner
	// anyway; of the owned ones, the highest move first.
	order := make([]TopicPartition, 0, len(all))
	for _, tp := range all {
		if previous[tp] == nil {
			order = append(order, tp)
		}
	}
	for i := len(all) - 1; i >= 0; i-- {
		if previous[all[i]] != nil {
			order = append(order, all[i])
		}
	}
	for moved := true; moved; {
		moved = false
		for _, tp := range order {
			from := owner[tp]
			to := leastLoaded(subscribers[tp.Topic], load)
			if count[from]-count[to] >= 2 {
				owner[tp] = to
				count[from]--
				count[to]++
				moved = true
			}
		}
	}
	for _, tp := range all {
		m := owner[tp]
		plan[m.ID] = append(plan[m.ID], tp)
	}
}

// Revocations returns, for each member, the partitions it owns
// (Member.Owned) that plan gives to another member, sorted; members with
// nothing to revoke have no entry. In the cooperative protocol these are what
// each member must give up before the partitions change hands. An owned
// partition that plan gives to nobody (its topic is gone or no longer
// subscribed) is not listed: no other member waits for it, and the member
// drops it on seeing its new assignment.
func Revocations(members []Member, plan Plan) map[string][]TopicPartition {
	assignedTo := make(map[TopicPartition]string)
	for id, tps := range plan {
		for _, tp := range tps {
			assignedTo[tp] = id
		}
	}
	revocations := make(map[string][]TopicPartition)
	for _, m := range prepare(members) {
		for _, tp := range m.Owned {
			id, ok := assignedTo[tp]
			if !ok || id == m.ID || slices.Contains(revocations[m.ID], tp) {
				continue
			}
			revocations[m.ID] = append(revocations[m.ID], tp)
		}
	}
	for _, tps := range revocations {
		slices.SortFunc(tps, compareTopicPartitions)
	}
	return revocations
}

// Withhold returns the assignment to hand out in the first rebalance of a
// cooperative change (CooperativeStickyAssignor.adjustAssignment): plan
// without each partition that another member still claims, unless the member
// plan gives it to holds the winning claim (the highest generation, not
// shared). Withheld partitions stay unassigned until their owners have
// revoked them (Revocations) and rejoined; the next Assign then places them.
// Every member of plan has an entry.
func Withhold(members []Member, plan Plan) Plan {
	ms := prepare(members)
	claimants := make(map[TopicPartition][]*member)
	for _, m := range ms {
		for _, tp := range m.Owned {
			if !slices.Contains(claimants[tp], m) {
				claimants[tp] = append(claimants[tp], m)
			}
		}
	}
	winners := resolveClaims(ms, func(TopicPartition) bool { return true })
	out := make(Plan, len(plan))
	for id, tps := range plan {
		kept := []TopicPartition{}
		for _, tp := range tps {
			claimedByOther := slices.ContainsFunc(claimants[tp], func(m *member) bool { return m.ID != id })
			if claimedByOther && (winners[tp] == nil || winners[tp].ID != id) {
				continue
			}
			kept = append(kept, tp)
		}
		slices.SortFunc(kept, compareTopicPartitions)
		out[id] = kept
	}
	return out
}
