// Package bounded keeps a token made from a name within a length limit.
//
// Names of some Kubernetes objects (ClusterRoles, Roles and anything else
// validated only as a path segment) may be hundreds of kilobytes long,
// while a NATS subject, and so a key of a key-value bucket, must fit in the
// server's 4 KiB control line. Token leaves a short token alone and turns
// a long one into its start, a marker and a hash of the whole value:
//
//   - deterministic: the same value always gives the same token;
//   - bounded: never longer than the limit;
//   - distinct: the marker is a byte sequence the escaping never writes,
//     so a bounded token is never the token of a short value, and two long
//     values share a token only if they share 128 bits of SHA-256.
//
// A bounded token cannot be reversed; whoever needs the value keeps it
// elsewhere (the event's attributes, the checkpoint's value).
package bounded

import (
	"crypto/sha256"
	"encoding/hex"
)

// HashLen is the length of the hash that ends a bounded token: 32
// lower-case hexadecimal digits, the first 128 bits of the SHA-256 of the
// whole value.
const HashLen = 32

// Token returns escaped, the escaped form of value, when it is at most max
// bytes long. Otherwise it returns the start of escaped, then marker, then
// the hash of value, at most max bytes in all; the cut never splits one of
// the three-byte escapes that begin with esc ("%XX", "=XX"). marker must
// be something the escaping never writes, and max must leave room for
// marker, the hash and a few bytes of the start.
func Token(value, escaped, marker string, esc byte, max int) string {
	if len(escaped) <= max {
		return escaped
	}
	keep := max - len(marker) - HashLen
	// An escape byte in the last two kept places starts an escape the
	// cut would split: cut before it. Escape bytes only ever start an
	// escape, since the escaping writes them for nothing else.
	for _, back := range []int{1, 2} {
		if keep >= back && escaped[keep-back] == esc {
			keep -= back
			break
		}
	}
	sum := sha256.Sum256([]byte(value))
	return escaped[:keep] + marker + hex.EncodeToString(sum[:HashLen/2])
}

// Cut reports whether tok is a bounded token made with marker and max, and
// returns the kept start of the escaped value.
func Cut(tok, marker string, max int) (kept string, ok bool) {
	at := len(tok) - HashLen - len(marker)
	if len(tok) > max || at < 0 || tok[at:at+len(marker)] != marker {
		return "", false
	}
	for i := at + len(marker); i < len(tok); i++ {
		if c := tok[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", false
		}
	}
	return tok[:at], true
}
