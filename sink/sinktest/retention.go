package sinktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubebus/bridge/internal/event"
	"github.com/kubebus/bridge/sink"
	"github.com/kubebus/bridge/source"
	"github.com/kubebus/bridge/wire"
)

// RetentionResource is the resource of the messages KeepsNoBytes
// publishes; a sink that must know its resources in advance must take it.
var RetentionResource = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// RetentionCluster is the cluster of the messages KeepsNoBytes publishes.
const RetentionCluster = "retention"

// Stored is one message a bus holds, as read back: Msg is the message
// decoded from it, or Err why it could not be decoded.
type Stored struct {
	Msg *wire.Message
	Err error
}

// KeepsNoBytes checks that s keeps no reference to the bytes of the
// messages it publishes once Publish returned (see sink.Sink): it
// publishes a few batches of changes, of several objects each, small and
// large, each batch in one Publish, and as soon as each Publish returned
// writes event.PoisonByte over every byte of that batch's messages, as
// the bridge writes later events over them. Then it closes s, and reads
// back with read what the bus holds, until it holds as many messages as
// were published or ctx ends. Each must be the event published, byte for
// byte as re-encoded from what was read: a sink that sent bytes after
// Publish returned sent poison. It returns what differs, nil when
// nothing does.
//
// read returns every message the bus holds of RetentionResource, in any
// order; it is called until it returns enough or ctx ends, and its errors
// only end that wait.
func KeepsNoBytes(ctx context.Context, s sink.Sink, read func(ctx context.Context) ([]Stored, error)) error {
	batches := retentionBatches()
	want := map[string][]byte{}
	n := 0
	for i, batch := range batches {
		for _, m := range batch {
			ev, _ := m.MarshalJSON()
			want[m.ID] = bytes.Clone(ev)
		}
		n += len(batch)
		if err := s.Publish(ctx, batch); err != nil {
			return fmt.Errorf("batch %d: Publish: %w", i+1, err)
		}
		for _, m := range batch {
			poison(m.Encoded)
			poison(m.Data)
		}
	}
	if err := s.Close(ctx); err != nil {
		return fmt.Errorf("Close: %w", err)
	}

	var stored []Stored
	for {
		got, err := read(ctx)
		if err == nil {
			stored = got
			if len(stored) >= n {
				break
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the bus holds %d of the %d messages published (last read: %v): %w", len(stored), n, err, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}

	var problems []string
	seen := map[string]bool{}
	for i, st := range stored {
		if st.Err != nil {
			problems = append(problems, fmt.Sprintf("message %d on the bus cannot be read: %v", i+1, st.Err))
			continue
		}
		m := st.Msg
		ev, ok := want[m.ID]
		if !ok {
			problems = append(problems, fmt.Sprintf("message %d on the bus, %s, was never published", i+1, m.ID))
			continue
		}
		if seen[m.ID] {
			problems = append(problems, fmt.Sprintf("message %d on the bus, %s, is there twice", i+1, m.ID))
		}
		seen[m.ID] = true
		got := *m
		got.Encoded = nil
		if b, _ := got.MarshalJSON(); !bytes.Equal(b, ev) {
			problems = append(problems, fmt.Sprintf("message %s on the bus differs from the event published:\n got %.300q\nwant %.300q", m.ID, b, ev))
		}
	}
	for id := range want {
		if !seen[id] {
			problems = append(problems, fmt.Sprintf("event %s published, not on the bus", id))
		}
	}
	if len(problems) > 10 {
		problems = append(problems[:10], fmt.Sprintf("and %d more", len(problems)-10))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n"))
	}
	return nil
}

func poison(b []byte) {
	b = b[:cap(b)]
	for i := range b {
		b[i] = event.PoisonByte
	}
}

// retentionBatches are three batches of changes to four objects each:
// each object is created, updated and, in the last batch, deleted, some
// twice in a batch (a sink sends those in turn), their data from a few
// hundred bytes to 200 KiB.
func retentionBatches() [][]*wire.Message {
	enc := event.Encoder{Cluster: RetentionCluster}
	r := source.Resource{GroupVersionResource: RetentionResource, Kind: "ConfigMap", Namespaced: true}
	observed := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)
	sizes := []int{100, 3 << 10, 40 << 10, 200 << 10}
	msg := func(typ source.DeltaType, obj, rv int) *wire.Message {
		name := "object-" + strconv.Itoa(obj)
		u := &unstructured.Unstructured{Object: map[string]any{
			"data": map[string]any{"page": strings.Repeat(string(rune('a'+obj)), sizes[obj]) + "@" + strconv.Itoa(rv)},
		}}
		u.SetAPIVersion("v1")
		u.SetKind("ConfigMap")
		u.SetNamespace("team-a")
		u.SetName(name)
		u.SetUID(types.UID("uid-" + name))
		u.SetResourceVersion(strconv.Itoa(rv))
		d := source.Delta{
			Type: typ, Resource: r, Observed: observed.Add(time.Duration(rv) * time.Millisecond),
			Namespace: "team-a", Name: name, UID: u.GetUID(), ResourceVersion: u.GetResourceVersion(), Object: u,
		}
		m, err := enc.Encode(&d)
		if err != nil {
			panic("sinktest: encode " + name + ": " + err.Error())
		}
		return m
	}
	var batches [][]*wire.Message
	rv := 0
	for b, kinds := range [][]source.DeltaType{
		{source.Added, source.Updated},
		{source.Updated},
		{source.Updated, source.Deleted},
	} {
		var batch []*wire.Message
		for _, typ := range kinds {
			for obj := range sizes {
				rv++
				if b == 1 && obj%2 == 1 && typ == source.Updated {
					// An update of every other object only.
					continue
				}
				batch = append(batch, msg(typ, obj, rv))
			}
		}
		batches = append(batches, batch)
	}
	return batches
}
