// Package disk is Depot's partition log, laid out on disk as Kafka lays it
// out: segments of record batches with a sparse offset index and a time
// index each, checkpoint files per log directory, and a small FS seam so
// tests can crash the file system, fill it, or fail the n-th operation.
//
// Nothing in the package starts a goroutine, and nothing is safe for
// concurrent use but two types: the actor that owns a log serialises
// access to it. The exceptions are FileCache, which the logs of a node
// share and which a FlushJob's fsync reaches from its own goroutine, and
// MemFS, the test file system, guarded by a mutex so that a test may
// inspect it.
//
// # Open files
//
// A log does its file work through a FileCache (Options.Files): every
// segment keeps a handle on each of its three files, but a node's logs
// hold at most the cache's capacity of descriptors open between them,
// whatever their number. The cache closes the descriptors of the files
// least recently used and reopens them on their next use; it never closes
// one in use, and closes one holding unsynced bytes only once it has
// synced it. Reopening costs an open(2) and no more: a
// segment keeps in memory what it knows of its files (sizes, offsets, the
// sparse levels of its indexes), and reads nothing again.
//
// # What is checked, and when
//
// Append validates every batch, CRC included, as a broker must. Read
// trusts the log, as Kafka's fetch path does: it checks each batch's
// structure from its header (length, magic, record count, codec, dense
// offsets, the batch inside its segment) and computes no CRC, which is end
// to end and left to the consumer (wire.Validate, wire.Records). Open after
// an unclean stop validates, CRC included, from the offset index entry at or
// below the recovery point and cuts a torn or corrupt tail; after a clean
// stop (the recovery point is the end of the log) it loads the indexes,
// checks them against the file sizes and reads only the batch headers after
// the last offset index entry.
//
// # A full file system
//
// Running out of room is not a failure of the disk. The error of a write,
// a create, a rename or a truncate that grows a file, refused for lack of
// room (ENOSPC, or EDQUOT past a quota), wraps ErrNoSpace, and the call of
// the log that met it puts back what it had changed before returning it.
// An Append cut short anywhere (in its batch, its index entries, the roll
// to a new segment, or the flush that flush.messages asks for) leaves the
// .log cut back to its last whole batch, the indexes without the entries
// it added, no part of a new segment, and the log's state in memory as it
// was: the same Append, once there is room, gets the same offset. Roll and
// MaybeRoll are undone likewise; Flush and StartFlush leave the recovery
// point where it was; a TruncateTo that empties the log makes its new
// segment before it deletes the old ones. None of them fails the log. It
// fails only when undoing fails, and on any error of an fsync, whatever its
// errno: Linux reports ENOSPC from fsync when writeback found no room, and
// written data may be lost. (An error of the sync_file_range that starts
// writeback early is left for the next fsync to report.)
//
// What needs no room goes on: reads, searches and scans; ApplyRetention
// and DeleteBefore, which free room (DeleteBefore rolls a new segment only
// once the older ones are deleted, and when even that finds no room keeps
// the active one, unread, until a later roll); Close, which fsyncs the
// batches even when their index entries find no room; and a clean Open,
// which writes nothing. An Open that must rebuild indexes and finds no
// room fails with ErrNoSpace, removing what it had begun of them, and
// WriteCheckpoint leaves the old file and no .tmp behind. No batch that a
// successful Append wrote is touched by any of this.
//
// # Directory layout
//
// A log directory holds one directory per partition replica, named
// "<topic>-<partition>" (PartitionDirName; parsed by splitting on the last
// '-', since topic names may contain '-'), plus the checkpoint files:
//
//	<logdir>/
//	    recovery-point-offset-checkpoint
//	    log-start-offset-checkpoint
//	    orders-0/
//	        leader-epoch-checkpoint
//	        00000000000000000000.log
//	        00000000000000000000.index
//	        00000000000000000000.timeindex
//	        00000000000000368769.log
//	        00000000000000368769.index
//	        00000000000000368769.timeindex
//
// A segment's files are named by its base offset (the offset of its first
// record) in 20 zero-padded decimal digits followed by the extension
// (SegmentFileName, ParseSegmentFileName). The .log holds Kafka RecordBatch
// v2 batches back to back (package wire). Topic names follow Kafka's rule:
// 1 to 249 characters of [a-zA-Z0-9._-], neither "." nor "..".
//
// # Offset index (.index)
//
// A sparse map from offset to byte position in the .log, one entry about
// every 4 KiB of log. The file is a sequence of 8-byte entries, nothing
// else (no header, no preallocation):
//
//	offset  size  field
//	0       4     relative offset, uint32 big-endian: offset - baseOffset
//	4       4     position, uint32 big-endian: byte position of the batch in the .log
//
// Both fields strictly increase from entry to entry. A file whose size is
// not a multiple of 8 or whose entries do not increase is corrupt.
//
// The file is the index: memory holds only the entries not yet written, the
// last one and every 128th, through which a lookup finds the one block of
// 128 entries to read (the time index likewise).
//
// # Time index (.timeindex)
//
// A sparse map from timestamp to offset, a sequence of 12-byte entries:
//
//	offset  size  field
//	0       8     timestamp, int64 big-endian, milliseconds since the Unix epoch, >= 0
//	8       4     relative offset, uint32 big-endian: offset - baseOffset
//
// Timestamps strictly increase; offsets never decrease. A file whose size
// is not a multiple of 12, or that breaks these rules, is corrupt.
//
// These layouts are Kafka's and are never to change: OffsetIndexEntrySize
// and TimeIndexEntrySize are part of the format. Indexes are derived data:
// after an unclean stop, or when a file is corrupt, they are rebuilt from
// the .log.
//
// # Checkpoint files
//
// recovery-point-offset-checkpoint and log-start-offset-checkpoint are
// text in Kafka's format, one line per partition of the log directory,
// sorted by topic then partition, every line ending in '\n':
//
//	0                  version, always 0
//	2                  count N of the entries that follow
//	orders 0 368769    topic, partition, offset separated by one space
//	orders 1 12
//
// Numbers are decimal without sign or leading zeros. A checkpoint is
// replaced atomically: written to "<path>.tmp", synced, renamed over the
// old file, and the directory synced (WriteCheckpoint). A missing file
// reads as empty; anything else malformed is a *CorruptionError carrying
// the path and the byte position of the damage.
//
// # Leader-epoch checkpoint (leader-epoch-checkpoint)
//
// Each partition directory may hold Kafka's leader-epoch checkpoint, the
// partition's leader-epoch cache: for each leader epoch, the offset at
// which it began. It is text in the same framing, one line per epoch,
// oldest first:
//
//	0         version, always 0
//	3         count N of the entries that follow
//	0 0       epoch, start offset separated by one space
//	1 5
//	3 10
//
// Epochs are non-negative int32s and strictly increase; start offsets are
// non-negative int64s and never decrease (two epochs start at the same
// offset when the first of them holds no batch). Numbers are decimal
// without sign or leading zeros. The file is replaced atomically as the
// other checkpoints are (ParseEpochCheckpoint, AppendEpochCheckpoint),
// but for the first batch of a new epoch: the append writes it, renamed
// over the old one, without a sync, and the flush that first covers the
// batch syncs it, and the directory, before the segment. So a batch's
// epoch is in the checkpoint in the page cache before the batch is
// written, and durable before any flush covers the batch; after an OS
// crash, recovery takes a later epoch from the batches past the recovery
// point, up to the partition's (Options.LeaderEpoch).
// This layout is Kafka's (LeaderEpochCheckpointFile) and is never to
// change.
package disk
