package source

import (
	"testing"
	"unsafe"

	"github.com/kubebus/bridge/resourceversion"
)

func TestIdentKeepsWhatItIsGiven(t *testing.T) {
	for _, c := range []struct {
		uid, rv string
		packed  bool
	}{
		{"0b5d2c6e-3f1a-4e8b-9c7d-112233445566", "12345", true},
		{"ffffffff-ffff-ffff-ffff-ffffffffffff", "1", true},
		{"ffffffff-ffff-ffff-ffff-ffffffffffff", "0", false}, // not comparable
		{"00000000-0000-0000-0000-000000000000", "18446744073709551615", true},
		{"0B5D2C6E-3F1A-4E8B-9C7D-112233445566", "12345", false}, // upper case
		{"0b5d2c6e3f1a4e8b9c7d112233445566", "12345", false},     // no dashes
		{"0b5d2c6e-3f1a-4e8b-9c7d-11223344556g", "1", false},
		{"0b5d2c6e-3f1a-4e8b-9c7d-112233445566", "", false},    // an intent
		{"0b5d2c6e-3f1a-4e8b-9c7d-112233445566", "012", false}, // leading zero
		{"0b5d2c6e-3f1a-4e8b-9c7d-112233445566", "+12", false}, // sign
		{"0b5d2c6e-3f1a-4e8b-9c7d-112233445566", "18446744073709551616", false},
		{"0b5d2c6e-3f1a-4e8b-9c7d-112233445566", "abc", false},
		{"", "7", false},
		{"00000000-0000-0000-0000--00000000000", "7", false}, // a fifth dash
		{"--000000-0000-0000-0000-000000000001", "7", false}, // dashes out of place
		{"0b5d2c6e-3f1a-4e8b-9c7d-1122334455-6", "7", false},
		{"u1", "7", false},
	} {
		i := newIdent(c.uid, c.rv)
		if got := i.odd == nil; got != c.packed {
			t.Errorf("newIdent(%q, %q) packed = %v, want %v", c.uid, c.rv, got, c.packed)
		}
		if i.UID() != c.uid || i.RV() != c.rv {
			t.Errorf("newIdent(%q, %q) gives back (%q, %q)", c.uid, c.rv, i.UID(), i.RV())
		}
		if !i.hasUID(c.uid) {
			t.Errorf("newIdent(%q, %q).hasUID(its uid) = false", c.uid, c.rv)
		}
		if i.hasUID(c.uid+"x") || (c.uid != "" && i.hasUID("")) {
			t.Errorf("newIdent(%q, %q).hasUID matches another uid", c.uid, c.rv)
		}
		if got, want := i.isIntent(), c.rv == ""; got != want {
			t.Errorf("newIdent(%q, %q).isIntent() = %v, want %v", c.uid, c.rv, got, want)
		}
	}
}

// TestIdentComparesAsItsStrings holds the packed comparisons to those of
// the strings: rv == known || resourceversion.Before(rv, known), and
// resourceversion.Before(rv, known).
func TestIdentComparesAsItsStrings(t *testing.T) {
	rvs := []string{"", "0", "1", "7", "07", "9", "10", "99", "100", "12345", "18446744073709551615", "18446744073709551616", "abc", "+5", "-1"}
	uids := []string{"0b5d2c6e-3f1a-4e8b-9c7d-112233445566", "u1"}
	for _, uid := range uids {
		for _, known := range rvs {
			i := newIdent(uid, known)
			for _, rv := range rvs {
				if got, want := i.notNewer(rv), rv == known || resourceversion.Before(rv, known); got != want {
					t.Errorf("known %q: notNewer(%q) = %v, want %v", known, rv, got, want)
				}
				if got, want := i.olderThan(rv), resourceversion.Before(rv, known); got != want {
					t.Errorf("known %q: olderThan(%q) = %v, want %v", known, rv, got, want)
				}
			}
		}
	}
}

// TestEntryIsSmall keeps the tracker's entry, one per object, from
// growing back: it packs the uid and resourceVersion and keeps the rest
// beside it.
func TestEntryIsSmall(t *testing.T) {
	if n := unsafe.Sizeof(entry{}); n > 40 {
		t.Errorf("an entry takes %d bytes, want at most 40", n)
	}
}

// TestTrackerTellsUIDsThatDifferOnlyInDashes: an object deleted and made
// again unseen under a uid of another form is two objects, as its string
// says.
func TestTrackerTellsUIDsThatDifferOnlyInDashes(t *testing.T) {
	const odd = "--000000-0000-0000-0000-000000000001"
	const other = "00000000-0000-0000-0000-000000000100"
	tr, got := newTestTracker(nil, false)
	tr.add(cm("a", odd, "5"))
	tr.add(cm("a", other, "5"))
	got.expect(t, "added ns/a "+odd+"@5", "deleted ns/a "+odd+"@5 snapshot", "added ns/a "+other+"@5 snapshot")
}
