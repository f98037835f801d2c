package kafka

import (
	"slices"
	"strconv"
	"strings"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/kubebus/bridge/envvar"
)

// minDeleteRetention is the shortest BRIDGE_KAFKA_DELETE_RETENTION: a
// consumer must have a chance to read a tombstone before it goes.
const minDeleteRetention = time.Second

// Topic config names the state layout sets or checks.
const (
	configCleanupPolicy   = "cleanup.policy"
	configRetentionMs     = "retention.ms"
	configRetentionBytes  = "retention.bytes"
	configDeleteRetention = "delete.retention.ms"
)

// checkLayout reports a layout that is not one, and, in the state layout,
// every setting that contradicts it, extra (BRIDGE_KAFKA_TOPIC_CONFIGS
// parsed) included when parsed is true. Each problem names the variable at
// fault and BRIDGE_KAFKA_LAYOUT.
func (c *Config) checkLayout(p *envvar.Problems, extra []kafkago.ConfigEntry, parsed bool) {
	switch c.Layout {
	case LayoutState:
	case LayoutHistory:
		return
	default:
		p.Add("BRIDGE_KAFKA_LAYOUT", "%q is not a layout; use state or history", c.Layout)
		return
	}
	if c.DeleteRetention < minDeleteRetention || c.DeleteRetention%time.Millisecond != 0 {
		p.Add("BRIDGE_KAFKA_DELETE_RETENTION", "must be whole milliseconds and at least %s, got %s", minDeleteRetention, c.DeleteRetention)
	}
	if !c.Tombstones {
		p.Add("BRIDGE_KAFKA_TOMBSTONES", "false contradicts BRIDGE_KAFKA_LAYOUT=state: without tombstones a deleted object's last record stays in the compacted topic for good, and consumers take the object for live; set BRIDGE_KAFKA_TOMBSTONES=true, or BRIDGE_KAFKA_LAYOUT=history")
	}
	if !parsed {
		return // reported by Parse
	}
	contradicts := func(e kafkago.ConfigEntry, why string) {
		p.Add("BRIDGE_KAFKA_TOPIC_CONFIGS", "%s=%s contradicts BRIDGE_KAFKA_LAYOUT=state: %s", e.ConfigName, e.ConfigValue, why)
	}
	for _, e := range extra {
		switch e.ConfigName {
		case configCleanupPolicy:
			if !hasPolicy(e.ConfigValue, "compact") {
				contradicts(e, "the state layout needs compacted topics (cleanup.policy=compact); leave cleanup.policy out, or set BRIDGE_KAFKA_LAYOUT=history")
			}
		case configRetentionMs, configRetentionBytes:
			if strings.TrimSpace(e.ConfigValue) != "-1" {
				contradicts(e, "it would drop the latest record of objects that do not change; leave it out (the state layout keeps records for as long as their object lives), or set BRIDGE_KAFKA_LAYOUT=history")
			}
		case configDeleteRetention:
			contradicts(e, "set how long tombstones stay with BRIDGE_KAFKA_DELETE_RETENTION instead")
		}
	}
}

// createConfigs is the configs of the topics the bridge creates, given
// extra, BRIDGE_KAFKA_TOPIC_CONFIGS parsed. In the state layout they are
// cleanup.policy=compact, retention.ms=-1 and delete.retention.ms of
// BRIDGE_KAFKA_DELETE_RETENTION, with extra on top (checkLayout has made
// sure they agree); in the history layout extra alone.
func (c *Config) createConfigs(extra []kafkago.ConfigEntry) []kafkago.ConfigEntry {
	if c.Layout != LayoutState {
		return extra
	}
	out := []kafkago.ConfigEntry{
		{ConfigName: configCleanupPolicy, ConfigValue: "compact"},
		// Kafka ignores retention on a compact-only topic; brokers that
		// do not (and a policy of compact,delete) are told to keep
		// records for good.
		{ConfigName: configRetentionMs, ConfigValue: "-1"},
		{ConfigName: configDeleteRetention, ConfigValue: strconv.FormatInt(c.DeleteRetention.Milliseconds(), 10)},
	}
	for _, e := range extra {
		if i := slices.IndexFunc(out, func(o kafkago.ConfigEntry) bool { return o.ConfigName == e.ConfigName }); i >= 0 {
			out[i] = e
		} else {
			out = append(out, e)
		}
	}
	return out
}

// hasPolicy reports whether a cleanup.policy value ("compact",
// "compact,delete", ...) holds policy.
func hasPolicy(value, policy string) bool {
	for p := range strings.SplitSeq(value, ",") {
		if strings.TrimSpace(p) == policy {
			return true
		}
	}
	return false
}
