package natskv

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kubebus/bridge/test/natstest"
)

// A bucket that is a mirror of another, or takes its messages from others,
// is refused at Open, naming it: the bridge writes its checkpoint, and
// writes to a mirror fail, while a purge of the bucket matches nothing
// that came from its sources.
func TestOpenRefusesReplicatedBucket(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	nc := srv.Conn(t)
	js := natstest.JetStreamOn(t, nc)
	if _, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "origin"}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		cfg  jetstream.KeyValueConfig
		want string
	}{
		{"mirror", jetstream.KeyValueConfig{Bucket: "mirrored", Mirror: &jetstream.StreamSource{Name: "origin"}}, "mirror"},
		{"sources", jetstream.KeyValueConfig{Bucket: "sourced", Sources: []*jetstream.StreamSource{{Name: "origin"}}}, "source"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := js.CreateKeyValue(t.Context(), tt.cfg); err != nil {
				t.Fatal(err)
			}
			s, err := Open(t.Context(), nc, tt.cfg.Bucket, Options{}, testLogger(t))
			if err == nil {
				_ = s.Close()
				t.Fatalf("Open of bucket %s (%s) succeeded, want an error naming it", tt.cfg.Bucket, tt.name)
			}
			if !strings.Contains(err.Error(), tt.cfg.Bucket) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open: %v; want an error naming bucket %s and saying it has a %s", err, tt.cfg.Bucket, tt.want)
			}
		})
	}
}
