package kafka

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// positionVersion starts every position, so that a later format can tell
// its own positions from these.
const positionVersion = "k1"

// idLen is how many hex digits of the topic ID a position keeps: 64 bits
// tell a recreated topic from the old one with no practical chance of a
// clash, and keep positions short.
const idLen = 16

// position is where a Log has read to: for every partition of the topic,
// the offset of the next record to read, and a time before which no
// record after these offsets was appended.
//
// Its text form, the resourceVersion an informer sees, is
//
//	k1.<topic ID, 16 hex digits>.<unix ms>.<offset of partition 0>.<offset of partition 1>...
type position struct {
	topicID string // idLen hex digits
	time    time.Time
	offsets []int64 // by partition
}

// topicIDPrefix is the part of a topic ID that positions keep.
func topicIDPrefix(id kadm.TopicID) string {
	return hex.EncodeToString(id[:])[:idLen]
}

// String is the position's text form.
func (p position) String() string {
	var b strings.Builder
	b.Grow(len(positionVersion) + idLen + 16 + 8*len(p.offsets))
	b.WriteString(positionVersion)
	b.WriteByte('.')
	b.WriteString(p.topicID)
	b.WriteByte('.')
	b.WriteString(strconv.FormatInt(p.time.UnixMilli(), 10))
	for _, o := range p.offsets {
		b.WriteByte('.')
		b.WriteString(strconv.FormatInt(o, 10))
	}
	return b.String()
}

// parsePosition reads a position's text form. Anything else is an error
// that says what is wrong with it.
func parsePosition(s string) (position, error) {
	parts := strings.Split(s, ".")
	if len(parts) < 4 || parts[0] != positionVersion {
		return position{}, fmt.Errorf("%.80q is not a kafka position (%s.<topic id>.<ms>.<offsets>)", s, positionVersion)
	}
	var p position
	if len(parts[1]) != idLen {
		return position{}, fmt.Errorf("position %.80q: topic id %q is not %d hex digits", s, parts[1], idLen)
	}
	if _, err := hex.DecodeString(parts[1]); err != nil {
		return position{}, fmt.Errorf("position %.80q: topic id %q is not %d hex digits", s, parts[1], idLen)
	}
	p.topicID = parts[1]
	ms, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil || ms < 0 {
		return position{}, fmt.Errorf("position %.80q: time %q is not unix milliseconds", s, parts[2])
	}
	p.time = time.UnixMilli(ms)
	p.offsets = make([]int64, len(parts)-3)
	for i, part := range parts[3:] {
		o, err := strconv.ParseInt(part, 10, 64)
		if err != nil || o < 0 {
			return position{}, fmt.Errorf("position %.80q: offset %q of partition %d is not an offset", s, part, i)
		}
		p.offsets[i] = o
	}
	return p, nil
}
