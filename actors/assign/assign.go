// Package assign splits a consumer group's partitions among its members. It
// holds the assignors Kafka clients know by name, with Kafka's results:
//
//   - Range ("range"), Kafka's RangeAssignor: topic by topic, contiguous
//     ranges of partitions to the members subscribed to the topic.
//   - RoundRobin ("roundrobin"), Kafka's RoundRobinAssignor: every
//     subscribed partition dealt in turn to the members, skipping a member
//     not subscribed to the partition's topic.
//   - CooperativeSticky ("cooperative-sticky"), Kafka's
//     CooperativeStickyAssignor: members keep what they own, the assignment
//     is balanced, and only the partitions that must move change hands.
//     Revocations and Withhold give the group what it needs to run Kafka's
//     two-phase (incremental) cooperative rebalance.
//
// Choose picks the assignor of a group from its members' preferences, as
// Kafka's group coordinator does.
//
// Everything here is a pure function of its arguments: no I/O, no clocks, no
// randomness, and the arguments are never modified, so every function is safe
// for concurrent use. The package never imports the actor system; the group
// actor calls it when a rebalance completes.
//
// Member order. Where Kafka orders members (Range, RoundRobin, and the
// tie-breaks of CooperativeSticky), it uses
// AbstractPartitionAssignor.MemberInfo's order, and so does this package:
// members with a group.instance.id (static membership, Member.InstanceID)
// come first, in order of instance id; members without one follow, in order
// of member id. With static membership an assignment therefore survives a
// restart that changes member ids. Strings compare byte-wise (Go's order of
// UTF-8), which is Java's order for every string of the Basic Multilingual
// Plane.
//
// Input is taken as the group presents it and never makes an assignor panic:
// a member id given twice counts once (its first appearance), a topic listed
// twice in a subscription counts once, topics with no count or a count of
// zero or less have no partitions, and owned partitions that do not exist are
// ignored.
//
// A Plan has an entry for every member, empty (not nil) for a member that
// gets nothing, and each member's partitions are sorted by topic, then
// partition.
package assign

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Sentinel errors of the package, wrapped with %w.
var (
	// ErrNoMembers is returned by Choose for a group without members.
	ErrNoMembers = errors.New("assign: no members")
	// ErrNoCommonAssignor is returned by Choose when no assignor is supported
	// by every member.
	ErrNoCommonAssignor = errors.New("assign: no assignor supported by every member")
	// ErrUnknownAssignor is returned by ByName for a name this package does
	// not implement.
	ErrUnknownAssignor = errors.New("assign: unknown assignor")
)

