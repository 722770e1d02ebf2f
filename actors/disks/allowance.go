package disks

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/depot-dev/depot/actors/placement"
)

// noteAllowance takes what a partition's report says of its allowance: a
// new incarnation (its token) starts with none, an acknowledged ceiling
// is in force, and a stopped partition appends no more. A report that has
// not taken the allowance pending gets it again, as it was: it may have
// been lost, and until it is taken the partition gets no other (see
// PlanAllowances), so that one lost would leave it waiting for its first,
// or refusing appends, for ever; a copy of one that was not lost is
// ignored, as its Seq is no longer above the last taken. A partition that
// waits for its first allowance in a dir with no declared capacity is told
// at once that it has no limit.
func (a *logDirActor) noteAllowance(ctx actor.Context, p *partitionState, m *PartitionReport) {
	if m.Token == nil {
		return
	}
	if p.token != m.Token {
		// Whatever was sent to the incarnation before is ignored by this
		// one: it counts no more.
		p.token, p.ceiling, p.pending, p.pendingSeq, p.sent = m.Token, -1, -1, 0, nil
	}
	if p.pendingSeq != 0 && m.AllowanceSeq >= p.pendingSeq {
		p.ceiling, p.pending, p.pendingSeq, p.sent = p.pending, -1, 0, nil
	}
	if m.Closed {
		p.token, p.ceiling, p.pending, p.pendingSeq, p.sent = nil, -1, -1, 0, nil
		return
	}
	if p.sent != nil && m.PID != nil {
		ctx.Send(m.PID, p.sent)
	}
	if (a.limit < 0 || a.state == LogDirOffline) && m.Awaiting && m.PID != nil {
		ctx.Send(m.PID, &DirAllowance{Token: m.Token, Seq: a.nextAllowanceSeq()})
	}
}

// allocate shares the dir's limit out between its partitions
// (placement.PlanAllowances) and sends each the ceiling planned for it. An
// append that does not fit in what the dir has left at all makes it full,
// once it has no more than twice its reserve free (it leaves full above
// that): a batch larger than the room left in a dir that is far from full
// is refused alone.
func (a *logDirActor) allocate(ctx actor.Context) {
	if a.limit < 0 || a.state == LogDirOffline {
		return
	}
	// In partition order, so that ties go the same way in every plan: a
	// want met in one is not given to another in the next.
	parts := slices.SortedFunc(maps.Values(a.partitions), func(x, y *partitionState) int {
		return cmp.Or(cmp.Compare(x.report.TP.Topic, y.report.TP.Topic), cmp.Compare(x.report.TP.Partition, y.report.TP.Partition))
	})
	holders := make([]placement.AllowanceHolder, 0, len(parts))
	for _, p := range parts {
		holders = append(holders, placement.AllowanceHolder{
			Size: p.report.SizeBytes, Ceiling: p.ceiling, Pending: p.pending, Wanted: p.report.Wanted,
			WriteBytesPerS: p.rate, Fixed: p.token == nil || p.report.PID == nil,
		})
	}
	plan := placement.PlanAllowances(a.limit, holders)
	reserve := a.cfg.Capacity - a.limit
	free := plan.Room + reserve
	for i, ceiling := range plan.Ceilings {
		if ceiling < 0 {
			continue
		}
		p := parts[i]
		seq := a.nextAllowanceSeq()
		p.pending, p.pendingSeq = ceiling, seq
		p.sent = &DirAllowance{
			Token: p.token, Seq: seq, Limited: true, Ceiling: ceiling,
			Free: free, Capacity: a.cfg.Capacity, Reserve: reserve,
		}
		ctx.Send(p.report.PID, p.sent)
	}
	if plan.Short && !a.full && free <= 2*reserve {
		a.setFull(ctx, fmt.Sprintf("log dir %s is full: %d bytes free of its declared capacity %d, which keeps a reserve of %d", a.cfg.Path, max(free, 0), a.cfg.Capacity, reserve))
		a.reportUsage(ctx)
	}
}

// nextAllowanceSeq numbers the next DirAllowance sent.
func (a *logDirActor) nextAllowanceSeq() uint64 {
	return a.allowanceSeq.Add(1)
}
