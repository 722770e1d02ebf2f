package state

import (
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

// Gather decides when a request that the partition manager hands to
// several partitions is answered, once, for them all, as Kafka's fetch
// purgatory holds one fetch for all its partitions (DelayedFetch): a
// follower's ReplicaFetchRequest, a consumer's FetchPartitionsRequest.
// Each part is asked of its partition, which answers at once with what it
// has; once every part asked has answered, the request is answered if the
// parts' records reach minBytes, a part failed, it may not wait, or its
// wait has passed. Otherwise it is parked, and a partition that has more
// to read since it answered wakes its part (Woke): once the parts woken
// may make up minBytes, they are asked again, and their new answers replace
// their old. Time does not pass here: the manager sets the timer of the
// wait and calls Expired when it fires, and answers the request whatever
// this says once a partition has kept it waiting too long.
//
// Parts are numbered from 0 in the request's order. Not safe for
// concurrent use: owned by the partition manager.
type Gather struct {
	minBytes int
	wait     bool
	parts    []gatherPart
	waiting  int // parts asked and not yet answered
	bytes    int // of the parts' answers' records together
	failed   int // parts whose answer is an error
	parked   bool
	expired  bool
	// woken are the parts, in the order they woke, that have more to read
	// than they answered with, and wokenBytes how much more they said;
	// forced is set when one of them changed (its partition stopped
	// leading, went offline): it is asked again whatever minBytes says.
	woken      []int
	wokenBytes int
	forced     bool
}

type gatherPart struct {
	asking bool
	woken  bool
	failed bool
	bytes  int
}

// GatherStep is what the manager does next for a Gather: answer the
// request; park it, setting the timer of its wait; or ask the parts of
// Ask (again). The zero GatherStep is to wait for what comes next.
type GatherStep struct {
	Answer bool
	Park   bool
	Ask    []int
}

// NewGather returns the Gather of a request of n parts that is answered
// once its parts' records reach minBytes (at once when minBytes is 0 or
// less) or a part fails; wait says whether it may wait for them (its
// max_wait_ms is above 0).
func NewGather(n, minBytes int, wait bool) *Gather {
	return &Gather{minBytes: minBytes, wait: wait, parts: make([]gatherPart, n)}
}

// Ask notes that part i is asked of its partition.
func (g *Gather) Ask(i int) {
	if !g.parts[i].asking {
		g.parts[i].asking = true
		g.waiting++
	}
}

// Asking reports whether part i was asked and has not answered.
func (g *Gather) Asking(i int) bool { return g.parts[i].asking }

// Refuse notes that part i failed without being asked (its partition is
// not on the node).
func (g *Gather) Refuse(i int) {
	p := &g.parts[i]
	if p.asking {
		p.asking = false
		g.waiting--
	}
	g.bytes -= p.bytes
	p.bytes = 0
	if !p.failed {
		p.failed = true
		g.failed++
	}
}

// Start is the step once every part is asked or refused.
func (g *Gather) Start() GatherStep { return g.progress() }

// Answered takes part i's answer, with records of bytes bytes, an error
// when failed, in place of its answer before, if any. It does nothing for
// a part not being asked (an answer to an ask given up).
func (g *Gather) Answered(i, bytes int, failed bool) GatherStep {
	p := &g.parts[i]
	if !p.asking {
		return GatherStep{}
	}
	p.asking = false
	g.waiting--
	g.bytes += bytes - p.bytes
	p.bytes = bytes
	switch {
	case failed && !p.failed:
		g.failed++
	case !failed && p.failed:
		g.failed--
	}
	p.failed = failed
	return g.progress()
}

// Woke takes the word of part i's partition that readable more bytes can
// be read since it answered, or, with changed, that its state changed so
// that its answer would (it stopped leading or went offline). A part being
// asked ignores it: its partition told before it read the answer on its
// way, which holds those bytes.
func (g *Gather) Woke(i, readable int, changed bool) GatherStep {
	p := &g.parts[i]
	if p.asking {
		return GatherStep{}
	}
	if !p.woken {
		p.woken = true
		g.woken = append(g.woken, i)
	}
	g.wokenBytes += readable
	g.forced = g.forced || changed
	return g.progress()
}

// Expired notes that the request's wait has passed: it is answered with
// what its parts have once those asked have answered.
func (g *Gather) Expired() GatherStep {
	g.expired = true
	return g.progress()
}

// Parked reports whether the request was parked: every part answered, and
// together not enough.
func (g *Gather) Parked() bool { return g.parked }

// Bytes is the size of the records of the parts' answers together.
func (g *Gather) Bytes() int { return g.bytes }

func (g *Gather) progress() GatherStep {
	if g.waiting > 0 {
		return GatherStep{}
	}
	if g.failed > 0 || g.bytes >= g.minBytes || !g.wait || g.expired {
		return GatherStep{Answer: true}
	}
	if len(g.woken) > 0 && (g.forced || g.bytes+g.wokenBytes >= g.minBytes) {
		ask := g.woken
		g.woken, g.wokenBytes, g.forced = nil, 0, false
		for _, i := range ask {
			g.parts[i].woken = false
			g.Ask(i)
		}
		return GatherStep{Ask: ask}
	}
	if !g.parked {
		g.parked = true
		return GatherStep{Park: true}
	}
	return GatherStep{}
}

// FitResponse returns how many bytes of its records each part of a
// multi-partition fetch's answer keeps within maxBytes, given the parts'
// sizes in the request's order, as Kafka's fetch.max.bytes bounds a fetch:
// the first part with records keeps them all, whatever their size, so that
// a batch larger than maxBytes is still read; each later part keeps what
// room is left, none once there is none. maxBytes 0 or less bounds
// nothing.
func FitResponse(sizes []int, maxBytes int) []int {
	keep := make([]int, len(sizes))
	room, first := maxBytes, true
	for i, size := range sizes {
		switch {
		case maxBytes <= 0:
			keep[i] = size
		case size == 0:
		case first:
			keep[i], first = size, false
			room -= size
		default:
			keep[i] = max(min(size, room), 0)
			room -= keep[i]
		}
	}
	return keep
}

// WholeBatchesWithin cuts records, whole batches read from the log, after
// the last batch that ends within n bytes.
func WholeBatchesWithin(records []byte, n int) []byte {
	if n >= len(records) {
		return records
	}
	var it wire.BatchIterator
	it.SkipCRC = true // read back from the log, which checked it
	it.Reset(records)
	end := 0
	for it.Next() {
		next := it.Pos() + len(it.Batch())
		if next > n {
			break
		}
		end = next
	}
	return records[:end]
}

// ValidateFetchPartitions checks a FetchPartitionsRequest as a whole: its
// max_bytes may not be negative (0 means no bound but the parts'), and no
// partition may be named twice. Each part's own sizes are its partition's
// to check.
func ValidateFetchPartitions(req *messages.FetchPartitionsRequest) Refusal {
	if req.GetMaxBytes() < 0 {
		return refuse(messages.ErrorCode_INVALID_FETCH_SIZE, "max_bytes %d", req.GetMaxBytes())
	}
	type key struct {
		topic     string
		partition int32
	}
	seen := make(map[key]bool, len(req.GetPartitions()))
	for _, p := range req.GetPartitions() {
		k := key{p.GetTopic(), p.GetPartition()}
		if seen[k] {
			return refuse(messages.ErrorCode_INVALID_REQUEST, "partition %s-%d named twice", k.topic, k.partition)
		}
		seen[k] = true
	}
	return Refusal{}
}
