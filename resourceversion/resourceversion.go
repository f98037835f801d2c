// Package resourceversion orders the resourceVersions of Kubernetes
// objects by one rule, the one the bridge and its consumers share: the
// bridge dates what it publishes and checkpoints by it, and a consumer
// drops a state older than the one it holds by it.
//
// The rule is Kubernetes' own (k8s.io/apimachinery's
// util/resourceversion): a resourceVersion is comparable when it is a
// positive decimal integer written without a sign or leading zeros, of any
// length; two comparable ones are ordered as the integers they write. Any
// other value, the empty string and "0" included, is opaque: it is
// compared with nothing, not even with itself, and each caller says what it
// does then. An etcd-backed API server gives comparable resourceVersions
// (etcd's revisions); other API servers, aggregated ones, may not.
package resourceversion

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrOpaque is wrapped by the error of Compare when a resourceVersion is
// not comparable.
var ErrOpaque = errors.New("not a positive decimal integer without leading zeros")

// Comparable reports whether rv follows the rule of the package: a
// positive decimal integer, without a sign or leading zeros.
func Comparable(rv string) bool {
	if rv == "" || rv[0] == '0' {
		return false
	}
	for i := 0; i < len(rv); i++ {
		if rv[i] < '0' || rv[i] > '9' {
			return false
		}
	}
	return true
}

// Compare returns -1 when a is older than b, 0 when they are the same
// version and +1 when a is newer. It returns an error wrapping ErrOpaque,
// and 0, when either is not Comparable.
func Compare(a, b string) (int, error) {
	if !Comparable(a) {
		return 0, fmt.Errorf("resourceversion: %q: %w", a, ErrOpaque)
	}
	if !Comparable(b) {
		return 0, fmt.Errorf("resourceversion: %q: %w", b, ErrOpaque)
	}
	return order(a, b), nil
}

// Before reports whether a is older than b. It is false when either is not
// Comparable: an opaque resourceVersion is never known to be older.
func Before(a, b string) bool {
	return Comparable(a) && Comparable(b) && order(a, b) < 0
}

// Uint64 returns the value of rv when it is Comparable and fits in 64 bits,
// which every etcd revision does, for callers that keep many of them
// packed. Two values it gives are ordered as Compare orders their
// resourceVersions; it never gives 0.
func Uint64(rv string) (uint64, bool) {
	if !Comparable(rv) {
		return 0, false
	}
	n, err := strconv.ParseUint(rv, 10, 64)
	return n, err == nil
}

// order compares two comparable resourceVersions: without leading zeros,
// the longer writes the larger integer, and of two of the same length the
// one that sorts later as text.
func order(a, b string) int {
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}
