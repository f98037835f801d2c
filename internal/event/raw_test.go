package event

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/kubebus/bridge/internal/rawobject"
	"github.com/kubebus/bridge/wire"
)

// The message holds its whole event in one buffer, byte for byte what
// MarshalJSON writes of its attributes and Data, and MarshalJSON hands
// out that buffer itself: the sinks send it without copying.
func TestEncodeWritesTheEventInOneBuffer(t *testing.T) {
	enc := Encoder{Cluster: "prod"}
	for _, fx := range fixtures {
		data := readFixture(t, fx.name)
		withOld := parsedDelta(t, fx.resource, data, false)
		withOld.OldObject = parsedDelta(t, fx.resource, data, false).Object
		for _, tt := range append(pathDeltas(t, fx.resource, data), pathDelta{"parsed with the old object", withOld}) {
			t.Run(fx.name+"/"+tt.name, func(t *testing.T) {
				m, err := enc.Encode(&tt.d)
				if err != nil {
					t.Fatal(err)
				}
				if len(m.Encoded) == 0 {
					t.Fatal("Encoded is empty")
				}
				n, d := len(m.Encoded), len(m.Data)
				if d == 0 || &m.Encoded[n-1-d] != &m.Data[0] {
					t.Fatalf("Data is not the sub-slice of Encoded before its closing brace")
				}
				if cap(m.Data) != len(m.Data) {
					t.Errorf("Data has room to grow (cap %d, len %d) into the event's closing brace", cap(m.Data), len(m.Data))
				}
				fresh := *m
				fresh.Encoded = nil
				want, _ := fresh.MarshalJSON()
				if !bytes.Equal(m.Encoded, want) {
					t.Fatalf("Encoded differs from MarshalJSON of the message\n got %.400s\nwant %.400s", m.Encoded, want)
				}
				got, err := m.MarshalJSON()
				if err != nil {
					t.Fatal(err)
				}
				if &got[0] != &m.Encoded[0] || len(got) != len(m.Encoded) {
					t.Error("MarshalJSON copied the event")
				}
				if !json.Valid(got) {
					t.Errorf("event is not valid JSON: %.400s", got)
				}
			})
		}
	}
}

// The raw path copies the object as the API server sent it, less its
// managedFields unless kept, and with the API server's escapes of "<",
// ">" and "&" written as those characters: its bytes are the event's
// data.object, in one buffer allocated once.
func TestEncodeRawCopiesTheObject(t *testing.T) {
	unescape := strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&")
	for _, fx := range fixtures {
		data := readFixture(t, fx.name)
		if fx.name == "configmap" && !bytes.Contains(data, []byte(`\u003c`)) {
			t.Fatal("the ConfigMap fixture lacks the API server's escapes of HTML characters")
		}
		cut, err := rawobject.AppendCut(nil, data)
		if err != nil {
			t.Fatal(err)
		}
		for _, keep := range []bool{false, true} {
			want := cut
			if keep {
				want = data
			}
			want = bytes.TrimSpace([]byte(unescape.Replace(string(want))))
			d := rawDelta(t, fx.resource, data)
			before := bytes.Clone(data)
			m, err := Encoder{Cluster: "prod", KeepManagedFields: keep}.Encode(&d)
			if err != nil {
				t.Fatal(err)
			}
			if got := dataObject(t, m); !bytes.Equal(got, want) {
				t.Errorf("%s, managedFields kept %v: data.object is not the object's bytes\n got %.300s\nwant %.300s", fx.name, keep, got, want)
			}
			if !bytes.Equal(data, before) {
				t.Errorf("%s: Encode modified Raw.Data", fx.name)
			}
			// Allocated at the size before the escapes became characters
			// and the whitespace around the object was left out.
			if spare, saved := cap(m.Encoded)-len(m.Encoded), len(data)-len(strings.TrimSpace(unescape.Replace(string(data)))); spare != saved {
				t.Errorf("%s, managedFields kept %v: %d bytes spare in the event's buffer, want the %d the escapes and whitespace took", fx.name, keep, spare, saved)
			}
		}
	}
}

// dataObject is the bytes of data.object in m's data, which must be
// {"object":...} alone.
func dataObject(t *testing.T, m *wire.Message) []byte {
	t.Helper()
	const prefix = `{"object":`
	if !bytes.HasPrefix(m.Data, []byte(prefix)) || !bytes.HasSuffix(m.Data, []byte("}")) {
		t.Fatalf("data is not {\"object\":...}: %.200s", m.Data)
	}
	return m.Data[len(prefix) : len(m.Data)-1]
}

// On the fixtures, the raw and the parsed path make the same event:
// attributes equal, data equal as JSON values (the parsed path sorts the
// members and does not escape HTML characters; the raw path keeps the
// server's order and escapes). test/equivalence holds this over every
// kind a real API server serves.
func TestEncodeRawAgreesWithParsed(t *testing.T) {
	for _, keep := range []bool{false, true} {
		enc := Encoder{Cluster: "prod", KeepManagedFields: keep}
		for _, fx := range fixtures {
			data := readFixture(t, fx.name)
			for _, omitted := range []bool{false, true} {
				raw, parsed := rawDelta(t, fx.resource, data), parsedDelta(t, fx.resource, data, keep)
				raw.ContentOmitted, parsed.ContentOmitted = omitted, omitted
				rm, err := enc.Encode(&raw)
				if err != nil {
					t.Fatal(err)
				}
				pm, err := enc.Encode(&parsed)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := decodeJSON(t, rm.Encoded), decodeJSON(t, pm.Encoded); !reflect.DeepEqual(got, want) {
					t.Errorf("%s, managedFields kept %v, content omitted %v: the events differ\nraw    %.400s\nparsed %.400s", fx.name, keep, omitted, rm.Encoded, pm.Encoded)
				}
				if omitted && !bytes.Equal(rm.Encoded, pm.Encoded) {
					t.Errorf("%s: the events without content differ\nraw    %s\nparsed %s", fx.name, rm.Encoded, pm.Encoded)
				}
			}
		}
	}
}

