package view

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/internal/filter"
	"github.com/kubebus/bridge/internal/rawaccess"
	"github.com/kubebus/bridge/internal/rawobject"
	"github.com/kubebus/bridge/source"
)

var pods = source.Resource{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, Kind: "Pod", Namespaced: true}

// pod is the Pod fixture of package rawobject with edit applied to its
// text, as the raw path hands it on.
func pod(t testing.TB, edit ...string) *source.RawObject {
	t.Helper()
	data, err := os.ReadFile("../rawobject/testdata/pod.json")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(edit); i += 2 {
		if !bytes.Contains(data, []byte(edit[i])) {
			t.Fatalf("the fixture has no %q", edit[i])
		}
		data = bytes.ReplaceAll(data, []byte(edit[i]), []byte(edit[i+1]))
	}
	m, err := rawobject.Scan(data)
	if err != nil {
		t.Fatal(err)
	}
	return rawaccess.New(data, m).(*source.RawObject)
}

func compile(t testing.TB, expr, fields, drop string) Config {
	t.Helper()
	var c Config
	if expr != "" {
		f, err := filter.Compile(expr)
		if err != nil {
			t.Fatal(err)
		}
		c.Filter = f
	}
	if fields != "" {
		p, err := rawobject.ParsePaths(fields)
		if err != nil {
			t.Fatal(err)
		}
		c.Fields = p
	}
	if drop != "" {
		p, err := rawobject.ParsePaths(drop)
		if err != nil {
			t.Fatal(err)
		}
		c.DropFields = p
	}
	return c
}

const running, succeeded = `"phase":"Running"`, `"phase":"Succeeded"`

func TestApplyFilter(t *testing.T) {
	d := New(compile(t, `object.status.phase != "Succeeded" && labels["app.kubernetes.io/part-of"] == "storefront" && ns == "team-07"`, "", ""), nil, nil)
	obj := pod(t)
	in := d.Apply(pods, obj)
	if !in.In || !strings.HasPrefix(in.State, d.ID()+".") || strings.HasSuffix(d.ID(), "p") {
		t.Errorf("running Pod: in %v, state %q (definition %q)", in.In, in.State, d.ID())
	}
	out := d.Apply(pods, pod(t, running, succeeded))
	if out.In || out.State != "" {
		t.Errorf("succeeded Pod: in %v, state %q; want out, no state", out.In, out.State)
	}
	// Without a projection the object is published as it came.
	if in.Object != obj {
		t.Error("a filter alone changed the object")
	}
	// A change the filter reads nothing of, but that is published, changes
	// the state; one of managedFields or resourceVersion does not.
	if s := d.Apply(pods, pod(t, `"restartPolicy":"Always"`, `"restartPolicy":"Never"`)).State; s == in.State {
		t.Error("a change of spec kept the state")
	}
	if s := d.Apply(pods, pod(t, `"resourceVersion":"2000007"`, `"resourceVersion":"2000099"`, `"manager":"kubelet"`, `"manager":"kubelet2"`)).State; s != in.State {
		t.Errorf("a change of resourceVersion and managedFields changed the state: %q, was %q", s, in.State)
	}
}

func TestApplyProjection(t *testing.T) {
	d := New(compile(t, "", "", `status,metadata.annotations["prometheus.io/port"]`), nil, nil)
	if !strings.HasSuffix(d.ID(), "p") {
		t.Errorf("definition %q of a projection does not end in p", d.ID())
	}
	r := d.Apply(pods, pod(t))
	if !r.In || bytes.Contains(r.Object.Data(), []byte(`"status"`)) || bytes.Contains(r.Object.Data(), []byte(`prometheus.io/port`)) ||
		!bytes.Contains(r.Object.Data(), []byte(`"prometheus.io/scrape"`)) || bytes.Contains(r.Object.Data(), []byte(`managedFields`)) {
		t.Errorf("projection: %s", r.Object.Data())
	}
	if r.Object.Meta().Name != "web-0002-7d9f8b6c5d-00007" || r.Object.Meta().ResourceVersion != "2000007" {
		t.Errorf("projection's identity: %+v", r.Object.Meta())
	}
	// A status-only update leaves the state as it was.
	s := d.Apply(pods, pod(t, running, succeeded, `"resourceVersion":"2000007"`, `"resourceVersion":"2000100"`))
	if !d.Unchanged(r.State, s.State) {
		t.Errorf("status-only update: states %q and %q differ", r.State, s.State)
	}
	s = d.Apply(pods, pod(t, `"restartPolicy":"Always"`, `"restartPolicy":"Never"`))
	if d.Unchanged(r.State, s.State) {
		t.Errorf("spec update: state %q unchanged", s.State)
	}
	// Kept fields: only those, with the identity.
	k := New(compile(t, "", "spec.nodeName", ""), nil, nil).Apply(pods, pod(t))
	if want := `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web-0002-7d9f8b6c5d-00007","namespace":"team-07","uid":"9b2e4f10-0007-4000-8000-000000000007","resourceVersion":"2000007"},"spec":{"nodeName":"ip-10-0-7-7.ec2.internal"}}`; string(k.Object.Data()) != want {
		t.Errorf("kept fields:\n got %s\nwant %s", k.Object.Data(), want)
	}
}

