package natskv

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/internal/bounded"
)

// Key layout inside the bucket; see the package documentation.
const (
	objectsToken = "o"
	lastRVToken  = "rv"
)

// value is what an object's key holds: its position, and, when the key is
// bounded, the object key itself, which the bounded key cannot give back.
type value struct {
	checkpoint.Position
	Key string `json:"key,omitempty"`
}

// isBounded reports whether tok, made by escapeKey, is bounded.
func isBounded(tok string) bool {
	_, ok := bounded.Cut(tok, hashMarker, maxKeyToken)
	return ok
}

// objectKey is the bucket key of one object of a resource.
func objectKey(resource, key string) string {
	return escapeKey(resource) + "." + objectsToken + "." + escapeKey(key)
}

// lastRVKey is the bucket key of a resource's LastResourceVersion.
func lastRVKey(resource string) string {
	return escapeKey(resource) + "." + lastRVToken
}

// resourceFilter matches every key of a resource.
func resourceFilter(resource string) string {
	return escapeKey(resource) + ".>"
}

const upperHex = "0123456789ABCDEF"

const (
	// maxKeyToken is the longest token escapeKey returns. A key is a
	// subject ($KV.<bucket>.<key>), which must fit in the server's 4 KiB
	// control line with room to spare; two tokens of 256 bytes do.
	maxKeyToken = 256
	// hashMarker separates the kept start of a bounded token from its
	// hash; escapeKey writes "=" only before two hexadecimal digits.
	hashMarker = "=="
)

// escapeKey turns s into one token of a KV key: letters, digits, "-" and
// "/" are kept, "." becomes "_", and any other byte becomes "=XX". A token
// longer than maxKeyToken is bounded: its start, hashMarker and a hash of
// s (see internal/bounded), which unescapeKey cannot reverse.
func escapeKey(s string) string {
	return bounded.Token(s, escapeWhole(s), hashMarker, '=', maxKeyToken)
}

// escapeWhole is escapeKey without the bound.
func escapeWhole(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case keptInKey(c):
			b.WriteByte(c)
		case c == '.':
			b.WriteByte('_')
		default:
			b.WriteByte('=')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&0xF])
		}
	}
	return b.String()
}

var (
	errBadKey = errors.New("not an escaped key")
	// errHashedKey is returned (wrapped) by unescapeKey for a bounded
	// token: the value holds the object key instead.
	errHashedKey = errors.New("bounded key of a long value")
)

// unescapeKey reverses escapeKey, except for a bounded token, for which it
// returns an error wrapping errHashedKey.
func unescapeKey(tok string) (string, error) {
	if kept, ok := bounded.Cut(tok, hashMarker, maxKeyToken); ok {
		if _, err := unescapeWhole(kept); err != nil {
			return "", err
		}
		return "", fmt.Errorf("%w: %q", errHashedKey, tok)
	}
	return unescapeWhole(tok)
}

// unescapeWhole is unescapeKey for a token that is not bounded.
func unescapeWhole(tok string) (string, error) {
	var b strings.Builder
	b.Grow(len(tok))
	for i := 0; i < len(tok); i++ {
		switch c := tok[i]; {
		case keptInKey(c):
			b.WriteByte(c)
		case c == '_':
			b.WriteByte('.')
		case c == '=' && i+2 < len(tok):
			hi, lo := strings.IndexByte(upperHex, tok[i+1]), strings.IndexByte(upperHex, tok[i+2])
			if hi < 0 || lo < 0 {
				return "", fmt.Errorf("%w: %q", errBadKey, tok)
			}
			b.WriteByte(byte(hi<<4 | lo))
			i += 2
		default:
			return "", fmt.Errorf("%w: %q", errBadKey, tok)
		}
	}
	return b.String(), nil
}

func keptInKey(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '/'
}
