package disk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/depot-dev/depot/wire"
)

// ErrNotOneBatch is returned by Append for bytes that are not exactly one
// record batch.
var ErrNotOneBatch = errors.New("disk: append wants exactly one batch")

// Log is a partition's log, Kafka's LocalLog: a directory of segments
// ordered by base offset, the last of them active (appended to). It owns
// offsets: the log start offset, the log end offset, and the recovery point
// below which everything is synced; and the partition's leader-epoch
// cache, Kafka's LeaderEpochFileCache, with its checkpoint file.
//
// Not safe for concurrent use: the owning partition actor serialises all
// calls. It starts no goroutines; time arrives through Options.Now, and
// MaybeRoll and ApplyRetention are called on the owner's timer ticks.
type Log struct {
	// fs is the file system through the file cache (Options.Files): all
	// the log's file work goes through it.
	fs     FS
	dir    string
	config Config
	now    func() time.Time
	// logBase is Options.Logger: each line adds the log's dir (see logger).
	logBase *logrus.Entry

	segments      []*segment // by base offset; never empty while open
	startOffset   int64
	recoveryPoint int64
	leaderEpoch   int32 // see Options.LeaderEpoch
	// epochs is the leader-epoch cache (see epochcache.go), as the
	// checkpoint holds it unless epochsStale; epochsOnDisk reports
	// whether the checkpoint file exists. epochsUnsynced reports that an
	// append wrote the checkpoint without a sync and nothing has made it
	// durable since (see syncEpochs); epochsWrites counts those writes,
	// so that a FlushJob clears epochsUnsynced only when none came after
	// its start.
	epochs         []EpochEntry
	epochsOnDisk   bool
	epochsStale    bool
	epochsUnsynced bool
	epochsWrites   uint64
	// dirDirty is set when segment files were created since the directory
	// was last synced.
	dirDirty      bool
	lastFlushTime int64 // unix ms
	closed        bool
	// failed is the first I/O error of a mutating call: the log's files may
	// no longer match its state, so later mutations refuse, as Kafka takes a
	// log directory offline. An error wrapping ErrNoSpace is not one: the
	// call is undone (see undo), and the log goes on.
	failed error
	// flushing is the FlushJob started and not yet finished, if any.
	flushing *FlushJob
	// recovery is what Open did to the files.
	recovery Recovery

	header [wire.HeaderSize]byte // scratch for reading headers
}

// AppendResult describes an appended batch.
type AppendResult struct {
	BaseOffset   int64
	LastOffset   int64
	MaxTimestamp int64
	// Position is the batch's byte position in its segment.
	Position int64
}

// SegmentInfo describes a segment.
type SegmentInfo struct {
	BaseOffset   int64
	NextOffset   int64
	Size         int64
	MaxTimestamp int64  // -1 when the segment holds no timestamp
	Path         string // of the .log
}

// logger is the log's logger, with its dir. It is made for each line,
// which are few (rolls, recovery, failures), rather than kept: a node holds
// many idle logs.
func (l *Log) logger() *logrus.Entry { return l.logBase.WithField("dir", l.dir) }

func (l *Log) active() *segment { return l.segments[len(l.segments)-1] }

// Config is the log's configuration.
func (l *Log) Config() Config { return l.config }

// SetConfig changes the log's configuration, as a topic's configs change:
// segment.bytes and segment.ms apply from the next roll decision,
// retention from the next ApplyRetention, flush.* and
// index.interval.bytes from the next append. A config Validate refuses
// changes nothing and is returned, wrapping ErrConfig.
func (l *Log) SetConfig(c Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	l.config = c
	return nil
}

// check returns ErrClosed on a closed log.
func (l *Log) check() error {
	if l.closed {
		return ErrClosed
	}
	return nil
}

// checkWrite returns ErrClosed on a closed log and the sticky error of a
// failed one.
func (l *Log) checkWrite() error {
	if l.closed {
		return ErrClosed
	}
	if l.failed != nil {
		return fmt.Errorf("disk: log %s failed earlier: %w", l.dir, l.failed)
	}
	return nil
}

// fail records err as the log's sticky failure and returns it.
func (l *Log) fail(err error) error {
	if err != nil && l.failed == nil {
		l.failed = err
		l.logger().WithError(err).Error("log failed")
	}
	return err
}

// failUnlessFull fails the log with err unless err wraps ErrNoSpace: a
// call that left the log as it was when the file system had no room for
// it returns that error and leaves the log usable.
func (l *Log) failUnlessFull(err error) error {
	if errors.Is(err, ErrNoSpace) {
		return err
	}
	return l.fail(err)
}

// logMark is the state of a log before a change that undo may take back.
type logMark struct {
	segments int // how many there were
	active   segmentMark
	dirDirty bool
}

// mark returns the log's state now, for undo.
func (l *Log) mark() logMark {
	return logMark{segments: len(l.segments), active: l.active().mark(), dirDirty: l.dirDirty}
}

// undo ends a change begun at m that failed with err. When err wraps
// ErrNoSpace, the change is taken back: the segments created since are
// removed and the segment active at m is rolled back (see
// segment.rollback), so that the log and its files are as they were and
// the next call goes on from there; err is returned. Any other error, or
// one met while undoing, fails the log.
func (l *Log) undo(m logMark, err error) error {
	if !errors.Is(err, ErrNoSpace) {
		return l.fail(err)
	}
	for _, s := range l.segments[m.segments:] {
		if rerr := s.remove(); rerr != nil {
			return l.fail(fmt.Errorf("disk: undoing %v: %w", err, rerr))
		}
	}
	l.segments = l.segments[:m.segments]
	if rerr := l.active().rollback(m.active); rerr != nil {
		return l.fail(fmt.Errorf("disk: undoing %v: %w", err, rerr))
	}
	l.dirDirty = m.dirDirty
	return err
}

// Dir returns the partition directory.
func (l *Log) Dir() string { return l.dir }

// StartOffset returns the log start offset, the first offset readable.
func (l *Log) StartOffset() int64 { return l.startOffset }

// EndOffset returns the log end offset: the offset the next append gets.
func (l *Log) EndOffset() int64 { return l.active().nextOffset }

