package disk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
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
// relative offset and .log position, both strictly increasing. The entries
// are kept in memory and each Append writes its entry to the end of the
// file; Sync makes them durable. The index is derived data: a damaged file
// is rebuilt from the .log, not trusted.
//
// Not safe for concurrent use: the owner of the segment serialises access.
type OffsetIndex struct {
	fs         FS
	path       string
	baseOffset int64
	file       File
	entries    []OffsetEntry
	// pending tracks the entries appended but not yet written to the file.
	pending pendingEntries
	// sealed is set by Seal: the entries are then read from the file, not
	// held in memory, and sealedCount says how many there are.
	sealed      bool
	sealedCount int
	readBuf     [OffsetIndexEntrySize]byte
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
	return &OffsetIndex{fs: fs, path: path, baseOffset: baseOffset, file: f, entries: entries, pending: pendingEntries{persisted: len(entries)}}, nil
}

// CreateOffsetIndex creates a new, empty index at path, truncating any
// file there.
func CreateOffsetIndex(fs FS, path string, baseOffset int64) (*OffsetIndex, error) {
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("disk: create index: %w", err)
	}
	return &OffsetIndex{fs: fs, path: path, baseOffset: baseOffset, file: f}, nil
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
		p := b[i*OffsetIndexEntrySize:]
		e := OffsetEntry{
			Offset:   baseOffset + int64(binary.BigEndian.Uint32(p)),
			Position: int64(binary.BigEndian.Uint32(p[4:])),
		}
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
func (ix *OffsetIndex) Entries() int { return ix.count() }

// count is the number of entries, in memory or, sealed, in the file.
func (ix *OffsetIndex) count() int {
	if ix.sealed {
		return ix.sealedCount
	}
	return len(ix.entries)
}

// at returns entry i. Sealed, it reads the file; an entry that cannot be
// read compares above every other, so a search falls back to an earlier
// entry, from which a reader scans forward: slower, never wrong.
func (ix *OffsetIndex) at(i int) OffsetEntry {
	if !ix.sealed {
		return ix.entries[i]
	}
	if _, err := ix.file.ReadAt(ix.readBuf[:], int64(i)*OffsetIndexEntrySize); err != nil {
		return unreadableOffsetEntry
	}
	return OffsetEntry{
		Offset:   ix.baseOffset + int64(binary.BigEndian.Uint32(ix.readBuf[:])),
		Position: int64(binary.BigEndian.Uint32(ix.readBuf[4:])),
	}
}

// Seal drops the entries from memory once the segment is sealed (rolled or
// recovered): lookups then search the file, so a log's memory does not
// grow with the data it holds. An Append or TruncateTo loads them again.
func (ix *OffsetIndex) Seal() error {
	if ix.file == nil {
		return ErrClosed
	}
	if ix.sealed {
		return nil
	}
	if err := ix.flush(); err != nil {
		return err
	}
	ix.sealedCount = len(ix.entries)
	ix.entries = nil
	ix.sealed = true
	return nil
}

// unseal loads the entries of a sealed index back into memory.
func (ix *OffsetIndex) unseal() error {
	if !ix.sealed {
		return nil
	}
	b := make([]byte, ix.sealedCount*OffsetIndexEntrySize)
	if n, err := ix.file.ReadAt(b, 0); n < len(b) {
		return fmt.Errorf("disk: read index %s: %w", ix.path, err)
	}
	entries, err := DecodeOffsetIndex(b, ix.baseOffset)
	if err != nil {
		return withPath(err, ix.path)
	}
	ix.entries, ix.sealed, ix.sealedCount = entries, false, 0
	return nil
}

// Entry returns entry i, 0 <= i < Entries().
func (ix *OffsetIndex) Entry(i int) OffsetEntry { return ix.at(i) }

// SizeBytes returns the size of the entries in bytes.
func (ix *OffsetIndex) SizeBytes() int64 {
	return int64(ix.count()) * OffsetIndexEntrySize
}

// Last returns the last entry, and false when the index is empty.
func (ix *OffsetIndex) Last() (OffsetEntry, bool) {
	n := ix.count()
	if n == 0 {
		return OffsetEntry{}, false
	}
	return ix.at(n - 1), true
}

// Append adds an entry. offset must be at least the base offset and less
// than base offset + 2^32, position must be in [0, 2^32), and both must be
// greater than the last entry's; otherwise it returns an error wrapping
// ErrInvalidEntry and writes nothing.
func (ix *OffsetIndex) Append(offset, position int64) error {
	if ix.file == nil {
		return ErrClosed
	}
	if err := ix.unseal(); err != nil {
		return err
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
	ix.entries = append(ix.entries, OffsetEntry{Offset: offset, Position: position})
	if len(ix.entries)-ix.pending.persisted >= indexFlushEntries {
		return ix.flush()
	}
	return nil
}

// flush writes the pending entries to the file.
func (ix *OffsetIndex) flush() error {
	err := ix.pending.flush(ix.file, OffsetIndexEntrySize, len(ix.entries), func(dst []byte, i int) []byte {
		return AppendOffsetEntry(dst, ix.entries[i], ix.baseOffset)
	})
	if err != nil {
		return fmt.Errorf("disk: write index %s: %w", ix.path, err)
	}
	return nil
}

// Lookup returns the entry with the largest offset <= offset, or
// {baseOffset, 0} when there is none: the position to scan the .log from.
func (ix *OffsetIndex) Lookup(offset int64) OffsetEntry {
	i := sort.Search(ix.count(), func(i int) bool { return ix.at(i).Offset > offset })
	if i == 0 {
		return OffsetEntry{Offset: ix.baseOffset, Position: 0}
	}
	return ix.at(i - 1)
}

// LookupPosition returns the entry with the largest position <= position,
// or {baseOffset, 0} when there is none.
func (ix *OffsetIndex) LookupPosition(position int64) OffsetEntry {
	i := sort.Search(ix.count(), func(i int) bool { return ix.at(i).Position > position })
	if i == 0 {
		return OffsetEntry{Offset: ix.baseOffset, Position: 0}
	}
	return ix.at(i - 1)
}

// TruncateTo drops the entries with Offset >= offset, from memory and file.
func (ix *OffsetIndex) TruncateTo(offset int64) error {
	if ix.file == nil {
		return ErrClosed
	}
	if err := ix.unseal(); err != nil {
		return err
	}
	i := sort.Search(ix.count(), func(i int) bool { return ix.at(i).Offset >= offset })
	if err := ix.pending.truncate(ix.file, OffsetIndexEntrySize, i); err != nil {
		return fmt.Errorf("disk: truncate index %s: %w", ix.path, err)
	}
	ix.entries = ix.entries[:i]
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
