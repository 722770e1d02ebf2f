package disk

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	pathpkg "path"
	"slices"
	"strconv"
	"strings"
)

// CheckpointVersion is the only checkpoint format version (line 1).
const CheckpointVersion = 0

// MaxTopicNameLength is the longest topic name, as in Kafka.
const MaxTopicNameLength = 249

// segmentBaseDigits is the width of the base offset in segment file names.
const segmentBaseDigits = 20

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String returns "topic-partition".
func (tp TopicPartition) String() string { return PartitionDirName(tp) }

// ValidTopicName reports whether name is a legal topic name, as in Kafka:
// 1 to 249 characters of [a-zA-Z0-9._-], and neither "." nor "..".
func ValidTopicName(name string) bool {
	if name == "" || len(name) > MaxTopicNameLength || name == "." || name == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// AppendCheckpoint appends the checkpoint text of offsets to dst, lines
// sorted by topic then partition. It returns an error wrapping
// ErrInvalidName for an illegal topic name or negative partition, and an
// error for a negative offset.
func AppendCheckpoint(dst []byte, offsets map[TopicPartition]int64) ([]byte, error) {
	tps := make([]TopicPartition, 0, len(offsets))
	for tp, off := range offsets {
		if !ValidTopicName(tp.Topic) || tp.Partition < 0 {
			return dst, fmt.Errorf("%w: topic %q partition %d", ErrInvalidName, tp.Topic, tp.Partition)
		}
		if off < 0 {
			return dst, fmt.Errorf("disk: negative checkpoint offset %d for %s", off, tp)
		}
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, func(a, b TopicPartition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	dst = strconv.AppendInt(dst, CheckpointVersion, 10)
	dst = append(dst, '\n')
	dst = strconv.AppendInt(dst, int64(len(tps)), 10)
	dst = append(dst, '\n')
	for _, tp := range tps {
		dst = append(dst, tp.Topic...)
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, int64(tp.Partition), 10)
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, offsets[tp], 10)
		dst = append(dst, '\n')
	}
	return dst, nil
}

// WriteCheckpoint replaces the checkpoint file at path atomically: it
// writes path+".tmp", syncs it, renames it over path and syncs the
// directory. When it fails before the rename, the old file is as it was
// and the .tmp is removed; on a full file system the error wraps
// ErrNoSpace, and a later call, given room, succeeds.
func WriteCheckpoint(fsys FS, path string, offsets map[TopicPartition]int64) error {
	b, err := AppendCheckpoint(nil, offsets)
	if err != nil {
		return err
	}
	return writeFileAtomic(fsys, path, b)
}

// writeFileAtomic replaces the file at path with b as WriteCheckpoint
// does: path+".tmp" written and synced, renamed over path, the directory
// synced. The errors of the open, the write and the rename are marked
// with ErrNoSpace when the file system had no room for them; those of the
// syncs never are.
func writeFileAtomic(fsys FS, path string, b []byte) error {
	return replaceFile(fsys, path, b, true)
}

// replaceFile replaces the file at path with b: path+".tmp" written,
// renamed over path. With durable, the .tmp is synced before the rename
// and the directory after it, as writeFileAtomic does. Without, nothing
// is synced: a process kill finds path whole, old or new, since the page
// cache survives it, but an OS crash may find the old file, or, should
// the directory be synced before path's bytes, the new one empty or
// torn; syncFile and a directory sync make it durable. When it fails
// before the rename, the old file is as it was and the .tmp is removed.
// Errors are marked as writeFileAtomic's.
func replaceFile(fsys FS, path string, b []byte, durable bool) error {
	tmp := path + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return noSpace(fmt.Errorf("disk: write checkpoint: %w", err))
	}
	abandon := func(err error) error {
		_ = f.Close()
		_ = fsys.Remove(tmp)
		return err
	}
	if _, err := f.Write(b); err != nil {
		return abandon(noSpace(fmt.Errorf("disk: write checkpoint %s: %w", tmp, err)))
	}
	if durable {
		if err := f.Sync(); err != nil {
			return abandon(fmt.Errorf("disk: sync checkpoint %s: %w", tmp, err))
		}
	}
	if err := f.Close(); err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("disk: close checkpoint %s: %w", tmp, err)
	}
	if err := fsys.Rename(tmp, path); err != nil {
		_ = fsys.Remove(tmp)
		return noSpace(fmt.Errorf("disk: write checkpoint: %w", err))
	}
	if durable {
		if err := fsys.SyncDir(pathpkg.Dir(path)); err != nil {
			return fmt.Errorf("disk: write checkpoint: %w", err)
		}
	}
	return nil
}