// RecoveryPoint returns the offset below which the log is synced.
func (l *Log) RecoveryPoint() int64 { return l.recoveryPoint }

// Size returns the bytes of all segments.
func (l *Log) Size() int64 {
	var n int64
	for _, s := range l.segments {
		n += s.size
	}
	return n
}

// Segments describes the segments, oldest first.
func (l *Log) Segments() []SegmentInfo {
	infos := make([]SegmentInfo, len(l.segments))
	for i, s := range l.segments {
		infos[i] = SegmentInfo{BaseOffset: s.baseOffset, NextOffset: s.nextOffset, Size: s.size, MaxTimestamp: s.maxTimestamp, Path: s.path}
	}
	return infos
}

// segmentIndex returns the index of the segment holding offset: the last
// whose base offset is <= offset (binary search), or -1.
func (l *Log) segmentIndex(offset int64) int {
	return segmentFor(l.segments, offset)
}

// segmentFor is the binary search over base offsets behind segmentIndex.
func segmentFor(segments []*segment, offset int64) int {
	return sort.Search(len(segments), func(i int) bool { return segments[i].baseOffset > offset }) - 1
}

// Append appends exactly one record batch. It validates the batch
// (wire.Validate: header, length, CRC, record count) and refuses one whose
// partition leader epoch is past the partition's, rewrites its base
// offset in place to EndOffset (the caller's slice is modified), rolls first
// if the batch would take the active segment past segment.bytes or the
// segment is older than segment.ms, writes it with one Write call, adds
// index entries every index.interval.bytes, and flushes as flush.messages
// and flush.ms ask. A batch whose epoch is above LatestEpoch (and not
// past the partition's) first assigns its epoch at EndOffset, as
// AssignEpoch does: a leader normally did so when it took the partition.
//
// When the file system has no room for any of it (the batch, its index
// entries, the new segment's files, the flush's index writes, the
// leader-epoch checkpoint), the append is undone, the log left as it was,
// files and all, and the error wraps ErrNoSpace: the log is not failed,
// and the same append, given room, gets the same offset.
func (l *Log) Append(batch []byte) (AppendResult, error) {
	if err := l.checkWrite(); err != nil {
		return AppendResult{}, err
	}
	h, err := wire.Validate(batch)
	if err != nil {
		return AppendResult{}, fmt.Errorf("disk: append: %w", err)
	}
	return l.append(batch, h, false)
}

// AppendValidated is Append for a batch the caller has already checked with
// wire.Validate, whose header is h: it skips the second CRC pass. A caller
// that validates every batch of a request before appending any (as a
// partition does) uses it.
func (l *Log) AppendValidated(batch []byte, h wire.Header) (AppendResult, error) {
	if err := l.checkWrite(); err != nil {
		return AppendResult{}, err
	}
	return l.append(batch, h, false)
}

// AppendAsFollower appends a batch of the partition's leader as it is, byte
// for byte, as a follower (or a move's future log) does: its offsets and
// its leader epoch are the leader's. The caller has checked it with
// wire.Validate, whose header is h. Its base offset must be EndOffset, or
// the error wraps ErrOffsetMismatch and nothing is appended. A batch whose
// epoch is above LatestEpoch first assigns its epoch at its base offset
// (AssignEpoch), which raises the partition's epoch to it. Rolls, indexes,
// flushes and a full file system are as for Append; the epoch assigned is
// undone with the batch.
func (l *Log) AppendAsFollower(batch []byte, h wire.Header) (AppendResult, error) {
	if err := l.checkWrite(); err != nil {
		return AppendResult{}, err
	}
	return l.append(batch, h, true)
}

// append appends batch, whose header is h; asFollower keeps its offsets
// and assigns its epoch whatever the partition's.
func (l *Log) append(batch []byte, h wire.Header, asFollower bool) (AppendResult, error) {
	if h.Size() != len(batch) {
		return AppendResult{}, fmt.Errorf("%w: batch of %d bytes followed by %d more", ErrNotOneBatch, h.Size(), len(batch)-h.Size())
	}
	if asFollower && h.BaseOffset != l.EndOffset() {
		return AppendResult{}, fmt.Errorf("%w: batch at offset %d, %s ends at %d", ErrOffsetMismatch, h.BaseOffset, l.dir, l.EndOffset())
	}
	if !asFollower {
		if err := l.checkLeaderEpoch(&h); err != nil {
			return AppendResult{}, fmt.Errorf("disk: append: %w", err)
		}
	}
	if err := l.saveStaleEpochs(); err != nil {
		return AppendResult{}, err
	}
	em := l.markEpochs()
	if h.LeaderEpoch >= 0 && h.LeaderEpoch > l.LatestEpoch() {
		// The epoch goes into the checkpoint before the batch is
		// written, and is taken back if the batch is undone: so a
		// process kill never leaves a batch above the checkpoint's
		// latest epoch, which recovery would take for damage. Assigned
		// after the write instead, a kill between the two would leave
		// the batch in the file (the page cache outlives the process)
		// and the checkpoint without its epoch, and the next Open would
		// cut the batch and everything after it.
		//
		// It is written without a sync, which would cost two fsyncs on
		// the append path of every partition's first batch of an epoch:
		// the flush that first covers the batch syncs it first (see
		// epochcache.go). But while a FlushJob that syncs the checkpoint
		// is in flight, it is written durably: the job's directory sync
		// could make this rename durable before these bytes.
		durable := l.flushing != nil && l.flushing.epochsDir != ""
		if err := l.assignEpoch(h.LeaderEpoch, l.EndOffset(), durable); err != nil {
			return AppendResult{}, err
		}
	}
	res, err := l.write(batch, h, !asFollower)
	if err != nil && errors.Is(err, ErrNoSpace) {
		if uerr := l.undoEpochs(em); uerr != nil {
			return AppendResult{}, uerr
		}
	}
	return res, err
}

