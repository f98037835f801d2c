package checkpoint

import "strconv"

// LaterResourceVersion returns the LastResourceVersion that results from
// committing a record with resourceVersion next after cur. Every Store
// keeps LastResourceVersion by this rule.
//
// resourceVersions are opaque strings in Kubernetes, but in practice decimal
// integers from etcd: when both parse as unsigned integers the higher one is
// kept, otherwise next (the newer record) wins. An empty next carries no
// information (an [Intent] has none) and keeps cur.
func LaterResourceVersion(cur, next string) string {
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
