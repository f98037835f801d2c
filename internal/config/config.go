// Package config reads the bridge's configuration from environment
// variables, once, into a typed struct.
//
// Every variable and its meaning are declared in the struct tags of
// Config, which is also where `bridge --help` reads them from, and so is
// every default but those of the pipeline's settings, which
// internal/pipeline declares with their reasons (see defaults).
// Load reports every problem at once, each an *envvar.Error naming its
// variable, and parses what needs parsing once: the selection, the view,
// and the sinks' configurations (NATSSettings, KafkaSettings: each sink's
// Parsed), TLS files read and all, which the sinks and checkpoint stores
// take as they are. No value read here is ever logged as a whole, and
// passwords and tokens are envvar.Secrets, so that no secret can leak
// through it.
package config

import (
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubebus/bridge/checkpoint/kafkastore"
	"github.com/kubebus/bridge/checkpoint/natskv"
	"github.com/kubebus/bridge/envvar"
	"github.com/kubebus/bridge/internal/filter"
	"github.com/kubebus/bridge/internal/pipeline"
	"github.com/kubebus/bridge/internal/rawobject"
	"github.com/kubebus/bridge/internal/view"
	"github.com/kubebus/bridge/sink/kafka"
	"github.com/kubebus/bridge/sink/nats"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/wire"
)

