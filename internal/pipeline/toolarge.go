package pipeline

import (
	"fmt"

	"github.com/kubebus/bridge/internal/bounded"
)

// Changes too large for the bus: the event is sent again without the
// object's content (ContentOmitted), in its place in the object's order.

// withoutContent is it with the event of its delta without the object's
// content, to send in place of the full event, which failed with
// tooLarge. When that event cannot be encoded, it skips the delta.
func (p *Pipeline) withoutContent(it item, tooLarge error) (item, bool) {
	d := *it.delta
	d.ContentOmitted = true
	msg, lease, err := p.encodeDelta(&d)
	if err != nil {
		p.skip(it, fmt.Errorf("%w; without its content: %w", tooLarge, err))
		return item{}, false
	}
	return item{obj: it.obj, delta: &d, msg: msg, lease: lease, tooLarge: tooLarge}, true
}

func (p *Pipeline) logOmitted(it item) {
	p.log.Warn("change published without its content: its event is larger than the bus takes",
		"resource", it.delta.Resource.Name(), "namespace", it.delta.Namespace, "name", bounded.Abbrev(it.delta.Name),
		"uid", it.delta.UID, "resourceVersion", it.delta.ResourceVersion, "type", it.delta.Type, "err", it.tooLarge)
}
