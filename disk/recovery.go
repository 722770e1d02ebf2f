package disk

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/depot-dev/depot/wire"
)

// scanChunk is how much of a segment recovery reads at a time.
const scanChunk = 1 << 20

// Open opens the log in dir, creating the directory if missing, and
// recovers it as Kafka's LogLoader does:
//
//   - stray .tmp and .deleted files, and indexes without a .log, are removed;
//   - segments that end at or below opts.RecoveryPoint (all but the last)
//     are trusted: their batches are not read; their indexes are loaded and
//     rebuilt from the .log only when missing, damaged, or pointing past the
//     segment;
//   - a segment that holds opts.RecoveryPoint is validated batch by batch
//     (header, magic, length, CRC, dense offsets) from the offset index entry
//     at or below the recovery point, or from its start when there is none
//     or the index is damaged; at the first torn or corrupt batch the
//     segment is cut there (logged at Warn with path and byte position) and
//     any later segments are deleted; its indexes are rebuilt from there on.
//     Damage found below the recovery point means the index or the
//     checkpoint cannot be trusted, and the segment is validated again from
//     its start;
//   - segments above the recovery point are validated from their start;
//   - the last segment, when the recovery point is above its base offset, is
//     first checked as Kafka checks it after a clean shutdown: the indexes
//     must load, their last entries must lie inside the file, and the batch
//     headers after the last offset index entry (no CRC) must end exactly at
//     the recovery point. Then nothing more is read. A log that ends past
//     the recovery point is validated from it as above; one that ends before
//     it, or whose headers are damaged below it, means a stale checkpoint,
//     and the last segment is validated from its start;
//   - segments entirely below opts.LogStartOffset are deleted, and a log
//     ending before it is emptied to start there;
//   - an empty directory gives one empty segment at opts.LogStartOffset.
//
// The leader-epoch cache is read from the partition's
// leader-epoch-checkpoint, and the batches validated must not carry an
// epoch above the latest of its epochs or opts.LeaderEpoch, whichever is
// higher: a batch above both is taken for damage. A batch validated above
// the latest epoch of the cache, and not above opts.LeaderEpoch, extends
// the cache with its epoch at its base offset, as Kafka's LogLoader does:
// an append writes the checkpoint without a sync and a flush syncs it
// before the batch (see epochcache.go), so after an OS crash a batch past
// the recovery point may carry an epoch the checkpoint lost, and the
// partition's epoch from the metadata, passed as opts.LeaderEpoch, covers
// it. When the checkpoint is missing or damaged (a log written before
// its partition had leader epochs, a file removed by hand), no epoch is
// taken for damage and the cache is rebuilt from the batch headers once
// recovery is done; a damaged one is logged at Warn (a missing one only
// when the rebuilt cache is not empty). The epochs that start past the end
// of the recovered log are dropped, and those that start at its end too
// when recovery cut a torn tail there, unless the end is the start offset
// (Kafka's truncateFromEnd); those below the start offset as DeleteBefore
// drops them, a log emptied at opts.LogStartOffset included. A changed
// cache, or one rebuilt with any epoch, is written back durably: a log
// none of whose batches carries an epoch keeps an empty cache and no
// file.
//
// Everything recovered is synced before Open returns, so RecoveryPoint is
// then EndOffset; a log that needed validating has its checkpoint synced
// before its batches, as the process that wrote them may have left it in
// the page cache only.
//
// A clean open writes nothing, so it succeeds on a full file system. A
// recovery that must rebuild indexes, or create a segment or the
// directory, may find no room: Open then fails with an error wrapping
// ErrNoSpace (never a *CorruptionError), having removed the index files it
// was rebuilding, which frees their room and makes the next Open rebuild
// them. The batches are left as they were, but for a torn tail that was
// cut, as any recovery cuts it; the caller opens again once there is room.
// So does one that must rewrite the leader-epoch checkpoint.
func Open(fs FS, dir string, opts Options) (*Log, error) {
	opts.setDefaults()
	started := time.Now()
	if err := opts.Config.Validate(); err != nil {
		return nil, err
	}
	if err := createDir(opts.Files.FS(fs), dir); err != nil {
		return nil, err
	}
	l := &Log{
		fs:          opts.Files.FS(fs),
		dir:         dir,
		config:      opts.Config,
		leaderEpoch: opts.LeaderEpoch,
		now:         opts.Now,
		logBase:     opts.Logger,
	}
	l.lastFlushTime = l.now().UnixMilli()
	checkpointed, rebuild, err := l.readEpochs()
	if err != nil {
		return nil, err
	}
	err = l.load(opts)
	if err == nil {
		// Only the active segment keeps its index entries in memory.
		for _, s := range l.segments[:len(l.segments)-1] {
			if err = s.seal(); err != nil {
				break
			}
		}
	}
	if err == nil {
		err = l.recoverEpochs(opts, checkpointed, rebuild)
	}
	if err != nil {
		for _, s := range l.segments {
			_ = s.close()
		}
		if errors.Is(err, ErrNoSpace) {
			err = l.abandonIndexes(err)
		}
		return nil, err
	}
	l.recovery.Took = time.Since(started)
	return l, nil
}

