// Package metrics defines the bridge's Prometheus metrics. Every name
// starts with bridge_. The metrics live in their own registry, served on
// BRIDGE_METRICS_ADDR at /metrics, never in the global one.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/kubebus/bridge/internal/version"
	"github.com/kubebus/bridge/source"
)

// Metrics are the bridge's counters, gauges and histograms. Its methods
// are safe for concurrent use and never block.
type Metrics struct {
	Registry *prometheus.Registry

	observed  *prometheus.CounterVec
	published *prometheus.CounterVec
	failed    *prometheus.CounterVec
	omitted   *prometheus.CounterVec
	latency   prometheus.Histogram
	relists   *prometheus.CounterVec
	watchErrs *prometheus.CounterVec
	throttled *prometheus.CounterVec
	synced    *prometheus.GaugeVec
	served    *prometheus.GaugeVec
	leader    prometheus.Gauge
	fresh     *prometheus.CounterVec
	dropped   *prometheus.CounterVec
	// notCompacted is bridge_kafka_topic_not_compacted (see kafka.go).
	notCompacted *prometheus.GaugeVec
	// view holds the metrics of the view (see view.go).
	view viewMetrics
	// resources follow the resources watched (see resources.go).
	resources resourceMetrics
	// reconcile describes the reconcile passes (see reconcile.go).
	reconcile reconcileMetrics
}

// Gauges read state that other parts of the bridge own, at scrape time.
type Gauges struct {
	// PendingDeltas is the number of deltas waiting or in flight.
	PendingDeltas func() float64
	// PendingBytes is what the deltas waiting or in flight weigh against
	// BRIDGE_MAX_PENDING_BYTES.
	PendingBytes func() float64
	// HeldSeconds is how long, in all, the source waited for room among
	// the deltas not done; Holding how many of its deltas wait for it now.
	HeldSeconds func() float64
	Holding     func() float64
	// CheckpointLag is the number of published positions not yet
	// checkpointed.
	CheckpointLag func() float64
	// LastCheckpoint is when the checkpoint was last flushed.
	LastCheckpoint func() time.Time
	// SinkUp is 1 while the sink can reach its bus, else 0.
	SinkUp func() float64
}

// New makes the metrics and registers them, with Go and process metrics,
// in a new registry.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		observed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bridge_deltas_observed_total",
			Help: "Deltas the informers reported, by resource and type.",
		}, []string{"resource", "type"}),
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bridge_deltas_published_total",
			Help: "Deltas the sink acknowledged, by resource and type.",
		}, []string{"resource", "type"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bridge_deltas_failed_total",
			Help: "Failed attempts to publish a delta, by resource, type and whether the failure was terminal (the delta was skipped) or retried.",
		}, []string{"resource", "type", "reason"}),
		omitted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bridge_deltas_content_omitted_total",
			Help: "Deltas whose event was larger than the bus takes, published without the object's content (marked contentomitted), by resource and type.",
		}, []string{"resource", "type"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "bridge_publish_duration_seconds",
			Help: "Time from handing a batch to the sink until it returned.",
			// 1 ms to about 16 s: a healthy bus acknowledges in
			// milliseconds; the top buckets catch a struggling one.
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}),
		relists: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bridge_relists_total",
			Help: "Lists after the first, made because a watch could not resume (for example 410 Gone), by resource.",
		}, []string{"resource"}),
		watchErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bridge_watch_errors_total",
			Help: "Failed lists or watches, and watches ended by an error or cut for silence, by resource.",
		}, []string{"resource"}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bridge_api_throttled_total",
			Help: "Answers 429 Too Many Requests (the API server's Priority and Fairness refusing a call) to the bridge's lists and watches, by resource and verb (list or watch). Each is retried: client-go waits out its Retry-After, then the bridge backs off; never fatal.",
		}, []string{"resource", "verb"}),
		synced: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "bridge_informer_synced",
			Help: "1 once the resource's initial list was delivered, else 0.",
		}, []string{"resource"}),
		served: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "bridge_resource_served",
			Help: "1 while the API server serves the resource at the version watched, else 0 (its CRD deleted, or serving other versions only; the bridge exits if it stays so).",
		}, []string{"resource", "version"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "bridge_leader",
			Help: "1 while this replica holds the lease and publishes, else 0.",
		}),
		fresh: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bridge_checkpoint_fresh_starts_total",
			Help: "Starts that found the file checkpoint empty or corrupt (reason) and, as BRIDGE_CHECKPOINT_FRESH_START allows, moved it aside and began afresh: every object was published again and deletes made while the bridge was down were lost. At most 1 per process; alert on > 0.",
		}, []string{"reason"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bridge_checkpoint_records_dropped_total",
			Help: "Checkpoint records left out because they are larger than the nats-kv or kafka store takes (only an object name of tens of kilobytes makes one; its events cannot be published either), by resource. Such an object is tried again on every start.",
		}, []string{"resource"}),
		notCompacted: newNotCompacted(),
		view:         newViewMetrics(),
		resources:    newResourceMetrics(),
		reconcile:    newReconcileMetrics(),
	}
	// Both reasons are there from the start, at 0, so that an alert on
	// them sees a value instead of nothing.
	m.fresh.WithLabelValues("empty")
	m.fresh.WithLabelValues("corrupt")
	m.Registry.MustRegister(m.observed, m.published, m.failed, m.omitted, m.latency, m.relists, m.watchErrs, m.throttled, m.synced, m.served, m.leader, m.fresh, m.dropped, m.notCompacted,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.Registry.MustRegister(m.view.collectors()...)
	m.Registry.MustRegister(m.resources.collectors()...)
	m.Registry.MustRegister(m.reconcile.collectors()...)
	m.Registry.MustRegister(buildInfo(version.Read()))
	return m
}

