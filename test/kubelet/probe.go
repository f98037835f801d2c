package kubelet

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ProbeResult is one answer to a probe.
type ProbeResult struct {
	At   time.Time
	OK   bool
	Code int    // the HTTP status, 0 for a probe that got none
	Body string // the start of the answer, or the error
}

// prober runs one of a container's probes as the kubelet does: after the
// initial delay, every period, each with its timeout; the state flips
// after successThreshold successes in a row, or failureThreshold failures.
type prober struct {
	name  string
	probe *corev1.Probe
	url   string // for httpGet
	addr  string // for tcpSocket

	mu       sync.Mutex
	ok       bool // passing, by the thresholds
	results  []ProbeResult
	failedAt []time.Time // when the failures reached failureThreshold
}

// maxResults bounds the answers a prober keeps.
const maxResults = 1000

func newProber(name string, p *corev1.Probe, c *corev1.Container, host string) (*prober, error) {
	// A container is not ready until its readiness probe passes, and
	// alive until its liveness probe fails.
	pr := &prober{name: name, probe: p, ok: name != "readiness"}
	switch {
	case p.HTTPGet != nil:
		port, err := resolvePort(p.HTTPGet.Port, c)
		if err != nil {
			return nil, fmt.Errorf("%s probe: %w", name, err)
		}
		if p.HTTPGet.Host != "" {
			host = p.HTTPGet.Host
		}
		scheme := "http"
		if p.HTTPGet.Scheme == corev1.URISchemeHTTPS {
			return nil, fmt.Errorf("%s probe: HTTPS probes are not run by this kubelet", name)
		}
		pr.url = scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port)) + p.HTTPGet.Path
	case p.TCPSocket != nil:
		port, err := resolvePort(p.TCPSocket.Port, c)
		if err != nil {
			return nil, fmt.Errorf("%s probe: %w", name, err)
		}
		pr.addr = net.JoinHostPort(host, strconv.Itoa(port))
	default:
		return nil, fmt.Errorf("%s probe: only httpGet and tcpSocket probes are run by this kubelet", name)
	}
	return pr, nil
}

// resolvePort finds a probe's port, a number or the name of a container
// port.
func resolvePort(p intstr.IntOrString, c *corev1.Container) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("port %q is not a port of container %s", p.StrVal, c.Name)
}

// seconds is a probe field in seconds, with the API's default when 0.
func seconds(v, def int32) time.Duration {
	if v == 0 {
		v = def
	}
	return time.Duration(v) * time.Second
}

// run probes until ctx ends.
func (p *prober) run(ctx context.Context) {
	period := seconds(p.probe.PeriodSeconds, 10)
	timeout := seconds(p.probe.TimeoutSeconds, 1)
	success := max(int(p.probe.SuccessThreshold), 1)
	failure := max(int(p.probe.FailureThreshold), 1)
	if p.probe.FailureThreshold == 0 {
		failure = 3
	}
	delay := time.NewTimer(time.Duration(p.probe.InitialDelaySeconds) * time.Second)
	select {
	case <-ctx.Done():
		delay.Stop()
		return
	case <-delay.C:
	}
	tick := time.NewTicker(period)
	defer tick.Stop()
	succeeded, failed := 0, 0
	for {
		r := p.once(ctx, timeout)
		if ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		if len(p.results) == maxResults {
			p.results = p.results[1:]
		}
		p.results = append(p.results, r)
		if r.OK {
			succeeded, failed = succeeded+1, 0
			if succeeded >= success {
				p.ok = true
			}
		} else {
			succeeded, failed = 0, failed+1
			if failed == failure {
				p.ok = false
				p.failedAt = append(p.failedAt, r.At)
			}
		}
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// once probes once.
func (p *prober) once(ctx context.Context, timeout time.Duration) ProbeResult {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r := ProbeResult{At: time.Now()}
	if p.addr != "" {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", p.addr)
		if err != nil {
			r.Body = err.Error()
			return r
		}
		conn.Close()
		r.OK = true
		return r
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		r.Body = err.Error()
		return r
	}
	req.Header.Set("User-Agent", "kube-probe/1.37")
	resp, err := probeClient.Do(req)
	if err != nil {
		r.Body = err.Error()
		return r
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 10<<10))
	r.Code, r.Body = resp.StatusCode, string(body)
	// The kubelet counts 200 to 399 as success.
	r.OK = resp.StatusCode >= 200 && resp.StatusCode < 400
	return r
}

// probeClient does not follow redirects or keep connections, as the
// kubelet's prober.
var probeClient = &http.Client{
	Transport:     &http.Transport{DisableKeepAlives: true, Proxy: nil},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func (p *prober) passing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ok
}

func (p *prober) last() (ProbeResult, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.results) == 0 {
		return ProbeResult{}, false
	}
	return p.results[len(p.results)-1], true
}

func (p *prober) failures() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Time(nil), p.failedAt...)
}

func (p *prober) history() []ProbeResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]ProbeResult(nil), p.results...)
}