// abandonIndexes removes the index files of the segments whose indexes a
// failed Open was rebuilding or cutting, after cause, an error wrapping
// ErrNoSpace: what it wrote of them may be a part only, which a later Open
// would trust (a time index without the segment's largest timestamp would
// send the segment to retention early). Missing, they are rebuilt. It
// returns cause, or an error that does not wrap ErrNoSpace when a removal
// fails.
func (l *Log) abandonIndexes(cause error) error {
	for _, s := range l.segments {
		if !s.indexesDirty {
			continue
		}
		l.logger().WithField("segment", s.path).Warn("recovery: no room to rebuild the indexes; removing them")
		for _, ext := range []string{indexExt, timeIndexExt} {
			if err := l.fs.Remove(segmentPath(l.dir, s.baseOffset, ext)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("disk: %v; removing the indexes being rebuilt: %w", cause, err)
			}
		}
	}
	return cause
}

// Recovery is what Open did to a log's files beyond reading what a clean
// close left: the segments it validated batch by batch, the bytes it read
// to do so, the bytes it cut as a torn or corrupt tail, and the segments it
// deleted after a cut; and how long Open took in all.
type Recovery struct {
	SegmentsValidated int
	BytesValidated    int64
	BytesTruncated    int64
	SegmentsDeleted   int
	Took              time.Duration
}

// Recovered reports whether Open had more to do than a clean open.
func (r Recovery) Recovered() bool {
	return r.SegmentsValidated > 0 || r.BytesTruncated > 0 || r.SegmentsDeleted > 0
}

// Recovery is what Open did to the log's files.
func (l *Log) Recovery() Recovery { return l.recovery }

// createDir creates dir and any missing parents, and syncs the parent of
// each directory it created so that the directory survives a crash.
func createDir(fs FS, dir string) error {
	var created []string
	for d := path.Clean(dir); ; d = path.Dir(d) {
		if _, err := fs.Stat(d); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("disk: stat %s: %w", d, err)
		}
		created = append(created, d)
		if d == path.Dir(d) {
			break
		}
	}
	if len(created) == 0 {
		return nil
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return noSpace(fmt.Errorf("disk: create %s: %w", dir, err))
	}
	for i := len(created) - 1; i >= 0; i-- {
		if err := fs.SyncDir(path.Dir(created[i])); err != nil {
			return fmt.Errorf("disk: sync directory %s: %w", path.Dir(created[i]), err)
		}
	}
	return nil
}

