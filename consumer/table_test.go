package consumer

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

// TestTableRules applies record sequences and checks the events and
// drops each makes: the bridge's dedupe rules.
func TestTableRules(t *testing.T) {
	a1 := obj{ns: "ns", name: "a", uid: "00000000-0000-0000-0000-00000000000a", rv: 10}
	a2 := a1
	a2.rv = 11
	a3 := a1
	a3.rv = 12
	b := obj{ns: "ns", name: "a", uid: "00000000-0000-0000-0000-00000000000b", rv: 20} // a again, new uid
	// a's delete, dated by b's resourceVersion
	bAsA := a1
	bAsA.rv = b.rv
	// a's delete found again by a bridge restarted after b changed: dated
	// by b's later version, its object a's last state.
	aGoneLater := rec("deleted", a1)
	aGoneLater.Message.ResourceVersion = "25"
	blue := map[string]string{"color": "blue"}
	red := map[string]string{"color": "red"}
	aBlue, aRed, aBlue2 := a1, a2, a3
	aBlue.labels, aRed.labels, aBlue2.labels = blue, red, blue
	leftA2 := rec("deleted", a2)
	leftA2.Message.Reason = "left-filter"
	other := a1
	other.ns = "elsewhere"
	foreign := rec("added", a1)
	foreign.Message.Cluster = "c2"
	otherResource := rec("added", a1)
	otherResource.Message.Source = "kubebus/c1/secrets"
	otherResource.Message.Resource.Resource = "secrets"
	badData := rec("added", a1)
	badData.Message.Data = []byte(`{"object": 3}`)
	wrongObject := rec("added", a1)
	wrongObject.Message.UID = "someone-else"
	noAction := rec("added", a1)
	noAction.Message.Action = "patched"
	// Bridges of two clusters write the same keys to one Kafka topic.
	foreignAdd, foreignDelete := rec("added", a1), rec("deleted", a2)
	foreignAdd.Message.Cluster, foreignDelete.Message.Cluster = "c2", "c2"
	foreignTombstone, ownTombstone := tombstone(a1), tombstone(a1)
	foreignTombstone.Cluster, ownTombstone.Cluster = "c2", testCluster

	tests := []struct {
		name     string
		selector string
		ns       string
		recs     []Record
		want     string // events and drops, one per record, joined by " "
	}{
		{"add update delete", "", "", []Record{rec("added", a1), rec("updated", a2), rec("deleted", a3)},
			"ADDED/a@10 MODIFIED/a@11 DELETED/a@12"},
		{"bus action does not decide the type", "", "", []Record{rec("updated", a1), rec("added", a2)},
			"ADDED/a@10 MODIFIED/a@11"},
		{"repeats and older states dropped", "", "", []Record{rec("added", a1), rec("added", a1), rec("updated", a2), rec("updated", a1), rec("updated", a2)},
			"ADDED/a@10 duplicate MODIFIED/a@11 duplicate duplicate"},
		{"delete may carry the last state's version", "", "", []Record{rec("added", a1), rec("deleted", a1)},
			"ADDED/a@10 DELETED/a@10"},
		// The tombstone that follows a delete on Kafka is no drop: there is
		// nothing left to delete.
		{"delete of an object never added", "", "", []Record{rec("deleted", a1), tombstone(a1)},
			"unknown_delete none"},
		{"late repeat of a deleted object", "", "", []Record{rec("added", a1), rec("deleted", a2), rec("updated", a2), rec("added", a1), rec("deleted", a2)},
			"ADDED/a@10 DELETED/a@11 duplicate duplicate duplicate"},
		{"late repeat of an object deleted unseen", "", "", []Record{rec("deleted", a2), rec("added", a1)},
			"unknown_delete duplicate"},
		{"new uid under a held key", "", "", []Record{rec("added", a1), rec("added", b)},
			"ADDED/a@10 DELETED/a@10+ADDED/a@20"},
		// The bus keeps only a key's latest message: a reader behind it
		// may get the delete of a later uid without the held one's.
		{"delete of a later uid under a held key", "", "", []Record{rec("added", a1), rec("deleted", b), rec("updated", a2)},
			"ADDED/a@10 DELETED/a@10 duplicate"},
		// The bridge dates the delete of an object recreated unseen by its
		// successor's resourceVersion; a repeat of it after a crash comes
		// after the successor.
		{"delete of the replaced uid at the held one's version", "", "", []Record{rec("added", b), rec("deleted", bAsA)},
			"ADDED/a@20 duplicate"},
		{"delete of the replaced uid dated later than the held one", "", "", []Record{rec("added", b), aGoneLater},
			"ADDED/a@20 duplicate"},
		{"old uid after the new one", "", "", []Record{rec("added", b), rec("updated", a2)},
			"ADDED/a@20 duplicate"},
		{"tombstone of a held object", "", "", []Record{rec("added", a1), tombstone(a1), rec("updated", a1)},
			"ADDED/a@10 DELETED/a@10 duplicate"},
		{"tombstone of another cluster", "", "", []Record{rec("added", a1), foreignAdd, foreignDelete, foreignTombstone, rec("updated", a2)},
			"ADDED/a@10 foreign foreign foreign MODIFIED/a@11"},
		{"tombstone naming its cluster", "", "", []Record{rec("added", a1), foreignAdd, ownTombstone, rec("updated", a1)},
			"ADDED/a@10 foreign DELETED/a@10 duplicate"},
		// Written by a bridge before tombstones named their cluster: the
		// key's object is gone, as before.
		{"tombstone naming no cluster", "", "", []Record{rec("added", a1), foreignAdd, foreignDelete, tombstone(a1)},
			"ADDED/a@10 foreign foreign DELETED/a@10"},
		{"selector enter and leave", "color=blue", "", []Record{rec("added", aBlue), rec("updated", aRed), rec("updated", aBlue2)},
			"ADDED/a@10 DELETED/a@11 ADDED/a@12"},
		{"older state of an object that left the selector", "color=blue", "", []Record{rec("added", aBlue), rec("updated", aRed), rec("updated", aBlue)},
			"ADDED/a@10 DELETED/a@11 duplicate"},
		{"never selected, then deleted", "color=blue", "", []Record{rec("added", aRed), rec("deleted", aRed)},
			"none none"},
		// An object that left the bridge's filter still exists: it comes
		// back when it matches again (the tombstone that follows its
		// delete on Kafka changes nothing), but not at an older state.
		{"left the filter and back", "", "", []Record{rec("added", a1), leftA2, tombstone(a1), rec("updated", a1), rec("added", a3)},
			"ADDED/a@10 DELETED/a@10 none duplicate ADDED/a@12"},
		{"left the filter, never held", "", "", []Record{leftA2, rec("added", a3)},
			"none ADDED/a@12"},
		{"namespace", "", "ns", []Record{rec("added", other), rec("added", a1)},
			"namespace ADDED/a@10"},
		{"bad records", "", "", []Record{{Key: "x", Err: errors.New("undecodable")}, foreign, otherResource, badData, wrongObject, noAction, rec("added", a1)},
			"invalid foreign foreign invalid invalid invalid ADDED/a@10"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := testOptions()
			opts.Namespace = tt.ns
			if tt.selector != "" {
				sel, err := labels.Parse(tt.selector)
				if err != nil {
					t.Fatal(err)
				}
				opts.LabelSelector = sel
			}
			tab := newTable(&opts)
			var got []string
			for _, r := range tt.recs {
				got = append(got, describe(tab.apply(r)))
			}
			if g := strings.Join(got, " "); g != tt.want {
				t.Errorf("got  %s\nwant %s", g, tt.want)
			}
		})
	}
}

