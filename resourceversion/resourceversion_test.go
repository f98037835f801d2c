package resourceversion

import (
	"cmp"
	"errors"
	"strconv"
	"testing"

	k8srv "k8s.io/apimachinery/pkg/util/resourceversion"
)

// cases covers the rule: numbers of every length, and each way a value
// can fail to be one.
var cases = []struct {
	name string
	a, b string
	want int  // when ok
	ok   bool // both comparable
}{
	{"equal", "42", "42", 0, true},
	{"less", "9", "10", -1, true},
	{"greater", "10", "9", 1, true},
	{"same length", "123", "124", -1, true},
	{"one", "1", "1", 0, true},
	{"largest uint64", "18446744073709551614", "18446744073709551615", -1, true},
	{"beyond uint64", "18446744073709551615", "18446744073709551616", -1, true},
	{"far beyond uint64", "99999999999999999999999999999999999999", "100000000000000000000000000000000000000", -1, true},
	{"beyond uint64 is greater", "100000000000000000000", "5", 1, true},
	{"empty", "", "5", 0, false},
	{"both empty", "", "", 0, false},
	{"zero", "0", "5", 0, false},
	{"both zero", "0", "0", 0, false},
	{"leading zero", "009", "10", 0, false},
	{"leading zero, same number", "07", "7", 0, false},
	{"sign", "+5", "6", 0, false},
	{"negative", "-1", "5", 0, false},
	{"letters", "abc", "5", 0, false},
	{"opaque second", "5", "abc", 0, false},
	{"both opaque, equal text", "abc", "abc", 0, false},
	{"space", " 5", "5", 0, false},
	{"hex", "0x10", "5", 0, false},
	{"non-ASCII digit", "٣", "5", 0, false},
}

func TestCompare(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Compare(c.a, c.b)
			switch {
			case c.ok && err != nil:
				t.Fatalf("Compare(%q, %q) = %v", c.a, c.b, err)
			case !c.ok && !errors.Is(err, ErrOpaque):
				t.Fatalf("Compare(%q, %q) = %d, %v; want an error wrapping ErrOpaque", c.a, c.b, got, err)
			case c.ok && got != c.want:
				t.Errorf("Compare(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
			}
			if c.ok {
				if back, _ := Compare(c.b, c.a); back != -c.want {
					t.Errorf("Compare(%q, %q) = %d, want %d", c.b, c.a, back, -c.want)
				}
			}
			if got, want := Before(c.a, c.b), c.ok && c.want < 0; got != want {
				t.Errorf("Before(%q, %q) = %v, want %v", c.a, c.b, got, want)
			}
			if got, want := Before(c.b, c.a), c.ok && c.want > 0; got != want {
				t.Errorf("Before(%q, %q) = %v, want %v", c.b, c.a, got, want)
			}
		})
	}
}

// TestSameRuleAsKubernetes holds the rule to the one Kubernetes clients
// compare resourceVersions by, case for case.
func TestSameRuleAsKubernetes(t *testing.T) {
	for _, c := range cases {
		got, err := Compare(c.a, c.b)
		want, kerr := k8srv.CompareResourceVersion(c.a, c.b)
		if (err == nil) != (kerr == nil) || got != want {
			t.Errorf("Compare(%q, %q) = %d, %v; Kubernetes says %d, %v", c.a, c.b, got, err, want, kerr)
		}
	}
}

// TestUint64OrdersAsCompare: a packed resourceVersion orders as its text
// does, and is given only for comparable text.
func TestUint64OrdersAsCompare(t *testing.T) {
	for _, c := range cases {
		for _, rv := range []string{c.a, c.b} {
			n, ok := Uint64(rv)
			_, err := strconv.ParseUint(rv, 10, 64)
			if want := Comparable(rv) && err == nil; ok != want {
				t.Errorf("Uint64(%q) ok = %v, want %v", rv, ok, want)
			}
			if ok && (n == 0 || strconv.FormatUint(n, 10) != rv) {
				t.Errorf("Uint64(%q) = %d", rv, n)
			}
		}
		x, okA := Uint64(c.a)
		y, okB := Uint64(c.b)
		if !okA || !okB {
			continue
		}
		want, _ := Compare(c.a, c.b)
		if got := cmp.Compare(x, y); got != want {
			t.Errorf("%q, %q: packed order %d, Compare %d", c.a, c.b, got, want)
		}
	}
}

// BenchmarkBefore is the cost of one comparison of two etcd revisions, as
// the bridge makes several per delta.
func BenchmarkBefore(b *testing.B) {
	for b.Loop() {
		Before("918273645", "918273646")
	}
}
