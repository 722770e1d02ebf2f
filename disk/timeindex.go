package disk

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"sort"
)

// TimeIndexEntrySize is the size of one .timeindex entry. Never change it:
// it is the on-disk format (see the package doc).
const TimeIndexEntrySize = 12

// TimeEntry maps a timestamp (ms since the epoch) to the offset of the
// first batch whose largest timestamp reached it.
type TimeEntry struct {
	Timestamp int64
	Offset    int64
}

// TimeIndex is a segment's time index (.timeindex): entries of timestamp
// and relative offset, timestamps strictly increasing and offsets never
// decreasing. Entries are kept in memory and each Append writes its entry
// to the end of the file; Sync makes them durable. Derived data like the
// offset index: a damaged file is rebuilt, not trusted.
//
// Not safe for concurrent use: the owner of the segment serialises access.
type TimeIndex struct {
	fs         FS
	path       string
	baseOffset int64
	file       File
	entries    []TimeEntry
	// pending tracks the entries appended but not yet written to the file.
	pending pendingEntries
	// sealed is set by Seal: the entries are then read from the file, not
	// held in memory, and sealedCount says how many there are.
	sealed      bool
	sealedCount int
	readBuf     [TimeIndexEntrySize]byte
}

// OpenTimeIndex opens the time index at path, creating an empty one if it
// is missing. A file whose size is not a multiple of 12, with a negative
// timestamp, timestamps that do not strictly increase or offsets that
// decrease returns a *CorruptionError with Path set, and the file is left
// closed: the caller rebuilds it with CreateTimeIndex.
func OpenTimeIndex(fs FS, path string, baseOffset int64) (*TimeIndex, error) {
	f, b, err := openIndexFile(fs, path)
	if err != nil {
		return nil, err
	}
	entries, err := DecodeTimeIndex(b, baseOffset)
	if err != nil {
		_ = f.Close()
		return nil, withPath(err, path)
	}
	return &TimeIndex{fs: fs, path: path, baseOffset: baseOffset, file: f, entries: entries, pending: pendingEntries{persisted: len(entries)}}, nil
}

// CreateTimeIndex creates a new, empty time index at path, truncating any
// file there.
func CreateTimeIndex(fs FS, path string, baseOffset int64) (*TimeIndex, error) {
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("disk: create time index: %w", err)
	}
	return &TimeIndex{fs: fs, path: path, baseOffset: baseOffset, file: f}, nil
}

// DecodeTimeIndex decodes the bytes of a .timeindex file. A size that is
// not a multiple of 12, a negative timestamp, timestamps that do not
// strictly increase or offsets that decrease give a *CorruptionError
// (without Path) at the byte where the damage starts.
func DecodeTimeIndex(b []byte, baseOffset int64) ([]TimeEntry, error) {
	n := len(b) / TimeIndexEntrySize
	if len(b)%TimeIndexEntrySize != 0 {
		return nil, corruptf(int64(n*TimeIndexEntrySize), "time index size %d is not a multiple of %d", len(b), TimeIndexEntrySize)
	}
	entries := make([]TimeEntry, n)
	for i := range entries {
		p := b[i*TimeIndexEntrySize:]
		e := TimeEntry{
			Timestamp: int64(binary.BigEndian.Uint64(p)),
			Offset:    baseOffset + int64(binary.BigEndian.Uint32(p[8:])),
		}
		at := int64(i * TimeIndexEntrySize)
		if e.Timestamp < 0 {
			return nil, corruptf(at, "time index entry %d has negative timestamp %d", i, e.Timestamp)
		}
		if i > 0 {
			prev := entries[i-1]
			if e.Timestamp <= prev.Timestamp || e.Offset < prev.Offset {
				return nil, corruptf(at, "time index entry %d (timestamp %d, offset %d) does not follow (timestamp %d, offset %d)",
					i, e.Timestamp, e.Offset, prev.Timestamp, prev.Offset)
			}
		}
		entries[i] = e
	}
	return entries, nil
}

// AppendTimeEntry appends the 12 bytes of e, relative to baseOffset, to
// dst. The caller checks that the offset fits.
func AppendTimeEntry(dst []byte, e TimeEntry, baseOffset int64) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.Timestamp))
	return binary.BigEndian.AppendUint32(dst, uint32(e.Offset-baseOffset))
}

// BaseOffset returns the base offset of the segment the index belongs to.
func (ti *TimeIndex) BaseOffset() int64 { return ti.baseOffset }

// Path returns the file's path.
func (ti *TimeIndex) Path() string { return ti.path }

// Entries returns the number of entries.
func (ti *TimeIndex) Entries() int { return ti.count() }

// count is the number of entries, in memory or, sealed, in the file.
func (ti *TimeIndex) count() int {
	if ti.sealed {
		return ti.sealedCount
	}
	return len(ti.entries)
}

// at returns entry i. Sealed, it reads the file; an entry that cannot be
// read compares above every other, so a search falls back to an earlier
// entry, from which a reader scans forward: slower, never wrong.
func (ti *TimeIndex) at(i int) TimeEntry {
	if !ti.sealed {
		return ti.entries[i]
	}
	if _, err := ti.file.ReadAt(ti.readBuf[:], int64(i)*TimeIndexEntrySize); err != nil {
		return unreadableTimeEntry
	}
	return TimeEntry{
		Timestamp: int64(binary.BigEndian.Uint64(ti.readBuf[:])),
		Offset:    ti.baseOffset + int64(binary.BigEndian.Uint32(ti.readBuf[8:])),
	}
}

