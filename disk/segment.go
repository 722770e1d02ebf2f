package disk

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"

	"github.com/depot-dev/depot/wire"
)

// File name extensions of a segment's files.
const (
	logExt       = ".log"
	indexExt     = ".index"
	timeIndexExt = ".timeindex"
)

// segment is one .log file of a partition with its offset and time indexes,
// Kafka's LogSegment. Offsets in [baseOffset, nextOffset) live in it; its
// batches are dense: each batch's base offset is the previous batch's next
// offset, and the first batch's is baseOffset.
//
// Not safe for concurrent use: the Log that owns it serialises access.
type segment struct {
	fs         FS
	dir        string
	baseOffset int64
	path       string // the .log
	log        File
	index      *OffsetIndex
	timeIndex  *TimeIndex
	segmentState
}

// segmentState is what a segment knows of itself in memory: what appends
// change, saved whole by mark and put back by rollback.
type segmentState struct {
	size       int64 // bytes in the .log
	nextOffset int64 // offset after the last batch
	// maxTimestamp is the largest batch max timestamp, -1 when none;
	// offsetOfMaxTimestamp the base offset of the batch that holds it.
	maxTimestamp         int64
	offsetOfMaxTimestamp int64
	// rollTimestamp is when the first batch was appended (its max timestamp
	// when recovered from disk), which segment.ms counts from; -1 when empty.
	rollTimestamp int64
	// bytesSinceIndex counts batch bytes appended since the last index entry.
	bytesSinceIndex int64
	// indexesDirty is set by an append and by recovery's changes to the
	// indexes, and cleared when the indexes are synced (sync, not
	// syncData).
	indexesDirty bool
	// writtenBack is the position up to which the .log's writeback has
	// been started (see writebackBytes).
	writtenBack int64
}

// writebackBytes is how many bytes appended to a segment make it ask the
// OS to start writing them to the device, without waiting (where the FS's
// files can: writebacker). Left alone, the kernel lets dirty pages pile up
// to a share of memory and then throttles every write() while it flushes
// them: at 200 MB/s that is a stall of tens of milliseconds every few GB.
// Writing back as the log grows keeps the dirty pages few and the stalls
// away; it is what RocksDB's bytes_per_sync does.
const writebackBytes = 1 << 20

func segmentPath(dir string, baseOffset int64, ext string) string {
	return path.Join(dir, SegmentFileName(baseOffset, ext))
}

// createSegment creates an empty segment at baseOffset, replacing any files.
// When it fails, it leaves none of the segment's files behind.
func createSegment(fs FS, dir string, baseOffset int64) (*segment, error) {
	s := &segment{fs: fs, dir: dir, baseOffset: baseOffset, path: segmentPath(dir, baseOffset, logExt)}
	f, err := fs.OpenFile(s.path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, noSpace(fmt.Errorf("disk: create segment: %w", err))
	}
	s.log = f
	if err := s.createIndexes(); err != nil {
		if rerr := s.remove(); rerr != nil {
			return nil, fmt.Errorf("%v; removing the segment's files: %w", err, rerr)
		}
		return nil, err
	}
	s.reset()
	return s, nil
}

// openSegment opens the files of an existing segment without reading the
// log; the caller recovers or loads it.
func openSegment(fs FS, dir string, baseOffset int64) (*segment, error) {
	s := &segment{fs: fs, dir: dir, baseOffset: baseOffset, path: segmentPath(dir, baseOffset, logExt)}
	f, err := fs.OpenFile(s.path, os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("disk: open segment: %w", err)
	}
	s.log = f
	size, err := f.Size()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("disk: size of %s: %w", s.path, err)
	}
	s.size = size
	s.reset()
	return s, nil
}

// reset sets the in-memory state of an empty segment (size aside).
func (s *segment) reset() {
	s.nextOffset = s.baseOffset
	s.maxTimestamp = -1
	s.offsetOfMaxTimestamp = s.baseOffset
	s.rollTimestamp = -1
	s.bytesSinceIndex = 0
}

// createIndexes creates both indexes empty, closing any open ones.
func (s *segment) createIndexes() error {
	s.closeIndexes()
	ix, err := CreateOffsetIndex(s.fs, segmentPath(s.dir, s.baseOffset, indexExt), s.baseOffset)
	if err != nil {
		return err
	}
	tix, err := CreateTimeIndex(s.fs, segmentPath(s.dir, s.baseOffset, timeIndexExt), s.baseOffset)
	if err != nil {
		_ = ix.Close()
		return err
	}
	s.index, s.timeIndex = ix, tix
	return nil
}

