package state

import (
	"slices"
	"time"
)

// NoLeaderEpoch is the leader epoch of a partition that never had one, and
// the answer for an epoch a log does not know (disk.NoLeaderEpoch).
const NoLeaderEpoch int32 = -1

// Role is what a replica does for its partition.
type Role int

const (
	// Alone is a replica whose partition has no other: it is its own ISR,
	// as every partition was before replication.
	Alone Role = iota
	// Leader takes produces, serves consumers and followers, and moves the
	// high watermark as its followers catch up.
	Leader
	// Follower copies its leader's log and takes the leader's high
	// watermark.
	Follower
)

// Assignment is the metadata's word on a partition, for one replica.
type Assignment struct {
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []int32
	ISR            []int32
}

// follower is what a leader knows of one follower, as Kafka's Replica.
type follower struct {
	// logEndOffset is the offset the follower last fetched from, -1 until
	// it fetches.
	logEndOffset int64
	// lastCaughtUp is the last time the follower was known to have
	// everything the leader had: Kafka's lastCaughtUpTimeMs.
	lastCaughtUp time.Time
	// lastFetch and lastFetchLeaderEnd are the time of its last fetch and
	// the leader's log end offset then.
	lastFetch          time.Time
	lastFetchLeaderEnd int64
}

// replication is a partition's replica state: its role, the metadata's
// assignment, and, on the leader, its followers and the ISR change it has
// asked the controller for.
type replication struct {
	self       int32
	role       Role
	assignment Assignment
	followers  map[int32]*follower
	// pending is the ISR asked of the controller and not yet answered, nil
	// when none. While it is in flight the high watermark waits for the
	// replicas of both ISRs (Kafka's maximal ISR): whichever the
	// controller settles on, every member has what lies below it.
	pending []int32
	// leaderStart is the leader's log end offset when it became leader:
	// a follower joins the ISR only once it has reached it.
	leaderStart int64
	// replicated is set when the partition started with other replicas.
	replicated bool
}

// SetReplica tells the partition its own node id and the replicas the
// metadata gave it at start, before Opened: a replicated partition's high
// watermark starts at zero and rises as its leader learns what its
// followers have, where a replica alone has everything it holds.
func (p *Partition) SetReplica(self int32, replicas []int32) {
	p.repl.self = self
	p.repl.replicated = len(replicas) > 1
	p.repl.followers = map[int32]*follower{}
}

// Role is the replica's role.
func (p *Partition) Role() Role { return p.repl.role }

// LeaderEpoch is the leader epoch the replica knows, NoLeaderEpoch before
// any assignment.
func (p *Partition) LeaderEpoch() int32 {
	if p.repl.role == Alone && p.repl.assignment.Replicas == nil {
		return NoLeaderEpoch
	}
	return p.repl.assignment.LeaderEpoch
}

// Assignment is the assignment the replica acts on.
func (p *Partition) Assignment() Assignment { return p.repl.assignment }

// ISR is the in-sync replica set the replica acts on: the metadata's, or
// the replica alone when it is alone.
func (p *Partition) ISR() []int32 {
	if p.repl.role == Alone {
		return []int32{p.repl.self}
	}
	return p.repl.assignment.ISR
}

// AssignChange is what an assignment changes for the replica.
type AssignChange int

const (
	// AssignStale is an assignment older than the one the replica has: it
	// is ignored.
	AssignStale AssignChange = iota
	// AssignSame keeps the role and epoch; the ISR or replicas may have
	// changed.
	AssignSame
	// AssignNewEpoch is a new leader epoch: the replica leads or follows
	// anew (a follower truncates before it fetches again).
	AssignNewEpoch
)

