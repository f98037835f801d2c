package rawobject

import "strings"

// Meta is what Scan reads of an object: its identity, and where its
// metadata.managedFields lies in the bytes scanned. Each field is empty
// when the object lacks it, or when its value is not a string.
type Meta struct {
	APIVersion string
	Kind       string

	Namespace       string
	Name            string
	UID             string
	ResourceVersion string
	// DeletionTimestamp is metadata.deletionTimestamp as sent, such as
	// "2026-11-20T09:30:00Z"; HasDeletionTimestamp tells an empty one
	// from none.
	DeletionTimestamp    string
	HasDeletionTimestamp bool

	// managed are the spans of the bytes scanned that hold
	// metadata.managedFields, as AppendCut leaves them out.
	managed spans
	// unhashed are the spans Hash leaves out: those of managedFields and
	// metadata.resourceVersion together, cut the same way.
	unhashed spans
	// plain is set when the scan met none of the escapes
	// AppendUnescapedHTML rewrites: the bytes are copied as they are.
	plain bool
	// members are where the object's own members lie.
	members members
}

// Scan validates data as one JSON object, and reads its identity and
// where its metadata.managedFields lies. The strings it returns share no
// memory with data.
func Scan(data []byte) (Meta, error) {
	var m Meta
	var f found
	html, err := scan(data, &f, &m)
	if err != nil {
		return Meta{}, err
	}
	m.setStrings(data, &f)
	m.plain = html == 0
	return m, nil
}

// The fields Scan reads, indexing found.
const (
	fieldAPIVersion = iota
	fieldKind
	fieldNamespace
	fieldName
	fieldUID
	fieldResourceVersion
	fieldDeletionTimestamp
	fieldCount
)

// found is where each field's last value lies, when it is a string: the
// bytes between its quotes.
type found [fieldCount]stringAt

type stringAt struct {
	start, end int
	escaped    bool
	ok         bool
}

// setStrings decodes the fields found into one string, and slices it.
func (m *Meta) setStrings(data []byte, f *found) {
	m.HasDeletionTimestamp = f[fieldDeletionTimestamp].ok
	n := 0
	for _, v := range f {
		n += v.end - v.start // no value decodes longer than its bytes
	}
	if n == 0 {
		return
	}
	var b strings.Builder
	b.Grow(n)
	var at [fieldCount + 1]int
	var scratch [256]byte
	for k, v := range f {
		at[k] = b.Len()
		if raw := data[v.start:v.end]; v.escaped {
			b.Write(appendUnquoted(scratch[:0], raw))
		} else {
			b.Write(raw)
		}
	}
	at[fieldCount] = b.Len()
	all := b.String()
	field := func(k int) string { return all[at[k]:at[k+1]] }
	m.APIVersion = field(fieldAPIVersion)
	m.Kind = field(fieldKind)
	m.Namespace = field(fieldNamespace)
	m.Name = field(fieldName)
	m.UID = field(fieldUID)
	m.ResourceVersion = field(fieldResourceVersion)
	m.DeletionTimestamp = field(fieldDeletionTimestamp)
}

// scan validates data as one JSON object, notes where the fields are,
// notes in m where its members lie, adds the spans of
// metadata.managedFields to m.managed, and those of managedFields and
// metadata.resourceVersion to m.unhashed, and counts the escapes
// AppendUnescapedHTML rewrites.
func scan(data []byte, f *found, m *Meta) (htmlEscapes int, err error) {
	s := scanner{data: data}
	i, err := s.object(0, 1, f, m)
	if err != nil {
		return 0, err
	}
	if i = s.ws(i); i < len(data) {
		return 0, unexpected(data, i, "after the top-level object")
	}
	return s.htmlEscapes, nil
}

// object scans the object that starts at the first byte at or after i that
// is not whitespace, at depth (1 for the top level), as scan does, and
// returns the offset just after it. The offsets it notes in m are
// offsets in s.data.
func (s *scanner) object(i, depth int, f *found, m *Meta) (int, error) {
	i, err := s.expect(i, '{', "looking for the beginning of an object")
	if err != nil {
		return i, err
	}
	m.members.ok = true
	if i = s.ws(i); i < len(s.data) && s.data[i] == '}' {
		return i + 1, nil
	}
	for {
		k, keyStart, escaped, value, err := s.key(i)
		if err != nil {
			return value, err
		}
		value = s.ws(value)
		switch k {
		case keyAPIVersion:
			i, err = s.stringField(value, depth, &f[fieldAPIVersion])
		case keyKind:
			i, err = s.stringField(value, depth, &f[fieldKind])
		case keyMetadata:
			i, err = s.metadata(value, depth, f, &m.managed, &m.unhashed)
		default:
			i, err = s.skipValue(value, depth)
		}
		if err != nil {
			return i, err
		}
		m.members.add(keyStart, value, i, escaped)
		var more bool
		if i, more, err = s.next(i); err != nil || !more {
			return i, err
		}
	}
}

