package nats

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// servers splits BRIDGE_NATS_URL into URLs. Its errors name an entry by
// position and show it only through redact, which hides a token given as
// the user name as well as a password.
func (c *Config) servers() ([]*url.URL, error) {
	var out []*url.URL
	var errs []error
	for i, s := range strings.Split(c.URL, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !strings.Contains(s, "://") {
			s = "nats://" + s // as nats.go reads a bare host:port
		}
		u, err := url.Parse(s)
		if err != nil {
			// url.Parse's error quotes the input, credentials and all.
			errs = append(errs, fmt.Errorf("entry %d is not a URL", i+1))
			continue
		}
		switch {
		case u.Scheme != "nats" && u.Scheme != "tls" && u.Scheme != "ws" && u.Scheme != "wss":
			errs = append(errs, fmt.Errorf("%s: scheme must be nats, tls, ws or wss", redact(u)))
		case u.Hostname() == "":
			errs = append(errs, fmt.Errorf("%s: no host", redact(u)))
		default:
			out = append(out, u)
		}
	}
	return out, errors.Join(errs...)
}

// serverList is BRIDGE_NATS_URL as nats.Connect takes it.
func (c *Parsed) serverList() string {
	parts := make([]string, len(c.servers))
	for i, u := range c.servers {
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}
