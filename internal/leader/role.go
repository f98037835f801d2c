package leader

import "sync/atomic"

// Role is whether this replica leads, as Run's leading callback reports it,
// and the readiness that follows from it. The zero value stands by. Its
// methods may be called concurrently.
type Role struct {
	leading atomic.Bool
}

// Set records whether this replica leads: call it from Run's leading
// callback.
func (r *Role) Set(leading bool) { r.leading.Store(leading) }

// Leading reports whether this replica leads.
func (r *Role) Leading() bool { return r.leading.Load() }

// Readiness returns a readiness check that is ready's answer while this
// replica leads, and nil while it stands by: a standby is ready, since it
// is up and campaigning, and would be taken out of service for no gain.
// Only the leader publishes, so only its readiness says anything of the
// work.
func (r *Role) Readiness(ready func() error) func() error {
	return func() error {
		if !r.Leading() {
			return nil
		}
		return ready()
	}
}
