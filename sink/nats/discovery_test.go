package nats

import (
	"testing"
	"time"

	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/test/natstest"
)

var _ sink.DiscoveryRefresher = (*Sink)(nil)

// The history layout's stream expires a document that does not change
// with its maximum age: the bridge writes it again at half that age. The
// state layout keeps it for good.
func TestDiscoveryRefresh(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	for _, tc := range []struct {
		name string
		vars map[string]string
		want time.Duration
	}{
		{"history", map[string]string{"BRIDGE_NATS_LAYOUT": "history", "BRIDGE_NATS_STREAM": "HIST", "BRIDGE_NATS_SUBJECT_PREFIX": "hist", "BRIDGE_NATS_STREAM_MAX_AGE": "2h"}, time.Hour},
		{"history forever", map[string]string{"BRIDGE_NATS_LAYOUT": "history", "BRIDGE_NATS_STREAM": "FOREVER", "BRIDGE_NATS_SUBJECT_PREFIX": "forever", "BRIDGE_NATS_STREAM_MAX_AGE": "0"}, 0},
		{"state", map[string]string{"BRIDGE_NATS_STREAM": "STATE", "BRIDGE_NATS_SUBJECT_PREFIX": "state"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSink(t, serverConfig(t, srv, tc.vars))
			if got := any(s).(sink.DiscoveryRefresher).DiscoveryRefresh(); got != tc.want {
				t.Errorf("DiscoveryRefresh = %s, want %s", got, tc.want)
			}
		})
	}
}
