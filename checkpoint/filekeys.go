package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/kubebus/bridge/internal/jsonenc"
)

// maxFileKey is the longest object key the file stores as its bbolt key.
// bbolt refuses keys past 32 KiB, and a Commit with one such key would fail
// whole, again and again, while the API server takes names of up to about
// 524,000 bytes (ClusterRoles, Roles and other kinds validated only as a
// path segment). 1 KiB keeps every "namespace/name" of DNS names (at most
// 317 bytes) as it is.
const maxFileKey = 1024

// longKeyMark separates the kept start of a long key's bbolt key from the
// hash of the whole key. Object keys are UTF-8 text, which never holds the
// byte 0xFF, so the bbolt key of a long key is never an object key.
const longKeyMark = "\xff"

// fileKey is the bbolt key of an object key: the key itself when it is at
// most maxFileKey bytes; otherwise its start, longKeyMark and the first 128
// bits of its SHA-256 in hexadecimal, maxFileKey bytes in all. The value
// of a long key holds the whole key (appendValue), which Load gives back.
// Earlier releases stored long keys whole; OpenFile moves them (migrate).
func fileKey(key string) []byte {
	return appendFileKey(nil, key)
}

// appendFileKey appends the bbolt key of key (see fileKey) to dst.
func appendFileKey(dst []byte, key string) []byte {
	if len(key) <= maxFileKey {
		return append(dst, key...)
	}
	sum := sha256.Sum256([]byte(key))
	const hashLen = 32
	keep := maxFileKey - len(longKeyMark) - hashLen
	dst = slices.Grow(dst, maxFileKey)
	dst = append(dst, key[:keep]...)
	dst = append(dst, longKeyMark...)
	return hex.AppendEncode(dst, sum[:hashLen/2])
}

// isLongKey reports whether k, a bbolt key, is that of a long object key.
func isLongKey(k []byte) bool { return strings.Contains(string(k), longKeyMark) }

// fileValue is the JSON of an object's position in the file; Key is set
// for long keys only.
type fileValue struct {
	Position
	Key string `json:"key,omitempty"`
}

// appendValue appends the value stored for key at p:
// {"uid":"…","rv":"…"} ("view" too when p has one), the bytes json.Marshal
// writes for a Position, with "key" as well when key is long.
func appendValue(dst []byte, key string, p Position) []byte {
	dst = appendPosition(dst, p)
	if len(key) <= maxFileKey {
		return dst
	}
	dst = append(dst[:len(dst)-1], `,"key":`...)
	dst = jsonenc.AppendString(dst, key)
	return append(dst, '}')
}

// valueSize is about the length of the value appendValue makes for r:
// exact unless a string needs escaping.
func valueSize(r *Record) int {
	n := len(`{"uid":"","rv":""}`) + len(r.UID) + len(r.ResourceVersion)
	if r.View != "" {
		n += len(`,"view":""`) + len(r.View)
	}
	if len(r.Key) > maxFileKey {
		n += len(`,"key":""`) + len(r.Key)
	}
	return n
}

// decodeEntry decodes one stored object, bbolt key k and value v, into its
// object key and position.
func decodeEntry(k, v []byte) (string, Position, error) {
	p, err := DecodePosition(v)
	if err != nil {
		return "", Position{}, fmt.Errorf("key %q: %w", k, err)
	}
	if !isLongKey(k) {
		return string(k), p, nil
	}
	var fv fileValue
	if err := json.Unmarshal(v, &fv); err != nil || fv.Key == "" || string(fileKey(fv.Key)) != string(k) {
		return "", Position{}, fmt.Errorf("key %q: the value holds no object key of that key", k)
	}
	return fv.Key, p, nil
}
