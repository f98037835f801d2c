package wire

import (
	"os"
	"strings"
	"testing"
	"time"
)

// A document goes through MarshalDiscovery and UnmarshalDiscovery as it
// was.
func TestDiscoveryRoundTrip(t *testing.T) {
	d := Discovery{Cluster: "prod", Server: "https://10.0.0.1:443", Time: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
		Resources: []DiscoveredResource{
			{Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Singular: "configmap", Namespaced: true, ShortNames: []string{"cm"}},
			{Group: "example.com", Version: "v1", Resource: "widgets", Kind: "Widget", Namespaced: true, Categories: []string{"all"},
				Columns: []PrinterColumn{{Name: "Size", Type: "integer", JSONPath: ".spec.size", Priority: 1}}},
		}}
	data, err := MarshalDiscovery(d)
	if err != nil {
		t.Fatal(err)
	}
	got, err := UnmarshalDiscovery(data)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := MarshalDiscovery(got)
	if string(again) != string(data) {
		t.Errorf("round trip:\n%s\nbecame\n%s", data, again)
	}
	if _, err := MarshalDiscovery(Discovery{}); err == nil || !strings.Contains(err.Error(), "no cluster") {
		t.Errorf("MarshalDiscovery of a document without a cluster: %v, want an error that says so", err)
	}
}

// Bad input is an error that names what is wrong, never a panic.
func TestUnmarshalDiscoveryBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       []string
	}{
		{"empty", ``, []string{"wire: discovery document"}},
		{"not JSON", `{"cluster":`, []string{"wire: discovery document"}},
		{"not an object", `[1,2]`, []string{"wire: discovery document"}},
		{"null", `null`, []string{"names no cluster"}},
		{"no cluster", `{"resources":[]}`, []string{"names no cluster"}},
		{"cluster of the wrong type", `{"cluster":7}`, []string{"wire: discovery document"}},
		{"resources not a list", `{"cluster":"a","resources":{}}`, []string{"wire: discovery document"}},
		{"resource without a kind", `{"cluster":"a","resources":[{"version":"v1","resource":"configmaps"}]}`,
			[]string{`cluster "a"`, `resource 0 ("configmaps")`, "kind"}},
		{"resource without a version", `{"cluster":"a","resources":[{"version":"v1","resource":"pods","kind":"Pod"},{"resource":"configmaps","kind":"ConfigMap"}]}`,
			[]string{`resource 1 ("configmaps")`, "version"}},
		{"namespaced not a bool", `{"cluster":"a","resources":[{"version":"v1","resource":"pods","kind":"Pod","namespaced":"yes"}]}`,
			[]string{"wire: discovery document"}},
		{"bad time", `{"cluster":"a","time":"yesterday"}`, []string{"wire: discovery document"}},
		{"too large", `{"cluster":"a","server":"` + strings.Repeat("x", MaxDiscoveryBytes) + `"}`, []string{"bytes, more than"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := UnmarshalDiscovery([]byte(tc.data))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// Members a reader does not know are ignored, so that documents can grow.
func TestUnmarshalDiscoveryUnknownMembers(t *testing.T) {
	d, err := UnmarshalDiscovery([]byte(`{"cluster":"a","future":1,"resources":[{"version":"v1","resource":"pods","kind":"Pod","verbs":["get"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if d.Cluster != "a" || len(d.Resources) != 1 || d.Resources[0].Kind != "Pod" {
		t.Errorf("got %+v", d)
	}
}

// Discovery subjects and topics cannot be those of a cluster's objects.
func TestDiscoveryNames(t *testing.T) {
	if got, want := DiscoverySubject("kube", "prod"), "kube._discovery.prod"; got != want {
		t.Errorf("DiscoverySubject = %q, want %q", got, want)
	}
	if !SubjectMatches(DiscoverySubjects("kube"), DiscoverySubject("kube", "a.b")) {
		t.Errorf("%s does not match the subject of a cluster with a dot in its name", DiscoverySubjects("kube"))
	}
	if !SubjectMatches(StreamSubject("kube"), DiscoverySubject("kube", "prod")) {
		t.Errorf("the stream's subjects %s do not capture %s", StreamSubject("kube"), DiscoverySubject("kube", "prod"))
	}
	if err := CheckTopicName(DiscoveryTopic("kube")); err != nil {
		t.Errorf("DiscoveryTopic: %v", err)
	}
}

// The example of docs/message-format.md is a document UnmarshalDiscovery
// reads.
func TestDocumentedDiscovery(t *testing.T) {
	doc, err := os.ReadFile("../docs/message-format.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## Discovery documents\n")
	if !ok {
		t.Fatal("no section Discovery documents")
	}
	_, block, ok := strings.Cut(section, "```\n")
	block, _, _ = strings.Cut(block, "```")
	if !ok || block == "" {
		t.Fatal("no example in the section Discovery documents")
	}
	d, err := UnmarshalDiscovery([]byte(block))
	if err != nil {
		t.Fatal(err)
	}
	if d.Cluster != "prod" || len(d.Resources) != 2 || len(d.Resources[1].Columns) != 2 {
		t.Errorf("the example reads as %+v", d)
	}
}
