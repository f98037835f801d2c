package source

import (
	"context"
	"errors"
	"net/http/httptrace"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
)

// list lists res in ns for the reflector of h. The first byte of the
// answer is contact; a list that has none for the stall timeout (and at
// least minListPatience) is cut by the watchdog and retried by the
// reflector. A list whose answer has begun is never cut,
// however long the rest takes: a large list must not be cut again and
// again. A failure is counted and logged, and tells h.
func (s *Source) list(ctx context.Context, client dynamic.ResourceInterface, res Resource, ns string, h *health, o metav1.ListOptions) (runtime.Object, error) {
	lctx, cancel := context.WithCancelCause(ctx)
	call, done := h.listing(time.Now(), cancel)
	defer done()
	lctx = httptrace.WithClientTrace(lctx, &httptrace.ClientTrace{
		GotFirstResponseByte: func() { h.answered(call, time.Now()) },
	})
	list, err := client.List(lctx, o)
	switch cause := context.Cause(lctx); {
	case err == nil:
		h.answered(call, time.Now())
		return list, nil
	case errors.Is(cause, ErrStalled):
		return nil, cause // the watchdog cut it, and reported that
	default:
		s.onWatchError(ctx, res, ns, err)
		h.failed(time.Now(), err)
		return nil, err
	}
}
