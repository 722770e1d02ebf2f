package kafka

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParseRequest feeds ParseRequest random bytes and, as seeds, every
// sample request kmsg builds (sampleRequests), which the fuzzer mutates
// field by field. TestParseRequestSurvivesFlippedBytes flips each of
// their bytes in the ordinary test run.
func FuzzParseRequest(f *testing.F) {
	for _, req := range sampleRequests() {
		f.Add(frameOf(req, 1))
	}
	f.Add([]byte{})
	f.Add([]byte{0, 18, 0, 99, 0, 0, 0, 1, 0xff, 0xff, 0})
	f.Fuzz(func(t *testing.T, frame []byte) {
		checkParse(t, frame)
	})
}

// FuzzFrameSize checks that a size prefix is taken only in range.
func FuzzFrameSize(f *testing.F) {
	f.Add([]byte{0, 0, 0, 9})
	f.Add([]byte{0x16, 3, 1, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, prefix []byte) {
		size, err := FrameSize(prefix, DefaultMaxRequestBytes)
		if err == nil {
			require.GreaterOrEqual(t, size, int32(0))
			require.LessOrEqual(t, size, int32(DefaultMaxRequestBytes))
		}
	})
}
