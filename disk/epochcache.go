package disk

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/sirupsen/logrus"

	"github.com/depot-dev/depot/wire"
)

// A log's leader-epoch cache is Kafka's LeaderEpochFileCache: for each
// leader epoch of the partition, the offset at which it began, oldest
// first, as checkEpochs wants them. Replication reads it to answer
// OffsetForLeaderEpoch (KIP-101, KIP-279) and to find where a follower's
// log diverges from its leader's.
//
// The cache lives in Log.epochs and in the partition's
// leader-epoch-checkpoint, written whole and atomically (a .tmp renamed
// over it) on every change before the call that made it returns. The
// explicit changes (AssignEpoch, SetEpochs, truncations, a raised start
// offset, recovery's write-back) write it durably: the .tmp synced before
// the rename, the directory after it. An append that brings a new epoch
// writes it without any sync, as Kafka does since KAFKA-15046 (an fsync
// on the append path stalled produce), and the log remembers that it is
// not durable yet (Log.epochsUnsynced). The functions below are the
// cache's rules, pure; the Log methods after them persist what they
// change.
//
// The invariant that recovery relies on: a batch's epoch is in the
// checkpoint in the page cache before the batch is written, and durable
// before any flush covers the batch. So a process kill (kill -9, the page
// cache survives) never leaves a batch above the checkpoint's latest
// epoch; and whatever makes batches durable and raises the recovery point
// (Flush, a FlushJob, Settle, Close) syncs the checkpoint and the
// directory first, so no batch below the recovery point is above it
// either. After an OS crash, a batch past the recovery point may still
// carry an epoch the checkpoint lost (writeback wrote the batch, not the
// checkpoint): recovery, as Kafka's LogLoader does, assigns the epoch of a
// validated batch above the cache's latest, as long as it is not above
// Options.LeaderEpoch, the partition's epoch from the metadata, which
// covers every epoch a batch was appended in. A batch above both is taken
// for damage (the CRC does not cover the epoch) and cut, with what
// follows it; no flush made it durable, so nothing acknowledged as
// durable goes with it.

// latestEpoch returns the epoch of the last entry, NoLeaderEpoch when
// there is none.
func latestEpoch(entries []EpochEntry) int32 {
	if len(entries) == 0 {
		return NoLeaderEpoch
	}
	return entries[len(entries)-1].Epoch
}

// assignEpoch is Kafka's assign of e, which must not be below the latest
// epoch: the latest epoch assigned again at or after its start offset
// changes nothing (an epoch's start never moves forward); otherwise the
// entries whose epoch is e's or later, or that start at or after e, are
// dropped from the end and e is appended. It reports whether anything
// changed; entries is never modified in place.
func assignEpoch(entries []EpochEntry, e EpochEntry) ([]EpochEntry, bool) {
	if n := len(entries); n > 0 && entries[n-1].Epoch == e.Epoch && entries[n-1].StartOffset <= e.StartOffset {
		return entries, false
	}
	n := len(entries)
	for n > 0 && (entries[n-1].Epoch >= e.Epoch || entries[n-1].StartOffset >= e.StartOffset) {
		n--
	}
	return append(slices.Clone(entries[:n]), e), true
}

// dropEpochsFrom is Kafka's truncateFromEnd: it drops the entries that
// start at or after offset.
func dropEpochsFrom(entries []EpochEntry, offset int64) ([]EpochEntry, bool) {
	n := len(entries)
	for n > 0 && entries[n-1].StartOffset >= offset {
		n--
	}
	if n == len(entries) {
		return entries, false
	}
	return slices.Clone(entries[:n]), true
}

// startEpochsAt is Kafka's truncateFromStart for a log start offset
// raised to offset: the entries that start at or below it go but the
// last of them, which is kept starting at offset, since its epoch goes on
// there.
func startEpochsAt(entries []EpochEntry, offset int64) ([]EpochEntry, bool) {
	i := len(entries) - 1
	for i >= 0 && entries[i].StartOffset > offset {
		i--
	}
	if i < 0 || i == 0 && entries[0].StartOffset == offset {
		return entries, false
	}
	kept := slices.Clone(entries[i:])
	kept[0].StartOffset = offset
	return kept, true
}

