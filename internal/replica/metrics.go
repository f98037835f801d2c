package replica

import (
	"context"
	"net/http"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/kubebus/bridge/internal/replica/access"
	"github.com/kubebus/bridge/internal/replica/cache"
	"github.com/kubebus/bridge/wire"
)

// metrics are the replica's Prometheus metrics.
type metrics struct {
	requests *prometheus.CounterVec
	watchers prometheus.Gauge
	served   prometheus.Counter
	denials  *prometheus.CounterVec
	cut      prometheus.Counter
	refused  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, s *Server) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubebus_replica_requests_total",
			Help: "Requests answered, by verb (get, list, watch, discovery, a write's verb, or none before authentication) and HTTP code.",
		}, []string{"verb", "code"}),
		watchers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubebus_replica_watchers",
			Help: "Watches being served.",
		}),
		served: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubebus_replica_objects_served_total",
			Help: "Objects served: by gets, in lists, and in watch events.",
		}),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubebus_replica_authorization_denials_total",
			Help: "Requests the access rules denied, by cluster (\"*\" for the all-clusters view, \"other\" for a cluster not on the bus) and resource (\"none\" for discovery, \"other\" for one no cluster publishes).",
		}, []string{"cluster", "resource"}),
		cut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubebus_replica_watchers_cut_total",
			Help: "Watches ended because the client read slower than changes arrived (REPLICA_WATCH_QUEUE).",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubebus_replica_watches_refused_total",
			Help: "Watches refused, 429, by the cap they reached: total (REPLICA_MAX_WATCHES) or per_user (REPLICA_MAX_WATCHES_PER_USER).",
		}, []string{"cap"}),
	}
	for _, c := range []string{"total", "per_user"} {
		m.refused.WithLabelValues(c)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.requests, m.watchers, m.served, m.denials, m.cut, m.refused, cacheCollector{s}} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

var (
	cacheObjectsDesc = prometheus.NewDesc("kubebus_replica_cache_objects",
		"Objects a cache holds, by cluster and resource.", []string{"cluster", "resource"}, nil)
	cacheWatchersDesc = prometheus.NewDesc("kubebus_replica_cache_watchers",
		"Watchers a cache feeds, by cluster and resource.", []string{"cluster", "resource"}, nil)
)

// cacheCollector reports every cache's size when scraped.
type cacheCollector struct{ s *Server }

func (c cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- cacheObjectsDesc
	ch <- cacheWatchersDesc
}

func (c cacheCollector) Collect(ch chan<- prometheus.Metric) {
	c.s.eachStore(func(cluster string, gr schema.GroupResource, st *cache.Store) {
		ch <- prometheus.MustNewConstMetric(cacheObjectsDesc, prometheus.GaugeValue, float64(st.Len()), cluster, gr.String())
		ch <- prometheus.MustNewConstMetric(cacheWatchersDesc, prometheus.GaugeValue, float64(st.Watchers()), cluster, gr.String())
	})
}

// Denied counts a request the access rules denied; it is the
// access.RulesFileConfig.OnDeny of the rules the server is given. The
// labels are bounded by what the bus publishes, whatever the request
// says: a cluster with no discovery document is "other", and so is a
// resource that its cluster (any cluster, for the all-clusters view)
// does not publish.
func (s *Server) Denied(cluster, resource string) {
	cl := cluster
	if cl != access.AllClusters {
		if _, ok := s.disc.cluster(cl); !ok {
			cl = "other"
		}
	}
	res := "none"
	if resource != "" {
		res = "other"
		// The label is bounded by the bus's resources, of every cluster.
		rs, _ := s.disc.resources(cluster)
		if cl == "other" || cl == access.AllClusters {
			rs = s.disc.merged(func(string) bool { return true })
		}
		if slices.ContainsFunc(rs, func(r wire.DiscoveredResource) bool { return r.Resource == resource }) {
			res = resource
		}
	}
	s.m.denials.WithLabelValues(cl, res).Inc()
}

// counted counts the requests h answers, by verb and code.
func (m *metrics) counted(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		var verb string
		h.ServeHTTP(rec, r.WithContext(withVerbSlot(r.Context(), &verb)))
		if verb == "" {
			verb = "none"
		}
		code := rec.code
		if code == 0 {
			code = http.StatusOK
		}
		m.requests.WithLabelValues(verb, strconv.Itoa(code)).Inc()
	})
}

// verbKey holds, in a request's context, a *string the request's verb is
// written to once known (after the request info is read).
type verbKey struct{}

func withVerbSlot(ctx context.Context, v *string) context.Context {
	return context.WithValue(ctx, verbKey{}, v)
}

func noteVerb(r *http.Request) {
	v, ok := r.Context().Value(verbKey{}).(*string)
	if !ok {
		return
	}
	if info, ok := request.RequestInfoFrom(r.Context()); ok {
		*v = info.Verb
		if !info.IsResourceRequest {
			*v = "discovery"
		}
	}
}

// statusRecorder notes the status code written; it flushes, for watches.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