// Assignor names, as Kafka clients send them in JoinGroup.
const (
	RangeName             = "range"
	RoundRobinName        = "roundrobin"
	CooperativeStickyName = "cooperative-sticky"
)

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String formats the partition as Kafka does: "topic-3".
func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// compareTopicPartitions orders by topic, then partition.
func compareTopicPartitions(a, b TopicPartition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// Member is one member of a group as an assignor sees it.
type Member struct {
	// ID is the member id the coordinator gave it; unique in the group.
	ID string
	// InstanceID is the group.instance.id of a static member, "" otherwise.
	InstanceID string
	// Topics is the member's subscription.
	Topics []string
	// Owned is what the member holds now (from its JoinGroup subscription);
	// only CooperativeSticky reads it.
	Owned []TopicPartition
	// Generation is the group generation in which the member was given
	// Owned; when two members claim a partition, the higher generation wins.
	// Only CooperativeSticky reads it.
	Generation int32
}

// Plan maps a member id to the partitions assigned to it, sorted by topic,
// then partition.
type Plan map[string][]TopicPartition

// Assignor computes a group's assignment.
type Assignor interface {
	// Name is the protocol name members announce ("range", ...).
	Name() string
	// Assign splits the partitions of the topics the members subscribe to
	// (partitions maps a topic to its partition count) among the members.
	// Each such partition goes to exactly one member subscribed to its
	// topic; topics nobody subscribes to are not assigned.
	Assign(members []Member, partitions map[string]int32) Plan
}

// ByName returns the assignor with Kafka's protocol name name, or
// ErrUnknownAssignor.
func ByName(name string) (Assignor, error) {
	switch name {
	case RangeName:
		return Range(), nil
	case RoundRobinName:
		return RoundRobin(), nil
	case CooperativeStickyName:
		return CooperativeSticky(), nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownAssignor, name)
}

// member is a Member prepared for assignment: its subscription as a set.
type member struct {
	*Member
	topics map[string]bool
}

// compareMembers is Kafka's MemberInfo order: static members first, by
// instance id, then dynamic members by member id.
func compareMembers(a, b *member) int {
	switch {
	case a.InstanceID != "" && b.InstanceID != "":
		if c := strings.Compare(a.InstanceID, b.InstanceID); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	case a.InstanceID != "":
		return -1
	case b.InstanceID != "":
		return 1
	}
	return strings.Compare(a.ID, b.ID)
}

// prepare returns the members, each id once (its first appearance), in
// Kafka's member order.
func prepare(members []Member) []*member {
	seen := make(map[string]bool, len(members))
	out := make([]*member, 0, len(members))
	for i := range members {
		m := &members[i]
		if seen[m.ID] {
			continue
		}
		seen[m.ID] = true
		topics := make(map[string]bool, len(m.Topics))
		for _, t := range m.Topics {
			topics[t] = true
		}
		out = append(out, &member{Member: m, topics: topics})
	}
	slices.SortStableFunc(out, compareMembers)
	return out
}

// newPlan returns a plan with an empty entry for every member.
func newPlan(members []*member) Plan {
	plan := make(Plan, len(members))
	for _, m := range members {
		plan[m.ID] = []TopicPartition{}
	}
	return plan
}

// sortPlan sorts every member's partitions.
func sortPlan(plan Plan) {
	for _, tps := range plan {
		slices.SortFunc(tps, compareTopicPartitions)
	}
}

// subscribedTopics returns, sorted, the topics some member subscribes to
// that have at least one partition.
func subscribedTopics(members []*member, partitions map[string]int32) []string {
	set := make(map[string]bool)
	for _, m := range members {
		for t := range m.topics {
			if partitions[t] > 0 {
				set[t] = true
			}
		}
	}
	topics := make([]string, 0, len(set))
	for t := range set {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	return topics
}

// Range returns Kafka's RangeAssignor ("range"). For each topic, the members
// subscribed to it are taken in member order (see the package doc) and its
// partitions in numeric order; with P partitions and C such members, each
// member gets P/C consecutive partitions and the first P%C members one more.
// Four partitions among three members go 2, 1, 1; members beyond the
// partition count get nothing of that topic. Topics are handled
// independently, so with several topics the first members can end up with up
// to one partition per topic more than the others.
func Range() Assignor { return rangeAssignor{} }

type rangeAssignor struct{}

func (rangeAssignor) Name() string { return RangeName }

func (rangeAssignor) Assign(members []Member, partitions map[string]int32) Plan {
	ms := prepare(members)
	plan := newPlan(ms)
	for _, topic := range subscribedTopics(ms, partitions) {
		var subscribers []*member
		for _, m := range ms {
			if m.topics[topic] {
				subscribers = append(subscribers, m)
			}
		}
		count := int(partitions[topic])
		perMember := count / len(subscribers)
		withExtra := count % len(subscribers)
		for i, m := range subscribers {
			start := perMember*i + min(i, withExtra)
			length := perMember
			if i < withExtra {
				length++
			}
			for p := start; p < start+length; p++ {
				plan[m.ID] = append(plan[m.ID], TopicPartition{Topic: topic, Partition: int32(p)})
			}
		}
	}
	sortPlan(plan)
	return plan
}

// RoundRobin returns Kafka's RoundRobinAssignor ("roundrobin"). All
// partitions of the subscribed topics, sorted by topic and then partition,
// are dealt one at a time to the members in member order (see the package
// doc), cycling; a member not subscribed to the partition's topic is skipped
// and the partition goes to the next one that is. With equal subscriptions
// the members' counts differ by at most one; with unequal ones they may
// differ more, as in Kafka.
func RoundRobin() Assignor { return roundRobinAssignor{} }

type roundRobinAssignor struct{}

func (roundRobinAssignor) Name() string { return RoundRobinName }

func (roundRobinAssignor) Assign(members []Member, partitions map[string]int32) Plan {
	ms := prepare(members)
	plan := newPlan(ms)
	next := 0
	for _, topic := range subscribedTopics(ms, partitions) {
		for p := int32(0); p < partitions[topic]; p++ {
			// Some member subscribes to topic, so this stops within one cycle.
			for !ms[next%len(ms)].topics[topic] {
				next++
			}
			m := ms[next%len(ms)]
			next++
			plan[m.ID] = append(plan[m.ID], TopicPartition{Topic: topic, Partition: p})
		}
	}
	sortPlan(plan)
	return plan
}

// Choose picks the assignor of a group as Kafka's group coordinator does
// (ClassicGroup.selectProtocol). supported holds, for each member, the
// assignor names it announced, in its order of preference. The candidates are
// the names every member supports; each member votes for the first candidate
// in its own list, and the candidate with the most votes wins. Kafka leaves a
// tie to hash order; here a tie goes to the candidate the first member
// prefers. Choose returns ErrNoMembers for an empty group and
// ErrNoCommonAssignor when no name is supported by every member (a member
// with an empty list supports none).
func Choose(supported [][]string) (string, error) {
	if len(supported) == 0 {
		return "", ErrNoMembers
	}
	// Candidates in the first member's order of preference.
	var candidates []string
	for _, name := range supported[0] {
		if slices.Contains(candidates, name) {
			continue
		}
		common := true
		for _, other := range supported[1:] {
			if !slices.Contains(other, name) {
				common = false
				break
			}
		}
		if common {
			candidates = append(candidates, name)
		}
	}
	if len(candidates) == 0 {
		return "", fmt.Errorf("%w: members support %q", ErrNoCommonAssignor, supported)
	}
	votes := make(map[string]int, len(candidates))
	for _, names := range supported {
		for _, name := range names {
			if slices.Contains(candidates, name) {
				votes[name]++
				break
			}
		}
	}
	best := candidates[0]
	for _, name := range candidates[1:] {
		if votes[name] > votes[best] {
			best = name
		}
	}
	return best, nil
}
