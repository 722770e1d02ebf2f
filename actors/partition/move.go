package partition

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/sirupsen/logrus"

	"github.com/depot-dev/depot/actors/disks"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

// An online move of a partition to another log directory of its node, as
// Kafka's intra-broker move with a future log, run inside the partition
// actor:
//
//  1. The future log <target>/<topic>-<partition>.future is opened at the
//     base offset of the source's first batch.
//  2. copyStep messages copy up to moveChunkBytes of stored batches at a
//     time from the source to the future, which appends them as a
//     follower does, byte for byte: offsets and leader epochs as in the
//     source, so the future's leader-epoch cache fills as the source's
//     did. Produce and fetch are served between steps, from the source.
//  3. In the step that finds the future caught up, with no message in
//     between: the future takes the source's leader epochs as they are
//     (those with no batch, that no copy brings, included) and is synced,
//     the source closed and renamed to <topic>-<partition>.delete (S2),
//     the future renamed to <topic>-<partition> (S3) and reopened as the
//     partition's log, and the old copy removed (S4). Each rename is made
//     durable (directory synced) before the next step; RecoverMoves
//     documents how start-up finishes or undoes a move a crash interrupted
//     at any point.
//
// A failure before S3 leaves the partition where it was and removes the
// future; once the future has been renamed into place the move has
// happened, and a failure to remove the old copy only leaves it for
// start-up recovery.

const (
	// moveChunkBytes is the most one copy step reads from the source.
	moveChunkBytes = 1 << 20
	// minThrottledChunkBytes is the least a throttled copy step reads: a
	// throttled step reads a tenth of a second's worth of bytes.
	minThrottledChunkBytes = 4 << 10
)

// Steps of a move named to PartitionConfig.moveHook.
const (
	// moveStepCopy is after each copy step.
	moveStepCopy = "copy"
	// moveStepS2 is before the source is renamed to .delete; the future is
	// complete and synced.
	moveStepS2 = "S2"
	// moveStepS3 is before the future is renamed into place; the source has
	// been renamed to .delete, durably.
	moveStepS3 = "S3"
	// moveStepS4 is before the old copy is removed; the partition serves
	// from its new directory.
	moveStepS4 = "S4"
)

// errMoveOffsets is a batch of the source that does not start where the
// future log ends: the copy would not be the same log.
var errMoveOffsets = errors.New("partition: future log offsets differ from the source's")

// copyStep makes a moving partition copy its next chunk. id names the move,
// so a step scheduled for a move that ended is ignored.
type copyStep struct{ id uint64 }

// partitionMove is the state of a running move.
type partitionMove struct {
	id          uint64
	sender      *actor.PID
	fromDir     string
	toDir       string
	targetActor *actor.PID
	throttle    int64 // bytes per second, 0 unlimited
	chunk       int
	future      *disk.Log
	started     time.Time
	copied      int64
	cancel      scheduler.CancelFunc
	buffer      []byte
}

// response is the answer to the move, at now.
func (mv *partitionMove) response(tp disk.TopicPartition, now time.Time) *messages.MovePartitionResponse {
	return &messages.MovePartitionResponse{
		Topic:       tp.Topic,
		Partition:   tp.Partition,
		FromDir:     mv.fromDir,
		ToDir:       mv.toDir,
		BytesCopied: mv.copied,
		DurationMs:  now.Sub(mv.started).Milliseconds(),
	}
}