// write appends batch at EndOffset, rewriting its base offset to it when
// rewrite is set (else it is EndOffset already), rolling and flushing as
// Append describes; a full file system's error undoes it.
func (l *Log) write(batch []byte, h wire.Header, rewrite bool) (AppendResult, error) {
	m := l.mark()
	seg := l.active()
	base := seg.nextOffset
	rolled := l.shouldRoll(seg, int64(len(batch)), int64(h.LastOffsetDelta))
	if rolled {
		if err := l.rollQuietly(); err != nil {
			return AppendResult{}, err
		}
		seg = l.active()
	}
	if rewrite {
		wire.SetBaseOffset(batch, base)
		h.BaseOffset = base
	}
	position, err := seg.append(batch, &h, l.config.IndexIntervalBytes, l.now().UnixMilli())
	if err != nil {
		return AppendResult{}, l.undo(m, err)
	}
	res := AppendResult{BaseOffset: base, LastOffset: h.LastOffset(), MaxTimestamp: h.MaxTimestamp, Position: position}
	if err := l.maybeFlush(); err != nil {
		if errors.Is(err, ErrNoSpace) {
			return AppendResult{}, l.undo(m, err)
		}
		return res, err
	}
	if rolled {
		l.logRoll()
	}
	return res, nil
}

// shouldRoll decides whether a batch of size bytes spanning lastDelta
// offsets goes into a new segment.
func (l *Log) shouldRoll(seg *segment, size, lastDelta int64) bool {
	if seg.empty() {
		return false
	}
	if seg.size+size > l.config.SegmentBytes {
		return true
	}
	if seg.nextOffset+lastDelta-seg.baseOffset > maxRelativeOffset {
		return true
	}
	return l.expired(seg)
}

// expired reports whether seg's first batch was appended more than
// segment.ms ago. The age counts from the append, not from the batch's own
// timestamp, so a producer's old timestamps do not roll every batch into a
// segment of its own; a segment recovered from disk counts from its first
// batch's timestamp.
func (l *Log) expired(seg *segment) bool {
	if seg.rollTimestamp < 0 {
		return false
	}
	age := l.now().UnixMilli() - seg.rollTimestamp
	return age > l.config.SegmentMs.Milliseconds()
}

func (l *Log) maybeFlush() error {
	unflushed := l.EndOffset() - l.recoveryPoint
	if unflushed >= l.config.FlushMessages ||
		l.config.FlushMs != math.MaxInt64 && l.now().UnixMilli()-l.lastFlushTime >= l.config.FlushMs.Milliseconds() {
		return l.Flush(l.EndOffset())
	}
	return nil
}

// Roll starts a new segment at EndOffset. It does nothing when the active
// segment is empty. Without room for the new segment's files or the old
// one's last index entries, it is undone and the error wraps ErrNoSpace.
func (l *Log) Roll() error {
	if err := l.checkWrite(); err != nil {
		return err
	}
	if l.active().empty() {
		return nil
	}
	return l.roll()
}

// MaybeRoll rolls the active segment if it is older than segment.ms, or if
// it lies entirely below the start offset (see DeleteBefore); the owner
// calls it on a timer tick, so a quiet partition's segment still becomes
// deletable. Like Roll, it is undone on a full file system.
func (l *Log) MaybeRoll() error {
	if err := l.checkWrite(); err != nil {
		return err
	}
	seg := l.active()
	if seg.empty() || !l.expired(seg) && !l.activeBelowStart() {
		return nil
	}
	return l.roll()
}

func (l *Log) roll() error {
	if err := l.rollQuietly(); err != nil {
		return err
	}
	l.logRoll()
	return nil
}

// rollQuietly is roll without the log line: it creates the next segment,
// then seals the active one, and on a full file system is undone (see
// undo). An append that rolls logs the roll once the batch is in.
func (l *Log) rollQuietly() error {
	m := l.mark()
	old := l.active()
	seg, err := createSegment(l.fs, l.dir, old.nextOffset)
	if err != nil {
		return l.failUnlessFull(err)
	}
	l.segments = append(l.segments, seg)
	l.dirDirty = true
	if err := l.seal(old); err != nil {
		return l.undo(m, err)
	}
	return nil
}

func (l *Log) logRoll() {
	seg := l.active()
	l.logger().WithFields(logrus.Fields{"segment": seg.path, "base_offset": seg.baseOffset}).Info("rolled segment")
}

// seal writes out the index entries of a segment that stops being active.
func (l *Log) seal(old *segment) error {
	if err := old.sealTimeIndex(); err != nil {
		return err
	}
	if err := old.seal(); err != nil {
		return err
	}
	if l.recoveryPoint >= old.nextOffset {
		// Its batches were made durable while it was active, with its
		// index entries written but not synced; flushes start at the
		// recovery point's segment and will not come back to it, and a
		// clean open trusts the indexes of the segments below the
		// recovery point but the last. A crash could leave them torn.
		return old.syncIndexes()
	}
	return nil
}

// Flush makes durable every segment holding offsets below upTo (its .log
// and indexes), oldest first, then the directory if segments were created
// since the last flush, and raises the recovery point to upTo (at most
// EndOffset). Many appends share one Flush: a group commit. A
// leader-epoch checkpoint that an append wrote without a sync is made
// durable first, with the directory, so that no batch is durable before
// its epoch.
//
// A flush writes the index entries still in memory before each fsync. When
// the file system has no room for them, the error wraps ErrNoSpace, the
// recovery point stays where it was and the log stays usable; a later
// Flush, given room, does the rest. An error of an fsync fails the log.
func (l *Log) Flush(upTo int64) error {
	if err := l.checkWrite(); err != nil {
		return err
	}
	if upTo > l.EndOffset() {
		upTo = l.EndOffset()
	}
	if upTo <= l.recoveryPoint && !l.dirDirty && !l.epochsUnsynced {
		return nil
	}
	if err := l.syncEpochs(); err != nil {
		return err
	}
	if upTo > l.recoveryPoint {
		first := max(l.segmentIndex(l.recoveryPoint), 0)
		active := l.active()
		for _, s := range l.segments[first:] {
			if s.baseOffset >= upTo {
				break
			}
			// A group commit costs one fsync of the active segment's
			// .log; sealed segments get their indexes synced too.
			sync := s.sync
			if s == active {
				sync = s.syncData
			}
			if err := sync(); err != nil {
				return l.failUnlessFull(err)
			}
		}
	}
	if l.dirDirty {
		if err := l.syncDir(); err != nil {
			return err
		}
	}
	if upTo > l.recoveryPoint {
		l.recoveryPoint = upTo
	}
	l.lastFlushTime = l.now().UnixMilli()
	return nil
}

