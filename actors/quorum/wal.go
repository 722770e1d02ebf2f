package quorum

import (
	"encoding/binary"
	"errors"
	"hash/crc32"

	"go.etcd.io/raft/v3/raftpb"
)

// walBatch is what one batch record holds.
type walBatch struct {
	hardState *raftpb.HardState // nil when the batch has none
	entries   []*raftpb.Entry
}

// walContents is what a WAL file holds once read: its base, the entries
// with conflicts resolved, the last hard state, and how many of its bytes
// are whole records.
type walContents struct {
	baseIndex, baseTerm uint64
	entries             []*raftpb.Entry
	hardState           *raftpb.HardState // nil when no batch had one
	// size is the length of the file's whole records; bytes past it are a
	// torn tail.
	size int64
}

// lastIndex is the index of the last entry, or the base's.
func (w *walContents) lastIndex() uint64 {
	if len(w.entries) == 0 {
		return w.baseIndex
	}
	return w.entries[len(w.entries)-1].GetIndex()
}

// errShortRecord and errBadRecord classify what decodeRecord finds at the
// start of its input: bytes that end inside a record, and a record that is
// whole but fails its checksum or declares an impossible length or type.
var (
	errShortRecord = errors.New("record cut short")
	errBadRecord   = errors.New("bad record")
)

// appendRecord appends a record of type typ whose payload appendPayload
// appends, filling in its length and checksum.
func appendRecord(dst []byte, typ byte, appendPayload func([]byte) []byte) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, recordHeaderSize)...)
	dst[start+8] = typ
	dst = appendPayload(dst)
	payload := dst[start+recordHeaderSize:]
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(dst[start+8:], castagnoli))
	return dst
}

// appendBaseRecord appends the base record of a WAL file following the
// entry at index and term.
func appendBaseRecord(dst []byte, index, term uint64) []byte {
	return appendRecord(dst, recordBase, func(b []byte) []byte {
		b = binary.LittleEndian.AppendUint64(b, index)
		return binary.LittleEndian.AppendUint64(b, term)
	})
}

// batchPayloadSize is the payload size of a batch record of hs and entries.
func batchPayloadSize(hs *raftpb.HardState, entries []*raftpb.Entry) int {
	n := 1 + 4
	if hs != nil {
		n += hardStateSize
	}
	for _, e := range entries {
		n += entryHeaderSize + len(e.GetData())
	}
	return n
}

// appendBatchRecord appends a batch record of hs (none when nil) and
// entries.
func appendBatchRecord(dst []byte, hs *raftpb.HardState, entries []*raftpb.Entry) []byte {
	return appendRecord(dst, recordBatch, func(b []byte) []byte {
		if hs == nil {
			b = append(b, 0)
		} else {
			b = append(b, batchHasHardState)
			b = binary.LittleEndian.AppendUint64(b, hs.GetTerm())
			b = binary.LittleEndian.AppendUint64(b, hs.GetVote())
			b = binary.LittleEndian.AppendUint64(b, hs.GetCommit())
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(len(entries)))
		for _, e := range entries {
			b = binary.LittleEndian.AppendUint64(b, e.GetIndex())
			b = binary.LittleEndian.AppendUint64(b, e.GetTerm())
			b = append(b, byte(e.GetType()))
			b = binary.LittleEndian.AppendUint32(b, uint32(len(e.GetData())))
			b = append(b, e.GetData()...)
		}
		return b
	})
}

// decodeRecord decodes the record at the start of b and returns its type,
// its payload (aliasing b) and its size. It fails with errShortRecord when
// b ends inside the record and errBadRecord when the record is whole but
// its checksum, length or type is wrong. It never looks at the payload's
// contents.
func decodeRecord(b []byte) (typ byte, payload []byte, n int, err error) {
	if len(b) < recordHeaderSize {
		return 0, nil, 0, errShortRecord
	}
	length := binary.LittleEndian.Uint32(b)
	if length > maxRecordBytes {
		return 0, nil, 0, errBadRecord
	}
	typ = b[8]
	if typ != recordBase && typ != recordBatch {
		return 0, nil, 0, errBadRecord
	}
	end := recordHeaderSize + int(length)
	if len(b) < end {
		return 0, nil, 0, errShortRecord
	}
	if crc32.Checksum(b[8:end], castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return 0, nil, 0, errBadRecord
	}
	return typ, b[recordHeaderSize:end], end, nil
}

// decodeBase decodes the payload of a base record.
func decodeBase(p []byte) (index, term uint64, ok bool) {
	if len(p) != basePayloadSize {
		return 0, 0, false
	}
	return binary.LittleEndian.Uint64(p), binary.LittleEndian.Uint64(p[8:]), true
}

