package quorum

import (
	"errors"
	"fmt"

	"github.com/depot-dev/depot/disk"
)

// Sentinel errors of the package. Callers compare with errors.Is: the
// package wraps them with %w to add the path, index or cause.
var (
	// ErrCorrupt is wrapped by the *disk.CorruptionError of a WAL or
	// snapshot file damaged where a crash cannot have damaged it, or whose
	// whole records break the format's rules. Open fails with it.
	ErrCorrupt = errors.New("quorum: corrupt storage")
	// ErrStorageFailed is returned by every write after a write, an fsync or
	// a file operation of the Storage failed: what is on disk is no longer
	// known, and only reopening the directory tells.
	ErrStorageFailed = errors.New("quorum: storage failed")
	// ErrClosed is returned by the writes of a closed Storage.
	ErrClosed = errors.New("quorum: storage closed")
	// ErrTooLarge is returned for a proposal larger than MaxEntryBytes, for
	// a batch of entries larger than a WAL record may be, and for snapshot
	// chunks past an Assembler's bound.
	ErrTooLarge = errors.New("quorum: too large")
	// ErrEmptyProposal is returned by Propose for empty data: raft appends
	// empty entries of its own, which are never applied.
	ErrEmptyProposal = errors.New("quorum: empty proposal")
	// ErrNotMember is returned by Step for a message from a node that is
	// not a voter or learner of the current configuration. The message is
	// dropped.
	ErrNotMember = errors.New("quorum: message from a node that is not a member")
	// ErrWrongRecipient is returned by Step for a message addressed to
	// another node. The message is dropped.
	ErrWrongRecipient = errors.New("quorum: message for another node")
	// ErrPeerFailed is returned by every call of a Peer after its storage
	// or its state machine failed, or raft found its state impossible: the
	// node must be restarted from its storage.
	ErrPeerFailed = errors.New("quorum: peer failed")
	// ErrBadChunk is returned for a snapshot chunk that does not fit the
	// chunks before it or does not rebuild a snapshot message.
	ErrBadChunk = errors.New("quorum: bad snapshot chunk")
)

// corruptf returns a *disk.CorruptionError at offset of a file or bytes,
// wrapping ErrCorrupt.
func corruptf(path string, offset int64, format string, args ...any) error {
	return &disk.CorruptionError{Path: path, Offset: offset, Err: fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))}
}

// withPath sets the path of a *disk.CorruptionError and returns other errors
// unchanged.
func withPath(err error, path string) error {
	var ce *disk.CorruptionError
	if errors.As(err, &ce) {
		return &disk.CorruptionError{Path: path, Offset: ce.Offset, Err: ce.Err}
	}
	return err
}
