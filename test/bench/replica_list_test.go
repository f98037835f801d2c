package bench

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The list part's shape.
const (
	// replicaListRounds rounds, each listing on both sides in turn, the
	// side that goes first alternating.
	replicaListRounds = 5
	// replicaListsPerRound whole LISTs, then as many paged ones, per side
	// and round.
	replicaListsPerRound = 10
	// replicaPageSize is the paged LIST's limit.
	replicaPageSize = 500
	// replicaListWarmUp lists of each kind per side come first, unmeasured:
	// connections, caches and the Go runtime's heap grow into their
	// working size.
	replicaListWarmUp = 2
)

// listTimes is what one side's lists took in one round, and the bytes they
// read on the wire.
type listTimes struct {
	whole, paged           []time.Duration
	wholeBytes, pagedBytes int64
}

// listClient asks one side, over one connection kept for every list.
type listClient struct {
	side replicaSide
	rest rest.Interface
	read byteCount
	// wholeParts is the most answers a whole LIST came in.
	wholeParts int
	// conn is the protocol and TLS version of the last answer, as
	// negotiated, for the notes.
	conn atomic.Value
}

func newListClient(b *testing.B, side replicaSide) *listClient {
	b.Helper()
	c := &listClient{side: side}
	rc := rest.CopyConfig(side.rc)
	rc.QPS = -1
	rc.Dial = c.read.dial
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return connNoter{rt, &c.conn} })
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		b.Fatal(err)
	}
	c.rest = kc.CoreV1().RESTClient()
	return c
}

// connNoter notes the protocol and TLS version of every answer.
type connNoter struct {
	next http.RoundTripper
	conn *atomic.Value
}

func (n connNoter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := n.next.RoundTrip(req)
	if err == nil {
		v := resp.Proto + " without TLS"
		if resp.TLS != nil {
			v = resp.Proto + " over " + tls.VersionName(resp.TLS.Version)
		}
		n.conn.Store(v)
	}
	return resp, err
}

// negotiated is the protocol and TLS version of c's last answer.
func (c *listClient) negotiated() string {
	v, _ := c.conn.Load().(string)
	return v
}

// lists runs the list part: it checks that both sides answer with every
// ConfigMap, then times them, and returns each side's times per round
// (index 0 the kube-apiserver's, 1 the replica's).
func (r *replicaRun) lists() [2][]listTimes {
	b := r.b
	clients := [2]*listClient{newListClient(b, r.sides[0]), newListClient(b, r.sides[1])}
	defer func() {
		r.negotiated = fmt.Sprintf("as negotiated: kube-apiserver %s, replica %s", clients[0].negotiated(), clients[1].negotiated())
		r.wholeParts = [2]int{clients[0].wholeParts, clients[1].wholeParts}
	}()
	for _, c := range clients {
		r.checkList(c.side)
		for range replicaListWarmUp {
			c.whole(b)
			c.paged(b)
		}
	}
	var out [2][]listTimes
	for round := range replicaListRounds {
		for i := range 2 {
			side := (round + i) % 2
			c := clients[side]
			var t listTimes
			before := c.read.Load()
			for range replicaListsPerRound {
				t.whole = append(t.whole, c.whole(b))
			}
			t.wholeBytes = (c.read.Load() - before) / replicaListsPerRound
			before = c.read.Load()
			for range replicaListsPerRound {
				t.paged = append(t.paged, c.paged(b))
			}
			t.pagedBytes = (c.read.Load() - before) / replicaListsPerRound
			out[side] = append(out[side], t)
		}
		if testing.Verbose() {
			b.Logf("list round %d: whole p50 %s (kube-apiserver) / %s (replica); paged p50 %s / %s", round,
				p50(out[0][round].whole), p50(out[1][round].whole), p50(out[0][round].paged), p50(out[1][round].paged))
		}
	}
	return out
}

func p50(d []time.Duration) time.Duration {
	return latencyPercentile(slices.Sorted(slices.Values(d)), 0.5).Round(100 * time.Microsecond)
}