// load lists dir, opens and recovers the segments.
func (l *Log) load(opts Options) error {
	bases, err := l.listSegments()
	if err != nil {
		return err
	}
	for i, base := range bases {
		seg, err := openSegment(l.fs, l.dir, base)
		if err != nil {
			return err
		}
		l.segments = append(l.segments, seg)
		last := i == len(bases)-1
		var nextBase int64 = -1
		if !last {
			nextBase = bases[i+1]
		}
		if !last && nextBase <= opts.RecoveryPoint && seg.size > 0 {
			seg.nextOffset = nextBase
			if err := l.loadIndexes(seg); err != nil {
				return err
			}
			continue
		}
		var intact bool
		switch {
		case seg.size == 0 || opts.RecoveryPoint <= seg.baseOffset:
			intact, err = l.recoverSegment(seg, false)
		case last:
			intact, err = l.openLast(seg, opts.RecoveryPoint)
		default:
			intact, err = l.recoverAbove(seg, opts.RecoveryPoint)
		}
		if err != nil {
			return err
		}
		if last {
			continue
		}
		if err := seg.sealTimeIndex(); err != nil {
			return err
		}
		if !intact || seg.nextOffset != nextBase {
			l.logger().WithFields(logrus.Fields{"segment": seg.path, "next_offset": seg.nextOffset, "dropped": len(bases) - i - 1}).
				Warn("recovery: deleting the segments after a cut segment")
			if err := l.removeBases(bases[i+1:]); err != nil {
				return err
			}
			break
		}
	}
	if len(l.segments) == 0 {
		seg, err := createSegment(l.fs, l.dir, opts.LogStartOffset)
		if err != nil {
			return err
		}
		l.segments = append(l.segments, seg)
		l.dirDirty = true
	}
	n := 0
	for n < len(l.segments)-1 && l.segments[n].nextOffset <= opts.LogStartOffset {
		n++
	}
	if err := l.removeSegments(l.segments[:n]); err != nil {
		return err
	}
	l.segments = append(l.segments[:0], l.segments[n:]...)
	l.startOffset = max(opts.LogStartOffset, l.segments[0].baseOffset)
	l.recoveryPoint = min(opts.RecoveryPoint, l.EndOffset())
	if opts.LogStartOffset > l.EndOffset() {
		l.logger().WithFields(logrus.Fields{"log_start_offset": opts.LogStartOffset, "end_offset": l.EndOffset()}).
			Warn("recovery: log ends before its start offset; emptying it")
		if err := l.truncateFully(opts.LogStartOffset); err != nil {
			return err
		}
	}
	for _, s := range l.segments {
		if _, err := s.log.Seek(s.size, io.SeekStart); err != nil {
			return fmt.Errorf("disk: seek %s: %w", s.path, err)
		}
		// What recovery cut from an index or rebuilt in it must be so on
		// disk before the log takes appends: after the next crash, a log
		// found durable to its end has its indexes trusted as they are
		// there, and a cut entry coming back would contradict the batches.
		if s.indexesDirty {
			if err := s.flushIndexes(); err != nil {
				return err
			}
			if err := s.syncIndexes(); err != nil {
				return err
			}
		}
	}
	if l.recovery.BytesValidated > 0 {
		// A killed process may have created segments without syncing
		// the directory, and written the epochs of its batches to the
		// checkpoint without a sync: the page cache kept them, and the
		// sync below makes them durable, the checkpoint before the
		// batches.
		l.dirDirty = true
		l.epochsUnsynced = l.epochsOnDisk
	}
	if err := l.Sync(); err != nil {
		return err
	}
	l.failed = nil
	return nil
}

// readEpochs reads the leader-epoch checkpoint into the cache, before
// recovery, and sets the leader epoch recovery checks batches against:
// the checkpoint's latest or the options', whichever is higher. A missing
// or damaged checkpoint (logged at Warn) gives an empty cache to be
// rebuilt from the batches (rebuild), and no epoch is taken for damage.
// It returns the entries read, and fails only on an I/O error.
func (l *Log) readEpochs() ([]EpochEntry, bool, error) {
	entries, found, err := readEpochCheckpoint(l.fs, l.dir)
	var ce *CorruptionError
	switch {
	case errors.As(err, &ce):
		l.logger().WithFields(logrus.Fields{"file": epochCheckpointPath(l.dir), "error": err.Error()}).
			Warn("recovery: leader-epoch checkpoint unreadable; rebuilding it from the batch headers")
	case err != nil:
		return nil, false, err
	}
	l.epochsOnDisk = found
	if !found || err != nil {
		l.leaderEpoch = math.MaxInt32
		return nil, true, nil
	}
	l.epochs = entries
	l.leaderEpoch = max(l.leaderEpoch, latestEpoch(entries))
	return entries, false, nil
}

