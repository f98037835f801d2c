package natskv

import "strconv"

// laterResourceVersion is the LastResourceVersion after committing a
// record at next on top of cur, by the rule of checkpoint.File:
// resourceVersions are opaque in Kubernetes but decimal integers in
// practice, so when both parse the higher wins; otherwise the newer record
// does. An empty next keeps cur.
func laterResourceVersion(cur, next string) string {
	if next == "" {
		return cur
	}
	c, errC := strconv.ParseUint(cur, 10, 64)
	n, errN := strconv.ParseUint(next, 10, 64)
	if errC == nil && errN == nil && n < c {
		return cur
	}
	return next
}