// Config is the bridge's whole configuration. The help tag is shown by
// `bridge --help`; the default tag is the default, with its reason in the
// comment above the field, or for the pipeline's settings, in
// internal/pipeline (see defaults).
type Config struct {
	Resources []string `env:"BRIDGE_RESOURCES" help:"required; comma-separated resources, named as kubectl names them (configmaps, deployments.apps, deployments.v1.apps, widgets.v1alpha1.example.com, deploy), or patterns: * for every resource the API server serves that supports list and watch, *.<group> for every resource of a group and of the groups ending in .<group> (*.example.com). They mix: *,secrets. Patterns follow the cluster: a CRD or API service that appears is watched, one that goes is no longer. Secrets are watched only when named"`
	// Events are a log, not state, and change all the time; leases are
	// renewed every few seconds by every controller and node. Under "*"
	// both would bury the state on the bus in churn nobody restores.
	ExcludeResources []string `env:"BRIDGE_EXCLUDE_RESOURCES" envDefault:"events,events.events.k8s.io,leases.coordination.k8s.io" help:"comma-separated resources (resource.group, as in leases.coordination.k8s.io) and groups (*.<group>) that the patterns of BRIDGE_RESOURCES leave out; a resource named there is watched anyway. none excludes nothing"`
	// Four initial lists at once start a cluster of many resources
	// several times faster than one at a time, while the API server
	// serves no more large lists for the bridge than a few kubectl
	// commands would: each list of tens of thousands of objects costs it
	// memory and CPU while it runs.
	ListConcurrency int      `env:"BRIDGE_LIST_CONCURRENCY" envDefault:"4" help:"how many resources' initial lists run at once (at start-up, and when resources are added); each is streamed as a watch where the API server offers it"`
	Namespaces      []string `env:"BRIDGE_NAMESPACES" help:"comma-separated namespaces to watch; empty means all. Cluster-scoped resources are always watched whole"`
	LabelSelector   string   `env:"BRIDGE_LABEL_SELECTOR" help:"label selector, as kubectl -l takes it"`
	FieldSelector   string   `env:"BRIDGE_FIELD_SELECTOR" help:"field selector, as kubectl --field-selector takes it"`
	// View is what of the watched objects is published. No defaults: an
	// unset filter and projection publish every object whole, as the
	// bridge always has.
	View ViewConfig
	// "default" keeps event sources well-formed when one bridge serves one
	// cluster and nobody named it.
	ClusterName string `env:"BRIDGE_CLUSTER_NAME" envDefault:"default" help:"the cluster's name in messages (event source and cluster attribute)"`

	Sink SinkKind `env:"BRIDGE_SINK" envDefault:"stdout" help:"where messages go: stdout (JSON lines), nats or kafka"`
	// A file next to the process survives restarts without extra services.
	Checkpoint string `env:"BRIDGE_CHECKPOINT" envDefault:"file:bridge-checkpoint.db" help:"where published positions are kept: file:<path>, nats-kv:<bucket>, kafka:<topic> or none"`
	// One second bounds the repeats after a crash to about a second of
	// changes while costing one small fsync a second.
	CheckpointInterval time.Duration `env:"BRIDGE_CHECKPOINT_INTERVAL" envDefault:"1s" help:"how often acknowledged positions are flushed to the checkpoint"`
	// Off: starting afresh publishes every object again and never
	// publishes the deletes made while the bridge was down, so it is the
	// operator's choice, made knowingly, not a silent default.
	CheckpointFreshStart bool `env:"BRIDGE_CHECKPOINT_FRESH_START" envDefault:"false" help:"when the file checkpoint is empty or corrupt, move it aside (to <path>.unreadable-<time>) and start afresh, publishing every object again, instead of refusing to start; in the history layout, also start from an empty checkpoint while the bus holds messages of the resources watched (a checkpoint lost), which is refused otherwise. Deletes made while the bridge was down are then never published"`

	// An hour: a pass that finds the bus right reads the bus and asks
	// the API server nothing, and drift (a message lost from a stream, a
	// record written by hand) is rare; it is repaired within the hour.
	ReconcileInterval time.Duration `env:"BRIDGE_RECONCILE_INTERVAL" envDefault:"1h" help:"state layouts: how often the bridge compares what the bus holds with the cluster and publishes what differs (the delete of an object the cluster lacks, the current state of one the bus lacks or holds older); it also compares at start and after a relist. 0 turns the scheduled comparison off (the one at start stays)"`

	KeepManagedFields bool `env:"BRIDGE_KEEP_MANAGED_FIELDS" envDefault:"false" help:"keep metadata.managedFields in objects (dropped by default: large and rarely useful)"`
	OldObject         bool `env:"BRIDGE_OLD_OBJECT" envDefault:"false" help:"add the previous state as data.oldObject to updated events (costs memory and CPU: the bridge then decodes every object, where by default it hands on the API server's bytes, and keeps every watched object's latest state)"`

	// The pipeline's variables have no default tag: their defaults, and
	// the reasons for them, are internal/pipeline's (see defaults).
	Workers             int           `env:"BRIDGE_WORKERS" help:"batches published in parallel"`
	BatchSize           int           `env:"BRIDGE_BATCH_SIZE" help:"messages per batch; one object's waiting changes are never split across batches"`
	MaxPendingPerObject int           `env:"BRIDGE_MAX_PENDING_PER_OBJECT" help:"changes of one object that may wait before they are collapsed into its latest state"`
	MaxPendingBytes     int64         `env:"BRIDGE_MAX_PENDING_BYTES" help:"bytes of objects (their JSON) that may wait for the bus or be in flight before the bridge stops reading from the API server until the bus has taken some: bounds the memory a backlog takes"`
	RetryMaxInterval    time.Duration `env:"BRIDGE_RETRY_MAX_INTERVAL" help:"longest wait between retries of a failed publish"`
	// kube-apiserver sends a bookmark on a quiet watch about once a minute
	// (measured), and the bridge reopens every watch at least every half
	// of this, so a healthy watch is heard from at least every minute: two
	// minutes tolerates a late bookmark without a false alarm, and still
	// reports a dead connection or a revoked permission within minutes.
	WatchStallTimeout time.Duration `env:"BRIDGE_WATCH_STALL_TIMEOUT" envDefault:"2m" help:"how long a watch may hear nothing from the API server (no event, bookmark, part of a list's answer, or watch ended by the server; an opened or dropped watch is not enough), or keep failing, before it is logged, counted in bridge_watch_healthy and makes /readyz fail; a silent watch, or a list whose answer stops coming for it (at least a minute), is then cut and retried. Watches are reopened at least every half of it"`
	// Within Kubernetes' default 30s grace period, leaving time to flush.
	ShutdownTimeout time.Duration `env:"BRIDGE_SHUTDOWN_TIMEOUT" envDefault:"25s" help:"the whole graceful stop, from the signal to the exit: the drain, the final checkpoint flush and the closes share it (see docs/operations.md); keep it below the pod's grace period"`

	// Prometheus' customary exporter port range starts at 9090.
	MetricsAddr string `env:"BRIDGE_METRICS_ADDR" envDefault:":9090" help:"address of the HTTP server for /metrics, /healthz and /readyz; empty turns it off"`
	Pprof       bool   `env:"BRIDGE_PPROF" envDefault:"false" help:"also serve Go's profiles under /debug/pprof/ on the metrics address (for diagnosis; do not expose it publicly)"`

	LeaderElection          bool   `env:"BRIDGE_LEADER_ELECTION" envDefault:"false" help:"run only on the replica that holds a Lease; the others stand by"`
	LeaderElectionNamespace string `env:"BRIDGE_LEADER_ELECTION_NAMESPACE" help:"namespace of the Lease; by default the pod's own namespace"`
	LeaderElectionName      string `env:"BRIDGE_LEADER_ELECTION_NAME" envDefault:"kubebus-bridge" help:"name of the Lease"`
	LeaderElectionIdentity  string `env:"BRIDGE_LEADER_ELECTION_IDENTITY" help:"this replica's name in the Lease; by default the host name (the pod's name)"`
	// client-go's customary timings: a new leader takes over within about
	// 15s of the old one's last renewal, and the old one stops publishing
	// 5s before that.
	LeaseDuration time.Duration `env:"BRIDGE_LEADER_ELECTION_LEASE_DURATION" envDefault:"15s" help:"how long a lease lasts without renewal before another replica may take it"`
	RenewDeadline time.Duration `env:"BRIDGE_LEADER_ELECTION_RENEW_DEADLINE" envDefault:"10s" help:"how long the leader keeps trying to renew before it stops publishing"`
	RetryPeriod   time.Duration `env:"BRIDGE_LEADER_ELECTION_RETRY_PERIOD" envDefault:"2s" help:"how often replicas try to acquire or renew the lease"`

	LogLevel  string `env:"BRIDGE_LOG_LEVEL" envDefault:"info" help:"debug, info, warn or error"`
	LogFormat string `env:"BRIDGE_LOG_FORMAT" envDefault:"json" help:"json or text"`

	// The bridge asks the API server for little once it runs (a new watch
	// per resource and namespace every half of BRIDGE_WATCH_STALL_TIMEOUT)
	// but for much at start-up: discovery, then four requests per
	// resource and namespace (a list and a watch that check permissions,
	// a list and a watch that follow it). A burst of 100 sends a start
	// over 25 of them at once, and 50 a second adds about 12 a second;
	// client-go's own default (5 a second, burst 10) would hold a start
	// over a hundred for more than a minute on the bridge's side alone.
	// What protects the API server is its API Priority and Fairness,
	// whose refusals (429) the bridge retries: this limit only keeps the
	// bridge from flooding it on its own.
	KubeQPS   float32 `env:"BRIDGE_KUBE_QPS" envDefault:"50" help:"requests a second the bridge sends the API server, on average (client-go's rate limiter); see docs/operations.md"`
	KubeBurst int     `env:"BRIDGE_KUBE_BURST" envDefault:"100" help:"requests the bridge may send the API server at once before BRIDGE_KUBE_QPS applies"`

	// Kubeconfig is the kubeconfig file the bridge's Kubernetes client is
	// made from, read from the environment given to Load like every
	// other variable.
	Kubeconfig string `env:"KUBECONFIG" help:"kubeconfig file; when unset, the in-cluster service account is used, then ~/.kube/config"`

	// NATS configures the NATS sink and the nats-kv checkpoint. Like
	// Kafka, it is parsed by a call of its own (see parts), hence env:"-".
	NATS nats.Config `env:"-"`
	// Kafka configures the Kafka sink and the kafka checkpoint.
	Kafka kafka.Config `env:"-"`

	// parsed holds what Load made of the variables that need parsing.
	parsed
}

