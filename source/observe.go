package source

import (
	"sync"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// observedWatch hands on a watch's events unchanged, showing each to a
// function first, which may drop it, and calls done once the watch has
// ended: ranOut is true when its events ran out, false when it was
// stopped.
type observedWatch struct {
	w    watch.Interface
	out  chan watch.Event
	stop chan struct{}
	once sync.Once
}

var _ watch.Interface = (*observedWatch)(nil)

func observe(w watch.Interface, see func(watch.Event) (handOn bool), done func(ranOut bool)) watch.Interface {
	o := &observedWatch{w: w, out: make(chan watch.Event), stop: make(chan struct{})}
	go func() {
		defer utilruntime.HandleCrash()
		ranOut := false
		defer func() { done(ranOut) }()
		defer close(o.out)
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					ranOut = true
					return
				}
				if !see(ev) {
					continue
				}
				select {
				case o.out <- ev:
				case <-o.stop:
					return
				}
			case <-o.stop:
				return
			}
		}
	}()
	return o
}

// Stop stops the watch underneath; safe to call more than once.
func (o *observedWatch) Stop() {
	o.once.Do(func() {
		close(o.stop)
		o.w.Stop()
	})
}

// ResultChan is closed once the watch has ended.
func (o *observedWatch) ResultChan() <-chan watch.Event { return o.out }
