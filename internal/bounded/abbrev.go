package bounded

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"unicode/utf8"
)

// AbbrevLen is the longest value Abbrev returns as it is.
const AbbrevLen = 128

// Abbrev is value for a log line or an error message, bounded: value
// itself when it is at most AbbrevLen bytes; otherwise its first bytes (cut
// at a character boundary), "…" and its length and hash, the first 128 bits
// of its SHA-256, as Token ends a bounded token of it. A name of hundreds of
// kilobytes thus costs a log line about 200 bytes, and still tells which
// object it is.
func Abbrev(value string) string {
	if len(value) <= AbbrevLen {
		return value
	}
	keep := AbbrevLen - 64
	for keep > 0 && !utf8.RuneStart(value[keep]) {
		keep--
	}
	sum := sha256.Sum256([]byte(value))
	return fmt.Sprintf("%s…(%d bytes, sha256 %s)", value[:keep], len(value), hex.EncodeToString(sum[:HashLen/2]))
}