// syncFile makes the bytes of the file at path durable: it opens it
// read-only and fsyncs it. The directory entry is not made durable.
func syncFile(fsys FS, path string) error { return syncFileWith(fsys, path, File.Sync) }

// syncFileWith opens the file at path read-only and runs sync on it.
func syncFileWith(fsys FS, path string, sync func(File) error) error {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("disk: sync %s: %w", path, err)
	}
	err = sync(f)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("disk: sync %s: %w", path, err)
	}
	return nil
}

// ReadCheckpoint reads the checkpoint file at path. A missing file gives
// an empty map and nil; damaged contents give a *CorruptionError with Path
// and the byte position of the damage.
func ReadCheckpoint(fsys FS, path string) (map[TopicPartition]int64, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return map[TopicPartition]int64{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("disk: read checkpoint: %w", err)
	}
	b, err := readAll(f)
	_ = f.Close()
	if err != nil {
		return nil, fmt.Errorf("disk: read checkpoint %s: %w", path, err)
	}
	offsets, err := DecodeCheckpoint(b)
	if err != nil {
		return nil, withPath(err, path)
	}
	return offsets, nil
}

// DecodeCheckpoint decodes checkpoint text: line 1 the version 0, line 2
// the count N, then N lines "topic partition offset", each line ending in
// '\n' and nothing after. Numbers are decimal without sign or leading
// zeros; topics are legal topic names; partitions fit int32 and offsets
// int64, both non-negative; a partition appears once. Anything else gives
// a *CorruptionError (without Path) at the byte where the damage starts.
func DecodeCheckpoint(b []byte) (map[TopicPartition]int64, error) {
	r := checkpointLines{b: b}
	count, err := r.header()
	if err != nil {
		return nil, err
	}
	offsets := map[TopicPartition]int64{}
	for i := int64(0); i < count; i++ {
		l, at, err := r.next("entry")
		if err != nil {
			return nil, err
		}
		tp, off, col, err := parseCheckpointEntry(l)
		if err != nil {
			return nil, corruptf(int64(at+col), "checkpoint entry %d: %v", i, err)
		}
		if _, dup := offsets[tp]; dup {
			return nil, corruptf(int64(at), "checkpoint entry %d: %s appears twice", i, tp)
		}
		offsets[tp] = off
	}
	if err := r.end(count); err != nil {
		return nil, err
	}
	return offsets, nil
}

// checkpointLines reads the lines of checkpoint text, each ending in '\n'.
type checkpointLines struct {
	b   []byte
	pos int
}

// next returns the next line without its '\n', and the byte where it
// starts; what names the line for the error of text that ends first.
func (r *checkpointLines) next(what string) ([]byte, int, error) {
	start := r.pos
	i := bytes.IndexByte(r.b[r.pos:], '\n')
	if i < 0 {
		return nil, start, corruptf(int64(len(r.b)), "checkpoint ends inside or before the %s line", what)
	}
	r.pos += i + 1
	return r.b[start : start+i], start, nil
}

// header reads the version line, which must be CheckpointVersion, and the
// count line, and returns the count.
func (r *checkpointLines) header() (int64, error) {
	l, at, err := r.next("version")
	if err != nil {
		return 0, err
	}
	if v, ok := parseDecimal(l, math.MaxInt32); !ok || v != CheckpointVersion {
		return 0, corruptf(int64(at), "checkpoint version %q is not %d", l, CheckpointVersion)
	}
	l, at, err = r.next("count")
	if err != nil {
		return 0, err
	}
	count, ok := parseDecimal(l, math.MaxInt64)
	if !ok {
		return 0, corruptf(int64(at), "checkpoint count %q is not a number", l)
	}
	return count, nil
}

