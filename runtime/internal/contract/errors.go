package contract

import "errors"

// The errors below are re-exported by package runtime, which documents
// them for users; the texts are part of what users see.

// ErrPermanent matches an error wrapped by Permanent.
var ErrPermanent = errors.New("permanent failure")

// Permanent marks err as a failure no retry can fix, keeping err's text
// (runtime.Permanent documents why). Permanent(nil) is nil, and an error
// already marked is returned unchanged.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(permanentError); ok {
		return err
	}
	return permanentError{err}
}

// permanentError matches both ErrPermanent and the error it wraps.
type permanentError struct{ err error }

func (p permanentError) Error() string   { return p.err.Error() }
func (p permanentError) Unwrap() []error { return []error{ErrPermanent, p.err} }

// ErrHandlerPanic matches a handler panic, recovered and treated as a
// handler failure.
var ErrHandlerPanic = errors.New("handler panicked")

// ErrHandlerTimeout is the failure of an attempt that outlived its
// handler's timeout.
var ErrHandlerTimeout = errors.New("handler attempt timed out")

// ErrStateConflict is a pm state save that expected a version no longer
// stored: the executor reloads and re-runs a pm that is not sequential on
// it, and the stores return it.
var ErrStateConflict = errors.New("pm state was saved by someone else since it was loaded; reload and retry")

// ErrRoutedByAnotherBuild is the error of a halt on an entry whose type
// this build does not route but another live build of the handler does.
var ErrRoutedByAnotherBuild = errors.New("message type routed by another live build of this handler")
