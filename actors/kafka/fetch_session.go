package kafka

// Incremental fetch sessions (KIP-227), kept as Kafka's FetchSessionCache
// keeps them.
//
// A fetch of version 7 or later names a session id and an epoch:
//
//	id 0, epoch -1   a full fetch without a session (sessionless)
//	id 0, epoch 0    a full fetch that asks for a session: once answered,
//	                 its partitions become a new session, whose id the
//	                 answer carries (0 when the cache has no room)
//	id N, epoch 0    the same, closing session N first
//	id N, epoch -1   closes session N; answered as a sessionless fetch
//	id N, epoch E>0  an incremental fetch of session N: its partitions add
//	                 to the session or change what it asks of them, its
//	                 forgotten topics leave it, and every partition of the
//	                 session is fetched; the answer names only those with
//	                 something new (records, a high watermark or log start
//	                 offset other than the client was last told, an error)
//
// An incremental fetch of a session the cache does not hold is answered
// FETCH_SESSION_ID_NOT_FOUND, one whose epoch is not the session's next
// INVALID_FETCH_SESSION_EPOCH, one whose version names topics otherwise
// than the session does (by id from v13) FETCH_SESSION_TOPIC_ID_ERROR; the
// client then starts again with a full fetch. A session left with no
// partition is closed, its fetch answered as a sessionless one. Epochs go
// 1, 2, ... up to 2^31-1 and on to 1 again.
//
// The cache holds at most a number of sessions (Kafka's
// max.incremental.fetch.session.cache.slots, default 1000). A new session
// that finds it full evicts, as Kafka does, the least recently used
// session when that one went unused for the eviction age (Kafka's
// min.incremental.fetch.session.eviction.ms, two minutes); else the least
// valuable session that may be evicted, when the new one is worth at least
// as much: a follower's (privileged) is worth more than a consumer's, then
// more partitions more. A session created less than the eviction age
// before it was last used is not evicted this way, but by a follower's when
// it is a consumer's. Otherwise no session is created.
//
// Partitions with records move to the end of their session's order, so
// that the response's byte bound serves every partition in turn.

import (
	"math"
	"math/rand/v2"
	"time"
)

// Defaults of the fetch session cache.
const (
	// DefaultMaxFetchSessions is Kafka's
	// max.incremental.fetch.session.cache.slots.
	DefaultMaxFetchSessions = 1000
	// DefaultFetchSessionEvictionAge is Kafka's
	// min.incremental.fetch.session.eviction.ms.
	DefaultFetchSessionEvictionAge = 2 * time.Minute
)

// sessionKey names a partition of a fetch: by topic id in fetches of
// version 13 and later, by topic name before.
type sessionKey struct {
	topicID   [16]byte
	topic     string
	partition int32
}

// sessionPartition is a partition of a fetch as the client asks for it
// and, in a session, the offsets it was last told.
type sessionPartition struct {
	key                sessionKey
	fetchOffset        int64
	maxBytes           int32
	currentLeaderEpoch int32 // -1: none given
	// highWatermark and logStartOffset are those last answered, -1 before
	// the first answer and after an error, so that the next answer names
	// the partition.
	highWatermark  int64
	logStartOffset int64
}

// fetchSession is one session: its partitions in fetch order, and the
// epoch its next incremental fetch must carry.
type fetchSession struct {
	id           int32
	privileged   bool
	usesTopicIDs bool
	order        []*sessionPartition
	byKey        map[sessionKey]*sessionPartition
	createdAt    time.Time
	lastUsed     time.Time
	epoch        int32
	// indexedSize and the two evictable flags are as the cache last
	// touched the session: eviction judges a session by them, as Kafka's
	// does by its keys in its eviction maps.
	indexedSize           int
	evictableByAll        bool
	evictableByPrivileged bool
}

// add puts p at the end of the session's order, or updates what the
// client asks of the partition when it is already there.
func (s *fetchSession) add(p sessionPartition) {
	if cached, ok := s.byKey[p.key]; ok {
		cached.fetchOffset, cached.maxBytes, cached.currentLeaderEpoch = p.fetchOffset, p.maxBytes, p.currentLeaderEpoch
		return
	}
	cached := p
	cached.highWatermark, cached.logStartOffset = -1, -1
	s.order = append(s.order, &cached)
	s.byKey[p.key] = &cached
}

// forget takes the partitions of keys out of the session.
func (s *fetchSession) forget(keys []sessionKey) {
	removed := false
	for _, k := range keys {
		if _, ok := s.byKey[k]; ok {
			delete(s.byKey, k)
			removed = true
		}
	}
	if !removed {
		return
	}
	kept := s.order[:0]
	for _, p := range s.order {
		if _, ok := s.byKey[p.key]; ok {
			kept = append(kept, p)
		}
	}
	clear(s.order[len(kept):])
	s.order = kept
}

// nextSessionEpoch is the epoch after epoch: -1 (final) after a negative
// one, 1 after the largest.
func nextSessionEpoch(epoch int32) int32 {
	switch {
	case epoch < 0:
		return sessionEpochFinal
	case epoch == math.MaxInt32:
		return 1
	}
	return epoch + 1
}