// Assign takes the metadata's assignment at now. An assignment whose leader
// epoch is below the replica's, or whose partition epoch is below the
// replica's in the same leader epoch, is stale and changes nothing.
func (p *Partition) Assign(a Assignment, now time.Time) AssignChange {
	r := &p.repl
	old := r.assignment
	known := r.role != Alone || old.Replicas != nil
	if known && (a.LeaderEpoch < old.LeaderEpoch || a.LeaderEpoch == old.LeaderEpoch && a.PartitionEpoch < old.PartitionEpoch) {
		return AssignStale
	}
	a.Replicas, a.ISR = slices.Clone(a.Replicas), slices.Clone(a.ISR)
	r.assignment = a
	newEpoch := !known || a.LeaderEpoch != old.LeaderEpoch
	wasLeader := r.role == Leader || r.role == Alone
	switch {
	case a.Leader == r.self && len(a.Replicas) <= 1:
		r.role = Alone
	case a.Leader == r.self:
		r.role = Leader
	default:
		r.role = Follower
	}
	switch {
	case r.role == Follower:
		r.followers = map[int32]*follower{}
		r.pending = nil
	case newEpoch || !wasLeader:
		r.leaderStart = p.logEndOffset
		r.pending = nil
		r.followers = map[int32]*follower{}
		p.addFollowers(now)
	default:
		if r.pending != nil && slices.Equal(sortedIDs(r.pending), sortedIDs(a.ISR)) {
			r.pending = nil
		}
		// A member that left the ISR (it lagged, or its node was fenced)
		// must fetch again before it may join: a dead node never does.
		for _, id := range old.ISR {
			if f, ok := r.followers[id]; ok && !slices.Contains(a.ISR, id) {
				f.logEndOffset = -1
			}
		}
		p.addFollowers(now)
	}
	if r.role != Follower {
		p.updateHighWatermark()
	}
	if newEpoch {
		return AssignNewEpoch
	}
	return AssignSame
}

// addFollowers starts tracking the replicas of the assignment that are not
// tracked yet, and stops tracking those it no longer names. A follower
// new to a leader counts as caught up at now, as Kafka's leader resets its
// replicas' state on election: it has the lag time to fetch.
func (p *Partition) addFollowers(now time.Time) {
	r := &p.repl
	for _, id := range r.assignment.Replicas {
		if id == r.self {
			continue
		}
		if _, ok := r.followers[id]; !ok {
			r.followers[id] = &follower{logEndOffset: -1, lastCaughtUp: now, lastFetch: now, lastFetchLeaderEnd: p.logEndOffset}
		}
	}
	for id := range r.followers {
		if !slices.Contains(r.assignment.Replicas, id) {
			delete(r.followers, id)
		}
	}
}

func sortedIDs(ids []int32) []int32 {
	s := slices.Clone(ids)
	slices.Sort(s)
	return s
}

// FollowerFetch takes a fetch of follower id from offset at now, on the
// leader, and returns the bytes that became readable to consumers by the
// high watermark it moved. A fetch from a replica that is not a follower
// of this leader changes nothing.
func (p *Partition) FollowerFetch(id int32, offset int64, now time.Time) (readable int) {
	r := &p.repl
	f, ok := r.followers[id]
	if r.role != Leader || !ok || offset > p.logEndOffset {
		return 0
	}
	switch {
	case offset >= p.logEndOffset:
		f.lastCaughtUp = now
	case offset >= f.lastFetchLeaderEnd:
		f.lastCaughtUp = f.lastFetch
	}
	f.logEndOffset = offset
	f.lastFetch = now
	f.lastFetchLeaderEnd = p.logEndOffset
	return p.updateHighWatermark()
}

// ISRProposal is the ISR the leader should ask the controller for at now,
// with ok false when it should ask nothing: an ISR change is in flight,
// or the ISR is as it should be. Members whose last catch-up is older than
// lagMax leave (Kafka's replica.lag.time.max.ms), and replicas that have
// reached both the high watermark and the leader's start join. The
// proposal is marked pending until ISRAnswered.
func (p *Partition) ISRProposal(now time.Time, lagMax time.Duration) (isr []int32, ok bool) {
	r := &p.repl
	if r.role != Leader || r.pending != nil {
		return nil, false
	}
	cur := r.assignment.ISR
	next := []int32{}
	changed := false
	for _, id := range cur {
		f, ok := r.followers[id]
		if id != r.self && ok && now.Sub(f.lastCaughtUp) > lagMax {
			changed = true
			continue
		}
		next = append(next, id)
	}
	if !slices.Contains(next, r.self) {
		next = append(next, r.self)
		changed = true
	}
	for _, id := range r.assignment.Replicas {
		f, ok := r.followers[id]
		if !ok || slices.Contains(next, id) {
			continue
		}
		if f.logEndOffset >= p.highWatermark && f.logEndOffset >= r.leaderStart && now.Sub(f.lastCaughtUp) <= lagMax {
			next = append(next, id)
			changed = true
		}
	}
	if !changed {
		return nil, false
	}
	r.pending = next
	return slices.Clone(next), true
}

