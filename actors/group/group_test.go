package group

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/assign"
	"github.com/depot-dev/depot/messages"
)

func TestValidateJoin(t *testing.T) {
	g := &groupActor{cfg: groupConfig{id: "g"}, members: map[string]*groupMember{
		"m1": {id: "m1", assignors: []string{assign.RangeName}},
	}}
	for _, tc := range []struct {
		name        string
		req         *messages.JoinGroupRequest
		want        messages.ErrorCode
		wantSession time.Duration
	}{
		{"defaults", &messages.JoinGroupRequest{Topics: []string{"t", "t"}, Assignors: []string{"range"}}, messages.ErrorCode_NONE, DefaultSessionTimeout},
		{"min session", &messages.JoinGroupRequest{SessionTimeoutMs: 1000, Assignors: []string{"range"}}, messages.ErrorCode_NONE, time.Second},
		{"max session", &messages.JoinGroupRequest{SessionTimeoutMs: 300000, Assignors: []string{"range"}}, messages.ErrorCode_NONE, 5 * time.Minute},
		{"session too short", &messages.JoinGroupRequest{SessionTimeoutMs: 999, Assignors: []string{"range"}}, messages.ErrorCode_INVALID_SESSION_TIMEOUT, 0},
		{"session negative", &messages.JoinGroupRequest{SessionTimeoutMs: -1, Assignors: []string{"range"}}, messages.ErrorCode_INVALID_SESSION_TIMEOUT, 0},
		{"session too long", &messages.JoinGroupRequest{SessionTimeoutMs: 300001, Assignors: []string{"range"}}, messages.ErrorCode_INVALID_SESSION_TIMEOUT, 0},
		{"negative rebalance timeout", &messages.JoinGroupRequest{RebalanceTimeoutMs: -5, Assignors: []string{"range"}}, messages.ErrorCode_INVALID_REQUEST, 0},
		{"bad topic", &messages.JoinGroupRequest{Topics: []string{""}, Assignors: []string{"range"}}, messages.ErrorCode_INVALID_TOPIC, 0},
		{"no assignor", &messages.JoinGroupRequest{Topics: []string{"t"}}, messages.ErrorCode_INCONSISTENT_GROUP_PROTOCOL, 0},
		{"only unknown assignors", &messages.JoinGroupRequest{Assignors: []string{"sticky-ish"}}, messages.ErrorCode_INCONSISTENT_GROUP_PROTOCOL, 0},
		{"none in common with the group", &messages.JoinGroupRequest{Assignors: []string{"roundrobin"}}, messages.ErrorCode_INCONSISTENT_GROUP_PROTOCOL, 0},
		{"the member itself may change", &messages.JoinGroupRequest{MemberId: "m1", Assignors: []string{"roundrobin"}}, messages.ErrorCode_NONE, DefaultSessionTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, code, msg := g.validateJoin(tc.req)
			require.Equal(t, tc.want, code, msg)
			if tc.want == messages.ErrorCode_NONE {
				require.Equal(t, tc.wantSession, s.session)
				require.Empty(t, msg)
			} else {
				require.NotEmpty(t, msg)
			}
		})
	}
	s, _, _ := g.validateJoin(&messages.JoinGroupRequest{Topics: []string{"b", "a", "b"}, Assignors: []string{"magic", "range", "range"}})
	require.Equal(t, []string{"a", "b"}, s.topics)
	require.Equal(t, []string{"range"}, s.assignors)
}

func TestValidateOffsets(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   *messages.PartitionOffset
		want messages.ErrorCode
	}{
		{"good", &messages.PartitionOffset{Topic: "t", Partition: 1, Offset: 0}, messages.ErrorCode_NONE},
		{"bad topic", &messages.PartitionOffset{Topic: "a b", Offset: 1}, messages.ErrorCode_INVALID_TOPIC},
		{"negative partition", &messages.PartitionOffset{Topic: "t", Partition: -1, Offset: 1}, messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION},
		{"negative offset, as Kafka takes it", &messages.PartitionOffset{Topic: "t", Offset: -2}, messages.ErrorCode_NONE},
		{"metadata too long", &messages.PartitionOffset{Topic: "t", Offset: 1, Metadata: strings.Repeat("m", MaxOffsetMetadataBytes+1)}, messages.ErrorCode_INVALID_REQUEST},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, ok := validateOffsets([]*messages.PartitionOffset{tc.in})
			require.Equal(t, tc.want == messages.ErrorCode_NONE, ok)
			require.Equal(t, tc.want, out[0].Error)
			// One bad entry refuses the whole commit.
			_, ok = validateOffsets([]*messages.PartitionOffset{{Topic: "t", Offset: 1}, tc.in})
			require.Equal(t, tc.want == messages.ErrorCode_NONE, ok)
		})
	}
}

func TestGroupErrorResponseCoversEveryRequest(t *testing.T) {
	for _, req := range []any{
		&messages.JoinGroupRequest{}, &messages.SyncGroupRequest{}, &messages.HeartbeatRequest{}, &messages.LeaveGroupRequest{},
		&messages.OffsetCommitRequest{}, &messages.OffsetFetchRequest{}, &messages.OffsetDeleteRequest{},
		&messages.DescribeGroupRequest{}, &messages.DeleteGroupRequest{},
	} {
		resp := groupErrorResponse(req, messages.ErrorCode_INVALID_GROUP_ID, "why")
		r, ok := resp.(interface {
			GetError() messages.ErrorCode
			GetErrorMessage() string
		})
		require.True(t, ok, "%T", req)
		require.Equal(t, messages.ErrorCode_INVALID_GROUP_ID, r.GetError())
		require.Equal(t, "why", r.GetErrorMessage())
	}
}