// recoverEpochs brings the leader-epoch cache in line with the recovered
// log, as Open describes, rebuilding it from the batch headers when
// rebuild is set, and writes back a cache that changed from checkpointed,
// the entries read, or that was rebuilt with any entry.
func (l *Log) recoverEpochs(opts Options, checkpointed []EpochEntry, rebuild bool) error {
	file := epochCheckpointPath(l.dir)
	entries := l.epochs
	if rebuild {
		var err error
		entries, err = l.epochsFromHeaders()
		var ce *CorruptionError
		if errors.As(err, &ce) {
			l.logger().WithFields(logrus.Fields{"file": file, "error": err.Error()}).
				Warn("recovery: a damaged batch header stopped the rebuilding of the leader-epoch cache; later epochs are missing from it")
		} else if err != nil {
			return err
		}
		if len(entries) > 0 {
			l.logger().WithFields(logrus.Fields{"file": file, "epochs": len(entries)}).
				Warn("recovery: leader-epoch cache rebuilt from the batch headers")
		}
	}
	end := l.EndOffset()
	if (l.recovery.BytesTruncated > 0 || l.recovery.SegmentsDeleted > 0) && end > l.startOffset {
		entries, _ = dropEpochsFrom(entries, end)
	} else {
		// An epoch at the log start goes on there, and is the epoch of
		// the batches below it that a segment may still hold.
		entries, _ = dropEpochsFrom(entries, end+1)
	}
	entries, _ = startEpochsAt(entries, l.startOffset)
	l.epochs = entries
	l.leaderEpoch = max(opts.LeaderEpoch, latestEpoch(entries))
	if rebuild && len(entries) == 0 || !rebuild && slices.Equal(entries, checkpointed) {
		return nil
	}
	if !rebuild {
		fields := logrus.Fields{"file": file, "end_offset": end, "start_offset": l.startOffset, "epochs": len(entries)}
		if latest := latestEpoch(checkpointed); latestEpoch(entries) > latest {
			l.logger().WithFields(fields).WithField("checkpoint_latest_epoch", latest).
				Info("recovery: leader epochs of batches past the checkpoint's latest added to it")
		} else {
			l.logger().WithFields(fields).Info("recovery: leader epochs outside the log dropped")
		}
	}
	if err := writeEpochCheckpoint(l.fs, l.dir, entries, true); err != nil {
		return err
	}
	l.epochsOnDisk = true
	l.epochsUnsynced = false
	return nil
}

// listSegments returns the base offsets of the .log files of the directory,
// sorted, after removing stray files.
func (l *Log) listSegments() ([]int64, error) {
	names, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("disk: list %s: %w", l.dir, err)
	}
	logs := map[int64]bool{}
	var indexes []string
	var stray []string
	for _, name := range names {
		base, ext, err := ParseSegmentFileName(name)
		switch {
		case strings.HasSuffix(name, ".tmp") || strings.HasSuffix(name, ".deleted"):
			stray = append(stray, name)
		case err != nil:
			// Not ours (a checkpoint, a lock): leave it.
		case ext == logExt:
			logs[base] = true
		case ext == indexExt || ext == timeIndexExt:
			indexes = append(indexes, name)
		}
	}
	for _, name := range indexes {
		base, _, _ := ParseSegmentFileName(name)
		if !logs[base] {
			stray = append(stray, name)
		}
	}
	for _, name := range stray {
		l.logger().WithField("file", name).Info("recovery: removing stray file")
		if err := l.fs.Remove(l.dir + "/" + name); err != nil {
			return nil, fmt.Errorf("disk: remove stray file: %w", err)
		}
		l.dirDirty = true
	}
	bases := make([]int64, 0, len(logs))
	for base := range logs {
		bases = append(bases, base)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, nil
}

// removeBases deletes the files of segments not opened.
func (l *Log) removeBases(bases []int64) error {
	for _, base := range bases {
		s := &segment{fs: l.fs, dir: l.dir, baseOffset: base}
		if err := s.remove(); err != nil {
			return err
		}
		l.recovery.SegmentsDeleted++
		l.dirDirty = true
	}
	return nil
}

