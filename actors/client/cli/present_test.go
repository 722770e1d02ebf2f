package cli

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/node"
)

func TestPresent(t *testing.T) {
	g := &globals{brokers: "b:1", timeout: 2 * time.Second}
	unknown := &client.Error{Code: messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, Message: `topic "t" does not exist`}
	for _, tc := range []struct {
		name string
		err  error
		want string
		is   error
	}{
		{"a broker's message alone", fmt.Errorf("produce to t: %w", unknown), `topic "t" does not exist`, client.ErrUnknownTopic},
		{"through the client's wrapping", fmt.Errorf("client: consume t: %w", unknown), `topic "t" does not exist`, client.ErrUnknownTopic},
		{"a code with no message keeps its context", fmt.Errorf("produce to t: %w", client.ErrNotLeader), "produce to t: NOT_LEADER_OR_FOLLOWER", client.ErrNotLeader},
		{"a statement of the CLI", groupError("g", fmt.Errorf("client: describe group %q: %w", "g", client.ErrGroupIDNotFound)), `group "g" does not exist`, client.ErrGroupIDNotFound},
		{"unreachable", fmt.Errorf("client: list groups: %w", fmt.Errorf("%w: %s", client.ErrUnreachable, "a:1, a:2")),
			"no node answered at a:1, a:2: is depot node running there?", client.ErrUnreachable},
		{"timed out", fmt.Errorf("%w: %T to %s after %v", client.ErrTimeout, &messages.MetadataRequest{}, "a:1", 3*time.Second),
			"no answer from a:1 within 3s", client.ErrTimeout},
		{"past --timeout", context.DeadlineExceeded, "no answer from b:1 within 2s (--timeout)", context.DeadlineExceeded},
		{"package prefixes", fmt.Errorf("client: fetch t-0: %w", errors.New("wire: bad CRC")), "fetch t-0: bad CRC", nil},
		{"joined", errors.Join(unknown, errors.New("client: commit failed")), `topic "t" does not exist; commit failed`, client.ErrUnknownTopic},
		{"one line", errors.New("a\nb"), "a; b", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := g.present(tc.err)
			require.EqualError(t, err, tc.want)
			if tc.is != nil {
				require.ErrorIs(t, err, tc.is, "the error worded is still there for errors.Is")
			}
			require.Equal(t, err, g.present(err), "wording twice changes nothing")
		})
	}
	require.Nil(t, g.present(nil))
	usage := node.Usagef("-p %d: want at least 1", 0)
	require.Equal(t, usage, g.present(usage), "a usage error is worded already")
	require.True(t, node.IsUsage(g.present(fmt.Errorf("wrapped: %w", usage))))
}