// end checks that nothing follows the count entries read.
func (r *checkpointLines) end(count int64) error {
	if r.pos != len(r.b) {
		return corruptf(int64(r.pos), "%d bytes after the %d checkpoint entries", len(r.b)-r.pos, count)
	}
	return nil
}

// parseCheckpointEntry parses "topic partition offset" and on error
// returns the column of the bad field.
func parseCheckpointEntry(l []byte) (TopicPartition, int64, int, error) {
	fields := bytes.Split(l, []byte{' '})
	if len(fields) != 3 {
		return TopicPartition{}, 0, 0, fmt.Errorf("%d fields, want 3", len(fields))
	}
	topic := string(fields[0])
	if !ValidTopicName(topic) {
		return TopicPartition{}, 0, 0, fmt.Errorf("invalid topic %q", topic)
	}
	col := len(fields[0]) + 1
	partition, ok := parseDecimal(fields[1], math.MaxInt32)
	if !ok {
		return TopicPartition{}, 0, col, fmt.Errorf("invalid partition %q", fields[1])
	}
	col += len(fields[1]) + 1
	offset, ok := parseDecimal(fields[2], math.MaxInt64)
	if !ok {
		return TopicPartition{}, 0, col, fmt.Errorf("invalid offset %q", fields[2])
	}
	return TopicPartition{Topic: topic, Partition: int32(partition)}, offset, 0, nil
}

// parseDecimal parses a non-negative decimal without sign or leading zeros
// that is at most max.
func parseDecimal(b []byte, max int64) (int64, bool) {
	if len(b) == 0 || len(b) > 19 || (len(b) > 1 && b[0] == '0') {
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if v > (max-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// PartitionDirName returns the directory name of a partition, "topic-3".
func PartitionDirName(tp TopicPartition) string {
	return tp.Topic + "-" + strconv.FormatInt(int64(tp.Partition), 10)
}

// ParsePartitionDirName parses a partition directory name, splitting on
// the last '-' (topic names may contain '-'). The topic must be a legal
// topic name and the partition a non-negative int32 in decimal without
// sign or leading zeros, so that PartitionDirName gives name back. Other
// names (Kafka's "-delete" and "-future" directories among them) return an
// error wrapping ErrInvalidName.
func ParsePartitionDirName(name string) (TopicPartition, error) {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return TopicPartition{}, fmt.Errorf("%w: partition directory %q has no '-'", ErrInvalidName, name)
	}
	topic := name[:i]
	if !ValidTopicName(topic) {
		return TopicPartition{}, fmt.Errorf("%w: partition directory %q has an invalid topic", ErrInvalidName, name)
	}
	partition, ok := parseDecimal([]byte(name[i+1:]), math.MaxInt32)
	if !ok {
		return TopicPartition{}, fmt.Errorf("%w: partition directory %q has an invalid partition", ErrInvalidName, name)
	}
	return TopicPartition{Topic: topic, Partition: int32(partition)}, nil
}

// SegmentFileName returns the name of a segment file: the base offset in
// 20 zero-padded digits followed by ext, such as ".log", ".index" or
// ".timeindex". baseOffset must not be negative.
func SegmentFileName(baseOffset int64, ext string) string {
	return fmt.Sprintf("%020d%s", baseOffset, ext)
}

// ParseSegmentFileName parses a segment file name: 20 decimal digits (a
// non-negative int64) then an extension that starts with '.' and has at
// least one more character, returned whole (".log", ".log.deleted").
// Anything else returns an error wrapping ErrInvalidName.
func ParseSegmentFileName(name string) (baseOffset int64, ext string, err error) {
	if len(name) < segmentBaseDigits+2 || name[segmentBaseDigits] != '.' {
		return 0, "", fmt.Errorf("%w: segment file %q", ErrInvalidName, name)
	}
	var v int64
	for i := 0; i < segmentBaseDigits; i++ {
		c := name[i]
		if c < '0' || c > '9' {
			return 0, "", fmt.Errorf("%w: segment file %q", ErrInvalidName, name)
		}
		d := int64(c - '0')
		if v > (math.MaxInt64-d)/10 {
			return 0, "", fmt.Errorf("%w: segment file %q: base offset overflows", ErrInvalidName, name)
		}
		v = v*10 + d
	}
	return v, name[segmentBaseDigits:], nil
}
