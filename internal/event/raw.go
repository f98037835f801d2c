package event

import (
	"github.com/kubebus/bridge/internal/jsonenc"
	"github.com/kubebus/bridge/internal/rawaccess"
	"github.com/kubebus/bridge/internal/rawobject"
	"github.com/kubebus/bridge/source"
)

// Objects as the API server sent them (source.Delta.Raw) are copied into
// the event as they are: their members in the server's order, with its
// escapes, its numbers as it spelled them. These changes only, made while
// copying:
//
//   - metadata.managedFields is left out, unless KeepManagedFields, at
//     the byte level (the spans rawobject.Meta found), with no other
//     byte touched;
//   - the escapes \u003c, \u003e and \u0026, which the API server writes
//     for "<", ">" and "&" (encoding/json's HTML escaping), are written
//     as those characters, as the parsed path writes them: six bytes
//     each would make the event of an object full of them up to six
//     times its size, and nothing on a message bus needs them;
//   - whitespace around the object is left out;
//   - an object with neither apiVersion nor kind, as the items of a list
//     of built-in objects come, gets both, those of its resource, as
//     members added at its end: the dynamic client's decoder adds them
//     to list items the same way, so the event of a listed object is the
//     event of the object as a watch or a GET sends it.

// appendRaw appends the object of d.Raw, as its scan gives it, to b.
func (e Encoder) appendRaw(b []byte, d *source.Delta) []byte {
	raw := rawOf(d)
	if len(raw.Data) == 0 {
		return append(b, "null"...)
	}
	start := len(b)
	// Whitespace around the object (a GET's answer ends in a newline) is
	// left out: the event stays one line of compact JSON.
	lo, hi := 0, len(raw.Data)
	for lo < hi && isSpace(raw.Data[lo]) {
		lo++
	}
	for hi > lo && isSpace(raw.Data[hi-1]) {
		hi--
	}
	if e.KeepManagedFields {
		b = raw.Meta.AppendUnescapedHTML(b, raw.Data[lo:hi])
	} else {
		var scratch [2]rawobject.Span
		done := lo
		for _, sp := range raw.Meta.ManagedFields(scratch[:0]) {
			b = raw.Meta.AppendUnescapedHTML(b, raw.Data[done:sp.Start])
			done = sp.End
		}
		b = raw.Meta.AppendUnescapedHTML(b, raw.Data[done:hi])
	}
	if raw.Meta.APIVersion != "" || raw.Meta.Kind != "" {
		return b
	}
	return appendTypeMeta(b, start, d.Resource.APIVersion(), d.Resource.Kind)
}

// rawLen is room enough for what appendRaw appends for d, unless an added
// apiVersion or kind holds characters JSON escapes.
func (e Encoder) rawLen(d *source.Delta) int {
	raw := rawOf(d)
	n := len(raw.Data)
	if !e.KeepManagedFields {
		n = raw.Meta.CutLen(n)
	}
	if raw.Meta.APIVersion == "" && raw.Meta.Kind == "" {
		n += len(`,"apiVersion":"","kind":""`) + len(d.Resource.APIVersion()) + len(d.Resource.Kind)
	}
	return n
}

// scanned is a raw object's data and what its scan read of it.
type scanned struct {
	Data []byte
	Meta *rawobject.Meta
}

func rawOf(d *source.Delta) scanned { return scanned{d.Raw.Data(), rawaccess.Meta(d.Raw)} }

// appendTypeMeta adds apiVersion and kind members at the end of the JSON
// object b[start:], which is valid JSON (Scan checked it) and ends in its
// closing brace, and returns the extended buffer.
func appendTypeMeta(b []byte, start int, apiVersion, kind string) []byte {
	end := len(b) - 1 // the object's closing brace
	empty := false    // no member before the brace
	for i := end - 1; i >= start; i-- {
		if c := b[i]; !isSpace(c) {
			empty = c == '{'
			break
		}
	}
	b = b[:end]
	if !empty {
		b = append(b, ',')
	}
	b = append(b, `"apiVersion":`...)
	b = jsonenc.AppendString(b, apiVersion)
	b = append(b, `,"kind":`...)
	b = jsonenc.AppendString(b, kind)
	return append(b, '}')
}

// isSpace reports whether c is JSON whitespace.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
