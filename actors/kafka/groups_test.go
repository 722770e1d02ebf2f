package kafka

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/messages"
)

func TestConsumerEncodings(t *testing.T) {
	partitions := []*messages.TopicPartition{{Topic: "a", Partition: 2}, {Topic: "b", Partition: 0}, {Topic: "a", Partition: 5}}
	encoded := encodeConsumerAssignment(partitions)
	var a kmsg.ConsumerMemberAssignment
	require.NoError(t, a.ReadFrom(encoded))
	require.Len(t, a.Topics, 2)
	require.Equal(t, "a", a.Topics[0].Topic)
	require.Equal(t, []int32{2, 5}, a.Topics[0].Partitions)
	require.Equal(t, []*messages.TopicPartition{{Topic: "a", Partition: 2}, {Topic: "a", Partition: 5}, {Topic: "b", Partition: 0}}, consumerPartitions(encoded))

	require.Equal(t, []string{"x", "y"}, consumerTopics(encodeConsumerMetadata([]string{"x", "y"})))
	for _, bad := range [][]byte{nil, {0xff}, {0, 0, 0, 0, 0, 9}} {
		require.Nil(t, consumerPartitions(bad), "%x", bad)
		require.Nil(t, consumerTopics(bad), "%x", bad)
	}
}

func TestMatchesFilter(t *testing.T) {
	for _, tc := range []struct {
		filter []string
		value  string
		want   bool
	}{
		{nil, "Stable", true},
		{[]string{"stable"}, "Stable", true},
		{[]string{"Empty", "PreparingRebalance"}, "Stable", false},
		{[]string{"CLASSIC"}, "classic", true},
		{[]string{"consumer"}, "classic", false},
	} {
		require.Equal(t, tc.want, matchesFilter(tc.filter, tc.value), "%q %q", tc.filter, tc.value)
	}
}

func TestDescribedGroup(t *testing.T) {
	member := &messages.GroupMember{MemberId: "m", ClientId: "c", ClientHost: "/10.0.0.1", Topics: []string{"t"},
		Assignment: []*messages.TopicPartition{{Topic: "t", Partition: 1}}, ProtocolMetadata: []byte("meta"), MemberAssignment: []byte("assigned")}
	for _, tc := range []struct {
		name    string
		version int16
		in      *messages.DescribeGroupResponse
		check   func(t *testing.T, rg *kmsg.DescribeGroupsResponseGroup)
	}{
		{"not found before v6: Dead, no error", 5, &messages.DescribeGroupResponse{Error: messages.ErrorCode_GROUP_ID_NOT_FOUND, ErrorMessage: "gone"},
			func(t *testing.T, rg *kmsg.DescribeGroupsResponseGroup) {
				require.Equal(t, int16(0), rg.ErrorCode)
				require.Equal(t, "Dead", rg.State)
			}},
		{"not found from v6", 6, &messages.DescribeGroupResponse{Error: messages.ErrorCode_GROUP_ID_NOT_FOUND, ErrorMessage: "gone"},
			func(t *testing.T, rg *kmsg.DescribeGroupsResponseGroup) {
				require.Equal(t, kerr.GroupIDNotFound.Code, rg.ErrorCode)
				require.Equal(t, "gone", *rg.ErrorMessage)
			}},
		{"not the coordinator", 6, &messages.DescribeGroupResponse{Error: messages.ErrorCode_NOT_COORDINATOR},
			func(t *testing.T, rg *kmsg.DescribeGroupsResponseGroup) {
				require.Equal(t, kerr.NotCoordinator.Code, rg.ErrorCode)
			}},
		{"a stable classic group, as its members sent it", 6, &messages.DescribeGroupResponse{State: "Stable", ProtocolType: "consumer", Assignor: "range", Members: []*messages.GroupMember{member}},
			func(t *testing.T, rg *kmsg.DescribeGroupsResponseGroup) {
				require.Equal(t, "range", rg.Protocol)
				require.Equal(t, "consumer", rg.ProtocolType)
				require.Equal(t, "meta", string(rg.Members[0].ProtocolMetadata))
				require.Equal(t, "assigned", string(rg.Members[0].MemberAssignment))
				require.Equal(t, "/10.0.0.1", rg.Members[0].ClientHost)
			}},
		{"a rebalancing group: members without metadata", 6, &messages.DescribeGroupResponse{State: "PreparingRebalance", ProtocolType: "consumer", Assignor: "range", Members: []*messages.GroupMember{member}},
			func(t *testing.T, rg *kmsg.DescribeGroupsResponseGroup) {
				require.Empty(t, rg.Protocol)
				require.Len(t, rg.Members, 1)
				require.Nil(t, rg.Members[0].ProtocolMetadata)
				require.Nil(t, rg.Members[0].MemberAssignment)
			}},
		{"a group of Depot's protocol, as a consumer group", 6, &messages.DescribeGroupResponse{State: "Stable", Assignor: "roundrobin", Members: []*messages.GroupMember{member}},
			func(t *testing.T, rg *kmsg.DescribeGroupsResponseGroup) {
				require.Equal(t, "consumer", rg.ProtocolType)
				require.Equal(t, "roundrobin", rg.Protocol)
				require.Equal(t, []string{"t"}, consumerTopics(rg.Members[0].ProtocolMetadata))
				require.Equal(t, []*messages.TopicPartition{{Topic: "t", Partition: 1}}, consumerPartitions(rg.Members[0].MemberAssignment))
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			describedGroup(&rg, tc.in, tc.version)
			tc.check(t, &rg)
		})
	}
}
