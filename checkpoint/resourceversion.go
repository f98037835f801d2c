package checkpoint

import "github.com/kubebus/bridge/resourceversion"

// LaterResourceVersion returns the LastResourceVersion that results from
// committing a record with resourceVersion next after cur. Every Store
// keeps LastResourceVersion by this rule.
//
// When both are comparable (package resourceversion) the newer one is
// kept; otherwise nothing is known of their order, and next, the newer
// record, wins. An empty next carries no information (an [Intent] has
// none) and keeps cur.
func LaterResourceVersion(cur, next string) string {
	if next == "" || resourceversion.Before(next, cur) {
		return cur
	}
	return next
}
