package nats

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/kubebus/bridge/test/logtest"
	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/wire"
)

// Against servers that require TLS with a client certificate, a token, an
// NKey, or a user and password, the sink connects and publishes with the right
// credentials and fails at start-up without them. No log line or error
// holds a secret.
func TestAuthentication(t *testing.T) {
	const password, token = "pa55-word-xyz", "tok-en-123456"
	for _, tc := range []struct {
		name string
		opts natstest.Options
		// wrong changes a working configuration so the server refuses it.
		wrong func(vars map[string]string)
		// inURL moves the credentials into BRIDGE_NATS_URL.
		inURL func(srv *natstest.Server, vars map[string]string)
	}{
		{
			name: "TLS with client certificate",
			opts: natstest.Options{TLS: true},
			wrong: func(v map[string]string) {
				delete(v, "BRIDGE_NATS_TLS_CERT_FILE")
				delete(v, "BRIDGE_NATS_TLS_KEY_FILE")
			},
		},
		{
			name:  "token",
			opts:  natstest.Options{Token: token},
			wrong: func(v map[string]string) { v["BRIDGE_NATS_TOKEN"] = "not-the-" + token },
			inURL: func(srv *natstest.Server, v map[string]string) {
				delete(v, "BRIDGE_NATS_TOKEN")
				v["BRIDGE_NATS_URL"] = strings.Replace(srv.URL(), "://", "://"+token+"@", 1)
			},
		},
		{
			name: "NKey",
			opts: natstest.Options{NKey: true},
			wrong: func(v map[string]string) {
				delete(v, "BRIDGE_NATS_NKEY_SEED_FILE")
			},
		},
		{
			name:  "user and password",
			opts:  natstest.Options{User: "bridge", Password: password},
			wrong: func(v map[string]string) { v["BRIDGE_NATS_PASSWORD"] = "not-the-" + password },
			inURL: func(srv *natstest.Server, v map[string]string) {
				delete(v, "BRIDGE_NATS_USER")
				delete(v, "BRIDGE_NATS_PASSWORD")
				v["BRIDGE_NATS_URL"] = strings.Replace(srv.URL(), "://", "://bridge:"+password+"@", 1)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := natstest.Start(t, tc.opts)
			var logs logtest.Buffer
			log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			noSecrets := func(what, text string) {
				t.Helper()
				for _, secret := range []string{password, token} {
					if strings.Contains(text, secret) {
						t.Errorf("%s holds a secret: %s", what, text)
					}
				}
			}
			publish := func(vars map[string]string) {
				t.Helper()
				s, err := New(t.Context(), parse(t, parseEnv(t, vars)), log)
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if err := s.Publish(t.Context(), []*wire.Message{message("auth", 0, 0)}); err != nil {
					t.Errorf("Publish: %v", err)
				}
				if err := s.Close(context.Background()); err != nil {
					t.Errorf("Close: %v", err)
				}
			}

			publish(srv.Env())

			if tc.inURL != nil {
				vars := srv.Env()
				tc.inURL(srv, vars)
				publish(vars)
			}

			vars := srv.Env()
			tc.wrong(vars)
			_, err := New(t.Context(), parse(t, parseEnv(t, vars)), log)
			if err == nil {
				t.Fatal("New with wrong credentials succeeded")
			}
			if !strings.HasPrefix(err.Error(), "nats sink: connect to ") {
				t.Errorf("error %q does not say the connection failed", err)
			}
			t.Logf("with wrong credentials: %v", err)
			noSecrets("error", err.Error())
			noSecrets("log", logs.String())
			if got := natstest.StreamState(t, srv.Conn(t), "KUBE").Msgs; got == 0 {
				t.Errorf("stream holds no message")
			}
		})
	}
}
