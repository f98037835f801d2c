package consumer

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCloseDuringWatch: Close called while a Watch starts returns at once,
// whichever comes first: a watch that Close missed would hold the
// ListerWatcher until the reflector stops reading it.
func TestCloseDuringWatch(t *testing.T) {
	log := newFakeLog()
	log.append(rec("added", cm("a", "a", 10)))
	for i := range 20000 {
		lw, err := NewListerWatcher(log, testOptions())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lw.List(metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		closed := make(chan error, 1)
		start := make(chan struct{})
		go func() {
			<-start
			closed <- lw.Close()
		}()
		close(start)
		w, err := lw.Watch(metav1.ListOptions{ResourceVersion: "p1"})
		if err != nil && !errors.Is(err, ErrClosed) {
			t.Fatal(err)
		}
		select {
		case err := <-closed:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("round %d: Close still waits 3s after a Watch that started as it was called", i)
		}
		if w != nil {
			w.Stop()
		}
	}
}
