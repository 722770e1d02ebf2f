package assign

import (
	"fmt"
	"testing"
)

// benchGroup is a group of members over topics topics of perTopic partitions
// each. With equal false, member i subscribes to every topic but the
// (i mod topics)-th.
func benchGroup(members, topics int, perTopic int32, equal bool) ([]Member, map[string]int32) {
	partitions := make(map[string]int32, topics)
	var names []string
	for i := range topics {
		name := fmt.Sprintf("topic-%03d", i)
		names = append(names, name)
		partitions[name] = perTopic
	}
	group := make([]Member, members)
	for i := range group {
		group[i].ID = fmt.Sprintf("consumer-%04d", i)
		for j, name := range names {
			if equal || j != i%topics {
				group[i].Topics = append(group[i].Topics, name)
			}
		}
	}
	return group, partitions
}

// BenchmarkAssign times one rebalance of 200 members over 20 topics of 100
// partitions; for cooperative-sticky, a member joins a settled group.
func BenchmarkAssign(b *testing.B) {
	for _, equal := range []bool{true, false} {
		for _, a := range []Assignor{Range(), RoundRobin(), CooperativeSticky()} {
			b.Run(fmt.Sprintf("%s/equal=%v", a.Name(), equal), func(b *testing.B) {
				members, partitions := benchGroup(200, 20, 100, equal)
				settled := a.Assign(members, partitions)
				for i := range members {
					members[i].Owned = settled[members[i].ID]
					members[i].Generation = 1
				}
				joined := append(members, Member{ID: "consumer-new", Topics: members[0].Topics})
				b.ReportAllocs()
				for b.Loop() {
					a.Assign(joined, partitions)
				}
			})
		}
	}
}
