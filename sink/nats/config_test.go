package nats

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubebus/bridge/envvar"
	"github.com/kubebus/bridge/wire"
)

func TestDefaultsAreValid(t *testing.T) {
	c := defaults(t)
	if _, err := c.Parse(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if !c.CreateStream || c.Mode != ModeJetStream || c.CEMode != CEStructured || c.Layout != LayoutState ||
		c.SubjectLayout() != wire.DefaultStateSubject || c.DeleteTTL != 24*time.Hour {
		t.Errorf("defaults: %+v", c)
	}
	if c.StreamMaxAge != defaultStreamMaxAge {
		t.Errorf("default max age %s, defaultStreamMaxAge %s", c.StreamMaxAge, defaultStreamMaxAge)
	}
	if h := parseEnv(t, map[string]string{"BRIDGE_NATS_LAYOUT": "history"}); h.SubjectLayout() != wire.DefaultHistorySubject {
		t.Errorf("history layout's default subject %q, want %q", h.SubjectLayout(), wire.DefaultHistorySubject)
	}
	// Core mode stores nothing, so the layout does not apply: its subjects
	// stay what they were before layouts existed.
	if c := parseEnv(t, map[string]string{"BRIDGE_NATS_MODE": "core"}); c.SubjectLayout() != wire.DefaultHistorySubject {
		t.Errorf("core mode's default subject %q, want %q", c.SubjectLayout(), wire.DefaultHistorySubject)
	}
	// The window must outlast the default 1s checkpoint interval plus a
	// restart of the bridge by a wide margin.
	if c.DuplicateWindow < 5*time.Minute {
		t.Errorf("default duplicate window %s is too short", c.DuplicateWindow)
	}
}

// Parse reports every problem, each an *envvar.Error that names its
// variable.
func TestParseNamesTheVariables(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f.pem")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		vars map[string]string
		want []string // variables at fault, in order
	}{
		{"no URL", map[string]string{"BRIDGE_NATS_URL": " , "}, []string{"BRIDGE_NATS_URL"}},
		{"bad scheme", map[string]string{"BRIDGE_NATS_URL": "http://h:1"}, []string{"BRIDGE_NATS_URL"}},
		{"several servers", map[string]string{"BRIDGE_NATS_URL": "nats://a:4222, tls://b:4222,c:4222"}, nil},
		{"user without password", map[string]string{"BRIDGE_NATS_USER": "u"}, []string{"BRIDGE_NATS_PASSWORD"}},
		{"password without user", map[string]string{"BRIDGE_NATS_PASSWORD": "p4ss"}, []string{"BRIDGE_NATS_USER"}},
		{"two ways to authenticate", map[string]string{"BRIDGE_NATS_USER": "u", "BRIDGE_NATS_PASSWORD": "p4ss", "BRIDGE_NATS_TOKEN": "t0ken"}, []string{"BRIDGE_NATS_TOKEN"}},
		{"missing files", map[string]string{"BRIDGE_NATS_CREDS_FILE": filepath.Join(dir, "none.creds"), "BRIDGE_NATS_TLS_CA_FILE": dir}, []string{"BRIDGE_NATS_CREDS_FILE", "BRIDGE_NATS_TLS_CA_FILE"}},
		{"NKey seed file without a seed", map[string]string{"BRIDGE_NATS_NKEY_SEED_FILE": file}, []string{"BRIDGE_NATS_NKEY_SEED_FILE"}},
		{"certificate without key", map[string]string{"BRIDGE_NATS_TLS_CERT_FILE": file}, []string{"BRIDGE_NATS_TLS_KEY_FILE"}},
		{"TLS files that are not PEM", map[string]string{"BRIDGE_NATS_TLS_CA_FILE": file, "BRIDGE_NATS_TLS_CERT_FILE": file, "BRIDGE_NATS_TLS_KEY_FILE": file},
			[]string{"BRIDGE_NATS_TLS_CA_FILE", "BRIDGE_NATS_TLS_CERT_FILE"}},
		{"mode", map[string]string{"BRIDGE_NATS_MODE": "streaming"}, []string{"BRIDGE_NATS_MODE"}},
		{"core mode", map[string]string{"BRIDGE_NATS_MODE": "core"}, nil},
		// Core NATS stores nothing: the state layout's subject rule does not apply.
		{"core mode with an action subject", map[string]string{"BRIDGE_NATS_MODE": "core", "BRIDGE_NATS_SUBJECT": "{prefix}.{cluster}.{action}.{resource}.{name}"}, nil},
		{"prefix", map[string]string{"BRIDGE_NATS_SUBJECT_PREFIX": "a.>"}, []string{"BRIDGE_NATS_SUBJECT_PREFIX"}},
		{"subject", map[string]string{"BRIDGE_NATS_SUBJECT": "{prefix}.{nope}"}, []string{"BRIDGE_NATS_SUBJECT"}},
		{"prefix too long for the subjects", map[string]string{"BRIDGE_NATS_SUBJECT_PREFIX": strings.Repeat("p", 1600), "BRIDGE_NATS_LAYOUT": "history"}, []string{"BRIDGE_NATS_SUBJECT"}},
		{"prefix too long for the state subjects", map[string]string{"BRIDGE_NATS_SUBJECT_PREFIX": strings.Repeat("p", 1800)}, []string{"BRIDGE_NATS_SUBJECT"}},
		{"layout", map[string]string{"BRIDGE_NATS_LAYOUT": "both"}, []string{"BRIDGE_NATS_LAYOUT"}},
		{"history layout", map[string]string{"BRIDGE_NATS_LAYOUT": "history"}, nil},
		{"delete TTL below a second", map[string]string{"BRIDGE_NATS_DELETE_TTL": "500ms"}, []string{"BRIDGE_NATS_DELETE_TTL"}},
		{"delete TTL not whole seconds", map[string]string{"BRIDGE_NATS_DELETE_TTL": "1.5s"}, []string{"BRIDGE_NATS_DELETE_TTL"}},
		{"shortest delete TTL", map[string]string{"BRIDGE_NATS_DELETE_TTL": "1s"}, nil},
		{"delete TTL unused in the history layout", map[string]string{"BRIDGE_NATS_DELETE_TTL": "0s", "BRIDGE_NATS_LAYOUT": "history"}, nil},
		{"max age unused in the state layout", map[string]string{"BRIDGE_NATS_STREAM_MAX_AGE": "1s"}, nil},
		{"content mode", map[string]string{"BRIDGE_NATS_CE_MODE": "batch"}, []string{"BRIDGE_NATS_CE_MODE"}},
		{"stream name", map[string]string{"BRIDGE_NATS_STREAM": "a.b"}, []string{"BRIDGE_NATS_STREAM"}},
		{"replicas", map[string]string{"BRIDGE_NATS_STREAM_REPLICAS": "7"}, []string{"BRIDGE_NATS_STREAM_REPLICAS"}},
		{"window above max age", map[string]string{"BRIDGE_NATS_STREAM_MAX_AGE": "1m", "BRIDGE_NATS_LAYOUT": "history"}, []string{"BRIDGE_NATS_DUPLICATE_WINDOW"}},
		{"unlimited age", map[string]string{"BRIDGE_NATS_STREAM_MAX_AGE": "0s"}, nil},
		{"durations and counts", map[string]string{
			"BRIDGE_NATS_RECONNECT_MAX_WAIT": "0s", "BRIDGE_NATS_STREAM_MAX_AGE": "-1s", "BRIDGE_NATS_DUPLICATE_WINDOW": "0s",
			"BRIDGE_NATS_MAX_IN_FLIGHT": "0", "BRIDGE_NATS_ACK_TIMEOUT": "0s",
		}, []string{"BRIDGE_NATS_RECONNECT_MAX_WAIT", "BRIDGE_NATS_STREAM_MAX_AGE", "BRIDGE_NATS_DUPLICATE_WINDOW", "BRIDGE_NATS_MAX_IN_FLIGHT", "BRIDGE_NATS_ACK_TIMEOUT"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := parseEnv(t, tc.vars)
			set, err := c.Parse()
			if (set == nil) == (err == nil) {
				t.Fatalf("Parse = %v, %v: want settings or an error", set, err)
			}
			var got []string
			for _, e := range envvar.Split(err) {
				var ve *envvar.Error
				if !errors.As(e, &ve) || !strings.HasPrefix(e.Error(), ve.Var+": ") {
					t.Errorf("error %q is not an *envvar.Error that starts with its variable", e)
					continue
				}
				got = append(got, ve.Var)
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("variables at fault: %v, want %v (err: %v)", got, tc.want, err)
			}
		})
	}
}

