package disk

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"strconv"
)

// LeaderEpochCheckpointFile is the name of a partition's leader-epoch
// checkpoint, in the partition's directory.
const LeaderEpochCheckpointFile = "leader-epoch-checkpoint"

// EpochEntry is one entry of a partition's leader-epoch cache, Kafka's
// EpochEntry: leader epoch Epoch began at StartOffset, the offset of its
// first batch, or the log end offset when the epoch was assigned before
// any batch of it was appended.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// checkEpochs returns an error wrapping ErrInvalidEpoch, naming the first
// entry at fault, unless epochs are as a leader-epoch cache holds them:
// epochs >= 0 and strictly increasing, start offsets >= 0 and never
// decreasing.
func checkEpochs(entries []EpochEntry) error {
	for i, e := range entries {
		if err := checkEpochEntry(entries[:i], e); err != nil {
			return fmt.Errorf("%w: entry %d: %v", ErrInvalidEpoch, i, err)
		}
	}
	return nil
}

// checkEpochEntry returns why e cannot follow before, or nil.
func checkEpochEntry(before []EpochEntry, e EpochEntry) error {
	switch {
	case e.Epoch < 0:
		return fmt.Errorf("negative epoch %d", e.Epoch)
	case e.StartOffset < 0:
		return fmt.Errorf("negative start offset %d", e.StartOffset)
	case len(before) == 0:
		return nil
	}
	last := before[len(before)-1]
	switch {
	case e.Epoch <= last.Epoch:
		return fmt.Errorf("epoch %d after epoch %d", e.Epoch, last.Epoch)
	case e.StartOffset < last.StartOffset:
		return fmt.Errorf("epoch %d starts at %d, before epoch %d at %d", e.Epoch, e.StartOffset, last.Epoch, last.StartOffset)
	}
	return nil
}

// AppendEpochCheckpoint appends the leader-epoch checkpoint text of
// entries to dst (see the package doc). Entries must be as
// ParseEpochCheckpoint returns them; others give an error wrapping
// ErrInvalidEpoch, and dst unchanged.
func AppendEpochCheckpoint(dst []byte, entries []EpochEntry) ([]byte, error) {
	if err := checkEpochs(entries); err != nil {
		return dst, err
	}
	dst = strconv.AppendInt(dst, CheckpointVersion, 10)
	dst = append(dst, '\n')
	dst = strconv.AppendInt(dst, int64(len(entries)), 10)
	dst = append(dst, '\n')
	for _, e := range entries {
		dst = strconv.AppendInt(dst, int64(e.Epoch), 10)
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, e.StartOffset, 10)
		dst = append(dst, '\n')
	}
	return dst, nil
}

// ParseEpochCheckpoint decodes leader-epoch checkpoint text: line 1 the
// version 0, line 2 the count N, then N lines "epoch startOffset", each
// line ending in '\n' and nothing after. Numbers are decimal without sign
// or leading zeros; epochs fit int32 and strictly increase, start offsets
// fit int64 and never decrease. Anything else gives a *CorruptionError
// (without Path) at the byte where the damage starts.
func ParseEpochCheckpoint(data []byte) ([]EpochEntry, error) {
	r := checkpointLines{b: data}
	count, err := r.header()
	if err != nil {
		return nil, err
	}
	// Each entry takes at least 4 bytes ("0 0\n"): a count beyond what
	// the text can hold fails below, without a large allocation here.
	entries := make([]EpochEntry, 0, min(count, int64(len(data)/4)))
	for i := int64(0); i < count; i++ {
		l, at, err := r.next("entry")
		if err != nil {
			return nil, err
		}
		e, col, err := parseEpochEntry(l)
		if err != nil {
			return nil, corruptf(int64(at+col), "leader-epoch checkpoint entry %d: %v", i, err)
		}
		if err := checkEpochEntry(entries, e); err != nil {
			return nil, corruptf(int64(at), "leader-epoch checkpoint entry %d: %v", i, err)
		}
		entries = append(entries, e)
	}
	if err := r.end(count); err != nil {
		return nil, err
	}
	return entries, nil
}

// parseEpochEntry parses "epoch startOffset" and on error returns the
// column of the bad field.
func parseEpochEntry(l []byte) (EpochEntry, int, error) {
	epoch, offset, ok := bytes.Cut(l, []byte{' '})
	if !ok {
		return EpochEntry{}, 0, errors.New("one field, want 2")
	}
	e, ok := parseDecimal(epoch, math.MaxInt32)
	if !ok {
		return EpochEntry{}, 0, fmt.Errorf("invalid epoch %q", epoch)
	}
	start, ok := parseDecimal(offset, math.MaxInt64)
	if !ok {
		return EpochEntry{}, len(epoch) + 1, fmt.Errorf("invalid start offset %q", offset)
	}
	return EpochEntry{Epoch: int32(e), StartOffset: start}, 0, nil
}

// epochCheckpointPath returns the path of the leader-epoch checkpoint of
// the partition directory dir.
func epochCheckpointPath(dir string) string { return path.Join(dir, LeaderEpochCheckpointFile) }

// writeEpochCheckpoint replaces the leader-epoch checkpoint of dir with
// entries, atomically; durably when durable is set (see replaceFile), and
// otherwise until syncEpochCheckpoint only for as long as the OS runs.
func writeEpochCheckpoint(fsys FS, dir string, entries []EpochEntry, durable bool) error {
	b, err := AppendEpochCheckpoint(nil, entries)
	if err != nil {
		return err
	}
	return replaceFile(fsys, epochCheckpointPath(dir), b, durable)
}

// syncEpochCheckpoint makes the leader-epoch checkpoint of dir durable, as
// writeEpochCheckpoint without durable left it: its bytes, then the
// directory, which holds the rename that put it in place. In that order,
// an OS crash never finds the new name with bytes that were not synced.
// It touches nothing but the files, so it may run on any goroutine.
func syncEpochCheckpoint(fsys FS, dir string) error {
	if err := syncFile(fsys, epochCheckpointPath(dir)); err != nil {
		return err
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("disk: sync directory %s: %w", dir, err)
	}
	return nil
}

// readEpochCheckpoint reads the leader-epoch checkpoint of dir. found is
// false when there is none; damaged contents give a *CorruptionError with
// the file's path.
func readEpochCheckpoint(fsys FS, dir string) (entries []EpochEntry, found bool, err error) {
	p := epochCheckpointPath(dir)
	b, err := ReadFile(fsys, p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, fmt.Errorf("disk: read %s: %w", p, err)
	}
	entries, err = ParseEpochCheckpoint(b)
	if err != nil {
		return nil, true, withPath(err, p)
	}
	return entries, true, nil
}