// fetchContextKind is how a fetch stands to the sessions.
type fetchContextKind int

const (
	// sessionless: every partition asked, answered with session id 0.
	contextSessionless fetchContextKind = iota
	// contextFull: every partition asked; its answer creates a session.
	contextFull
	// contextIncremental: the partitions of a session.
	contextIncremental
	// contextError: answered with code alone.
	contextError
)

// fetchContext is what the cache decided for one fetch: the partitions to
// fetch, in order, and how its answer is made.
type fetchContext struct {
	kind         fetchContextKind
	code         int16
	session      *fetchSession
	epoch        int32 // the request's
	privileged   bool
	usesTopicIDs bool
	partitions   []sessionPartition
}

// partitionResult is the answer of one partition of a fetch context, in
// the context's order.
type partitionResult struct {
	key            sessionKey
	recordBytes    int
	highWatermark  int64
	logStartOffset int64
	code           int16
}

// FetchSessionStats are counts of a listener's fetch sessions.
type FetchSessionStats struct {
	// Sessions are the sessions held now, and Partitions their
	// partitions.
	Sessions   int
	Partitions int
	// Created counts the sessions created, Incremental the incremental
	// fetches answered, Evicted the sessions evicted to make room.
	Created     uint64
	Incremental uint64
	Evicted     uint64
}

// fetchSessionCache is a node's fetch sessions. Not safe for concurrent
// use: the Listener's sessionsMu guards it.
type fetchSessionCache struct {
	maxSessions int
	evictionAge time.Duration
	sessions    map[int32]*fetchSession
	partitions  int
	stats       FetchSessionStats
	// newID draws a candidate session id, from 1 to 2^31-2.
	newID func() int32
}

// newFetchSessionCache is a cache of at most maxSessions sessions whose
// ids come from random.
func newFetchSessionCache(maxSessions int, evictionAge time.Duration, random *rand.Rand) *fetchSessionCache {
	return &fetchSessionCache{
		maxSessions: maxSessions,
		evictionAge: evictionAge,
		sessions:    make(map[int32]*fetchSession),
		newID:       func() int32 { return 1 + random.Int32N(math.MaxInt32-1) },
	}
}

// newContext decides how a fetch of version 7 or later stands to the
// sessions, at now: sessionID and epoch are the request's, fetch its
// partitions in order, forget its forgotten topics' partitions.
func (c *fetchSessionCache) newContext(now time.Time, sessionID, epoch int32, privileged, usesTopicIDs bool,
	fetch []sessionPartition, forget []sessionKey) fetchContext {
	fc := fetchContext{epoch: epoch, privileged: privileged, usesTopicIDs: usesTopicIDs, partitions: fetch}
	if epoch == sessionEpochInitial || epoch == sessionEpochFinal {
		if sessionID != 0 {
			if s, ok := c.sessions[sessionID]; ok {
				c.remove(s)
			}
		}
		fc.kind = contextFull
		if epoch == sessionEpochFinal {
			fc.kind = contextSessionless
		}
		return fc
	}
	s, ok := c.sessions[sessionID]
	switch {
	case !ok:
		return fetchContext{kind: contextError, code: codeFetchSessionIDNotFound}
	case s.epoch != epoch:
		return fetchContext{kind: contextError, code: codeInvalidFetchSessionEpoch}
	case s.usesTopicIDs != usesTopicIDs:
		return fetchContext{kind: contextError, code: codeFetchSessionTopicIDError}
	}
	for _, p := range fetch {
		s.add(p)
	}
	s.forget(forget)
	if len(s.order) == 0 {
		c.remove(s)
		fc.kind = contextSessionless
		return fc
	}
	c.touch(s, now)
	s.epoch = nextSessionEpoch(s.epoch)
	fc.kind, fc.session = contextIncremental, s
	fc.partitions = make([]sessionPartition, len(s.order))
	for i, p := range s.order {
		fc.partitions[i] = *p
	}
	return fc
}

// finish records, at now, the answers of a fetch context's partitions:
// it creates the session of a full fetch, and updates an incremental
// fetch's session with what its answer names. It returns the answer's
// session id, which results the answer names (all, but in an incremental
// fetch), and an error code for the whole answer.
func (c *fetchSessionCache) finish(now time.Time, fc *fetchContext, results []partitionResult) (sessionID int32, named []bool, code int16) {
	named = make([]bool, len(results))
	switch fc.kind {
	case contextError:
		return 0, named, fc.code
	case contextSessionless:
		for i := range named {
			named[i] = true
		}
		return 0, named, codeNone
	case contextFull:
		for i := range named {
			named[i] = true
		}
		return c.create(now, fc, results), named, codeNone
	}
	s := fc.session
	if s.epoch != nextSessionEpoch(fc.epoch) {
		// Another fetch of the session came between: a duplicate.
		return s.id, named, codeInvalidFetchSessionEpoch
	}
	var moved []*sessionPartition
	for i, r := range results {
		p, ok := s.byKey[r.key]
		if !ok {
			named[i] = true
			continue
		}
		named[i] = mustAnswer(p, r)
		if r.recordBytes > 0 {
			moved = append(moved, p)
		}
	}
	if len(moved) > 0 {
		s.moveToEnd(moved)
	}
	c.stats.Incremental++
	return s.id, named, codeNone
}

