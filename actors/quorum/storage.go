package quorum

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/sirupsen/logrus"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/disk"
)

// keptBufferBytes is the largest encoding buffer a Storage keeps between
// Saves; a larger one, needed for a large batch, is let go.
const keptBufferBytes = 1 << 20

// Storage is raft's durable storage under one directory: a write-ahead log
// of hard states and entries and the latest snapshot, in the files the
// package doc lays out. It implements raft.Storage from a
// raft.MemoryStorage that holds what the files hold, so reads never touch
// the disk; the writes (Save, ApplySnapshot, CreateSnapshot) make their
// changes durable before they change what the reads return.
//
// It owns the directory and the open WAL file. A failed write, fsync or
// file operation fails the Storage: that write and every later one return
// an error wrapping ErrStorageFailed, and only reopening the directory tells
// what is on disk. Reads go on.
//
// Not safe for concurrent use: the Peer that uses it, and the actor that
// owns both, serialise access.
type Storage struct {
	fsys   disk.FS
	dir    string
	logger *logrus.Entry

	mem *raft.MemoryStorage
	// hardState is the last hard state saved; when hardStateDirty it has a
	// change of the commit index only, which waits for the next batch (a
	// commit index needs no fsync).
	hardState      *raftpb.HardState
	hardStateDirty bool
	// snapIndex and snapTerm are those of the latest snapshot, zero before
	// any.
	snapIndex, snapTerm uint64

	// wal is the open WAL file, named walPath, following the entry at
	// walBase.
	wal     disk.File
	walPath string
	walBase uint64

	buf    []byte
	err    error // the failure that stopped writes, wrapping ErrStorageFailed
	closed bool
}

var _ raft.Storage = (*Storage)(nil)

// walFileName and snapshotFileName are the names of the WAL file holding
// entries from index first on and of the snapshot at index.
func walFileName(first uint64) string {
	return fmt.Sprintf("%0*d%s", indexDigits, first, walSuffix)
}

func snapshotFileName(index uint64) string {
	return fmt.Sprintf("%0*d%s", indexDigits, index, snapSuffix)
}

// parseIndexName returns the index of a file named by 20 digits and suffix.
func parseIndexName(name, suffix string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, suffix)
	if !ok || len(digits) != indexDigits {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil
}

