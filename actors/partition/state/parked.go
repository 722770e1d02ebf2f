package state

import (
	"slices"
	"time"
)

// ParkedProduces are the answers to acks=all produce requests whose batches
// are appended and not yet acknowledged: each waits until its batches lie
// below the partition's AcknowledgedOffset. A is what the partition actor
// needs to send one answer (its sender and response). Not safe for
// concurrent use: owned by the partition actor.
type ParkedProduces[A any] struct {
	parked []parkedProduce[A]
}

type parkedProduce[A any] struct {
	end     int64 // the log end offset after the request's batches
	expires time.Time
	answer  A
}

// Park adds the answer to a request whose batches end before end, the log
// end offset once they were appended, and which times out at expires
// (its timeout_ms).
func (q *ParkedProduces[A]) Park(end int64, expires time.Time, answer A) {
	q.parked = append(q.parked, parkedProduce[A]{end: end, expires: expires, answer: answer})
}

// Expired removes and returns, in the order they were parked, the answers
// whose timeout has passed at now: Kafka answers them REQUEST_TIMED_OUT.
func (q *ParkedProduces[A]) Expired(now time.Time) []A {
	var out []A
	kept := q.parked[:0]
	for _, p := range q.parked {
		if now.Before(p.expires) {
			kept = append(kept, p)
			continue
		}
		out = append(out, p.answer)
	}
	clear(q.parked[len(kept):])
	q.parked = kept
	return out
}

// NextExpiry is the earliest timeout of the answers parked; ok is false
// when none is.
func (q *ParkedProduces[A]) NextExpiry() (at time.Time, ok bool) {
	for _, p := range q.parked {
		if !ok || p.expires.Before(at) {
			at, ok = p.expires, true
		}
	}
	return at, ok
}

// Len is the number of answers parked.
func (q *ParkedProduces[A]) Len() int { return len(q.parked) }

// Ready removes and returns, in the order they were parked, the answers
// whose batches lie below acknowledged (Partition.AcknowledgedOffset).
func (q *ParkedProduces[A]) Ready(acknowledged int64) []A {
	var ready []A
	kept := q.parked[:0]
	for _, p := range q.parked {
		if p.end > acknowledged {
			kept = append(kept, p)
			continue
		}
		ready = append(ready, p.answer)
	}
	clear(q.parked[len(kept):])
	q.parked = kept
	return ready
}

// TakeAll removes and returns every answer, in the order they were parked:
// for a partition whose log fails, goes or closes.
func (q *ParkedProduces[A]) TakeAll() []A {
	all := make([]A, len(q.parked))
	for i, p := range q.parked {
		all[i] = p.answer
	}
	q.parked = nil
	return all
}

// ParkedFetches are fetches waiting, as in Kafka's fetch purgatory, until
// min_bytes are readable past their offset or their max_wait_ms passes.
// Time does not pass here: the partition actor sets a timer per fetch and
// calls Expire with the fetch's id when it fires. F is what the actor needs
// to answer one. Not safe for concurrent use: owned by the partition actor.
type ParkedFetches[F any] struct {
	nextID uint64
	parked []parkedFetch[F]
}

type parkedFetch[F any] struct {
	id        uint64
	available int // bytes readable past the fetch's offset, as far as known
	minBytes  int
	fetch     F
}

// FetchMayWait reports whether a fetch that found available bytes to read
// is parked rather than answered: it asks to wait (max_wait_ms above 0) for
// more bytes than that (min_bytes).
func FetchMayWait(maxWaitMs, minBytes int32, available int) bool {
	return maxWaitMs > 0 && available < int(minBytes)
}

// Park adds a fetch that found available of the minBytes it waits for, and
// returns the id that names it to Expire.
func (q *ParkedFetches[F]) Park(available, minBytes int, fetch F) uint64 {
	q.nextID++
	q.parked = append(q.parked, parkedFetch[F]{id: q.nextID, available: available, minBytes: minBytes, fetch: fetch})
	return q.nextID
}

// Len is the number of fetches parked.
func (q *ParkedFetches[F]) Len() int { return len(q.parked) }

// Readable takes bytes that became readable (Partition.Appended's answer),
// and removes and returns, in the order they were parked, the fetches that
// now have their min_bytes.
func (q *ParkedFetches[F]) Readable(bytes int) []F {
	if bytes <= 0 || len(q.parked) == 0 {
		return nil
	}
	var ready []F
	kept := q.parked[:0]
	for _, p := range q.parked {
		p.available += bytes
		if p.available < p.minBytes {
			kept = append(kept, p)
			continue
		}
		ready = append(ready, p.fetch)
	}
	clear(q.parked[len(kept):])
	q.parked = kept
	return ready
}

// Expire removes and returns the fetch id names, whose max_wait_ms has
// passed; ok is false when it was answered already.
func (q *ParkedFetches[F]) Expire(id uint64) (fetch F, ok bool) {
	for i, p := range q.parked {
		if p.id == id {
			q.parked = slices.Delete(q.parked, i, i+1)
			return p.fetch, true
		}
	}
	return fetch, false
}

// TakeAll removes and returns every fetch, in the order they were parked:
// for a partition whose log goes or closes.
func (q *ParkedFetches[F]) TakeAll() []F {
	all := make([]F, len(q.parked))
	for i, p := range q.parked {
		all[i] = p.fetch
	}
	q.parked = nil
	return all
}
