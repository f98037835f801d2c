package natskv

import (
	"errors"
	"regexp"
	"testing"
)

// What nats.go accepts as a key.
var validKey = regexp.MustCompile(`^[-/_=.a-zA-Z0-9]+$`)

func TestEscapeKey(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"configmaps", "configmaps"},
		{"deployments.apps", "deployments_apps"},
		{"team-a/web", "team-a/web"},
		{"ip-10-0-1-5.ec2.internal", "ip-10-0-1-5_ec2_internal"},
		{"a_b=c", "a=5Fb=3Dc"},
		{"é *>", "=C3=A9=20=2A=3E"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got := escapeKey(tc.in)
			if got != tc.want {
				t.Fatalf("escapeKey(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if !validKey.MatchString(objectKey(tc.in, tc.in)) {
				t.Errorf("objectKey %q is not a valid KV key", objectKey(tc.in, tc.in))
			}
			if back, err := unescapeKey(got); err != nil || back != tc.in {
				t.Errorf("unescapeKey(%q) = %q, %v", got, back, err)
			}
		})
	}
	for _, bad := range []string{"a.b", "=4", "=zz", "a b"} {
		if _, err := unescapeKey(bad); !errors.Is(err, errBadKey) {
			t.Errorf("unescapeKey(%q) = %v, want errBadKey", bad, err)
		}
	}
}