// parsed is what the variables that need more than the env library
// become: made by check, kept by Load.
type parsed struct {
	// view is View compiled (ViewDefinition).
	view view.Config
	// selection is Resources and ExcludeResources parsed (Selection).
	selection source.Selection
	// nats is NATS parsed (NATSSettings), when something uses it.
	nats *nats.Parsed
	// kafka is Kafka parsed (KafkaSettings), when something uses it.
	kafka *kafka.Parsed
}

// ViewConfig is the definition of the view the bridge publishes (see
// docs/filters.md): which objects (Filter) and what of them (Fields,
// DropFields). It holds the variables' text as given, except that a value
// of only white space counts as unset; compiling the expression and parsing
// the paths is the view's, whose errors name these variables and the
// position of the fault in them.
type ViewConfig struct {
	Filter     string `env:"BRIDGE_FILTER" help:"a CEL expression; only objects for which it is true are published, and an object that stops matching is published as deleted (reason left-filter). Variables: object, resource, ns, name, labels, annotations. See docs/filters.md"`
	Fields     string `env:"BRIDGE_FIELDS" help:"comma-separated field paths of the object to publish, as CEL selects them (spec.replicas, metadata.labels, spec.containers[*].image); the object's identity is always kept; empty keeps every field"`
	DropFields string `env:"BRIDGE_DROP_FIELDS" help:"comma-separated field paths to leave out of published objects, e.g. status,metadata.annotations[\"kubectl.kubernetes.io/last-applied-configuration\"]; an update that changes only fields left out is not published"`
}