// OpenStorage opens the raft storage in dir, creating the directory and an
// empty log when there is none. It reads the newest snapshot and WAL file,
// cuts a torn tail off the WAL (logged at Warn), completes a compaction a
// crash interrupted, and deletes files that are no longer needed. Damage to
// durable data gives a *disk.CorruptionError wrapping ErrCorrupt; nothing
// is changed on disk then. A nil logger discards.
func OpenStorage(fsys disk.FS, dir string, logger *logrus.Entry) (_ *Storage, err error) {
	if logger == nil {
		logger = discardLogger()
	}
	s := &Storage{
		fsys:      fsys,
		dir:       dir,
		logger:    logger,
		mem:       raft.NewMemoryStorage(),
		hardState: &raftpb.HardState{},
	}
	defer func() {
		if err != nil && s.wal != nil {
			_ = s.wal.Close()
		}
	}()
	if err := makeDir(fsys, dir); err != nil {
		return nil, fmt.Errorf("quorum: create %s: %w", dir, err)
	}
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("quorum: open storage: %w", err)
	}
	var walFirsts, snapIndexes []uint64
	var tmps []string
	for _, name := range names {
		if strings.HasSuffix(name, tmpSuffix) {
			tmps = append(tmps, name)
		} else if first, ok := parseIndexName(name, walSuffix); ok {
			walFirsts = append(walFirsts, first)
		} else if index, ok := parseIndexName(name, snapSuffix); ok {
			snapIndexes = append(snapIndexes, index)
		}
	}

	snap := &raftpb.Snapshot{}
	if len(snapIndexes) > 0 {
		if snap, err = s.readSnapshot(slices.Max(snapIndexes)); err != nil {
			return nil, err
		}
		s.snapIndex, s.snapTerm = snap.GetMetadata().GetIndex(), snap.GetMetadata().GetTerm()
	}

	if len(walFirsts) == 0 {
		if s.snapIndex != 0 {
			return nil, corruptf(s.path(snapshotFileName(s.snapIndex)), 0, "snapshot without a WAL file")
		}
		if err := s.removeAll(tmps); err != nil {
			return nil, err
		}
		if err := s.startWAL(0, 0, nil, nil); err != nil {
			return nil, err
		}
		s.logger.WithField("dir", dir).Info("raft storage created")
		return s, nil
	}

	w, err := s.readWAL(slices.Max(walFirsts))
	if err != nil {
		return nil, err
	}
	entries := entriesAfterSnapshot(w, s.snapIndex, s.snapTerm)
	last := s.snapIndex
	if len(entries) > 0 {
		last = entries[len(entries)-1].GetIndex()
	}
	hs := w.hardState
	if s.snapIndex > 0 {
		hs = hardStateAfterSnapshot(hs, s.snapIndex, s.snapTerm)
	}
	if hs.GetCommit() > last {
		return nil, corruptf(w.path, 0, "hard state commits index %d past the last entry %d", hs.GetCommit(), last)
	}

	if err := s.removeAll(tmps); err != nil {
		return nil, err
	}
	if w.size < int64(w.fileSize) {
		if err := s.cutTornTail(w); err != nil {
			return nil, err
		}
	}
	if s.snapIndex > 0 {
		if err := s.mem.ApplySnapshot(snap); err != nil {
			return nil, fmt.Errorf("quorum: open storage: %w", err)
		}
	}
	if err := s.mem.Append(entries); err != nil {
		return nil, fmt.Errorf("quorum: open storage: %w", err)
	}
	if !raft.IsEmptyHardState(hs) {
		s.hardState = proto.Clone(hs).(*raftpb.HardState)
		if err := s.mem.SetHardState(s.hardState); err != nil {
			return nil, fmt.Errorf("quorum: open storage: %w", err)
		}
	}
	if w.baseIndex < s.snapIndex {
		// A crash came between the snapshot and the WAL file that follows
		// it: write that file now, as the snapshot would have.
		s.logger.WithFields(logrus.Fields{"dir": dir, "snapshot_index": s.snapIndex}).Warn("completing a compaction interrupted by a crash")
		if err := s.startWAL(s.snapIndex, s.snapTerm, hs, entries); err != nil {
			return nil, err
		}
	} else {
		if err := s.openWAL(w.baseIndex); err != nil {
			return nil, err
		}
		if err := s.removeStale(); err != nil {
			return nil, err
		}
	}
	first, _ := s.mem.FirstIndex()
	s.logger.WithFields(logrus.Fields{
		"dir":            dir,
		"snapshot_index": s.snapIndex,
		"first_index":    first,
		"last_index":     last,
		"term":           s.hardState.GetTerm(),
		"commit":         s.hardState.GetCommit(),
	}).Info("raft storage opened")
	return s, nil
}

