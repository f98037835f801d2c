package access

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// FieldError is one problem in a rules file: the file, the field's path in
// it (grants[0].rules[1].verbs[2]) and what is wrong with it.
type FieldError struct {
	Source  string // the file's name, or what ParseRules was told
	Field   string // a path such as grants[0].rules[1].verbs; empty for the whole file
	Problem string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("access: %s: %s", e.Source, e.Problem)
	}
	return fmt.Sprintf("access: %s: %s: %s", e.Source, e.Field, e.Problem)
}

// LoadRules reads and parses the rules file at path. Its errors name the
// file.
func LoadRules(path string) (*Rules, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("access: rules file: %w", err)
	}
	return ParseRules(data, path)
}

// ParseRules parses a rules file's content; source names it in errors and
// in the reasons of decisions. The parse is strict: an unknown or
// duplicated field, an unknown subject kind, a verb other than get, list,
// watch or "*", an empty list, or a null (a key without a value, ~ or
// null) is an error: only an omitted namespaces or resourceNames means
// every namespace or name. Every problem found is reported, each a
// [*FieldError], joined.
func ParseRules(data []byte, source string) (*Rules, error) {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, &FieldError{Source: source, Problem: "not valid YAML: " + err.Error()}
	}
	var doc rulesDoc
	strict, err := sigsjson.UnmarshalStrict(j, &doc)
	if err != nil {
		return nil, &FieldError{Source: source, Problem: strings.TrimPrefix(err.Error(), "json: ")}
	}
	v := validator{source: source}
	// A null is never taken for an omitted field: for namespaces and
	// resourceNames, omitted means every namespace or name, and a key
	// left without a value (or a template's null) must not widen a grant.
	var tree any
	if err := json.Unmarshal(j, &tree); err != nil {
		return nil, &FieldError{Source: source, Problem: "not valid YAML: " + err.Error()}
	}
	v.nulls(tree, "")
	for _, e := range strict {
		// The strict errors name the field's path: unknown field "grants[0].rules[0].verb".
		v.add("", "%s", strings.TrimPrefix(e.Error(), "json: "))
	}
	v.doc(&doc)
	if err := errors.Join(v.errs...); err != nil {
		return nil, err
	}
	return compile(&doc, source), nil
}

type validator struct {
	source string
	errs   []error
	null   map[string]bool // the fields reported as null, not to be reported again
}

func (v *validator) add(field, format string, args ...any) {
	if v.null[field] {
		return
	}
	v.errs = append(v.errs, &FieldError{Source: v.source, Field: field, Problem: fmt.Sprintf(format, args...)})
}

// nulls reports every null in the document, a field's or a list entry's,
// by its path (grants[0].rules[1].namespaces).
func (v *validator) nulls(node any, at string) {
	switch n := node.(type) {
	case nil:
		if at == "" {
			return // an empty file: reported as granting nothing
		}
		hint := "give it a value"
		switch {
		case strings.HasSuffix(at, ".namespaces"):
			hint = "omit the field for every namespace, or list the namespaces"
		case strings.HasSuffix(at, ".resourceNames"):
			hint = "omit the field for every name, or list the names"
		}
		v.add(at, "is null (a key without a value, ~ or null); %s", hint)
		if v.null == nil {
			v.null = map[string]bool{}
		}
		v.null[at] = true
	case map[string]any:
		keys := make([]string, 0, len(n))
		for k := range n {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if at == "" {
				v.nulls(n[k], k)
			} else {
				v.nulls(n[k], at+"."+k)
			}
		}
	case []any:
		for i, e := range n {
			v.nulls(e, fmt.Sprintf("%s[%d]", at, i))
		}
	}
}

func (v *validator) doc(d *rulesDoc) {
	if d.APIVersion != RulesAPIVersion {
		v.add("apiVersion", "is %q, want %q", d.APIVersion, RulesAPIVersion)
	}
	if d.Kind != RulesKind {
		v.add("kind", "is %q, want %q", d.Kind, RulesKind)
	}
	if len(d.Grants) == 0 {
		v.add("grants", "is empty; a rules file must grant something")
	}
	for i := range d.Grants {
		v.grant(fmt.Sprintf("grants[%d]", i), &d.Grants[i])
	}
}

func (v *validator) grant(at string, g *grantDoc) {
	if len(g.Subjects) == 0 {
		v.add(at+".subjects", "is empty")
	}
	for i, s := range g.Subjects {
		sat := fmt.Sprintf("%s.subjects[%d]", at, i)
		if s.Kind != SubjectUser && s.Kind != SubjectGroup {
			v.add(sat+".kind", "is %q, want %q or %q", s.Kind, SubjectUser, SubjectGroup)
		}
		if s.Name == "" {
			v.add(sat+".name", "is empty")
		}
	}
	v.names(at+".clusters", g.Clusters, true)
	if len(g.Rules) == 0 {
		v.add(at+".rules", "is empty")
	}
	for i := range g.Rules {
		v.rule(fmt.Sprintf("%s.rules[%d]", at, i), &g.Rules[i])
	}
}

func (v *validator) rule(at string, r *ruleDoc) {
	if len(r.APIGroups) == 0 {
		v.add(at+".apiGroups", `is empty; write [""] for the core group, ["*"] for every group`)
	}
	v.names(at+".resources", r.Resources, true)
	for i, res := range r.Resources {
		for _, part := range strings.Split(res, "/") {
			if part != "" && part != Wildcard && !resourceName(part) {
				v.add(fmt.Sprintf("%s.resources[%d]", at, i), "is %q; resources are lowercase, as the API server names them (pods, pods/log, */status)", res)
				break
			}
		}
	}
	if r.Namespaces != nil {
		v.names(at+".namespaces", r.Namespaces, true)
	}
	v.names(at+".resourceNames", r.ResourceNames, false)
	if len(r.Verbs) == 0 {
		v.add(at+".verbs", "is empty")
	}
	for i, verb := range r.Verbs {
		if _, ok := verbBits[verb]; !ok {
			v.add(fmt.Sprintf("%s.verbs[%d]", at, i), `is %q; the replica serves only get, list and watch (or "*" for the three)`, verb)
		}
	}
}

// names checks a list of names: no entry empty, and the list not empty
// when required.
func (v *validator) names(at string, list []string, required bool) {
	if required && len(list) == 0 {
		v.add(at, "is empty")
	}
	for i, n := range list {
		if n == "" {
			v.add(fmt.Sprintf("%s[%d]", at, i), "is empty")
		}
	}
}