// Defined reports whether any of the view's variables is set: the bridge
// then publishes a view of the cluster rather than every change.
func (v ViewConfig) Defined() bool {
	return v.Filter != "" || v.Fields != "" || v.DropFields != ""
}

// SinkKind is a sink the bridge can publish to (BRIDGE_SINK).
type SinkKind string

// Sinks.
const (
	SinkStdout SinkKind = "stdout"
	SinkNATS   SinkKind = "nats"
	SinkKafka  SinkKind = "kafka"
)

// CheckpointKind is where the checkpoint is kept: the part of
// BRIDGE_CHECKPOINT before its first ':'.
type CheckpointKind string

// Checkpoint kinds.
const (
	CheckpointFile   CheckpointKind = "file"
	CheckpointNATSKV CheckpointKind = "nats-kv"
	CheckpointKafka  CheckpointKind = "kafka"
	CheckpointNone   CheckpointKind = "none"
)

// Load reads the configuration from environ ("KEY=value" strings, as
// os.Environ returns them) and validates it. The error lists every problem.
func Load(environ []string) (*Config, error) {
	vars := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	c := defaults()
	// The env library sets every field it can even when others fail, so
	// the checks below still run; they skip variables that did not parse.
	var perr envvar.Problems
	for _, part := range c.parts() {
		err := env.ParseWithOptions(part, env.Options{Environment: vars})
		perr = append(perr, parseErrors(err, reflect.TypeOf(part).Elem())...)
	}
	c.normalize()
	p, problems := c.check()
	errs := perr
	for _, e := range problems {
		if !slices.ContainsFunc(perr, func(p error) bool { return varOfError(p) == varOfError(e) }) {
			errs = append(errs, e)
		}
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	c.parsed = p
	return &c, nil
}

// defaults is the Config that Load starts from, before it reads the
// variables: the defaults that the package that uses a setting declares,
// with their reasons, rather than an envDefault tag. Help and the README
// give them as the tags' (defaultOf).
func defaults() Config {
	return Config{
		Workers:             pipeline.DefaultWorkers,
		BatchSize:           pipeline.DefaultBatchSize,
		MaxPendingPerObject: pipeline.DefaultMaxPendingPerObject,
		MaxPendingBytes:     pipeline.DefaultMaxPendingBytes,
		RetryMaxInterval:    pipeline.DefaultMaxRetryInterval,
	}
}

// defaultOf is the default of the variable name, read into field f, as
// text: its envDefault tag, or the value in defaults of a field of Config
// itself. ok is false when the variable has none.
func defaultOf(name string, f reflect.StructField) (def string, ok bool) {
	if def, ok := f.Tag.Lookup("envDefault"); ok {
		return def, true
	}
	own, found := reflect.TypeFor[Config]().FieldByName(f.Name)
	if !found || own.Tag.Get("env") != name {
		return "", false
	}
	v := reflect.ValueOf(defaults()).FieldByIndex(own.Index)
	if v.IsZero() {
		return "", false
	}
	return fmt.Sprint(v.Interface()), true
}

// normalize brings the values the env library read to the form the
// checks and the bridge take: lists trimmed, without empty or repeated
// entries ("a, b," is [a b]), and a view variable of only white space
// unset. Load calls it once, before it checks.
func (c *Config) normalize() {
	c.Resources = clean(c.Resources)
	c.ExcludeResources = clean(c.ExcludeResources)
	c.Namespaces = clean(c.Namespaces)
	c.View.blankIsUnset()
}

// Validate checks every setting, parsing what Load parses, and reports all
// problems, joined, each an *envvar.Error naming its variable. It changes
// nothing: what Load parsed stays as it was, and a second call gives the
// same answer.
func (c *Config) Validate() error {
	_, problems := c.check()
	return problems.Err()
}

// varOfError is the variable an *envvar.Error names, or "" for another
// error.
func varOfError(err error) string {
	var ve *envvar.Error
	if errors.As(err, &ve) {
		return ve.Var
	}
	return ""
}

// check checks every setting and parses those that need it, without
// changing c. It returns what it parsed with the problems.
func (c *Config) check() (parsed, envvar.Problems) {
	var (
		p    parsed
		errs envvar.Problems
	)
	bad := errs.Add
	if len(c.Resources) == 0 {
		bad("BRIDGE_RESOURCES", "required: name at least one resource, for example configmaps, or * for every resource")
	}
	p.selection = c.parseSelection(bad)
	if c.ListConcurrency <= 0 {
		bad("BRIDGE_LIST_CONCURRENCY", "must be positive, got %d", c.ListConcurrency)
	}
	for _, ns := range c.Namespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			bad("BRIDGE_NAMESPACES", "%q is not a namespace name: %s", ns, strings.Join(msgs, "; "))
		}
	}
	if _, err := labels.Parse(c.LabelSelector); err != nil {
		bad("BRIDGE_LABEL_SELECTOR", "%v", err)
	}
	if _, err := fields.ParseSelector(c.FieldSelector); err != nil {
		bad("BRIDGE_FIELD_SELECTOR", "%v", err)
	}
	if msgs := validation.IsDNS1123Subdomain(c.ClusterName); len(msgs) > 0 {
		bad("BRIDGE_CLUSTER_NAME", "%q: %s", c.ClusterName, strings.Join(msgs, "; "))
	}
	switch c.Sink {
	case SinkStdout, SinkNATS, SinkKafka:
	default:
		bad("BRIDGE_SINK", "%q is not a sink; use stdout, nats or kafka", c.Sink)
	}
	kind, arg := c.CheckpointKind()
	if kind == "" || (kind != CheckpointNone && arg == "") {
		bad("BRIDGE_CHECKPOINT", "%q is not a checkpoint; use file:<path>, nats-kv:<bucket>, kafka:<topic> or none", c.Checkpoint)
	}
	if kind == CheckpointNATSKV && arg != "" {
		if err := natskv.ValidBucket(arg); err != nil {
			bad("BRIDGE_CHECKPOINT", "%v", err)
		}
	}
	if kind == CheckpointKafka && arg != "" {
		if err := wire.CheckTopicName(arg); err != nil {
			bad("BRIDGE_CHECKPOINT", "%v", err)
		}
	}
	// A sink's settings are parsed, and checked, only when something uses
	// them.
	if c.Sink == SinkNATS || kind == CheckpointNATSKV {
		set, err := c.NATS.Parse()
		errs.Join(err)
		p.nats = set
	}
	if c.Sink == SinkKafka || kind == CheckpointKafka {
		set, err := c.Kafka.Parse()
		errs.Join(err)
		p.kafka = set
	}
	if c.CheckpointInterval <= 0 {
		bad("BRIDGE_CHECKPOINT_INTERVAL", "must be positive, got %s", c.CheckpointInterval)
	}
	if c.ReconcileInterval != 0 && c.ReconcileInterval < time.Second {
		bad("BRIDGE_RECONCILE_INTERVAL", "must be 0 (off) or at least 1s, got %s", c.ReconcileInterval)
	}
	p.view = c.compileView(bad)
	// The view runs on the path that hands on the API server's bytes;
	// BRIDGE_OLD_OBJECT decodes every object on another path, which has
	// no view yet.
	if c.OldObject && c.View.Defined() {
		bad("BRIDGE_OLD_OBJECT", "cannot be combined with BRIDGE_FILTER, BRIDGE_FIELDS or BRIDGE_DROP_FIELDS (set: %s); unset one or the other", strings.Join(c.View.set(), ", "))
	}
	if c.Workers <= 0 {
		bad("BRIDGE_WORKERS", "must be positive, got %d", c.Workers)
	}
	if c.BatchSize <= 0 {
		bad("BRIDGE_BATCH_SIZE", "must be positive, got %d", c.BatchSize)
	}
	if c.MaxPendingPerObject <= 0 {
		bad("BRIDGE_MAX_PENDING_PER_OBJECT", "must be positive, got %d", c.MaxPendingPerObject)
	}
	if c.MaxPendingBytes <= 0 {
		bad("BRIDGE_MAX_PENDING_BYTES", "must be positive, got %d", c.MaxPendingBytes)
	}
	if c.RetryMaxInterval <= 0 {
		bad("BRIDGE_RETRY_MAX_INTERVAL", "must be positive, got %s", c.RetryMaxInterval)
	}
	if c.WatchStallTimeout < 2*time.Second {
		bad("BRIDGE_WATCH_STALL_TIMEOUT", "must be at least 2s (watches are reopened every half of it, in whole seconds), got %s", c.WatchStallTimeout)
	}
	if c.ShutdownTimeout <= 0 {
		bad("BRIDGE_SHUTDOWN_TIMEOUT", "must be positive, got %s", c.ShutdownTimeout)
	}
	if c.LeaderElection {
		if c.LeaderElectionName == "" {
			bad("BRIDGE_LEADER_ELECTION_NAME", "required with BRIDGE_LEADER_ELECTION=true")
		}
		if c.RetryPeriod <= 0 || c.RenewDeadline <= c.RetryPeriod || c.LeaseDuration <= c.RenewDeadline {
			bad("BRIDGE_LEADER_ELECTION_LEASE_DURATION", "the lease duration (%s) must exceed BRIDGE_LEADER_ELECTION_RENEW_DEADLINE (%s), which must exceed BRIDGE_LEADER_ELECTION_RETRY_PERIOD (%s), which must be positive",
				c.LeaseDuration, c.RenewDeadline, c.RetryPeriod)
		}
	}
	if _, err := c.Level(); err != nil {
		bad("BRIDGE_LOG_LEVEL", "%q is not a level; use debug, info, warn or error", c.LogLevel)
	}
	if c.LogFormat != "json" && c.LogFormat != "text" {
		bad("BRIDGE_LOG_FORMAT", "%q is not a format; use json or text", c.LogFormat)
	}
	// NaN fails the first test, as it should.
	if !(c.KubeQPS > 0) || math.IsInf(float64(c.KubeQPS), 0) {
		bad("BRIDGE_KUBE_QPS", "must be a positive number, got %v", c.KubeQPS)
	}
	if c.KubeBurst < 1 {
		bad("BRIDGE_KUBE_BURST", "must be at least 1, got %d", c.KubeBurst)
	}
	return p, errs
}

