package disk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// OffsetIndexEntrySize is the size of one .index entry. Never change it:
// it is the on-disk format (see the package doc).
const OffsetIndexEntrySize = 8

// OffsetEntry maps an offset to the byte position of its batch in the
// segment's .log.
type OffsetEntry struct {
	Offset   int64
	Position int64
}

// OffsetIndex is a segment's sparse offset index (.index): entries of
// relative offset and .log position, both strictly increasing. Appended
// entries are written to the end of the file in groups, and lookups read
// the file through a sparse level kept in memory (see indexEntries); Sync
// makes them durable. The index is derived data: a damaged file is rebuilt
// from the .log, not trusted.
//
// Not safe for concurrent use: the owner of the segment serialises access.
type OffsetIndex struct {
	indexFile[OffsetEntry]
}

// newOffsetIndex is an index of the segment at baseOffset over f.
func newOffsetIndex(fs FS, path string, baseOffset int64, f File) *OffsetIndex {
	return &OffsetIndex{indexFile[OffsetEntry]{
		fs: fs, path: path, baseOffset: baseOffset, file: f, kind: "index",
		entries: indexEntries[OffsetEntry]{
			size:   OffsetIndexEntrySize,
			decode: func(b []byte) OffsetEntry { return decodeOffsetEntry(b, baseOffset) },
			encode: func(dst []byte, e OffsetEntry) []byte { return AppendOffsetEntry(dst, e, baseOffset) },
		},
		offsetOf:   func(e OffsetEntry) int64 { return e.Offset },
		unreadable: OffsetEntry{Offset: math.MaxInt64, Position: math.MaxInt64},
	}}
}

// OpenOffsetIndex opens the index at path, creating an empty one if it is
// missing. A file whose size is not a multiple of 8 or whose entries do not
// strictly increase returns a *CorruptionError with Path set, and the file
// is left closed: the caller rebuilds it with CreateOffsetIndex.
func OpenOffsetIndex(fs FS, path string, baseOffset int64) (*OffsetIndex, error) {
	f, b, err := openIndexFile(fs, path)
	if err != nil {
		return nil, err
	}
	entries, err := DecodeOffsetIndex(b, baseOffset)
	if err != nil {
		_ = f.Close()
		return nil, withPath(err, path)
	}
	ix := newOffsetIndex(fs, path, baseOffset, f)
	ix.entries.load(entries)
	return ix, nil
}

// CreateOffsetIndex creates a new, empty index at path, truncating any
// file there.
func CreateOffsetIndex(fs FS, path string, baseOffset int64) (*OffsetIndex, error) {
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, noSpace(fmt.Errorf("disk: create index: %w", err))
	}
	return newOffsetIndex(fs, path, baseOffset, f), nil
}

// openIndexFile opens or creates path and reads all of it.
func openIndexFile(fs FS, path string) (File, []byte, error) {
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, noSpace(fmt.Errorf("disk: open index: %w", err))
	}
	b, err := readAll(f)
	if err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("disk: read index %s: %w", path, err)
	}
	return f, b, nil
}

// readAll reads a whole file through ReadAt.
func readAll(f File) ([]byte, error) {
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, size)
	n, err := f.ReadAt(b, 0)
	if err != nil && !(errors.Is(err, io.EOF) && n == len(b)) {
		return nil, err
	}
	return b, nil
}

// DecodeOffsetIndex decodes the bytes of a .index file. A size that is not
// a multiple of 8, or entries that do not strictly increase in both
// offset and position, give a *CorruptionError (without Path) at the byte
// where the damage starts.
func DecodeOffsetIndex(b []byte, baseOffset int64) ([]OffsetEntry, error) {
	n := len(b) / OffsetIndexEntrySize
	if len(b)%OffsetIndexEntrySize != 0 {
		return nil, corruptf(int64(n*OffsetIndexEntrySize), "index size %d is not a multiple of %d", len(b), OffsetIndexEntrySize)
	}
	entries := make([]OffsetEntry, n)
	for i := range entries {
		e := decodeOffsetEntry(b[i*OffsetIndexEntrySize:], baseOffset)
		if i > 0 {
			prev := entries[i-1]
			if e.Offset <= prev.Offset || e.Position <= prev.Position {
				return nil, corruptf(int64(i*OffsetIndexEntrySize),
					"index entry %d (offset %d, position %d) does not follow (offset %d, position %d)",
					i, e.Offset, e.Position, prev.Offset, prev.Position)
			}
		}
		entries[i] = e
	}
	return entries, nil
}

// decodeOffsetEntry decodes the entry at the start of b.
func decodeOffsetEntry(b []byte, baseOffset int64) OffsetEntry {
	return OffsetEntry{
		Offset:   baseOffset + int64(binary.BigEndian.Uint32(b)),
		Position: int64(binary.BigEndian.Uint32(b[4:])),
	}
}

// AppendOffsetEntry appends the 8 bytes of e, relative to baseOffset, to
// dst. The caller checks that both fields fit.
func AppendOffsetEntry(dst []byte, e OffsetEntry, baseOffset int64) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(e.Offset-baseOffset))
	return binary.BigEndian.AppendUint32(dst, uint32(e.Position))
}

// Append adds an entry. offset must be at least the base offset and less
// than base offset + 2^32, position must be in [0, 2^32), and both must be
// greater than the last entry's; otherwise it returns an error wrapping
// ErrInvalidEntry and writes nothing.
func (ix *OffsetIndex) Append(offset, position int64) error {
	if ix.file == nil {
		return ErrClosed
	}
	if offset < ix.baseOffset || offset-ix.baseOffset > math.MaxUint32 {
		return fmt.Errorf("%w: offset %d outside [%d, %d] of %s", ErrInvalidEntry, offset, ix.baseOffset, ix.baseOffset+math.MaxUint32, ix.path)
	}
	if position < 0 || position > math.MaxUint32 {
		return fmt.Errorf("%w: position %d does not fit 32 bits in %s", ErrInvalidEntry, position, ix.path)
	}
	if last, ok := ix.Last(); ok && (offset <= last.Offset || position <= last.Position) {
		return fmt.Errorf("%w: (offset %d, position %d) does not follow (offset %d, position %d) in %s",
			ErrInvalidEntry, offset, position, last.Offset, last.Position, ix.path)
	}
	return ix.add(OffsetEntry{Offset: offset, Position: position})
}

// Lookup returns the entry with the largest offset <= offset, or
// {baseOffset, 0} when there is none: the position to scan the .log from.
func (ix *OffsetIndex) Lookup(offset int64) OffsetEntry {
	return ix.lookup(func(e OffsetEntry) bool { return e.Offset > offset })
}

// LookupPosition returns the entry with the largest position <= position,
// or {baseOffset, 0} when there is none.
func (ix *OffsetIndex) LookupPosition(position int64) OffsetEntry {
	return ix.lookup(func(e OffsetEntry) bool { return e.Position > position })
}

// lookup returns the last entry before the first for which after holds,
// or {baseOffset, 0}. Entries it cannot read are after every other.
func (ix *OffsetIndex) lookup(after func(OffsetEntry) bool) OffsetEntry {
	i, prev, _ := ix.entries.search(ix.file, after)
	if i == 0 {
		return OffsetEntry{Offset: ix.baseOffset, Position: 0}
	}
	return prev
}
