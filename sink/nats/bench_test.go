package nats

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kubebus/bridge/internal/event"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/test/synthetic"
	"github.com/kubebus/bridge/wire"
)

// benchMessages are the bridge's messages for an update of a ConfigMap of
// about 1 KiB and of a Pod of about 10 KiB.
func benchMessages(b *testing.B) []struct {
	name string
	msg  *wire.Message
} {
	b.Helper()
	observed := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	enc := event.Encoder{Cluster: "prod"}
	var out []struct {
		name string
		msg  *wire.Message
	}
	for _, d := range []struct {
		name  string
		delta source.Delta
	}{
		{"ConfigMap", synthetic.Update(synthetic.ConfigMaps, synthetic.ConfigMap(7), observed)},
		{"Pod", synthetic.Update(synthetic.Pods, synthetic.Pod(7), observed)},
	} {
		m, err := enc.Encode(&d.delta)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, struct {
			name string
			msg  *wire.Message
		}{d.name, m})
	}
	return out
}

// BenchmarkEncode builds the NATS message of an event: subject, headers
// and body, in both content modes.
func BenchmarkEncode(b *testing.B) {
	for _, mode := range []CEMode{CEStructured, CEBinary} {
		for _, bm := range benchMessages(b) {
			b.Run(string(mode)+"/"+bm.name, func(b *testing.B) {
				cfg := defaults(b)
				cfg.CEMode = mode
				tmpl, err := wire.ParseSubjectTemplate(cfg.SubjectLayout(), cfg.SubjectPrefix)
				if err != nil {
					b.Fatal(err)
				}
				s := &Sink{cfg: &Parsed{Config: cfg}, tmpl: tmpl}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := s.encode(bm.msg); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkSubject builds the subject of a message with the default
// layout, for a name kept as it is and for one with dots to escape.
func BenchmarkSubject(b *testing.B) {
	tmpl, err := wire.ParseSubjectTemplate(wire.DefaultHistorySubject, "kube")
	if err != nil {
		b.Fatal(err)
	}
	for _, tt := range []struct{ name, objectName string }{
		{"plain", "web-7d9f8b6c5d-x2k4p"},
		{"dotted", "ip-10-0-1-5.ec2.internal"},
	} {
		b.Run(tt.name, func(b *testing.B) {
			m := message("team-a", 1, 1)
			m.Name = tt.objectName
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tmpl.Subject(m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEscapeToken escapes one subject token.
func BenchmarkEscapeToken(b *testing.B) {
	for _, tt := range []struct{ name, value string }{
		{"plain", "web-7d9f8b6c5d-x2k4p"},
		{"dotted", "ip-10-0-1-5.ec2.internal"},
		{"percent-encoded", "héllo wörld_1"},
	} {
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = wire.EscapeToken(tt.value)
			}
		})
	}
}

// BenchmarkPublishJetStream publishes batches of 256 updates of
// ConfigMaps of about 1 KiB, each of a different object, to the stream
// of an in-process server in the state layout, and waits for their acks:
// an op is a batch, and the server's work counts too. Each batch's events
// have new ids, so that the stream stores them instead of dropping them
// as repeats.
func BenchmarkPublishJetStream(b *testing.B) {
	for _, mode := range []CEMode{CEStructured, CEBinary} {
		b.Run(string(mode), func(b *testing.B) {
			srv := natstest.Start(b, natstest.Options{})
			s, err := New(b.Context(), parse(b, serverConfig(b, srv, map[string]string{"BRIDGE_NATS_CE_MODE": string(mode)})), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close(context.Background()) })
			const n = 256
			base := benchMessages(b)[0].msg
			msgs := make([]*wire.Message, n)
			for i := range msgs {
				m := *base
				m.Name = fmt.Sprintf("%s-%03d", base.Name, i)
				m.Subject = m.Namespace + "/" + m.Name
				msgs[i] = &m
			}
			batch := 0
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				batch++
				for i, m := range msgs {
					m.ID = fmt.Sprintf("%s-%d-%d", base.ID, batch, i)
				}
				b.StartTimer()
				if err := s.Publish(b.Context(), msgs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/msg")
		})
	}
}