// compileView compiles the filter and parses the paths of the view,
// reporting what is wrong with them by variable, with the position in the
// variable's text.
func (c *Config) compileView(bad func(name, format string, args ...any)) view.Config {
	v := view.Config{KeepManagedFields: c.KeepManagedFields}
	if c.View.Filter != "" {
		f, err := filter.Compile(c.View.Filter)
		var ce *filter.CompileError
		switch {
		case errors.As(err, &ce):
			bad("BRIDGE_FILTER", "%s", ce.Issues)
		case err != nil:
			bad("BRIDGE_FILTER", "%v", err)
		}
		v.Filter = f
	}
	if c.View.Fields != "" {
		paths, err := rawobject.ParsePaths(c.View.Fields)
		if err != nil {
			bad("BRIDGE_FIELDS", "%v", err)
		}
		v.Fields = paths
	}
	if c.View.DropFields != "" {
		paths, err := rawobject.ParsePaths(c.View.DropFields)
		if err != nil {
			bad("BRIDGE_DROP_FIELDS", "%v", err)
		}
		for _, p := range paths {
			if p.IsIdentity() {
				bad("BRIDGE_DROP_FIELDS", "%s is part of the object's identity (apiVersion, kind, metadata.name, namespace, uid, resourceVersion, deletionTimestamp), which is always published", p)
			}
		}
		v.DropFields = paths
	}
	return v
}

