package filter

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// p builds Reads.Paths from dotted paths.
func p(paths ...string) [][]string {
	out := make([][]string, len(paths))
	for i, s := range paths {
		out[i] = strings.Split(s, ".")
	}
	return out
}

// readsCases are expressions and what they read. analysedExprs (below)
// takes the ones that are not Whole for the property test.
var readsCases = []struct {
	expr string
	want Reads
}{
	{`resource == "pods"`, Reads{}},
	{`resource != "pods" || object.status.phase != "Running"`, Reads{Paths: p("status.phase")}},
	{`object.spec.containers.exists(c, c.image.startsWith("registry.example.com/"))`, Reads{Paths: p("spec.containers")}},
	{`object.spec.containers.all(c, has(c.resources.limits))`, Reads{Paths: p("spec.containers")}},
	{`object.spec.containers.exists_one(c, c.name == "app")`, Reads{Paths: p("spec.containers")}},
	{`object.spec.containers.map(c, c.name).exists(n, n == object.metadata.name)`, Reads{Paths: p("metadata.name", "spec.containers")}},
	{`object.spec.containers.filter(c, c.name != "proxy").size() == 1`, Reads{Paths: p("spec.containers")}},
	{`object.metadata.labels.exists(k, k.startsWith("app.kubernetes.io/"))`, Reads{Paths: p("metadata.labels")}},
	{`object.spec.containers.sortBy(c, c.name)[0].name == "app"`, Reads{Paths: p("spec.containers")}},
	{`has(object.spec.nodeName)`, Reads{Paths: p("spec.nodeName")}},
	{`has(object.status)`, Reads{Paths: p("status")}},
	{`has(object.status) && has(object.status.phase) && object.status.phase == "Failed"`, Reads{Paths: p("status.phase")}},
	{`has(object.status.phase) || object.status.podIP == ""`, Reads{Paths: p("status.phase", "status.podIP")}},
	{`has(object.status.conditions) && object.status.conditions.exists(c, c.type == "Ready")`, Reads{Paths: p("status.conditions")}},
	{`object["metadata"]["labels"]["app.kubernetes.io/name"] == "web-0002"`, Reads{Paths: [][]string{{"metadata", "labels", "app.kubernetes.io/name"}}}},
	{`object.metadata.annotations["prometheus.io/port"] == "9090"`, Reads{Paths: [][]string{{"metadata", "annotations", "prometheus.io/port"}}}},
	{`object.?status.?phase.orValue("") == "Running"`, Reads{Paths: p("status.phase")}},
	{`object[?"status"].hasValue()`, Reads{Paths: p("status")}},
	{`object.?spec.optMap(s, s.priority).orValue(0) > 10`, Reads{Paths: p("spec")}},
	{`object.spec.containers[0].image.endsWith(":2.14.3")`, Reads{Paths: p("spec.containers")}},
	{`object.spec[name] == 1`, Reads{Paths: p("spec")}},
	{`object.spec[object.metadata.name] == 1`, Reads{Paths: p("metadata.name", "spec")}},
	{`object.status.phase == "Running" && object.status == {}`, Reads{Paths: p("status")}},
	{`{"s": object.spec}.s.priority > 1`, Reads{Paths: p("spec")}},
	{`[object.spec.priority, 1].exists(x, x > 5)`, Reads{Paths: p("spec.priority")}},
	{`math.greatest(object.spec.priority, 1) > 0`, Reads{Paths: p("spec.priority")}},
	{`[1, 2].exists(object, object > 1)`, Reads{}},
	{`[{"a": 1}].exists(object, object.a == 1) && object.kind == "Pod"`, Reads{Paths: p("kind")}},
	{`object.spec.containers.exists(c, [c].exists(object, object.name == "app"))`, Reads{Paths: p("spec.containers")}},
	{`labels["app.kubernetes.io/name"] == "web-0002"`, Reads{Labels: true}},
	{`"prometheus.io/scrape" in annotations && has(labels.app)`, Reads{Labels: true, Annotations: true}},
	{`object.metadata.labels == labels`, Reads{Paths: p("metadata.labels"), Labels: true}},
	{`ns == "team-07" && name.startsWith("web")`, Reads{}},

	// Uses of object the analysis does not follow: Whole.
	{`size(object) > 1`, Reads{Whole: true}},
	{`object == {}`, Reads{Whole: true}},
	{`"status" in object`, Reads{Whole: true}},
	{`object.exists(k, k == "status")`, Reads{Whole: true}},
	{`[object].exists(o, o.status.phase == "Running")`, Reads{Whole: true}},
	{`"%s".format([object]) != ""`, Reads{Whole: true}},
	{`object.status.phase == "Running" || size(object) == 0`, Reads{Whole: true}},
	{`object.?status.orValue(object).phase == "Running"`, Reads{Whole: true}},
	{`[object.spec.containers, object][1].kind == "Pod"`, Reads{Whole: true, Labels: false}},
	{`size(object) > 0 && labels.app == "x"`, Reads{Whole: true, Labels: true}},
}

