package disk

import (
	"fmt"
	"sort"
)

// sparseEvery is how many index entries one entry of an index's sparse
// level stands for: a search reads one block of that many entries from the
// file.
const sparseEvery = 128

// indexEntries is what an index keeps in memory of its entries: those
// appended and not yet written to its file (at most indexFlushEntries),
// the last one, and every sparseEvery-th one, the sparse level through
// which a search finds the single block of the file to read. The file is
// the index and memory holds about 1/sparseEvery of it: for a 1 GiB
// segment at the default index interval, 32 KiB of sparse entries where
// all of them took 4 MiB, for each index of each partition. So a node's
// memory barely grows with the data its active segments hold; Kafka's
// mmapped indexes leave theirs to the page cache in the same way. An entry
// of the file that cannot be read hides nothing: a search then stops at
// the sparse entry before it, from which a reader scans forward, slower,
// never wrong.
//
// Not safe for concurrent use.
type indexEntries[E any] struct {
	size   int64            // bytes of an entry in the file
	decode func(b []byte) E // an entry from its bytes in the file
	encode func([]byte, E) []byte
	// pending tracks how many entries are in the file: the first
	// pending.persisted. tail holds the ones after them.
	pending pendingEntries
	tail    []E
	sparse  []E // entry j*sparseEvery, for each j
	last    E
	buf     []byte // the bytes of entries of the file, as read
	bufFrom int    // the first entry in buf
}

// load takes the entries of a file just read and checked.
func (x *indexEntries[E]) load(entries []E) {
	x.pending = pendingEntries{persisted: len(entries)}
	x.tail = nil
	x.sparse = nil
	for i := 0; i < len(entries); i += sparseEvery {
		x.sparse = append(x.sparse, entries[i])
	}
	if len(entries) > 0 {
		x.last = entries[len(entries)-1]
	}
}

// count is the number of entries.
func (x *indexEntries[E]) count() int { return x.pending.persisted + len(x.tail) }

// lastEntry returns the last entry, and false when there is none.
func (x *indexEntries[E]) lastEntry() (E, bool) { return x.last, x.count() > 0 }

// add appends e. It reports whether enough entries wait for the file to
// write them.
func (x *indexEntries[E]) add(e E) bool {
	if x.count()%sparseEvery == 0 {
		x.sparse = append(x.sparse, e)
	}
	x.tail = append(x.tail, e)
	x.last = e
	return len(x.tail) >= indexFlushEntries
}

// flush writes the entries of the tail to the file in one write.
func (x *indexEntries[E]) flush(file File) error {
	from := x.pending.persisted
	if err := x.pending.flush(file, x.size, x.count(), func(dst []byte, i int) []byte {
		return x.encode(dst, x.tail[i-from])
	}); err != nil {
		return err
	}
	x.tail = x.tail[:0]
	return nil
}

// release lets go of the tail's buffer: the index takes no more entries
// for a while (its segment is sealed). Flush first.
func (x *indexEntries[E]) release() {
	if len(x.tail) == 0 {
		x.tail = nil
	}
	x.buf = nil
}

// readBlock reads entries [from, to) of those in the file, and no more,
// into buf, for blockEntry.
func (x *indexEntries[E]) readBlock(file File, from, to int) error {
	to = min(to, x.pending.persisted)
	x.bufFrom = from
	if from >= to {
		x.buf = x.buf[:0]
		return nil
	}
	n := int64(to-from) * x.size
	if int64(cap(x.buf)) < n {
		x.buf = make([]byte, n)
	}
	x.buf = x.buf[:n]
	if _, err := file.ReadAt(x.buf, int64(from)*x.size); err != nil {
		x.buf = x.buf[:0]
		return err
	}
	return nil
}

// blockEntry returns entry i, read by the last readBlock when it is in the
// file.
func (x *indexEntries[E]) blockEntry(i int) E {
	if persisted := x.pending.persisted; i >= persisted {
		return x.tail[i-persisted]
	}
	at := int64(i-x.bufFrom) * x.size
	return x.decode(x.buf[at : at+x.size])
}

