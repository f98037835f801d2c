package nats

import (
	"reflect"
	"testing"

	"github.com/kubebus/bridge/wire"
)

func TestEncodeModes(t *testing.T) {
	m := message("team-a", 7, 3)
	m.Snapshot = true
	m.Subject = "team-a/héllo wörld"
	cluster := message("", 1, 0) // cluster-scoped: no namespace
	cluster.Subject, cluster.Namespace = "cm-001", ""
	omitted := message("team-a", 2, 3) // its full event did not fit
	omitted.ContentOmitted, omitted.Snapshot = true, true
	left := message("team-a", 4, 3) // no longer matches the filter
	left.Subject, left.Action, left.Type, left.Reason = "team-a/left", "deleted", "io.kubebus.object.deleted", "left-filter"
	left.Snapshot = true // left the filter while the bridge was down

	for _, mode := range []CEMode{CEStructured, CEBinary} {
		for _, msg := range []*wire.Message{m, cluster, omitted, left} {
			t.Run(string(mode)+" "+msg.Subject, func(t *testing.T) {
				cfg := defaults(t)
				cfg.CEMode = mode
				tmpl, err := wire.ParseSubjectTemplate(cfg.SubjectLayout(), cfg.SubjectPrefix)
				if err != nil {
					t.Fatal(err)
				}
				s := &Sink{cfg: &Parsed{Config: cfg}, tmpl: tmpl}
				nm, err := s.encode(msg)
				if err != nil {
					t.Fatal(err)
				}
				if got := nm.Header.Get(MsgIDHeader); got != msg.ID {
					t.Errorf("%s = %q, want the event id %q", MsgIDHeader, got, msg.ID)
				}
				switch mode {
				case CEStructured:
					if nm.Header.Get(ContentTypeHeader) != wire.StructuredContentType {
						t.Errorf("Content-Type = %q", nm.Header.Get(ContentTypeHeader))
					}
				case CEBinary:
					if string(nm.Data) != string(msg.Data) {
						t.Errorf("body = %s, want the event data %s", nm.Data, msg.Data)
					}
					for name, want := range map[string]string{
						"ce-specversion": "1.0", "ce-id": msg.ID, "ce-type": msg.Type, "ce-source": msg.Source,
						"ce-datacontenttype": "application/json", "ce-resourceversion": msg.ResourceVersion,
						"ce-time": "2026-11-21T05:12:31.000000003Z", "ce-snapshot": "true",
					} {
						if msg == cluster && (name == "ce-time" || name == "ce-snapshot") {
							continue
						}
						if got := nm.Header.Get(name); got != want {
							t.Errorf("%s = %q, want %q", name, got, want)
						}
					}
					if msg == m && nm.Header.Get("ce-subject") != "team-a/h%C3%A9llo%20w%C3%B6rld" {
						t.Errorf("ce-subject = %q, want it percent-encoded", nm.Header.Get("ce-subject"))
					}
					if _, ok := nm.Header["ce-namespace"]; ok != (msg.Namespace != "") {
						t.Errorf("ce-namespace present = %v for namespace %q", ok, msg.Namespace)
					}
					if got := nm.Header.Get("ce-contentomitted"); (got == "true") != msg.ContentOmitted || (got == "") == msg.ContentOmitted {
						t.Errorf("ce-contentomitted = %q for a message with ContentOmitted %v", got, msg.ContentOmitted)
					}
					if _, ok := nm.Header["ce-reason"]; ok != (msg.Reason != "") || nm.Header.Get("ce-reason") != msg.Reason {
						t.Errorf("ce-reason = %q for a message with Reason %q", nm.Header.Get("ce-reason"), msg.Reason)
					}
					if nm.Header.Get(ContentTypeHeader) != "" {
						t.Errorf("binary mode has Content-Type %q", nm.Header.Get(ContentTypeHeader))
					}
				}
				got, err := decode(nm)
				if err != nil {
					t.Fatal(err)
				}
				if !got.Time.Equal(msg.Time) {
					t.Errorf("time %v, want %v", got.Time, msg.Time)
				}
				got.Time = msg.Time
				if !reflect.DeepEqual(got, msg) {
					t.Errorf("decoded\n%+v\nwant\n%+v", got, msg)
				}
			})
		}
	}
}
