package source

import (
	"context"
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// list lists res in ns for the reflector of h. Every part of the answer
// is contact; a list with no progress (no request sent, no part of an
// answer) for the stall timeout, and at least minListPatience, is cut by
// the watchdog and retried by the reflector: a stalled body is cut as
// surely as a missing answer, and a retry that client-go sends within the
// call (after a 429) is given its own patience. A list whose answer keeps
// arriving is never cut, however long it takes: a large list must not be
// cut again and again. A failure is counted and logged, and tells h.
func (s *Source) list(ctx context.Context, client apiClient, res Resource, ns string, h *health, o metav1.ListOptions) (runtime.Object, error) {
	lctx, cancel := context.WithCancelCause(ctx)
	st := s.newStream(res, VerbList, ns)
	defer h.listing(time.Now(), cancel, st)()
	list, err := client.List(withStream(lctx, st), o)
	switch cause := context.Cause(lctx); {
	case err == nil:
		h.heard(time.Now(), false)
		return list, nil
	case errors.Is(cause, ErrStalled):
		return nil, cause // the watchdog cut it, and reported that
	default:
		s.onWatchError(ctx, res, ns, err)
		h.failed(time.Now(), err)
		return nil, err
	}
}
