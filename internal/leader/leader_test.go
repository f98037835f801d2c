package leader

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// timing is the election timing of the tests: short, with the ratios the
// bridge's defaults have.
var timing = Config{LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond}

// patience bounds every wait for an election to move.
const patience = 30 * time.Second

// replica is one Run of the election, and what it reports.
type replica struct {
	role    Role
	leading chan bool     // each call of the leading callback
	stopped chan workEnd  // the end of each run of the work
	said    chan string   // messages it logs
	ended   chan struct{} // closed when Run has returned
	err     error         // Run's result, once ended is closed
	cancel  func()        // a graceful stop
	broken  *atomic.Bool  // set: every call to the API server fails
	name    string
}

// workEnd is when the work's context ended, and its cause.
type workEnd struct {
	at    time.Time
	cause error
}

// start runs the election in ns as identity name, with a client whose
// calls fail while the replica's broken is set. The end of t stops it.
func start(t *testing.T, rc *rest.Config, ns, name string) *replica {
	t.Helper()
	r := &replica{
		leading: make(chan bool, 8),
		stopped: make(chan workEnd, 8),
		said:    make(chan string, 64),
		ended:   make(chan struct{}),
		broken:  &atomic.Bool{},
		name:    name,
	}
	rc = rest.CopyConfig(rc)
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if r.broken.Load() {
				return nil, errors.New("the API server cannot be reached (test)")
			}
			return rt.RoundTrip(req)
		})
	})
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := timing
	cfg.Namespace, cfg.Name, cfg.Identity = ns, "bridge", name
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	work := func(ctx context.Context) error {
		<-ctx.Done()
		r.stopped <- workEnd{time.Now(), context.Cause(ctx)}
		return nil
	}
	go func() {
		defer close(r.ended)
		r.err = Run(ctx, kc, cfg, slog.New(saidHandler(r.said)), work, func(l bool) {
			r.role.Set(l)
			r.leading <- l
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.ended:
		case <-time.After(patience):
			t.Errorf("%s: Run still running %s after its context ended", name, patience)
		}
	})
	return r
}

// awaitEnd waits for Run to return, and returns its error.
func (r *replica) awaitEnd(t *testing.T) error {
	t.Helper()
	await(t, r.ended, "end of "+r.name+"'s Run")
	return r.err
}

// await waits for a value from ch, failing t after patience.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(patience):
		t.Fatalf("no %s within %s", what, patience)
		panic("unreachable")
	}
}

// awaitSaid waits until r logs a message that starts with msg.
func (r *replica) awaitSaid(t *testing.T, msg string) {
	t.Helper()
	for {
		if got := await(t, r.said, r.name+" logging "+msg); strings.HasPrefix(got, msg) {
			return
		}
	}
}

// A standby is ready whatever its work would say; the leader's readiness
// is its work's. When the leader stops, the standby takes over and its
// readiness becomes its work's.
func TestStandbyIsReady(t *testing.T) {
	rc, ns := apiServer(t)
	notReady := func() error { return errors.New("initial state not published yet") }

	first := start(t, rc, ns, "first")
	if !await(t, first.leading, "first leading") {
		t.Fatal("first: told it stopped leading before it led")
	}
	second := start(t, rc, ns, "second")
	second.awaitSaid(t, "standing by")
	if err := second.role.Readiness(notReady)(); err != nil {
		t.Errorf("standby's readiness: %v, want ready", err)
	}
	if err := first.role.Readiness(notReady)(); err == nil {
		t.Error("leader's readiness: nil, want its work's error")
	}

	first.cancel()
	if err := first.awaitEnd(t); err != nil {
		t.Errorf("first: Run after a graceful stop: %v, want nil", err)
	}
	if !await(t, second.leading, "second leading") {
		t.Fatal("second: told it stopped leading before it led")
	}
	if err := second.role.Readiness(notReady)(); err == nil {
		t.Error("new leader's readiness: nil, want its work's error")
	}
	if err := second.role.Readiness(func() error { return nil })(); err != nil {
		t.Errorf("new leader's readiness: %v, want its work's nil", err)
	}
}

// A leader that cannot renew its lease stops its work, with cause
// ErrLostLeadership, before the standby may take the lease; Run then
// returns ErrLostLeadership.
func TestLeaseLostWhileLeading(t *testing.T) {
	rc, ns := apiServer(t)
	first := start(t, rc, ns, "first")
	if !await(t, first.leading, "first leading") {
		t.Fatal("first: told it stopped leading before it led")
	}
	second := start(t, rc, ns, "second")
	second.awaitSaid(t, "standing by")

	broken := time.Now()
	first.broken.Store(true)
	end := await(t, first.stopped, "end of the first's work")
	if !errors.Is(end.cause, ErrLostLeadership) {
		t.Errorf("first: work's context ended with cause %v, want ErrLostLeadership", end.cause)
	}
	if took := end.at.Sub(broken); took > timing.RenewDeadline+2*timing.RetryPeriod {
		t.Errorf("first: work stopped %s after renewals began to fail, want within the renew deadline %s", took, timing.RenewDeadline)
	}
	if l := await(t, first.leading, "first told it stopped leading"); l {
		t.Error("first: told it leads again, want it stopped leading")
	}
	if first.role.Leading() {
		t.Error("first: its Role still leads")
	}
	if err := first.awaitEnd(t); !errors.Is(err, ErrLostLeadership) {
		t.Errorf("first: Run returned %v, want ErrLostLeadership", err)
	}

	if !await(t, second.leading, "second leading") {
		t.Fatal("second: told it stopped leading before it led")
	}
	took := time.Now()
	if !end.at.Before(took) {
		t.Errorf("second led at %s, before the first's work stopped at %s", took.Format(time.StampMilli), end.at.Format(time.StampMilli))
	}
	t.Logf("renewals failing: the first's work stopped after %s; the second led %s after that",
		end.at.Sub(broken).Round(time.Millisecond), took.Sub(end.at).Round(time.Millisecond))
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// saidHandler sends the message of every record to ch, dropping it when
// ch is full.
type saidHandler chan<- string

func (h saidHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h saidHandler) Handle(_ context.Context, r slog.Record) error {
	select {
	case h <- r.Message:
	default:
	}
	return nil
}
func (h saidHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h saidHandler) WithGroup(string) slog.Handler      { return h }