// Seal drops the entries from memory once the segment is sealed (rolled or
// recovered): lookups then search the file, so a log's memory does not
// grow with the data it holds. An Append or TruncateTo loads them again.
func (ti *TimeIndex) Seal() error {
	if ti.file == nil {
		return ErrClosed
	}
	if ti.sealed {
		return nil
	}
	if err := ti.flush(); err != nil {
		return err
	}
	ti.sealedCount = len(ti.entries)
	ti.entries = nil
	ti.sealed = true
	return nil
}

// unseal loads the entries of a sealed index back into memory.
func (ti *TimeIndex) unseal() error {
	if !ti.sealed {
		return nil
	}
	b := make([]byte, ti.sealedCount*TimeIndexEntrySize)
	if n, err := ti.file.ReadAt(b, 0); n < len(b) {
		return fmt.Errorf("disk: read index %s: %w", ti.path, err)
	}
	entries, err := DecodeTimeIndex(b, ti.baseOffset)
	if err != nil {
		return withPath(err, ti.path)
	}
	ti.entries, ti.sealed, ti.sealedCount = entries, false, 0
	return nil
}

// Entry returns entry i, 0 <= i < Entries().
func (ti *TimeIndex) Entry(i int) TimeEntry { return ti.at(i) }

// SizeBytes returns the size of the entries in bytes.
func (ti *TimeIndex) SizeBytes() int64 { return int64(ti.count()) * TimeIndexEntrySize }

// Last returns the last entry, and false when the index is empty.
func (ti *TimeIndex) Last() (TimeEntry, bool) {
	n := ti.count()
	if n == 0 {
		return TimeEntry{}, false
	}
	return ti.at(n - 1), true
}

// Append adds an entry. A timestamp that is negative (no timestamp) or not
// greater than the last entry's is ignored and Append returns nil. offset
// must be in [base offset, base offset + 2^32) and not less than the last
// entry's; otherwise it returns an error wrapping ErrInvalidEntry and
// writes nothing.
func (ti *TimeIndex) Append(timestamp, offset int64) error {
	if ti.file == nil {
		return ErrClosed
	}
	if err := ti.unseal(); err != nil {
		return err
	}
	last, ok := ti.Last()
	if timestamp < 0 || (ok && timestamp <= last.Timestamp) {
		return nil
	}
	if offset < ti.baseOffset || offset-ti.baseOffset > math.MaxUint32 {
		return fmt.Errorf("%w: offset %d outside [%d, %d] of %s", ErrInvalidEntry, offset, ti.baseOffset, ti.baseOffset+math.MaxUint32, ti.path)
	}
	if ok && offset < last.Offset {
		return fmt.Errorf("%w: offset %d is before the last entry's %d in %s", ErrInvalidEntry, offset, last.Offset, ti.path)
	}
	ti.entries = append(ti.entries, TimeEntry{Timestamp: timestamp, Offset: offset})
	if len(ti.entries)-ti.pending.persisted >= indexFlushEntries {
		return ti.flush()
	}
	return nil
}

// Lookup returns the entry with the largest timestamp <= timestamp, or
// {-1, baseOffset} when there is none.
func (ti *TimeIndex) Lookup(timestamp int64) TimeEntry {
	i := sort.Search(ti.count(), func(i int) bool { return ti.at(i).Timestamp > timestamp })
	if i == 0 {
		return TimeEntry{Timestamp: -1, Offset: ti.baseOffset}
	}
	return ti.at(i - 1)
}

// flush writes the pending entries to the file.
func (ti *TimeIndex) flush() error {
	err := ti.pending.flush(ti.file, TimeIndexEntrySize, len(ti.entries), func(dst []byte, i int) []byte {
		return AppendTimeEntry(dst, ti.entries[i], ti.baseOffset)
	})
	if err != nil {
		return fmt.Errorf("disk: write time index %s: %w", ti.path, err)
	}
	return nil
}

// TruncateTo drops the entries with Offset >= offset, from memory and file.
func (ti *TimeIndex) TruncateTo(offset int64) error {
	if ti.file == nil {
		return ErrClosed
	}
	if err := ti.unseal(); err != nil {
		return err
	}
	i := sort.Search(ti.count(), func(i int) bool { return ti.at(i).Offset >= offset })
	if err := ti.pending.truncate(ti.file, TimeIndexEntrySize, i); err != nil {
		return fmt.Errorf("disk: truncate time index %s: %w", ti.path, err)
	}
	ti.entries = ti.entries[:i]
	return nil
}

// Reset drops every entry.
func (ti *TimeIndex) Reset() error { return ti.TruncateTo(math.MinInt64) }

// Sync makes every appended entry durable.
func (ti *TimeIndex) Sync() error {
	if ti.file == nil {
		return ErrClosed
	}
	if err := ti.flush(); err != nil {
		return err
	}
	if err := ti.file.Sync(); err != nil {
		return fmt.Errorf("disk: sync time index %s: %w", ti.path, err)
	}
	return nil
}

// Close closes the file; later calls return ErrClosed. It does not sync.
func (ti *TimeIndex) Close() error {
	if ti.file == nil {
		return ErrClosed
	}
	err := ti.flush()
	if cerr := ti.file.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("disk: close time index %s: %w", ti.path, cerr)
	}
	ti.file = nil
	return err
}

// Rename moves the file to newPath; the index stays open. The caller syncs
// the directories.
func (ti *TimeIndex) Rename(newPath string) error {
	if ti.file == nil {
		return ErrClosed
	}
	if err := ti.fs.Rename(ti.path, newPath); err != nil {
		return fmt.Errorf("disk: rename time index: %w", err)
	}
	ti.path = newPath
	return nil
}

// unreadableTimeEntry stands for a time index entry that could not be read.
var unreadableTimeEntry = TimeEntry{Timestamp: math.MaxInt64, Offset: math.MaxInt64}