// parseSelection parses BRIDGE_RESOURCES and BRIDGE_EXCLUDE_RESOURCES,
// reporting each entry it does not take by variable.
func (c *Config) parseSelection(bad func(name, format string, args ...any)) source.Selection {
	if len(c.Resources) == 0 {
		return source.Selection{} // reported as required
	}
	sel, err := source.NewSelection(c.Resources, c.ExcludeResources)
	for _, e := range envvar.Split(err) {
		var se *source.SelectionError
		switch {
		case errors.As(e, &se) && se.Exclusion:
			bad("BRIDGE_EXCLUDE_RESOURCES", "%q: %s", se.Entry, se.Reason)
		case errors.As(e, &se):
			bad("BRIDGE_RESOURCES", "%q: %s", se.Entry, se.Reason)
		default:
			bad("BRIDGE_RESOURCES", "%v", e)
		}
	}
	return sel
}

// Selection is what BRIDGE_RESOURCES and BRIDGE_EXCLUDE_RESOURCES
// select, parsed by Load.
func (c *Config) Selection() source.Selection { return c.selection }

// NATSSettings is the NATS configuration parsed by Load, for the NATS sink
// and the nats-kv checkpoint; nil when neither is configured.
func (c *Config) NATSSettings() *nats.Parsed { return c.nats }