// Sync flushes everything: Flush(EndOffset()).
func (l *Log) Sync() error { return l.Flush(l.EndOffset()) }

// Settle makes durable all that the log has written, the leader-epoch
// checkpoint and the active segment's index entries included (a Flush
// writes the entries but leaves them unsynced, so that a group commit
// costs one fsync), so that none of its files holds
// unsynced bytes and the file cache may close every one of them (see
// FileCache). The owner calls it when the log has gone idle. It costs
// nothing when all is synced, and does nothing while a FlushJob is in
// flight. Errors are as for Flush: one wrapping ErrNoSpace leaves the log
// usable, any other fails it.
func (l *Log) Settle() error {
	if err := l.checkWrite(); err != nil {
		return err
	}
	if l.flushing != nil {
		return nil
	}
	if err := l.Sync(); err != nil {
		return err
	}
	for _, s := range l.segments {
		if err := s.settle(); err != nil {
			return l.failUnlessFull(err)
		}
	}
	return nil
}

// FlushJob is a Flush of everything appended so far, split so that its
// fsync of the active segment runs off the owner's goroutine while appends
// go on: Kafka's acks=all group commit without stopping the partition for
// each fsync. The owner calls StartFlush, hands the job to another
// goroutine to Run, and gives the result to FinishFlush, which raises the
// recovery point. Appends made after StartFlush are not covered by the job
// even if its fsync happens to write them.
//
// Between StartFlush and FinishFlush the log refuses, with
// ErrFlushInFlight, every call that would close or remove a segment file
// (Close, Delete, TruncateTo, DeleteBefore, ApplyRetention) and a second
// StartFlush; appends, rolls, reads and Flush go on. A sealed segment and
// the directory, left to sync by a roll, are synced by StartFlush itself:
// that happens once a segment, and keeps Run to one fsync. A leader-epoch
// checkpoint that an append wrote without a sync is left to the job,
// whose Run syncs it and the directory before the segment (see
// epochcache.go): the first flush after a new epoch costs three fsyncs.
type FlushJob struct {
	upTo int64
	file File   // the active segment's .log; nil when nothing is to sync
	path string // of file
	// epochsDir is the partition directory when the job syncs its
	// leader-epoch checkpoint, on epochsFS; epochsWrites is the log's
	// count of unsynced writes of it at StartFlush.
	epochsDir    string
	epochsFS     FS
	epochsWrites uint64
}

// UpTo returns the offset below which everything is durable once the job
// has run and been finished without error.
func (j *FlushJob) UpTo() int64 { return j.upTo }

// Run does the job's fsyncs: of the leader-epoch checkpoint and the
// partition directory when the job carries them, then of the active
// segment's .log (fdatasync where the file can: the log needs its bytes
// and size, not its times). It touches nothing of the log but the files,
// the segment's staying open until FinishFlush, and changes nothing in
// memory, so it may run on any goroutine, and the jobs of many logs may
// run at once; a syncfs of the whole file system does what it does. The
// File must allow Sync concurrently with Write (os.File and MemFS files
// do). The file cache keeps its descriptor open while it holds the bytes
// to sync (see FileCache), or syncs them itself before it closes it, and
// reopens it if need be.
func (j *FlushJob) Run() error {
	if j.epochsDir != "" {
		if err := syncEpochCheckpoint(j.epochsFS, j.epochsDir); err != nil {
			return err
		}
	}
	if j.file == nil {
		return nil
	}
	if err := syncData(j.file); err != nil {
		return fmt.Errorf("disk: sync %s: %w", j.path, err)
	}
	return nil
}

// StartFlush starts a FlushJob covering every offset below EndOffset(). It
// writes out the active segment's buffered index entries once 64 wait
// (Flush writes them all: see groupCommitIndexEntries), and syncs any
// segment sealed since the recovery point and the directory, as Flush
// does, a leader-epoch checkpoint an append left unsynced first; with
// nothing of that to sync, it leaves such a checkpoint to the job. It
// returns ErrFlushInFlight while another job is unfinished, and as Flush
// an error wrapping ErrNoSpace, starting no job and leaving the log
// usable, when the index entries find no room. The job's fsyncs, Run,
// fail the log on any error (FinishFlush).
func (l *Log) StartFlush() (*FlushJob, error) {
	if err := l.checkWrite(); err != nil {
		return nil, err
	}
	if l.flushing != nil {
		return nil, fmt.Errorf("%w: %s", ErrFlushInFlight, l.dir)
	}
	j := &FlushJob{upTo: l.EndOffset()}
	var sealed []*segment
	if j.upTo > l.recoveryPoint {
		first := max(l.segmentIndex(l.recoveryPoint), 0)
		sealed = l.segments[first : len(l.segments)-1]
	}
	if len(sealed) > 0 || l.dirDirty {
		// Syncs here, on the owner's goroutine, after a roll: the
		// checkpoint's first, which the job need not carry then.
		if err := l.syncEpochs(); err != nil {
			return nil, err
		}
	}
	if l.epochsUnsynced {
		j.epochsDir, j.epochsFS, j.epochsWrites = l.dir, l.fs, l.epochsWrites
	}
	for _, s := range sealed {
		if err := s.sync(); err != nil {
			return nil, l.failUnlessFull(err)
		}
	}
	if j.upTo > l.recoveryPoint {
		active := l.active()
		if err := active.flushIndexesIfMany(groupCommitIndexEntries); err != nil {
			return nil, l.failUnlessFull(err)
		}
		j.file, j.path = active.log, active.path
	}
	if l.dirDirty {
		if err := l.syncDir(); err != nil {
			return nil, err
		}
	}
	l.flushing = j
	return j, nil
}

// FinishFlush ends j with the error its Run returned: on success the
// recovery point rises to j.UpTo(), and the leader-epoch checkpoint the
// job synced is durable unless an append wrote it again since
// StartFlush; an error fails the log, as a failed Flush does, and is
// returned. j may have been run by a syncfs of the file system instead
// of Run.
func (l *Log) FinishFlush(j *FlushJob, runErr error) error {
	if l.flushing != j {
		return fmt.Errorf("disk: finish of a flush not in flight on %s", l.dir)
	}
	l.flushing = nil
	if runErr != nil {
		return l.fail(runErr)
	}
	if l.closed || l.failed != nil {
		return l.checkWrite()
	}
	if j.epochsDir != "" && l.epochsWrites == j.epochsWrites {
		l.epochsUnsynced = false
	}
	if j.upTo > l.recoveryPoint {
		l.recoveryPoint = j.upTo
	}
	l.lastFlushTime = l.now().UnixMilli()
	return nil
}