func decodeJSON(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("not JSON: %v: %.300s", err, b)
	}
	return v
}

// The items of a list of built-in objects come without apiVersion and
// kind; the dynamic client's decoder adds those of the list, and so does
// the raw path, as members at the object's end.
func TestEncodeRawAddsTypeToListItems(t *testing.T) {
	enc := Encoder{Cluster: "prod"}
	for _, tt := range []struct {
		name, data, want string
	}{
		{"list item", `{"metadata":{"name":"a","managedFields":[{"manager":"m"}],"uid":"u1"},"data":{"k":"<v>"}}`,
			`{"metadata":{"name":"a","uid":"u1"},"data":{"k":"<v>"},"apiVersion":"v1","kind":"ConfigMap"}`},
		{"empty object", `{}`, `{"apiVersion":"v1","kind":"ConfigMap"}`},
		{"whitespace", " { } \n", `{ "apiVersion":"v1","kind":"ConfigMap"}`},
		{"whitespace after a member", `{"a":1 }`, `{"a":1 ,"apiVersion":"v1","kind":"ConfigMap"}`},
		{"whitespace around an object", "\t{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\"}\r\n", `{"apiVersion":"v1","kind":"ConfigMap"}`},
		{"kind alone is kept as it is", `{"kind":"ConfigMap","metadata":{}}`, `{"kind":"ConfigMap","metadata":{}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := rawDelta(t, configmaps, []byte(tt.data))
			m, err := enc.Encode(&d)
			if err != nil {
				t.Fatal(err)
			}
			if got := dataObject(t, m); string(got) != tt.want {
				t.Errorf("data.object\n got %s\nwant %s", got, tt.want)
			}
			if !json.Valid(m.Encoded) {
				t.Errorf("event is not valid JSON: %s", m.Encoded)
			}
		})
	}
}

// A raw delta that carries an old object (the source never makes one: the
// old object needs the parsed path) still makes a whole event.
func TestEncodeRawWithOldObject(t *testing.T) {
	data := readFixture(t, "configmap")
	d := rawDelta(t, configmaps, data)
	d.OldObject = parsedDelta(t, configmaps, data, false).Object
	m, err := Encoder{Cluster: "prod"}.Encode(&d)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(m.Data, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["object"] == nil || got["oldObject"] == nil {
		t.Errorf("data has members %v, want object and oldObject", keys(got))
	}
}

func TestAppendUnescapingHTML(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"a":"\u003cb\u003e \u0026 \u003C\u003E"}`, `{"a":"<b> & <>"}`},
		{`{"a":"\\u003c"}`, `{"a":"\\u003c"}`},
		{`{"a":"\\\u003c"}`, `{"a":"\\<"}`},
		{`{"a":"\"\u003c\"","\u0026":1}`, `{"a":"\"<\"","&":1}`},
		{`{"a":"\u2028 \ud83d\ude80 \u0027 \u00e9 \u003d \u0036 \n\t\/"}`, `{"a":"\u2028 \ud83d\ude80 \u0027 \u00e9 \u003d \u0036 \n\t\/"}`},
		{`{"a":"\u003`, `{"a":"\u003`},
		{`\`, `\`},
		{``, ``},
	} {
		if got := rawobject.AppendUnescapedHTML([]byte("x"), []byte(tt.in)); string(got) != "x"+tt.want {
			t.Errorf("AppendUnescapedHTML(%s) = %s, want %s", tt.in, got[1:], tt.want)
		}
	}
}

// FuzzUnescapingHTML: for any valid JSON text, writing the escapes of
// "<", ">" and "&" as characters keeps it valid and its value unchanged.
func FuzzUnescapingHTML(f *testing.F) {
	for _, s := range []string{`{"a":"\u003c\u003e\u0026"}`, `["\\u003c","\\\u003c"]`, `{"\u0026":"\u0026amp;"}`, `"\u003C"`, `1`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out := rawobject.AppendUnescapedHTML(nil, in)
		if !json.Valid(in) {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("%s became invalid: %s", in, out)
		}
		var a, b any
		if err := json.Unmarshal(in, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out, &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s became %s: another value", in, out)
		}
	})
}

// A ConfigMap of 400 KB of "<" comes from the API server as 2.4 MB of
// "\u003c"; its event is about 400 KB, as on the parsed path.
func TestEncodeRawDoesNotInflateHTMLCharacters(t *testing.T) {
	const size = 400 << 10
	data := []byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"settings","namespace":"team-a","uid":"uid-1","resourceVersion":"42"},"data":{"page":"` +
		strings.Repeat(`\u003c`, size) + `"}}`)
	d := rawDelta(t, configmaps, data)
	m, err := Encoder{Cluster: "prod"}.Encode(&d)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("event of a ConfigMap of %d bytes of %q, %d bytes as the API server sends it: %d bytes", size, "<", len(data), len(m.Encoded))
	if len(m.Encoded) > size+1024 {
		t.Errorf("event is %d bytes, want at most %d: the data was inflated", len(m.Encoded), size+1024)
	}
}