// mustAnswer reports whether an incremental fetch's answer names p, given
// its result r, and takes what it names into p, as Kafka's
// CachedPartition.maybeUpdateResponseData does.
func mustAnswer(p *sessionPartition, r partitionResult) bool {
	named := r.recordBytes > 0
	if p.highWatermark != r.highWatermark {
		named, p.highWatermark = true, r.highWatermark
	}
	if p.logStartOffset != r.logStartOffset {
		named, p.logStartOffset = true, r.logStartOffset
	}
	if r.code != codeNone {
		named, p.highWatermark = true, -1
	}
	return named
}

// moveToEnd puts moved, partitions of s, at the end of its order, in the
// order given.
func (s *fetchSession) moveToEnd(moved []*sessionPartition) {
	set := make(map[*sessionPartition]bool, len(moved))
	for _, p := range moved {
		set[p] = true
	}
	kept := s.order[:0]
	for _, p := range s.order {
		if !set[p] {
			kept = append(kept, p)
		}
	}
	s.order = append(kept, moved...)
}

// create makes the session of a full fetch answered with results, when
// there is room or room is made, and returns its id; 0 when there is none.
func (c *fetchSessionCache) create(now time.Time, fc *fetchContext, results []partitionResult) int32 {
	if len(c.sessions) >= c.maxSessions && !c.evict(now, fc.privileged, len(fc.partitions)) {
		return 0
	}
	s := &fetchSession{
		id: c.unusedID(), privileged: fc.privileged, usesTopicIDs: fc.usesTopicIDs,
		byKey:     make(map[sessionKey]*sessionPartition, len(fc.partitions)),
		createdAt: now, lastUsed: now, epoch: nextSessionEpoch(sessionEpochInitial), indexedSize: -1,
	}
	for i, p := range fc.partitions {
		s.add(p)
		cached := s.byKey[p.key]
		if i < len(results) && results[i].key == p.key {
			cached.highWatermark, cached.logStartOffset = results[i].highWatermark, results[i].logStartOffset
		}
	}
	c.sessions[s.id] = s
	c.touch(s, now)
	c.stats.Created++
	return s.id
}

// unusedID is a random session id no session holds.
func (c *fetchSessionCache) unusedID() int32 {
	for {
		id := c.newID()
		if _, taken := c.sessions[id]; id > 0 && !taken {
			return id
		}
	}
}

// evict makes room for a new session of size partitions, privileged or
// not, as Kafka's FetchSessionCache.tryEvict does; false when no session
// may go.
func (c *fetchSessionCache) evict(now time.Time, privileged bool, size int) bool {
	var stalest, cheapest *fetchSession
	for _, s := range c.sessions {
		if stalest == nil || s.lastUsed.Before(stalest.lastUsed) || (s.lastUsed.Equal(stalest.lastUsed) && s.id < stalest.id) {
			stalest = s
		}
		evictable := s.evictableByAll
		if privileged {
			evictable = s.evictableByPrivileged
		}
		if evictable && (cheapest == nil || lessValuable(s.privileged, s.indexedSize, s.id, cheapest.privileged, cheapest.indexedSize, cheapest.id)) {
			cheapest = s
		}
	}
	switch {
	case stalest == nil:
		return false
	case now.Sub(stalest.lastUsed) > c.evictionAge:
		c.remove(stalest)
	case cheapest == nil || lessValuable(privileged, size, 0, cheapest.privileged, cheapest.indexedSize, cheapest.id):
		return false
	default:
		c.remove(cheapest)
	}
	c.stats.Evicted++
	return true
}

// lessValuable orders sessions for eviction as Kafka's EvictableKey:
// a consumer's before a follower's, then fewer partitions, then by id.
func lessValuable(privilegedA bool, sizeA int, idA int32, privilegedB bool, sizeB int, idB int32) bool {
	if privilegedA != privilegedB {
		return !privilegedA
	}
	if sizeA != sizeB {
		return sizeA < sizeB
	}
	return idA < idB
}

// touch marks s used at now, and indexes it for eviction as it is now.
func (c *fetchSessionCache) touch(s *fetchSession, now time.Time) {
	s.lastUsed = now
	if s.indexedSize >= 0 {
		c.partitions -= s.indexedSize
	}
	s.indexedSize = len(s.order)
	c.partitions += s.indexedSize
	old := now.Sub(s.createdAt) > c.evictionAge
	s.evictableByAll = old
	s.evictableByPrivileged = old || !s.privileged
}

// remove takes s out of the cache.
func (c *fetchSessionCache) remove(s *fetchSession) {
	if _, ok := c.sessions[s.id]; !ok {
		return
	}
	delete(c.sessions, s.id)
	c.partitions -= s.indexedSize
}

// statsNow are the cache's counts.
func (c *fetchSessionCache) statsNow() FetchSessionStats {
	st := c.stats
	st.Sessions, st.Partitions = len(c.sessions), c.partitions
	return st
}
