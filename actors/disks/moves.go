package disks

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/depot-dev/depot/disk"
)

// Suffixes of the directories a partition move leaves in log directories.
// disk.ParsePartitionDirName rejects both, so neither is ever taken for a
// partition.
const (
	// FutureDirSuffix marks the copy being built in the target directory.
	FutureDirSuffix = ".future"
	// DeleteDirSuffix marks the old copy once the future is complete.
	DeleteDirSuffix = ".delete"
)

// ErrMoveState is wrapped by RecoverMoves when the log directories hold a
// state no move produces and no safe choice resolves: two complete copies
// of one partition, or several candidates to restore.
var ErrMoveState = errors.New("disks: inconsistent partition copies")

// FutureDirName is the name of a partition's future copy: "<topic>-<partition>.future".
func FutureDirName(tp disk.TopicPartition) string { return disk.PartitionDirName(tp) + FutureDirSuffix }

// DeleteDirName is the name of a partition's old copy once its move has
// passed the point of no return: "<topic>-<partition>.delete".
func DeleteDirName(tp disk.TopicPartition) string { return disk.PartitionDirName(tp) + DeleteDirSuffix }

// LogDirListing is the names of the entries of one log directory.
type LogDirListing struct {
	Dir   string
	Names []string
}

// MoveActionKind is what a MoveAction does.
type MoveActionKind int

const (
	// MoveRemove removes Path and everything under it.
	MoveRemove MoveActionKind = iota + 1
	// MoveRename renames Path to To (both in the same log directory).
	MoveRename
)

// MoveAction is one file-system step of the recovery of interrupted moves.
// After it the caller syncs the directory that holds Path (and To).
type MoveAction struct {
	Kind MoveActionKind
	Path string
	To   string
}

func (a MoveAction) String() string {
	if a.Kind == MoveRename {
		return fmt.Sprintf("rename %s -> %s", a.Path, a.To)
	}
	return "remove " + a.Path
}

// MoveRecovery is the outcome of RecoverMoves.
type MoveRecovery struct {
	// Actions, applied in order, leave exactly one complete copy of every
	// partition found. For one partition a rename always comes before a
	// remove, so a crash between two actions leaves a state that RecoverMoves
	// resolves the same way.
	Actions []MoveAction
	// Locations maps every partition that has a copy to the log directory
	// holding it once the actions are applied.
	Locations map[disk.TopicPartition]string
}

// copies is what the listings hold of one partition.
type copies struct {
	primary, future, deleted []string // log directories
}

// RecoverMoves decides, from the listings of every log directory of a node,
// how to finish or undo the partition moves a crash interrupted. It does no
// I/O. A move of partition t-p from log directory src to dst goes through
// these states on disk, each made durable (directory synced) before the
// next:
//
//	S1 copying   src/t-p         + dst/t-p.future   the future may be incomplete: remove it
//	S2 swapping  src/t-p.delete  + dst/t-p.future   the future is complete and synced: rename it to dst/t-p, then remove the .delete
//	S3 promoted  src/t-p.delete  + dst/t-p          remove the .delete
//	S4 done      dst/t-p
//
// A name is a partition ("<topic>-<partition>", disk.ParsePartitionDirName),
// a future ("<topic>-<partition>.future") or an old copy
// ("<topic>-<partition>.delete"); other names (checkpoint files, temporary
// files) are ignored. Per partition:
//
//   - one primary: every future and old copy of it is removed (S1, S3);
//   - no primary, one future and at least one old copy: the future is
//     promoted and the old copies removed (S2);
//   - no primary, futures but no old copy: the futures are incomplete
//     copies whose source is gone and are removed; the partition has no
//     copy;
//   - no primary, no future, one old copy: the old copy is the only data
//     left (its future's directory is gone) and is renamed back;
//   - two or more primaries, or several futures or several old copies and
//     nothing to choose between them: an error wrapping ErrMoveState that
//     names the directories, and no action.
//
// Partitions are handled in topic then partition order, so the actions are
// deterministic.
func RecoverMoves(listings []LogDirListing) (MoveRecovery, error) {
	found := map[disk.TopicPartition]*copies{}
	get := func(tp disk.TopicPartition) *copies {
		c := found[tp]
		if c == nil {
			c = &copies{}
			found[tp] = c
		}
		return c
	}
	for _, l := range listings {
		for _, name := range l.Names {
			if tp, err := disk.ParsePartitionDirName(name); err == nil {
				c := get(tp)
				c.primary = append(c.primary, l.Dir)
				continue
			}
			for _, suffix := range []string{FutureDirSuffix, DeleteDirSuffix} {
				base, ok := strings.CutSuffix(name, suffix)
				if !ok {
					continue
				}
				tp, err := disk.ParsePartitionDirName(base)
				if err != nil {
					continue
				}
				c := get(tp)
				if suffix == FutureDirSuffix {
					c.future = append(c.future, l.Dir)
				} else {
					c.deleted = append(c.deleted, l.Dir)
				}
			}
		}
	}
	tps := make([]disk.TopicPartition, 0, len(found))
	for tp := range found {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})

	out := MoveRecovery{Locations: map[disk.TopicPartition]string{}}
	var errs []error
	for _, tp := range tps {
		c := found[tp]
		primary := disk.PartitionDirName(tp)
		removeAll := func(dirs []string, name string) {
			for _, d := range dirs {
				out.Actions = append(out.Actions, MoveAction{Kind: MoveRemove, Path: filepath.Join(d, name)})
			}
		}
		switch {
		case len(c.primary) > 1:
			paths := make([]string, len(c.primary))
			for i, d := range c.primary {
				paths[i] = filepath.Join(d, primary)
			}
			errs = append(errs, fmt.Errorf("%w: %s has a complete copy in each of %s; remove all but one", ErrMoveState, tp, strings.Join(paths, " and ")))
		case len(c.primary) == 1:
			removeAll(c.future, FutureDirName(tp))
			removeAll(c.deleted, DeleteDirName(tp))
			out.Locations[tp] = c.primary[0]
		case len(c.deleted) == 0:
			removeAll(c.future, FutureDirName(tp))
		case len(c.future) == 1:
			dir := c.future[0]
			out.Actions = append(out.Actions, MoveAction{Kind: MoveRename, Path: filepath.Join(dir, FutureDirName(tp)), To: filepath.Join(dir, primary)})
			removeAll(c.deleted, DeleteDirName(tp))
			out.Locations[tp] = dir
		case len(c.future) > 1:
			errs = append(errs, fmt.Errorf("%w: %s has an old copy and futures in each of %s; cannot tell which is complete", ErrMoveState, tp, strings.Join(c.future, " and ")))
		case len(c.deleted) == 1:
			dir := c.deleted[0]
			out.Actions = append(out.Actions, MoveAction{Kind: MoveRename, Path: filepath.Join(dir, DeleteDirName(tp)), To: filepath.Join(dir, primary)})
			out.Locations[tp] = dir
		default:
			errs = append(errs, fmt.Errorf("%w: %s has only old copies, in each of %s; keep one and rename it to %s", ErrMoveState, tp, strings.Join(c.deleted, " and "), primary))
		}
	}
	if len(errs) > 0 {
		return MoveRecovery{}, errors.Join(errs...)
	}
	return out, nil
}
