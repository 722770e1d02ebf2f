package kafka

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
)

func TestNextSessionEpoch(t *testing.T) {
	for _, tc := range []struct{ epoch, want int32 }{
		{-1, -1},
		{-7, -1},
		{0, 1},
		{1, 2},
		{41, 42},
		{math.MaxInt32 - 1, math.MaxInt32},
		{math.MaxInt32, 1},
	} {
		require.Equal(t, tc.want, nextSessionEpoch(tc.epoch), "after %d", tc.epoch)
	}
}

// The session codes are Kafka's.
func TestFetchSessionCodes(t *testing.T) {
	require.Equal(t, kerr.FetchSessionIDNotFound.Code, codeFetchSessionIDNotFound)
	require.Equal(t, kerr.InvalidFetchSessionEpoch.Code, codeInvalidFetchSessionEpoch)
	require.Equal(t, kerr.FetchSessionTopicIDError.Code, codeFetchSessionTopicIDError)
}

// named is a partition of topic "t" by name.
func named(partition int32) sessionKey { return sessionKey{topic: "t", partition: partition} }

// byID is a partition of the topic whose id starts with id.
func byID(id byte, partition int32) sessionKey {
	return sessionKey{topicID: [16]byte{id}, partition: partition}
}

// asked is a partition as a fetch asks for it, from offset.
func asked(key sessionKey, offset int64) sessionPartition {
	return sessionPartition{key: key, fetchOffset: offset, maxBytes: 1 << 20, currentLeaderEpoch: -1, highWatermark: -1, logStartOffset: -1}
}

// logState is what a partition answers: its high watermark, log start
// offset, the bytes of records it gives and its error.
type logState struct {
	highWatermark, logStartOffset int64
	records                       int
	code                          int16
}

