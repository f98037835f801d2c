package rawobject

import (
	"fmt"
	"strconv"
)

// SyntaxError says why an object's JSON was refused, and where.
type SyntaxError struct {
	// Offset is the byte offset in the input where the problem was found.
	Offset int
	// What describes the problem, such as "invalid UTF-8 in string".
	What string
}

func (e *SyntaxError) Error() string {
	return "rawobject: " + e.What + " at byte offset " + strconv.Itoa(e.Offset)
}

// errAt is a *SyntaxError at offset i.
func errAt(i int, what string) error { return &SyntaxError{Offset: i, What: what} }

// unexpected is the error for byte c where context (such as "after an
// object key") wanted something else.
func unexpected(data []byte, i int, context string) error {
	if i >= len(data) {
		return errAt(i, "unexpected end of input "+context)
	}
	return errAt(i, fmt.Sprintf("invalid character %s %s", quoteByte(data[i]), context))
}

func quoteByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}
