package disk

import (
	"errors"
	"fmt"
	"syscall"
)

// Sentinel errors of the package. Callers compare with errors.Is: the
// package wraps them with %w to add the path or operation.
var (
	// ErrClosed is returned by any operation on a closed log, segment or index.
	ErrClosed = errors.New("disk: log closed")
	// ErrOffsetOutOfRange is returned for an offset outside the log.
	ErrOffsetOutOfRange = errors.New("disk: offset out of range")
	// ErrNotFound is returned when a segment, partition or file is missing.
	ErrNotFound = errors.New("disk: not found")
	// ErrInjected is the error an ErrorFS injects.
	ErrInjected = errors.New("disk: injected error")
	// ErrInvalidName is returned for a topic, partition directory or segment
	// file name that does not follow the naming rules of the package doc.
	ErrInvalidName = errors.New("disk: invalid name")
	// ErrInvalidEntry is returned by an index Append whose entry would break
	// the order of the index or does not fit its fields. Nothing is written.
	ErrInvalidEntry = errors.New("disk: invalid index entry")
	// ErrNoSpace is wrapped by the error of a change the file system had no
	// room for: a write, a create, a rename or a truncate that grows a file
	// that failed with ENOSPC (or EDQUOT, past a quota). A log that meets
	// it puts back what the call had changed and takes the next call as if
	// the failed one had not been made: the file system is full, not
	// broken (see the package doc). An error of a sync (fsync, fdatasync)
	// never wraps it, whatever its errno: written data may have been lost,
	// and the log fails.
	ErrNoSpace = errors.New("disk: no space left")
	// ErrInvalidEpoch is returned for leader-epoch entries out of order or
	// with a negative epoch or start offset, and by Log.AssignEpoch for an
	// epoch below the latest of the log. Nothing is changed.
	ErrInvalidEpoch = errors.New("disk: invalid leader epoch entry")
	// ErrOffsetMismatch is returned by Log.AppendAsFollower for a batch
	// whose base offset is not the log end offset. Nothing is appended.
	ErrOffsetMismatch = errors.New("disk: batch base offset is not the log end offset")
	// ErrFlushInFlight is returned by a call that would close or remove a
	// segment file while a FlushJob may still be syncing it, and by a
	// second StartFlush before the first is finished.
	ErrFlushInFlight = errors.New("disk: flush in flight")
)

// CorruptionError reports damaged bytes in a file of the log: a torn or
// malformed index, time index or checkpoint. Offset is the byte position in
// the file where the damage was found. Decoders of in-memory bytes leave
// Path empty; the functions that read files fill it in.
type CorruptionError struct {
	Path   string
	Offset int64
	Err    error
}

// Error returns "disk: corruption in PATH at byte N: ERR".
func (e *CorruptionError) Error() string {
	path := e.Path
	if path == "" {
		path = "(bytes)"
	}
	return fmt.Sprintf("disk: corruption in %s at byte %d: %v", path, e.Offset, e.Err)
}

// Unwrap returns the underlying cause.
func (e *CorruptionError) Unwrap() error { return e.Err }

// corruptf builds a *CorruptionError without a path.
func corruptf(offset int64, format string, args ...any) *CorruptionError {
	return &CorruptionError{Offset: offset, Err: fmt.Errorf(format, args...)}
}

// withPath sets the path of a *CorruptionError and returns other errors
// unchanged.
func withPath(err error, path string) error {
	var ce *CorruptionError
	if errors.As(err, &ce) {
		return &CorruptionError{Path: path, Offset: ce.Offset, Err: ce.Err}
	}
	return err
}

// noSpaceError marks an error as caused by a full file system; its message
// is the error's own, which names the errno.
type noSpaceError struct{ err error }

func (e *noSpaceError) Error() string   { return e.err.Error() }
func (e *noSpaceError) Unwrap() []error { return []error{e.err, ErrNoSpace} }

// noSpace marks err, the error of a write, create, rename or growing
// truncate, with ErrNoSpace when the file system had no room for it.
// Errors of syncs are never given to it: those are failures.
func noSpace(err error) error {
	if err == nil || errors.Is(err, ErrNoSpace) {
		return err
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return &noSpaceError{err}
	}
	return err
}
