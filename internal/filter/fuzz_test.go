package filter

import (
	"errors"
	"strings"
	"testing"
)

// FuzzCompile feeds Compile arbitrary text. It never panics; it either
// fails with a *CompileError whose text names BRIDGE_FILTER, or gives a
// Filter whose Match does not panic and, when its Reads are analysed, gives
// on an object restricted to them the outcome it gives on the whole object.
func FuzzCompile(f *testing.F) {
	for _, tc := range readsCases {
		f.Add(tc.expr)
	}
	for _, s := range []string{
		``, `(`, `"`, `'''`, `b"\xff"`, `object.`, `object[`, `has(`, `has(object)`, `has(object[0])`,
		`namespace == ""`, `1 + 2`, `object.spec.paused`, `name.matches("(")`, `regex.extract(name, "[")`,
		`duration("1x") > duration("1s")`, `timestamp("x") < timestamp("y")`, `dyn(1) == 1`,
		`[1, 2].exists(x, [3].all(y, x < y))`, `object.?a.?b.orValue(1) == 1`, `object[?"a"][?"b"].hasValue()`,
		`optional.of(object).value().a == 1`, `{"a": 1}.a == 1`, `"x".format([object]) == ""`,
		`lists.range(10).map(i, i * 2).sum() > 0`, `sets.contains([1], [1])`, `base64.decode("!") == b""`,
		`math.sqrt(-1) > 0.0`, `0x7fffffffffffffff + 1 > 0`, `-9223372036854775808 / -1 < 0`, `1 / 0 == 1`,
		`"\u0000\uffff" != ""`, strings.Repeat("(", 300) + "true" + strings.Repeat(")", 300),
		strings.Repeat("!", 1000) + "true", strings.Repeat("[", 200),
		`object.a.b.c.d.e.f.g.h.i == object["j"]["k"]`, `cel.bind(x, 1, x == 1)`, `x.y.z == 1`,
		`type(object) == map && type(object.a) == int`, `object.spec.containers.sortBy(c, c.name).size() == 0`,
	} {
		f.Add(s)
	}
	objs := []map[string]any{podFixture(f), {"a": map[string]any{"b": int64(1), "c": []any{"x", nil}}, "b": "s"}}
	f.Fuzz(func(t *testing.T, expr string) {
		flt, err := Compile(expr)
		if err != nil {
			var ce *CompileError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), "BRIDGE_FILTER") {
				t.Fatalf("Compile(%q): %T %v, want a *CompileError naming BRIDGE_FILTER", expr, err, err)
			}
			return
		}
		for _, obj := range objs {
			checkRestricted(t, flt, obj)
		}
	})
}
