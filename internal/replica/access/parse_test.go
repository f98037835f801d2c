package access

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const header = "apiVersion: replica.kubebus.io/v1\nkind: AccessRules\n"

// grant is a valid grant whose rule is r.
func grant(r string) string {
	return header + `grants:
- subjects: [{kind: User, name: alice}]
  clusters: [prod]
  rules:
  - ` + r + "\n"
}

// blockRule is a valid grant whose one rule, in block style, has apiGroups,
// resources and verbs, and then field (a line such as "namespaces: ~"),
// which replaces the field of the same key if there is one.
func blockRule(field string) string {
	lines := []string{"apiGroups: ['']", "resources: [pods]", "verbs: [get]"}
	key, _, _ := strings.Cut(field, ":")
	for i, l := range lines {
		if strings.HasPrefix(l, key+":") {
			lines = append(lines[:i], lines[i+1:]...)
			break
		}
	}
	lines = append(lines, field)
	return header + `grants:
- subjects: [{kind: User, name: alice}]
  clusters: [prod]
  rules:
  - ` + strings.Join(lines, "\n    ") + "\n"
}

func TestParseRulesErrors(t *testing.T) {
	cases := []struct {
		name string
		data string
		want []string // each in the error
	}{
		{"not YAML", "grants: [", []string{"rules.yaml: not valid YAML"}},
		{"duplicate key", header + "kind: AccessRules\ngrants: []\n", []string{"rules.yaml: not valid YAML", "kind"}},
		{"wrong apiVersion", "apiVersion: v1\nkind: AccessRules\ngrants: []\n", []string{`rules.yaml: apiVersion: is "v1", want "replica.kubebus.io/v1"`}},
		{"wrong kind", "apiVersion: replica.kubebus.io/v1\nkind: ClusterRole\ngrants: []\n", []string{`rules.yaml: kind: is "ClusterRole", want "AccessRules"`}},
		{"no grants", header, []string{"rules.yaml: grants: is empty"}},
		{"unknown top field", header + "metadata: {name: x}\n" + strings.TrimPrefix(grant("{apiGroups: [''], resources: [pods], verbs: [get]}"), header), []string{`rules.yaml: unknown field "metadata"`}},
		{"unknown rule field", grant("{apiGroups: [''], resources: [pods], verbs: [get], verb: [list]}"), []string{`rules.yaml: unknown field "grants[0].rules[0].verb"`}},
		{"field in the wrong case", grant("{apiGroups: [''], Resources: [pods], resources: [pods], verbs: [get]}"), []string{`unknown field "grants[0].rules[0].Resources"`}},
		{"wrong type", grant("{apiGroups: [''], resources: pods, verbs: [get]}"), []string{"rules.yaml: ", "cannot unmarshal string"}},
		{"bad verb", grant("{apiGroups: [''], resources: [pods], verbs: [get, delete]}"), []string{`rules.yaml: grants[0].rules[0].verbs[1]: is "delete"; the replica serves only get, list and watch`}},
		{"verb case", grant("{apiGroups: [''], resources: [pods], verbs: [Get]}"), []string{`grants[0].rules[0].verbs[0]: is "Get"`}},
		{"no verbs", grant("{apiGroups: [''], resources: [pods], verbs: []}"), []string{"rules.yaml: grants[0].rules[0].verbs: is empty"}},
		{"verbs omitted", grant("{apiGroups: [''], resources: [pods]}"), []string{"rules.yaml: grants[0].rules[0].verbs: is empty"}},
		{"no apiGroups", grant("{resources: [pods], verbs: [get]}"), []string{`rules.yaml: grants[0].rules[0].apiGroups: is empty; write [""] for the core group`}},
		{"no resources", grant("{apiGroups: [''], resources: [], verbs: [get]}"), []string{"rules.yaml: grants[0].rules[0].resources: is empty"}},
		{"empty resource", grant("{apiGroups: [''], resources: [pods, ''], verbs: [get]}"), []string{"rules.yaml: grants[0].rules[0].resources[1]: is empty"}},
		{"upper-case resource", grant("{apiGroups: [''], resources: [pods, Secrets], verbs: [get]}"), []string{`rules.yaml: grants[0].rules[0].resources[1]: is "Secrets"; resources are lowercase`}},
		{"upper-case subresource", grant("{apiGroups: [''], resources: ['*/Status'], verbs: [get]}"), []string{`rules.yaml: grants[0].rules[0].resources[0]: is "*/Status"`}},
		{"empty namespaces", grant("{apiGroups: [''], resources: [pods], namespaces: [], verbs: [get]}"), []string{"rules.yaml: grants[0].rules[0].namespaces: is empty"}},
		{"empty namespace", grant("{apiGroups: [''], resources: [pods], namespaces: [''], verbs: [get]}"), []string{"rules.yaml: grants[0].rules[0].namespaces[0]: is empty"}},
		{"empty resource name", grant("{apiGroups: [''], resources: [pods], resourceNames: [''], verbs: [get]}"), []string{"rules.yaml: grants[0].rules[0].resourceNames[0]: is empty"}},
		// An explicit null is not an omitted field: a null namespaces or
		// resourceNames would otherwise grant every namespace or name.
		{"namespaces without a value", blockRule("namespaces:"), []string{"rules.yaml: grants[0].rules[0].namespaces: is null"}},
		{"namespaces ~", blockRule("namespaces: ~"), []string{"rules.yaml: grants[0].rules[0].namespaces: is null"}},
		{"namespaces null, as toYaml writes it", blockRule("namespaces: null"), []string{"rules.yaml: grants[0].rules[0].namespaces: is null"}},
		{"namespaces null in a flow mapping", grant("{apiGroups: [''], resources: [pods], namespaces: null, verbs: [get]}"), []string{"rules.yaml: grants[0].rules[0].namespaces: is null"}},
		{"resourceNames without a value", blockRule("resourceNames:"), []string{"rules.yaml: grants[0].rules[0].resourceNames: is null"}},
		{"resourceNames null", blockRule("resourceNames: null"), []string{"rules.yaml: grants[0].rules[0].resourceNames: is null"}},
		{"a null namespace", blockRule("namespaces: [team-a, ~]"), []string{"rules.yaml: grants[0].rules[0].namespaces[1]: is null"}},
		{"null verbs", blockRule("verbs: ~"), []string{"rules.yaml: grants[0].rules[0].verbs: is null"}},
		{"null clusters", header + "grants:\n- subjects: [{kind: User, name: a}]\n  clusters:\n  rules: [{apiGroups: [''], resources: [pods], verbs: [get]}]\n",
			[]string{"rules.yaml: grants[0].clusters: is null"}},
		{"unknown subject kind", header + "grants:\n- subjects: [{kind: ServiceAccount, name: x}]\n  clusters: [prod]\n  rules: [{apiGroups: [''], resources: [pods], verbs: [get]}]\n",
			[]string{`rules.yaml: grants[0].subjects[0].kind: is "ServiceAccount", want "User" or "Group"`}},
		{"subject without name", header + "grants:\n- subjects: [{kind: User}]\n  clusters: [prod]\n  rules: [{apiGroups: [''], resources: [pods], verbs: [get]}]\n",
			[]string{"rules.yaml: grants[0].subjects[0].name: is empty"}},
		{"no subjects", header + "grants:\n- clusters: [prod]\n  rules: [{apiGroups: [''], resources: [pods], verbs: [get]}]\n",
			[]string{"rules.yaml: grants[0].subjects: is empty"}},
		{"no clusters", header + "grants:\n- subjects: [{kind: User, name: a}]\n  rules: [{apiGroups: [''], resources: [pods], verbs: [get]}]\n",
			[]string{"rules.yaml: grants[0].clusters: is empty"}},
		{"no rules", header + "grants:\n- subjects: [{kind: User, name: a}]\n  clusters: [prod]\n",
			[]string{"rules.yaml: grants[0].rules: is empty"}},
		{"every problem, in the second grant and rule", header + `grants:
- subjects: [{kind: User, name: a}]
  clusters: [prod]
  rules: [{apiGroups: [''], resources: [pods], verbs: [get]}]
- subjects: [{kind: Robot, name: b}]
  clusters: [prod, '']
  rules:
  - {apiGroups: [''], resources: [pods], verbs: [get]}
  - {apiGroups: [''], resources: [pods], verbs: [patch], colour: blue}
`, []string{
			`grants[1].subjects[0].kind: is "Robot"`,
			"grants[1].clusters[1]: is empty",
			`grants[1].rules[1].verbs[0]: is "patch"`,
			`unknown field "grants[1].rules[1].colour"`,
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := ParseRules([]byte(c.data), "rules.yaml")
			if err == nil {
				t.Fatalf("no error; rules %+v", r)
			}
			if r != nil {
				t.Errorf("rules %+v returned with the error", r)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Source != "rules.yaml" {
				t.Errorf("error %q is not a *FieldError naming the file", err)
			}
		})
	}
}

// TestParseRulesNullOnce holds that a null field is reported once, as
// null, and not again as empty.
func TestParseRulesNullOnce(t *testing.T) {
	_, err := ParseRules([]byte(blockRule("verbs:")), "rules.yaml")
	if err == nil || strings.Count(err.Error(), "grants[0].rules[0].verbs") != 1 {
		t.Errorf("error %v, want one about grants[0].rules[0].verbs", err)
	}
}

func TestParseRulesGood(t *testing.T) {
	r := mustParse(t, testRules)
	if r.Len() != 7 || r.Source() != "rules.yaml" {
		t.Fatalf("Len %d, Source %q; want 7, rules.yaml", r.Len(), r.Source())
	}
	// resourceNames: [] is every name, as in RBAC.
	mustParse(t, grant("{apiGroups: [''], resources: [pods], resourceNames: [], verbs: ['*']}"))
}

func TestLoadRules(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.yaml")
	if _, err := LoadRules(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: error %v does not name %s", err, missing)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(grant("{apiGroups: [''], resources: [pods], verbs: [list, update]}")), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadRules(bad)
	if want := bad + ": grants[0].rules[0].verbs[1]"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("bad file: error %v does not say %q", err, want)
	}
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte(testRules), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := LoadRules(good)
	if err != nil || r.Source() != good {
		t.Fatalf("good file: %v, %v", r, err)
	}
}

// FuzzParseRules holds that no file makes ParseRules panic, and that what
// it accepts it can decide with.
func FuzzParseRules(f *testing.F) {
	f.Add([]byte(testRules))
	f.Add([]byte(grant("{apiGroups: [''], resources: [pods], verbs: [get]}")))
	f.Add([]byte("grants: ["))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseRules(data, "fuzz.yaml")
		if err != nil {
			return
		}
		r.Scope(res(usr("alice", "sre"), "list", "", "pods", "team-a", ""))
	})
}
