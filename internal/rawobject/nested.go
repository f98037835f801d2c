package rawobject

// nested scans the object that starts at the first byte at or after i that
// is not whitespace, at depth inside a larger document, as Scan scans a
// whole one. It returns the object's bytes, a slice of s.data, what Scan
// would return for them, and the offset just after it.
func (s *scanner) nested(i, depth int) (obj []byte, m Meta, end int, err error) {
	start := s.ws(i)
	var f found
	html := s.htmlEscapes
	if end, err = s.object(start, depth, &f, &m); err != nil {
		return nil, Meta{}, end, err
	}
	m.managed.shift(start)
	m.unhashed.shift(start)
	m.members.shift(start)
	m.setStrings(s.data, &f)
	m.plain = s.htmlEscapes == html
	return s.data[start:end:end], m, end, nil
}

// text decodes a string found by stringField.
func (s *scanner) text(at stringAt) string {
	raw := s.data[at.start:at.end]
	if at.escaped {
		return string(appendUnquoted(nil, raw))
	}
	return string(raw)
}