// checkRemove is checkWrite for the calls that close or remove segment
// files: they wait for the running FlushJob to be finished.
func (l *Log) checkRemove() error {
	if err := l.checkWrite(); err != nil {
		return err
	}
	if l.flushing != nil {
		return fmt.Errorf("%w: %s", ErrFlushInFlight, l.dir)
	}
	return nil
}

// checkRange returns ErrOffsetOutOfRange unless StartOffset <= offset <= EndOffset.
func (l *Log) checkRange(offset int64) error {
	if offset < l.startOffset || offset > l.EndOffset() {
		return fmt.Errorf("%w: %d not in [%d, %d] of %s", ErrOffsetOutOfRange, offset, l.startOffset, l.EndOffset(), l.dir)
	}
	return nil
}

// locate returns the segment index and position of the batch holding
// offset, which must be in [StartOffset, EndOffset).
func (l *Log) locate(offset int64) (int, int64, wire.Header, error) {
	i := l.segmentIndex(offset)
	for i >= 0 && offset >= l.segments[i].nextOffset {
		// An empty or short segment cannot hold offset; the next one does.
		i++
		if i == len(l.segments) {
			return 0, 0, wire.Header{}, fmt.Errorf("%w: %d", ErrOffsetOutOfRange, offset)
		}
	}
	if i < 0 {
		return 0, 0, wire.Header{}, fmt.Errorf("%w: %d below the first segment", ErrOffsetOutOfRange, offset)
	}
	position, h, err := l.segments[i].find(l.header[:], offset)
	return i, position, h, err
}

// Read appends to dst the stored bytes of whole batches starting at the
// batch that holds offset, up to maxBytes in all, continuing into later
// segments; always at least one whole batch when offset < EndOffset, even
// one larger than maxBytes (Kafka's KIP-74), and nothing when offset ==
// EndOffset. Offsets outside [StartOffset, EndOffset] give
// ErrOffsetOutOfRange.
//
// As Kafka's fetch path, Read trusts the log and does not compute CRCs: the
// batch CRC is end to end, and the consumer checks it (wire.Validate,
// wire.Records), so a flipped bit in a record is returned as stored. Read
// checks the structure of every batch from its header, which costs no
// extra I/O: a length that holds a header and keeps the batch inside its
// segment, magic 2, a record count that agrees with lastOffsetDelta, a
// known codec, a base offset that follows the previous batch's next offset,
// and an end that lines up with the next batch's header (or with the end of
// the segment). Structural damage gives a *CorruptionError with the
// segment's path and the byte position of the damaged batch, and no bytes
// of it: the good batches before it are returned, and the next Read, which
// starts at the damaged batch, reports the damage. Only when a batch's end
// does not line up is its CRC computed, to tell a damaged length (the
// batch is corrupt) from damage in the header that follows it.
func (l *Log) Read(offset int64, maxBytes int, dst []byte) ([]byte, error) {
	read, err := l.ReadWith(offset, maxBytes, func(int) []byte { return dst })
	if read == nil {
		return dst, err
	}
	return read, err
}

// ReadWith is Read into the buffer that buffer returns, which is asked for
// only once the batch holding offset is found, with the most bytes the
// read may append: those from that batch up to maxBytes (or the whole
// batch, if larger), or up to the log's end if nearer, and one header
// more. The buffer's length is kept as a prefix, as Read's dst's is, and
// its capacity had best leave room for those bytes. So a reader that tails
// the log takes a buffer the size of what was appended since its last
// read, not of maxBytes. buffer is not called, and the result is nil,
// when there is nothing to read or the read fails before it would be.
func (l *Log) ReadWith(offset int64, maxBytes int, buffer func(most int) []byte) ([]byte, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	if err := l.checkRange(offset); err != nil {
		return nil, err
	}
	if offset == l.EndOffset() {
		return nil, nil
	}
	i, position, h, err := l.locate(offset)
	if err != nil {
		return nil, err
	}
	limit := max(int64(maxBytes), int64(h.Size()))
	left := -position // bytes from the batch to the log's end, counted up to limit
	for _, seg := range l.segments[i:] {
		if left += seg.size; left >= limit {
			break
		}
	}
	dst := buffer(int(min(limit, left)) + wire.HeaderSize)
	start := len(dst)
	want := h.BaseOffset
	for {
		seg := l.segments[i]
		n := min(limit-int64(len(dst)-start), seg.size-position)
		var whole bool
		dst, want, whole, err = l.readBatches(seg, position, n, want, dst)
		if err != nil {
			var ce *CorruptionError
			if len(dst) > start && errors.As(err, &ce) {
				// Return the good batches; the next read reports the damage.
				return dst, nil
			}
			return dst[:start], err
		}
		i++
		if !whole || i == len(l.segments) || int64(len(dst)-start) >= limit {
			return dst, nil
		}
		position = 0
	}
}

// readBatches reads n bytes of seg from position into dst and keeps the
// whole batches among them, checking the structure of each (see Read);
// whole reports whether the read reached the end of the segment with no
// partial batch cut off. It reads the header after the n bytes too, in the
// same call, so that the last batch's end can be checked against it. On
// damage it returns the good batches before it with the *CorruptionError.
func (l *Log) readBatches(seg *segment, position, n, want int64, dst []byte) ([]byte, int64, bool, error) {
	if n <= 0 {
		return dst, want, position >= seg.size, nil
	}
	start := len(dst)
	m := min(n+wire.HeaderSize, seg.size-position)
	dst = grow(dst, int(m))
	buf := dst[start : start+int(m)]
	if _, err := seg.log.ReadAt(buf, position); err != nil {
		return dst[:start], want, false, fmt.Errorf("disk: read %s at %d: %w", seg.path, position, err)
	}
	var used int64
	for used < n {
		b := buf[used:]
		at := position + used
		if len(b) < wire.HeaderSize {
			break
		}
		h, err := l.checkBatch(seg, b, at, want)
		if err != nil {
			return dst[:start+int(used)], want, false, err
		}
		if used+int64(h.Size()) > n {
			break
		}
		want = h.NextOffset()
		used += int64(h.Size())
	}
	return dst[:start+int(used)], want, position+used == seg.size, nil
}