// metadata scans the value of a top-level "metadata" key, which starts at
// the first byte at or after i that is not whitespace, in an object at
// depth.
func (s *scanner) metadata(i, depth int, f *found, cut, unhashed *spans) (int, error) {
	// The last "metadata" wins, whole: forget what an earlier one held.
	for k := fieldNamespace; k < fieldCount; k++ {
		f[k] = stringAt{}
	}
	if i = s.ws(i); i >= len(s.data) || s.data[i] != '{' {
		return s.skipValue(i, depth)
	}
	if i = s.ws(i + 1); i < len(s.data) && s.data[i] == '}' {
		return i + 1, nil
	}
	// Runs of managedFields members are cut, and runs of managedFields
	// and resourceVersion members left out of the hash.
	managed, hashless := newMemberRuns(cut), newMemberRuns(unhashed)
	for {
		k, keyStart, _, j, err := s.key(i)
		if err != nil {
			return j, err
		}
		switch k {
		case keyNamespace:
			i, err = s.stringField(j, depth+1, &f[fieldNamespace])
		case keyName:
			i, err = s.stringField(j, depth+1, &f[fieldName])
		case keyUID:
			i, err = s.stringField(j, depth+1, &f[fieldUID])
		case keyResourceVersion:
			i, err = s.stringField(j, depth+1, &f[fieldResourceVersion])
		case keyDeletionTimestamp:
			i, err = s.stringField(j, depth+1, &f[fieldDeletionTimestamp])
		default:
			i, err = s.skipValue(j, depth+1)
		}
		if err != nil {
			return i, err
		}
		managed.member(k == keyManagedFields, keyStart, i)
		hashless.member(k == keyManagedFields || k == keyResourceVersion, keyStart, i)
		var more bool
		if i, more, err = s.next(i); err != nil || !more {
			if err == nil {
				managed.close()
				hashless.close()
			}
			return i, err
		}
	}
}

// memberRuns adds to out the runs of an object's members that are left
// out, with the separators that make the rest still a list of members:
// from a run's first key to the next member kept, or, when none follows,
// from the end of the last member kept before it (or from its first key,
// when none was). It is the rule runs follows for a projection, kept
// apart because it adds to a Meta's spans: behind an interface both
// would make Scan and Project allocate.
type memberRuns struct {
	out *spans
	// keptEnd is the end of the last member kept, and start and end
	// those of the run being read: -1 when there is none.
	keptEnd, start, end int
}

func newMemberRuns(out *spans) memberRuns {
	return memberRuns{out: out, keptEnd: -1, start: -1, end: -1}
}

// member notes a member whose key starts at keyStart and whose value
// ends at end, left out or kept.
func (r *memberRuns) member(left bool, keyStart, end int) {
	if left {
		if r.start < 0 {
			r.start = keyStart
		}
		r.end = end
		return
	}
	if r.start >= 0 {
		r.out.add(Span{r.start, keyStart})
		r.start = -1
	}
	r.keptEnd = end
}

// close adds the run the object ends with, if any.
func (r *memberRuns) close() {
	if r.start < 0 {
		return
	}
	if r.keptEnd >= 0 {
		r.start = r.keptEnd
	}
	r.out.add(Span{r.start, r.end})
}

// next reads what follows an object member: a comma (more is true) or the
// closing brace.
func (s *scanner) next(i int) (j int, more bool, err error) {
	return s.separator(i, '}', "after an object member")
}

// separator reads what follows a container's member or element: a comma
// (more is true) or the closing bracket; context says where it was
// looked for when it is neither.
func (s *scanner) separator(i int, closing byte, context string) (j int, more bool, err error) {
	if i = s.ws(i); i < len(s.data) {
		switch s.data[i] {
		case ',':
			return i + 1, true, nil
		case closing:
			return i + 1, false, nil
		}
	}
	return i, false, unexpected(s.data, i, context)
}

// stringField reads a field's value, which starts at the first byte at or
// after i that is not whitespace, inside a container at depth. A value
// that is not a string is skipped, and leaves the field absent.
func (s *scanner) stringField(i, depth int, f *stringAt) (int, error) {
	if i = s.ws(i); i >= len(s.data) || s.data[i] != '"' {
		*f = stringAt{}
		return s.skipValue(i, depth)
	}
	end, escaped, err := s.skipString(i)
	if err != nil {
		return end, err
	}
	*f = stringAt{start: i + 1, end: end - 1, escaped: escaped, ok: true}
	return end, nil
}
