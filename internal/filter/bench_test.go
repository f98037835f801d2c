package filter

import "testing"

// benchExprs are typical filters: the example on the object, one on
// labels, one with a regular expression.
var benchExprs = []struct{ name, expr string }{
	{"phase", `resource != "pods" || object.status.phase != "Running"`},
	{"labels", `labels["app.kubernetes.io/part-of"] == "storefront" && !("canary" in labels)`},
	{"regex", `name.matches("^web-[0-9]{4}-") && object.spec.containers.exists(c, c.image.matches(":2\\.[0-9]+\\.[0-9]+$"))`},
}

// BenchmarkCompile is the start-up cost of a filter.
func BenchmarkCompile(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(benchExprs[0].expr); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMatch evaluates typical filters on the decoded Pod fixture (about
// 13 KiB as sent), with the variables built as the bridge builds them once
// per object; the decoding is not measured.
func BenchmarkMatch(b *testing.B) {
	vars := varsOf("pods", podFixture(b))
	for _, bc := range benchExprs {
		b.Run(bc.name, func(b *testing.B) {
			f := mustCompile(b, bc.expr)
			if ok, err := f.Match(vars); err != nil || ok == (bc.name == "phase") {
				b.Fatalf("Match = %v, %v", ok, err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.Match(vars); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
