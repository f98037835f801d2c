package rawobject

// key names the object keys Scan looks for.
type key int

const (
	keyOther key = iota
	keyAPIVersion
	keyKind
	keyMetadata
	keyNamespace
	keyName
	keyUID
	keyResourceVersion
	keyDeletionTimestamp
	keyManagedFields
)

// longestKey is the length of the longest key Scan looks for,
// "deletionTimestamp".
const longestKey = 17

// key reads an object member's key, which starts at the first byte at or
// after i that is not whitespace, and the colon after it. It returns which
// key it is, the offset of its opening quote, whether it has escapes, and
// the offset after the colon.
func (s *scanner) key(i int) (k key, start int, escaped bool, j int, err error) {
	if i = s.ws(i); i >= len(s.data) || s.data[i] != '"' {
		return keyOther, i, false, i, unexpected(s.data, i, "looking for the beginning of an object key")
	}
	end, escaped, err := s.skipString(i)
	if err != nil {
		return keyOther, i, escaped, end, err
	}
	raw := s.data[i+1 : end-1]
	if escaped {
		// A \u escape is six bytes for one: a longer key decodes longer
		// than any key looked for.
		if len(raw) > 6*longestKey {
			raw = nil
		} else {
			var scratch [6 * longestKey]byte
			raw = appendUnquoted(scratch[:0], raw)
		}
	}
	j, err = s.expect(end, ':', "after an object key")
	return keyOf(raw), i, escaped, j, err
}

func keyOf(b []byte) key {
	switch string(b) {
	case "apiVersion":
		return keyAPIVersion
	case "kind":
		return keyKind
	case "metadata":
		return keyMetadata
	case "namespace":
		return keyNamespace
	case "name":
		return keyName
	case "uid":
		return keyUID
	case "resourceVersion":
		return keyResourceVersion
	case "deletionTimestamp":
		return keyDeletionTimestamp
	case "managedFields":
		return keyManagedFields
	}
	return keyOther
}
