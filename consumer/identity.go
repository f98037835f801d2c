package consumer

import (
	"cmp"
	"encoding/hex"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/kubebus/bridge/resourceversion"
)

// uid is an object's uid in 16 bytes: the UUID's bytes, or for a uid that
// is not a UUID, a 128-bit hash of it. It keeps per-key state small.
type uid struct {
	b [16]byte
	// text is false when b is a hash, and the uid's text is lost.
	text bool
}

// parseUID makes the compact form of s.
func parseUID(s string) uid {
	var u uid
	if len(s) == 36 && s[8] == '-' && s[13] == '-' && s[18] == '-' && s[23] == '-' {
		hexed := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:36]
		if _, err := hex.Decode(u.b[:], []byte(hexed)); err == nil && hex.EncodeToString(u.b[:]) == hexed {
			u.text = true
			return u
		}
	}
	h := fnv.New128a()
	h.Write([]byte(s))
	h.Sum(u.b[:0])
	return u
}

// String returns the uid as a UUID, or "" when only its hash is known.
func (u uid) String() string {
	if !u.text {
		return ""
	}
	s := hex.EncodeToString(u.b[:])
	return s[0:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:32]
}

// hashKey is a 64-bit hash of a bus key or an object key, for the sets
// that need not keep the key's text.
func hashKey(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// apiRV is the API server's resourceVersion of an object, ordered by
// package resourceversion's rule, as the bridge orders it. The zero apiRV
// is one that rule cannot compare: such states are taken as newer than
// any other. Every etcd revision fits in n; a longer resourceVersion is
// kept as its text.
type apiRV struct {
	n    uint64  // the value; 0 when it does not fit, or is not comparable
	wide *string // a comparable resourceVersion beyond 64 bits
}

func parseRV(s string) apiRV {
	if n, ok := resourceversion.Uint64(s); ok {
		return apiRV{n: n}
	}
	if resourceversion.Comparable(s) {
		w := strings.Clone(s)
		return apiRV{wide: &w}
	}
	return apiRV{}
}

// compare orders r and o as resourceversion.Compare does; ok is false when
// either cannot be compared.
func (r apiRV) compare(o apiRV) (c int, ok bool) {
	switch {
	case r == apiRV{} || o == apiRV{}:
		return 0, false
	case r.wide == nil && o.wide == nil:
		return cmp.Compare(r.n, o.n), true
	}
	// Beyond 64 bits: rare enough to compare as text.
	c, err := resourceversion.Compare(r.String(), o.String())
	return c, err == nil
}

func (r apiRV) String() string {
	switch {
	case r.wide != nil:
		return *r.wide
	case r.n != 0:
		return strconv.FormatUint(r.n, 10)
	}
	return ""
}

// objectKey is the informer's key of an object: "namespace/name", or
// "name" when cluster-scoped.
func objectKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
