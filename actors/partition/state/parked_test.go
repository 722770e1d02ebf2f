package state

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// An acks=all answer is ready once the acknowledged offset reaches the end
// of its batches; the others stay parked, in order.
func TestParkedProducesReady(t *testing.T) {
	ends := []int64{3, 5, 5, 9}
	for _, tc := range []struct {
		name         string
		acknowledged []int64 // one Ready after the other
		ready        [][]string
		left         int
	}{
		{name: "nothing durable", acknowledged: []int64{0}, ready: [][]string{nil}, left: 4},
		{name: "below the first", acknowledged: []int64{2}, ready: [][]string{nil}, left: 4},
		{name: "the first", acknowledged: []int64{3}, ready: [][]string{{"a"}}, left: 3},
		{name: "two ending together", acknowledged: []int64{5}, ready: [][]string{{"a", "b", "c"}}, left: 1},
		{name: "in steps", acknowledged: []int64{4, 8, 9}, ready: [][]string{{"a"}, {"b", "c"}, {"d"}}, left: 0},
		{name: "all", acknowledged: []int64{100}, ready: [][]string{{"a", "b", "c", "d"}}, left: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var q ParkedProduces[string]
			for i, end := range ends {
				q.Park(end, time.Time{}, string(rune('a'+i)))
			}
			for i, acknowledged := range tc.acknowledged {
				require.Equal(t, tc.ready[i], q.Ready(acknowledged), "Ready(%d)", acknowledged)
			}
			require.Equal(t, tc.left, q.Len())
		})
	}
}

func TestParkedProducesTakeAll(t *testing.T) {
	var q ParkedProduces[string]
	require.Empty(t, q.TakeAll())
	q.Park(3, time.Time{}, "a")
	q.Park(4, time.Time{}, "b")
	require.Equal(t, []string{"a", "b"}, q.TakeAll())
	require.Zero(t, q.Len())
	require.Nil(t, q.Ready(100))
}

// A fetch is parked when it may wait for more bytes than it found.
func TestFetchMayWait(t *testing.T) {
	for _, tc := range []struct {
		name                string
		maxWaitMs, minBytes int32
		available           int
		wait                bool
	}{
		{"no wait asked", 0, 100, 0, false},
		{"nothing asked", 500, 0, 0, false},
		{"enough found", 500, 100, 100, false},
		{"more than enough", 500, 1, 4096, false},
		{"too few", 500, 100, 99, true},
		{"nothing found", 500, 1, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.wait, FetchMayWait(tc.maxWaitMs, tc.minBytes, tc.available))
		})
	}
}

// A parked fetch is answered when the bytes readable since it was parked
// and those it found reach its min_bytes, or when it expires, whichever
// comes first, once.
func TestParkedFetches(t *testing.T) {
	type event struct {
		readable int    // bytes that became readable, when expire is empty
		expire   string // the fetch whose timer fires
		answered []string
	}
	for _, tc := range []struct {
		name   string
		events []event
		left   int
	}{
		{name: "nothing happens", left: 3},
		{name: "no bytes", events: []event{{readable: 0}}, left: 3},
		{name: "one byte", events: []event{{readable: 1, answered: []string{"a"}}}, left: 2},
		{name: "min_bytes reached in steps", events: []event{
			{readable: 50, answered: []string{"a"}},
			{readable: 49},
			{readable: 1, answered: []string{"b"}},
			{readable: 799},
			{readable: 1, answered: []string{"c"}},
		}},
		{name: "all at once", events: []event{{readable: 1 << 20, answered: []string{"a", "b", "c"}}}},
		{name: "expired", events: []event{
			{expire: "b", answered: []string{"b"}},
			{readable: 1 << 20, answered: []string{"a", "c"}},
		}},
		{name: "expired after its answer", events: []event{
			{readable: 100, answered: []string{"a", "b"}},
			{expire: "b"},
			{expire: "a"},
		}, left: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var q ParkedFetches[string]
			ids := map[string]uint64{
				"a": q.Park(0, 1, "a"),      // waits for 1 byte
				"b": q.Park(10, 110, "b"),   // found 10 of 110
				"c": q.Park(100, 1000, "c"), // found 100 of 1000
			}
			require.Len(t, map[uint64]bool{ids["a"]: true, ids["b"]: true, ids["c"]: true}, 3, "ids are distinct")
			for i, e := range tc.events {
				var answered []string
				if e.expire != "" {
					if f, ok := q.Expire(ids[e.expire]); ok {
						answered = []string{f}
					}
				} else {
					answered = q.Readable(e.readable)
				}
				require.Equal(t, e.answered, answered, "event %d", i)
			}
			require.Equal(t, tc.left, q.Len())
		})
	}
}

func TestParkedFetchesTakeAll(t *testing.T) {
	var q ParkedFetches[string]
	first := q.Park(0, 1, "a")
	q.Park(0, 1, "b")
	require.Equal(t, []string{"a", "b"}, q.TakeAll())
	_, ok := q.Expire(first)
	require.False(t, ok, "taken already")
	next := q.Park(0, 1, "c")
	require.NotEqual(t, first, next, "an id is not given twice")
}

func TestParkedProducesExpire(t *testing.T) {
	var q ParkedProduces[string]
	now := time.Unix(100, 0)
	_, ok := q.NextExpiry()
	require.False(t, ok)
	q.Park(10, now.Add(3*time.Second), "a")
	q.Park(20, now.Add(time.Second), "b")
	q.Park(30, now.Add(2*time.Second), "c")
	at, ok := q.NextExpiry()
	require.True(t, ok)
	require.Equal(t, now.Add(time.Second), at)
	require.Empty(t, q.Expired(now))
	require.Equal(t, []string{"b", "c"}, q.Expired(now.Add(2*time.Second)))
	require.Equal(t, 1, q.Len())
	require.Equal(t, []string{"a"}, q.Ready(10))
}
