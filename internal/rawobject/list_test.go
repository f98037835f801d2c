package rawobject

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// listed is what ScanList handed on and returned.
type listed struct {
	meta  ListMeta
	items []string
	ids   []ident
	cuts  []string
	plain []bool
}

func scanList(in []byte) (listed, error) {
	var l listed
	lm, err := ScanList(in, func(data []byte, m Meta) error {
		l.items = append(l.items, string(data))
		l.ids = append(l.ids, identity(m))
		l.cuts = append(l.cuts, string(m.AppendCut(nil, data)))
		l.plain = append(l.plain, m.plain)
		return nil
	})
	l.meta = lm
	return l, err
}

func TestScanListHandsOnItemsAsSent(t *testing.T) {
	// The fixtures end with the newline the API server's encoder writes.
	cm := bytes.TrimSpace(readFixture(t, "configmap"))
	pod := bytes.TrimSpace(readFixture(t, "pod"))
	in := []byte(`{"kind":"List","apiVersion":"v1","metadata":{"resourceVersion":"99","continue":"tok\u0065n","remainingItemCount":3},"items":[` +
		string(cm) + " , \n" + string(pod) + `]}` + "\n")
	l, err := scanList(in)
	if err != nil {
		t.Fatal(err)
	}
	if l.meta != (ListMeta{ResourceVersion: "99", Continue: "token"}) {
		t.Errorf("list meta %+v", l.meta)
	}
	if !slices.Equal(l.items, []string{string(cm), string(pod)}) {
		t.Errorf("items are not the bytes sent")
	}
	for k, fx := range [][]byte{cm, pod} {
		m, err := Scan(fx)
		if err != nil {
			t.Fatal(err)
		}
		if l.ids[k] != identity(m) || l.cuts[k] != string(m.AppendCut(nil, fx)) {
			t.Errorf("item %d: read %+v, cut %d bytes; Scan reads %+v, cuts %d", k, l.ids[k], len(l.cuts[k]), identity(m), len(m.AppendCut(nil, fx)))
		}
	}
}

func TestScanListShapes(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		items    int
		meta     ListMeta
		err      string
	}{
		{name: "no items", in: `{"metadata":{"resourceVersion":"1"},"items":[]}`, meta: ListMeta{ResourceVersion: "1"}},
		{name: "null items", in: `{"items":null,"metadata":{"resourceVersion":"1"}}`, meta: ListMeta{ResourceVersion: "1"}},
		{name: "no items member", in: `{"kind":"List"}`},
		{name: "metadata not an object", in: `{"metadata":[1],"items":[{}]}`, items: 1},
		{name: "last metadata wins whole", in: `{"metadata":{"resourceVersion":"1","continue":"c"},"metadata":{"resourceVersion":"2"}}`, meta: ListMeta{ResourceVersion: "2"}},
		{name: "item not an object", in: `{"items":[{},1]}`, err: "looking for the beginning of a list item"},
		{name: "items not an array", in: `{"items":{}}`, err: "looking for the beginning of a list's items"},
		{name: "items twice", in: `{"items":[],"items":[]}`, err: "more than one items member"},
		{name: "cut short", in: `{"items":[{"a":1},{"b"`, err: "unexpected end of input"},
		{name: "trailing comma", in: `{"items":[{},]}`, err: "looking for the beginning of a list item"},
		{name: "garbage after", in: `{"items":[]} x`, err: "after the list"},
		{name: "not an object", in: `[]`, err: "looking for the beginning of a list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := scanList([]byte(tc.in))
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one saying %q", err, tc.err)
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case tc.err == "" && (len(l.items) != tc.items || l.meta != tc.meta):
				t.Errorf("%d items, meta %+v; want %d, %+v", len(l.items), l.meta, tc.items, tc.meta)
			}
		})
	}
}

func TestScanListStopsOnItemError(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	_, err := ScanList([]byte(`{"items":[{},{},{}]}`), func([]byte, Meta) error {
		if n++; n == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 2 {
		t.Errorf("err %v after %d items, want the item's error after 2", err, n)
	}
}

// FuzzScanList holds ScanList to encoding/json: it accepts a list exactly
// when encoding/json accepts it (valid UTF-8, items absent, null or an
// array of objects, present once), and hands on each item's exact bytes,
// read as Scan reads them.
func FuzzScanList(f *testing.F) {
	for _, s := range []string{
		`{"metadata":{"resourceVersion":"1"},"items":[{"metadata":{"name":"a","managedFields":[]}}]}`,
		`{"items":null}`, `{"items":[{},1]}`, `{"items":[],"items":[]}`, `{"met\u0061data":{"continue":"\ud800"}}`,
		`{"items":[{"kind":"\u00e9","metadata":{"uid":"u"}}, {"spec":[1e400]}]}`, "{\"items\":[{\"a\":\"\xff\"}]}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		l, err := scanList(in)
		var top map[string]json.RawMessage
		accepted := json.Valid(in) && utf8.Valid(in) && json.Unmarshal(in, &top) == nil && top != nil
		var items []json.RawMessage
		if accepted {
			if raw, ok := top["items"]; ok && string(raw) != "null" {
				accepted = json.Unmarshal(raw, &items) == nil && bytes.Count(in, []byte(`"items"`)) <= 1
				for _, it := range items {
					accepted = accepted && it[0] == '{'
				}
			}
		}
		if err != nil {
			var se *SyntaxError
			if errors.As(err, &se) && (se.Offset < 0 || se.Offset > len(in)) {
				t.Fatalf("ScanList(%q): offset %d outside the input", in, se.Offset)
			}
			if accepted && !strings.Contains(err.Error(), "items member") {
				t.Fatalf("ScanList(%q): %v, but encoding/json accepts it", in, err)
			}
			return
		}
		if !accepted {
			// Duplicate items keys written with escapes are not counted
			// above; anything else is a bug.
			if !json.Valid(in) || !utf8.Valid(in) {
				t.Fatalf("ScanList(%q) accepted what encoding/json refuses", in)
			}
			return
		}
		if len(items) != len(l.items) {
			t.Fatalf("ScanList(%q): %d items, encoding/json reads %d", in, len(l.items), len(items))
		}
		for k, it := range items {
			if string(it) != l.items[k] {
				t.Fatalf("item %d: %q, encoding/json reads %q", k, l.items[k], it)
			}
			m, err := Scan(it)
			if err != nil {
				t.Fatalf("item %d: Scan: %v", k, err)
			}
			if identity(m) != l.ids[k] || string(m.AppendCut(nil, it)) != l.cuts[k] || m.plain != l.plain[k] {
				t.Fatalf("item %d: ScanList read %+v, Scan %+v", k, l.ids[k], identity(m))
			}
		}
	})
}