// KafkaSettings is the Kafka configuration parsed by Load, for the Kafka
// sink and the kafka checkpoint; nil when neither is configured.
func (c *Config) KafkaSettings() *kafka.Parsed { return c.kafka }

// KafkaCheckpoint is what the kafka checkpoint store takes from the
// BRIDGE_KAFKA_* variables besides the connection: it creates its topic
// and sizes its records as the sink does. Only for a loaded Config whose
// KafkaSettings is not nil.
func (c *Config) KafkaCheckpoint() kafkastore.Options {
	return kafkastore.Options{
		CreateTopic:       c.kafka.CreateTopics,
		ReplicationFactor: c.kafka.ReplicationFactor,
		MaxMessageBytes:   c.kafka.MaxMessageBytes,
		BatchTimeout:      c.kafka.BatchTimeout,
	}
}

// ViewDefinition is the view's definition, compiled and parsed by Load.
func (c *Config) ViewDefinition() view.Config { return c.view }

// blankIsUnset empties variables that hold only white space, so that
// BRIDGE_FILTER=" " means no filter, as an unset variable does.
func (v *ViewConfig) blankIsUnset() {
	for _, s := range []*string{&v.Filter, &v.Fields, &v.DropFields} {
		if strings.TrimSpace(*s) == "" {
			*s = ""
		}
	}
}