// Watch registers the gauges that read g at scrape time. Call it once.
func (m *Metrics) Watch(g Gauges) {
	m.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "bridge_pending_deltas",
			Help: "Deltas waiting to be published or in flight.",
		}, g.PendingDeltas),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "bridge_pending_bytes",
			Help: "Bytes of objects (their JSON) of the deltas waiting to be published or in flight; at BRIDGE_MAX_PENDING_BYTES the bridge stops reading from the API server until the bus takes some.",
		}, g.PendingBytes),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "bridge_source_held_seconds_total",
			Help: "Time the bridge spent not reading from the API server because the changes waiting for the bus reached BRIDGE_MAX_PENDING_BYTES: the bus is slower than the cluster's changes.",
		}, g.HeldSeconds),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "bridge_source_held",
			Help: "Changes the bridge has read from the API server that wait for room among those waiting for the bus (BRIDGE_MAX_PENDING_BYTES); while above 0, the watches they came from are not read.",
		}, g.Holding),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "bridge_checkpoint_lag",
			Help: "Positions the sink acknowledged that are not checkpointed yet.",
		}, g.CheckpointLag),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "bridge_checkpoint_last_flush_timestamp_seconds",
			Help: "When the checkpoint was last flushed, in seconds since the epoch; 0 before the first flush.",
		}, func() float64 {
			t := g.LastCheckpoint()
			if t.IsZero() {
				return 0
			}
			return float64(t.UnixNano()) / 1e9
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "bridge_sink_up",
			Help: "1 while the sink can reach its bus, else 0.",
		}, g.SinkUp),
	)
}

// Observed counts a delta the source reported.
func (m *Metrics) Observed(d *source.Delta) {
	m.observed.WithLabelValues(d.Resource.Name(), string(d.Type)).Inc()
}

// Published counts a delta the sink acknowledged.
func (m *Metrics) Published(d *source.Delta) {
	m.published.WithLabelValues(d.Resource.Name(), string(d.Type)).Inc()
}

// Failed counts a failed attempt to publish d.
func (m *Metrics) Failed(d *source.Delta, terminal bool) {
	reason := "retried"
	if terminal {
		reason = "terminal"
	}
	m.failed.WithLabelValues(d.Resource.Name(), string(d.Type), reason).Inc()
}

// Omitted counts a delta published without its object's content, because
// its full event was larger than the bus takes.
func (m *Metrics) Omitted(d *source.Delta) {
	m.omitted.WithLabelValues(d.Resource.Name(), string(d.Type)).Inc()
}

// PublishDuration records how long one Publish call took.
func (m *Metrics) PublishDuration(d time.Duration) { m.latency.Observe(d.Seconds()) }

// Relisted counts a relist of res.
func (m *Metrics) Relisted(res source.Resource) { m.relists.WithLabelValues(res.Name()).Inc() }

var _ source.ThrottleObserver = (*Metrics)(nil)

// Throttled counts an answer 429 to a list or watch of res.
func (m *Metrics) Throttled(res source.Resource, verb source.Verb) {
	m.throttled.WithLabelValues(res.Name(), string(verb)).Inc()
}

// WatchError counts a failed list or watch of res.
func (m *Metrics) WatchError(res source.Resource) { m.watchErrs.WithLabelValues(res.Name()).Inc() }

// Synced records whether res delivered its initial list.
func (m *Metrics) Synced(res source.Resource, synced bool) {
	v := 0.0
	if synced {
		v = 1
	}
	m.synced.WithLabelValues(res.Name()).Set(v)
}

var _ source.ServedObserver = (*Metrics)(nil)

// Served records whether res is served at the version watched.
func (m *Metrics) Served(res source.Resource, served bool) {
	v := 0.0
	if served {
		v = 1
	}
	m.served.WithLabelValues(res.Name(), res.Version).Set(v)
}

// CheckpointFreshStart counts a start that set an unreadable checkpoint
// aside, for reason "empty" or "corrupt".
func (m *Metrics) CheckpointFreshStart(reason string) { m.fresh.WithLabelValues(reason).Inc() }

// CheckpointRecordDropped counts a record of resource that the checkpoint
// store left out as too large for it.
func (m *Metrics) CheckpointRecordDropped(resource string) {
	m.dropped.WithLabelValues(resource).Inc()
}

// Leader records whether this replica leads.
func (m *Metrics) Leader(leading bool) {
	v := 0.0
	if leading {
		v = 1
	}
	m.leader.Set(v)
}

// buildInfo is bridge_build_info: always 1, its labels naming the build.
func buildInfo(info version.Info) prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "bridge_build_info",
		Help: "Always 1; its labels name the running build: the module version, the VCS revision it was built from (\"\" when unknown; modified when the checkout had changes), and the Go toolchain.",
	}, []string{"version", "revision", "modified", "goversion"})
	modified := "false"
	if info.Modified {
		modified = "true"
	}
	g.WithLabelValues(info.Version, info.Revision, modified, info.GoVersion).Set(1)
	return g
}
