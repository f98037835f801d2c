package checkpoint

import "errors"

// IsTerminal reports whether err, returned by a Store, is one no retry can
// fix: the store found what it holds damaged ([ErrCorrupt], [ErrEmpty]).
// A File that met one is broken and fails every later call the same way.
// Whoever retries Commits (the Writer's Run, a flush before publishing)
// must stop on one instead: nothing could be checkpointed any more, so
// every change would wait, or be published again after a restart, without
// end. The next start then refuses the store, saying what to do.
func IsTerminal(err error) bool {
	return errors.Is(err, ErrCorrupt) || errors.Is(err, ErrEmpty)
}
