package natstest

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// A restart comes back on the same port with the stream and its messages.
func TestRestartKeepsPortAndFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"plain", Options{}},
		{"TLS", Options{TLS: true}},
		{"token", Options{Token: "s3cret"}},
		{"user", Options{User: "u", Password: "p"}},
		{"nkey", Options{NKey: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := Start(t, tc.opts)
			port := srv.Port()
			js := srv.JetStream(t)
			if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Storage: jetstream.FileStorage}); err != nil {
				t.Fatal(err)
			}
			if _, err := js.Publish(t.Context(), "s.1", []byte("x")); err != nil {
				t.Fatal(err)
			}
			srv.Restart()
			if srv.Port() != port {
				t.Fatalf("port %d after restart, was %d", srv.Port(), port)
			}
			st := Stream(t, srv.Conn(t), "S")
			if n := st.CachedInfo().State.Msgs; n != 1 {
				t.Fatalf("stream holds %d messages after restart, want 1", n)
			}
		})
	}
}
