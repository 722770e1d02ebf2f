package disk

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
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
// decreasing. Kept as the offset index is (see indexEntries); Sync makes
// the entries durable. Derived data like the offset index: a damaged file
// is rebuilt, not trusted.
//
// Not safe for concurrent use: the owner of the segment serialises access.
type TimeIndex struct {
	indexFile[TimeEntry]
}

// newTimeIndex is a time index of the segment at baseOffset over f.
func newTimeIndex(fs FS, path string, baseOffset int64, f File) *TimeIndex {
	return &TimeIndex{indexFile[TimeEntry]{
		fs: fs, path: path, baseOffset: baseOffset, file: f, kind: "time index",
		entries: indexEntries[TimeEntry]{
			size:   TimeIndexEntrySize,
			decode: func(b []byte) TimeEntry { return decodeTimeEntry(b, baseOffset) },
			encode: func(dst []byte, e TimeEntry) []byte { return AppendTimeEntry(dst, e, baseOffset) },
		},
		offsetOf:   func(e TimeEntry) int64 { return e.Offset },
		unreadable: TimeEntry{Timestamp: math.MaxInt64, Offset: math.MaxInt64},
	}}
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
	ti := newTimeIndex(fs, path, baseOffset, f)
	ti.entries.load(entries)
	return ti, nil
}

// CreateTimeIndex creates a new, empty time index at path, truncating any
// file there.
func CreateTimeIndex(fs FS, path string, baseOffset int64) (*TimeIndex, error) {
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, noSpace(fmt.Errorf("disk: create time index: %w", err))
	}
	return newTimeIndex(fs, path, baseOffset, f), nil
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
		e := decodeTimeEntry(b[i*TimeIndexEntrySize:], baseOffset)
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

// decodeTimeEntry decodes the entry at the start of b.
func decodeTimeEntry(b []byte, baseOffset int64) TimeEntry {
	return TimeEntry{
		Timestamp: int64(binary.BigEndian.Uint64(b)),
		Offset:    baseOffset + int64(binary.BigEndian.Uint32(b[8:])),
	}
}

// AppendTimeEntry appends the 12 bytes of e, relative to baseOffset, to
// dst. The caller checks that the offset fits.
func AppendTimeEntry(dst []byte, e TimeEntry, baseOffset int64) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.Timestamp))
	return binary.BigEndian.AppendUint32(dst, uint32(e.Offset-baseOffset))
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
	return ti.add(TimeEntry{Timestamp: timestamp, Offset: offset})
}

// Lookup returns the entry with the largest timestamp <= timestamp, or
// {-1, baseOffset} when there is none. Entries it cannot read are after
// every other.
func (ti *TimeIndex) Lookup(timestamp int64) TimeEntry {
	i, prev, _ := ti.entries.search(ti.file, func(e TimeEntry) bool { return e.Timestamp > timestamp })
	if i == 0 {
		return TimeEntry{Timestamp: -1, Offset: ti.baseOffset}
	}
	return prev
}