func TestNoView(t *testing.T) {
	d := New(Config{}, nil, nil)
	obj := pod(t)
	if r := d.Apply(pods, obj); !r.In || r.Object != obj || r.State != "" || d.Defined() {
		t.Errorf("no view: %+v", r)
	}
}

func TestCurrentAndUnchanged(t *testing.T) {
	filterOnly := New(compile(t, `object.status.phase != "Succeeded"`, "", ""), nil, nil)
	projecting := New(compile(t, "", "", "status"), nil, nil)
	none := New(Config{}, nil, nil)
	f, p := filterOnly.ID()+".1a", projecting.ID()+".1a"
	for _, tc := range []struct {
		name string
		got  bool
		want bool
	}{
		{"a state of the same definition is current", filterOnly.Current(f), true},
		{"a state of another definition is not", filterOnly.Current(p), false},
		{"no state is not current for a view", filterOnly.Current(""), false},
		{"without a view, no state is current", none.Current(""), true},
		{"without a view, a filter's state is current", none.Current(f), true},
		{"without a view, a projection's state is not", none.Current(p), false},
		{"equal hashes are unchanged", filterOnly.Unchanged(f, projecting.ID()+".1a"), true},
		{"other hashes are changed", filterOnly.Unchanged(f, filterOnly.ID()+".2b"), false},
		{"no view before, a filter now", filterOnly.Unchanged("", f), true},
		{"no view before, a projection now", projecting.Unchanged("", p), false},
		{"a projection before, no view now", none.Unchanged(p, ""), false},
		{"a filter before, no view now", none.Unchanged(f, ""), true},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

// A filter that fails on an object counts it, logs it at a bounded rate,
// and takes it as not matching; the object's content is never logged.
func TestFilterErrors(t *testing.T) {
	var logs bytes.Buffer
	obs := &counter{}
	d := New(compile(t, `object.spec.replicas > 1`, "", ""), obs, slog.New(slog.NewTextHandler(&logs, nil)))
	for range 5 {
		if d.Apply(pods, pod(t)).In {
			t.Error("an object the filter failed on is in the view")
		}
	}
	if obs.n["pods"] != 5 {
		t.Errorf("counted %d errors, want 5", obs.n["pods"])
	}
	if n := strings.Count(logs.String(), "\n"); n != 1 || !strings.Contains(logs.String(), "team-07/web-0002-7d9f8b6c5d-00007") ||
		!strings.Contains(logs.String(), "replicas") || strings.Contains(logs.String(), "APP_SETTING") {
		t.Errorf("%d log lines:\n%s", n, logs.String())
	}
}

type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) FilterError(resource string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[resource]++
}

// Two definitions that differ only in their filter or their paths have
// different ids.
func TestDefinitionID(t *testing.T) {
	ids := map[string]string{}
	for _, c := range []struct{ expr, fields, drop string }{
		{`object.status.phase != "Succeeded"`, "", ""},
		{`object.status.phase != "Failed"`, "", ""},
		{"", "", "status"},
		{"", "", "spec"},
		{"", "spec", ""},
		{`object.status.phase != "Failed"`, "", "status"},
	} {
		id := New(compile(t, c.expr, c.fields, c.drop), nil, nil).ID()
		if prev, ok := ids[id]; ok {
			t.Errorf("%+v and %s have the same id %s", c, prev, id)
		}
		ids[id] = c.expr + "|" + c.fields + "|" + c.drop
	}
}

func BenchmarkApply(b *testing.B) {
	for _, bc := range []struct{ name, expr, fields, drop string }{
		{"none", "", "", ""},
		{"filter", `resource != "pods" || object.status.phase != "Succeeded"`, "", ""},
		{"drop-status", "", "", "status"},
		{"filter-and-drop-status", `object.status.phase != "Succeeded"`, "", "status"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			d := New(compile(b, bc.expr, bc.fields, bc.drop), nil, nil)
			obj := pod(b)
			b.SetBytes(int64(len(obj.Data())))
			b.ReportAllocs()
			for b.Loop() {
				if !d.Apply(pods, obj).In {
					b.Fatal("not in the view")
				}
			}
		})
	}
}
