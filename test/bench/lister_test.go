package bench

import (
	"bytes"
	"io"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// lister lists every ConfigMap as one request, the way a client-go client
// with its defaults asks (JSON, gzip offered by Go's transport), and
// counts the bytes it reads on the wire.
type lister struct {
	rest rest.Interface
	read byteCount
}

func newLister(b *testing.B, rc *rest.Config) *lister {
	b.Helper()
	l := &lister{}
	rc = rest.CopyConfig(rc)
	rc.QPS = -1
	rc.Dial = l.read.dial
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		b.Fatal(err)
	}
	l.rest = kc.CoreV1().RESTClient()
	return l
}

// list reads GET /api/v1/configmaps, unpaginated and at the latest
// resourceVersion, to its end, and returns its body (decompressed) and
// how many bytes were read on the wire for it.
func (l *lister) list(b *testing.B) ([]byte, int64) {
	b.Helper()
	before := l.read.Load()
	body, err := l.rest.Get().AbsPath("/api/v1/configmaps").SetHeader("Accept", "application/json").Stream(b.Context())
	if err != nil {
		b.Fatalf("LIST configmaps: %v", err)
	}
	defer body.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, body); err != nil {
		b.Fatalf("LIST configmaps: %v", err)
	}
	return buf.Bytes(), l.read.Load() - before
}