// set names the view's variables that are set, in declaration order.
func (v ViewConfig) set() []string {
	var names []string
	for _, f := range []struct{ name, val string }{
		{"BRIDGE_FILTER", v.Filter}, {"BRIDGE_FIELDS", v.Fields}, {"BRIDGE_DROP_FIELDS", v.DropFields},
	} {
		if f.val != "" {
			names = append(names, f.name)
		}
	}
	return names
}

// CheckpointKind splits BRIDGE_CHECKPOINT into its kind and argument. The
// kind is "" when the value is not understood.
func (c *Config) CheckpointKind() (kind CheckpointKind, arg string) {
	if c.Checkpoint == string(CheckpointNone) {
		return CheckpointNone, ""
	}
	for _, k := range []CheckpointKind{CheckpointFile, CheckpointNATSKV, CheckpointKafka} {
		if arg, ok := strings.CutPrefix(c.Checkpoint, string(k)+":"); ok {
			return k, arg
		}
	}
	return "", ""
}

// Level is BRIDGE_LOG_LEVEL as a slog level.
func (c *Config) Level() (slog.Level, error) {
	var l slog.Level
	err := l.UnmarshalText([]byte(c.LogLevel))
	return l, err
}

// clean trims entries and drops empty ones, so "a, b," means [a b].
func clean(in []string) []string {
	var out []string
	for _, s := range in {
		if s = strings.TrimSpace(s); s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// parts are the structs of c that Load parses, each with a call of its own:
// the env library's parse errors name only a field, and field names repeat
// across them (BatchSize is both BRIDGE_BATCH_SIZE and
// BRIDGE_KAFKA_BATCH_SIZE), but not within one.
func (c *Config) parts() []any { return []any{c, &c.NATS, &c.Kafka} }

// parseErrors rewrites the errors of the env library's parse of a struct of
// type t, which name fields, so that each names its variable instead. Only
// typed values (numbers, durations, booleans) can fail to parse; secrets
// are plain strings, so a parse error never quotes one.
func parseErrors(err error, t reflect.Type) envvar.Problems {
	if err == nil {
		return nil
	}
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return envvar.Problems{&envvar.Error{Var: "environment", Err: err}}
	}
	var errs envvar.Problems
	for _, e := range agg.Errors {
		var pe env.ParseError
		if errors.As(e, &pe) {
			errs.Add(varOf(t, pe.Name), "not a valid %s: %v", pe.Type, pe.Err)
			continue
		}
		errs = append(errs, &envvar.Error{Var: "environment", Err: e})
	}
	return errs
}

// varOf finds the variable of a field among those one parse of a struct of
// type t reads (parsedBy).
func varOf(t reflect.Type, field string) string {
	for name, f := range parsedBy(t) {
		if f.Name == field {
			return name
		}
	}
	return field
}

// variables yields every field of Config that is read from a variable,
// with the variable's name, descending into the sink configurations (and
// the prefix their envPrefix tags give) in declaration order.
func variables() iter.Seq2[string, reflect.StructField] {
	return func(yield func(string, reflect.StructField) bool) {
		walkVars(reflect.TypeFor[Config](), "", true, yield)
	}
}

// parsedBy yields the fields, with their variables, that the env library
// reads when it parses a struct of type t: those of variables in t, without
// the structs tagged env:"-", which are parsed on their own.
func parsedBy(t reflect.Type) iter.Seq2[string, reflect.StructField] {
	return func(yield func(string, reflect.StructField) bool) { walkVars(t, "", false, yield) }
}

// walkVars yields the fields of t read from a variable, descending into the
// structs it holds, and into those tagged env:"-" only when all is set.
func walkVars(t reflect.Type, prefix string, all bool, yield func(string, reflect.StructField) bool) bool {
	for f := range t.Fields() {
		tag := f.Tag.Get("env")
		if f.Type.Kind() == reflect.Struct && f.Type.PkgPath() != "time" && (tag == "" || tag == "-") {
			if tag == "" || all {
				if !walkVars(f.Type, prefix+f.Tag.Get("envPrefix"), all, yield) {
					return false
				}
			}
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name != "" && name != "-" && !yield(prefix+name, f) {
			return false
		}
	}
	return true
}
