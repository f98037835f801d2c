package source

import (
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/internal/rawobject"
)

// testView is a view whose filter is data.keep == "yes" and whose
// projection is data.value: data.noise is left out of what it publishes.
// Its states are "<def>.<value>".
type testView struct {
	def      string
	projects bool
}

func (v testView) Apply(_ Resource, obj *RawObject) ViewResult {
	var o struct {
		Data map[string]string `json:"data"`
	}
	if err := json.Unmarshal(obj.Data(), &o); err != nil {
		panic(err)
	}
	projected, err := NewRawObject(append([]byte(nil), obj.Data()...))
	if err != nil {
		panic(err)
	}
	return ViewResult{In: o.Data["keep"] == "yes", Object: projected, State: v.def + "." + o.Data["value"]}
}

func (v testView) Current(state string) bool { return strings.HasPrefix(state, v.def+".") }

func (v testView) Unchanged(prev, next string) bool {
	if prev == "" || next == "" {
		return !v.projects
	}
	_, a, _ := strings.Cut(prev, ".")
	_, b, _ := strings.Cut(next, ".")
	return a == b
}

// viewCM is a ConfigMap of the raw path with the data testView reads.
func viewCM(t *testing.T, name, uid, rv, keep, value, noise string) object {
	t.Helper()
	data := []byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"` + name + `","namespace":"ns","uid":"` + uid +
		`","resourceVersion":"` + rv + `"},"data":{"keep":"` + keep + `","value":"` + value + `","noise":"` + noise + `"}}`)
	m, err := rawobject.Scan(data)
	if err != nil {
		t.Fatal(err)
	}
	return newRawObject(data, m).object()
}

func newViewTracker(prior map[string]checkpoint.Position, v View) (*tracker, *collected) {
	c := &collected{}
	tr := newTracker(configmaps, prior, nil, 1, c, false, slog.New(slog.NewTextHandler(io.Discard, nil)))
	tr.view = v
	return tr, c
}

// viewSummary is summary with each delta's reason and view state.
func viewSummary(c collected) []string {
	out := c.summary()
	for i, d := range c {
		if d.Reason != "" {
			out[i] += " reason=" + string(d.Reason)
		}
		if d.View != "" {
			out[i] += " view=" + d.View
		}
	}
	return out
}

func TestViewWatchReportsTheViewsChanges(t *testing.T) {
	tr, got := newViewTracker(nil, testView{def: "d1", projects: true})
	tr.replace("", nil, "1")
	tr.finishInitialList()
	steps := []struct {
		name string
		do   func()
		want []string
	}{
		{"created in the view", func() { tr.addObject(viewCM(t, "a", "u1", "2", "yes", "v1", "n1")) },
			[]string{"added ns/a u1@2 view=d1.v1"}},
		{"projected member changed", func() { tr.updateObject(viewCM(t, "a", "u1", "3", "yes", "v2", "n1")) },
			[]string{"updated ns/a u1@3 view=d1.v2"}},
		{"only a member the projection leaves out changed", func() { tr.updateObject(viewCM(t, "a", "u1", "4", "yes", "v2", "n2")) },
			nil},
		{"left the filter", func() { tr.updateObject(viewCM(t, "a", "u1", "5", "no", "v2", "n2")) },
			[]string{"deleted ns/a u1@5 reason=left-filter"}},
		{"changed while out of the view", func() { tr.updateObject(viewCM(t, "a", "u1", "6", "no", "v3", "n2")) },
			nil},
		{"entered the filter again", func() { tr.updateObject(viewCM(t, "a", "u1", "7", "yes", "v3", "n2")) },
			[]string{"added ns/a u1@7 view=d1.v3"}},
		{"deleted while in the view", func() { tr.removeObject(viewCM(t, "a", "u1", "8", "yes", "v3", "n2")) },
			[]string{"deleted ns/a u1@8"}},
		{"created out of the view", func() { tr.addObject(viewCM(t, "b", "u2", "9", "no", "v1", "n1")) },
			nil},
		{"deleted out of the view", func() { tr.removeObject(viewCM(t, "b", "u2", "10", "no", "v1", "n1")) },
			nil},
		{"a delete of an object never seen, in the view", func() { tr.removeObject(viewCM(t, "c", "u3", "11", "yes", "v1", "n1")) },
			[]string{"deleted ns/c u3@11"}},
		{"a delete of an object never seen, out of the view", func() { tr.removeObject(viewCM(t, "d", "u4", "12", "no", "v1", "n1")) },
			nil},
	}
	for _, s := range steps {
		*got = nil
		s.do()
		if g := viewSummary(*got); !slices.Equal(g, s.want) {
			t.Errorf("%s: got %q, want %q", s.name, g, s.want)
		}
	}
}

