package access

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// RulesFileConfig says where the rules file is and what to tell of it.
type RulesFileConfig struct {
	// Path is the rules file, typically in a mounted Secret. Required.
	Path string
	// Interval is how often the file is read to see if it changed; zero
	// means DefaultInterval.
	Interval time.Duration
	// Logger receives a line for each reload and each bad file; nil
	// discards them.
	Logger *slog.Logger
	// OnDeny, if set, is called for each request Authorize denies, with
	// the request's cluster ("" when it has none) and resource ("" for a
	// non-resource request). Both come from the request: a metric that
	// uses them as labels must bound them (the server knows its clusters
	// and resources). It must be quick and safe for concurrent use.
	OnDeny func(cluster, resource string)
	// OnReload, if set, is called after each attempt to load a changed
	// file: with nil when the new rules are in use, with the error when
	// the file was bad and the last good rules stay in use.
	OnReload func(err error)
}

// RulesFile is the rules file as last read well: it reads the file again
// when its content changes (Run), and decides with the latest good rules.
//
// A bad file never replaces good rules: Run logs its error, naming the
// file, reports it to OnReload and in Status, and keeps the rules it had.
// Current, Authorize and Status are safe for concurrent use, also while
// Run swaps the rules; a decision uses one version of the rules from start
// to end.
type RulesFile struct {
	cfg     RulesFileConfig
	log     *slog.Logger
	file    polledFile
	current atomic.Pointer[Rules]

	mu         sync.Mutex
	status     RulesStatus
	unreadable bool  // status.Err is the file's being unreadable
	contentErr error // why the content last read is not in use; nil when it is
}

var _ authorizer.Authorizer = (*RulesFile)(nil)

// RulesStatus is what the last reads of the rules file found.
type RulesStatus struct {
	Loaded time.Time // when the rules in use were read
	Err    error     // why the file's current content is not in use; nil when it is
	Failed uint64    // how many changed contents were refused since start
}

// NewRulesFile reads the rules file at cfg.Path. A file that cannot be
// read or parsed is an error: there are no good rules yet to keep.
func NewRulesFile(cfg RulesFileConfig) (*RulesFile, error) {
	if cfg.Path == "" {
		return nil, fmt.Errorf("access: rules file: no path given")
	}
	f := &RulesFile{cfg: cfg, log: cfg.Logger, file: polledFile{path: cfg.Path}}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	data, _, err := f.file.read()
	if err != nil {
		return nil, fmt.Errorf("access: rules file: %w", err)
	}
	rules, err := ParseRules(data, cfg.Path)
	if err != nil {
		return nil, err
	}
	f.file.seen(data)
	f.current.Store(rules)
	f.status.Loaded = time.Now()
	return f, nil
}

// Run reads the file every Interval and, when its content changed, parses
// it and puts the new rules in use if they are good. It returns nil when
// ctx ends.
func (f *RulesFile) Run(ctx context.Context) error {
	return every(ctx, intervalOrDefault(f.cfg.Interval), f.reload)
}

func (f *RulesFile) reload() {
	data, changed, err := f.file.read()
	if err == nil && !changed {
		f.mu.Lock()
		if f.unreadable {
			// The file is back as it was: good, and in use, or still bad.
			f.unreadable = false
			f.status.Err = f.contentErr
		}
		f.mu.Unlock()
		return
	}
	var rules *Rules
	readFailed := err != nil
	if readFailed {
		err = fmt.Errorf("access: rules file: %w", err)
	} else {
		f.file.seen(data)
		rules, err = ParseRules(data, f.cfg.Path)
	}
	f.mu.Lock()
	// A file that cannot be read is tried again on each tick; it is
	// reported once, until its error changes.
	repeated := readFailed && f.status.Err != nil && err.Error() == f.status.Err.Error()
	f.unreadable = readFailed
	if !readFailed {
		f.contentErr = err
	}
	if err != nil {
		f.status.Err = err
		if !repeated {
			f.status.Failed++
		}
	} else {
		f.current.Store(rules)
		f.status = RulesStatus{Loaded: time.Now(), Failed: f.status.Failed}
	}
	f.mu.Unlock()
	if repeated {
		return
	}
	if err != nil {
		f.log.Error("access: keeping the last good rules", "file", f.cfg.Path, "err", err)
	} else {
		f.log.Info("access: rules reloaded", "file", f.cfg.Path, "rules", rules.Len())
	}
	if f.cfg.OnReload != nil {
		f.cfg.OnReload(err)
	}
}

// Current is the rules in use: the last good ones read.
func (f *RulesFile) Current() *Rules { return f.current.Load() }

// Status says when the rules in use were read, and why a newer content
// of the file is not in use, if it is not.
func (f *RulesFile) Status() RulesStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status
}

// Authorize decides with the current rules (see [Rules]), and calls
// OnDeny when it denies.
func (f *RulesFile) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	d, reason, err := f.Current().Authorize(ctx, a)
	if d != authorizer.DecisionAllow && f.cfg.OnDeny != nil {
		cluster, _ := ClusterFrom(ctx)
		f.cfg.OnDeny(cluster, a.GetResource())
	}
	return d, reason, err
}

// ConditionsAwareAuthorize is Authorize: these rules have no conditions.
func (f *RulesFile) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(f.Authorize(ctx, a))
}

// EvaluateConditions denies: these rules have no conditions.
func (f *RulesFile) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}