// makeDir creates dir and its missing parents, each made durable in its
// parent.
func makeDir(fsys disk.FS, dir string) error {
	var missing []string
	for d := path.Clean(dir); ; d = path.Dir(d) {
		_, err := fsys.Stat(d)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, d)
		if path.Dir(d) == d {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := fsys.SyncDir(path.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}

func (s *Storage) path(name string) string { return path.Join(s.dir, name) }

// readSnapshot reads and checks the snapshot file of index.
func (s *Storage) readSnapshot(index uint64) (*raftpb.Snapshot, error) {
	p := s.path(snapshotFileName(index))
	b, err := disk.ReadFile(s.fsys, p)
	if err != nil {
		return nil, fmt.Errorf("quorum: read snapshot: %w", err)
	}
	snap, err := decodeSnapshot(b)
	if err != nil {
		return nil, withPath(err, p)
	}
	if got := snap.GetMetadata().GetIndex(); got != index {
		return nil, corruptf(p, snapshotHeaderSize, "snapshot of index %d in the file of index %d", got, index)
	}
	if index == 0 {
		return nil, corruptf(p, snapshotHeaderSize, "snapshot of index 0")
	}
	return snap, nil
}

// walFile is what readWAL found in a WAL file.
type walFile struct {
	walContents
	path     string
	fileSize int
}

// readWAL reads the WAL file holding entries from first on.
func (s *Storage) readWAL(first uint64) (walFile, error) {
	p := s.path(walFileName(first))
	b, err := disk.ReadFile(s.fsys, p)
	if err != nil {
		return walFile{}, fmt.Errorf("quorum: read WAL: %w", err)
	}
	w, err := decodeWAL(b)
	if err != nil {
		return walFile{}, withPath(err, p)
	}
	if w.baseIndex+1 != first {
		return walFile{}, corruptf(p, 0, "base record follows index %d in the file of index %d", w.baseIndex, first)
	}
	switch {
	case w.baseIndex > s.snapIndex:
		return walFile{}, corruptf(p, 0, "WAL follows index %d, past the snapshot at %d", w.baseIndex, s.snapIndex)
	case w.baseIndex == s.snapIndex && w.baseTerm != s.snapTerm:
		return walFile{}, corruptf(p, 0, "WAL follows term %d, the snapshot is of term %d", w.baseTerm, s.snapTerm)
	}
	// Entries alias b, which is kept for as long as they are.
	return walFile{walContents: w, path: p, fileSize: len(b)}, nil
}

// entriesAfterSnapshot returns the entries of w after the snapshot at
// index and term. A WAL file older than the snapshot (a crash came before
// its successor was written) holds entries after it only if it holds the
// snapshot's own entry; else the snapshot replaced them all.
func entriesAfterSnapshot(w walFile, index, term uint64) []*raftpb.Entry {
	if index <= w.baseIndex {
		return w.entries
	}
	i := index - w.baseIndex - 1
	if i >= uint64(len(w.entries)) || w.entries[i].GetTerm() != term {
		return nil
	}
	return w.entries[i+1:]
}

// hardStateAfterSnapshot returns hs raised to what the snapshot at index
// and term implies: a commit index at least index, a term at least term
// (without a vote when raised: no vote in that term was made durable, so
// none was sent). The hard state saved with a snapshot from the leader can
// be lost by a crash after the snapshot file was written.
func hardStateAfterSnapshot(hs *raftpb.HardState, index, term uint64) *raftpb.HardState {
	out := &raftpb.HardState{Term: new(hs.GetTerm()), Vote: new(hs.GetVote()), Commit: new(hs.GetCommit())}
	if out.GetTerm() < term {
		out.Term, out.Vote = new(term), new(uint64(0))
	}
	if out.GetCommit() < index {
		out.Commit = new(index)
	}
	return out
}

// cutTornTail truncates the WAL file w to its whole records.
func (s *Storage) cutTornTail(w walFile) error {
	f, err := s.fsys.OpenFile(w.path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("quorum: cut torn tail: %w", err)
	}
	if err := f.Truncate(w.size); err != nil {
		_ = f.Close()
		return fmt.Errorf("quorum: cut torn tail of %s: %w", w.path, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("quorum: cut torn tail of %s: %w", w.path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("quorum: cut torn tail of %s: %w", w.path, err)
	}
	s.logger.WithFields(logrus.Fields{"path": w.path, "offset": w.size, "bytes": int64(w.fileSize) - w.size}).Warn("cut a torn tail off the raft log")
	return nil
}

// openWAL opens the existing WAL file following base for appending.
func (s *Storage) openWAL(base uint64) error {
	p := s.path(walFileName(base + 1))
	f, err := s.fsys.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("quorum: open WAL: %w", err)
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		_ = f.Close()
		return fmt.Errorf("quorum: open WAL %s: %w", p, err)
	}
	s.wal, s.walPath, s.walBase = f, p, base
	return nil
}

// writeFileAtomic makes data the durable content of the file name: it
// writes name.tmp, syncs it, renames it over name and syncs the directory.
func (s *Storage) writeFileAtomic(name string, data []byte) error {
	p := s.path(name)
	tmp := p + tmpSuffix
	f, err := s.fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	abandon := func(err error) error {
		_ = f.Close()
		_ = s.fsys.Remove(tmp)
		return err
	}
	if _, err := f.Write(data); err != nil {
		return abandon(err)
	}
	if err := f.Sync(); err != nil {
		return abandon(err)
	}
	if err := f.Close(); err != nil {
		_ = s.fsys.Remove(tmp)
		return err
	}
	if err := s.fsys.Rename(tmp, p); err != nil {
		_ = s.fsys.Remove(tmp)
		return err
	}
	return s.fsys.SyncDir(s.dir)
}

// startWAL writes a new WAL file following the entry at base and baseTerm,
// holding hs (none when empty) and entries, makes it the open one, and
// deletes the older WAL and snapshot files.
func (s *Storage) startWAL(base, baseTerm uint64, hs *raftpb.HardState, entries []*raftpb.Entry) error {
	b := appendBaseRecord(nil, base, baseTerm)
	if raft.IsEmptyHardState(hs) {
		hs = nil
	}
	for first := true; first || len(entries) > 0; first = false {
		n, size := 0, 0
		for n < len(entries) && (n == 0 || size+entryHeaderSize+len(entries[n].GetData()) <= rewriteRecordBytes) {
			size += entryHeaderSize + len(entries[n].GetData())
			n++
		}
		if first && hs == nil && n == 0 {
			break
		}
		batchHS := hs
		if !first {
			batchHS = nil
		}
		if batchPayloadSize(batchHS, entries[:n]) > maxRecordBytes {
			return fmt.Errorf("%w: an entry of %d bytes", ErrTooLarge, len(entries[0].GetData()))
		}
		b = appendBatchRecord(b, batchHS, entries[:n])
		entries = entries[n:]
	}
	name := walFileName(base + 1)
	if err := s.writeFileAtomic(name, b); err != nil {
		return fmt.Errorf("quorum: write WAL %s: %w", s.path(name), err)
	}
	old := s.wal
	s.wal = nil
	if old != nil {
		_ = old.Close()
	}
	if err := s.openWAL(base); err != nil {
		return err
	}
	return s.removeStale()
}

// removeStale deletes the WAL files other than the open one and the
// snapshot files older than the latest, then syncs the directory.
func (s *Storage) removeStale() error {
	names, err := s.fsys.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("quorum: remove old files: %w", err)
	}
	var stale []string
	for _, name := range names {
		if first, ok := parseIndexName(name, walSuffix); ok && first != s.walBase+1 {
			stale = append(stale, name)
		} else if index, ok := parseIndexName(name, snapSuffix); ok && index != s.snapIndex {
			stale = append(stale, name)
		}
	}
	return s.removeAll(stale)
}

// removeAll deletes the files names of the directory and syncs it.
func (s *Storage) removeAll(names []string) error {
	if len(names) == 0 {
		return nil
	}
	for _, name := range names {
		if err := s.fsys.Remove(s.path(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("quorum: remove old file: %w", err)
		}
	}
	if err := s.fsys.SyncDir(s.dir); err != nil {
		return fmt.Errorf("quorum: remove old files: %w", err)
	}
	return nil
}

// fail stops the Storage's writes for err and returns the error they give.
func (s *Storage) fail(err error) error {
	if s.err == nil {
		s.err = fmt.Errorf("%w: %w", ErrStorageFailed, err)
		s.logger.WithError(err).WithField("dir", s.dir).Error("raft storage failed")
	}
	return s.err
}

// writable returns why the Storage takes no writes, or nil.
func (s *Storage) writable() error {
	if s.closed {
		return ErrClosed
	}
	return s.err
}

// Save makes entries and hardState durable, in that order of meaning but
// in one batch record: a crash keeps both or neither. Entries from an index
// at or below the last one replace it and every later one. An empty
// hardState, or one equal to the last saved, is not saved again. When only
// the commit index changed and mustSync is false (raft's Ready.MustSync),
// nothing is written: the commit index waits for the next batch, or Close,
// as a commit index may be lost; entries are always synced. Errors of the
// write or the fsync fail the Storage; entries that do not follow the log, or more than a record may
// hold, are refused without failing it.
func (s *Storage) Save(hardState *raftpb.HardState, entries []*raftpb.Entry, mustSync bool) error {
	if err := s.writable(); err != nil {
		return err
	}
	changed := !raft.IsEmptyHardState(hardState) && !hardStateEqual(hardState, s.hardState)
	if len(entries) == 0 && !changed {
		return nil
	}
	if err := s.checkAppend(entries); err != nil {
		return err
	}
	hs := s.hardState
	if changed {
		hs = proto.Clone(hardState).(*raftpb.HardState)
	}
	if len(entries) == 0 && !mustSync && hs.GetTerm() == s.hardState.GetTerm() && hs.GetVote() == s.hardState.GetVote() {
		s.hardState, s.hardStateDirty = hs, true
		return s.mem.SetHardState(hs)
	}
	batchHS := hs
	if raft.IsEmptyHardState(hs) {
		batchHS = nil
	}
	if size := batchPayloadSize(batchHS, entries); size > maxRecordBytes {
		return fmt.Errorf("%w: a batch of %d bytes, more than a WAL record's %d", ErrTooLarge, size, maxRecordBytes)
	}
	if err := s.writeBatch(batchHS, entries); err != nil {
		return err
	}
	if err := s.mem.Append(entries); err != nil {
		return s.fail(err)
	}
	s.hardState, s.hardStateDirty = hs, false
	return s.mem.SetHardState(hs)
}

// writeBatch appends a batch record to the WAL file and syncs it.
func (s *Storage) writeBatch(hs *raftpb.HardState, entries []*raftpb.Entry) error {
	s.buf = appendBatchRecord(s.buf[:0], hs, entries)
	defer func() {
		if cap(s.buf) > keptBufferBytes {
			s.buf = nil
		}
	}()
	if _, err := s.wal.Write(s.buf); err != nil {
		return s.fail(fmt.Errorf("write %s: %w", s.walPath, err))
	}
	if err := s.wal.Sync(); err != nil {
		return s.fail(fmt.Errorf("sync %s: %w", s.walPath, err))
	}
	return nil
}

// checkAppend returns an error if entries are not consecutive or do not
// follow the log: the first must come after the snapshot and at most one
// past the last entry.
func (s *Storage) checkAppend(entries []*raftpb.Entry) error {
	if len(entries) == 0 {
		return nil
	}
	last, _ := s.mem.LastIndex()
	first := entries[0].GetIndex()
	if first <= s.snapIndex || first > last+1 {
		return fmt.Errorf("quorum: entries from index %d do not follow the log (snapshot %d, last %d)", first, s.snapIndex, last)
	}
	for i, e := range entries {
		if e.GetIndex() != first+uint64(i) {
			return fmt.Errorf("quorum: entries not consecutive at index %d", e.GetIndex())
		}
		if len(e.GetData()) > maxRecordBytes {
			return fmt.Errorf("%w: an entry of %d bytes", ErrTooLarge, len(e.GetData()))
		}
	}
	return nil
}

// cloneConfState returns a copy of cs, an empty one for nil, with its
// pointer fields set.
func cloneConfState(cs *raftpb.ConfState) *raftpb.ConfState {
	if cs == nil {
		return raftpb.EnsureConfState(nil)
	}
	return raftpb.EnsureConfState(proto.Clone(cs).(*raftpb.ConfState))
}

func hardStateEqual(a, b *raftpb.HardState) bool {
	return a.GetTerm() == b.GetTerm() && a.GetVote() == b.GetVote() && a.GetCommit() == b.GetCommit()
}

// ApplySnapshot makes snap, a snapshot from the leader (raft's
// Ready.Snapshot), the storage's state: it writes the snapshot file, then a
// new WAL file holding no entries, and deletes the older files. An empty
// snapshot is ignored; one not newer than the latest gives
// raft.ErrSnapOutOfDate. Errors of the file system fail the Storage.
func (s *Storage) ApplySnapshot(snap *raftpb.Snapshot) error {
	if err := s.writable(); err != nil {
		return err
	}
	if raft.IsEmptySnap(snap) {
		return nil
	}
	index, term := snap.GetMetadata().GetIndex(), snap.GetMetadata().GetTerm()
	if index <= s.snapIndex {
		return raft.ErrSnapOutOfDate
	}
	if err := s.writeFileAtomic(snapshotFileName(index), appendSnapshot(nil, snap)); err != nil {
		return s.fail(fmt.Errorf("write snapshot %s: %w", s.path(snapshotFileName(index)), err))
	}
	if err := s.mem.ApplySnapshot(snap); err != nil {
		return s.fail(err)
	}
	s.snapIndex, s.snapTerm = index, term
	hs := hardStateAfterSnapshot(s.hardState, index, term)
	if err := s.startWAL(index, term, hs, nil); err != nil {
		return s.fail(err)
	}
	s.hardState, s.hardStateDirty = hs, false
	if err := s.mem.SetHardState(hs); err != nil {
		return s.fail(err)
	}
	s.logger.WithFields(logrus.Fields{"dir": s.dir, "snapshot_index": index, "snapshot_term": term, "bytes": len(snap.GetData())}).Info("raft snapshot from the leader saved")
	return nil
}

// CreateSnapshot takes a snapshot at index, an applied (so committed)
// index, of the configuration cs and the state machine's data, and
// compacts the WAL: it writes the snapshot file, then a new WAL file
// holding the hard state and the entries after index, and deletes the
// older files. The entries before index stay readable until Compact. An
// index not past the latest snapshot gives raft.ErrSnapOutOfDate, one past
// the last entry raft.ErrUnavailable, one past the commit index an error.
// Errors of the file system fail the
// Storage.
func (s *Storage) CreateSnapshot(index uint64, cs *raftpb.ConfState, data []byte) (*raftpb.Snapshot, error) {
	if err := s.writable(); err != nil {
		return nil, err
	}
	if index <= s.snapIndex {
		return nil, raft.ErrSnapOutOfDate
	}
	last, _ := s.mem.LastIndex()
	if index > last {
		return nil, fmt.Errorf("quorum: snapshot at index %d past the last entry %d: %w", index, last, raft.ErrUnavailable)
	}
	if commit := s.hardState.GetCommit(); index > commit {
		return nil, fmt.Errorf("quorum: snapshot at index %d past the commit index %d", index, commit)
	}
	term, err := s.mem.Term(index)
	if err != nil {
		return nil, fmt.Errorf("quorum: snapshot at index %d: %w", index, err)
	}
	snap := &raftpb.Snapshot{
		Data: data,
		Metadata: &raftpb.SnapshotMetadata{
			ConfState: cloneConfState(cs),
			Index:     new(index),
			Term:      new(term),
		},
	}
	if err := s.writeFileAtomic(snapshotFileName(index), appendSnapshot(nil, snap)); err != nil {
		return nil, s.fail(fmt.Errorf("write snapshot %s: %w", s.path(snapshotFileName(index)), err))
	}
	if _, err := s.mem.CreateSnapshot(index, snap.GetMetadata().GetConfState(), data); err != nil {
		return nil, s.fail(err)
	}
	s.snapIndex, s.snapTerm = index, term
	var entries []*raftpb.Entry
	if last > index {
		if entries, err = s.mem.Entries(index+1, last+1, math.MaxUint64); err != nil {
			return nil, s.fail(err)
		}
	}
	if err := s.startWAL(index, term, s.hardState, entries); err != nil {
		return nil, s.fail(err)
	}
	s.hardStateDirty = false
	s.logger.WithFields(logrus.Fields{"dir": s.dir, "snapshot_index": index, "snapshot_term": term, "bytes": len(data)}).Info("raft snapshot taken, log compacted")
	return snap, nil
}

// Compact discards the entries up to index from memory, as
// raft.MemoryStorage.Compact does: FirstIndex becomes index+1, and the term
// of index stays known. The files do not change: the entries up to the
// latest snapshot left them when it was taken. Compacting past the latest
// snapshot is refused; to an index already compacted does nothing.
func (s *Storage) Compact(index uint64) error {
	if index > s.snapIndex {
		return fmt.Errorf("quorum: compact to index %d, past the snapshot at %d", index, s.snapIndex)
	}
	if first, _ := s.mem.FirstIndex(); index < first {
		return nil
	}
	return s.mem.Compact(index)
}

// Close writes a commit index still waiting for a batch, syncs and closes
// the WAL file. Writes after it give ErrClosed; reads go on.
func (s *Storage) Close() error {
	if s.closed {
		return nil
	}
	var err error
	if s.err == nil && s.hardStateDirty {
		err = s.writeBatch(s.hardState, nil)
		s.hardStateDirty = false
	}
	s.closed = true
	if s.wal != nil {
		if cerr := s.wal.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("quorum: close %s: %w", s.walPath, cerr)
		}
	}
	return err
}

// InitialState implements raft.Storage: the saved hard state and the
// configuration of the latest snapshot.
func (s *Storage) InitialState() (*raftpb.HardState, *raftpb.ConfState, error) {
	return s.mem.InitialState()
}

// Entries implements raft.Storage.
func (s *Storage) Entries(lo, hi, maxSize uint64) ([]*raftpb.Entry, error) {
	if last, _ := s.mem.LastIndex(); hi > last+1 {
		return nil, raft.ErrUnavailable
	}
	return s.mem.Entries(lo, hi, maxSize)
}

// Term implements raft.Storage.
func (s *Storage) Term(i uint64) (uint64, error) { return s.mem.Term(i) }

// LastIndex implements raft.Storage.
func (s *Storage) LastIndex() (uint64, error) { return s.mem.LastIndex() }

// FirstIndex implements raft.Storage.
func (s *Storage) FirstIndex() (uint64, error) { return s.mem.FirstIndex() }

// Snapshot implements raft.Storage: the latest snapshot, empty before any.
func (s *Storage) Snapshot() (*raftpb.Snapshot, error) { return s.mem.Snapshot() }

// Empty reports whether the storage holds nothing: no entry, no hard
// state and no snapshot, as a newly created one.
func (s *Storage) Empty() bool {
	last, _ := s.mem.LastIndex()
	return last == 0 && s.snapIndex == 0 && raft.IsEmptyHardState(s.hardState)
}

// discardLogger is the logger of a Storage or Peer given none.
func discardLogger() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return logrus.NewEntry(l)
}