// A restart publishes exactly what changed in the view while the bridge
// was away: objects that left it, entered it, or changed in what it
// publishes, and nothing for changes it leaves out.
func TestViewRestartPublishesTheViewsChanges(t *testing.T) {
	v := testView{def: "d1", projects: true}
	prior := map[string]checkpoint.Position{
		"ns/same":      {UID: "u1", ResourceVersion: "10", View: "d1.v"},
		"ns/left":      {UID: "u2", ResourceVersion: "11", View: "d1.v"},
		"ns/projected": {UID: "u3", ResourceVersion: "12", View: "d1.v"},
		"ns/dropped":   {UID: "u4", ResourceVersion: "13", View: "d1.v"},
		"ns/gone":      {UID: "u5", ResourceVersion: "14", View: "d1.v"},
	}
	tr, got := newViewTracker(prior, v)
	list(tr, "30",
		viewCM(t, "same", "u1", "10", "yes", "v", "n"),
		viewCM(t, "left", "u2", "21", "no", "v", "n"),
		viewCM(t, "projected", "u3", "22", "yes", "v2", "n"),
		viewCM(t, "dropped", "u4", "23", "yes", "v", "n2"),
		viewCM(t, "entered", "u6", "24", "yes", "v", "n"),
		viewCM(t, "outside", "u7", "25", "no", "v", "n"),
	)
	tr.finishInitialList()
	want := []string{
		"deleted ns/left u2@21 snapshot reason=left-filter",
		"updated ns/projected u3@22 snapshot view=d1.v2",
		"added ns/entered u6@24 snapshot view=d1.v",
		"deleted ns/gone u5@30 snapshot",
	}
	if g := viewSummary(*got); !slices.Equal(g, want) {
		t.Errorf("got %q\nwant %q", g, want)
	}

	// A relist finds the object outside the view gone: it was never
	// published, so its delete is not either; the one in the view is.
	*got = nil
	list(tr, "40", viewCM(t, "same", "u1", "10", "yes", "v", "n"))
	want = []string{"deleted ns/dropped u4@40 snapshot", "deleted ns/entered u6@40 snapshot", "deleted ns/projected u3@40 snapshot"}
	if g := viewSummary(*got); !slices.Equal(g, want) {
		t.Errorf("relist: got %q\nwant %q", g, want)
	}
}

