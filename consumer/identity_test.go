package consumer

import (
	"testing"

	"github.com/kubebus/bridge/resourceversion"
)

// TestAPIRVOrdersAsTheBridge: the packed resourceVersion a ListerWatcher
// keeps per object orders states as package resourceversion, which the
// bridge dates them by, and keeps what it compares through a snapshot.
func TestAPIRVOrdersAsTheBridge(t *testing.T) {
	rvs := []string{"", "0", "07", "1", "7", "9", "10", "18446744073709551615", "18446744073709551616", "18446744073709551617", "100000000000000000000", "abc", "-1"}
	for _, a := range rvs {
		ra := parseRV(a)
		if want := a; !resourceversion.Comparable(a) {
			if ra.String() != "" {
				t.Errorf("parseRV(%q).String() = %q, want \"\" for a value that does not compare", a, ra.String())
			}
		} else if ra.String() != want {
			t.Errorf("parseRV(%q).String() = %q", a, ra.String())
		}
		if back := parseRV(ra.String()); back.String() != ra.String() {
			t.Errorf("parseRV(%q) does not survive its String", a)
		}
		for _, b := range rvs {
			got, ok := ra.compare(parseRV(b))
			want, err := resourceversion.Compare(a, b)
			if ok != (err == nil) || got != want {
				t.Errorf("compare(%q, %q) = %d, %v; resourceversion.Compare = %d, %v", a, b, got, ok, want, err)
			}
		}
	}
}

// Comparing what etcd gives, or an opaque resourceVersion, costs no
// allocation: it happens for every message.
func TestAPIRVCompareDoesNotAllocate(t *testing.T) {
	a, b, opaque := parseRV("41"), parseRV("42"), parseRV("a1")
	if n := testing.AllocsPerRun(100, func() {
		a.compare(b)
		a.compare(opaque)
		opaque.compare(b)
	}); n != 0 {
		t.Errorf("compare allocates %v times", n)
	}
}
