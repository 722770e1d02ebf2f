package messages

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestErrorText(t *testing.T) {
	errInvalidName := errors.New("topic: invalid topic name")
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"no prefix", errors.New(`topic "a" already exists`), `topic "a" already exists`},
		{"sentinel", fmt.Errorf("%w %q: byte 1 ('/') is not allowed", errInvalidName, "a/b"), `invalid topic name "a/b": byte 1 ('/') is not allowed`},
		{"prefixes at every wrap", fmt.Errorf("disks: reading /d/x.json: %w", errors.New("disk: segment closed")), "reading /d/x.json: segment closed"},
		{"two prefixes in a row", errors.New("depot: remote codec: malformed message"), "remote codec: malformed message"},
		{"a word that is not a prefix", errors.New("partition 3: no leader"), "partition 3: no leader"},
		{"a prefix name as the last part", errors.New("moving orders-0: topic"), "moving orders-0: topic"},
		{"a colon with no space", errors.New("open /tmp/a:b: permission denied"), "open /tmp/a:b: permission denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, ErrorText(tc.err))
		})
	}
}
