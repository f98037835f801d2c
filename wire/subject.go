package wire

import (
	"errors"
	"fmt"
	"strings"
)

// Tokens that stand for an empty value.
const (
	// CoreGroupToken is the {group} token of the core API group ("" in
	// Kubernetes; ConfigMaps, Pods, Nodes...). No other group can produce
	// it: groups served by CRDs and aggregated APIs contain a dot, which
	// escapes to "_".
	CoreGroupToken = "core"
	// ClusterScopedToken is the {namespace} token of cluster-scoped
	// objects. No namespace can produce it: it would have to be ".".
	ClusterScopedToken = "_"
)

// MaxSubjectLen is the longest subject the sink publishes to. The server
// closes a connection whose protocol line passes its max_control_line
// (4 KiB by default); a publish's line holds the subject, a reply inbox and
// two sizes. The rest of the 4 KiB is room for those and for the requests
// consumers make with a subject inside another, such as a direct get
// ($JS.API.DIRECT.GET.<stream>.<subject>).
const MaxSubjectLen = 3072

// DefaultHistorySubject is the default of BRIDGE_NATS_SUBJECT in the
// history layout and in core mode.
const DefaultHistorySubject = "{prefix}.{cluster}.{group}.{version}.{resource}.{namespace}.{name}"

// field is what a placeholder of a subject template stands for.
type field int

const (
	literal field = iota
	fieldCluster
	fieldGroup
	fieldVersion
	fieldResource
	fieldKind
	fieldNamespace
	fieldName
	fieldAction
)

// placeholders maps each placeholder but {prefix}, which is expanded when
// the template is parsed, to its field.
var placeholders = map[string]field{
	"cluster":   fieldCluster,
	"group":     fieldGroup,
	"version":   fieldVersion,
	"resource":  fieldResource,
	"kind":      fieldKind,
	"namespace": fieldNamespace,
	"name":      fieldName,
	"action":    fieldAction,
}

// SubjectTemplate builds the subject of each message from a layout such as
// DefaultHistorySubject. A SubjectTemplate is immutable and safe for concurrent use.
type SubjectTemplate struct {
	src   string
	parts []part
	// limit is the longest subject Subject returns: MaxSubjectLen.
	limit int
}

// part is one token of a subject: a fixed word, or a message's field.
type part struct {
	lit string
	f   field
}

// ParseSubjectTemplate parses a subject layout: tokens separated by ".", each
// either a fixed word or exactly one placeholder. The placeholders are
// {prefix} (the prefix, which may itself have several tokens), {cluster},
// {group}, {version}, {resource}, {kind}, {namespace}, {name} and
// {action}. The layout must start with {prefix}, so that every subject
// lies under the prefix the stream captures. Every value is at most
// MaxTokenLen bytes once escaped, so the layout and the prefix must leave
// room for that many in each placeholder within MaxSubjectLen.
func ParseSubjectTemplate(layout, prefix string) (*SubjectTemplate, error) {
	if err := CheckSubjectPrefix(prefix); err != nil {
		return nil, fmt.Errorf("prefix %q: %w", prefix, err)
	}
	t := &SubjectTemplate{src: layout, limit: MaxSubjectLen}
	for i, tok := range strings.Split(layout, ".") {
		name, isPlaceholder := strings.CutPrefix(tok, "{")
		if isPlaceholder {
			var closed bool
			name, closed = strings.CutSuffix(name, "}")
			if !closed || strings.ContainsAny(name, "{}") {
				return nil, fmt.Errorf("token %d %q: a placeholder must be a whole token, such as {name}", i+1, tok)
			}
		}
		isPrefix := isPlaceholder && name == "prefix"
		switch {
		case (i == 0) != isPrefix:
			return nil, fmt.Errorf("must start with {prefix}, and only once, so that every subject lies under the prefix the stream captures")
		case isPrefix:
			for p := range strings.SplitSeq(prefix, ".") {
				t.parts = append(t.parts, part{lit: p})
			}
		case isPlaceholder:
			f, ok := placeholders[name]
			if !ok {
				return nil, fmt.Errorf("token %d: unknown placeholder %s; use {prefix}, {cluster}, {group}, {version}, {resource}, {kind}, {namespace}, {name} or {action}", i+1, tok)
			}
			t.parts = append(t.parts, part{f: f})
		case strings.ContainsAny(tok, "{}"):
			return nil, fmt.Errorf("token %d %q: a placeholder must be a whole token, such as {name}", i+1, tok)
		case !validToken(tok):
			return nil, fmt.Errorf("token %d %q: a fixed token must not be empty or hold \"*\", \">\", whitespace or non-ASCII bytes", i+1, tok)
		default:
			t.parts = append(t.parts, part{lit: tok})
		}
	}
	if n := t.longest(); n > t.limit {
		return nil, fmt.Errorf("the longest subject would be %d bytes, above %d: with each placeholder at its longest (%d bytes), the prefix and fixed words leave no room; shorten them",
			n, t.limit, MaxTokenLen)
	}
	return t, nil
}