// No message of Validate quotes a secret, whatever else is wrong.
func TestValidateHidesSecrets(t *testing.T) {
	const password, token = "s3cret-pass", "t0ken-value"
	c := parseEnv(t, map[string]string{
		"BRIDGE_NATS_URL": "nats://alice:" + password + "@h:4222,ftp://bob:" + password + "@h,nats://" + token + "@h:4222,nats://x:%zz@h," +
			"https://" + token + "@h:4222,nats://" + token + "@:4222", // a token as the user of a URL that is refused
		"BRIDGE_NATS_PASSWORD": password,
		"BRIDGE_NATS_TOKEN":    token,
	})
	_, err := c.Parse()
	if err == nil {
		t.Fatal("Parse passed")
	}
	if msg := err.Error(); strings.Contains(msg, password) || strings.Contains(msg, token) {
		t.Fatalf("Parse's message holds a secret: %s", msg)
	}
	if got := c.redactedURL(); strings.Contains(got, password) || strings.Contains(got, token) || !strings.Contains(got, "h:4222") {
		t.Errorf("redactedURL = %q", got)
	}
}

func TestScrub(t *testing.T) {
	base := errors.New("auth failed for s3cret")
	err := scrub(base, []string{"", "s3cret"})
	if err.Error() != "auth failed for REDACTED" || !errors.Is(err, base) {
		t.Fatalf("scrub = %q (is base: %v)", err, errors.Is(err, base))
	}
	if scrub(base, []string{"other"}) != base {
		t.Error("scrub changed an error without secrets")
	}
}

