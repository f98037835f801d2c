package nats

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
)

// redactedURL is BRIDGE_NATS_URL for logs: each server with any password
// or token replaced.
func (c *Config) redactedURL() string {
	servers, _ := c.servers()
	parts := make([]string, len(servers))
	for i, u := range servers {
		parts[i] = redact(u)
	}
	return strings.Join(parts, ",")
}

// redact shows u without its credentials. url.URL.Redacted hides only a
// password, but nats://TOKEN@host carries a token as the user name.
func redact(u *url.URL) string {
	if u.User == nil {
		return u.String()
	}
	c := *u
	c.User = url.User("REDACTED")
	return c.String()
}

// secrets lists every credential in the configuration, so that errors
// from the client library can be scrubbed of them.
func (c *Parsed) secrets() []string {
	out := []string{string(c.Password), string(c.Token)}
	for _, u := range c.servers {
		if u.User == nil {
			continue
		}
		if p, ok := u.User.Password(); ok {
			out = append(out, p)
		} else {
			out = append(out, u.User.Username()) // nats://TOKEN@host
		}
	}
	return out
}

// scrub returns err with every secret in its message replaced, so that it
// can be logged or returned; errors.Is and errors.As still see err.
func scrub(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := msg
	for _, s := range secrets {
		if s != "" {
			clean = strings.ReplaceAll(clean, s, "REDACTED")
		}
	}
	if clean == msg {
		return err
	}
	return &scrubbed{msg: clean, err: err}
}

type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }

// String shows the configuration with its URL credentials redacted (the
// password and token are Secrets, which redact themselves), so that
// printing it, even as part of a larger struct, cannot leak them.
func (c Config) String() string {
	shown := c
	shown.URL = c.redactedURL()
	type plain Config // without these methods
	return fmt.Sprintf("%+v", plain(shown))
}

// GoString keeps %#v from showing the URL's credentials.
func (c Config) GoString() string { return c.String() }

// MarshalJSON keeps encoders, slog's JSON handler among them, from showing
// the URL's credentials.
func (c Config) MarshalJSON() ([]byte, error) {
	shown := c
	shown.URL = c.redactedURL()
	type plain Config // without these methods
	return json.Marshal(plain(shown))
}

// LogValue keeps slog from showing the URL's credentials.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }
