package disk

// indexFlushEntries is how many appended index entries are kept in memory
// before they are written to the index file in one write. Index files are
// derived data: an entry that is lost in a crash is rebuilt by recovery,
// which validates every segment that was not synced. Sync and Close write
// everything pending first.
const indexFlushEntries = 512

// groupCommitIndexEntries is how many index entries of the active segment
// wait in memory before a FlushJob writes them: a group commit of
// acks=all, which many partitions each start several times a second,
// writes them only then, not at each, as a flush of the log does. Written
// at each, with thousands of partitions, each flush reopened the index
// files that the file cache had closed for the .log files (see
// FileCache). The entries are not synced either way; they bound what
// recovery after a kill reads of the batch headers below the recovery
// point (see Open): 64 entries, 256 KiB of the log at the default
// index.interval.bytes.
const groupCommitIndexEntries = 64

// pendingEntries tracks which of an index's entries are in its file: the
// first persisted of them. Not safe for concurrent use.
type pendingEntries struct {
	persisted int
	// dirty is set when a write failed part way and the bytes it may have
	// left past the persisted entries could not be cut at once: they are
	// cut before the next write or sync.
	dirty bool
	buf   []byte
}

// flush writes entries [persisted, n) in one write at their place in the
// file; encode appends entry i to dst. When the write fails, what it may
// have written is cut, so the file is as it was (a full file system cuts a
// write short); the entries stay pending.
func (p *pendingEntries) flush(file File, size int64, n int, encode func(dst []byte, i int) []byte) error {
	if err := p.cut(file, size); err != nil {
		return err
	}
	if n <= p.persisted {
		return nil
	}
	p.buf = p.buf[:0]
	for i := p.persisted; i < n; i++ {
		p.buf = encode(p.buf, i)
	}
	if _, err := file.WriteAt(p.buf, int64(p.persisted)*size); err != nil {
		p.dirty = true
		_ = p.cut(file, size)
		return noSpace(err)
	}
	p.persisted = n
	return nil
}

// cut truncates bytes a failed write may have left past the persisted
// entries.
func (p *pendingEntries) cut(file File, size int64) error {
	if !p.dirty {
		return nil
	}
	if err := file.Truncate(int64(p.persisted) * size); err != nil {
		return err
	}
	p.dirty = false
	return nil
}

// truncate keeps only the first n entries in the file.
func (p *pendingEntries) truncate(file File, size int64, n int) error {
	if n >= p.persisted && !p.dirty {
		return nil
	}
	keep := min(n, p.persisted)
	if err := file.Truncate(int64(keep) * size); err != nil {
		return err
	}
	p.persisted = keep
	p.dirty = false
	return nil
}
