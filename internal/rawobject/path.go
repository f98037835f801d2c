package rawobject

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Step is one step of a Path: a member of an object, by name, or, when
// Each is set, every item of a list.
type Step struct {
	Name string
	Each bool
}

// Path is a field path into an object, as CEL selects fields: its steps
// from the top level. A name step goes into objects only, Each into
// lists only; a path that meets anything else selects nothing there.
type Path []Step

// identityPaths are the members that identify an object, which a
// projection always keeps.
var identityPaths = []Path{
	{{Name: "apiVersion"}},
	{{Name: "kind"}},
	{{Name: "metadata"}, {Name: "name"}},
	{{Name: "metadata"}, {Name: "namespace"}},
	{{Name: "metadata"}, {Name: "uid"}},
	{{Name: "metadata"}, {Name: "resourceVersion"}},
	{{Name: "metadata"}, {Name: "deletionTimestamp"}},
}

// IsIdentity reports whether p selects an identity member (apiVersion,
// kind, or metadata's name, namespace, uid, resourceVersion or
// deletionTimestamp) or something inside one. Project keeps those whole
// whatever its trees say: a path to drop for which IsIdentity is true
// would drop nothing, and is refused as a configuration error. A path
// that only contains identity members, such as metadata, is not one: to
// drop it drops everything in it but them.
func (p Path) IsIdentity() bool {
	for _, id := range identityPaths {
		if len(p) >= len(id) && p[:len(id)].equal(id) {
			return true
		}
	}
	return false
}

func (p Path) equal(q Path) bool {
	if len(p) != len(q) {
		return false
	}
	for k := range p {
		if p[k] != q[k] {
			return false
		}
	}
	return true
}

// String writes p as ParsePaths reads it: a name made of letters, digits
// and underscores (not starting with a digit) as an identifier, after a
// dot unless it comes first; any other name in brackets and double
// quotes, with its quotes and backslashes escaped; Each as [*].
func (p Path) String() string {
	var b strings.Builder
	for k, st := range p {
		switch {
		case st.Each:
			b.WriteString("[*]")
		case isIdentifier(st.Name):
			if k > 0 {
				b.WriteByte('.')
			}
			b.WriteString(st.Name)
		default:
			b.WriteString(`["`)
			for j := range len(st.Name) {
				if c := st.Name[j]; c == '"' || c == '\\' {
					b.WriteByte('\\')
				}
				b.WriteByte(st.Name[j])
			}
			b.WriteString(`"]`)
		}
	}
	return b.String()
}

func isIdentifier(s string) bool {
	if s == "" || !identStart(s[0]) {
		return false
	}
	for j := 1; j < len(s); j++ {
		if !identPart(s[j]) {
			return false
		}
	}
	return true
}

func identStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func identPart(c byte) bool  { return identStart(c) || isDigit(c) }

// PathError says why ParsePaths refused its input, and where.
type PathError struct {
	// Offset is the byte offset in the input, counting from 0, where the
	// problem was found.
	Offset int
	// Msg describes the problem, and names the path it is in.
	Msg string
}

func (e *PathError) Error() string { return "position " + strconv.Itoa(e.Offset) + ": " + e.Msg }

// ParsePaths parses a comma-separated list of field paths, as CEL
// selects fields: identifier steps after dots (spec.template.spec),
// other names in brackets, quoted with double or single quotes, with
// the escapes \", \' and \\ and no others
// (metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]),
// and [*] for every item of a list (spec.containers[*].image). The first
// step may be a bracket too. Whitespace is allowed around each path and
// inside brackets; a comma inside quotes belongs to the name. An input
// of whitespace only is no paths. Errors are *PathError.
func ParsePaths(s string) ([]Path, error) {
	p := pathParser{s: s}
	p.ws()
	if p.i == len(s) {
		return nil, nil
	}
	var paths []Path
	for {
		path, err := p.path()
		if err != nil {
			return nil, err
		}
		paths = append(paths, path)
		p.ws()
		if p.i == len(s) {
			return paths, nil
		}
		if s[p.i] != ',' {
			return nil, p.fail(`expected ".", "[" or "," after a step`)
		}
		p.i++
		p.ws()
	}
}

type pathParser struct {
	s     string
	i     int
	start int // where the path being parsed starts
}