// TestReads checks the analysis of what an expression reads.
func TestReads(t *testing.T) {
	for _, tc := range readsCases {
		f := mustCompile(t, tc.expr)
		if got := f.Reads(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s\n  reads %+v\n  want  %+v", tc.expr, got, tc.want)
		}
	}
}

// TestReadsIsACopy: the caller may change the result.
func TestReadsIsACopy(t *testing.T) {
	f := mustCompile(t, `object.status.phase == "Running"`)
	f.Reads().Paths[0][0] = "spec"
	if got := f.Reads().Paths[0][0]; got != "status" {
		t.Fatalf("Reads changed to %q", got)
	}
}

// restrict is the object as a caller that decodes only Reads().Paths gives
// it (see Reads): along each path, objects hold only the members on the
// paths; a value that is not an object is kept whole; at the end of a path
// the value is whole.
func restrict(obj map[string]any, paths [][]string) map[string]any {
	out := map[string]any{}
	for _, p := range paths {
		put(out, obj, p)
	}
	return out
}

func put(dst, src map[string]any, p []string) {
	v, ok := src[p[0]]
	if !ok {
		return
	}
	if len(p) == 1 {
		dst[p[0]] = v
		return
	}
	m, isMap := v.(map[string]any)
	if !isMap {
		dst[p[0]] = v
		return
	}
	sub, ok := dst[p[0]].(map[string]any)
	if !ok {
		sub = map[string]any{}
		dst[p[0]] = sub
	}
	put(sub, m, p[1:])
}

// outcome is a Match result as the bridge acts on it: an error is no
// match, whatever its text.
type outcome struct{ match, err bool }

func outcomeOf(f *Filter, v *Vars) outcome {
	ok, err := f.Match(v)
	return outcome{ok, err != nil}
}

// checkRestricted asserts that f, analysed, gives on obj restricted to its
// Reads the outcome it gives on the whole obj.
func checkRestricted(t *testing.T, f *Filter, obj map[string]any) {
	t.Helper()
	r := f.Reads()
	if r.Whole {
		return
	}
	whole := varsOf("pods", obj)
	part := *whole
	part.Object = restrict(obj, r.Paths)
	if w, p := outcomeOf(f, whole), outcomeOf(f, &part); w != p {
		t.Errorf("%s\n  on the whole object: %+v\n  restricted to %v, %s: %+v", f, w, r.Paths, decodeAgain(t, part.Object), p)
	}
}

// variants are objects the property runs on: the Pod fixture and edits of
// it that take members away or give them other types.
func variants(tb testing.TB) []map[string]any {
	edits := []func(m map[string]any){
		func(m map[string]any) {},
		func(m map[string]any) { delete(m, "status") },
		func(m map[string]any) { m["status"] = "Running" },
		func(m map[string]any) { m["status"] = []any{"Running"} },
		func(m map[string]any) { m["status"] = nil },
		func(m map[string]any) { m["status"] = map[string]any{} },
		func(m map[string]any) { m["status"].(map[string]any)["phase"] = "Failed" },
		func(m map[string]any) { m["status"].(map[string]any)["phase"] = int64(3) },
		func(m map[string]any) { m["status"].(map[string]any)["conditions"] = nil },
		func(m map[string]any) { m["spec"].(map[string]any)["containers"] = []any{} },
		func(m map[string]any) { m["spec"].(map[string]any)["containers"] = map[string]any{"name": "app"} },
		func(m map[string]any) { delete(m["spec"].(map[string]any), "nodeName") },
		func(m map[string]any) {
			m["spec"] = map[string]any{"app": int64(1), "web-0002-7d9f8b6c5d-00007": int64(1)}
		},
		func(m map[string]any) { m["metadata"].(map[string]any)["labels"] = map[string]any{} },
		func(m map[string]any) { m["metadata"].(map[string]any)["labels"] = "app" },
		func(m map[string]any) { delete(m["metadata"].(map[string]any), "annotations") },
		func(m map[string]any) { m["kind"] = int64(1) },
	}
	out := make([]map[string]any, len(edits))
	for i, edit := range edits {
		out[i] = podFixture(tb)
		edit(out[i])
	}
	return out
}