// at returns entry i, 0 <= i < count().
func (x *indexEntries[E]) at(file File, i int) (E, error) {
	switch {
	case i == x.count()-1:
		return x.last, nil
	case i%sparseEvery == 0:
		return x.sparse[i/sparseEvery], nil
	}
	if err := x.readBlock(file, i, i+1); err != nil {
		var zero E
		return zero, err
	}
	return x.blockEntry(i), nil
}

// search returns how many entries come before the first for which pred
// holds (pred must be false, then true, along the entries), and the entry
// just before it when that is not 0. It reads at most one block of the
// file; when that read fails, it returns the error with the count of
// entries up to the sparse entry before the block, and that entry.
func (x *indexEntries[E]) search(file File, pred func(E) bool) (int, E, error) {
	b := sort.Search(len(x.sparse), func(j int) bool { return pred(x.sparse[j]) })
	if b == 0 {
		var zero E
		return 0, zero, nil
	}
	// Entry lo fails pred and entry hi, if there is one, holds it: the
	// answer is among the entries between them.
	lo, hi := (b-1)*sparseEvery, min(b*sparseEvery, x.count())
	prev := x.sparse[b-1]
	if err := x.readBlock(file, lo+1, hi); err != nil {
		return lo + 1, prev, err
	}
	k := sort.Search(hi-lo-1, func(k int) bool { return pred(x.blockEntry(lo + 1 + k)) })
	if k > 0 {
		prev = x.blockEntry(lo + k)
	}
	return lo + 1 + k, prev, nil
}

// truncate keeps the first n entries, in memory and file; prev is entry
// n-1 when n > 0.
func (x *indexEntries[E]) truncate(file File, n int, prev E) error {
	persisted := x.pending.persisted
	if err := x.pending.truncate(file, x.size, n); err != nil {
		return err
	}
	if n < persisted {
		x.tail = x.tail[:0]
	} else {
		x.tail = x.tail[:n-persisted]
	}
	x.sparse = x.sparse[:(n+sparseEvery-1)/sparseEvery]
	x.last = prev
	return nil
}

// entriesMark is where an index's entries stood at a point: how many there
// were, how many of them were in the file, and the last.
type entriesMark[E any] struct {
	count     int
	persisted int
	last      E
}

// mark returns where the entries stand now.
func (x *indexEntries[E]) mark() entriesMark[E] {
	return entriesMark[E]{count: x.count(), persisted: x.pending.persisted, last: x.last}
}

// rollback puts the entries back as they stood at m, when since then they
// were only appended to and written out: those appended are dropped, and
// those written to the file are read back into memory and cut from it, so
// that memory and file both hold what they held. It needs no room.
func (x *indexEntries[E]) rollback(file File, m entriesMark[E]) error {
	persisted := x.pending.persisted
	if x.count() == m.count && persisted == m.persisted && !x.pending.dirty {
		return nil
	}
	if persisted < m.persisted || x.count() < m.count {
		return fmt.Errorf("entries were removed since the mark (%d of %d in the file, were %d of %d)", persisted, x.count(), m.persisted, m.count)
	}
	var back []E
	if written := min(persisted, m.count); written > m.persisted {
		if err := x.readBlock(file, m.persisted, written); err != nil {
			return err
		}
		for i := m.persisted; i < written; i++ {
			back = append(back, x.blockEntry(i))
		}
	}
	if m.count > persisted {
		back = append(back, x.tail[:m.count-persisted]...)
	}
	if persisted > m.persisted || x.pending.dirty {
		if err := file.Truncate(int64(m.persisted) * x.size); err != nil {
			return err
		}
	}
	x.pending.persisted = m.persisted
	x.pending.dirty = false
	x.tail = append(x.tail[:0], back...)
	x.sparse = x.sparse[:(m.count+sparseEvery-1)/sparseEvery]
	x.last = m.last
	return nil
}