func (s *segment) closeIndexes() {
	if s.index != nil {
		_ = s.index.Close()
		s.index = nil
	}
	if s.timeIndex != nil {
		_ = s.timeIndex.Close()
		s.timeIndex = nil
	}
}

// append writes one validated batch, whose base offset is already
// s.nextOffset, with one Write, and adds index entries.
func (s *segment) append(batch []byte, h *wire.Header, indexInterval int, now int64) (position int64, err error) {
	position = s.size
	n, err := s.log.Write(batch)
	if err != nil {
		if n > 0 {
			// Cut a partial write so the file ends at a batch boundary.
			if terr := s.log.Truncate(position); terr == nil {
				_, _ = s.log.Seek(position, io.SeekStart)
			}
		}
		return position, noSpace(fmt.Errorf("disk: append to %s: %w", s.path, err))
	}
	if err := s.track(h, position, indexInterval, now); err != nil {
		return position, err
	}
	s.indexesDirty = true
	if s.size-s.writtenBack >= writebackBytes {
		s.startWriteback()
	}
	return position, nil
}

// segmentMark is a segment's state at a point: in memory, and where its
// files ended.
type segmentMark struct {
	state     segmentState
	index     entriesMark[OffsetEntry]
	timeIndex entriesMark[TimeEntry]
}

// mark returns the segment's state now, for rollback.
func (s *segment) mark() segmentMark {
	return segmentMark{state: s.segmentState, index: s.index.mark(), timeIndex: s.timeIndex.mark()}
}

// rollback puts the segment back as it was at m, when since then batches
// and index entries were only appended (and the indexes sealed): the .log
// is cut to its size at m, the indexes lose the entries added since, and
// the state in memory is m's. It needs no room, so it is how a change
// that a full file system cut short is undone.
func (s *segment) rollback(m segmentMark) error {
	if err := s.log.Truncate(m.state.size); err != nil {
		return fmt.Errorf("disk: truncate %s: %w", s.path, err)
	}
	if _, err := s.log.Seek(m.state.size, io.SeekStart); err != nil {
		return fmt.Errorf("disk: seek %s: %w", s.path, err)
	}
	if err := s.index.rollback(m.index); err != nil {
		return err
	}
	if err := s.timeIndex.rollback(m.timeIndex); err != nil {
		return err
	}
	s.segmentState = m.state
	return nil
}

// startWriteback asks the OS to start writing the .log's bytes appended
// since the last call. It is a hint: an error is left to the next sync to
// report.
func (s *segment) startWriteback() {
	if w, ok := s.log.(writebacker); ok {
		_ = w.StartWriteback(s.writtenBack, s.size-s.writtenBack)
	}
	s.writtenBack = s.size
}

// track updates the in-memory state and the indexes for a batch at
// position, at append and on recovery alike. rollTimestamp is when the
// batch counts as written for segment.ms: the clock at append, the batch's
// own timestamp on recovery.
func (s *segment) track(h *wire.Header, position int64, indexInterval int, rollTimestamp int64) error {
	size := int64(h.Size())
	if s.size == 0 {
		s.rollTimestamp = rollTimestamp
	}
	if h.MaxTimestamp > s.maxTimestamp {
		s.maxTimestamp = h.MaxTimestamp
		s.offsetOfMaxTimestamp = h.BaseOffset
	}
	s.size = position + size
	s.nextOffset = h.NextOffset()
	if s.bytesSinceIndex >= int64(indexInterval) {
		if err := s.index.Append(h.BaseOffset, position); err != nil {
			return err
		}
		if err := s.timeIndex.Append(s.maxTimestamp, s.offsetOfMaxTimestamp); err != nil {
			return err
		}
		s.bytesSinceIndex = 0
	}
	s.bytesSinceIndex += size
	return nil
}

// sealTimeIndex appends the segment's largest timestamp to the time index,
// so a closed or inactive segment's maximum is known without a scan.
func (s *segment) sealTimeIndex() error {
	if s.maxTimestamp < 0 {
		return nil
	}
	return s.timeIndex.Append(s.maxTimestamp, s.offsetOfMaxTimestamp)
}

// seal writes out what the indexes of a segment that takes no more appends
// still hold in memory, and lets go of their buffers.
func (s *segment) seal() error {
	if err := s.index.Seal(); err != nil {
		return err
	}
	return s.timeIndex.Seal()
}