// checkLeaderEpoch refuses a batch whose partition leader epoch is past
// the partition's (see Options.LeaderEpoch).
func (l *Log) checkLeaderEpoch(h *wire.Header) error {
	if h.LeaderEpoch > l.leaderEpoch {
		return fmt.Errorf("%w: %d, past the partition's %d", wire.ErrLeaderEpoch, h.LeaderEpoch, l.leaderEpoch)
	}
	return nil
}

// magicPos is the position of the magic byte in a batch header, after the
// base offset, the length and the partition leader epoch.
const magicPos = wire.LogOverhead + 4

// checkBatch checks the structure of the batch at position at of seg, whose
// bytes start b (which holds at least its header) and whose base offset
// must be want. When b also holds the batch and what follows it, the
// batch's end must line up: with the end of the segment and its next
// offset, or with a header of magic 2 whose base offset follows. A batch
// whose end does not line up is corrupt unless its CRC matches, in which
// case the damage is after it and the next batch reports it.
func (l *Log) checkBatch(seg *segment, b []byte, at, want int64) (wire.Header, error) {
	h, err := wire.ParseHeader(b)
	if err != nil {
		return h, seg.corrupt(at, err)
	}
	size := int64(h.Size())
	if at+size > seg.size {
		return h, seg.corrupt(at, fmt.Errorf("%w: batch of %d bytes runs past the end of the segment (%d bytes)", wire.ErrShort, size, seg.size))
	}
	if h.BaseOffset != want {
		return h, seg.corrupt(at, fmt.Errorf("disk: batch base offset %d, want %d", h.BaseOffset, want))
	}
	if err := wire.CheckStructure(&h); err != nil {
		return h, seg.corrupt(at, err)
	}
	var reason error
	switch {
	case at+size == seg.size:
		if h.NextOffset() != seg.nextOffset {
			reason = fmt.Errorf("disk: last batch ends at offset %d, segment at %d", h.NextOffset(), seg.nextOffset)
		}
	case int64(len(b)) < size+wire.HeaderSize:
		// The next header was not read; the next call checks it.
	default:
		next := b[size:]
		if next[magicPos] != wire.Magic || int64(binary.BigEndian.Uint64(next)) != h.NextOffset() {
			reason = fmt.Errorf("disk: batch of %d bytes is not followed by the batch at offset %d", size, h.NextOffset())
		}
	}
	if reason != nil {
		if _, err := wire.Validate(b[:size]); err != nil {
			return h, seg.corrupt(at, fmt.Errorf("%v: %w", reason, err))
		}
	}
	return h, nil
}

// grow extends dst's capacity by n bytes and its length to len+n.
func grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) < n {
		nd := make([]byte, len(dst), len(dst)+n)
		copy(nd, dst)
		dst = nd
	}
	return dst[:len(dst)+n]
}

// ScanHeaders calls fn with the header of every batch from the one holding
// from to the end of the log, reading only headers (no CRC check), as
// rebuilding producer state needs. from below StartOffset starts at the
// first batch. A malformed header gives a *CorruptionError; an error from fn
// stops the scan and is returned.
func (l *Log) ScanHeaders(from int64, fn func(h wire.Header) error) error {
	if err := l.check(); err != nil {
		return err
	}
	from = max(from, l.startOffset)
	if from >= l.EndOffset() {
		return nil
	}
	i, position, h, err := l.locate(from)
	if err != nil {
		return err
	}
	for ; i < len(l.segments); i++ {
		seg := l.segments[i]
		if i > 0 && position == 0 {
			if seg.empty() {
				continue
			}
			if h, err = seg.readHeader(l.header[:], 0, seg.baseOffset); err != nil {
				return err
			}
		}
		for {
			if err := fn(h); err != nil {
				return err
			}
			position += int64(h.Size())
			if position >= seg.size {
				break
			}
			if h, err = seg.readHeader(l.header[:], position, h.NextOffset()); err != nil {
				return err
			}
		}
		position = 0
	}
	return nil
}

// OffsetForTimestamp returns the first offset at or after StartOffset whose
// record timestamp is >= ts, and that timestamp, as Kafka's ListOffsets: the
// segments' largest timestamps pick the segment, its time index gives where
// to start, batch max timestamps pick the batch and its records give the
// offset. ErrNotFound when no record is that late.
func (l *Log) OffsetForTimestamp(ts int64) (int64, int64, error) {
	if err := l.check(); err != nil {
		return 0, 0, err
	}
	first := max(l.segmentIndex(l.startOffset), 0)
	for _, seg := range l.segments[first:] {
		if seg.maxTimestamp < ts || seg.empty() {
			continue
		}
		offset, timestamp, err := l.searchTimestamp(seg, ts)
		if err == nil || !errors.Is(err, ErrNotFound) {
			return offset, timestamp, err
		}
	}
	return 0, 0, fmt.Errorf("%w: no record at or after timestamp %d in %s", ErrNotFound, ts, l.dir)
}

// searchTimestamp finds the first record of seg at or after StartOffset
// with a timestamp >= ts.
func (l *Log) searchTimestamp(seg *segment, ts int64) (int64, int64, error) {
	// Every batch up to a time index entry's offset has timestamps <= its
	// timestamp, so the last entry below ts is a safe place to start.
	from := max(seg.timeIndex.Lookup(ts-1).Offset, l.startOffset, seg.baseOffset)
	if from >= seg.nextOffset {
		return 0, 0, ErrNotFound
	}
	position, h, err := seg.find(l.header[:], from)
	if err != nil {
		return 0, 0, err
	}
	var buf []byte
	for {
		if h.MaxTimestamp >= ts && h.LastOffset() >= l.startOffset {
			buf = grow(buf[:0], h.Size())
			if _, err := seg.log.ReadAt(buf, position); err != nil {
				return 0, 0, fmt.Errorf("disk: read %s at %d: %w", seg.path, position, err)
			}
			found := errors.New("found")
			var offset, timestamp int64
			err := wire.Records(buf, func(r wire.Record) error {
				if r.Timestamp >= ts && r.Offset >= l.startOffset {
					offset, timestamp = r.Offset, r.Timestamp
					return found
				}
				return nil
			})
			if err == found {
				return offset, timestamp, nil
			}
			if err != nil {
				return 0, 0, seg.corrupt(position, err)
			}
		}
		position += int64(h.Size())
		if position >= seg.size {
			return 0, 0, ErrNotFound
		}
		if h, err = seg.readHeader(l.header[:], position, h.NextOffset()); err != nil {
			return 0, 0, err
		}
	}
}