// TestRestrictedEqualsWhole is the property Reads promises: for every
// analysed expression of the table, the outcome on the object restricted to
// Reads().Paths is the outcome on the whole object, on objects that lack
// members or have them in other types.
func TestRestrictedEqualsWhole(t *testing.T) {
	objs := variants(t)
	extra := []string{
		`object.status.phase != "Succeeded"`,
		`has(object.status.phase) && object.status.phase == "Failed"`,
		`!has(object.status) || object.status.phase == "Running"`,
		`object.?status.?conditions.orValue([]).exists(c, c.type == "Ready" && c.status == "True")`,
		`object.spec.containers.all(c, c.image.contains(":")) && object.metadata.namespace.startsWith("team")`,
		`object.?metadata.?labels[?"app.kubernetes.io/name"].orValue("") == "web-0002"`,
		`object.kind == "Pod" && object.spec.priority > 5u`,
	}
	exprs := extra
	for _, tc := range readsCases {
		exprs = append(exprs, tc.expr)
	}
	analysed := 0
	for _, expr := range exprs {
		f := mustCompile(t, expr)
		if f.Reads().Whole {
			continue
		}
		analysed++
		for _, obj := range objs {
			checkRestricted(t, f, obj)
		}
	}
	t.Logf("%d analysed expressions on %d objects", analysed, len(objs))
}

// TestRestrictedEqualsWholeRandom runs the property on random expressions
// over random objects whose members are a, b and c, nested, of every JSON
// type.
func TestRestrictedEqualsWholeRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 14))
	var objs []map[string]any
	for range 40 {
		objs = append(objs, randomObject(rng, 3))
	}
	compiled := 0
	for range 400 {
		expr := randomExpr(rng, 3)
		f, err := Compile(expr)
		if err != nil {
			continue // a random comparison that does not type-check
		}
		compiled++
		for _, obj := range objs {
			checkRestricted(t, f, obj)
		}
	}
	if compiled < 200 {
		t.Fatalf("only %d of 400 random expressions compiled", compiled)
	}
}

var keys = []string{"a", "b", "c"}

func randomObject(rng *rand.Rand, depth int) map[string]any {
	m := map[string]any{}
	for _, k := range keys {
		if rng.IntN(4) == 0 {
			continue
		}
		m[k] = randomValue(rng, depth-1)
	}
	return m
}

func randomValue(rng *rand.Rand, depth int) any {
	switch n := rng.IntN(8); {
	case n < 3 && depth > 0:
		return randomObject(rng, depth)
	case n == 3:
		return int64(rng.IntN(3))
	case n == 4:
		return keys[rng.IntN(3)]
	case n == 5:
		return rng.IntN(2) == 0
	case n == 6 && depth > 0:
		return []any{randomValue(rng, depth-1), int64(1)}
	default:
		return nil
	}
}

// randomPath is a selection chain on object in one of the forms the
// analysis follows.
func randomPath(rng *rand.Rand) string {
	var b strings.Builder
	b.WriteString("object")
	optional := rng.IntN(3) == 0
	for range 1 + rng.IntN(3) {
		k := keys[rng.IntN(3)]
		switch {
		case optional && rng.IntN(2) == 0:
			fmt.Fprintf(&b, "[?%q]", k)
		case optional:
			b.WriteString(".?" + k)
		case rng.IntN(3) == 0:
			fmt.Fprintf(&b, "[%q]", k)
		default:
			b.WriteString("." + k)
		}
	}
	if optional {
		return b.String() + ".orValue(1)"
	}
	return b.String()
}

func randomAtom(rng *rand.Rand) string {
	path := randomPath(rng)
	plain := !strings.Contains(path, "?")
	switch n := rng.IntN(9); {
	case n == 0 && plain && strings.Count(path, ".")+strings.Count(path, "[") > 0:
		return "has(" + hasPath(path) + ")"
	case n == 1:
		return path + " == 1"
	case n == 2:
		return path + ` == "a"`
	case n == 3:
		return path + " == true"
	case n == 4:
		return path + " == null"
	case n == 5:
		return path + " > 0"
	case n == 6:
		return path + ".exists(x, x == 1 || x == \"b\")"
	case n == 7:
		return "size(" + path + ") > 1"
	default:
		return "type(" + path + ") == map"
	}
}

// hasPath rewrites a plain path with field selection only, as has() needs.
func hasPath(path string) string {
	path = strings.ReplaceAll(path, `["`, ".")
	return strings.ReplaceAll(path, `"]`, "")
}

func randomExpr(rng *rand.Rand, depth int) string {
	if depth == 0 || rng.IntN(3) == 0 {
		return randomAtom(rng)
	}
	switch rng.IntN(3) {
	case 0:
		return "(" + randomExpr(rng, depth-1) + " && " + randomExpr(rng, depth-1) + ")"
	case 1:
		return "(" + randomExpr(rng, depth-1) + " || " + randomExpr(rng, depth-1) + ")"
	default:
		return "!(" + randomExpr(rng, depth-1) + ")"
	}
}
