package filter

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLibraries evaluates one expression per enabled library on the Pod
// fixture; each is true there, and its negation false.
func TestLibraries(t *testing.T) {
	vars := varsOf("pods", podFixture(t))
	for _, tc := range []struct{ lib, expr string }{
		{"standard", `resource == "pods" && ns == "team-07" && name.startsWith("web-0002") && size(labels) == 6`},
		{"macro exists", `object.spec.containers.exists(c, c.name == "proxy")`},
		{"macro all", `object.spec.containers.all(c, has(c.image))`},
		{"macro exists_one", `object.spec.containers.exists_one(c, c.name == "app")`},
		{"macro map", `object.spec.containers.map(c, c.name) == ["app", "proxy"]`},
		{"macro filter", `object.status.containerStatuses.filter(s, s.restartCount > 0).size() == 0`},
		{"has", `has(object.status.phase) && !has(object.status.reason)`},
		{"timestamps in UTC", `timestamp(object.metadata.creationTimestamp).getHours() == 9`},
		{"durations", `timestamp(object.metadata.creationTimestamp) - timestamp("2026-11-19T09:30:00Z") == duration("24h")`},
		{"optional", `object.?status.?reason.orValue("none") == "none" && object[?"spec"].hasValue()`},
		{"ext.Strings", `object.spec.containers[0].image.split(":")[1] == "2.14.3" && "%s/%s".format([ns, name]) == "team-07/" + name && name.upperAscii().contains("WEB")`},
		{"ext.Lists", `lists.range(3) == [0, 1, 2] && [[1], [2, 3]].flatten() == [1, 2, 3] && ["b", "a"].sort() == ["a", "b"]`},
		{"ext.Sets", `sets.contains(object.spec.containers.map(c, c.name), ["app"]) && sets.intersects(labels.map(k, k), ["pod-template-hash"])`},
		{"ext.Encoders", `base64.encode(b"web") == "d2Vi" && base64.decode("d2Vi") == b"web"`},
		{"ext.Math", `math.greatest(object.spec.terminationGracePeriodSeconds, 10) == 30 && math.abs(-2) == 2`},
		{"ext.Regex", `regex.extract(object.spec.containers[0].image, ":(.+)$") == optional.of("2.14.3") && regex.replace(name, "-[0-9]+$", "") == "web-0002-7d9f8b6c5d"`},
		{"matches", `name.matches("^web-[0-9]+-") && matches(labels["app.kubernetes.io/version"], "^2\\.")`},
		{"cross-type numbers", `object.spec.priority > 99999.5 && object.spec.priority == 100000u && object.spec.priority == 100000.0`},
	} {
		t.Run(tc.lib, func(t *testing.T) {
			for _, c := range []struct {
				expr string
				want bool
			}{{tc.expr, true}, {"!(" + tc.expr + ")", false}} {
				got, err := mustCompile(t, c.expr).Match(vars)
				if err != nil || got != c.want {
					t.Errorf("%s = %v, %v; want %v", c.expr, got, err, c.want)
				}
			}
		})
	}
}

// TestRuntimeErrors: a runtime error is returned with false, and its
// message says what failed.
func TestRuntimeErrors(t *testing.T) {
	vars := varsOf("pods", podFixture(t))
	for _, tc := range []struct{ name, expr, want string }{
		{"no such key", `object.status.reason == "Evicted"`, "filter: evaluation failed: no such key: reason"},
		{"no such key under a missing member", `object.spec.template.spec.hostNetwork == true`, "filter: evaluation failed: no such key: template"},
		{"wrong type", `object.metadata.name > 2`, "filter: evaluation failed: no such overload"},
		{"select on a list", `object.spec.containers.image == "x"`, "filter: evaluation failed"},
		{"index out of range", `object.spec.containers[5].name == "x"`, "filter: evaluation failed: index out of bounds: 5"},
		{"division by zero", `object.spec.priority / (size(labels) - 6) > 0`, "filter: evaluation failed: division by zero"},
		{"label absent", `labels["team"] == "a"`, "filter: evaluation failed: no such key: team"},
		{"bad pattern at runtime", `name.matches(labels["app.kubernetes.io/name"] + "(")`, "filter: evaluation failed: error parsing regexp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := mustCompile(t, tc.expr).Match(vars)
			if got || err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("%s = %v, %v; want false and an error starting %q", tc.expr, got, err, tc.want)
			}
			if errors.Is(err, ErrCostLimitExceeded) {
				t.Errorf("%v is a cost limit error", err)
			}
		})
	}
}

