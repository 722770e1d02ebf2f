package kafka

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/messages"
)

// Every API of the table is one kmsg knows, in versions kmsg knows, and a
// refusal answers every version kmsg has outside the table's range.
func TestAPITable(t *testing.T) {
	require.Len(t, apiByKey, len(apis))
	keys := supportedKeys()
	require.Len(t, keys, len(apis))
	for i, k := range keys {
		if i > 0 {
			require.Less(t, keys[i-1].ApiKey, k.ApiKey, "sorted by key")
		}
		a := apiByKey[k.ApiKey]
		require.Equal(t, [2]int16{a.min, a.max}, [2]int16{k.MinVersion, k.MaxVersion})
	}
	for _, a := range apis {
		name := kmsg.NameForKey(a.key)
		req := kmsg.RequestForKey(a.key)
		require.NotNil(t, req, "key %d", a.key)
		require.LessOrEqual(t, a.min, a.max, name)
		require.LessOrEqual(t, a.max, req.MaxVersion(), "%s: kmsg decodes what the table takes", name)
		require.NotNil(t, a.handle, name)
		outside := a.min > 0 || a.max < req.MaxVersion()
		if a.key == kmsg.ApiVersions.Int16() {
			continue // answered at every version (KIP-511)
		}
		if outside {
			require.NotNil(t, a.refuse, "%s: a refusal, since kmsg knows versions outside %d..%d", name, a.min, a.max)
		}
		for v := int16(0); a.refuse != nil && v <= req.MaxVersion(); v++ {
			r := kmsg.RequestForKey(a.key)
			r.SetVersion(v)
			resp := a.refuse(r, codeUnsupportedVersion)
			require.Equal(t, v, resp.GetVersion(), "%s: refused at the request's version", name)
			require.NotEmpty(t, resp.AppendTo(nil))
		}
	}
}

// Depot's error codes are Kafka's in meaning: the Kafka code each maps to
// has the same name, but for the few Depot spells its own way.
func TestKafkaCodes(t *testing.T) {
	spelled := map[string]string{
		"INVALID_TOPIC": "INVALID_TOPIC_EXCEPTION",
		// Kafka's name since 2.5 (KIP-392); kerr keeps the old one.
		"NOT_LEADER_OR_FOLLOWER": "NOT_LEADER_FOR_PARTITION",
	}
	for value, name := range messages.ErrorCode_name {
		code := kafkaCode(messages.ErrorCode(value))
		if value == 0 {
			require.Equal(t, int16(0), code)
			continue
		}
		want := name
		if s, ok := spelled[name]; ok {
			want = s
		}
		err := kerr.ErrorForCode(code)
		require.NotNil(t, err, "%s", name)
		require.Equal(t, want, err.(*kerr.Error).Message, "%s maps to Kafka's %d", name, code)
	}
	require.Equal(t, codeUnknownServerError, kafkaCode(messages.ErrorCode(1<<20)))
}

func TestBudget(t *testing.T) {
	b := newBudget(100)
	done := make(chan struct{})
	n, ok := b.acquire(60, done)
	require.True(t, ok)
	require.Equal(t, int64(60), n)
	got := make(chan int64)
	go func() {
		n, _ := b.acquire(50, done)
		got <- n
	}()
	select {
	case <-got:
		t.Fatal("took more than is free")
	case <-time.After(20 * time.Millisecond):
	}
	b.release(60)
	require.Equal(t, int64(50), <-got)
	// A request larger than the whole budget takes all of it.
	b.release(50)
	n, ok = b.acquire(1000, done)
	require.True(t, ok)
	require.Equal(t, int64(100), n)
	require.Equal(t, int64(100), b.inUse())
	close(done)
	_, ok = b.acquire(1, done)
	require.False(t, ok, "a closed connection stops waiting")
}

func TestParseTopicID(t *testing.T) {
	id, err := parseTopicID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
	require.NoError(t, err)
	require.Equal(t, [16]byte{0x0f, 0x1e, 0x2d, 0x3c, 0x4b, 0x5a, 0x69, 0x78, 0x87, 0x96, 0xa5, 0xb4, 0xc3, 0xd2, 0xe1, 0xf0}, id)
	for _, bad := range []string{"", "orders", strings.Repeat("0", 31), "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1fz"} {
		_, err := parseTopicID(bad)
		require.Error(t, err, bad)
	}
}