func TestReconnectDelay(t *testing.T) {
	d := &reconnectDelay{max: 2 * time.Second}
	var prev time.Duration
	for attempt := 1; attempt <= 20; attempt++ {
		got := d.next(attempt)
		if got <= 0 || got > d.max {
			t.Fatalf("attempt %d: wait %s, want in (0, %s]", attempt, got, d.max)
		}
		if attempt == 20 && got < d.max/4 {
			t.Errorf("attempt 20: wait %s, want near the cap %s", got, d.max)
		}
		prev = got
	}
	// A new outage starts from the initial wait again.
	if got := d.next(1); got > reconnectInitialWait*3/2 {
		t.Errorf("first wait of a new outage: %s, after %s", got, prev)
	}
}

// Printing or logging the configuration or its parsed settings, alone or
// inside another struct, hides its secrets: the password, the token and
// those in URLs.
func TestConfigStringHidesSecrets(t *testing.T) {
	c := parseEnv(t, map[string]string{
		"BRIDGE_NATS_URL":      "nats://u:url-pa55@h:4222,nats://url-t0ken@h2:4222",
		"BRIDGE_NATS_PASSWORD": "pa55word",
		"BRIDGE_NATS_TOKEN":    "t0ken",
	})
	if c.Password != "pa55word" || c.Token != "t0ken" {
		t.Fatalf("secrets not read: %q, %q", string(c.Password), string(c.Token))
	}
	set := &Parsed{Config: c}
	outer := struct{ NATS Config }{c}
	var logged strings.Builder
	for _, h := range []slog.Handler{slog.NewJSONHandler(&logged, nil), slog.NewTextHandler(&logged, nil)} {
		slog.New(h).Info("config", "config", c, "settings", set, "password", c.Password, "token", c.Token)
	}
	js, err := json.Marshal(struct{ P, T envvar.Secret }{c.Password, c.Token})
	if err != nil {
		t.Fatal(err)
	}
	cj, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]string{
		"json": string(cj), "String": c.String(), "%v": fmt.Sprintf("%v", c), "%+v outer": fmt.Sprintf("%+v", outer), "%#v": fmt.Sprintf("%#v", c),
		"settings %v": fmt.Sprintf("%v", set), "settings %+v": fmt.Sprintf("%+v", set), "slog": logged.String(),
	} {
		if containsAny(s, "url-pa55", "url-t0ken", "pa55word", "t0ken@", "t0ken ", `t0ken"`) || !strings.Contains(s, "h2:4222") {
			t.Errorf("%s printed: %s", name, s)
		}
	}
	if s := string(js); containsAny(s, "pa55word", "t0ken") || !strings.Contains(s, envvar.Redacted) {
		t.Errorf("JSON: %s", s)
	}
}

func containsAny(s string, parts ...string) bool {
	for _, p := range parts {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// In the state layout the subject must name exactly one object for its
// whole life; the error names BRIDGE_NATS_SUBJECT and says why. The same
// subjects serve the history layout.
func TestStateLayoutSubject(t *testing.T) {
	for _, tc := range []struct {
		subject string
		want    []string // in the error; none: valid
	}{
		{wire.DefaultStateSubject, nil},
		{"{prefix}.{group}.{resource}.{namespace}.{name}", nil},
		{"{prefix}.{cluster}.{kind}.{group}.{resource}.x.{namespace}.{name}", nil},
		{wire.DefaultHistorySubject, []string{"must not hold {version}"}},
		{"{prefix}.{cluster}.{group}.{resource}.{action}.{namespace}.{name}", []string{"must not hold {action}"}},
		{"{prefix}.{cluster}.{group}.{resource}.{name}", []string{"must hold {namespace} to name exactly one object"}},
		{"{prefix}.{cluster}.{group}.{resource}.{namespace}", []string{"must hold {name} to name exactly one object"}},
		{"{prefix}.{cluster}.{kind}.{namespace}.{name}", []string{"must hold {group}, {resource} to name"}},
		{"{prefix}.{version}.{action}.{name}", []string{"must not hold {action} and must not hold {version}", "{group}, {resource}, {namespace}"}},
	} {
		t.Run(tc.subject, func(t *testing.T) {
			c := parseEnv(t, map[string]string{"BRIDGE_NATS_SUBJECT": tc.subject})
			_, err := c.Parse()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !containsAll(err.Error(), append(tc.want, "BRIDGE_NATS_SUBJECT: ", "cannot serve BRIDGE_NATS_LAYOUT=state", "BRIDGE_NATS_LAYOUT=history")...) {
				t.Fatalf("Validate: %v, want %q", err, tc.want)
			}
			h := parseEnv(t, map[string]string{"BRIDGE_NATS_SUBJECT": tc.subject, "BRIDGE_NATS_LAYOUT": "history"})
			if _, err := h.Parse(); err != nil {
				t.Errorf("history layout: %v", err)
			}
		})
	}
}
