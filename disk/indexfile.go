package disk

import (
	"fmt"
	"math"
)

// indexFile is what the offset and time indexes share: the file of one
// segment's fixed-size entries, kept as indexEntries describes, and its
// life (seal, sync, truncate, close, rename). kind names it in errors.
//
// Not safe for concurrent use: the owner of the segment serialises access.
type indexFile[E any] struct {
	fs         FS
	path       string
	baseOffset int64
	file       File
	kind       string // "index" or "time index"
	entries    indexEntries[E]
	offsetOf   func(E) int64 // an entry's offset, for TruncateTo
	unreadable E             // stands for an entry that cannot be read
}

// BaseOffset returns the base offset of the segment the index belongs to.
func (x *indexFile[E]) BaseOffset() int64 { return x.baseOffset }

// Path returns the file's path.
func (x *indexFile[E]) Path() string { return x.path }

// Entries returns the number of entries.
func (x *indexFile[E]) Entries() int { return x.entries.count() }

// SizeBytes returns the size of the entries in bytes.
func (x *indexFile[E]) SizeBytes() int64 { return int64(x.entries.count()) * x.entries.size }

// Last returns the last entry, and false when the index is empty.
func (x *indexFile[E]) Last() (E, bool) { return x.entries.lastEntry() }

// Entry returns entry i, 0 <= i < Entries(); one that cannot be read
// compares above every other.
func (x *indexFile[E]) Entry(i int) E {
	e, err := x.entries.at(x.file, i)
	if err != nil {
		return x.unreadable
	}
	return e
}

// Seal writes the entries still in memory to the file once the segment is
// sealed (rolled or recovered), and lets go of their buffer.
func (x *indexFile[E]) Seal() error {
	if x.file == nil {
		return ErrClosed
	}
	if err := x.flush(); err != nil {
		return err
	}
	x.entries.release()
	return nil
}

// add appends e, writing the entries in memory to the file when enough
// wait.
func (x *indexFile[E]) add(e E) error {
	if x.entries.add(e) {
		return x.flush()
	}
	return nil
}

// flushIfMany writes the pending entries to the file if at least least
// of them wait.
func (x *indexFile[E]) flushIfMany(least int) error {
	if len(x.entries.tail) < least {
		return nil
	}
	return x.flush()
}

// flush writes the pending entries to the file.
func (x *indexFile[E]) flush() error {
	if err := x.entries.flush(x.file); err != nil {
		return fmt.Errorf("disk: write %s %s: %w", x.kind, x.path, err)
	}
	return nil
}

// TruncateTo drops the entries with Offset >= offset, from memory and file.
func (x *indexFile[E]) TruncateTo(offset int64) error {
	if x.file == nil {
		return ErrClosed
	}
	i, prev, err := x.entries.search(x.file, func(e E) bool { return x.offsetOf(e) >= offset })
	if err == nil {
		err = x.entries.truncate(x.file, i, prev)
	}
	if err != nil {
		return fmt.Errorf("disk: truncate %s %s: %w", x.kind, x.path, err)
	}
	return nil
}

// mark returns where the entries stand now, for rollback.
func (x *indexFile[E]) mark() entriesMark[E] { return x.entries.mark() }

// rollback drops the entries appended since m and puts back in memory
// those written to the file since, leaving the file as it was at m.
func (x *indexFile[E]) rollback(m entriesMark[E]) error {
	if x.file == nil {
		return ErrClosed
	}
	if err := x.entries.rollback(x.file, m); err != nil {
		return fmt.Errorf("disk: roll back %s %s: %w", x.kind, x.path, err)
	}
	return nil
}

// Reset drops every entry.
func (x *indexFile[E]) Reset() error { return x.TruncateTo(math.MinInt64) }

// Sync makes every appended entry durable.
func (x *indexFile[E]) Sync() error {
	if x.file == nil {
		return ErrClosed
	}
	if err := x.flush(); err != nil {
		return err
	}
	if err := x.file.Sync(); err != nil {
		return fmt.Errorf("disk: sync %s %s: %w", x.kind, x.path, err)
	}
	return nil
}

// Close closes the file; later calls return ErrClosed. It does not sync.
func (x *indexFile[E]) Close() error {
	if x.file == nil {
		return ErrClosed
	}
	err := x.flush()
	if cerr := x.file.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("disk: close %s %s: %w", x.kind, x.path, cerr)
	}
	x.file = nil
	return err
}

// Rename moves the file to newPath; the index stays open. The caller syncs
// the directories.
func (x *indexFile[E]) Rename(newPath string) error {
	if x.file == nil {
		return ErrClosed
	}
	if err := x.fs.Rename(x.path, newPath); err != nil {
		return fmt.Errorf("disk: rename %s: %w", x.kind, err)
	}
	if h, ok := x.file.(*cachedFile); ok {
		h.setName(newPath)
	}
	x.path = newPath
	return nil
}