// describe writes an outcome as TYPE/name@apiRV events joined by "+", or
// the drop reason, or "none".
func describe(out outcome) string {
	if out.drop != "" {
		return string(out.drop)
	}
	if len(out.changes) == 0 {
		return "none"
	}
	var s []string
	for _, ch := range out.changes {
		name, rv := "", ""
		if ch.obj != nil {
			name, rv = ch.obj.GetName(), ch.obj.GetResourceVersion()
		} else {
			_, name = splitKey(ch.key)
			rv = ch.last.rv.String()
		}
		s = append(s, fmt.Sprintf("%s/%s@%s", ch.typ, name, rv))
	}
	return strings.Join(s, "+")
}

func TestUIDRoundTrip(t *testing.T) {
	for _, s := range []string{"6ba7b810-9dad-11d1-80b4-00c04fd430c8", "not-a-uuid", "6BA7B810-9DAD-11D1-80B4-00C04FD430C8"} {
		u := parseUID(s)
		want := s
		if !u.text {
			want = ""
		}
		if u.String() != want || (s == "6ba7b810-9dad-11d1-80b4-00c04fd430c8") != u.text {
			t.Errorf("parseUID(%q) = %q (text %v)", s, u.String(), u.text)
		}
		if parseUID(s) != u || parseUID(s+"x") == u {
			t.Errorf("parseUID(%q) is not a stable identity", s)
		}
	}
}