func (a *partitionActor) onMove(ctx actor.Context, m *messages.MovePartitionRequest) {
	resp := &messages.MovePartitionResponse{Topic: a.cfg.Topic, Partition: a.cfg.Partition, FromDir: a.cfg.LogDir, ToDir: m.TargetDir}
	refuse := func(code messages.ErrorCode, format string, args ...any) {
		resp.Error, resp.ErrorMessage = code, fmt.Sprintf(format, args...)
		ctx.Respond(resp)
	}
	switch {
	case a.move != nil:
		refuse(messages.ErrorCode_INVALID_REQUEST, "a move to %s is already running", a.move.toDir)
		return
	case m.TargetDir == "":
		refuse(messages.ErrorCode_INVALID_REQUEST, "no target log dir")
		return
	case filepath.Clean(m.TargetDir) == filepath.Clean(a.cfg.LogDir):
		ctx.Respond(resp)
		return
	case m.ThrottleBytesPerS < 0:
		refuse(messages.ErrorCode_INVALID_REQUEST, "negative throttle %d", m.ThrottleBytesPerS)
		return
	case a.log == nil:
		resp.Error, resp.ErrorMessage = a.unavailable()
		ctx.Respond(resp)
		return
	}
	target := PartitionDir(m.TargetDir, a.cfg.Topic, a.cfg.Partition)
	if _, err := a.cfg.FS.Stat(target); err == nil {
		refuse(messages.ErrorCode_INVALID_REQUEST, "%s already exists", target)
		return
	}
	futureDir := filepath.Join(m.TargetDir, disks.FutureDirName(a.tp))
	// A future left by a failed move is incomplete: start afresh.
	if err := a.cfg.FS.RemoveAll(futureDir); err != nil {
		refuse(messages.ErrorCode_KAFKA_STORAGE_ERROR, "removing stale %s: %v", futureDir, err)
		return
	}
	mv := &partitionMove{
		sender:   ctx.Sender(),
		fromDir:  a.cfg.LogDir,
		toDir:    m.TargetDir,
		throttle: m.ThrottleBytesPerS,
		chunk:    moveChunkBytes,
		started:  a.now(),
	}
	if m.TargetLogDirActor != "" {
		mv.targetActor = actor.NewPID(ctx.Self().Address, m.TargetLogDirActor)
	}
	if mv.throttle > 0 {
		mv.chunk = int(min(int64(moveChunkBytes), max(mv.throttle/10, minThrottledChunkBytes)))
	}
	future, err := a.openFuture(futureDir)
	if err != nil {
		a.logger().WithError(err).Error("cannot open future log; move refused")
		refuse(messages.ErrorCode_KAFKA_STORAGE_ERROR, "opening future log: %v", err)
		return
	}
	mv.future = future
	a.moveSeq++
	mv.id = a.moveSeq
	a.move = mv
	a.logger().WithFields(logrus.Fields{"to": mv.toDir, "bytes": a.log.Size(), "throttle_bytes_per_s": mv.throttle}).Info("partition move started")
	ctx.Send(ctx.Self(), &copyStep{id: mv.id})
}

// openFuture opens an empty future log that starts at the base offset of
// the source's first batch, so that appending the source's batches in
// order gives each the offset it has in the source.
func (a *partitionActor) openFuture(dir string) (*disk.Log, error) {
	start := a.log.StartOffset()
	if start < a.log.EndOffset() {
		first, err := a.log.Read(start, 1, nil)
		if err != nil {
			return nil, err
		}
		h, err := wire.ParseHeader(first)
		if err != nil {
			return nil, err
		}
		start = h.BaseOffset
	}
	return disk.Open(a.cfg.FS, dir, a.logOptions(0, start))
}

func (a *partitionActor) onCopyStep(ctx actor.Context, m *copyStep) {
	mv := a.move
	if mv == nil || mv.id != m.id {
		return
	}
	mv.cancel = nil
	if a.log == nil {
		code, msg := a.unavailable()
		a.abortMove(ctx, code, msg)
		return
	}
	if mv.future.EndOffset() < a.log.StartOffset() {
		// Retention removed what the copy had not reached yet: the copy so
		// far is useless, start again from the new start.
		_ = mv.future.Delete()
		future, err := a.openFuture(mv.future.Dir())
		if err != nil {
			a.abortMove(ctx, messages.ErrorCode_KAFKA_STORAGE_ERROR, fmt.Sprintf("reopening future log: %v", err))
			return
		}
		mv.future = future
	}
	if err := a.copyChunk(mv); err != nil {
		a.abortMove(ctx, messages.ErrorCode_KAFKA_STORAGE_ERROR, fmt.Sprintf("copying to future log: %v", err))
		return
	}
	if err := a.moveHook(moveStepCopy); err != nil {
		a.abortMove(ctx, messages.ErrorCode_KAFKA_STORAGE_ERROR, err.Error())
		return
	}
	if mv.future.EndOffset() == a.log.EndOffset() {
		if a.flushing != nil {
			// The source closes in the swap, which waits for the flush.
			a.after.swapMove = mv.id
			return
		}
		a.swapMove(ctx)
		return
	}
	if mv.throttle > 0 {
		due := mv.started.Add(time.Duration(float64(mv.copied) / float64(mv.throttle) * float64(time.Second)))
		if wait := due.Sub(a.now()); wait > 0 {
			mv.cancel = a.timers.SendOnce(wait, ctx.Self(), &copyStep{id: mv.id})
			return
		}
	}
	ctx.Send(ctx.Self(), &copyStep{id: mv.id})
}

// catchUpAndSwap copies what was appended since the move caught up, while
// a flush was in flight, whatever the throttle (one fsync's worth of
// appends), and swaps; with no flush in flight.
func (a *partitionActor) catchUpAndSwap(ctx actor.Context) {
	mv := a.move
	if a.log == nil {
		code, msg := a.unavailable()
		a.abortMove(ctx, code, msg)
		return
	}
	for mv.future.EndOffset() < a.log.EndOffset() {
		if err := a.copyChunk(mv); err != nil {
			a.abortMove(ctx, messages.ErrorCode_KAFKA_STORAGE_ERROR, fmt.Sprintf("copying to future log: %v", err))
			return
		}
		if err := a.moveHook(moveStepCopy); err != nil {
			a.abortMove(ctx, messages.ErrorCode_KAFKA_STORAGE_ERROR, err.Error())
			return
		}
	}
	a.swapMove(ctx)
}