// endOffsetForEpoch is Kafka's endOffsetFor, for a log ending at
// logEnd: the latest epoch gives (epoch, logEnd); an epoch below it, the
// largest epoch of the cache at or below it and the start offset of the
// first epoch above it; an epoch below every epoch of the cache, itself
// and the first epoch's start offset. An epoch past the latest, a
// negative epoch, and any epoch of an empty cache give (NoLeaderEpoch,
// -1): Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET.
func endOffsetForEpoch(entries []EpochEntry, epoch int32, logEnd int64) (int32, int64) {
	if epoch < 0 || len(entries) == 0 || epoch > latestEpoch(entries) {
		return NoLeaderEpoch, -1
	}
	if epoch == latestEpoch(entries) {
		return epoch, logEnd
	}
	// The first entry above epoch; there is one, the latest.
	i, _ := slices.BinarySearchFunc(entries, epoch+1, func(e EpochEntry, epoch int32) int { return cmp.Compare(e.Epoch, epoch) })
	if i == 0 {
		return epoch, entries[0].StartOffset
	}
	return entries[i-1].Epoch, entries[i].StartOffset
}

// Epochs returns a copy of the leader-epoch cache, oldest first.
func (l *Log) Epochs() []EpochEntry { return slices.Clone(l.epochs) }

// LatestEpoch returns the latest epoch of the leader-epoch cache,
// NoLeaderEpoch when the cache is empty.
func (l *Log) LatestEpoch() int32 { return latestEpoch(l.epochs) }

// EndOffsetForEpoch answers an OffsetForLeaderEpoch request for epoch as
// Kafka's leader does (LeaderEpochFileCache.endOffsetFor): for the latest
// epoch, that epoch and EndOffset; for an earlier one, the largest epoch
// of the cache at or below it and the start offset of the first epoch
// after it, where that epoch ended; for one below every epoch cached, the
// epoch asked for and the first epoch's start offset. A negative epoch,
// an epoch past the latest, and an empty cache give (NoLeaderEpoch, -1).
func (l *Log) EndOffsetForEpoch(epoch int32) (int32, int64) {
	return endOffsetForEpoch(l.epochs, epoch, l.EndOffset())
}

// SetLeaderEpoch raises the highest partition leader epoch a batch of the
// log may carry (see Options.LeaderEpoch) to epoch, without an entry in the
// cache: a follower that learns of a new leader epoch before it fetches
// any batch of it. It never lowers it.
func (l *Log) SetLeaderEpoch(epoch int32) { l.leaderEpoch = max(l.leaderEpoch, epoch) }

// AssignEpoch records that leader epoch epoch starts at startOffset, as
// Kafka's LeaderEpochFileCache.assign: a leader calls it with EndOffset
// when it takes the partition, before it appends. The latest epoch again,
// at or after its start offset, changes nothing; otherwise the entries of
// epoch or later, or that start at or after startOffset, are dropped and
// the new one appended. It raises the log's leader epoch (see
// SetLeaderEpoch) to epoch. The checkpoint is rewritten before it returns.
//
// An epoch below the latest, a negative epoch or start offset give an
// error wrapping ErrInvalidEpoch, a start offset past EndOffset one
// wrapping ErrOffsetOutOfRange; a full file system one wrapping
// ErrNoSpace. None of them changes anything. Any other error writing the
// checkpoint fails the log.
func (l *Log) AssignEpoch(epoch int32, startOffset int64) error {
	if err := l.checkWrite(); err != nil {
		return err
	}
	return l.assignEpoch(epoch, startOffset, true)
}

