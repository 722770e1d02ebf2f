// Package quorum is the raft core of the controller quorum: durable raft
// storage (Storage), a driver around go.etcd.io/raft's RawNode (Peer), and
// the chunking of snapshots for the transport (SplitSnapshot, Assembler).
//
// The package does not import the actor runtime and holds no goroutine,
// timer or process-wide state. The controller actor drives a Peer from its
// mailbox: time arrives as Tick, messages from other nodes as Step, and
// Handle persists what raft asks, applies what committed and returns the
// messages to send. Nothing in the package is safe for concurrent use; the
// owner serialises access.
//
// # Directory layout
//
// A Storage owns one directory holding one write-ahead log file and at most
// one snapshot file, each named by an index in 20 zero-padded decimal digits:
//
//	<dir>/
//	    00000000000000004001.wal   the log: entries from index 4001 on
//	    00000000000000004000.snap  the snapshot at index 4000
//
// A WAL file is named by the index of the first entry it holds, one more
// than the index of the snapshot it follows (00000000000000000001.wal
// before any snapshot). Files are created as <name>.tmp, synced, renamed into
// place and the directory synced, so a file of either kind is whole or
// absent; a leftover .tmp is deleted at open. Taking a snapshot writes the
// snapshot file, then a new WAL file holding the hard state and the entries
// after the snapshot, then deletes the older files. Open completes a
// compaction that a crash interrupted, and uses the newest snapshot and WAL
// file.
//
// # WAL file
//
// A WAL file is a sequence of records. Never change this layout: files
// written by every earlier version must still be read. Integers are little
// endian.
//
//	offset  size  field
//	0       4     length: bytes of payload
//	4       4     checksum: CRC-32C (Castagnoli) of the type byte and payload
//	8       1     type
//	9       len   payload
//
// The first record of a file is a base record (type 1), the entry the file
// follows: that of the snapshot, or index 0 and term 0 before any snapshot.
//
//	0   8   index
//	8   8   term
//
// Every other record is a batch (type 2): what one Save made durable, hard
// state and entries together, so a batch survives a crash whole or not at
// all. (The state a new WAL file starts with may take several batches; the
// file is renamed into place whole.)
//
//	0   1   flags: bit 0 set when a hard state follows; other bits zero
//	1   24  hard state, if flagged: term, vote, commit (8 bytes each)
//	    4   entry count
//	        each entry: index (8), term (8), entry type (1: raftpb.EntryType),
//	        data length (4), data
//
// The entries of a batch are consecutive. The first may have an index at or
// below the last one in the file: it replaces that entry and every later one
// (a new leader overwrote a conflicting suffix). The hard state of the last
// batch that has one is the current one.
//
// # Recovery
//
// Each batch is synced before the next is written, so only the last record
// of a file may have been cut short by a crash. Reading classifies damage
// instead of failing vaguely: a record that ends past the end of the file or
// fails its checksum, with no whole record after it, is a torn tail and is
// cut off (logged at Warn); one followed by a whole record is damage to
// durable data, and Open fails with a *disk.CorruptionError naming the file
// and the byte offset, wrapping ErrCorrupt. So is a whole record that breaks
// the rules above, and a snapshot file that fails its checksum. Damage in
// the last record cannot be told from a torn write and is cut.
//
// # Snapshot file
//
// Never change this layout either.
//
//	offset  size  field
//	0       4     magic "DQSN"
//	4       4     checksum: CRC-32C of every byte after this field
//	8       8     index
//	16      8     term
//	24            conf state: voters, learners, outgoing voters, next
//	              learners, each a count (4) and that many ids (8 each),
//	              then auto leave (1: 0 or 1)
//	              data length (8), data: the state machine's snapshot
//
// The file ends with the data.
package quorum

import "hash/crc32"

// Constants of the file formats in the package doc. Never change them.
const (
	// recordHeaderSize is the size of a WAL record's length, checksum and
	// type.
	recordHeaderSize = 9
	// recordBase is the type of a WAL file's first record: the index and
	// term of the entry the file follows.
	recordBase byte = 1
	// recordBatch is the type of every later record: a hard state and
	// entries made durable together.
	recordBatch byte = 2
	// basePayloadSize is the payload size of a base record.
	basePayloadSize = 16
	// batchHasHardState is the flag of a batch holding a hard state.
	batchHasHardState byte = 1
	// hardStateSize is the size of a hard state in a batch.
	hardStateSize = 24
	// entryHeaderSize is the size of an entry in a batch before its data:
	// index, term, entry type and data length.
	entryHeaderSize = 21
	// snapshotMagic begins every snapshot file.
	snapshotMagic = "DQSN"
	// snapshotHeaderSize is the size of the magic and checksum.
	snapshotHeaderSize = 8

	// walSuffix and snapSuffix end the names of WAL and snapshot files;
	// tmpSuffix ends a file being written.
	walSuffix  = ".wal"
	snapSuffix = ".snap"
	tmpSuffix  = ".tmp"
	// indexDigits is the width of the index in file names.
	indexDigits = 20
)

// Limits. They bound what a reader allocates; raising them does not change
// the format.
const (
	// MaxEntryBytes is the largest data of one entry. Peer.Propose refuses
	// larger proposals.
	MaxEntryBytes = 16 << 20
	// maxRecordBytes is the largest record payload: Save refuses a batch
	// larger than that, and a reader takes a larger length for damage.
	maxRecordBytes = 256 << 20
	// rewriteRecordBytes is the size at which a WAL file's first batch is
	// split when taking a snapshot rewrites the entries after it.
	rewriteRecordBytes = 16 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)
