package disks

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/depot-dev/depot/disk"
)

// The messages between partitions and their log directories. A partition
// imports them; this package never imports the partition's.

// PartitionReport tells a log-dir actor about one partition it holds.
type PartitionReport struct {
	TP disk.TopicPartition
	// PID is the partition's actor, which the log dir tells when it fails
	// (GoOffline).
	PID            *actor.PID
	SizeBytes      int64
	RecoveryPoint  int64
	LogStartOffset int64
	// AppendedBytes counts every byte the partition appended since it
	// started: the difference between two reports is its write rate.
	AppendedBytes  int64
	RetentionBytes int64
	RetentionMs    int64
	// Closed is set on the final report of a cleanly closed log.
	Closed bool
	// Deleted is set when the partition's log was removed, or moved away.
	Deleted bool
	// Recovered, on the first report of a log that Open had to recover, is
	// what recovery did.
	Recovered *disk.Recovery

	// Token names the partition actor's incarnation in its log dir; nil
	// for a partition that takes no allowance (see DirAllowance).
	Token *AllowanceToken
	// AllowanceSeq is the Seq of the last DirAllowance the partition took.
	AllowanceSeq uint64
	// Awaiting is set while the partition has taken no DirAllowance yet:
	// its produce requests wait for one.
	Awaiting bool
	// Wanted is the largest append refused for want of allowance since the
	// partition took its last DirAllowance: it asks for that much more.
	Wanted int64
}

// AllowanceToken names one incarnation of a partition actor in one log
// dir, by its address: an allowance meant for an earlier incarnation (one
// restarted, deleted, or moved away and back) is never taken by a later
// one, which the log dir has not counted it for. Not empty, so that every
// new token has an address of its own.
type AllowanceToken struct{ _ byte }

// DirAllowance tells a partition how far its log may grow in a log dir
// with a declared capacity. The log dir shares out its capacity less its
// reserve between its partitions so that, whatever they append between
// two reports, their sizes never add up to more: an append that would take
// a partition past Ceiling is refused, retriable, and the partition asks
// for more. Limited is false for a dir with no declared capacity: appends
// are then refused only when it is full (DirSpace). A partition takes an
// allowance only with its own Token, and only a Seq above the last it took;
// each one it takes it acknowledges in a report (AllowanceSeq).
type DirAllowance struct {
	Token   *AllowanceToken
	Seq     uint64
	Limited bool
	// Ceiling is the most bytes the partition's log may hold.
	Ceiling int64
	// Free is the dir's free bytes when the allowance was made (capacity
	// less what its partitions hold), Capacity its declared capacity and
	// Reserve its reserve, for the message of a refusal.
	Free, Capacity, Reserve int64
}

// LogDirFailed tells a log-dir actor that an I/O error hit one of its
// partitions: the whole directory goes offline, as Kafka's KIP-112 does.
type LogDirFailed struct {
	TP  disk.TopicPartition
	Err error
}

// LogDirNoSpace tells a log-dir actor that a write of one of its
// partitions found the file system full (disk.ErrNoSpace): the directory
// goes full, not offline.
type LogDirNoSpace struct {
	TP  disk.TopicPartition
	Err error
}

// DirSpace tells a partition whether its directory is full: while it is,
// appends are refused with Reason (KAFKA_STORAGE_ERROR, retriable).
type DirSpace struct {
	Full   bool
	Reason string
}

// GoOffline tells a partition actor that its directory failed.
type GoOffline struct{ Reason string }

// LogDirAdded tells the partition manager about a new log directory.
type LogDirAdded struct {
	Path string
	// ID is the directory's id (see EnsureDirID).
	ID  string
	PID *actor.PID
}

// LogDirRemoved tells the partition manager that a directory is no longer
// the node's.
type LogDirRemoved struct {
	Path string
}

// ChooseLogDirs asks the placement actor for a directory for each of a
// topic's new partitions on this node; it answers ChooseLogDirsResult.
type ChooseLogDirs struct {
	Topic          string
	Partitions     []int32
	RetentionBytes int64
	RetentionMs    int64
}

// ChooseLogDirsResult answers ChooseLogDirs: the path of the directory
// chosen for each partition, in the order asked.
type ChooseLogDirsResult struct {
	Dirs []string
	Err  error
}
