package topic

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/disk"
)

func TestValidateTopicName(t *testing.T) {
	tests := []struct {
		name    string
		topic   string
		wantErr string // substring; empty means valid
	}{
		{"simple", "orders", ""},
		{"all legal characters", "aZ09._-", ""},
		{"single character", "a", ""},
		{"dots inside", "a.b..c", ""},
		{"three dots", "...", ""},
		{"internal", "__consumer_offsets", ""},
		{"max length", strings.Repeat("x", 249), ""},
		{"empty", "", "it is empty"},
		{"dot", ".", `cannot be "." or ".."`},
		{"dot dot", "..", `cannot be "." or ".."`},
		{"too long", strings.Repeat("x", 250), "250 characters long, the limit is 249"},
		{"space", "a b", `byte 1 (' ')`},
		{"slash", "a/b", `byte 1 ('/')`},
		{"colon", "a:b", `byte 1 (':')`},
		{"plus", "+", `byte 0 ('+')`},
		{"non ascii", "caf\u00e9", "byte 3"},
		{"nul", "a\x00", "byte 1"},
		{"newline", "a\n", "byte 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateName(tt.topic)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.True(t, errors.Is(err, ErrInvalidName))
			require.Contains(t, err.Error(), tt.wantErr)
			require.True(t, strings.HasPrefix(err.Error(), "topic: invalid topic name \""), err.Error())
		})
	}
}

func TestTopicNamesCollide(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"a.b", "a_b", true},
		{"a_b", "a.b", true},
		{"a.b", "a.b", true},
		{"a._", "a_.", true},
		{"a.b", "a-b", false},
		{"a.b", "a.c", false},
		{"ab", "a_b", false},
		{"a.b", "a_b_", false},
		{"", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.a+"|"+tt.b, func(t *testing.T) {
			require.Equal(t, tt.want, NamesCollide(tt.a, tt.b))
		})
	}
}

func TestIsInternalTopic(t *testing.T) {
	require.True(t, IsInternal("__consumer_offsets"))
	require.True(t, IsInternal("__x"))
	require.False(t, IsInternal("_x"))
	require.False(t, IsInternal("x__"))
}

// FuzzValidateTopicName checks that no name panics and that the verdict
// agrees with the rule the disk package applies to partition directories.
func FuzzValidateTopicName(f *testing.F) {
	for _, s := range []string{"orders", "", ".", "..", "a/b", strings.Repeat("x", 250), "__consumer_offsets", "caf\u00e9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidateName(name)
		require.Equal(t, disk.ValidTopicName(name), err == nil, "name %q: %v", name, err)
		if err != nil {
			require.True(t, errors.Is(err, ErrInvalidName))
		}
	})
}