// A client's fetches in turn against one cache, each with what the
// partitions answer: the partitions fetched, the partitions the answer
// names, and the session the answer carries.
func TestFetchSessionSteps(t *testing.T) {
	type step struct {
		name string
		// session names a session: "" none (id 0), "unknown" an id never
		// given, else the session that step created.
		session  string
		epoch    int32
		topicIDs bool
		fetch    []sessionPartition
		forget   []sessionKey
		logs     map[sessionKey]logState
		// creates names the session the step's answer creates.
		creates     string
		wantKind    fetchContextKind
		wantCode    int16
		wantFetched []sessionPartition
		wantNamed   []sessionKey
		// wantSession is the session the answer carries: "" for id 0.
		wantSession string
		// wantHeld are the sessions held after the step.
		wantHeld []string
	}
	a0, a1, b0 := named(0), named(1), sessionKey{topic: "u", partition: 0}
	steady := map[sessionKey]logState{a0: {highWatermark: 5}, a1: {highWatermark: 0}, b0: {highWatermark: 9}}
	with := func(changes map[sessionKey]logState) map[sessionKey]logState {
		out := map[sessionKey]logState{}
		for k, v := range steady {
			out[k] = v
		}
		for k, v := range changes {
			out[k] = v
		}
		return out
	}
	cached := func(p sessionPartition, hw, lso int64) sessionPartition {
		p.highWatermark, p.logStartOffset = hw, lso
		return p
	}
	steps := []step{
		{
			name:  "a sessionless fetch creates nothing",
			epoch: -1, fetch: []sessionPartition{asked(a0, 0)}, logs: with(map[sessionKey]logState{a0: {highWatermark: 5, records: 100}}),
			wantKind: contextSessionless, wantFetched: []sessionPartition{asked(a0, 0)}, wantNamed: []sessionKey{a0},
		},
		{
			name:  "a full fetch with epoch 0 creates a session",
			epoch: 0, fetch: []sessionPartition{asked(a0, 0), asked(a1, 0)}, logs: with(map[sessionKey]logState{a0: {highWatermark: 5, records: 100}}),
			creates: "S", wantKind: contextFull, wantFetched: []sessionPartition{asked(a0, 0), asked(a1, 0)}, wantNamed: []sessionKey{a0, a1},
			wantSession: "S", wantHeld: []string{"S"},
		},
		{
			name:    "an incremental fetch fetches every partition of the session, and names none that did not change",
			session: "S", epoch: 1, fetch: []sessionPartition{asked(a0, 5)}, logs: steady,
			wantKind: contextIncremental, wantFetched: []sessionPartition{cached(asked(a0, 5), 5, 0), cached(asked(a1, 0), 0, 0)},
			wantNamed: nil, wantSession: "S", wantHeld: []string{"S"},
		},
		{
			name:    "records, a new high watermark or log start offset are named; a partition with records goes last",
			session: "S", epoch: 2, logs: with(map[sessionKey]logState{a0: {highWatermark: 8, records: 30}, a1: {highWatermark: 0, logStartOffset: 0}}),
			wantKind: contextIncremental, wantFetched: []sessionPartition{cached(asked(a0, 5), 5, 0), cached(asked(a1, 0), 0, 0)},
			wantNamed: []sessionKey{a0}, wantSession: "S", wantHeld: []string{"S"},
		},
		{
			name:    "a partition added goes at the end, and is named the first time",
			session: "S", epoch: 3, fetch: []sessionPartition{asked(b0, 2)}, logs: with(map[sessionKey]logState{a0: {highWatermark: 8}, a1: {highWatermark: 1}}),
			wantKind: contextIncremental,
			wantFetched: []sessionPartition{
				cached(asked(a1, 0), 0, 0), cached(asked(a0, 5), 8, 0), asked(b0, 2),
			},
			wantNamed: []sessionKey{a1, b0}, wantSession: "S", wantHeld: []string{"S"},
		},
		{
			name:    "the same epoch again is refused",
			session: "S", epoch: 3, logs: steady,
			wantKind: contextError, wantCode: codeInvalidFetchSessionEpoch, wantHeld: []string{"S"},
		},
		{
			name:    "an epoch ahead is refused",
			session: "S", epoch: 9, logs: steady,
			wantKind: contextError, wantCode: codeInvalidFetchSessionEpoch, wantHeld: []string{"S"},
		},
		{
			name:    "forgotten partitions leave the session",
			session: "S", epoch: 4, forget: []sessionKey{a0, a1, named(7)}, logs: with(map[sessionKey]logState{b0: {highWatermark: 9}}),
			wantKind: contextIncremental, wantFetched: []sessionPartition{cached(asked(b0, 2), 9, 0)},
			wantSession: "S", wantHeld: []string{"S"},
		},
		{
			name:    "an error is always named",
			session: "S", epoch: 5, logs: with(map[sessionKey]logState{b0: {highWatermark: 9, code: codeOffsetOutOfRange}}),
			wantKind: contextIncremental, wantFetched: []sessionPartition{cached(asked(b0, 2), 9, 0)},
			wantNamed: []sessionKey{b0}, wantSession: "S", wantHeld: []string{"S"},
		},
		{
			name:    "after an error the partition is named again, whatever it answers",
			session: "S", epoch: 6, fetch: []sessionPartition{asked(b0, 9)}, logs: with(map[sessionKey]logState{b0: {highWatermark: 9}}),
			wantKind: contextIncremental, wantFetched: []sessionPartition{cached(asked(b0, 9), -1, 0)},
			wantNamed: []sessionKey{b0}, wantSession: "S", wantHeld: []string{"S"},
		},
		{
			name:    "a session of names is not fetched by ids",
			session: "S", epoch: 7, topicIDs: true, logs: steady,
			wantKind: contextError, wantCode: codeFetchSessionTopicIDError, wantHeld: []string{"S"},
		},
		{
			name:    "an id never given is not found",
			session: "unknown", epoch: 1, logs: steady,
			wantKind: contextError, wantCode: codeFetchSessionIDNotFound, wantHeld: []string{"S"},
		},
		{
			name:    "id 0 with an epoch above 0 is not found",
			session: "", epoch: 1, logs: steady,
			wantKind: contextError, wantCode: codeFetchSessionIDNotFound, wantHeld: []string{"S"},
		},
		{
			name:    "forgetting every partition closes the session; the fetch is sessionless",
			session: "S", epoch: 7, forget: []sessionKey{b0}, fetch: nil, logs: steady,
			wantKind: contextSessionless, wantFetched: nil, wantHeld: nil,
		},
		{
			name:    "a closed session is not found",
			session: "S", epoch: 8, logs: steady,
			wantKind: contextError, wantCode: codeFetchSessionIDNotFound,
		},
		{
			name:  "a full fetch by topic ids creates a session of ids",
			epoch: 0, topicIDs: true, fetch: []sessionPartition{asked(byID(1, 0), 0)},
			logs:    map[sessionKey]logState{byID(1, 0): {highWatermark: 3, records: 10}},
			creates: "T", wantKind: contextFull, wantFetched: []sessionPartition{asked(byID(1, 0), 0)}, wantNamed: []sessionKey{byID(1, 0)},
			wantSession: "T", wantHeld: []string{"T"},
		},
		{
			name:    "which takes incremental fetches by ids",
			session: "T", epoch: 1, topicIDs: true, fetch: []sessionPartition{asked(byID(1, 0), 3)},
			forget: []sessionKey{byID(2, 0)}, logs: map[sessionKey]logState{byID(1, 0): {highWatermark: 3}},
			wantKind: contextIncremental, wantFetched: []sessionPartition{cached(asked(byID(1, 0), 3), 3, 0)},
			wantSession: "T", wantHeld: []string{"T"},
		},
		{
			name:    "a full fetch naming a session closes it and creates another",
			session: "T", epoch: 0, topicIDs: true, fetch: []sessionPartition{asked(byID(1, 0), 3)},
			logs:    map[sessionKey]logState{byID(1, 0): {highWatermark: 3}},
			creates: "U", wantKind: contextFull, wantFetched: []sessionPartition{asked(byID(1, 0), 3)}, wantNamed: []sessionKey{byID(1, 0)},
			wantSession: "U", wantHeld: []string{"U"},
		},
		{
			name:    "epoch -1 closes the session and answers without one",
			session: "U", epoch: -1, topicIDs: true, fetch: []sessionPartition{asked(byID(1, 0), 3)},
			logs:     map[sessionKey]logState{byID(1, 0): {highWatermark: 3}},
			wantKind: contextSessionless, wantFetched: []sessionPartition{asked(byID(1, 0), 3)}, wantNamed: []sessionKey{byID(1, 0)},
		},
	}

	c := newFetchSessionCache(10, time.Minute, rand.New(rand.NewPCG(1, 2)))
	ids := map[string]int32{"": 0, "unknown": 424242}
	now := time.Unix(1000, 0)
	for _, s := range steps {
		now = now.Add(time.Second)
		fc := c.newContext(now, ids[s.session], s.epoch, false, s.topicIDs, s.fetch, s.forget)
		require.Equal(t, s.wantKind, fc.kind, s.name)
		require.Equal(t, s.wantCode, fc.code, s.name)
		require.Equal(t, s.wantFetched, fc.partitions, s.name)
		results := make([]partitionResult, len(fc.partitions))
		for i, p := range fc.partitions {
			l := s.logs[p.key]
			results[i] = partitionResult{key: p.key, recordBytes: l.records, highWatermark: l.highWatermark, logStartOffset: l.logStartOffset, code: l.code}
		}
		sessionID, namedNow, code := c.finish(now, &fc, results)
		require.Equal(t, s.wantCode, code, s.name)
		var gotNamed []sessionKey
		for i, n := range namedNow {
			if n {
				gotNamed = append(gotNamed, results[i].key)
			}
		}
		require.Equal(t, s.wantNamed, gotNamed, s.name)
		if s.creates != "" {
			require.NotZero(t, sessionID, s.name)
			require.NotContains(t, ids, s.creates, s.name)
			ids[s.creates] = sessionID
		}
		require.Equal(t, ids[s.wantSession], sessionID, s.name)
		var held []string
		for name, id := range ids {
			if _, ok := c.sessions[id]; ok && id != 0 {
				held = append(held, name)
			}
		}
		require.ElementsMatch(t, s.wantHeld, held, s.name)
	}
	st := c.statsNow()
	require.Equal(t, uint64(3), st.Created)
	require.Equal(t, uint64(7), st.Incremental)
	require.Zero(t, st.Sessions)
	require.Zero(t, st.Partitions)
}

