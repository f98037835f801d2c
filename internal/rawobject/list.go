package rawobject

// ListMeta is what ScanList reads of a list's metadata. Each field is
// empty when the list lacks it, or when its value is not a string.
type ListMeta struct {
	ResourceVersion string
	Continue        string
}

// ScanList validates data as one list, as the API server sends it
// ({"kind":"ConfigMapList","metadata":{...},"items":[{...},...]}), and
// hands each of its items to item, in order, as it reaches it: the item's
// bytes, a slice of data (its capacity ends with it), exactly as sent, and
// what Scan reads of them. An error from item stops the scan and is
// returned as is. Items must be objects; "items" may be null or absent (no
// items), but not present twice. Other members are validated and skipped;
// of duplicate "metadata" keys the last wins, whole. Items handed on
// before an error are valid, whole objects, but the list is not: a caller
// discards them on error. It holds to what the package promises of Scan,
// with MaxDepth counting the list as the top level.
func ScanList(data []byte, item func(data []byte, m Meta) error) (ListMeta, error) {
	s := scanner{data: data}
	var rv, cont stringAt
	items := false
	i, err := s.rawMembers(0, "looking for the beginning of a list", func(k []byte, i int) (int, error) {
		switch string(k) {
		case "metadata":
			rv, cont = stringAt{}, stringAt{}
			return s.listMeta(i, &rv, &cont)
		case "items":
			if items {
				return i, errAt(i, "list with more than one items member")
			}
			items = true
			return s.items(i, item)
		}
		return s.skipValue(i, 1)
	})
	if err != nil {
		return ListMeta{}, err
	}
	if i = s.ws(i); i < len(data) {
		return ListMeta{}, unexpected(data, i, "after the list")
	}
	var lm ListMeta
	if rv.ok {
		lm.ResourceVersion = s.text(rv)
	}
	if cont.ok {
		lm.Continue = s.text(cont)
	}
	return lm, nil
}

// listMeta scans a list's metadata, noting its resourceVersion and
// continue; a value that is not an object is skipped.
func (s *scanner) listMeta(i int, rv, cont *stringAt) (int, error) {
	if i = s.ws(i); i >= len(s.data) || s.data[i] != '{' {
		return s.skipValue(i, 1)
	}
	return s.rawMembers(i, "looking for the beginning of a list's metadata", func(k []byte, i int) (int, error) {
		switch string(k) {
		case "resourceVersion":
			return s.stringField(i, 2, rv)
		case "continue":
			return s.stringField(i, 2, cont)
		}
		return s.skipValue(i, 2)
	})
}

// items scans a list's items, an array of objects or null, handing each to
// item.
func (s *scanner) items(i int, item func([]byte, Meta) error) (int, error) {
	i = s.ws(i)
	if i < len(s.data) && s.data[i] == 'n' {
		return s.literal(i, "null")
	}
	i, err := s.expect(i, '[', "looking for the beginning of a list's items")
	if err != nil {
		return i, err
	}
	if i = s.ws(i); i < len(s.data) && s.data[i] == ']' {
		return i + 1, nil
	}
	for {
		if i = s.ws(i); i < len(s.data) && s.data[i] != '{' {
			return i, unexpected(s.data, i, "looking for the beginning of a list item")
		}
		obj, m, end, err := s.nested(i, 3)
		if err != nil {
			return end, err
		}
		if err := item(obj, m); err != nil {
			return end, err
		}
		if i = s.ws(end); i < len(s.data) {
			switch s.data[i] {
			case ',':
				i++
				continue
			case ']':
				return i + 1, nil
			}
		}
		return i, unexpected(s.data, i, "after a list item")
	}
}
