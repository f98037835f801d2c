package e2e

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubebus/bridge/sink"
)

// verdict is what the consumer-side oracle found in a stream.
type verdict struct {
	events     int
	duplicates int      // the same event id more than once
	backwards  []string // an object's resourceVersion went down
	mismatch   string   // how the view differs from the API server; "" when equal
}

// oracle replays msgs, everything a bus holds about the ConfigMaps of ns in
// stream order, into a materialized view (the latest object per key;
// deletes remove keys) and compares it with a LIST from the API server:
// same keys, same resourceVersions. It also checks that no object's
// resourceVersion goes backwards in the stream and counts duplicates.
func oracle(t *testing.T, ns string, msgs []*sink.Message) verdict {
	t.Helper()
	v := verdict{events: len(msgs)}
	view := map[string]string{}
	last := map[string]string{} // key -> newest resourceVersion seen
	history := map[string][]string{}
	ids := map[string]bool{}
	for _, m := range msgs {
		if ids[m.ID] {
			v.duplicates++
		}
		ids[m.ID] = true
		h := fmt.Sprintf("%s@%s/%.6s", m.Action, m.ResourceVersion, m.UID)
		if m.Snapshot {
			h += "(s)"
		}
		history[m.Key()] = append(history[m.Key()], h)
		if prev, ok := last[m.Key()]; ok && rvLess(m.ResourceVersion, prev) {
			v.backwards = append(v.backwards, fmt.Sprintf("%s: %s %s after %s", m.Key(), m.Action, m.ResourceVersion, prev))
		} else {
			last[m.Key()] = m.ResourceVersion
		}
		if m.Action == "deleted" {
			delete(view, m.Key())
		} else {
			view[m.Key()] = m.ResourceVersion
		}
	}

	list, err := kube(t).CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		v.mismatch = "list: " + err.Error()
		return v
	}
	var diffs []string
	live := map[string]bool{}
	for _, cm := range list.Items {
		key := ns + "/" + cm.Name
		live[key] = true
		if got, ok := view[key]; !ok {
			diffs = append(diffs, key+" missing from the stream's view")
		} else if got != cm.ResourceVersion {
			diffs = append(diffs, fmt.Sprintf("%s at %s in the view, %s in the API server", key, got, cm.ResourceVersion))
		}
	}
	for key := range view {
		if !live[key] {
			diffs = append(diffs, key+" in the view but deleted in the API server")
		}
	}
	for i, d := range diffs {
		key, _, _ := strings.Cut(d, " ")
		if hist := history[key]; len(hist) > 0 {
			diffs[i] += fmt.Sprintf(" (stream: %s)", strings.Join(hist[max(0, len(hist)-4):], " "))
		}
	}
	if len(diffs) > 5 {
		diffs = append(diffs[:5], fmt.Sprintf("and %d more", len(diffs)-5))
	}
	v.mismatch = strings.Join(diffs, "; ")
	return v
}
