package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/consumer"
	natssink "github.com/kubebus/bridge/sink/nats"
	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/wire"
)

var configmaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// env is an embedded NATS server with the bridge's state stream.
type env struct {
	t    *testing.T
	js   jetstream.JetStream
	tmpl *wire.SubjectTemplate
}

// newEnv starts a server and creates the stream KUBE in the state layout
// with the given delete grace; mod changes the config before.
func newEnv(t *testing.T, deleteTTL time.Duration, mod func(*jetstream.StreamConfig)) *env {
	t.Helper()
	srv := natstest.Start(t, natstest.Options{})
	js := srv.JetStream(t)
	tmpl, err := wire.ParseSubjectTemplate(wire.DefaultStateSubject, "kube")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, js: js, tmpl: tmpl}
	e.createStream(deleteTTL, mod)
	return e
}

func (e *env) createStream(deleteTTL time.Duration, mod func(*jetstream.StreamConfig)) {
	e.t.Helper()
	cfg := jetstream.StreamConfig{
		Name:              "KUBE",
		Subjects:          []string{"kube.>"},
		Storage:           jetstream.FileStorage,
		MaxMsgsPerSubject: 1,
		AllowMsgTTL:       true,
		Duplicates:        time.Minute,
		Metadata: map[string]string{
			wire.MetadataLayout:    string(natssink.LayoutState),
			wire.MetadataDeleteTTL: deleteTTL.String(),
		},
	}
	if mod != nil {
		mod(&cfg)
	}
	if _, err := e.js.CreateStream(context.Background(), cfg); err != nil {
		e.t.Fatal(err)
	}
}

// object is one version of a ConfigMap as the bridge publishes it.
type object struct {
	cluster, namespace, name, uid, rv, action string
}

func (o object) message() *wire.Message {
	cluster := o.cluster
	if cluster == "" {
		cluster = "prod"
	}
	action := o.action
	if action == "" {
		action = "added"
	}
	data, _ := json.Marshal(map[string]any{"object": map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"namespace": o.namespace, "name": o.name, "uid": o.uid, "resourceVersion": o.rv},
	}})
	return &wire.Message{
		ID:     fmt.Sprintf("%s-%s-%s", o.uid, o.rv, action),
		Source: "/clusters/" + cluster + "/api/v1/configmaps", Type: "io.kubebus.object." + action,
		Subject: o.namespace + "/" + o.name, Time: time.Now().UTC(), Action: action, Resource: configmaps,
		ResourceVersion: o.rv, UID: o.uid, Kind: "ConfigMap", APIVersion: "v1",
		Namespace: o.namespace, Name: o.name, Cluster: cluster, Data: data,
	}
}

// publish stores o as the bridge does (structured mode); a delete lives
// ttl when ttl is set. It returns the stream sequence.
func (e *env) publish(o object, ttl time.Duration) uint64 {
	e.t.Helper()
	m := o.message()
	subj, err := e.tmpl.Subject(m)
	if err != nil {
		e.t.Fatal(err)
	}
	body, err := m.MarshalJSON()
	if err != nil {
		e.t.Fatal(err)
	}
	nm := &nats.Msg{Subject: subj, Data: body, Header: nats.Header{}}
	nm.Header.Set(wire.NATSMsgIDHeader, m.ID)
	nm.Header.Set(wire.NATSContentTypeHeader, wire.StructuredContentType)
	var opts []jetstream.PublishOpt
	if ttl > 0 {
		opts = append(opts, jetstream.WithMsgTTL(ttl))
	}
	ack, err := e.js.PublishMsg(context.Background(), nm, opts...)
	if err != nil {
		e.t.Fatalf("publish %s: %v", subj, err)
	}
	return ack.Sequence
}

// newLog returns a Log of ConfigMaps in cluster prod, with short timings.
func (e *env) newLog(opts consumer.Options) *Log {
	e.t.Helper()
	if opts.Cluster == "" {
		opts.Cluster = "prod"
	}
	if opts.Resource.Resource == "" {
		opts.Resource = configmaps.GroupResource()
	}
	l, err := NewLog(e.js, Config{}, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	l.progressEvery = 100 * time.Millisecond
	l.catchUpWait = 100 * time.Millisecond
	l.batch = 16
	return l
}

// readState reads the state within 10 s.
func readState(t *testing.T, l *Log) ([]consumer.Record, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var recs []consumer.Record
	pos, err := l.ReadState(ctx, func(r consumer.Record) error {
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		t.Fatalf("ReadState: %v", err)
	}
	return recs, pos
}

// follower runs Follow in the background.
type follower struct {
	recs   chan consumer.Record
	done   chan error
	cancel context.CancelFunc
}

func follow(t *testing.T, l *Log, from string) *follower {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{recs: make(chan consumer.Record, 10000), done: make(chan error, 1), cancel: cancel}
	go func() {
		f.done <- l.Follow(ctx, from, func(r consumer.Record) error {
			select {
			case f.recs <- r:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-f.done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Follow: %v", err)
		}
	})
	return f
}

// next returns the next record, failing the test after 10 s or when
// Follow ends.
func (f *follower) next(t *testing.T) consumer.Record {
	t.Helper()
	select {
	case r := <-f.recs:
		return r
	case err := <-f.done:
		f.done <- err
		t.Fatalf("Follow ended: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no record from Follow within 10s")
	}
	return consumer.Record{}
}

// nextMessage skips progress records.
func (f *follower) nextMessage(t *testing.T) consumer.Record {
	t.Helper()
	for {
		if r := f.next(t); !r.Progress() {
			return r
		}
	}
}

// followErr runs Follow from pos until it returns or a second passes
// after its first progress record; it returns Follow's error (nil when it
// followed).
func followErr(l *Log, from string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errCaught := errors.New("caught up")
	err := l.Follow(ctx, from, func(r consumer.Record) error {
		if r.Progress() {
			return errCaught
		}
		return nil
	})
	if errors.Is(err, errCaught) {
		return nil
	}
	return err
}

func mustPos(t *testing.T, s string) position {
	t.Helper()
	p, err := parsePosition(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