// TestErrorAbsorbed: CEL's || and && decide without the erring side when the
// other side decides: no error, and the decided result.
func TestErrorAbsorbed(t *testing.T) {
	vars := varsOf("pods", podFixture(t))
	for expr, want := range map[string]bool{
		`object.status.reason == "x" || resource == "pods"`: true,
		`object.status.reason == "x" && resource != "pods"`: false,
	} {
		got, err := mustCompile(t, expr).Match(vars)
		if err != nil || got != want {
			t.Errorf("%s = %v, %v; want %v", expr, got, err, want)
		}
	}
}

// TestHasIdiom: has() guards a member that some objects lack, so that they
// match or not instead of erring. has() tests the last member only: the
// members before it must be there, or be tested first.
func TestHasIdiom(t *testing.T) {
	full := mustCompile(t, `has(object.status) && has(object.status.phase) && object.status.phase == "Failed"`)
	opt := mustCompile(t, `object.?status.?phase.orValue("") == "Failed"`)
	last := mustCompile(t, `has(object.status.phase) && object.status.phase == "Failed"`)
	bare := mustCompile(t, `object.status.phase == "Failed"`)
	for _, tc := range []struct {
		obj                  string
		want                 bool
		lastError, bareError bool
	}{
		{`{"status":{"phase":"Failed"}}`, true, false, false},
		{`{"status":{"phase":"Running"}}`, false, false, false},
		{`{"status":{}}`, false, false, true},
		{`{}`, false, true, true},
	} {
		vars := &Vars{Object: decode(t, []byte(tc.obj))}
		for _, g := range []struct {
			f       *Filter
			wantErr bool
		}{{full, false}, {opt, false}, {last, tc.lastError}, {bare, tc.bareError}} {
			got, err := g.f.Match(vars)
			if got != tc.want || (err != nil) != g.wantErr {
				t.Errorf("%s on %s = %v, %v; want %v, error %v", g.f, tc.obj, got, err, tc.want, g.wantErr)
			}
		}
	}
}

// TestCostLimit: nested comprehensions over a list in the object go over the
// cost limit at run time (30 × 30 concatenations of two 10,000-character
// strings cost 2,000 each; string() gives them the type whose cost cel
// knows); the evaluation stops with an error that says so.
// The same expression over a shorter list is within it.
func TestCostLimit(t *testing.T) {
	f := mustCompile(t, `object.items.all(a, object.items.all(b, string(a) + string(b) != ""))`)
	items := make([]any, 30)
	for i := range items {
		items[i] = strings.Repeat(string(rune('a'+i%26)), 10_000)
	}
	start := time.Now()
	got, err := f.Match(&Vars{Object: map[string]any{"items": items}})
	took := time.Since(start)
	if got || !errors.Is(err, ErrCostLimitExceeded) {
		t.Fatalf("Match = %v, %v; want false and ErrCostLimitExceeded", got, err)
	}
	if want := "filter: cost limit exceeded (1000000 per evaluation): operation cancelled: actual cost limit exceeded"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	t.Logf("stopped after %v: %v", took, err)

	got, err = f.Match(&Vars{Object: map[string]any{"items": items[:10]}})
	if !got || err != nil {
		t.Fatalf("Match on 10 items = %v, %v; want true", got, err)
	}
}

// TestCostLimitFromLibrary: a library function's cost counts too.
func TestCostLimitFromLibrary(t *testing.T) {
	f := mustCompile(t, `lists.range(1000000).sort().size() > 0`)
	got, err := f.Match(&Vars{})
	if got || !errors.Is(err, ErrCostLimitExceeded) {
		t.Fatalf("Match = %v, %v; want false and ErrCostLimitExceeded", got, err)
	}
}

