package nats

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// streamConfig is the stream the bridge creates: file storage, every
// subject under the prefix, and the age, replicas and duplicate window of
// the configuration.
func (c *Config) streamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        c.Stream,
		Description: "Kubernetes object changes published by kubebus bridge",
		Subjects:    []string{StreamSubject(c.SubjectPrefix)},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      c.StreamMaxAge,
		Replicas:    c.StreamReplicas,
		Duplicates:  c.DuplicateWindow,
	}
}

// ensureStream creates or updates the stream, or, when the bridge may not
// create it, checks that it exists and captures the bridge's subjects.
func (s *Sink) ensureStream(ctx context.Context) error {
	name := s.cfg.Stream
	var (
		st  jetstream.Stream
		err error
	)
	if s.cfg.CreateStream {
		st, err = s.js.CreateOrUpdateStream(ctx, s.cfg.streamConfig())
		if err != nil {
			return fmt.Errorf("nats sink: create or update stream %s: %w", name, err)
		}
	} else {
		st, err = s.js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("nats sink: stream %s does not exist and BRIDGE_NATS_CREATE_STREAM=false: create it with the subjects %s, or let the bridge create it: %w",
				name, StreamSubject(s.cfg.SubjectPrefix), err)
		}
		if err != nil {
			return fmt.Errorf("nats sink: stream %s: %w", name, err)
		}
	}
	cfg := st.CachedInfo().Config
	sample := s.sampleSubject()
	if !slices.ContainsFunc(cfg.Subjects, func(p string) bool { return subjectMatches(p, sample) }) {
		return fmt.Errorf("nats sink: stream %s captures %s, not the bridge's subjects such as %s",
			name, strings.Join(cfg.Subjects, ", "), sample)
	}
	s.log.Info("nats sink: stream ready", "stream", name, "subjects", cfg.Subjects, "storage", cfg.Storage.String(),
		"replicas", cfg.Replicas, "maxAge", cfg.MaxAge, "duplicateWindow", cfg.Duplicates, "created", s.cfg.CreateStream)
	if cfg.Duplicates <= 0 {
		s.log.Warn("nats sink: the stream has no duplicate window; repeats after a crash are stored twice", "stream", name)
	}
	return nil
}

// sampleSubject is a subject the template makes, with "x" for every value.
func (s *Sink) sampleSubject() string {
	parts := make([]string, len(s.tmpl.parts))
	for i, p := range s.tmpl.parts {
		parts[i] = p.lit
		if p.f != literal {
			parts[i] = "x"
		}
	}
	return strings.Join(parts, ".")
}

// subjectMatches reports whether the subject filter pattern, which may use
// the wildcards "*" and ">", matches subject.
func subjectMatches(pattern, subject string) bool {
	pt := strings.Split(pattern, ".")
	st := strings.Split(subject, ".")
	for i, p := range pt {
		switch {
		case p == ">":
			return i < len(st)
		case i >= len(st):
			return false
		case p != "*" && p != st[i]:
			return false
		}
	}
	return len(pt) == len(st)
}
