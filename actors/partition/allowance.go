package partition

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/depot-dev/depot/actors/disks"
	"github.com/depot-dev/depot/messages"
)

// dirAllowance is what a partition knows of the room its log dir allows
// it (disks.DirAllowance). A partition with a log-dir actor takes no
// append before the dir's first allowance: its produce requests wait in
// stash meanwhile, in order, so that a dir with a declared capacity has
// counted every byte its partitions may append. Each tick's report asks
// again (Awaiting) while none has come, and a request that waits past its
// timeout is answered REQUEST_TIMED_OUT, which its producer retries, so
// that an answer lost on the way holds no produce for ever. Owned by the
// partition actor.
type dirAllowance struct {
	// token names this incarnation of the partition in this dir; a move
	// to another dir takes a new one.
	token    *disks.AllowanceToken
	awaiting bool
	// last is the allowance taken (Seq 0 before the first).
	last disks.DirAllowance
	// grantedAt is the log's size when last was taken: once half the room
	// it gave is used, the partition asks for more in a report, once.
	grantedAt int64
	asked     bool
	// wanted is the largest append refused for want of room since the
	// last append: the dir keeps room for it until the retry comes.
	wanted int64
	stash  []stashedProduce
}

// stashedProduce is a produce request waiting for the first allowance,
// until expires: its timeout, or defaultGatherTimeout when it names none.
type stashedProduce struct {
	sender  *actor.PID
	request *messages.ProduceRequest
	expires time.Time
}

// newAllowance starts the partition's allowance in its current log dir:
// none yet, and produce requests wait, when it has a log-dir actor.
func (a *partitionActor) newAllowance() {
	stash := a.allowance.stash
	a.allowance = dirAllowance{token: &disks.AllowanceToken{}, awaiting: a.cfg.LogDirActor != nil, stash: stash}
}

// stashProduce keeps m for when the first allowance comes, and reports
// whether it did; a partition that is offline answers at once.
func (a *partitionActor) stashProduce(ctx actor.Context, m *messages.ProduceRequest) bool {
	if !a.allowance.awaiting || a.log == nil {
		return false
	}
	timeout := time.Duration(m.TimeoutMs) * time.Millisecond
	if timeout <= 0 {
		timeout = defaultGatherTimeout
	}
	a.allowance.stash = append(a.allowance.stash, stashedProduce{sender: ctx.Sender(), request: m, expires: a.now().Add(timeout)})
	return true
}

// expireStash answers the produce requests that have waited for the first
// allowance past their timeout with REQUEST_TIMED_OUT, retriable, and keeps
// the others waiting in order. What a producer had in flight behind one
// answered so is refused as out of order when the allowance comes, so that
// its retry is appended first (see state.Partition.Refused).
func (a *partitionActor) expireStash(ctx actor.Context) {
	al := &a.allowance
	if len(al.stash) == 0 {
		return
	}
	now := a.now()
	kept := al.stash[:0]
	for _, s := range al.stash {
		if now.Before(s.expires) {
			kept = append(kept, s)
			continue
		}
		if !a.core.ValidateProduce(s.request.Acks, s.request.Records).Refused() {
			a.refusedRecords(s.request.Records)
		}
		if s.sender != nil && s.request.Acks != 0 {
			ctx.Send(s.sender, &messages.ProduceResponse{
				Topic: s.request.Topic, Partition: s.request.Partition, CorrelationId: s.request.CorrelationId,
				BaseOffset: -1, LogAppendTimeMs: -1, Error: messages.ErrorCode_REQUEST_TIMED_OUT,
				ErrorMessage: a.refused(fmt.Sprintf("log dir %s has not allowed appends yet", a.cfg.LogDir)),
			})
		}
		a.cfg.Transport.Release(s.request)
	}
	clear(al.stash[len(kept):])
	al.stash = kept
}

// onDirAllowance takes an allowance meant for this incarnation and newer
// than the last, acknowledges it in a report, and serves the produce
// requests that waited for it.
func (a *partitionActor) onDirAllowance(ctx actor.Context, m *disks.DirAllowance) {
	al := &a.allowance
	if m.Token != al.token || m.Seq <= al.last.Seq {
		return
	}
	al.last, al.awaiting, al.asked = *m, false, false
	if a.log != nil {
		al.grantedAt = a.log.Size()
	}
	a.report(ctx, false)
	stash := al.stash
	al.stash = nil
	for _, s := range stash {
		a.onProduce(ctx, s.sender, s.request)
		a.cfg.Transport.Release(s.request)
	}
}

// answerStash answers the produce requests waiting for an allowance with
// code and message, for a partition that cannot serve them.
func (a *partitionActor) answerStash(ctx actor.Context, code messages.ErrorCode, message string) {
	stash := a.allowance.stash
	a.allowance.stash = nil
	for _, s := range stash {
		if s.sender != nil && s.request.Acks != 0 {
			ctx.Send(s.sender, &messages.ProduceResponse{
				Topic: s.request.Topic, Partition: s.request.Partition, CorrelationId: s.request.CorrelationId,
				BaseOffset: -1, LogAppendTimeMs: -1, Error: code, ErrorMessage: message,
			})
		}
		a.cfg.Transport.Release(s.request)
	}
}

// allowanceRefusal is the message refusing an append of size bytes that
// would take the log past its allowance, or "" when it fits. A refusal
// larger than those before since the last append asks the dir for that
// much more in a report.
func (a *partitionActor) allowanceRefusal(ctx actor.Context, size int) string {
	al := &a.allowance
	if !al.last.Limited || a.log.Size()+int64(size) <= al.last.Ceiling {
		return ""
	}
	if int64(size) > al.wanted {
		al.wanted = int64(size)
		al.asked = true
		a.report(ctx, false)
	}
	return fmt.Sprintf("log dir %s has no room for %d more bytes of %s: %d bytes free of its declared capacity %d, which keeps a reserve of %d",
		a.cfg.LogDir, size, a.tp, max(al.last.Free, 0), al.last.Capacity, al.last.Reserve)
}

// appendedUnderAllowance, after an append, forgets what was wanted, and
// asks the dir for more room once half of what the last allowance gave is
// used.
func (a *partitionActor) appendedUnderAllowance(ctx actor.Context) {
	al := &a.allowance
	al.wanted = 0
	if al.last.Limited && !al.asked && al.last.Ceiling-a.log.Size() < (al.last.Ceiling-al.grantedAt)/2 {
		a.askForRoom(ctx)
	}
}

// askForRoom reports the partition's size (and what it wants) to its dir
// now, once per allowance.
func (a *partitionActor) askForRoom(ctx actor.Context) {
	if !a.allowance.asked {
		a.allowance.asked = true
		a.report(ctx, false)
	}
}