// TestNumbers: integers in the object are int64, as Kubernetes'
// unstructured decoding gives them, and compare with CEL's int literals;
// comparisons with uint and double literals are numeric. An object decoded
// with float64 numbers (encoding/json's way) compares the same.
func TestNumbers(t *testing.T) {
	exprs := map[string]bool{
		`object.spec.replicas > 2`:            true,
		`object.spec.replicas == 3`:           true,
		`object.spec.replicas > 3`:            false,
		`object.spec.replicas == 3u`:          true,
		`object.spec.replicas < 4u`:           true,
		`object.spec.replicas == 3.0`:         true,
		`object.spec.replicas > 2.5`:          true,
		`object.spec.replicas in [1, 3]`:      true,
		`object.spec.ratio > 0`:               true,
		`object.spec.ratio < 1u`:              true,
		`object.spec.ratio == 0.5`:            true,
		`object.spec.big == 9007199254740993`: true, // exact only as int64
		`object.spec.negative < 0u`:           true,
		`object.spec.negative == -1`:          true,
	}
	obj := decode(t, []byte(`{"spec":{"replicas":3,"ratio":0.5,"big":9007199254740993,"negative":-1}}`))
	if _, ok := obj["spec"].(map[string]any)["replicas"].(int64); !ok {
		t.Fatalf("replicas decoded as %T, want int64", obj["spec"].(map[string]any)["replicas"])
	}
	for expr, want := range exprs {
		got, err := mustCompile(t, expr).Match(&Vars{Object: obj})
		if err != nil || got != want {
			t.Errorf("%s = %v, %v; want %v", expr, got, err, want)
		}
	}
	// float64 numbers, as encoding/json decodes them into any.
	floats := map[string]any{"spec": map[string]any{"replicas": float64(3)}}
	for _, expr := range []string{`object.spec.replicas > 2`, `object.spec.replicas == 3`, `object.spec.replicas == 3u`} {
		got, err := mustCompile(t, expr).Match(&Vars{Object: floats})
		if err != nil || !got {
			t.Errorf("%s on float64 3 = %v, %v; want true", expr, got, err)
		}
	}
}

// TestNilVars: nil Object, Labels and Annotations are empty.
func TestNilVars(t *testing.T) {
	for expr, want := range map[string]bool{
		`size(object) == 0 && size(labels) == 0 && size(annotations) == 0`: true,
		`has(object.status)`:                       false,
		`"app" in labels`:                          false,
		`resource == "" && ns == "" && name == ""`: true,
	} {
		got, err := mustCompile(t, expr).Match(&Vars{})
		if err != nil || got != want {
			t.Errorf("%s = %v, %v; want %v", expr, got, err, want)
		}
	}
}

// TestMatchConcurrent: one Filter evaluated from many goroutines at once
// (run with -race) gives each its own result.
func TestMatchConcurrent(t *testing.T) {
	f := mustCompile(t, `resource != "pods" || object.status.phase != "Running"`)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				phase := "Running"
				if (g+i)%2 == 0 {
					phase = "Failed"
				}
				v := &Vars{Resource: "pods", Object: map[string]any{"status": map[string]any{"phase": phase}}}
				got, err := f.Match(v)
				if err != nil || got != (phase != "Running") {
					errs <- errors.Join(err, errors.New("wrong result for "+phase))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestMatchDoesNotModify: Match leaves the variables as they were.
func TestMatchDoesNotModify(t *testing.T) {
	obj := podFixture(t)
	vars := varsOf("pods", obj)
	before := decodeAgain(t, obj)
	f := mustCompile(t, `object.spec.containers.map(c, c.name).sort() == ["app", "proxy"]`)
	if got, err := f.Match(vars); err != nil || !got {
		t.Fatalf("Match = %v, %v", got, err)
	}
	if after := decodeAgain(t, obj); after != before {
		t.Error("Match modified the object")
	}
}

// TestMatchAllocations: constant patterns are compiled once, not per
// evaluation (compiling one allocates dozens of times), and variables the
// expression does not use are not converted: evaluating on the Pod costs a
// few allocations, whatever the object holds.
func TestMatchAllocations(t *testing.T) {
	vars := varsOf("pods", podFixture(t))
	vars.Labels["pattern"] = "^web-[0-9]{4}-[a-z0-9]+-[0-9]+$"
	for _, tc := range []struct {
		expr        string
		least, most float64
	}{
		{`resource == "pods"`, 0, 3},
		{`name.matches("^web-[0-9]{4}-[a-z0-9]+-[0-9]+$")`, 0, 20},
		{`name.matches(labels.pattern)`, 40, 1000}, // compiled per evaluation
	} {
		f := mustCompile(t, tc.expr)
		allocs := testing.AllocsPerRun(100, func() {
			if ok, err := f.Match(vars); !ok || err != nil {
				t.Fatalf("%s = %v, %v", tc.expr, ok, err)
			}
		})
		t.Logf("%s: %.0f allocations", tc.expr, allocs)
		if allocs < tc.least || allocs > tc.most {
			t.Errorf("%s: %.0f allocations per Match, want %.0f to %.0f", tc.expr, allocs, tc.least, tc.most)
		}
	}
}
