package metricstest

import (
	"net"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func TestScrapeAndSum(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "things_total", Help: "h"}, []string{"kind"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "level", Help: "h"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "took_seconds", Help: "h"})
	reg.MustRegister(c, g, h)
	c.WithLabelValues("a").Add(2)
	c.WithLabelValues("b").Add(3)
	g.Set(7)
	h.Observe(0.1)
	h.Observe(0.2)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	go srv.Serve(ln)
	defer srv.Close()

	s, err := Scrape(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{"things_total": 5, "level": 7, "took_seconds": 2, "missing": 0} {
		if got := s.Sum(name); got != want {
			t.Errorf("Sum(%s) = %v, want %v", name, got, want)
		}
	}
	if _, err := Scrape("127.0.0.1:1"); err == nil {
		t.Error("Scrape of a closed port did not fail")
	}
}
