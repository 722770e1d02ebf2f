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
	fs         FS
	path       string
	baseOffset int64
	file       File
	entries    indexEntries[OffsetEntry]
}

// newOffsetIndex is an index of the segment at baseOffset over f.
func newOffsetIndex(fs FS, path string, baseOffset int64, f File) *OffsetIndex {
	ix := &OffsetIndex{fs: fs, path: path, baseOffset: baseOffset, file: f}
	ix.entries = indexEntries[OffsetEntry]{
		size:   OffsetIndexEntrySize,
		decode: func(b []byte) OffsetEntry { return decodeOffsetEntry(b, baseOffset) },
		encode: func(dst []byte, e OffsetEntry) []byte { return AppendOffsetEntry(dst, e, baseOffset) },
	}
	return ix
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
		return nil, fmt.Errorf("disk: create index: %w", err)
	}
	return newOffsetIndex(fs, path, baseOffset, f), nil
}

// openIndexFile opens or creates path and reads all of it.
func openIndexFile(fs FS, path string) (File, []byte, error) {
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("disk: open index: %w", err)
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

// BaseOffset returns the base offset of the segment the index belongs to.
func (ix *OffsetIndex) BaseOffset() int64 { return ix.baseOffset }

// Path returns the file's path.
func (ix *OffsetIndex) Path() string { return ix.path }

// Entries returns the number of entries.
func (ix *OffsetIndex) Entries() int { return ix.entries.count() }

// Seal writes the entries still in memory to the file once the segment is
// sealed (rolled or recovered), and lets go of their buffer.
func (ix *OffsetIndex) Seal() error {
	if ix.file == nil {
		return ErrClosed
	}
	if err := ix.flush(); err != nil {
		return err
	}
	ix.entries.release()
	return nil
}

// Entry returns entry i, 0 <= i < Entries(); one that cannot be read
// compares above every other.
func (ix *OffsetIndex) Entry(i int) OffsetEntry {
	e, err := ix.entries.at(ix.file, i)
	if err != nil {
		return unreadableOffsetEntry
	}
	return e
}

// SizeBytes returns the size of the entries in bytes.
func (ix *OffsetIndex) SizeBytes() int64 {
	return int64(ix.entries.count()) * OffsetIndexEntrySize
}

// Last returns the last entry, and false when the index is empty.
func (ix *OffsetIndex) Last() (OffsetEntry, bool) { return ix.entries.lastEntry() }

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
	if ix.entries.add(OffsetEntry{Offset: offset, Position: position}) {
		return ix.flush()
	}
	return nil
}

// flush writes the pending entries to the file.
func (ix *OffsetIndex) flush() error {
	if err := ix.entries.flush(ix.file); err != nil {
		return fmt.Errorf("disk: write index %s: %w", ix.path, err)
	}
	return nil
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

// TruncateTo drops the entries with Offset >= offset, from memory and file.
func (ix *OffsetIndex) TruncateTo(offset int64) error {
	if ix.file == nil {
		return ErrClosed
	}
	i, prev, err := ix.entries.search(ix.file, func(e OffsetEntry) bool { return e.Offset >= offset })
	if err == nil {
		err = ix.entries.truncate(ix.file, i, prev)
	}
	if err != nil {
		return fmt.Errorf("disk: truncate index %s: %w", ix.path, err)
	}
	return nil
}

// Reset drops every entry: TruncateTo(baseOffset).
func (ix *OffsetIndex) Reset() error { return ix.TruncateTo(ix.baseOffset) }

// Sync makes every appended entry durable.
func (ix *OffsetIndex) Sync() error {
	if ix.file == nil {
		return ErrClosed
	}
	if err := ix.flush(); err != nil {
		return err
	}
	if err := ix.file.Sync(); err != nil {
		return fmt.Errorf("disk: sync index %s: %w", ix.path, err)
	}
	return nil
}

// Close closes the file; later calls return ErrClosed. It does not sync.
func (ix *OffsetIndex) Close() error {
	if ix.file == nil {
		return ErrClosed
	}
	err := ix.flush()
	if cerr := ix.file.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("disk: close index %s: %w", ix.path, cerr)
	}
	ix.file = nil
	return err
}

// Rename moves the file to newPath; the index stays open. The caller syncs
// the directories.
func (ix *OffsetIndex) Rename(newPath string) error {
	if ix.file == nil {
		return ErrClosed
	}
	if err := ix.fs.Rename(ix.path, newPath); err != nil {
		return fmt.Errorf("disk: rename index: %w", err)
	}
	ix.path = newPath
	return nil
}

// unreadableOffsetEntry stands for an index entry that could not be read.
var unreadableOffsetEntry = OffsetEntry{Offset: math.MaxInt64, Position: math.MaxInt64}
