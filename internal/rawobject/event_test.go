package rawobject

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestScanEvent(t *testing.T) {
	pod := bytes.TrimSpace(readFixture(t, "pod"))
	in := []byte(`{"type":"MODIFIED","object":` + string(pod) + "}\n")
	ev, err := ScanEvent(in)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Scan(pod)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != "MODIFIED" || string(ev.Object) != string(pod) || identity(ev.Meta) != identity(m) ||
		string(ev.Meta.AppendCut(nil, ev.Object)) != string(m.AppendCut(nil, pod)) {
		t.Errorf("ScanEvent read %q, %+v; want MODIFIED, the pod as sent, %+v", ev.Type, identity(ev.Meta), identity(m))
	}
	if cap(ev.Object) != len(ev.Object) {
		t.Errorf("the object's capacity runs past it: an append would write over the event")
	}

	for _, tc := range []struct{ name, in, err string }{
		{"no object", `{"type":"ADDED"}`, "without an object"},
		{"object not an object", `{"type":"ADDED","object":[]}`, "beginning of a watch event's object"},
		{"cut short", `{"type":"ADDED","object":{"a"`, "unexpected end of input"},
		{"not an object", `"ADDED"`, "beginning of a watch event"},
		{"garbage after", `{"object":{}}}`, "after the watch event"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ScanEvent([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want one saying %q", err, tc.err)
			}
		})
	}
	ev, err = ScanEvent([]byte(`{"object":{"metadata":{"name":"a"}},"type":7,"extra":[{}],"object":{"metadata":{"name":"b"}}}`))
	if err != nil || ev.Type != "" || ev.Meta.Name != "b" {
		t.Errorf("duplicates: %+v, %v; want the last object, no type", ev, err)
	}
}

// FuzzScanEvent holds ScanEvent to encoding/json: it accepts an event
// exactly when encoding/json accepts it (valid UTF-8, an object whose
// "object" is an object), and reads its object's exact bytes as Scan does.
func FuzzScanEvent(f *testing.F) {
	for _, s := range []string{
		`{"type":"ADDED","object":{"metadata":{"name":"a","managedFields":[]}}}`,
		`{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"5","annotations":{"k8s.io/initial-events-end":"true"}}}}`,
		`{"type":"\u0041DDED","object":{}}`, `{"object":1}`, "{\"object\":{\"a\":\"\xff\"}}", `{"o\u0062ject":{"kind":"K"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		ev, err := ScanEvent(in)
		var top map[string]json.RawMessage
		accepted := json.Valid(in) && utf8.Valid(in) && json.Unmarshal(in, &top) == nil && top != nil
		obj, hasObj := top["object"]
		accepted = accepted && hasObj && obj[0] == '{'
		if !agreesWithJSON(t, "ScanEvent", in, err, accepted) {
			return
		}
		if string(ev.Object) != string(obj) {
			t.Fatalf("object %q, encoding/json reads %q", ev.Object, obj)
		}
		var typ string
		if json.Unmarshal(top["type"], &typ) != nil {
			typ = ""
		}
		if ev.Type != typ {
			t.Fatalf("type %q, encoding/json reads %q", ev.Type, typ)
		}
		m, err := Scan(obj)
		if err != nil {
			t.Fatalf("Scan of the object: %v", err)
		}
		if identity(m) != identity(ev.Meta) || string(m.AppendCut(nil, obj)) != string(ev.Meta.AppendCut(nil, ev.Object)) || m.plain != ev.Meta.plain {
			t.Fatalf("ScanEvent read %+v, Scan %+v", identity(ev.Meta), identity(m))
		}
	})
}