// A session's epochs wrap from the largest to 1.
func TestFetchSessionEpochWraps(t *testing.T) {
	c := newFetchSessionCache(10, time.Minute, rand.New(rand.NewPCG(1, 2)))
	now := time.Unix(1000, 0)
	fc := c.newContext(now, 0, 0, false, false, []sessionPartition{asked(named(0), 0)}, nil)
	id, _, _ := c.finish(now, &fc, []partitionResult{{key: named(0)}})
	c.sessions[id].epoch = math.MaxInt32
	fc = c.newContext(now, id, math.MaxInt32, false, false, nil, nil)
	require.Equal(t, contextIncremental, fc.kind)
	_, _, code := c.finish(now, &fc, []partitionResult{{key: named(0)}})
	require.Equal(t, codeNone, code)
	fc = c.newContext(now, id, 1, false, false, nil, nil)
	require.Equal(t, contextIncremental, fc.kind)
}

// A fetch of the session that comes between another's context and its
// answer makes the first a duplicate: its answer is refused.
func TestFetchSessionDuplicateAnswer(t *testing.T) {
	c := newFetchSessionCache(10, time.Minute, rand.New(rand.NewPCG(1, 2)))
	now := time.Unix(1000, 0)
	fc := c.newContext(now, 0, 0, false, false, []sessionPartition{asked(named(0), 0)}, nil)
	id, _, _ := c.finish(now, &fc, []partitionResult{{key: named(0)}})
	first := c.newContext(now, id, 1, false, false, nil, nil)
	second := c.newContext(now, id, 2, false, false, nil, nil)
	require.Equal(t, contextIncremental, second.kind)
	sessionID, _, code := c.finish(now, &first, []partitionResult{{key: named(0)}})
	require.Equal(t, codeInvalidFetchSessionEpoch, code)
	require.Equal(t, id, sessionID)
	_, _, code = c.finish(now, &second, []partitionResult{{key: named(0)}})
	require.Equal(t, codeNone, code)
}