// decodeBatch decodes the payload of a batch record, checking its layout:
// known flags, a count its bytes hold, known entry types, consecutive
// indexes and nothing after the last entry. The entries' data alias p.
func decodeBatch(p []byte) (walBatch, string) {
	var batch walBatch
	if len(p) < 1 {
		return batch, "batch without flags"
	}
	flags := p[0]
	p = p[1:]
	if flags&^batchHasHardState != 0 {
		return batch, "unknown batch flags"
	}
	if flags&batchHasHardState != 0 {
		if len(p) < hardStateSize {
			return batch, "hard state cut short"
		}
		batch.hardState = &raftpb.HardState{
			Term:   new(binary.LittleEndian.Uint64(p)),
			Vote:   new(binary.LittleEndian.Uint64(p[8:])),
			Commit: new(binary.LittleEndian.Uint64(p[16:])),
		}
		p = p[hardStateSize:]
	}
	if len(p) < 4 {
		return batch, "entry count cut short"
	}
	count := binary.LittleEndian.Uint32(p)
	p = p[4:]
	if uint64(count) > uint64(len(p)/entryHeaderSize) {
		return batch, "entry count larger than the batch"
	}
	batch.entries = make([]*raftpb.Entry, 0, count)
	for i := uint32(0); i < count; i++ {
		if len(p) < entryHeaderSize {
			return batch, "entry cut short"
		}
		index := binary.LittleEndian.Uint64(p)
		term := binary.LittleEndian.Uint64(p[8:])
		typ := raftpb.EntryType(p[16])
		if _, known := raftpb.EntryType_name[int32(typ)]; !known {
			return batch, "unknown entry type"
		}
		size := binary.LittleEndian.Uint32(p[17:])
		p = p[entryHeaderSize:]
		if uint64(size) > uint64(len(p)) {
			return batch, "entry data cut short"
		}
		if i > 0 && index != batch.entries[i-1].GetIndex()+1 {
			return batch, "entries of a batch not consecutive"
		}
		e := &raftpb.Entry{Index: new(index), Term: new(term), Type: typ.Enum()}
		if size > 0 {
			e.Data = p[:size:size]
		}
		batch.entries = append(batch.entries, e)
		p = p[size:]
	}
	if len(p) != 0 {
		return batch, "bytes after the last entry"
	}
	return batch, ""
}

// decodeWAL reads the bytes of a WAL file: its base record, then its
// batches in order, resolving conflicts. A record cut short or failing its
// checksum with no whole record after it is a torn tail: decoding stops
// there and size says where. Any other damage gives a
// *disk.CorruptionError, without a path, at the offset of the record,
// wrapping ErrCorrupt. The entries' data alias b.
func decodeWAL(b []byte) (walContents, error) {
	var w walContents
	typ, payload, n, err := decodeRecord(b)
	if err != nil {
		return w, corruptf("", 0, "no base record: %v", err)
	}
	if typ != recordBase {
		return w, corruptf("", 0, "first record is not a base record")
	}
	var ok bool
	if w.baseIndex, w.baseTerm, ok = decodeBase(payload); !ok {
		return w, corruptf("", 0, "base record of %d bytes", len(payload))
	}
	off := n
	for off < len(b) {
		typ, payload, n, err := decodeRecord(b[off:])
		if err != nil {
			if at := nextWholeRecord(b, off+1); at >= 0 {
				return w, corruptf("", int64(off), "%v followed by a whole record at byte %d", err, at)
			}
			break // a torn tail
		}
		if typ != recordBatch {
			return w, corruptf("", int64(off), "record of type %d after the base record", typ)
		}
		batch, problem := decodeBatch(payload)
		if problem != "" {
			return w, corruptf("", int64(off), "%s", problem)
		}
		if problem := w.apply(batch); problem != "" {
			return w, corruptf("", int64(off), "%s", problem)
		}
		off += n
	}
	w.size = int64(off)
	return w, nil
}

// apply adds a batch to w: its entries replace those from their first index
// on, and its hard state the earlier one. It returns what is wrong with the
// batch, or "".
func (w *walContents) apply(batch walBatch) string {
	if len(batch.entries) > 0 {
		first := batch.entries[0].GetIndex()
		last := w.lastIndex()
		if first <= w.baseIndex || first > last+1 {
			return "entries do not follow the log"
		}
		w.entries = w.entries[:first-w.baseIndex-1]
		prevTerm := w.baseTerm
		if len(w.entries) > 0 {
			prevTerm = w.entries[len(w.entries)-1].GetTerm()
		}
		for _, e := range batch.entries {
			if e.GetTerm() < prevTerm {
				return "entry terms go down"
			}
			prevTerm = e.GetTerm()
		}
		w.entries = append(w.entries, batch.entries...)
	}
	if batch.hardState != nil {
		w.hardState = batch.hardState
	}
	return ""
}

// nextWholeRecord returns the offset of the first whole record (length,
// type and checksum right) starting at from or later, or -1.
func nextWholeRecord(b []byte, from int) int {
	for at := from; at+recordHeaderSize <= len(b); at++ {
		if _, _, _, err := decodeRecord(b[at:]); err == nil {
			return at
		}
	}
	return -1
}