// TruncateTo removes the end of the log: afterwards EndOffset() <= offset
// and every batch entirely below offset is still there. A batch holding
// offset goes whole. Later segments are deleted, the last kept one and its
// indexes are cut, and the recovery point comes down with the end. When no
// batch at or above StartOffset would remain, the log is emptied and starts
// again at min(offset, StartOffset), as Kafka's truncateFullyAndStartAt.
// The leader-epoch cache loses the epochs that start at or after the new
// end (Kafka's truncateFromEnd): those at or after offset, and one whose
// first batch held offset and went. The truncation is durable when
// TruncateTo returns; should the file system have no room to rewrite the
// leader-epoch checkpoint, the next append rewrites it first.
func (l *Log) TruncateTo(offset int64) error {
	if err := l.checkRemove(); err != nil {
		return err
	}
	if offset >= l.EndOffset() {
		return nil
	}
	if err := l.truncateTo(offset); err != nil {
		return err
	}
	if entries, changed := dropEpochsFrom(l.epochs, l.EndOffset()); changed {
		return l.updateEpochs(entries)
	}
	return nil
}

// truncateTo is TruncateTo's cut of the segments, for an offset below
// EndOffset.
func (l *Log) truncateTo(offset int64) error {
	if l.startOffset >= l.EndOffset() {
		return l.truncateFully(offset)
	}
	_, _, first, err := l.locate(l.startOffset)
	if err != nil {
		return err
	}
	if offset <= first.LastOffset() {
		return l.truncateFully(min(offset, l.startOffset))
	}
	keep := len(l.segments)
	for keep > 1 && l.segments[keep-1].baseOffset >= offset {
		keep--
	}
	if err := l.removeSegments(l.segments[keep:]); err != nil {
		return err
	}
	l.segments = l.segments[:keep]
	seg := l.active()
	if offset < seg.nextOffset {
		if err := seg.truncateTo(l.header[:], offset, l.config.IndexIntervalBytes); err != nil {
			return l.fail(err)
		}
	} else if _, err := seg.log.Seek(seg.size, 0); err != nil {
		return l.fail(fmt.Errorf("disk: seek %s: %w", seg.path, err))
	}
	// The sync makes the batches kept durable: their epochs first.
	if err := l.syncEpochs(); err != nil {
		return err
	}
	if err := seg.sync(); err != nil {
		return l.fail(err)
	}
	l.recoveryPoint = min(l.recoveryPoint, l.EndOffset())
	return l.syncDir()
}

// TruncateFullyAndStartAt deletes every segment and starts an empty log at
// offset, as Kafka's truncateFullyAndStartAt: for a follower whose log
// ends before its leader's log start. Durable when it returns.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	if err := l.checkRemove(); err != nil {
		return err
	}
	if offset < 0 {
		return fmt.Errorf("%w: start at %d", ErrOffsetOutOfRange, offset)
	}
	if err := l.truncateFully(offset); err != nil {
		return err
	}
	if len(l.epochs) > 0 {
		return l.updateEpochs(nil)
	}
	return nil
}

// truncateFully deletes every segment and starts an empty log at offset.
// The new segment is made before the old ones go: in place when one of
// them has offset for its base (its files are cut, which needs no room),
// else created, so that a full file system refuses it with the log as it
// was (the error wraps ErrNoSpace).
func (l *Log) truncateFully(offset int64) error {
	var seg *segment
	for _, s := range l.segments {
		if s.baseOffset == offset {
			seg = s
		}
	}
	if seg != nil {
		if err := seg.clear(); err != nil {
			return l.fail(err)
		}
	} else {
		var err error
		if seg, err = createSegment(l.fs, l.dir, offset); err != nil {
			return l.failUnlessFull(err)
		}
		l.dirDirty = true
	}
	old := make([]*segment, 0, len(l.segments))
	for _, s := range l.segments {
		if s != seg {
			old = append(old, s)
		}
	}
	if err := l.removeSegments(old); err != nil {
		return err
	}
	l.segments = append(l.segments[:0], seg)
	l.startOffset = offset
	l.recoveryPoint = offset
	l.logger().WithField("offset", offset).Info("log emptied")
	return l.syncDir()
}

// removeSegments deletes the files of segs.
func (l *Log) removeSegments(segs []*segment) error {
	for _, s := range segs {
		if err := s.remove(); err != nil {
			return l.fail(err)
		}
		l.dirDirty = true
	}
	return nil
}

// syncDir makes the directory's entries durable. A leader-epoch
// checkpoint that an append wrote without a sync is synced first (see
// syncEpochs): the directory must not make its rename durable before its
// bytes.
func (l *Log) syncDir() error {
	if l.epochsUnsynced {
		return l.syncEpochs()
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail(fmt.Errorf("disk: sync directory %s: %w", l.dir, err))
	}
	l.dirDirty = false
	return nil
}

// dropOldest deletes the n oldest segments (never the active one) and
// raises the start offset to the new first segment.
func (l *Log) dropOldest(n int) error {
	if n <= 0 {
		return nil
	}
	if err := l.removeSegments(l.segments[:n]); err != nil {
		return err
	}
	l.segments = append(l.segments[:0], l.segments[n:]...)
	l.startOffset = max(l.startOffset, l.segments[0].baseOffset)
	return l.syncDir()
}