// assignEpoch is AssignEpoch, writing the checkpoint durably when durable
// is set and otherwise without a sync, for an append (see storeEpochs).
func (l *Log) assignEpoch(epoch int32, startOffset int64, durable bool) error {
	switch latest := l.LatestEpoch(); {
	case epoch < 0 || startOffset < 0:
		return fmt.Errorf("%w: epoch %d at offset %d", ErrInvalidEpoch, epoch, startOffset)
	case epoch < latest:
		return fmt.Errorf("%w: epoch %d is below the latest epoch %d of %s", ErrInvalidEpoch, epoch, latest, l.dir)
	case startOffset > l.EndOffset():
		return fmt.Errorf("%w: epoch %d at %d, past the end %d of %s", ErrOffsetOutOfRange, epoch, startOffset, l.EndOffset(), l.dir)
	}
	entries, changed := assignEpoch(l.epochs, EpochEntry{Epoch: epoch, StartOffset: startOffset})
	if changed || l.epochsStale {
		if err := l.storeEpochs(entries, durable); err != nil {
			return err
		}
	}
	if changed {
		l.logger().WithFields(logrus.Fields{"epoch": epoch, "start_offset": startOffset}).Info("leader epoch assigned")
	}
	l.SetLeaderEpoch(epoch)
	return nil
}

// SetEpochs replaces the leader-epoch cache with a copy of entries, which
// must be as ParseEpochCheckpoint returns them (ErrInvalidEpoch), start no
// later than EndOffset (ErrOffsetOutOfRange), and not end below
// LatestEpoch (ErrInvalidEpoch: the log may hold batches of that epoch,
// which recovery would then take for damage). It raises the log's leader
// epoch to the latest of entries. A move gives its future log the
// source's epochs this way, those that hold no batch included. The
// checkpoint is rewritten before it returns; errors are as AssignEpoch's.
func (l *Log) SetEpochs(entries []EpochEntry) error {
	if err := l.checkWrite(); err != nil {
		return err
	}
	if err := checkEpochs(entries); err != nil {
		return err
	}
	latest := latestEpoch(entries)
	switch {
	case len(entries) > 0 && entries[len(entries)-1].StartOffset > l.EndOffset():
		return fmt.Errorf("%w: epoch %d at %d, past the end %d of %s", ErrOffsetOutOfRange, latest, entries[len(entries)-1].StartOffset, l.EndOffset(), l.dir)
	case latest < l.LatestEpoch():
		return fmt.Errorf("%w: latest epoch %d is below the log's %d", ErrInvalidEpoch, latest, l.LatestEpoch())
	}
	if !slices.Equal(entries, l.epochs) || l.epochsStale {
		if err := l.saveEpochs(slices.Clone(entries)); err != nil {
			return err
		}
	}
	l.SetLeaderEpoch(latest)
	return nil
}

// saveEpochs writes entries to the checkpoint durably, then makes them
// the cache: storeEpochs with durable set.
func (l *Log) saveEpochs(entries []EpochEntry) error { return l.storeEpochs(entries, true) }

// storeEpochs writes entries to the checkpoint, then makes them the
// cache. With durable, the checkpoint is durable when it returns, a
// checkpoint an append left unsynced included; without, it is written
// without a sync and left for syncEpochs. On an error wrapping ErrNoSpace
// the checkpoint and the cache are as they were; any other error fails
// the log, with entries the cache, as the file may hold them.
func (l *Log) storeEpochs(entries []EpochEntry, durable bool) error {
	if err := writeEpochCheckpoint(l.fs, l.dir, entries, durable); err != nil {
		if errors.Is(err, ErrNoSpace) {
			return err
		}
		l.epochs = entries
		return l.fail(err)
	}
	l.epochs = entries
	l.epochsOnDisk = true
	l.epochsStale = false
	l.epochsUnsynced = !durable
	if !durable {
		l.epochsWrites++
	}
	return nil
}

// syncEpochs makes durable the checkpoint that an append wrote without a
// sync, if any: its bytes, then the directory (which makes dirDirty's
// changes durable too). Whatever makes the log's batches durable calls
// it first. An error fails the log, as that of any fsync does.
func (l *Log) syncEpochs() error {
	if !l.epochsUnsynced {
		return nil
	}
	if err := syncEpochCheckpoint(l.fs, l.dir); err != nil {
		return l.fail(err)
	}
	l.epochsUnsynced = false
	l.dirDirty = false
	return nil
}

