// Package podphases is the part the informer examples share: a client-go
// SharedIndexInformer on a ListerWatcher of Pods from the bus, with a
// typed lister and an event handler that counts Pods by namespace and
// phase.
package podphases

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kubebus/bridge/consumer"
)

// Options are a ListerWatcher's options for the Pods of cluster, in
// namespace (all when empty), read by the client name.
func Options(cluster, namespace, name string, log *slog.Logger) consumer.Options {
	return consumer.Options{
		Cluster:   cluster,
		Resource:  schema.GroupResource{Resource: "pods"},
		Namespace: namespace,
		Name:      name,
		Logger:    log,
	}
}

// Watch runs a shared informer on lw, a ListerWatcher of Pods, until
// ctx ends. It prints a line when a Pod changes phase, and every interval
// in which something changed a summary of the Pods by namespace and phase.
func Watch(ctx context.Context, lw cache.ListerWatcher, interval time.Duration, out io.Writer) error {
	informer := cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	// The bus gives *unstructured.Unstructured; the informer caches typed
	// Pods, so the lister is client-go's PodLister and handlers get Pods.
	if err := informer.SetTransform(ToPod); err != nil {
		return err
	}
	counts := &phaseCounts{out: out, byNamespace: map[string]map[corev1.PodPhase]int{}}
	reg, err := informer.AddEventHandler(counts.handler())
	if err != nil {
		return err
	}
	lister := corev1listers.NewPodLister(informer.GetIndexer())

	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { informer.RunWithContext(ctx) })
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return nil // stopped before the state was read
	}
	counts.printf("synced at bus position %s\n", informer.LastSyncResourceVersion())
	counts.summary(lister)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			counts.summary(lister)
		}
	}
}

// ToPod is the informer's transform: it converts what the bus gives into
// a *corev1.Pod. An object that does not convert is kept with its
// metadata only (its phase unknown), so that one odd object cannot stop
// the informer.
func ToPod(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil // already converted: a transform must be idempotent
	}
	pod := &corev1.Pod{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, pod); err != nil {
		pod = &corev1.Pod{}
		pod.Namespace, pod.Name, pod.UID = u.GetNamespace(), u.GetName(), u.GetUID()
		pod.ResourceVersion, pod.Annotations = u.GetResourceVersion(), u.GetAnnotations()
	}
	return pod, nil
}

// phaseCounts counts Pods by namespace and phase from an informer's
// events. Its methods may be called concurrently.
type phaseCounts struct {
	mu          sync.Mutex
	out         io.Writer
	byNamespace map[string]map[corev1.PodPhase]int
	changed     bool
}

func (c *phaseCounts) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pod, ok := obj.(*corev1.Pod); ok {
				c.add(pod, 1)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*corev1.Pod)
			pod, ok2 := newObj.(*corev1.Pod)
			if !ok1 || !ok2 {
				return
			}
			c.add(old, -1)
			c.add(pod, 1)
			if old.Status.Phase != pod.Status.Phase {
				// metadata.resourceVersion is a bus position; the API
				// server's is in an annotation.
				c.printf("%s/%s: %s -> %s (API resourceVersion %s)\n", pod.Namespace, pod.Name,
					phase(old), phase(pod), pod.Annotations[consumer.AnnotationResourceVersion])
			}
		},
		DeleteFunc: func(obj any) {
			if gone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = gone.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				c.add(pod, -1)
			}
		},
	}
}

func (c *phaseCounts) add(pod *corev1.Pod, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	phases := c.byNamespace[pod.Namespace]
	if phases == nil {
		phases = map[corev1.PodPhase]int{}
		c.byNamespace[pod.Namespace] = phases
	}
	phases[phase(pod)] += n
	if phases[phase(pod)] == 0 {
		delete(phases, phase(pod))
	}
	if len(phases) == 0 {
		delete(c.byNamespace, pod.Namespace)
	}
	c.changed = true
}

// summary prints the counts if they changed since the last summary, with
// the number of Pods the lister holds:
//
//	3 pods in 2 namespaces
//	  team-a: Pending=1 Running=1
//	  team-b: Succeeded=1
func (c *phaseCounts) summary(lister corev1listers.PodLister) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.changed {
		return
	}
	c.changed = false
	pods, _ := lister.List(labels.Everything())
	fmt.Fprintf(c.out, "%s in %s\n", plural(len(pods), "pod"), plural(len(c.byNamespace), "namespace"))
	for _, ns := range slices.Sorted(maps.Keys(c.byNamespace)) {
		var parts []string
		for _, p := range slices.Sorted(maps.Keys(c.byNamespace[ns])) {
			parts = append(parts, fmt.Sprintf("%s=%d", p, c.byNamespace[ns][p]))
		}
		fmt.Fprintf(c.out, "  %s: %s\n", ns, strings.Join(parts, " "))
	}
}

func (c *phaseCounts) printf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(c.out, format, args...)
}

// phase is the Pod's phase, Unknown when it has none.
func phase(pod *corev1.Pod) corev1.PodPhase {
	if pod.Status.Phase == "" {
		return corev1.PodUnknown
	}
	return pod.Status.Phase
}

// plural is "1 pod", "2 pods".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
