package nats

import (
	"fmt"
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
func (c *Config) secrets() []string {
	out := []string{c.Password, c.Token}
	servers, _ := c.servers()
	for _, u := range servers {
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

// String shows the configuration with its password, token and URL
// credentials redacted, so that printing it, even as part of a larger
// struct, cannot leak them.
func (c Config) String() string {
	shown := c
	shown.URL = c.redactedURL()
	if shown.Password != "" {
		shown.Password = "REDACTED"
	}
	if shown.Token != "" {
		shown.Token = "REDACTED"
	}
	type plain Config // without this method
	return fmt.Sprintf("%+v", plain(shown))
}
