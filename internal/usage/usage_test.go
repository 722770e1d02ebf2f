package usage

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
		{"wrapped", Wrap(base), true, "bad size"},
		{"formatted", Errorf("--log-dirs: %w", base), true, "--log-dirs: bad size"},
		{"inside another error", fmt.Errorf("node: %w", Wrap(base)), true, "node: bad size"},
		{"joined", errors.Join(base, Errorf("-o %q", "yaml")), true, "bad size\n-o \"yaml\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.usage, Is(tc.err))
			if tc.err != nil {
				require.Equal(t, tc.text, tc.err.Error())
			}
		})
	}
	require.NoError(t, Wrap(nil))
	require.ErrorIs(t, Errorf("x: %w", base), base)
}
