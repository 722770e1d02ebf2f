package node

import (
	"errors"
	"fmt"
)

// UsageError is an error in the command line (a bad flag, argument or
// setting) rather than in the work asked for, so that the depot command can
// tell them apart and exit with its usage status. Its text is the wrapped
// error's. The commands of every package that builds part of the depot
// command mark their usage errors with it.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }

func (e *UsageError) Unwrap() error { return e.Err }

// Usagef formats a usage error as fmt.Errorf does.
func Usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// MarkUsage marks err as a usage error. MarkUsage(nil) is nil.
func MarkUsage(err error) error {
	if err == nil {
		return nil
	}
	return &UsageError{Err: err}
}

// ErrInterrupted means a command stopped because it was interrupted
// (SIGINT or SIGTERM) before its work was done, so that the depot command
// exits with status 130, as a shell reports a command ended by SIGINT.
var ErrInterrupted = errors.New("interrupted")

// IsUsage reports whether err, or any error it wraps, is a usage error.
func IsUsage(err error) bool {
	var u *UsageError
	return errors.As(err, &u)
}
