package source

import (
	"encoding/hex"
	"strconv"

	"github.com/kubebus/bridge/resourceversion"
)

// ident is an object's uid and resourceVersion as the tracker keeps them,
// packed: a uid in the canonical form of a UUID (what the API server
// assigns) as its 16 bytes, and a resourceVersion that is comparable and
// fits in 64 bits (what etcd's revisions give) as a number
// (resourceversion.Uint64). Either one in any other form, and an intent's
// empty resourceVersion, keep both as given (odd). Packing keeps no string, and no allocation, per object: at a
// hundred thousand objects the strings would weigh more than the rest of
// what the tracker keeps.
type ident struct {
	uid [16]byte
	rv  uint64
	odd *oddIdent
}

// oddIdent is an identity that does not pack.
type oddIdent struct{ uid, rv string }

func newIdent(uid, rv string) ident {
	var i ident
	n, okRV := resourceversion.Uint64(rv)
	if okRV && packUID(uid, &i.uid) {
		i.rv = n
		return i
	}
	return ident{odd: &oddIdent{uid: uid, rv: rv}}
}

// UID returns the uid as given.
func (i ident) UID() string {
	if i.odd != nil {
		return i.odd.uid
	}
	var b [36]byte
	hex.Encode(b[0:8], i.uid[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], i.uid[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], i.uid[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], i.uid[8:10])
	b[23] = '-'
	hex.Encode(b[24:36], i.uid[10:16])
	return string(b[:])
}

// RV returns the resourceVersion as given.
func (i ident) RV() string {
	if i.odd != nil {
		return i.odd.rv
	}
	return strconv.FormatUint(i.rv, 10)
}

// hasUID reports whether uid is the object's.
func (i ident) hasUID(uid string) bool {
	if i.odd != nil {
		return i.odd.uid == uid
	}
	var b [16]byte
	return packUID(uid, &b) && b == i.uid
}

// same reports whether i and j are the same uid and resourceVersion.
func (i ident) same(j ident) bool {
	if i.odd == nil && j.odd == nil {
		return i.uid == j.uid && i.rv == j.rv
	}
	return i.UID() == j.UID() && i.RV() == j.RV()
}

// notNewer reports whether rv is the known resourceVersion or an older one
// (rv == RV() || resourceversion.Before(rv, RV())), without making a string of it.
func (i ident) notNewer(rv string) bool {
	if i.odd != nil {
		return rv == i.odd.rv || resourceversion.Before(rv, i.odd.rv)
	}
	if i.olderThan(rv) {
		return true
	}
	n, ok := resourceversion.Uint64(rv)
	return ok && n == i.rv
}

// olderThan reports whether rv is older than the known resourceVersion
// (resourceversion.Before(rv, RV())). A packed one fits in 64 bits, so a
// comparable rv that does not is newer.
func (i ident) olderThan(rv string) bool {
	if i.odd != nil {
		return resourceversion.Before(rv, i.odd.rv)
	}
	n, ok := resourceversion.Uint64(rv)
	return ok && n < i.rv
}

// isIntent reports whether the identity is an intent's
// (checkpoint.Position.IsIntent): it has no resourceVersion.
func (i ident) isIntent() bool { return i.odd != nil && i.odd.rv == "" }

// packUID parses a UUID in its canonical form (36 characters, lower-case
// hex in groups of 8-4-4-4-12) into b. What it accepts formats back to
// itself.
func packUID(uid string, b *[16]byte) bool {
	if len(uid) != 36 || uid[8] != '-' || uid[13] != '-' || uid[18] != '-' || uid[23] != '-' {
		return false
	}
	for j, i := range uuidHexAt {
		hi, ok1 := lowerHex(uid[i])
		lo, ok2 := lowerHex(uid[i+1])
		if !ok1 || !ok2 {
			return false
		}
		b[j] = hi<<4 | lo
	}
	return true
}

// uuidHexAt are the offsets of a UUID's 16 bytes in its canonical form.
var uuidHexAt = [16]int{0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34}

func lowerHex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}
