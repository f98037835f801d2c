package nats

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kubebus/bridge/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// streamConfig is the stream the bridge creates: file storage, every
// subject under the prefix, the replicas and duplicate window of the
// configuration, and the limits of the layout. In the state layout a
// subject keeps one message, its object's latest, with no age or size
// limit, and the stream takes per-message TTLs for deletes; the metadata
// tells consumers the layout and how long a delete stays. In the history
// layout every message stays for BRIDGE_NATS_STREAM_MAX_AGE.
func (c *Config) streamConfig() jetstream.StreamConfig {
	sc := jetstream.StreamConfig{
		Name:        c.Stream,
		Description: "Kubernetes object changes published by kubebus bridge",
		Subjects:    []string{wire.StreamSubject(c.SubjectPrefix)},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      c.StreamMaxAge,
		Replicas:    c.StreamReplicas,
		Duplicates:  c.DuplicateWindow,
		Metadata:    map[string]string{wire.MetadataLayout: string(c.Layout)},
	}
	if c.Layout == LayoutState {
		sc.Description = "Kubernetes objects' latest states published by kubebus bridge"
		sc.MaxAge = 0
		sc.MaxMsgs = -1
		sc.MaxBytes = -1
		sc.MaxMsgsPerSubject = 1
		sc.AllowMsgTTL = true
		sc.Metadata[wire.MetadataDeleteTTL] = c.DeleteTTL.String()
	}
	return sc
}

// ensureStream checks that the stream exists, fits the layout and
// captures the bridge's subjects. When it is missing and the bridge may
// create it, it creates it. It never changes a stream that exists.
func (s *Sink) ensureStream(ctx context.Context) error {
	name := s.cfg.Stream
	st, err := s.js.Stream(ctx, name)
	created := false
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if !s.cfg.CreateStream {
			return fmt.Errorf("nats sink: stream %s does not exist and BRIDGE_NATS_CREATE_STREAM=false: create it with the subjects %s (for BRIDGE_NATS_LAYOUT=%s: %s), or let the bridge create it: %w",
				name, wire.StreamSubject(s.cfg.SubjectPrefix), s.cfg.Layout, layoutNeeds(s.cfg.Config), err)
		}
		st, err = s.js.CreateStream(ctx, s.cfg.streamConfig())
		created = err == nil
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			// Another bridge created it meanwhile; check what it made.
			st, err = s.js.Stream(ctx, name)
		}
	}
	if err != nil {
		return fmt.Errorf("nats sink: stream %s: %w", name, err)
	}
	cfg := st.CachedInfo().Config
	if err := checkLayout(s.cfg.Config, cfg); err != nil {
		return fmt.Errorf("nats sink: stream %s does not fit BRIDGE_NATS_LAYOUT=%s, and the bridge never changes an existing stream: %w", name, s.cfg.Layout, err)
	}
	sample := s.tmpl.Sample()
	if !slices.ContainsFunc(cfg.Subjects, func(p string) bool { return wire.SubjectMatches(p, sample) }) {
		return fmt.Errorf("nats sink: stream %s captures %s, not the bridge's subjects such as %s",
			name, strings.Join(cfg.Subjects, ", "), sample)
	}
	s.streamMaxAge = cfg.MaxAge
	if s.discoveryErr = s.checkDiscoverySubject(cfg.Subjects); s.discoveryErr != nil {
		s.log.Warn("nats sink: the discovery document of the cluster cannot be published; readers of the bus (the replica) cannot serve its discovery", "err", s.discoveryErr)
	}
	s.log.Info("nats sink: stream ready", "stream", name, "layout", s.cfg.Layout, "subjects", cfg.Subjects, "storage", cfg.Storage.String(),
		"replicas", cfg.Replicas, "maxAge", cfg.MaxAge, "maxMsgsPerSubject", cfg.MaxMsgsPerSubject, "deleteTTL", cfg.Metadata[wire.MetadataDeleteTTL],
		"duplicateWindow", cfg.Duplicates, "created", created)
	if cfg.Duplicates <= 0 {
		s.log.Warn("nats sink: the stream has no duplicate window; repeats after a crash are stored twice", "stream", name)
	}
	s.warnDifferences(cfg, created)
	return nil
}

// warnDifferences logs the settings of an existing stream that differ from
// the configuration but do not break the layout: the bridge leaves them
// as they are.
func (s *Sink) warnDifferences(cfg jetstream.StreamConfig, created bool) {
	if created {
		return
	}
	want := s.cfg.streamConfig()
	warn := func(setting string, has, config any) {
		s.log.Warn("nats sink: the existing stream differs from the configuration; the bridge does not change it (edit it, e.g. with `nats stream edit`, to apply the setting)",
			"stream", cfg.Name, "setting", setting, "has", has, "configured", config)
	}
	if s.cfg.Layout == LayoutHistory && cfg.MaxAge != want.MaxAge {
		warn("BRIDGE_NATS_STREAM_MAX_AGE", cfg.MaxAge, want.MaxAge)
	}
	if cfg.Replicas != want.Replicas {
		warn("BRIDGE_NATS_STREAM_REPLICAS", cfg.Replicas, want.Replicas)
	}
	if cfg.Duplicates != want.Duplicates {
		warn("BRIDGE_NATS_DUPLICATE_WINDOW", cfg.Duplicates, want.Duplicates)
	}
	if s.cfg.Layout == LayoutState && cfg.Metadata[wire.MetadataDeleteTTL] != want.Metadata[wire.MetadataDeleteTTL] {
		// checkLayout refused a shorter TTL than the metadata says; a
		// longer one only makes consumers read the state again sooner
		// than they must.
		warn("BRIDGE_NATS_DELETE_TTL", cfg.Metadata[wire.MetadataDeleteTTL], want.Metadata[wire.MetadataDeleteTTL])
	}
}
