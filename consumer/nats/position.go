package nats

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/kubebus/bridge/consumer"
)

// positionVersion starts every position, so that the format can change.
const positionVersion = "n1"

// position is where a Log has read up to, written as
// "n1.<log>.<created>.<seq>.<time>":
//
//   - log: a hash of the stream's name and the Log's subject filter, so
//     that a position of another Log is refused rather than followed with
//     the wrong filter;
//   - created: when the stream was created (Unix nanoseconds), so that a
//     recreated stream, whose sequences start again, is told apart;
//   - seq: the stream sequence of the last message read; a Follow starts
//     at seq+1;
//   - time: a time of the server (Unix milliseconds) at which every
//     message of the filter stored before it, up to seq, had been read. A
//     message after seq was stored after that time, so it cannot expire
//     before time plus its TTL: a Follow from the position misses nothing
//     while the server's clock is short of time plus the delete grace.
type position struct {
	log     string
	created int64
	seq     uint64
	ms      int64
}

// logID is the "log" part of the positions of a Log.
func logID(stream, filter string) string {
	h := fnv.New32a()
	h.Write([]byte(stream))
	h.Write([]byte{0})
	h.Write([]byte(filter))
	return fmt.Sprintf("%08x", h.Sum32())
}

func (p position) String() string {
	return positionVersion + "." + p.log + "." + strconv.FormatInt(p.created, 10) + "." +
		strconv.FormatUint(p.seq, 10) + "." + strconv.FormatInt(p.ms, 10)
}

// withTime returns p at the later of its time and t.
func (p position) withTime(t time.Time) position {
	if ms := t.UnixMilli(); ms > p.ms {
		p.ms = ms
	}
	return p
}

// parsePosition reads a position written by position.String. Anything
// else is an error wrapping consumer.ErrExpired: the reflector then lists
// again, as an API server's client does for a resourceVersion it cannot
// serve.
func parsePosition(s string) (position, error) {
	bad := func(why string) (position, error) {
		return position{}, fmt.Errorf("nats consumer: position %q: %s: %w", shorten(s), why, consumer.ErrExpired)
	}
	parts := strings.Split(s, ".")
	if len(parts) != 5 || parts[0] != positionVersion {
		return bad("not a position of a NATS stream (" + positionVersion + ".<log>.<created>.<seq>.<time>)")
	}
	var p position
	var err error
	p.log = parts[1]
	if len(p.log) != 8 {
		return bad("bad log hash")
	}
	if p.created, err = strconv.ParseInt(parts[2], 10, 64); err != nil || p.created <= 0 {
		return bad("bad stream creation time")
	}
	if p.seq, err = strconv.ParseUint(parts[3], 10, 64); err != nil {
		return bad("bad sequence")
	}
	if p.ms, err = strconv.ParseInt(parts[4], 10, 64); err != nil || p.ms <= 0 {
		return bad("bad time")
	}
	return p, nil
}

// shorten keeps error messages short whatever a caller passes.
func shorten(s string) string {
	const most = 64
	if len(s) <= most {
		return s
	}
	return s[:most] + "..."
}