// copyChunk appends the source's next batches, up to the move's chunk size,
// to the future log.
func (a *partitionActor) copyChunk(mv *partitionMove) error {
	data, err := a.log.Read(mv.future.EndOffset(), mv.chunk, mv.buffer[:0])
	if err != nil {
		return err
	}
	mv.buffer = data[:0]
	// The iterator checks each batch's CRC, which reads from the source
	// do not, before the future takes it as validated.
	var it wire.BatchIterator
	it.Reset(data)
	for it.Next() {
		if _, err := mv.future.AppendAsFollower(it.Batch(), it.Header()); err != nil {
			if errors.Is(err, disk.ErrOffsetMismatch) {
				return fmt.Errorf("%w: %w", errMoveOffsets, err)
			}
			return err
		}
		mv.copied += int64(len(it.Batch()))
	}
	if it.Err() != nil {
		return it.Err()
	}
	if len(it.Rest()) > 0 {
		return fmt.Errorf("%w: %d bytes of a partial batch read from the source", errMoveOffsets, len(it.Rest()))
	}
	return nil
}

// truncateFuture truncates the future log of a running move to offset
// when it holds more, as the partition truncates its log as a follower:
// the future must hold no batch the source no longer has, and copies on
// from offset. The leader epochs that start at or after offset go with
// the batches. Without a move it does nothing. An error fails the future
// log, and the caller ends the move.
func (a *partitionActor) truncateFuture(offset int64) error {
	mv := a.move
	if mv == nil || mv.future.EndOffset() <= offset {
		return nil
	}
	if err := mv.future.TruncateTo(offset); err != nil {
		return fmt.Errorf("truncating future log %s to %d: %w", mv.future.Dir(), offset, err)
	}
	return nil
}

func (a *partitionActor) moveHook(step string) error {
	if a.cfg.moveHook == nil {
		return nil
	}
	return a.cfg.moveHook(step)
}

// abortMove ends a move before its future was renamed into place: the
// future is removed and the partition stays where it is.
func (a *partitionActor) abortMove(ctx actor.Context, code messages.ErrorCode, msg string) {
	mv := a.move
	if mv == nil {
		return
	}
	a.move = nil
	if mv.cancel != nil {
		mv.cancel()
	}
	if err := mv.future.Delete(); err != nil {
		// Already closed by the swap, or only partly removed.
		if err := a.cfg.FS.RemoveAll(filepath.Join(mv.toDir, disks.FutureDirName(a.tp))); err != nil {
			a.logger().WithError(err).Warn("removing the future log of a failed move failed; start-up will remove it")
		}
	}
	a.logger().WithFields(logrus.Fields{"to": mv.toDir, "error": msg}).Error("partition move failed")
	resp := mv.response(a.tp, a.now())
	resp.Error, resp.ErrorMessage = code, msg
	ctx.Send(mv.sender, resp)
}