// corrupt builds the error for damage at position of the .log.
func (s *segment) corrupt(position int64, err error) *CorruptionError {
	return &CorruptionError{Path: s.path, Offset: position, Err: err}
}

// readHeader reads and checks the header of the batch at position, which
// must have base offset want (or any when want < 0) and lie inside the
// segment. buf must hold wire.HeaderSize bytes.
func (s *segment) readHeader(buf []byte, position, want int64) (wire.Header, error) {
	if position+wire.HeaderSize > s.size {
		return wire.Header{}, s.corrupt(position, fmt.Errorf("%w: header runs past the end of the segment (%d bytes)", wire.ErrShort, s.size))
	}
	buf = buf[:wire.HeaderSize]
	if _, err := s.log.ReadAt(buf, position); err != nil {
		return wire.Header{}, fmt.Errorf("disk: read %s at %d: %w", s.path, position, err)
	}
	h, err := wire.ParseHeader(buf)
	if err != nil {
		return h, s.corrupt(position, err)
	}
	if position+int64(h.Size()) > s.size {
		return h, s.corrupt(position, fmt.Errorf("%w: batch of %d bytes runs past the end of the segment (%d bytes)", wire.ErrShort, h.Size(), s.size))
	}
	if want >= 0 && h.BaseOffset != want {
		return h, s.corrupt(position, fmt.Errorf("disk: batch base offset %d, want %d", h.BaseOffset, want))
	}
	if err := wire.CheckStructure(&h); err != nil {
		return h, s.corrupt(position, err)
	}
	return h, nil
}

// tail is what scanTail learns from the headers at the end of a segment.
type tail struct {
	// end is the next offset after the last sound batch: the segment's next
	// offset when not damaged.
	end                  int64
	maxTimestamp         int64 // -1 when none
	offsetOfMaxTimestamp int64
	// damaged is set when a header is damaged or runs past the file.
	damaged bool
}

// scanTail reads the headers (no CRC) of the batches from the one at
// from.Position, whose base offset must be from.Offset, to the end of the
// file. buf must hold wire.HeaderSize bytes. Only I/O errors are returned;
// damage sets damaged.
func (s *segment) scanTail(buf []byte, from OffsetEntry) (tail, error) {
	t := tail{end: from.Offset, maxTimestamp: -1, offsetOfMaxTimestamp: from.Offset}
	for position := from.Position; position < s.size; {
		h, err := s.readHeader(buf, position, t.end)
		var ce *CorruptionError
		if errors.As(err, &ce) {
			t.damaged = true
			return t, nil
		}
		if err != nil {
			return t, err
		}
		if h.MaxTimestamp > t.maxTimestamp {
			t.maxTimestamp, t.offsetOfMaxTimestamp = h.MaxTimestamp, h.BaseOffset
		}
		t.end = h.NextOffset()
		position += int64(h.Size())
	}
	return t, nil
}

// find returns the position and header of the batch holding offset, which
// must be in [baseOffset, nextOffset): an index lookup, then a scan of
// headers.
func (s *segment) find(buf []byte, offset int64) (int64, wire.Header, error) {
	e := s.index.Lookup(offset)
	position, want := e.Position, e.Offset
	for {
		h, err := s.readHeader(buf, position, want)
		if err != nil {
			return position, h, err
		}
		if h.LastOffset() >= offset {
			return position, h, nil
		}
		position += int64(h.Size())
		want = h.NextOffset()
	}
}

// truncateTo removes every batch whose last offset is >= offset, which
// must be in [baseOffset, nextOffset), and cuts the indexes.
func (s *segment) truncateTo(buf []byte, offset int64, indexInterval int) error {
	position, h, err := s.find(buf, offset)
	if err != nil {
		return err
	}
	if err := s.log.Truncate(position); err != nil {
		return fmt.Errorf("disk: truncate %s: %w", s.path, err)
	}
	if _, err := s.log.Seek(position, io.SeekStart); err != nil {
		return fmt.Errorf("disk: seek %s: %w", s.path, err)
	}
	s.size = position
	s.nextOffset = h.BaseOffset
	if err := s.index.TruncateTo(h.BaseOffset); err != nil {
		return err
	}
	if err := s.timeIndex.TruncateTo(h.BaseOffset); err != nil {
		return err
	}
	// The maximum timestamp and index spacing of what stays are recomputed
	// from the headers: cheap next to the I/O of a truncation.
	return s.rescanState(buf, indexInterval)
}

