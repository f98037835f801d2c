package filter

import (
	"errors"
	"strings"
	"testing"
)

// TestCompileErrors covers every kind of compile error: each is a
// *CompileError whose text names BRIDGE_FILTER with line and column, draws
// a caret under the position, and says what is wrong.
func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, expr string
		pos        string // BRIDGE_FILTER:line:column
		want       string
	}{
		{"syntax", `object.status.phase == `, "1:24", "Syntax error"},
		{"unbalanced", `(resource == "pods"`, "1:20", "Syntax error"},
		{"unknown variable", `resource != "pods" || objct.status.phase != "Running"`, "1:23", "undeclared reference to 'objct'"},
		{"unknown function", `object.metadata.name.shout() == ""`, "1:27", "undeclared reference to 'shout'"},
		{"wrong argument type", `labels["app"] > 2`, "1:15", "found no matching overload for '_>_' applied to '(string, int)'"},
		{"not bool: int", `size(labels) + 1`, "1:14", "the expression has the type int; it must be bool"},
		{"not bool: string", `name`, "1:1", "the expression has the type string; it must be bool"},
		{"not bool: dyn", `object.spec.paused`, "1:12", "the expression has the type dyn; it must be bool (compare it with a value: ... == true)"},
		{"second line", "resource == \"pods\" &&\n  object.status.phase ==", "2:25", "Syntax error"},
		{"bad matches pattern", `name.matches("web-(")`, "1:14", "invalid regular expression \"web-(\""},
		{"bad global matches pattern", `matches(name, "[a-")`, "1:15", "invalid regular expression \"[a-\""},
		{"bad regex library pattern", `regex.extract(name, "(a").hasValue()`, "1:21", "invalid regular expression \"(a\""},
		{"bad duration literal", `timestamp(object.metadata.creationTimestamp) > timestamp("2026-01-01T00:00:00Z") - duration("1x")`, "1:93", "invalid duration argument"},
		{"bad timestamp literal", `timestamp("yesterday") < timestamp(object.metadata.creationTimestamp)`, "1:11", "invalid timestamp argument"},
		{"reserved word", `namespace == "default"`, "1:1", "reserved identifier: namespace\n | namespace == \"default\"\n | ^\n(namespace is a reserved word in CEL: the variable is ns, or write object.metadata.namespace)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Compile(tc.expr)
			if err == nil {
				t.Fatalf("Compile(%q) = %v, want an error", tc.expr, f)
			}
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("error %T %v, want a *CompileError", err, err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "filter: ERROR: BRIDGE_FILTER:"+tc.pos+": ") {
				t.Errorf("error does not start with the position %s:\n%s", tc.pos, msg)
			}
			if !strings.Contains(msg, tc.want) {
				t.Errorf("error does not say %q:\n%s", tc.want, msg)
			}
			if strings.Contains(msg, "<input>") {
				t.Errorf("error names the source <input>:\n%s", msg)
			}
			if !strings.Contains(msg, "\n | ") || !strings.Contains(msg, "^") {
				t.Errorf("error has no source and caret line:\n%s", msg)
			}
		})
	}
}

// TestCompileErrorCaret shows the whole message for one error: the line of
// the expression and the caret under the unknown name.
func TestCompileErrorCaret(t *testing.T) {
	_, err := Compile(`resource != "pods" || objct.status.phase != "Running"`)
	want := "filter: ERROR: BRIDGE_FILTER:1:23: undeclared reference to 'objct' (in container '')\n" +
		" | resource != \"pods\" || objct.status.phase != \"Running\"\n" +
		" | ......................^"
	if err == nil || err.Error() != want {
		t.Fatalf("error:\n%v\nwant:\n%s", err, want)
	}
}

// TestCompileEmpty: the config never compiles an empty filter (it means no
// filter), but an empty or blank expression is an error that says so.
func TestCompileEmpty(t *testing.T) {
	for _, expr := range []string{"", " \n\t"} {
		_, err := Compile(expr)
		var ce *CompileError
		if !errors.As(err, &ce) || err.Error() != "filter: ERROR: BRIDGE_FILTER: the expression is empty" {
			t.Errorf("Compile(%q): %v", expr, err)
		}
	}
}

// TestCompileTooLong: an expression over the size limit is a compile error,
// not a parser's ordeal.
func TestCompileTooLong(t *testing.T) {
	expr := strings.Repeat("name == 'a' || ", maxExprSize/15+1) + "true"
	_, err := Compile(expr)
	var ce *CompileError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "BRIDGE_FILTER") || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("error %v, want a *CompileError naming BRIDGE_FILTER and the limit", err)
	}
}

// TestCompileAccepts: expressions of the issue and of the docs' recipes
// compile.
func TestCompileAccepts(t *testing.T) {
	for _, expr := range []string{
		`resource != "pods" || object.status.phase != "Running"`,
		`object.status.phase != "Succeeded"`,
		`resource != "services" || object.spec.type == "LoadBalancer"`,
		`has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(o, o.kind == "ReplicaSet")`,
		`"kubebus.io/owner" in labels`,
		`has(annotations.description)`,
		`object.spec.paused == true`,
		`ns.startsWith("team-") && name.matches("^web-[0-9]+")`,
	} {
		if _, err := Compile(expr); err != nil {
			t.Errorf("Compile(%q): %v", expr, err)
		}
	}
}
