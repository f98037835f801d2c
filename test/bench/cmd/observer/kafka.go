package main

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/kubebus/bridge/consumer"
	consumerkafka "github.com/kubebus/bridge/consumer/kafka"
)

// informKafka runs a client-go informer on the ConfigMaps of o.namespace
// read from the bridge's Kafka topic through the consumer package (a
// consumer/kafka Log under a consumer.ListerWatcher), and returns once it
// has synced. Besides the informer's events ("bus" lines), it reports each
// record as the Log hands it to the ListerWatcher ("record" lines, with
// the event's time), so that the informer machinery's share can be told
// from the Kafka client's. The returned function stops it.
func informKafka(ctx context.Context, o options, out *lines) (stop func(), err error) {
	client, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(o.kafka, ",")...))
	if err != nil {
		return nil, err
	}
	opts := consumer.Options{
		Cluster:   o.cluster,
		Resource:  schema.GroupResource{Resource: "configmaps"},
		Namespace: o.namespace,
		Name:      "observer",
	}
	log, err := consumerkafka.NewLog(client, consumerkafka.Config{}, opts)
	if err != nil {
		client.Close()
		return nil, err
	}
	lw, err := consumer.NewListerWatcher(timedLog{Log: log, out: out}, opts)
	if err != nil {
		client.Close()
		return nil, err
	}
	inf := cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, cache.Indexers{})
	seen := func(obj any) {
		now := time.Now()
		if u, ok := obj.(*unstructured.Unstructured); ok {
			// The object's resourceVersion is a Kafka position; the API
			// server's is in the annotation.
			out.add("bus", u.GetName(), u.GetAnnotations()[consumer.AnnotationResourceVersion], now)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, obj any) { seen(obj) },
	}); err != nil {
		lw.Close()
		client.Close()
		return nil, err
	}
	ictx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		inf.RunWithContext(ictx)
	}()
	stop = func() {
		cancel()
		<-done
		lw.Close()
		client.Close()
	}
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		stop()
		return nil, errors.New("the Kafka informer did not sync")
	}
	return stop, nil
}

// timedLog reports every event record its Log follows, when the Log
// hands it over.
type timedLog struct {
	consumer.Log
	out *lines
}

func (l timedLog) Follow(ctx context.Context, from string, fn func(consumer.Record) error) error {
	return l.Log.Follow(ctx, from, func(r consumer.Record) error {
		if m := r.Message; m != nil {
			l.out.add("record", m.Name, m.ResourceVersion, time.Now(), m.Time)
		}
		return fn(r)
	})
}