// swapMove puts the caught-up future log in the source's place, all in one
// message so that no append slips in between, with no flush in flight.
// Parked fetches stay parked: they are answered from the new log, which
// holds every batch the old one had, synced.
func (a *partitionActor) swapMove(ctx actor.Context) {
	mv := a.move
	fs := a.cfg.FS
	if err := mv.future.SetEpochs(a.log.Epochs()); err != nil {
		a.abortMove(ctx, messages.ErrorCode_KAFKA_STORAGE_ERROR, fmt.Sprintf("giving the future log the source's leader epochs: %v", err))
		return
	}
	if err := mv.future.Sync(); err != nil {
		a.abortMove(ctx, messages.ErrorCode_KAFKA_STORAGE_ERROR, fmt.Sprintf("syncing future log: %v", err))
		return
	}
	if err := a.moveHook(moveStepS2); err != nil {
		a.abortMove(ctx, messages.ErrorCode_KAFKA_STORAGE_ERROR, err.Error())
		return
	}
	// The source closes below: what its acks=all producers wait for is
	// made durable and answered first.
	a.flushParkedNow(ctx)
	source := a.log.Dir()
	oldCopy := filepath.Join(mv.fromDir, disks.DeleteDirName(a.tp))
	target := PartitionDir(mv.toDir, a.cfg.Topic, a.cfg.Partition)
	startOffset, endOffset := a.log.StartOffset(), a.log.EndOffset()
	recoveryPoint := a.log.RecoveryPoint()
	a.logErr = nil
	if err := a.log.Close(); err == nil {
		recoveryPoint = endOffset
	} else {
		a.logger().WithError(err).Error("closing the source log for the move failed")
	}
	a.log = nil

	// rollback undoes S2 and reopens the source.
	rollback := func(cause error, renamed bool) {
		if renamed {
			if err := fs.Rename(oldCopy, source); err != nil {
				a.logErr = fmt.Errorf("move to %s failed (%v) and its old copy cannot be renamed back: %w", mv.toDir, cause, err)
			} else if err := fs.SyncDir(mv.fromDir); err != nil {
				a.logger().WithError(err).Error("syncing the log dir after undoing a move failed")
			}
		}
		if a.logErr == nil {
			a.log, a.logErr = disk.Open(fs, source, a.logOptions(recoveryPoint, startOffset))
		}
		if a.logErr != nil {
			a.log = nil
			a.logger().WithError(a.logErr).Error("cannot reopen partition log after a failed move; partition offline")
		} else {
			a.core.Opened(a.log.StartOffset(), a.log.EndOffset(), a.log.RecoveryPoint())
		}
		a.abortMove(ctx, messages.ErrorCode_KAFKA_STORAGE_ERROR, cause.Error())
	}

	// S2: the old copy is marked for deletion. From here on, start-up
	// recovery promotes the future.
	if err := fs.Rename(source, oldCopy); err != nil {
		rollback(fmt.Errorf("renaming %s: %w", source, err), false)
		return
	}
	if err := fs.SyncDir(mv.fromDir); err != nil {
		rollback(fmt.Errorf("syncing %s: %w", mv.fromDir, err), true)
		return
	}
	if err := a.moveHook(moveStepS3); err != nil {
		rollback(err, true)
		return
	}
	// S3: the future takes the partition's name.
	futureDir := mv.future.Dir()
	if err := mv.future.Close(); err != nil {
		rollback(fmt.Errorf("closing future log: %w", err), true)
		return
	}
	if err := fs.Rename(futureDir, target); err != nil {
		rollback(fmt.Errorf("renaming %s: %w", futureDir, err), true)
		return
	}
	// Past the rename the move has happened: start-up recovery resolves
	// both S2 and S3 to the new copy, so a failed sync does not undo it.
	if err := fs.SyncDir(mv.toDir); err != nil {
		a.logger().WithError(err).Error("syncing the target log dir after the move failed")
	}
	a.move = nil
	if mv.cancel != nil {
		mv.cancel()
	}
	oldActor := a.cfg.LogDirActor
	a.cfg.LogDir = mv.toDir
	a.cfg.LogDirActor = mv.targetActor
	if a.cfg.Flusher != nil {
		// The new dir's flusher syncs its files.
		a.cfg.Flusher = disks.FlusherOf(mv.targetActor)
	}
	// The old dir's fullness and allowance were its own: the new dir says
	// if it is full, and what it allows, when it hears of the partition.
	a.dirFull = ""
	a.newAllowance()
	if a.home != nil {
		a.home.LogDir, a.home.LogDirActor, a.home.Flusher = mv.toDir, mv.targetActor, a.cfg.Flusher
		a.home.RecoveryPoint, a.home.LogStartOffset = endOffset, startOffset
	}
	resp := mv.response(a.tp, a.now())
	if oldActor != nil {
		ctx.Send(oldActor, &disks.PartitionReport{TP: a.tp, Deleted: true})
	}
	a.log, a.logErr = disk.Open(fs, target, a.logOptions(endOffset, startOffset))
	if a.logErr != nil {
		a.log = nil
		a.logger().WithError(a.logErr).Error("cannot open the moved partition log; partition offline")
		resp.Error, resp.ErrorMessage = messages.ErrorCode_KAFKA_STORAGE_ERROR, fmt.Sprintf("moved, but reopening failed: %v", a.logErr)
		ctx.Send(mv.sender, resp)
		return
	}
	a.core.Opened(a.log.StartOffset(), a.log.EndOffset(), a.log.RecoveryPoint())
	a.report(ctx, false)

	// S4: the old copy goes.
	if err := a.moveHook(moveStepS4); err != nil {
		a.logger().WithError(err).Warn("old copy of the moved partition left; start-up will remove it")
	} else if err := fs.RemoveAll(oldCopy); err != nil {
		a.logger().WithError(err).Warn("removing the old copy of the moved partition failed; start-up will remove it")
	} else if err := fs.SyncDir(mv.fromDir); err != nil {
		a.logger().WithError(err).Warn("syncing the source log dir after the move failed")
	}
	a.logger().WithFields(logrus.Fields{
		"from": mv.fromDir, "to": mv.toDir, "bytes_copied": mv.copied,
		"end_offset": a.log.EndOffset(), "took": a.now().Sub(mv.started).Round(time.Millisecond),
	}).Info("partition moved")
	ctx.Send(mv.sender, resp)
}
