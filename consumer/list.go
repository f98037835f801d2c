package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// listed is what a list builds: the objects the informer will hold.
type listed map[string]listItem

type listItem struct {
	obj *unstructured.Unstructured
	raw json.RawMessage // kept only for the snapshot
}

// take applies the events of a record to the list.
func (l listed) take(out outcome, keepRaw bool) {
	for _, ch := range out.changes {
		if ch.typ == watch.Deleted {
			delete(l, ch.key)
			continue
		}
		it := listItem{obj: ch.obj}
		if keepRaw {
			it.raw = out.raw
		}
		l[ch.key] = it
	}
}

// ListWithContext implements cache.ListerWithContext. It ignores the
// options' resourceVersion and limit: it returns the whole state the bus
// holds now, always "not older than" what was asked, and never 410. Its
// resourceVersion is the position a Watch continues from.
//
// The first list of a ListerWatcher with a snapshot file that has a
// position is served from the file and the records after it; any other
// list reads the bus's state.
func (lw *ListerWatcher) ListWithContext(ctx context.Context, _ metav1.ListOptions) (runtime.Object, error) {
	if !lw.begin() {
		return nil, ErrClosed
	}
	defer lw.run.Unlock()
	first := !lw.listed
	if lw.snap != nil && first {
		t, l, pos, err := lw.listSnapshot(ctx)
		if err != nil {
			return nil, err
		}
		if t != nil {
			lw.c.snapshotLists.Add(1)
			lw.countList("snapshot")
			return lw.served(t, l, pos), nil
		}
	}
	t, l, pos, err := lw.listBus(ctx)
	if err != nil {
		return nil, err
	}
	lw.c.busLists.Add(1)
	lw.countList("bus")
	return lw.served(t, l, pos), nil
}

func (lw *ListerWatcher) countList(from string) {
	if lw.m != nil {
		lw.m.lists.WithLabelValues(lw.opts.Name, from).Inc()
	}
}

// listBus reads the bus's state.
func (lw *ListerWatcher) listBus(ctx context.Context) (*table, listed, string, error) {
	t, l := newTable(&lw.opts), listed{}
	pos, err := lw.log.ReadState(ctx, func(r Record) error {
		if r.Progress() {
			return nil
		}
		out := t.apply(r)
		lw.account(r, out)
		l.take(out, lw.snap != nil)
		return nil
	})
	if err != nil {
		return nil, nil, "", fmt.Errorf("consumer: list %s: read state: %w", lw.opts.Resource.String(), err)
	}
	if lw.snap != nil {
		lw.snap.clear()
		for key, e := range t.keys {
			lw.snap.put(key, toSnap(e, l[key].raw))
		}
	}
	return t, l, pos, nil
}

// errCaughtUp ends a snapshot's catch-up at the first progress record.
var errCaughtUp = errors.New("consumer: caught up")

// listSnapshot loads the snapshot and applies the records after its
// position, up to the first progress record. A nil table means the
// snapshot cannot serve (none, damaged, or its position expired): the
// caller reads the bus. An error is a failure of the bus.
func (lw *ListerWatcher) listSnapshot(ctx context.Context) (*table, listed, string, error) {
	t, l := newTable(&lw.opts), listed{}
	pos, err := lw.snap.load(func(key string, v snapValue) error {
		e, err := v.entry()
		if err != nil {
			return fmt.Errorf("key %q: %w", key, err)
		}
		t.remember(key, e)
		if e.held {
			u, err := parseObject(v.Object)
			if err != nil {
				return fmt.Errorf("key %q: %w", key, err)
			}
			if t.tm.kind == "" {
				t.tm = typeMeta{apiVersion: u.GetAPIVersion(), kind: u.GetKind()}
			}
			l[key] = listItem{obj: u}
		}
		return nil
	})
	if err != nil {
		lw.c.snapshotErrors.Add(1)
		lw.logger.Warn("consumer: snapshot unreadable; reading the bus instead", "file", lw.opts.SnapshotFile, "err", err)
		lw.snap.clear()
		return nil, nil, "", nil
	}
	if pos == "" {
		return nil, nil, "", nil
	}
	last := pos
	err = lw.log.Follow(ctx, pos, func(r Record) error {
		if r.Progress() {
			last = r.Position
			return errCaughtUp
		}
		out := t.apply(r)
		lw.account(r, out)
		l.take(out, false)
		lw.remember(t, out)
		last = r.Position
		return nil
	})
	switch {
	case errors.Is(err, errCaughtUp):
	case errors.Is(err, ErrExpired):
		lw.c.expired.Add(1)
		if lw.m != nil {
			lw.m.expired.WithLabelValues(lw.opts.Name).Inc()
		}
		lw.logger.Warn("consumer: snapshot's position expired on the bus (410); reading the bus instead",
			"file", lw.opts.SnapshotFile, "position", pos, "err", err)
		lw.snap.clear()
		return nil, nil, "", nil
	default:
		lw.snap.forget()
		return nil, nil, "", fmt.Errorf("consumer: list %s: follow snapshot from %s: %w", lw.opts.Resource.String(), pos, err)
	}
	return t, l, last, nil
}

// served makes t the ListerWatcher's state at pos, writes the snapshot,
// and returns the list. Called with run held.
func (lw *ListerWatcher) served(t *table, l listed, pos string) *unstructured.UnstructuredList {
	lw.t, lw.listed, lw.dirty = t, true, false
	lw.applied, lw.emitted = pos, pos
	lw.failures = 0
	lw.flushSnapshot(true)
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	list := &unstructured.UnstructuredList{Object: map[string]any{}, Items: make([]unstructured.Unstructured, 0, len(keys))}
	if t.tm.kind != "" {
		list.SetAPIVersion(t.tm.apiVersion)
		list.SetKind(t.tm.kind + "List")
	}
	list.SetResourceVersion(pos)
	for _, k := range keys {
		u := l[k].obj
		stamp(u, pos)
		list.Items = append(list.Items, *u)
	}
	lw.c.held.Store(uint64(len(keys)))
	return list
}
