package consumer_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/kubebus/bridge/consumer"
	"github.com/kubebus/bridge/wire"
)

// A transform turns the unstructured objects of the bus into typed ones,
// so that listers and handlers see *corev1.ConfigMap.
func ExampleNewListerWatcher_typed() {
	var log consumer.Log = exampleLog{} // consumer/nats.NewLog or consumer/kafka.NewLog
	lw, err := consumer.NewListerWatcher(log, consumer.Options{
		Cluster:  "prod-1",
		Resource: schema.GroupResource{Resource: "configmaps"},
		Name:     "configmaps",
	})
	if err != nil {
		panic(err)
	}
	defer lw.Close()

	inf := cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, cache.Indexers{})
	if err := inf.SetTransform(func(o any) (any, error) {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			return o, nil // a cache.DeletedFinalStateUnknown: already transformed
		}
		cm := &corev1.ConfigMap{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, cm); err != nil {
			return nil, fmt.Errorf("configmap %s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
		return cm, nil
	}); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go inf.RunWithContext(ctx)
	cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)

	cm := inf.GetStore().List()[0].(*corev1.ConfigMap)
	fmt.Println(cm.Name, cm.Data["color"], "API resourceVersion", cm.Annotations[consumer.AnnotationResourceVersion])
	// Output: settings blue API resourceVersion 42
}

// exampleLog is a Log holding one ConfigMap.
type exampleLog struct{}

func (exampleLog) ReadState(_ context.Context, fn func(consumer.Record) error) (string, error) {
	m := &wire.Message{}
	if err := m.UnmarshalJSON([]byte(`{"specversion":"1.0","id":"1","source":"kubebus/prod-1/configmaps",
		"type":"io.kubebus.configmap.added","subject":"default/settings","time":"2026-01-01T00:00:00Z",
		"resourceversion":"42","uid":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","kind":"ConfigMap","apiversion":"v1",
		"namespace":"default","name":"settings","cluster":"prod-1","snapshot":false,
		"data":{"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"default","name":"settings",
		"uid":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","resourceVersion":"42"},"data":{"color":"blue"}}}}`)); err != nil {
		return "", err
	}
	return "1", fn(consumer.Record{Key: "default/settings", Message: m, Position: "1"})
}

func (exampleLog) Follow(ctx context.Context, from string, fn func(consumer.Record) error) error {
	for {
		if err := fn(consumer.Record{Position: from}); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