func (p *pathParser) ws() {
	for p.i < len(p.s) && isSpace(p.s[p.i]) {
		p.i++
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// fail is the error at the parser's offset, naming the path it is in.
func (p *pathParser) fail(msg string) error { return p.failAt(p.i, msg) }

func (p *pathParser) failAt(i int, msg string) error {
	var what string
	switch {
	case i >= len(p.s):
		what = "unexpected end of input"
	case p.s[i] == ',':
		what = `unexpected ","`
	default:
		if r, size := utf8.DecodeRuneInString(p.s[i:]); r == utf8.RuneError && size <= 1 {
			what = "unexpected " + quoteByte(p.s[i])
		} else {
			what = "unexpected " + strconv.QuoteRune(r)
		}
	}
	return &PathError{Offset: i, Msg: what + " in path " + strconv.Quote(p.pathText()) + ": " + msg}
}

// pathText is the path being parsed as written: up to the first comma
// outside quotes, or the end of the input.
func (p *pathParser) pathText() string {
	var quote byte
	for j := p.start; j < len(p.s); j++ {
		switch c := p.s[j]; {
		case quote != 0 && c == '\\':
			j++
		case quote != 0 && c == quote:
			quote = 0
		case quote == 0 && (c == '"' || c == '\''):
			quote = c
		case quote == 0 && c == ',':
			return p.s[p.start:j]
		}
	}
	return p.s[p.start:]
}

func (p *pathParser) path() (Path, error) {
	p.start = p.i
	var path Path
	switch {
	case p.i < len(p.s) && identStart(p.s[p.i]):
		path = append(path, Step{Name: p.identifier()})
	case p.i < len(p.s) && p.s[p.i] == '[':
		st, err := p.bracket()
		if err != nil {
			return nil, err
		}
		path = append(path, st)
	default:
		return nil, p.fail(`expected a field path: a field name or "["`)
	}
	for p.i < len(p.s) {
		switch c := p.s[p.i]; {
		case c == '.':
			if p.i++; p.i >= len(p.s) || !identStart(p.s[p.i]) {
				return nil, p.fail(`expected a field name after "." (write a name with other characters than letters, digits and "_" as ["name"])`)
			}
			path = append(path, Step{Name: p.identifier()})
		case c == '[':
			st, err := p.bracket()
			if err != nil {
				return nil, err
			}
			path = append(path, st)
		case c == ',' || isSpace(c):
			return path, nil
		default:
			return nil, p.fail(`expected ".", "[" or "," after a step (write a name with other characters than letters, digits and "_" as ["name"])`)
		}
	}
	return path, nil
}

func (p *pathParser) identifier() string {
	start := p.i
	for p.i < len(p.s) && identPart(p.s[p.i]) {
		p.i++
	}
	return p.s[start:p.i]
}

// bracket parses a step in brackets, whose "[" is at the parser's offset.
func (p *pathParser) bracket() (Step, error) {
	p.i++
	p.ws()
	var st Step
	switch {
	case p.i < len(p.s) && p.s[p.i] == '*':
		p.i++
		st.Each = true
	case p.i < len(p.s) && (p.s[p.i] == '"' || p.s[p.i] == '\''):
		name, err := p.quoted()
		if err != nil {
			return Step{}, err
		}
		st.Name = name
	default:
		return Step{}, p.fail(`expected a quoted name or "*" after "["`)
	}
	p.ws()
	if p.i >= len(p.s) || p.s[p.i] != ']' {
		return Step{}, p.fail(`expected "]"`)
	}
	p.i++
	return st, nil
}

// quoted parses a quoted name, whose opening quote is at the parser's
// offset.
func (p *pathParser) quoted() (string, error) {
	open := p.i
	q := p.s[open]
	p.i++
	start := p.i
	var b []byte // the name so far, once an escape makes it differ from the input
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == q:
			name := p.s[start:p.i]
			if b != nil {
				name = string(b)
			}
			p.i++
			return name, nil
		case c == '\\':
			if p.i+1 >= len(p.s) {
				return "", p.failAt(p.i+1, "the quoted name that starts at position "+strconv.Itoa(open)+" is not closed")
			}
			switch e := p.s[p.i+1]; e {
			case '"', '\'', '\\':
				if b == nil {
					b = append([]byte(nil), p.s[start:p.i]...)
				}
				b = append(b, e)
				p.i += 2
			default:
				return "", p.fail(`unknown escape in a quoted name: only \", \' and \\ are escapes`)
			}
		case c < utf8.RuneSelf:
			if b != nil {
				b = append(b, c)
			}
			p.i++
		default:
			r, size := utf8.DecodeRuneInString(p.s[p.i:])
			if r == utf8.RuneError && size == 1 {
				return "", &PathError{Offset: p.i, Msg: "invalid UTF-8 in path " + strconv.Quote(p.pathText())}
			}
			if b != nil {
				b = append(b, p.s[p.i:p.i+size]...)
			}
			p.i += size
		}
	}
	return "", p.failAt(p.i, "the quoted name that starts at position "+strconv.Itoa(open)+" is not closed")
}