// clear removes every batch and index entry, in place, and makes that
// durable.
func (s *segment) clear() error {
	if err := s.log.Truncate(0); err != nil {
		return fmt.Errorf("disk: truncate %s: %w", s.path, err)
	}
	if _, err := s.log.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("disk: seek %s: %w", s.path, err)
	}
	if err := s.index.Reset(); err != nil {
		return err
	}
	if err := s.timeIndex.Reset(); err != nil {
		return err
	}
	s.segmentState = segmentState{}
	s.reset()
	return s.sync()
}

// rescanState recomputes nextOffset, timestamps and index spacing from the
// headers of the segment, without touching the indexes.
func (s *segment) rescanState(buf []byte, indexInterval int) error {
	s.reset()
	var position int64
	for position < s.size {
		h, err := s.readHeader(buf, position, s.nextOffset)
		if err != nil {
			return err
		}
		if s.rollTimestamp < 0 {
			s.rollTimestamp = h.MaxTimestamp
		}
		if h.MaxTimestamp > s.maxTimestamp {
			s.maxTimestamp = h.MaxTimestamp
			s.offsetOfMaxTimestamp = h.BaseOffset
		}
		s.nextOffset = h.NextOffset()
		position += int64(h.Size())
	}
	s.bytesSinceIndex = s.size
	if e, ok := s.index.Last(); ok {
		s.bytesSinceIndex = s.size - e.Position
	}
	return nil
}

// sync makes the .log and both indexes durable.
func (s *segment) sync() error {
	if err := s.syncData(); err != nil {
		return err
	}
	return s.syncIndexes()
}

// syncIndexes makes both indexes durable.
func (s *segment) syncIndexes() error {
	if err := s.index.Sync(); err != nil {
		return err
	}
	if err := s.timeIndex.Sync(); err != nil {
		return err
	}
	s.indexesDirty = false
	return nil
}

// syncData makes the segment's batches durable with one fsync of the .log
// (fdatasync where it can).
// Its index entries are written to the files but not synced: indexes are
// derived data, and a group commit should cost one fsync, not three. They
// are synced when the segment is sealed by a roll and when the log closes.
func (s *segment) syncData() error {
	if err := s.flushIndexes(); err != nil {
		return err
	}
	if err := syncData(s.log); err != nil {
		return fmt.Errorf("disk: sync %s: %w", s.path, err)
	}
	return nil
}

// settle fsyncs those of the segment's files that hold unsynced bytes,
// index entries still in memory included.
func (s *segment) settle() error {
	if s.indexesDirty || unsynced(s.index.file) || unsynced(s.timeIndex.file) {
		if err := s.syncIndexes(); err != nil {
			return err
		}
	}
	if unsynced(s.log) {
		if err := s.log.Sync(); err != nil {
			return fmt.Errorf("disk: sync %s: %w", s.path, err)
		}
	}
	return nil
}

// flushIndexesIfMany writes the buffered entries of each index to its file,
// without syncing it, when at least least of them wait.
func (s *segment) flushIndexesIfMany(least int) error {
	if err := s.index.flushIfMany(least); err != nil {
		return err
	}
	return s.timeIndex.flushIfMany(least)
}

// flushIndexes writes the buffered entries of both indexes to their files,
// without syncing them.
func (s *segment) flushIndexes() error { return s.flushIndexesIfMany(0) }

// close closes the files without syncing and returns the first error.
func (s *segment) close() error {
	var err error
	if s.log != nil {
		err = s.log.Close()
		s.log = nil
	}
	if s.index != nil {
		if ierr := s.index.Close(); err == nil {
			err = ierr
		}
		s.index = nil
	}
	if s.timeIndex != nil {
		if terr := s.timeIndex.Close(); err == nil {
			err = terr
		}
		s.timeIndex = nil
	}
	return err
}

// remove closes and deletes the segment's files, the .log first so that a
// crash leaves at worst orphan indexes, which Open removes.
func (s *segment) remove() error {
	_ = s.close()
	for _, ext := range []string{logExt, indexExt, timeIndexExt} {
		if err := s.fs.Remove(segmentPath(s.dir, s.baseOffset, ext)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("disk: remove segment: %w", err)
		}
	}
	return nil
}

// empty reports whether the segment holds no batch.
func (s *segment) empty() bool { return s.size == 0 }

// maxRelativeOffset bounds the offsets a segment may hold: index entries
// store offsets relative to the base in 32 bits.
const maxRelativeOffset = math.MaxUint32
