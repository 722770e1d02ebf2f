// Package usage marks the errors of a malformed command line (a bad flag,
// argument or setting), so that the depot command can tell them from a
// failure of the work asked for and exit with its usage status.
package usage

import (
	"errors"
	"fmt"
)

// Error is an error in the command line rather than in the work. Its text is
// the wrapped error's.
type Error struct{ Err error }

func (e *Error) Error() string { return e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

// Errorf formats a usage error as fmt.Errorf does.
func Errorf(format string, args ...any) error {
	return &Error{Err: fmt.Errorf(format, args...)}
}

// Wrap marks err as a usage error. Wrap(nil) is nil.
func Wrap(err error) error {
	if err == nil {
		return nil
	}
	return &Error{Err: err}
}

// Is reports whether err, or any error it wraps, is a usage error.
func Is(err error) bool {
	var u *Error
	return errors.As(err, &u)
}
