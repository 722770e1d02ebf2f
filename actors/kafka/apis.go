package kafka

import (
	"slices"
	"sort"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// api is one Kafka API the listener answers.
type api struct {
	key int16
	// min and max are the versions ApiVersions advertises.
	min, max int16
	// handle answers a request of a version from min to max, at once or
	// from a later message, with c.reply (or c.noReply when the request
	// has no answer), on the connection's actor.
	handle func(c *conn, ctx actor.Context, x *exchange)
	// refuse, when set, is the answer to a request of a version kmsg
	// decodes but min..max leaves out: code in each of its parts. Without
	// it, such a request closes its connection with a log line.
	refuse func(req kmsg.Request, code int16) kmsg.Response
}

// apis are the APIs the listener answers: ApiVersions advertises exactly
// these. Each has a file of its own beside this one, which starts with the
// versions it takes and why. The oldest versions are those Kafka 4.0 still
// takes (KIP-896), the newest those franz-go v1.22 (kmsg v1.15) knows.
//
// To add an API: write its file (handleX, and refuseX when kmsg knows
// versions below min or above max), and add its line here.
var apis = []api{
	{key: kmsg.Produce.Int16(), min: 0, max: 13, handle: handleProduce, refuse: refuseProduce},
	{key: kmsg.Fetch.Int16(), min: 4, max: 18, handle: handleFetch, refuse: refuseFetch},
	{key: kmsg.ListOffsets.Int16(), min: 1, max: 6, handle: handleListOffsets, refuse: refuseListOffsets},
	{key: kmsg.Metadata.Int16(), min: 0, max: 13, handle: handleMetadata},
	{key: kmsg.SASLHandshake.Int16(), min: 0, max: 1, handle: handleSASLHandshake},
	{key: kmsg.ApiVersions.Int16(), min: 0, max: 5, handle: handleApiVersions},
	{key: kmsg.InitProducerID.Int16(), min: 0, max: 5, handle: handleInitProducerID},
	{key: kmsg.OffsetForLeaderEpoch.Int16(), min: 2, max: 4, handle: handleOffsetForLeaderEpoch, refuse: refuseOffsetForLeaderEpoch},
	{key: kmsg.DescribeACLs.Int16(), min: 1, max: 3, handle: handleDescribeACLs, refuse: refuseDescribeACLs},
	{key: kmsg.CreateTopics.Int16(), min: 2, max: 7, handle: handleCreateTopics, refuse: refuseCreateTopics},
	{key: kmsg.DeleteTopics.Int16(), min: 1, max: 6, handle: handleDeleteTopics, refuse: refuseDeleteTopics},
	{key: kmsg.DeleteRecords.Int16(), min: 0, max: 2, handle: handleDeleteRecords},
	{key: kmsg.CreatePartitions.Int16(), min: 0, max: 3, handle: handleCreatePartitions},
	{key: kmsg.DescribeConfigs.Int16(), min: 1, max: 4, handle: handleDescribeConfigs, refuse: refuseDescribeConfigs},
	{key: kmsg.AlterConfigs.Int16(), min: 0, max: 2, handle: handleAlterConfigs},
	{key: kmsg.IncrementalAlterConfigs.Int16(), min: 0, max: 1, handle: handleIncrementalAlterConfigs},
	{key: kmsg.DescribeCluster.Int16(), min: 0, max: 2, handle: handleDescribeCluster},
	{key: kmsg.AlterReplicaLogDirs.Int16(), min: 1, max: 2, handle: handleAlterReplicaLogDirs, refuse: refuseAlterReplicaLogDirs},
	{key: kmsg.DescribeLogDirs.Int16(), min: 1, max: 5, handle: handleDescribeLogDirs, refuse: refuseDescribeLogDirs},
	{key: kmsg.SASLAuthenticate.Int16(), min: 0, max: 2, handle: handleSASLAuthenticate},
	{key: kmsg.ElectLeaders.Int16(), min: 0, max: 2, handle: handleElectLeaders},
	{key: kmsg.AlterPartitionAssignments.Int16(), min: 0, max: 1, handle: handleAlterPartitionAssignments},
	{key: kmsg.ListPartitionReassignments.Int16(), min: 0, max: 0, handle: handleListPartitionReassignments},
	{key: kmsg.FindCoordinator.Int16(), min: 0, max: 6, handle: handleFindCoordinator},
	{key: kmsg.JoinGroup.Int16(), min: 2, max: 9, handle: handleJoinGroup, refuse: refuseJoinGroup},
	{key: kmsg.SyncGroup.Int16(), min: 0, max: 5, handle: handleSyncGroup},
	{key: kmsg.Heartbeat.Int16(), min: 0, max: 4, handle: handleHeartbeat},
	{key: kmsg.LeaveGroup.Int16(), min: 0, max: 5, handle: handleLeaveGroup},
	{key: kmsg.OffsetCommit.Int16(), min: 2, max: 10, handle: handleOffsetCommit, refuse: refuseOffsetCommit},
	{key: kmsg.OffsetFetch.Int16(), min: 1, max: 10, handle: handleOffsetFetch, refuse: refuseOffsetFetch},
	{key: kmsg.OffsetDelete.Int16(), min: 0, max: 0, handle: handleOffsetDelete},
	{key: kmsg.DescribeGroups.Int16(), min: 0, max: 6, handle: handleDescribeGroups},
	{key: kmsg.ListGroups.Int16(), min: 0, max: 5, handle: handleListGroups},
	{key: kmsg.DeleteGroups.Int16(), min: 0, max: 3, handle: handleDeleteGroups},
}

// apiByKey is apis by key, and advertised their ApiVersions entries, by
// key; both are built once from apis and never change.
var (
	apiByKey   map[int16]api
	advertised []kmsg.ApiVersionsResponseApiKey
)

func init() {
	apiByKey = make(map[int16]api, len(apis))
	for _, a := range apis {
		if _, dup := apiByKey[a.key]; dup {
			panic("kafka: API " + kmsg.NameForKey(a.key) + " listed twice")
		}
		apiByKey[a.key] = a
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.key, a.min, a.max
		advertised = append(advertised, k)
	}
	sort.Slice(advertised, func(i, j int) bool { return advertised[i].ApiKey < advertised[j].ApiKey })
}

// supportedKeys are the ApiVersions entries of apis, by key.
func supportedKeys() []kmsg.ApiVersionsResponseApiKey {
	return slices.Clone(advertised)
}