// loadIndexes opens the indexes of a trusted segment (one below the
// recovery point), rebuilding them from the .log when missing, damaged or
// inconsistent with it.
func (l *Log) loadIndexes(seg *segment) error {
	ix, ierr := OpenOffsetIndex(l.fs, segmentPath(l.dir, seg.baseOffset, indexExt), seg.baseOffset)
	tix, terr := OpenTimeIndex(l.fs, segmentPath(l.dir, seg.baseOffset, timeIndexExt), seg.baseOffset)
	if ierr == nil {
		seg.index = ix
	}
	if terr == nil {
		seg.timeIndex = tix
	}
	reason := ""
	switch {
	case ierr != nil:
		reason = ierr.Error()
	case terr != nil:
		reason = terr.Error()
	default:
		if e, ok := ix.Last(); ok && (e.Position >= seg.size || e.Offset >= seg.nextOffset) {
			reason = fmt.Sprintf("offset index entry (%d, %d) is past the segment", e.Offset, e.Position)
		}
		te, ok := tix.Last()
		if ok && te.Offset >= seg.nextOffset {
			reason = fmt.Sprintf("time index entry (%d, %d) is past the segment", te.Timestamp, te.Offset)
		}
		if !ok && seg.size > 0 {
			reason = "time index has no entry"
		}
		seg.maxTimestamp, seg.offsetOfMaxTimestamp = te.Timestamp, te.Offset
		if !ok {
			seg.maxTimestamp = -1
		}
		if e, ok := ix.Last(); ok {
			seg.bytesSinceIndex = seg.size - e.Position
		} else {
			seg.bytesSinceIndex = seg.size
		}
	}
	if reason == "" {
		return nil
	}
	l.logger().WithFields(logrus.Fields{"segment": seg.path, "reason": reason}).Warn("recovery: rebuilding indexes")
	next := seg.nextOffset
	if _, err := l.recoverSegment(seg, true); err != nil {
		return err
	}
	seg.nextOffset = next
	return seg.sealTimeIndex()
}

// recoverSegment validates seg's batches from its start and rebuilds its
// indexes. At the first damaged batch it cuts the .log there, unless the
// segment is trusted (below the recovery point), where it stops indexing
// and leaves the damage for reads to report. intact reports whether no
// damage was found.
func (l *Log) recoverSegment(seg *segment, trusted bool) (intact bool, err error) {
	seg.indexesDirty = true
	if err := seg.createIndexes(); err != nil {
		return false, err
	}
	fileSize := seg.size
	seg.reset()
	seg.size = 0
	intact, _, err = l.validate(seg, fileSize, trusted, -1)
	return intact, err
}

// validate checks seg's batches with their CRCs from seg.size, where the
// batch with base offset seg.nextOffset starts, to fileSize, tracking each
// into seg's state and indexes, which the caller has prepared for that
// position. At the first damaged batch it cuts the .log there, unless
// trusted, where it leaves the damage for reads to report. With floor >= 0,
// damage at a batch whose base offset is below floor, or at the first batch
// (where an index entry pointed), cuts nothing and returns redo: the index
// or the recovery point is wrong, and the caller validates again from the
// segment's start.
func (l *Log) validate(seg *segment, fileSize int64, trusted bool, floor int64) (intact, redo bool, err error) {
	start := seg.size
	sc := scanner{seg: seg, size: fileSize, buf: make([]byte, 0, min(scanChunk, fileSize-start))}
	position := start
	l.recovery.SegmentsValidated++
	defer func() { l.recovery.BytesValidated += position - start }()
	for position < fileSize {
		h, derr, err := sc.batch(position, seg.nextOffset)
		if err != nil {
			return false, false, err
		}
		if derr == nil {
			derr = l.checkLeaderEpoch(&h)
		}
		if derr == nil && h.LeaderEpoch >= 0 && h.LeaderEpoch > latestEpoch(l.epochs) {
			// Kafka's LogSegment.recover: an epoch the checkpoint lost to
			// a crash, which the partition's covers (checkLeaderEpoch).
			// recoverEpochs writes the cache back.
			l.epochs, _ = assignEpoch(l.epochs, EpochEntry{Epoch: h.LeaderEpoch, StartOffset: h.BaseOffset})
		}
		if derr != nil {
			fields := logrus.Fields{"segment": seg.path, "position": position, "error": derr.Error()}
			if floor >= 0 && (seg.nextOffset < floor || position == start) {
				l.logger().WithFields(fields).Warn("recovery: damaged batch below the recovery point; validating the segment from its start")
				return false, true, nil
			}
			if trusted {
				l.logger().WithFields(fields).Warn("recovery: damaged batch below the recovery point; reads of it will fail")
				seg.size = fileSize
				return false, false, nil
			}
			l.logger().WithFields(fields).Warn("recovery: truncating torn or corrupt tail")
			l.recovery.BytesTruncated += fileSize - position
			if err := seg.log.Truncate(position); err != nil {
				return false, false, fmt.Errorf("disk: truncate %s: %w", seg.path, err)
			}
			// The cut must be durable before anything is written after it.
			if err := seg.log.Sync(); err != nil {
				return false, false, fmt.Errorf("disk: sync %s: %w", seg.path, err)
			}
			seg.size = position
			l.dirDirty = true
			return false, false, nil
		}
		if err := seg.track(&h, position, l.config.IndexIntervalBytes, h.MaxTimestamp); err != nil {
			return false, false, err
		}
		position += int64(h.Size())
	}
	return true, false, nil
}