// A new definition compares every object again, even unchanged ones: a
// narrower filter deletes exactly the objects it no longer matches.
func TestViewDefinitionChangeComparesUnchangedObjects(t *testing.T) {
	prior := map[string]checkpoint.Position{
		"ns/stays": {UID: "u1", ResourceVersion: "10", View: "d0.v"},
		"ns/left":  {UID: "u2", ResourceVersion: "11", View: "d0.v"},
	}
	v := testView{def: "d1", projects: true}
	if !viewChanged(v, prior, "11") {
		t.Fatal("viewChanged = false for positions of another definition")
	}
	tr, got := newViewTracker(prior, v)
	// The resource's revision when the source started: the view's
	// changes are dated by it, since the objects did not change.
	tr.startRV, tr.lastRV, tr.viewMoved = "25", "20", true
	list(tr, "30", viewCM(t, "stays", "u1", "10", "yes", "v", "n"), viewCM(t, "left", "u2", "11", "no", "v", "n"),
		viewCM(t, "entered", "u3", "12", "yes", "v", "n"), viewCM(t, "new", "u4", "21", "yes", "v", "n"))
	tr.finishInitialList()
	want := []string{"deleted ns/left u2@25 snapshot reason=left-filter", "added ns/entered u3@25 snapshot view=d1.v", "added ns/new u4@21 snapshot view=d1.v"}
	if g := viewSummary(*got); !slices.Equal(g, want) {
		t.Errorf("got %q\nwant %q", g, want)
	}
}

// Turning a view on or off: positions recorded without a view hold the
// whole object. A view that projects nothing publishes nothing again for
// unchanged objects; one that projects publishes its projection of each.
func TestViewOnAndOff(t *testing.T) {
	for _, tc := range []struct {
		name  string
		prior string
		view  testView
		want  []string
	}{
		{"filter turned on", "", testView{def: "d1"}, []string{"deleted ns/out u2@11 snapshot reason=left-filter"}},
		{"projection turned on", "", testView{def: "d1", projects: true},
			[]string{"updated ns/in u1@10 snapshot view=d1.v", "deleted ns/out u2@11 snapshot reason=left-filter"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prior := map[string]checkpoint.Position{
				"ns/in":  {UID: "u1", ResourceVersion: "10", View: tc.prior},
				"ns/out": {UID: "u2", ResourceVersion: "11", View: tc.prior},
			}
			tr, got := newViewTracker(prior, tc.view)
			list(tr, "30", viewCM(t, "in", "u1", "10", "yes", "v", "n"), viewCM(t, "out", "u2", "11", "no", "v", "n"))
			tr.finishInitialList()
			if g := viewSummary(*got); !slices.Equal(g, tc.want) {
				t.Errorf("got %q\nwant %q", g, tc.want)
			}
		})
	}
}

// list hands objs to tr as one complete list at rv.
func list(tr *tracker, rv string, objs ...object) {
	listed := map[string]bool{}
	for _, o := range objs {
		tr.listItem(o)
		listed[o.key()] = true
	}
	tr.endList("", listed, rv)
}

// v0 is no view: it takes "" for current, as view.Definition does
// without a filter or a projection.
type v0 struct{ testView }

func (v0) Current(state string) bool { return state == "" }

// A view may have changed since the positions were recorded (and
// intents are dated by the revision read at start) only when there is one
// now, or there was one then.
func TestViewChanged(t *testing.T) {
	v := testView{def: "d1"}
	for _, tc := range []struct {
		name   string
		view   View
		prior  map[string]checkpoint.Position
		lastRV string
		want   bool
	}{
		{"no view", nil, map[string]checkpoint.Position{"a": {View: "d0.x"}}, "5", false},
		{"same definition", v, map[string]checkpoint.Position{"a": {View: "d1.x"}}, "5", true},
		{"no view now or then", v0{}, map[string]checkpoint.Position{"a": {}}, "5", false},
		{"no view now, one then", v0{}, map[string]checkpoint.Position{"a": {}, "b": {View: "d1.x"}}, "5", true},
		{"first start", v, nil, "", false},
		{"another definition", v, map[string]checkpoint.Position{"a": {View: "d1.x"}, "b": {View: "d0.x"}}, "5", true},
		{"no view before", v, map[string]checkpoint.Position{"a": {}}, "5", true},
		{"every object left the view", v, nil, "5", true},
	} {
		if got := viewChanged(tc.view, tc.prior, tc.lastRV); got != tc.want {
			t.Errorf("%s: viewChanged = %v, want %v", tc.name, got, tc.want)
		}
	}
}