// checkList fails the benchmark unless side answers a whole LIST, and a
// paged one, with exactly the ConfigMaps written.
func (r *replicaRun) checkList(side replicaSide) {
	b := r.b
	kc, err := kubernetes.NewForConfig(side.rc)
	if err != nil {
		b.Fatal(err)
	}
	want := make([]string, len(r.refs))
	for i, ref := range r.refs {
		want[i] = ref.Name
	}
	slices.Sort(want)
	for _, limit := range []int64{0, replicaPageSize} {
		var got []string
		opts := metav1.ListOptions{Limit: limit}
		for {
			list, err := kc.CoreV1().ConfigMaps(replicaNamespace).List(b.Context(), opts)
			if err != nil {
				b.Fatalf("%s: list configmaps (limit %d): %v", side.name, limit, err)
			}
			for _, cm := range list.Items {
				got = append(got, cm.Name)
			}
			if opts.Continue = list.Continue; opts.Continue == "" {
				break
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			b.Fatalf("%s: list configmaps (limit %d) answered %d objects, want the %d written", side.name, limit, len(got), len(want))
		}
	}
}

// whole times one LIST of the namespace's ConfigMaps, until the last byte
// of its answer is read.
//
// A whole LIST is one answer on the API server. A server that answers it
// in parts, with a continue token (the replica caps a list at its
// MaxLimit), is followed to the end, so that both sides are timed on every
// object; c.wholeParts counts the answers, for the notes.
func (c *listClient) whole(b *testing.B) time.Duration {
	b.Helper()
	t0 := time.Now()
	parts := 1
	for next := c.get(b, false, ""); next != ""; parts++ {
		next = c.get(b, false, next)
	}
	took := time.Since(t0)
	c.wholeParts = max(c.wholeParts, parts)
	return took
}

// paged times a LIST in pages of replicaPageSize, each asked once the one
// before is read, until the last byte of the last page is read.
func (c *listClient) paged(b *testing.B) time.Duration {
	b.Helper()
	t0 := time.Now()
	next := c.get(b, true, "")
	for next != "" {
		next = c.get(b, true, next)
	}
	return time.Since(t0)
}

// get reads one answer to a LIST, whole or a page of replicaPageSize from
// cont, to its end, and returns its continue token. Only the list's
// metadata is decoded, and the rest read as bytes: the client's own work
// is kept as small as it can be, so that it does not hide the servers'
// difference. checkList has checked, untimed, that both sides answer with
// every object.
func (c *listClient) get(b *testing.B, paged bool, cont string) string {
	b.Helper()
	req := c.rest.Get().Namespace(replicaNamespace).Resource("configmaps").SetHeader("Accept", "application/json")
	if paged {
		req = req.Param("limit", strconv.Itoa(replicaPageSize))
	}
	if cont != "" {
		req = req.Param("continue", cont)
	}
	body, err := req.Stream(b.Context())
	if err != nil {
		b.Fatalf("%s: LIST configmaps: %v", c.side.name, err)
	}
	defer body.Close()
	next, err := continueOf(body)
	if err != nil {
		b.Fatalf("%s: LIST configmaps: %v", c.side.name, err)
	}
	return next
}

// continueOf reads a list's JSON to its end and returns its continue
// token. Both servers write the list's metadata before its items, so the
// items are read as bytes, not decoded.
func continueOf(r io.Reader) (string, error) {
	dec := json.NewDecoder(r)
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", fmt.Errorf("not a JSON object (%v)", err)
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return "", err
		}
		if key != "metadata" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return "", err
			}
			continue
		}
		var md struct {
			Continue string `json:"continue"`
		}
		if err := dec.Decode(&md); err != nil {
			return "", err
		}
		_, err = io.Copy(io.Discard, io.MultiReader(dec.Buffered(), r))
		return md.Continue, err
	}
	return "", errors.New("no metadata")
}
