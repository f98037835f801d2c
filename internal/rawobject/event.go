package rawobject

// Event is what ScanEvent reads of a watch event, as the API server
// streams it: {"type":"ADDED","object":{...}}.
type Event struct {
	// Type is the event's type, such as "ADDED" or "BOOKMARK"; empty when
	// it is not a string.
	Type string
	// Object is the event's object: a slice of the bytes scanned (its
	// capacity ends with it), exactly as sent.
	Object []byte
	// Meta is what Scan reads of Object.
	Meta Meta
}

// ScanEvent validates data as one watch event, a JSON object whose
// "object" member is an object, and reads its type and its object, as
// Scan reads an object. Other members are validated and skipped; of
// duplicate keys the last wins. It holds to what the package promises of
// Scan, with MaxDepth counting the event as the top level.
func ScanEvent(data []byte) (Event, error) {
	s := scanner{data: data}
	var ev Event
	var typ stringAt
	objectAt := -1
	i, err := s.rawMembers(0, "looking for the beginning of a watch event", func(k []byte, i int) (int, error) {
		switch string(k) {
		case "type":
			return s.stringField(i, 1, &typ)
		case "object":
			// The last "object" wins: one that is not an object is an
			// error only if none follows.
			if objectAt = s.ws(i); objectAt < len(data) && data[objectAt] == '{' {
				var err error
				ev.Object, ev.Meta, i, err = s.nested(objectAt, 2)
				return i, err
			}
			ev.Object, ev.Meta = nil, Meta{}
		}
		return s.skipValue(i, 1)
	})
	if err != nil {
		return Event{}, err
	}
	if i = s.ws(i); i < len(data) {
		return Event{}, unexpected(data, i, "after the watch event")
	}
	switch {
	case objectAt < 0:
		return Event{}, errAt(i, "watch event without an object")
	case ev.Object == nil:
		return Event{}, unexpected(data, objectAt, "looking for the beginning of a watch event's object")
	}
	if typ.ok {
		ev.Type = s.text(typ)
	}
	return ev, nil
}

// rawKey reads an object member's key as key does, and returns it decoded
// when it is short enough to be one the package looks for (nil otherwise),
// and the offset after its colon.
func (s *scanner) rawKey(i int) (k []byte, j int, err error) {
	i = s.ws(i)
	if i >= len(s.data) || s.data[i] != '"' {
		return nil, i, unexpected(s.data, i, "looking for the beginning of an object key")
	}
	end, escaped, err := s.skipString(i)
	if err != nil {
		return nil, end, err
	}
	k = s.data[i+1 : end-1]
	if escaped {
		if len(k) > 6*longestKey {
			k = nil
		} else {
			k = appendUnquoted(nil, k)
		}
	}
	j, err = s.expect(end, ':', "after an object key")
	return k, j, err
}

// rawMembers scans the object that starts at the first byte at or after i
// that is not whitespace (context says where it is looked for, for the
// error when it is not there), handing each member's key, as rawKey
// returns it, and the offset after its colon to member, which returns
// the offset just after the member's value. It returns the offset just
// after the object's closing brace.
func (s *scanner) rawMembers(i int, context string, member func(k []byte, value int) (int, error)) (int, error) {
	i, err := s.expect(i, '{', context)
	if err != nil {
		return i, err
	}
	if i = s.ws(i); i < len(s.data) && s.data[i] == '}' {
		return i + 1, nil
	}
	for {
		k, j, err := s.rawKey(i)
		if err != nil {
			return j, err
		}
		if i, err = member(k, j); err != nil {
			return i, err
		}
		var more bool
		if i, more, err = s.next(i); err != nil || !more {
			return i, err
		}
	}
}
