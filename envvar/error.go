package envvar

import (
	"errors"
	"fmt"
)

// Error is a problem with one variable. Its message is "VAR: problem".
type Error struct {
	Var string
	Err error
}

func (e *Error) Error() string { return e.Var + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Problems collects the problems of a configuration, so that all of them
// are reported at once.
type Problems []error

// Add records a problem with the variable name.
func (p *Problems) Add(name, format string, args ...any) {
	*p = append(*p, &Error{Var: name, Err: fmt.Errorf(format, args...)})
}

// Join records every problem in err (joined with errors.Join or not).
func (p *Problems) Join(err error) { *p = append(*p, Split(err)...) }

// Err is the problems joined, or nil when there are none.
func (p Problems) Err() error { return errors.Join(p...) }

// Split lists the errors errors.Join joined in err, or err alone; none
// when err is nil.
func Split(err error) []error {
	switch e := err.(type) {
	case nil:
		return nil
	case interface{ Unwrap() []error }:
		return e.Unwrap()
	}
	return []error{err}
}
