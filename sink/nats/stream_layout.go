package nats

import (
	"errors"
	"fmt"
	"time"

	"github.com/kubebus/bridge/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// checkLayout reports, joined, every way the configuration of an existing
// stream sc keeps it from serving the layout of c. Each error names the
// stream's setting and the bridge's variable it contradicts.
func checkLayout(c Config, sc jetstream.StreamConfig) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if sc.Mirror != nil {
		bad("it mirrors stream %s and takes no publishes", sc.Mirror.Name)
	}
	if sc.Sealed {
		bad("it is sealed and takes no publishes")
	}
	if l, ok := sc.Metadata[wire.MetadataLayout]; ok && Layout(l) != c.Layout {
		bad("its metadata %s is %q", wire.MetadataLayout, l)
	}
	if c.Layout == LayoutHistory {
		if sc.MaxMsgsPerSubject == 1 {
			bad("it keeps one message per subject (max messages per subject 1, the state layout), so it would keep only each object's latest change: set BRIDGE_NATS_LAYOUT=state, or name a new stream with BRIDGE_NATS_STREAM")
		}
		return errors.Join(errs...)
	}

	if sc.MaxMsgsPerSubject != 1 {
		bad("it keeps %s per subject, the state layout 1 (its latest state): set BRIDGE_NATS_LAYOUT=history to go on publishing to it as before, or name a new stream with BRIDGE_NATS_STREAM (docs/nats.md, \"Upgrading\")",
			limit(sc.MaxMsgsPerSubject, "messages"))
	}
	if sc.MaxAge != 0 {
		bad("its max age is %s, so the state of an object that does not change would expire; the state layout has no age limit (BRIDGE_NATS_STREAM_MAX_AGE is for the history layout)", sc.MaxAge)
	}
	if !sc.AllowMsgTTL {
		bad("it does not allow per-message TTLs, which deletes carry in the state layout (BRIDGE_NATS_DELETE_TTL)")
	}
	if sc.MaxMsgs > 0 {
		bad("it keeps at most %s, so live objects' states would be evicted", limit(sc.MaxMsgs, "messages"))
	}
	if sc.MaxBytes > 0 {
		bad("it keeps at most %s, so live objects' states would be evicted", limit(sc.MaxBytes, "bytes"))
	}
	if sc.Retention != jetstream.LimitsPolicy {
		bad("its retention is %s, so consumers' acks or interest would remove objects' states; the state layout needs limits", sc.Retention)
	}
	if sc.Discard == jetstream.DiscardNew && sc.DiscardNewPerSubject {
		bad("it discards new messages per subject, so it would refuse every change after an object's first")
	}
	switch v, ok := sc.Metadata[wire.MetadataDeleteTTL]; {
	case !ok:
		bad("it has no metadata %s, which tells consumers how long a delete stays; add %s=%s", wire.MetadataDeleteTTL, wire.MetadataDeleteTTL, c.DeleteTTL)
	default:
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			bad("its metadata %s=%q is not a duration", wire.MetadataDeleteTTL, v)
		case c.DeleteTTL < d:
			bad("its metadata %s=%s promises consumers that deletes stay longer than BRIDGE_NATS_DELETE_TTL=%s: set BRIDGE_NATS_DELETE_TTL=%s, or lower the metadata",
				wire.MetadataDeleteTTL, v, c.DeleteTTL, d)
		}
	}
	return errors.Join(errs...)
}

// limit writes a stream limit n of unit, -1 and 0 being unlimited.
func limit(n int64, unit string) string {
	if n <= 0 {
		return "unlimited " + unit
	}
	return fmt.Sprintf("%d %s", n, unit)
}

// layoutNeeds says what a stream made by hand needs for c's layout.
func layoutNeeds(c Config) string {
	if c.Layout == LayoutHistory {
		return "any limits but one message per subject"
	}
	return fmt.Sprintf("limits retention, max messages per subject 1, no max age, messages or bytes limit, per-message TTLs allowed, metadata %s=%s and %s=%s",
		wire.MetadataLayout, LayoutState, wire.MetadataDeleteTTL, c.DeleteTTL)
}