// longest is the length of the longest subject t can make.
func (t *SubjectTemplate) longest() int {
	n := len(t.parts) - 1 // dots
	for _, p := range t.parts {
		if p.f == literal {
			n += len(p.lit)
		} else {
			n += MaxTokenLen
		}
	}
	return n
}

// CheckSubjectPrefix reports why prefix cannot start subjects.
func CheckSubjectPrefix(prefix string) error {
	if prefix == "" {
		return errors.New("must not be empty")
	}
	if strings.HasPrefix(prefix, "$") {
		return errors.New("must not start with \"$\", which NATS reserves for its own subjects")
	}
	for tok := range strings.SplitSeq(prefix, ".") {
		if !validToken(tok) {
			return fmt.Errorf("token %q: tokens must not be empty or hold \"*\", \">\", whitespace or non-ASCII bytes", tok)
		}
	}
	return nil
}

// String returns the layout the template was parsed from.
func (t *SubjectTemplate) String() string { return t.src }

// Subject returns the subject of m: each placeholder replaced by the
// message's value, escaped with EscapeToken. The core group is written as
// CoreGroupToken and the namespace of cluster-scoped objects as
// ClusterScopedToken. Every value is bounded by EscapeToken, so the subject
// is at most MaxSubjectLen bytes whatever the name. It fails when another
// value the layout uses is empty, or, as a last guard, when the subject
// would pass the limit; a subject that passes it is never returned.
func (t *SubjectTemplate) Subject(m *Message) (string, error) {
	var b strings.Builder
	b.Grow(128)
	for i, p := range t.parts {
		if i > 0 {
			b.WriteByte('.')
		}
		var v string
		switch p.f {
		case literal:
			b.WriteString(p.lit)
			continue
		case fieldCluster:
			v = m.Cluster
		case fieldGroup:
			if v = m.Resource.Group; v == "" {
				b.WriteString(CoreGroupToken)
				continue
			}
		case fieldVersion:
			v = m.Resource.Version
		case fieldResource:
			v = m.Resource.Resource
		case fieldKind:
			v = m.Kind
		case fieldNamespace:
			if v = m.Namespace; v == "" {
				b.WriteString(ClusterScopedToken)
				continue
			}
		case fieldName:
			v = m.Name
		case fieldAction:
			v = m.Action
		}
		if v == "" {
			return "", fmt.Errorf("event %s: empty %s for the subject %s", m.ID, p.f, t.src)
		}
		b.WriteString(EscapeToken(v))
	}
	if b.Len() > t.limit {
		return "", fmt.Errorf("event %s of %s %s: subject of %d bytes is longer than %d", m.ID, m.Resource.GroupResource(), shortKey(m), b.Len(), t.limit)
	}
	return b.String(), nil
}

// shortKey is m's key for messages: whole when short, else its start and
// length, so that one object's long name does not flood a log.
func shortKey(m *Message) string {
	const most = 128
	k := m.Key()
	if len(k) <= most {
		return fmt.Sprintf("%q", k)
	}
	return fmt.Sprintf("%q... (%d bytes)", k[:most], len(k))
}

func (f field) String() string {
	for name, g := range placeholders {
		if g == f {
			return "{" + name + "}"
		}
	}
	return "fixed token"
}

// StreamSubject is the subject filter of the stream the bridge creates:
// every subject under prefix.
func StreamSubject(prefix string) string { return prefix + ".>" }

// Sample is a subject t makes, with "x" for every value: what a stream
// must capture for the bridge to publish to it.
func (t *SubjectTemplate) Sample() string {
	parts := make([]string, len(t.parts))
	for i, p := range t.parts {
		parts[i] = p.lit
		if p.f != literal {
			parts[i] = "x"
		}
	}
	return strings.Join(parts, ".")
}

// SubjectMatches reports whether the subject filter pattern, which may use
// the wildcards "*" and ">", matches subject.
func SubjectMatches(pattern, subject string) bool {
	pt := strings.Split(pattern, ".")
	st := strings.Split(subject, ".")
	for i, p := range pt {
		switch {
		case p == ">":
			return i < len(st)
		case i >= len(st):
			return false
		case p != "*" && p != st[i]:
			return false
		}
	}
	return len(pt) == len(st)
}