// Eviction, as Kafka's FetchSessionCache.tryEvict: a full cache makes
// room for a new session by a stale one, else by a less valuable one that
// may be evicted, else creates none.
func TestFetchSessionEviction(t *testing.T) {
	const age = 2 * time.Minute
	t0 := time.Unix(10000, 0)
	// existing is a session in a full cache of two.
	type existing struct {
		privileged bool
		size       int
		created    time.Duration // after t0
		used       time.Duration // last used, after t0
	}
	for _, tc := range []struct {
		name       string
		sessions   [2]existing
		at         time.Duration // the new session's creation, after t0
		privileged bool
		size       int
		// evicts is the index of the session evicted, -1 none and no
		// session created.
		evicts int
	}{
		{"recent sessions stay", [2]existing{{size: 1}, {size: 1}}, time.Minute, false, 5, -1},
		{"a stale one goes, whatever its size", [2]existing{{size: 9, used: time.Second}, {size: 9}}, age + 2*time.Second, false, 1, 1},
		{"the least recently used stale one", [2]existing{{size: 9, used: 10 * time.Second}, {size: 9, used: 20 * time.Second}}, age + 30*time.Second, false, 1, 0},
		{"an old, smaller session makes room for a larger one", [2]existing{{size: 3, used: age + time.Second}, {size: 2, used: age + time.Second}}, age + 2*time.Second, false, 5, 1},
		{"old and as large stays", [2]existing{{size: 3, used: age + time.Second}, {size: 3, used: age + time.Second}}, age + 2*time.Second, false, 3, -1},
		{"old and larger stays", [2]existing{{size: 6, used: age + time.Second}, {size: 7, used: age + time.Second}}, age + 2*time.Second, false, 5, -1},
		{"old when last used counts, not old now", [2]existing{{size: 1, used: time.Minute}, {size: 1, used: time.Minute}}, age + time.Second, false, 5, -1},
		{"a follower's evicts a recent consumer's", [2]existing{{size: 4}, {size: 8}}, time.Minute, true, 1, 0},
		{"a follower's does not evict a recent follower's", [2]existing{{privileged: true, size: 1}, {privileged: true, size: 1}}, time.Minute, true, 9, -1},
		{"a consumer's does not evict an old follower's", [2]existing{{privileged: true, size: 1, used: age + time.Second}, {privileged: true, size: 1, used: age + time.Second}}, age + 2*time.Second, false, 9, -1},
		{"a follower's evicts an old follower's smaller one", [2]existing{{privileged: true, size: 4, used: age + time.Second}, {privileged: true, size: 2, used: age + time.Second}}, age + 2*time.Second, true, 3, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newFetchSessionCache(2, age, rand.New(rand.NewPCG(3, 4)))
			var ids [2]int32
			for i, e := range tc.sessions {
				fetch := make([]sessionPartition, e.size)
				results := make([]partitionResult, e.size)
				for p := range fetch {
					fetch[p] = asked(named(int32(p)), 0)
					results[p] = partitionResult{key: fetch[p].key}
				}
				fc := c.newContext(t0.Add(e.created), 0, 0, e.privileged, false, fetch, nil)
				ids[i], _, _ = c.finish(t0.Add(e.created), &fc, results)
				require.NotZero(t, ids[i])
				if e.used > e.created {
					// An incremental fetch with nothing new uses it.
					fc := c.newContext(t0.Add(e.used), ids[i], 1, e.privileged, false, nil, nil)
					require.Equal(t, contextIncremental, fc.kind)
					_, _, code := c.finish(t0.Add(e.used), &fc, results)
					require.Equal(t, codeNone, code)
				}
			}
			fetch := make([]sessionPartition, tc.size)
			results := make([]partitionResult, tc.size)
			for p := range fetch {
				fetch[p] = asked(named(int32(p)), 0)
				results[p] = partitionResult{key: fetch[p].key}
			}
			fc := c.newContext(t0.Add(tc.at), 0, 0, tc.privileged, false, fetch, nil)
			id, _, _ := c.finish(t0.Add(tc.at), &fc, results)
			st := c.statsNow()
			if tc.evicts < 0 {
				require.Zero(t, id, "no session created")
				require.Equal(t, 2, st.Sessions)
				require.Zero(t, st.Evicted)
				return
			}
			require.NotZero(t, id)
			require.NotContains(t, c.sessions, ids[tc.evicts], "evicted")
			require.Contains(t, c.sessions, ids[1-tc.evicts])
			require.Contains(t, c.sessions, id)
			require.Equal(t, uint64(1), st.Evicted)
			require.Equal(t, tc.sessions[1-tc.evicts].size+tc.size, st.Partitions)
		})
	}
}