// ISRAnswered ends the ISR change in flight: its answer, or the metadata
// that carries it, comes through Assign; a refusal or a lost answer lets
// the leader ask again.
func (p *Partition) ISRAnswered() { p.repl.pending = nil }

// ISRPending reports whether an ISR change is in flight.
func (p *Partition) ISRPending() bool { return p.repl.pending != nil }

// FollowerOffsets returns the log end offset the leader knows of each
// follower, -1 for one that has not fetched.
func (p *Partition) FollowerOffsets() map[int32]int64 {
	out := make(map[int32]int64, len(p.repl.followers))
	for id, f := range p.repl.followers {
		out[id] = f.logEndOffset
	}
	return out
}

// LeaderHighWatermark takes the high watermark a follower's fetch brought
// from its leader: the follower's is the least of it and its own log end.
// It returns the bytes that became readable by it.
func (p *Partition) LeaderHighWatermark(hw int64) (readable int) {
	if p.repl.role != Follower {
		return 0
	}
	hw = min(hw, p.logEndOffset)
	if hw <= p.highWatermark {
		return 0
	}
	p.highWatermark = hw
	return p.takeReadable()
}

// ResetProducers forgets producer state, for a log truncated or emptied:
// Recovered rebuilds it from what is left.
func (p *Partition) ResetProducers() {
	p.producers = nil
	clear(p.awaited)
}

// Truncated takes a log truncated to end: the log end offset, and a high
// watermark that was above it, come down to it.
func (p *Partition) Truncated(end int64) {
	p.logEndOffset = end
	p.highWatermark = min(p.highWatermark, end)
	p.durableOffset = min(p.durableOffset, end)
	kept := p.unread[:0]
	for _, b := range p.unread {
		if b.end <= end {
			kept = append(kept, b)
		}
	}
	p.unread = kept
}

// EnoughReplicas reports whether the ISR has min.insync.replicas members,
// as an acks=all produce needs.
func (p *Partition) EnoughReplicas(minISR int32) bool {
	return int32(len(p.ISR())) >= minISR
}

// TruncationOffset is where a follower truncates its log before it fetches
// from a new leader, as Kafka's follower decides it (KIP-101, KIP-279).
// The follower asked the leader for the end of its own latest epoch; the
// leader answered leaderEpoch, its largest epoch at or below that one, and
// leaderEnd, that epoch's end offset in its log. endOffsetFor is the
// follower log's own answer to the same question for an epoch
// (disk.Log.EndOffsetForEpoch), logEnd its log end offset, and highWatermark
// its high watermark. done is false when the follower does not know the
// leader's epoch: it truncates to offset, the end of its own largest epoch
// below it, and asks again with its new latest epoch.
func TruncationOffset(leaderEpoch int32, leaderEnd int64, endOffsetFor func(epoch int32) (int32, int64), logEnd, highWatermark int64) (offset int64, done bool) {
	switch {
	case leaderEnd < 0:
		// The leader knows no epoch at or below ours: what was written
		// before any epoch is trusted up to the high watermark only.
		return min(highWatermark, logEnd), true
	case leaderEpoch < 0:
		return min(leaderEnd, logEnd), true
	}
	epoch, end := endOffsetFor(leaderEpoch)
	switch {
	case epoch < 0 || end < 0:
		return min(leaderEnd, logEnd), true
	case epoch != leaderEpoch:
		return min(end, logEnd), false
	}
	return min(leaderEnd, end, logEnd), true
}
