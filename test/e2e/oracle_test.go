package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kubebus/bridge/wire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// verdict is what the consumer-side oracle found in a stream.
type verdict struct {
	events     int
	duplicates int      // the same event id more than once
	backwards  []string // an object's resourceVersion went down
	mismatch   string   // how the view differs from the API server; "" when equal
	// excepted names the live objects the view lacks as the scope allows,
	// each with its reason.
	excepted []string
}

// watchedKind is a kind of namespaced object the oracle compares with the
// API server.
type watchedKind struct {
	kind string // the events' kind attribute
	gvr  schema.GroupVersionResource
}

// crdKind is the kind of a test CRD's objects, served at v1.
func crdKind(group, plural, kind string) watchedKind {
	return watchedKind{kind: kind, gvr: schema.GroupVersionResource{Group: group, Version: "v1", Resource: plural}}
}

// list returns the resourceVersion of every object of the kind in ns, by
// name.
func (k watchedKind) list(t *testing.T, ns string) (map[string]string, error) {
	dyn, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		return nil, err
	}
	l, err := dyn.Resource(k.gvr).Namespace(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(l.Items))
	for _, o := range l.Items {
		out[o.GetName()] = o.GetResourceVersion()
	}
	return out, nil
}

var (
	configMaps = watchedKind{kind: "ConfigMap", gvr: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}
	roles      = watchedKind{kind: "Role", gvr: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}}
)

// objectRef names one object of a scope: its kind and its key
// ("namespace/name").
type objectRef struct{ kind, key string }

func (o objectRef) String() string {
	if o.kind == configMaps.kind {
		return o.key // the usual case keeps messages short
	}
	return o.kind + " " + shortName(o.key)
}

func refOf(m *wire.Message) objectRef { return objectRef{m.Kind, m.Key()} }

// stateRV is the resourceVersion of the object state m carries: its
// object's own metadata.resourceVersion. The message's resourceversion
// attribute is that too, but for an object that enters the stream
// unchanged since the last change a start found committed, which is
// dated by the start's revision (docs/filters.md, "An object that comes
// back is newer than its exit"): the state is still the object's own.
func stateRV(m *wire.Message) string {
	var d struct {
		Object struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		} `json:"object"`
	}
	if json.Unmarshal(m.Data, &d) == nil && d.Object.Metadata.ResourceVersion != "" {
		return d.Object.Metadata.ResourceVersion
	}
	return m.ResourceVersion
}

// scope is what the oracle compares: the objects of some kinds in one
// namespace, less the objects the stream is documented to lack.
type scope struct {
	ns    string
	kinds []watchedKind
	// except maps each live object the stream may lack to the documented
	// reason. Such an object must be missing from the view, not merely
	// may: an exception that does not happen is a mismatch too.
	except map[objectRef]string
}

// oracle judges msgs, everything a bus holds about the ConfigMaps of ns in
// stream order, against the API server (see scope.judge).
func oracle(t *testing.T, ns string, msgs []*wire.Message) verdict {
	t.Helper()
	return scope{ns: ns, kinds: []watchedKind{configMaps}}.judge(t, msgs)
}

// judge replays msgs, everything a bus holds about the scope's objects in
// stream order, into a materialized view (the latest object per kind and
// key; deletes remove keys) and compares it with a LIST of each kind from
// the API server: same objects, same resourceVersions, but for the
// scope's exceptions. It also checks that no object's resourceVersion goes
// backwards in the stream and counts duplicates.
func (s scope) judge(t *testing.T, msgs []*wire.Message) verdict {
	t.Helper()
	v := verdict{events: len(msgs)}
	view := map[objectRef]string{}
	last := map[objectRef]string{} // newest resourceVersion seen
	history := map[objectRef][]string{}
	ids := map[string]bool{}
	for _, m := range msgs {
		ref := refOf(m)
		if ids[m.ID] {
			v.duplicates++
		}
		ids[m.ID] = true
		h := fmt.Sprintf("%s@%s/%.6s", m.Action, m.ResourceVersion, m.UID)
		if m.Snapshot {
			h += "(s)"
		}
		history[ref] = append(history[ref], h)
		if prev, ok := last[ref]; ok && rvLess(m.ResourceVersion, prev) {
			v.backwards = append(v.backwards, fmt.Sprintf("%s: %s %s after %s", ref, m.Action, m.ResourceVersion, prev))
		} else {
			last[ref] = m.ResourceVersion
		}
		if m.Action == "deleted" {
			delete(view, ref)
		} else {
			view[ref] = stateRV(m)
		}
	}

	type diff struct {
		ref  objectRef
		what string
	}
	var diffs []diff
	live := map[objectRef]bool{}
	for _, k := range s.kinds {
		list, err := k.list(t, s.ns)
		if err != nil {
			v.mismatch = fmt.Sprintf("list %s: %v", k.gvr.Resource, err)
			return v
		}
		for name, rv := range list {
			ref := objectRef{k.kind, s.ns + "/" + name}
			live[ref] = true
			got, ok := view[ref]
			why, excepted := s.except[ref]
			switch {
			case excepted && !ok:
				v.excepted = append(v.excepted, fmt.Sprintf("%s (%s)", ref, why))
			case excepted:
				diffs = append(diffs, diff{ref, fmt.Sprintf("in the view at %s, though the stream should lack it: %s", got, why)})
			case !ok:
				diffs = append(diffs, diff{ref, "missing from the stream's view"})
			case got != rv:
				diffs = append(diffs, diff{ref, fmt.Sprintf("at %s in the view, %s in the API server", got, rv)})
			}
		}
	}
	for ref := range view {
		if !live[ref] {
			diffs = append(diffs, diff{ref, "in the view but deleted in the API server"})
		}
	}
	for ref, why := range s.except {
		if !live[ref] {
			diffs = append(diffs, diff{ref, "not in the API server, though named as an exception: " + why})
		}
	}
	slices.Sort(v.excepted)
	slices.SortFunc(diffs, func(a, b diff) int { return strings.Compare(a.ref.String(), b.ref.String()) })
	var out []string
	for _, d := range diffs {
		line := d.ref.String() + " " + d.what
		if hist := history[d.ref]; len(hist) > 0 {
			line += fmt.Sprintf(" (stream: %s)", strings.Join(hist[max(0, len(hist)-4):], " "))
		}
		out = append(out, line)
	}
	if len(out) > 5 {
		out = append(out[:5], fmt.Sprintf("and %d more", len(out)-5))
	}
	v.mismatch = strings.Join(out, "; ")
	return v
}

// checkOrder fails t when v found a resourceVersion going backwards, or
// repeats the bus must not hold: on JetStream none (it drops a repeat by
// its Nats-Msg-Id); on Kafka a write the broker stored just before it
// went away may have lost its answer and been written again, so a repeat
// may follow its first copy, but only right after it (docs/kafka.md,
// "Keys and partitions").
func checkOrder(t *testing.T, b bus, v verdict, msgs []*wire.Message) {
	t.Helper()
	if len(v.backwards) > 0 {
		t.Errorf("%d resourceVersions went backwards: %s", len(v.backwards), strings.Join(v.backwards, "; "))
	}
	switch b.name() {
	case "nats":
		if v.duplicates != 0 {
			t.Errorf("JetStream stored %d duplicates, want 0", v.duplicates)
		}
	default:
		if bad := repeatsOutOfPlace(msgs); len(bad) > 0 {
			t.Errorf("%d repeats not right after their first copy: %s", len(bad), strings.Join(bad, "; "))
		}
	}
}
