package node

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// roundTrip sends req on c and reads its answer.
func (c *rawConn) roundTrip(req kmsg.Request, correlationID int32) kmsg.Response {
	c.t.Helper()
	c.send(req, correlationID)
	corr, body := c.response()
	require.Equal(c.t, correlationID, corr)
	resp := req.ResponseKind()
	if resp.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		require.Equal(c.t, byte(0), body[0], "no tagged fields in the response header")
		body = body[1:]
	}
	require.NoError(c.t, resp.ReadFrom(body), "%s v%d", kmsg.NameForKey(req.Key()), req.GetVersion())
	return resp
}

// Partitions added to a topic are known at once to a connection that
// read the topic's metadata before: DeleteRecords, OffsetCommit and
// OffsetDelete of a new partition on it are served, not answered
// UNKNOWN_TOPIC_OR_PARTITION (sarama's admin sends DeleteRecords on the
// connection it asked metadata on just before).
func TestKafkaAddedPartitionsKnownAtOnce(t *testing.T) {
	n := startKafkaNode(t)
	createTopic(t, n, "growing", 1)
	c := dialKafka(t, n)

	// Every topic, as sarama asks.
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(12)
	mresp := c.roundTrip(md, 1).(*kmsg.MetadataResponse)
	require.Len(t, mresp.Topics, 1)
	require.Len(t, mresp.Topics[0].Partitions, 1)
	topicID := mresp.Topics[0].TopicID

	grow := kmsg.NewPtrCreatePartitionsRequest()
	grow.SetVersion(3)
	gt := kmsg.NewCreatePartitionsRequestTopic()
	gt.Topic, gt.Count = "growing", 2
	grow.Topics = append(grow.Topics, gt)
	grow.TimeoutMillis = 10000
	gresp := c.roundTrip(grow, 2).(*kmsg.CreatePartitionsResponse)
	require.Equal(t, int16(0), gresp.Topics[0].ErrorCode)

	del := kmsg.NewPtrDeleteRecordsRequest()
	del.SetVersion(2)
	dt := kmsg.NewDeleteRecordsRequestTopic()
	dt.Topic = "growing"
	dp := kmsg.NewDeleteRecordsRequestTopicPartition()
	dp.Partition, dp.Offset = 1, 0
	dt.Partitions = append(dt.Partitions, dp)
	del.Topics, del.TimeoutMillis = append(del.Topics, dt), 10000
	dresp := c.roundTrip(del, 3).(*kmsg.DeleteRecordsResponse)
	require.Equal(t, int16(0), dresp.Topics[0].Partitions[0].ErrorCode, kerr.ErrorForCode(dresp.Topics[0].Partitions[0].ErrorCode))

	for i, version := range []int16{9, 10} {
		commit := kmsg.NewPtrOffsetCommitRequest()
		commit.SetVersion(version)
		commit.Group, commit.Generation = "watchers", -1
		ct := kmsg.NewOffsetCommitRequestTopic()
		ct.Topic, ct.TopicID = "growing", topicID
		cp := kmsg.NewOffsetCommitRequestTopicPartition()
		cp.Partition, cp.Offset = 1, 0
		ct.Partitions = append(ct.Partitions, cp)
		commit.Topics = append(commit.Topics, ct)
		cresp := c.roundTrip(commit, int32(4+i)).(*kmsg.OffsetCommitResponse)
		require.Equal(t, int16(0), cresp.Topics[0].Partitions[0].ErrorCode, "v%d: %v", version, kerr.ErrorForCode(cresp.Topics[0].Partitions[0].ErrorCode))
	}

	odel := kmsg.NewPtrOffsetDeleteRequest()
	odel.Group = "watchers"
	ot := kmsg.NewOffsetDeleteRequestTopic()
	ot.Topic = "growing"
	op := kmsg.NewOffsetDeleteRequestTopicPartition()
	op.Partition = 1
	ot.Partitions = append(ot.Partitions, op)
	odel.Topics = append(odel.Topics, ot)
	oresp := c.roundTrip(odel, 6).(*kmsg.OffsetDeleteResponse)
	require.Equal(t, int16(0), oresp.ErrorCode)
	require.Equal(t, int16(0), oresp.Topics[0].Partitions[0].ErrorCode, kerr.ErrorForCode(oresp.Topics[0].Partitions[0].ErrorCode))
}

// A negative committed offset is taken and given back as it came, as
// Kafka does: kafkajs's admin resetOffsets commits -2 (earliest) or -1
// (latest) for each partition, and every client reads a negative committed
// offset as none.
func TestKafkaNegativeOffsetCommitted(t *testing.T) {
	n := startKafkaNode(t)
	createTopic(t, n, "rewound", 2)
	c := dialKafka(t, n)

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.SetVersion(5)
	commit.Group, commit.Generation = "rewinders", -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "rewound"
	for partition, offset := range []int64{-2, -1} {
		cp := kmsg.NewOffsetCommitRequestTopicPartition()
		cp.Partition, cp.Offset = int32(partition), offset
		ct.Partitions = append(ct.Partitions, cp)
	}
	commit.Topics = append(commit.Topics, ct)
	cresp := c.roundTrip(commit, 1).(*kmsg.OffsetCommitResponse)
	for _, p := range cresp.Topics[0].Partitions {
		require.Equal(t, int16(0), p.ErrorCode, "partition %d: %v", p.Partition, kerr.ErrorForCode(p.ErrorCode))
	}

	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.SetVersion(5)
	fetch.Group = "rewinders"
	ft := kmsg.NewOffsetFetchRequestTopic()
	ft.Topic, ft.Partitions = "rewound", []int32{0, 1}
	fetch.Topics = append(fetch.Topics, ft)
	fresp := c.roundTrip(fetch, 2).(*kmsg.OffsetFetchResponse)
	require.Equal(t, int16(0), fresp.ErrorCode)
	got := map[int32]int64{}
	for _, p := range fresp.Topics[0].Partitions {
		require.Equal(t, int16(0), p.ErrorCode)
		got[p.Partition] = p.Offset
	}
	require.Equal(t, map[int32]int64{0: -2, 1: -1}, got)
}