// DeleteBefore raises the log start offset to offset, which must not pass
// EndOffset (ErrOffsetOutOfRange), and deletes the segments lying entirely
// below it, oldest first. When that includes the active segment, a new
// empty one is rolled to take its place. A lower offset than StartOffset
// raises nothing.
//
// It frees room and needs none but for that new segment's files, made once
// the older segments are gone. Should even they find no room, the active
// segment stays, all of it below the start offset and unread, and
// DeleteBefore returns nil: the start offset is raised all the same. The
// segment goes at the next DeleteBefore, or at MaybeRoll and
// ApplyRetention, once there is room.
//
// The leader-epoch cache loses the epochs that end at or below the new
// start offset, and the last epoch to begin below it begins there
// instead (Kafka's truncateFromStart). Without room to rewrite the
// checkpoint, the next append rewrites it first.
func (l *Log) DeleteBefore(offset int64) error {
	if err := l.checkRemove(); err != nil {
		return err
	}
	if offset > l.EndOffset() {
		return fmt.Errorf("%w: delete before %d past the end %d of %s", ErrOffsetOutOfRange, offset, l.EndOffset(), l.dir)
	}
	l.startOffset = max(l.startOffset, offset)
	if err := l.deleteBelowStart(); err != nil {
		return err
	}
	return l.epochsFromStart()
}

// deleteBelowStart is DeleteBefore's removal of the segments below the
// start offset.
func (l *Log) deleteBelowStart() error {
	if err := l.dropOldest(l.belowStart()); err != nil {
		return err
	}
	if !l.activeBelowStart() {
		return nil
	}
	if err := l.roll(); err != nil {
		if errors.Is(err, ErrNoSpace) {
			l.logger().WithError(err).Warn("no room to roll the active segment below the log start offset; it stays until a later roll")
			return nil
		}
		return err
	}
	return l.dropOldest(1)
}

// belowStart returns how many segments from the oldest, never the active
// one, lie entirely below the start offset.
func (l *Log) belowStart() int {
	n := 0
	for n < len(l.segments)-1 && l.segments[n].nextOffset <= l.startOffset {
		n++
	}
	return n
}

// activeBelowStart reports whether the active segment holds batches and
// all of them lie below the start offset: it is only left so when a
// DeleteBefore found no room to roll it.
func (l *Log) activeBelowStart() bool {
	seg := l.active()
	return !seg.empty() && seg.nextOffset <= l.startOffset
}

// ApplyRetention deletes whole segments, oldest first, never the active
// one: those entirely below the start offset, those whose largest timestamp
// is more than retention.ms before Now, then more while the log is larger
// than retention.bytes (a log exactly at the limit keeps them all). It
// raises StartOffset to the first remaining segment, and the leader-epoch
// cache with it as DeleteBefore does. It needs no room, so it goes on, and
// frees room, on a full file system.
func (l *Log) ApplyRetention() (int, error) {
	if err := l.checkRemove(); err != nil {
		return 0, err
	}
	n := l.belowStart()
	if l.config.RetentionMs >= 0 {
		now := l.now().UnixMilli()
		for n < len(l.segments)-1 && now-l.segments[n].maxTimestamp > l.config.RetentionMs.Milliseconds() {
			n++
		}
	}
	if l.config.RetentionBytes >= 0 {
		size := l.Size()
		for _, s := range l.segments[:n] {
			size -= s.size
		}
		for n < len(l.segments)-1 && size > l.config.RetentionBytes {
			size -= l.segments[n].size
			n++
		}
	}
	if n > 0 {
		l.logger().WithField("segments", n).Info("retention deleted segments")
	}
	if err := l.dropOldest(n); err != nil {
		return n, err
	}
	return n, l.epochsFromStart()
}

// Close syncs the log and closes its files; later calls return ErrClosed.
// Every change of the leader-epoch cache is in its checkpoint already,
// and is made durable if an append wrote it without a sync, but for one
// left stale for lack of room (see TruncateTo), which Close rewrites.
//
// On a full file system the index entries still in memory, or that
// checkpoint, may find no room: Close then fsyncs the .log files all the
// same, so no batch is lost to an OS crash, leaves the recovery point
// where it was, and returns an error wrapping ErrNoSpace; the next Open
// validates the log from the recovery point and rebuilds what the indexes
// lack.
func (l *Log) Close() error {
	if l.closed {
		return ErrClosed
	}
	if l.flushing != nil {
		return fmt.Errorf("%w: %s", ErrFlushInFlight, l.dir)
	}
	var err error
	if l.failed == nil {
		err = l.Sync()
		if errors.Is(err, ErrNoSpace) {
			err = l.syncLogs(err)
		}
		if err == nil {
			err = l.saveStaleEpochs()
		}
		// The indexes, left unsynced by group commits, are made durable
		// for the next clean open.
		for _, s := range l.segments {
			if s.indexesDirty && err == nil {
				err = l.failUnlessFull(s.sync())
			}
		}
	}
	for _, s := range l.segments {
		if cerr := s.close(); err == nil && cerr != nil {
			err = fmt.Errorf("disk: close %s: %w", s.path, cerr)
		}
	}
	l.closed = true
	return err
}

// syncLogs fsyncs the .log of every segment from the recovery point's on,
// and the directory when segments were created, writing no index entry,
// after a flush found no room for them: cause. It returns cause, or the
// error of an fsync, which fails the log.
func (l *Log) syncLogs(cause error) error {
	if err := l.syncEpochs(); err != nil {
		return err
	}
	first := max(l.segmentIndex(l.recoveryPoint), 0)
	for _, s := range l.segments[first:] {
		if err := s.log.Sync(); err != nil {
			return l.fail(fmt.Errorf("disk: sync %s: %w", s.path, err))
		}
	}
	if l.dirDirty {
		if err := l.syncDir(); err != nil {
			return err
		}
	}
	return cause
}

// Delete closes the log without syncing and removes its directory.
func (l *Log) Delete() error {
	if l.closed {
		return ErrClosed
	}
	if l.flushing != nil {
		return fmt.Errorf("%w: %s", ErrFlushInFlight, l.dir)
	}
	for _, s := range l.segments {
		_ = s.close()
	}
	l.closed = true
	if err := l.fs.RemoveAll(l.dir); err != nil {
		return fmt.Errorf("disk: delete %s: %w", l.dir, err)
	}
	return nil
}
