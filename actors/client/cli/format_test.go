package cli

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/client"
	"github.com/depot-dev/depot/wire"
)

func TestFormatRecord(t *testing.T) {
	r := &client.Record{
		Topic: "orders", Partition: 2, Offset: 41, Timestamp: time.UnixMilli(1700000000123),
		Key: []byte("user-7"), Value: []byte("order-9"),
		Headers: []wire.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("2")}},
	}
	for _, tc := range []struct {
		format string
		want   string
	}{
		{`%v\n`, "order-9\n"},
		{`%p %o %k %v\n`, "2 41 user-7 order-9\n"},
		{`%t-%p@%d\t%h`, "orders-2@1700000000123\ta=1,b=2"},
		{`100%% %x \q`, `100% %x \q`},
		{`trailing %`, "trailing %"},
		{`trailing \`, `trailing \`},
		{"", ""},
	} {
		t.Run(tc.format, func(t *testing.T) {
			require.Equal(t, tc.want, string(formatRecord([]byte("kept:"), tc.format, r))[len("kept:"):])
		})
	}
}

func TestParseOffset(t *testing.T) {
	for _, tc := range []struct {
		text string
		want client.Offset
		bad  bool
	}{
		{text: "start", want: client.AtStart()},
		{text: "earliest", want: client.AtStart()},
		{text: "end", want: client.AtEnd()},
		{text: "latest", want: client.AtEnd()},
		{text: "0", want: client.AtOffset(0)},
		{text: "1234", want: client.AtOffset(1234)},
		{text: "@1700000000123", want: client.AtTimestamp(time.UnixMilli(1700000000123))},
		{text: "-1", bad: true},
		{text: "soon", bad: true},
		{text: "@", bad: true},
		{text: "@-5", bad: true},
		{text: "", bad: true},
	} {
		t.Run(tc.text, func(t *testing.T) {
			got, err := parseOffset(tc.text)
			if tc.bad {
				require.ErrorContains(t, err, "--offset")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestHumanBytes(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0B"},
		{1023, "1023B"},
		{1024, "1.0KiB"},
		{1536, "1.5KiB"},
		{64 << 20, "64.0MiB"},
		{5 << 30, "5.0GiB"},
		{3 << 40, "3.0TiB"},
	} {
		require.Equal(t, tc.want, humanBytes(tc.n), "%d", tc.n)
	}
}
