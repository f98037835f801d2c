package nats

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kubebus/bridge/consumer"
	"github.com/kubebus/bridge/wire"
)

func TestPositionRoundTrip(t *testing.T) {
	p := position{log: logID("KUBE", "kube.prod.core.configmaps.*.*"), created: 1795448492852757038, seq: 42, ms: 1795448492857}
	s := p.String()
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			t.Fatalf("position %q holds byte %q", s, s[i])
		}
	}
	got, err := parsePosition(s)
	if err != nil || got != p {
		t.Fatalf("parsePosition(%q) = %+v, %v; want %+v", s, got, err, p)
	}
	if _, err := parsePosition(strings.Repeat("x", 1000)); !errors.Is(err, consumer.ErrExpired) || len(err.Error()) > 300 {
		t.Errorf("long garbage: %v", err)
	}
}

func TestGrace(t *testing.T) {
	info := func(ttl bool, maxAge time.Duration, meta string) *jetstream.StreamInfo {
		cfg := jetstream.StreamConfig{Name: "KUBE", AllowMsgTTL: ttl, MaxAge: maxAge}
		if meta != "" {
			cfg.Metadata = map[string]string{wire.MetadataDeleteTTL: meta}
		}
		return &jetstream.StreamInfo{Config: cfg}
	}
	for _, tc := range []struct {
		name    string
		info    *jetstream.StreamInfo
		want    time.Duration
		wantErr string
	}{
		{"state layout", info(true, 0, "24h0m0s"), 24 * time.Hour, ""},
		{"history layout", info(false, 7*24*time.Hour, ""), 7 * 24 * time.Hour, ""},
		{"max age shorter than the delete ttl", info(true, time.Hour, "24h"), time.Hour, ""},
		{"no limit", info(false, 0, ""), 0, ""},
		{"ttl without metadata", info(true, 0, ""), 0, "has no kubebus.io/delete-ttl metadata"},
		{"bad metadata", info(true, 0, "a day"), 0, "not a positive Go duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := grace(tc.info)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("grace: %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("grace = %s, %v; want %s", got, err, tc.want)
			}
		})
	}
}
