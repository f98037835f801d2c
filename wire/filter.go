package wire

import (
	"errors"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Filter returns the subject filter that matches every subject t makes for
// the objects of resource gr in cluster, and only in namespace when it is
// not empty. Those placeholders become the tokens Subject writes for them
// (escaped and bounded with EscapeToken, the core group as CoreGroupToken);
// every other placeholder becomes the wildcard "*". So a consumer reads
// one resource of one cluster without knowing how names are escaped, and
// the filter is never longer than the longest subject, MaxSubjectLen.
//
// A layout without {cluster} or {resource} cannot narrow by them: the
// filter then matches other clusters or resources too, and a consumer
// must check each event's own attributes.
func (t *SubjectTemplate) Filter(cluster string, gr schema.GroupResource, namespace string) (string, error) {
	if cluster == "" {
		return "", errors.New("wire: subject filter: empty cluster")
	}
	if gr.Resource == "" {
		return "", errors.New("wire: subject filter: empty resource")
	}
	var b strings.Builder
	b.Grow(128)
	for i, p := range t.parts {
		if i > 0 {
			b.WriteByte('.')
		}
		switch p.f {
		case literal:
			b.WriteString(p.lit)
		case fieldCluster:
			b.WriteString(EscapeToken(cluster))
		case fieldGroup:
			if gr.Group == "" {
				b.WriteString(CoreGroupToken)
			} else {
				b.WriteString(EscapeToken(gr.Group))
			}
		case fieldResource:
			b.WriteString(EscapeToken(gr.Resource))
		case fieldNamespace:
			if namespace == "" {
				b.WriteByte('*')
			} else {
				b.WriteString(EscapeToken(namespace))
			}
		default:
			b.WriteByte('*')
		}
	}
	return b.String(), nil
}

// ObjectOf reads the namespace and name back from a subject t made; ok is
// false when either cannot be read back: a subject of another layout, or
// a bounded token (the value is then in the event's own attributes).
func (t *SubjectTemplate) ObjectOf(subject string) (namespace, name string, ok bool) {
	toks := strings.Split(subject, ".")
	if len(toks) != len(t.parts) {
		return "", "", false
	}
	var haveNS, haveName bool
	for i, p := range t.parts {
		var err error
		switch p.f {
		case fieldNamespace:
			if toks[i] == ClusterScopedToken {
				namespace, haveNS = "", true
				continue
			}
			namespace, err = UnescapeToken(toks[i])
			haveNS = err == nil
		case fieldName:
			name, err = UnescapeToken(toks[i])
			haveName = err == nil
		}
	}
	return namespace, name, haveNS && haveName
}