// updateEpochs makes entries the cache after a change of the log that
// cannot be taken back (a truncation, a raised start offset) and writes
// them to the checkpoint. When the file system has no room for that, the
// checkpoint is left stale, which a log keeps only until its next append
// (see saveStaleEpochs) or Close, and the change stands: nil is returned.
// Any other error fails the log.
func (l *Log) updateEpochs(entries []EpochEntry) error {
	err := l.saveEpochs(entries)
	if errors.Is(err, ErrNoSpace) {
		l.logger().WithError(err).Warn("no room to rewrite the leader-epoch checkpoint; the next append rewrites it first")
		l.epochs = entries
		l.epochsStale = true
		return nil
	}
	return err
}

// saveStaleEpochs rewrites a stale checkpoint before an append: a batch
// appended while the checkpoint still holds epochs that a truncation
// dropped would be given them by the next Open. On a full file system the
// append is refused with an error wrapping ErrNoSpace.
func (l *Log) saveStaleEpochs() error {
	if !l.epochsStale {
		return nil
	}
	return l.saveEpochs(l.epochs)
}

// epochsMark is the leader-epoch state before an append, for
// undoEpochs.
type epochsMark struct {
	entries     []EpochEntry
	leaderEpoch int32
	onDisk      bool
}

func (l *Log) markEpochs() epochsMark {
	return epochsMark{entries: l.epochs, leaderEpoch: l.leaderEpoch, onDisk: l.epochsOnDisk}
}

// undoEpochs takes back the epoch an append assigned before a full file
// system made it undo its batch: the checkpoint is rewritten as it was at
// m, or removed if there was none. Should that find no room either, the
// epoch stays assigned, the state AssignEpoch(epoch, EndOffset()) alone
// leaves, whose entry holds no batch, in a checkpoint that the next flush
// or Close makes durable; the append's error stands either way. An error
// removing or syncing fails the log and is returned.
func (l *Log) undoEpochs(m epochsMark) error {
	if slices.Equal(l.epochs, m.entries) {
		return nil
	}
	if m.onDisk {
		if err := l.saveEpochs(m.entries); err != nil {
			if errors.Is(err, ErrNoSpace) {
				return nil
			}
			return err
		}
		l.leaderEpoch = m.leaderEpoch
		return nil
	}
	if err := l.fs.Remove(epochCheckpointPath(l.dir)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return l.fail(fmt.Errorf("disk: remove %s: %w", epochCheckpointPath(l.dir), err))
	}
	// The checkpoint the append wrote without a sync is gone: there is
	// nothing left to sync but its removal.
	l.epochsUnsynced = false
	if err := l.syncDir(); err != nil {
		return err
	}
	l.epochs, l.leaderEpoch, l.epochsOnDisk = m.entries, m.leaderEpoch, false
	return nil
}

// epochsFromStart applies a raised log start offset to the cache.
func (l *Log) epochsFromStart() error {
	if entries, changed := startEpochsAt(l.epochs, l.startOffset); changed {
		return l.updateEpochs(entries)
	}
	return nil
}

// epochsFromHeaders rebuilds the leader-epoch cache from the batch
// headers from StartOffset on: the first batch of each epoch >= 0 above
// the last one starts an entry. The epochs of a log never go down, so a
// last batch without one means no batch has one (every log written
// before its partition had leader epochs), and only its header is read.
// A damaged header stops the scan with a *CorruptionError and the entries
// found before it.
func (l *Log) epochsFromHeaders() ([]EpochEntry, error) {
	if l.startOffset >= l.EndOffset() {
		return nil, nil
	}
	_, _, last, err := l.locate(l.EndOffset() - 1)
	if err != nil || last.LeaderEpoch < 0 {
		return nil, err
	}
	var entries []EpochEntry
	err = l.ScanHeaders(l.startOffset, func(h wire.Header) error {
		if h.LeaderEpoch >= 0 && h.LeaderEpoch > latestEpoch(entries) {
			entries = append(entries, EpochEntry{Epoch: h.LeaderEpoch, StartOffset: h.BaseOffset})
		}
		return nil
	})
	return entries, err
}
