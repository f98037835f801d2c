// Package metricstest reads the bridge's Prometheus /metrics page, for
// tests and benchmarks that check what a running bridge reports.
package metricstest

import (
	"fmt"
	"io"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Samples are the metric families of one scrape, by name.
type Samples map[string]*dto.MetricFamily

// Scrape reads the metrics page served at addr (host:port).
func Scrape(addr string) (Samples, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics from %s: %s", addr, resp.Status)
	}
	s, err := Parse(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("metrics from %s: %w", addr, err)
	}
	return s, nil
}

// Parse reads a metrics page in the Prometheus text format, such as
// another server's (the API server's /metrics).
func Parse(r io.Reader) (Samples, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(r)
}

// Sum adds the values of every series of the counter, gauge or untyped
// metric name; for a histogram or summary, it adds their sample counts.
// It is 0 for a metric the page does not have.
func (s Samples) Sum(name string) float64 {
	f := s[name]
	if f == nil {
		return 0
	}
	var n float64
	for _, m := range f.GetMetric() {
		switch {
		case m.Counter != nil:
			n += m.GetCounter().GetValue()
		case m.Gauge != nil:
			n += m.GetGauge().GetValue()
		case m.Untyped != nil:
			n += m.GetUntyped().GetValue()
		case m.Histogram != nil:
			n += float64(m.GetHistogram().GetSampleCount())
		case m.Summary != nil:
			n += float64(m.GetSummary().GetSampleCount())
		}
	}
	return n
}