// openIndexes opens seg's indexes as they are on disk and checks them
// against the file size as Kafka's sanity check does: both must decode, and
// the last offset index entry must leave room for a batch header inside the
// .log. It returns a reason when they cannot be used, and leaves seg's
// indexes open (those that opened) either way.
func (l *Log) openIndexes(seg *segment) string {
	seg.closeIndexes()
	ix, ierr := OpenOffsetIndex(l.fs, segmentPath(l.dir, seg.baseOffset, indexExt), seg.baseOffset)
	if ierr != nil {
		return ierr.Error()
	}
	seg.index = ix
	tix, terr := OpenTimeIndex(l.fs, segmentPath(l.dir, seg.baseOffset, timeIndexExt), seg.baseOffset)
	if terr != nil {
		return terr.Error()
	}
	seg.timeIndex = tix
	if seg.size > maxRelativeOffset {
		return fmt.Sprintf("segment of %d bytes does not fit 32-bit positions", seg.size)
	}
	if e, ok := ix.Last(); ok && e.Position+wire.HeaderSize > seg.size {
		return fmt.Sprintf("offset index entry (%d, %d) is past the segment (%d bytes)", e.Offset, e.Position, seg.size)
	}
	return ""
}

// openLast opens the last segment when the recovery point is above its
// base offset. When its indexes are sane and the batch headers after the
// last offset index entry end exactly at recoveryPoint, the log was closed
// cleanly and nothing else is read. A log that ends past the recovery point
// is validated from it (recoverAbove); anything else is validated from the
// segment's start.
func (l *Log) openLast(seg *segment, recoveryPoint int64) (intact bool, err error) {
	fields := logrus.Fields{"segment": seg.path, "recovery_point": recoveryPoint}
	if reason := l.openIndexes(seg); reason != "" {
		l.logger().WithFields(fields).WithField("reason", reason).Warn("recovery: rebuilding indexes of the last segment")
		return l.recoverSegment(seg, false)
	}
	from, _ := seg.index.Last()
	if from.Position == 0 {
		from = OffsetEntry{Offset: seg.baseOffset}
	}
	tail, err := seg.scanTail(l.header[:], from)
	if err != nil {
		return false, err
	}
	te, hasTime := seg.timeIndex.Last()
	switch {
	case tail.end < recoveryPoint:
		l.logger().WithFields(fields).WithField("end_offset", tail.end).
			Warn("recovery: the log ends before its recovery point; the checkpoint is stale, validating the last segment")
		return l.recoverSegment(seg, false)
	case tail.damaged || tail.end > recoveryPoint:
		return l.recoverAbove(seg, recoveryPoint)
	case hasTime && te.Offset >= tail.end:
		l.logger().WithFields(fields).WithField("reason", fmt.Sprintf("time index entry (%d, %d) is past the segment", te.Timestamp, te.Offset)).
			Warn("recovery: rebuilding indexes of the last segment")
		return l.recoverSegment(seg, false)
	}
	// Closed cleanly: the state comes from the indexes and the tail headers.
	first, err := seg.readHeader(l.header[:], 0, seg.baseOffset)
	if err != nil {
		l.logger().WithFields(fields).WithError(err).Warn("recovery: first batch damaged; validating the last segment")
		return l.recoverSegment(seg, false)
	}
	seg.reset()
	seg.nextOffset = tail.end
	seg.rollTimestamp = first.MaxTimestamp
	if hasTime {
		seg.maxTimestamp, seg.offsetOfMaxTimestamp = te.Timestamp, te.Offset
	}
	if tail.maxTimestamp > seg.maxTimestamp {
		seg.maxTimestamp, seg.offsetOfMaxTimestamp = tail.maxTimestamp, tail.offsetOfMaxTimestamp
	}
	if hasTime && seg.offsetOfMaxTimestamp < te.Offset {
		// The batches after the entry hold a larger timestamp at a lower
		// offset: the entry is not theirs, and the next one would go
		// before it.
		l.logger().WithFields(fields).WithField("reason", fmt.Sprintf("time index entry (%d, %d) is past the largest timestamp (%d at %d)", te.Timestamp, te.Offset, seg.maxTimestamp, seg.offsetOfMaxTimestamp)).
			Warn("recovery: rebuilding indexes of the last segment")
		return l.recoverSegment(seg, false)
	}
	seg.bytesSinceIndex = seg.size - from.Position
	return true, nil
}

