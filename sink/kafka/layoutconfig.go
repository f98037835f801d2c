package kafka

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	kafkago "github.com/segmentio/kafka-go"
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

// layoutProblems reports a layout that is not one, and, in the state
// layout, every setting that contradicts it. Each error names the variable
// at fault and BRIDGE_KAFKA_LAYOUT.
func (c *Config) layoutProblems() []error {
	switch c.Layout {
	case LayoutState:
	case LayoutHistory:
		return nil
	default:
		return []error{fmt.Errorf("BRIDGE_KAFKA_LAYOUT: %q is not a layout; use state or history", c.Layout)}
	}
	var errs []error
	if c.DeleteRetention < minDeleteRetention || c.DeleteRetention%time.Millisecond != 0 {
		errs = append(errs, fmt.Errorf("BRIDGE_KAFKA_DELETE_RETENTION: must be whole milliseconds and at least %s, got %s", minDeleteRetention, c.DeleteRetention))
	}
	if !c.Tombstones {
		errs = append(errs, fmt.Errorf("BRIDGE_KAFKA_TOMBSTONES: false contradicts BRIDGE_KAFKA_LAYOUT=state: without tombstones a deleted object's last record stays in the compacted topic for good, and consumers take the object for live; set BRIDGE_KAFKA_TOMBSTONES=true, or BRIDGE_KAFKA_LAYOUT=history"))
	}
	entries, err := ParseTopicConfigs(c.TopicConfigs)
	if err != nil {
		return errs // Validate reports it
	}
	contradicts := func(e kafkago.ConfigEntry, why string) {
		errs = append(errs, fmt.Errorf("BRIDGE_KAFKA_TOPIC_CONFIGS: %s=%s contradicts BRIDGE_KAFKA_LAYOUT=state: %s", e.ConfigName, e.ConfigValue, why))
	}
	for _, e := range entries {
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
	return errs
}

// CreateConfigs is the configs of the topics the bridge creates. In the
// state layout they are cleanup.policy=compact, retention.ms=-1 and
// delete.retention.ms of BRIDGE_KAFKA_DELETE_RETENTION, with
// BRIDGE_KAFKA_TOPIC_CONFIGS on top (Validate has made sure they agree); in
// the history layout BRIDGE_KAFKA_TOPIC_CONFIGS alone. c must be valid.
func (c *Config) CreateConfigs() []kafkago.ConfigEntry {
	extra, _ := ParseTopicConfigs(c.TopicConfigs) // checked by Validate
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
