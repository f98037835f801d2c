package consumer

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kubebus/bridge/wire"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// fakeLog is an in-memory Log: records in order, positions "p<n>" (n
// records read). ReadState keeps the latest record of each key, as the
// state layout does.
type fakeLog struct {
	mu      sync.Mutex
	recs    []Record
	changed chan struct{}
	// expireBelow: a Follow at a position below it fails with ErrExpired,
	// at once or as soon as it wakes up.
	expireBelow int
	// failFollows: so many next Follows fail at once with a plain error.
	failFollows int

	reads, follows atomic.Int64
}

func newFakeLog() *fakeLog { return &fakeLog{changed: make(chan struct{})} }

func fakePos(n int) string { return "p" + strconv.Itoa(n) }

func parseFakePos(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(s, "p"))
	if err != nil || !strings.HasPrefix(s, "p") {
		return 0, fmt.Errorf("fake log: position %q: %w", s, ErrExpired)
	}
	return n, nil
}

// append adds records to the log and wakes its Follows.
func (f *fakeLog) append(recs ...Record) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range recs {
		r.Position = fakePos(len(f.recs) + 1)
		f.recs = append(f.recs, r)
	}
	f.wake()
}

// expire appends recs (at least one) and makes every position before
// them unfollowable, as a compaction or an expired delete does.
func (f *fakeLog) expire(recs ...Record) {
	f.append(recs...)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.expireBelow = len(f.recs) - len(recs) + 1
	f.wake()
}

// failNext makes the Follow in progress, and the n-1 after it, fail with
// a plain error.
func (f *fakeLog) failNext(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failFollows = n
	f.wake()
}

func (f *fakeLog) wake() {
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeLog) ReadState(ctx context.Context, fn func(Record) error) (string, error) {
	f.reads.Add(1)
	f.mu.Lock()
	recs := f.recs
	f.mu.Unlock()
	last := map[string]int{}
	for i, r := range recs {
		last[r.Key] = i
	}
	for i, r := range recs {
		if last[r.Key] != i {
			continue
		}
		if err := fn(r); err != nil {
			return "", err
		}
	}
	return fakePos(len(recs)), nil
}

func (f *fakeLog) Follow(ctx context.Context, from string, fn func(Record) error) error {
	f.follows.Add(1)
	n, err := parseFakePos(from)
	if err != nil {
		return err
	}
	for {
		f.mu.Lock()
		if f.failFollows > 0 {
			f.failFollows--
			f.mu.Unlock()
			return fmt.Errorf("fake log: bus unreachable")
		}
		if n < f.expireBelow || n > len(f.recs) {
			f.mu.Unlock()
			return fmt.Errorf("fake log: follow from %s: %w", fakePos(n), ErrExpired)
		}
		recs, changed := f.recs[n:], f.changed
		f.mu.Unlock()
		for _, r := range recs {
			if err := fn(r); err != nil {
				return err
			}
			n++
		}
		if err := fn(Record{Position: fakePos(n)}); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		case <-time.After(2 * time.Second):
		}
	}
}

const testCluster = "c1"

var testResource = schema.GroupResource{Resource: "configmaps"}

// obj is one state of a ConfigMap for a test.
type obj struct {
	ns, name, uid string
	rv            int
	labels        map[string]string
}

// busKey is the object's key on the fake bus.
func (o obj) busKey() string {
	return "kube." + testCluster + ".core.configmaps." + o.ns + "." + o.name
}

// rec makes the bridge's record of an action on o.
func rec(action string, o obj) Record {
	meta := map[string]any{"name": o.name, "uid": o.uid, "resourceVersion": strconv.Itoa(o.rv)}
	if o.ns != "" {
		meta["namespace"] = o.ns
	}
	if o.labels != nil {
		meta["labels"] = o.labels
	}
	data, _ := json.Marshal(map[string]any{"object": map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": map[string]any{"rv": strconv.Itoa(o.rv)},
	}})
	return Record{Key: o.busKey(), Message: &wire.Message{
		ID:              o.uid + "-" + strconv.Itoa(o.rv) + "-" + action,
		Source:          "kubebus/" + testCluster + "/configmaps",
		Type:            "io.kubebus.configmap." + action,
		Subject:         objectKey(o.ns, o.name),
		Time:            time.Unix(1, 0),
		Action:          action,
		Resource:        schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		ResourceVersion: strconv.Itoa(o.rv),
		UID:             o.uid,
		Kind:            "ConfigMap",
		APIVersion:      "v1",
		Namespace:       o.ns,
		Name:            o.name,
		Cluster:         testCluster,
		Data:            data,
	}}
}

// tombstone is a record that says the object of o's bus key is gone.
func tombstone(o obj) Record { return Record{Key: o.busKey()} }

func testOptions() Options {
	return Options{Cluster: testCluster, Resource: testResource, Name: "test"}
}