// recoverAbove validates seg from the offset index entry at or below
// recoveryPoint to its end, keeping the index entries below that entry and
// the state they imply; it validates from the start when there is no such
// entry, the indexes are unusable, or damage turns up below the recovery
// point.
func (l *Log) recoverAbove(seg *segment, recoveryPoint int64) (intact bool, err error) {
	if seg.index == nil || seg.timeIndex == nil {
		if reason := l.openIndexes(seg); reason != "" {
			l.logger().WithFields(logrus.Fields{"segment": seg.path, "reason": reason}).Warn("recovery: rebuilding indexes")
			return l.recoverSegment(seg, false)
		}
	}
	e := seg.index.Lookup(recoveryPoint)
	if e.Position == 0 {
		return l.recoverSegment(seg, false)
	}
	first, err := seg.readHeader(l.header[:], 0, seg.baseOffset)
	if err != nil {
		return l.recoverSegment(seg, false)
	}
	// Drop the entry at e with those above it: validating its batch adds
	// it again. The time index keeps the entries up to e's batch, which
	// hold the largest timestamp below it.
	seg.indexesDirty = true
	if err := seg.index.TruncateTo(e.Offset); err != nil {
		return false, err
	}
	if err := seg.timeIndex.TruncateTo(e.Offset + 1); err != nil {
		return false, err
	}
	fileSize := seg.size
	seg.reset()
	seg.size = e.Position
	seg.nextOffset = e.Offset
	seg.rollTimestamp = first.MaxTimestamp
	if te, ok := seg.timeIndex.Last(); ok {
		seg.maxTimestamp, seg.offsetOfMaxTimestamp = te.Timestamp, te.Offset
	}
	seg.bytesSinceIndex = int64(l.config.IndexIntervalBytes)
	intact, redo, err := l.validate(seg, fileSize, false, recoveryPoint)
	if err != nil {
		return false, err
	}
	if redo {
		seg.size = fileSize
		return l.recoverSegment(seg, false)
	}
	return intact, nil
}

// scanner reads a segment's batches through a window of buffered bytes.
type scanner struct {
	seg       *segment
	size      int64 // of the file
	buf       []byte
	windowPos int64
	window    []byte
}

// bytes returns n bytes at position, or nil when the segment ends first.
func (sc *scanner) bytes(position int64, n int) ([]byte, error) {
	if position >= sc.windowPos && position+int64(n) <= sc.windowPos+int64(len(sc.window)) {
		off := position - sc.windowPos
		return sc.window[off : off+int64(n)], nil
	}
	if position+int64(n) > sc.size {
		return nil, nil
	}
	if n > cap(sc.buf) {
		sc.buf = make([]byte, 0, n)
	}
	m := min(int64(cap(sc.buf)), sc.size-position)
	sc.window = sc.buf[:m]
	sc.windowPos = position
	if _, err := sc.seg.log.ReadAt(sc.window, position); err != nil {
		sc.window = nil
		return nil, fmt.Errorf("disk: read %s at %d: %w", sc.seg.path, position, err)
	}
	return sc.window[:n], nil
}

// batch validates the batch at position, which must have base offset want.
// Damage is returned as derr; err is an I/O error.
func (sc *scanner) batch(position, want int64) (h wire.Header, derr, err error) {
	b, err := sc.bytes(position, wire.LogOverhead)
	if err != nil {
		return h, nil, err
	}
	if b == nil {
		return h, wire.ErrShort, nil
	}
	size, perr := wire.PeekSize(b)
	if perr != nil {
		return h, perr, nil
	}
	if b, err = sc.bytes(position, size); err != nil {
		return h, nil, err
	}
	if b == nil {
		return h, fmt.Errorf("%w: batch of %d bytes, segment ends first", wire.ErrShort, size), nil
	}
	if h, derr = wire.Validate(b); derr != nil {
		return h, derr, nil
	}
	if h.BaseOffset != want {
		return h, fmt.Errorf("disk: batch base offset %d, want %d", h.BaseOffset, want), nil
	}
	return h, nil, nil
}
