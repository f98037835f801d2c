package rawobject

// Span is the bytes [Start, End) of an object's JSON.
type Span struct{ Start, End int }

// spans are spans of an object, in order. The first two are kept
// inline: only duplicate keys, which the API server never sends, make
// more (an object's managedFields is one span, and with its
// resourceVersion two).
type spans struct {
	n     int
	first [2]Span
	more  []Span
}

func (c *spans) add(sp Span) {
	if c.n < len(c.first) {
		c.first[c.n] = sp
	} else {
		c.more = append(c.more, sp)
	}
	c.n++
}

func (c *spans) at(k int) Span {
	if k < len(c.first) {
		return c.first[k]
	}
	return c.more[k-len(c.first)]
}

// ManagedFields appends to dst the spans of the bytes scanned that hold
// metadata.managedFields, with the commas that separate it from its
// neighbours, in order, and returns the extended slice. Leaving them out
// gives the object without metadata.managedFields.
func (m *Meta) ManagedFields(dst []Span) []Span {
	for k := range m.managed.n {
		dst = append(dst, m.managed.at(k))
	}
	return dst
}

// CutLen is the length of what AppendCut appends for the data m was
// scanned from, of length n.
func (m *Meta) CutLen(n int) int {
	for k := range m.managed.n {
		sp := m.managed.at(k)
		n -= sp.End - sp.Start
	}
	return n
}

// AppendCut appends data without its metadata.managedFields to dst, and
// returns the extended buffer. data must be the bytes m was scanned from.
func (m *Meta) AppendCut(dst, data []byte) []byte {
	done := 0
	for k := range m.managed.n {
		sp := m.managed.at(k)
		dst = append(dst, data[done:sp.Start]...)
		done = sp.End
	}
	return append(dst, data[done:]...)
}

// AppendCut validates data as one JSON object, as Scan does, and appends
// it without its metadata.managedFields to dst. On error it returns dst
// unchanged.
func AppendCut(dst, data []byte) ([]byte, error) {
	var m Meta
	var f found
	if _, err := scan(data, &f, &m); err != nil {
		return dst, err
	}
	return m.AppendCut(dst, data), nil
}

// shift moves every span back by d bytes: the spans of an object scanned
// inside a larger document, made relative to the object's first byte.
func (c *spans) shift(d int) {
	for k := range c.first {
		c.first[k].Start -= d
		c.first[k].End -= d
	}
	for k := range c.more {
		c.more[k].Start -= d
		c.more[k].End -= d
	}
}
