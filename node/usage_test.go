package node

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUsageErrors(t *testing.T) {
	base := errors.New("bad size")
	for _, tc := range []struct {
		name  string
		err   error
		usage bool
		text  string
	}{
		{"nil", nil, false, ""},
		{"plain", base, false, "bad size"},
		{"wrapped", MarkUsage(base), true, "bad size"},
		{"formatted", Usagef("--log-dirs: %w", base), true, "--log-dirs: bad size"},
		{"inside another error", fmt.Errorf("node: %w", MarkUsage(base)), true, "node: bad size"},
		{"joined", errors.Join(base, Usagef("-o %q", "yaml")), true, "bad size\n-o \"yaml\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.usage, IsUsage(tc.err))
			if tc.err != nil {
				require.Equal(t, tc.text, tc.err.Error())
			}
		})
	}
	require.NoError(t, MarkUsage(nil))
	require.ErrorIs(t, Usagef("x: %w", base), base)
}
