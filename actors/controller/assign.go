package controller

import (
	"github.com/depot-dev/depot/actors/metadata"
	"github.com/depot-dev/depot/actors/replicas"
	"github.com/depot-dev/depot/messages"
)

// assignReplicas chooses the nodes of each partition of the topic m asks
// for: those m names, or those assignPartitions chooses.
func (a *controllerActor) assignReplicas(m *messages.CreateTopicRequest) ([][]int32, error) {
	if given := metadata.Replicas(m.GetAssignments()); given != nil {
		return given, nil
	}
	return a.assignPartitions(int(m.GetPartitions()), int(a.image.ReplicationFactor(m)))
}

// assignPartitions chooses the nodes of partitions new partitions of
// replicationFactor replicas each, of a new topic or added to one, with
// the load-aware rule: their leaders spread evenly over the live nodes,
// and the nodes' bytes, growth (as their heartbeats report them) and
// leaders deciding among the even choices.
func (a *controllerActor) assignPartitions(partitions, replicationFactor int) ([][]int32, error) {
	leaders := map[int32]int{}
	for _, name := range a.image.TopicNames() {
		t, _ := a.image.Topic(name)
		for _, p := range t.Partitions {
			leaders[p.Leader]++
		}
	}
	var nodes []replicas.Node
	for _, n := range a.image.Nodes() {
		rn := replicas.Node{ID: n.ID, Rack: n.Rack, Fenced: n.Fenced, Leaders: leaders[n.ID]}
		if s, ok := a.life.sessions[n.ID]; ok {
			rn.Bytes, rn.GrowthBytesPerSec = s.bytes, s.growth
		}
		nodes = append(nodes, rn)
	}
	return replicas.LoadAware(nodes, partitions, replicationFactor)
}
