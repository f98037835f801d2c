package consumer

import (
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
)

// now is the clock of snapshot flushes.
var now = time.Now

// logEvery is how often a kind of bad record is logged after its first
// three: a stream of them must not flood the log, and must not hide.
const logEvery = 1000

// badRecords counts bad records per reason for the log.
type badRecords struct {
	invalid, foreign, omitted atomic.Uint64
}

// logged reports whether the n-th bad record of a kind is logged.
func logged(n uint64) bool { return n <= 3 || n%logEvery == 0 }

// account counts and logs what a record did. Called with run held.
func (lw *ListerWatcher) account(r Record, out outcome) {
	if out.drop != "" {
		lw.c.dropped(out.drop).Add(1)
		if lw.m != nil {
			lw.m.dropped.WithLabelValues(lw.opts.Name, string(out.drop)).Inc()
		}
		var n uint64
		switch out.drop {
		case dropInvalid:
			n = lw.bad.invalid.Add(1)
		case dropForeign:
			n = lw.bad.foreign.Add(1)
		default:
			return
		}
		if logged(n) {
			lw.logger.Warn("consumer: record skipped", "reason", string(out.drop), "key", r.Key,
				"position", r.Position, "count", n, "err", out.err)
		}
		return
	}
	if out.omitted {
		lw.c.contentOmitted.Add(1)
		if n := lw.bad.omitted.Add(1); logged(n) {
			lw.logger.Info("consumer: event carries only its object's identity (contentomitted); handed on as such",
				"key", out.key, "count", n)
		}
	}
}

// remember writes what a record did to the table into the snapshot.
// Called with run held, after the record's events were made.
func (lw *ListerWatcher) remember(t *table, out outcome) {
	if lw.snap == nil || out.key == "" {
		return
	}
	if e, ok := t.keys[out.key]; ok {
		lw.snap.put(out.key, toSnap(e, out.raw))
	} else {
		lw.snap.del(out.key)
	}
}

// object returns the object of a change as the informer gets it, at
// position pos. Called with run held.
func (lw *ListerWatcher) object(t *table, ch change, pos string) *unstructured.Unstructured {
	if ch.obj != nil {
		stamp(ch.obj, pos)
		return ch.obj
	}
	if lw.snap != nil {
		if raw := lw.snap.object(ch.key); raw != nil {
			if u, err := parseObject(raw); err == nil {
				stamp(u, pos)
				return u
			}
		}
	}
	return stub(t.tm, ch.key, ch.last, pos)
}

// counted counts an event handed out.
func (lw *ListerWatcher) counted(typ watch.EventType) {
	lw.c.events.Add(1)
	if lw.m != nil {
		lw.m.events.WithLabelValues(lw.opts.Name, string(typ)).Inc()
	}
}

// flushSnapshot writes the snapshot if a flush is due (or force) at the
// table's position. Called with run held.
func (lw *ListerWatcher) flushSnapshot(force bool) {
	if lw.snap == nil || lw.applied == "" {
		return
	}
	t := now()
	if !force && !lw.snap.due(lw.applied, t) {
		return
	}
	if err := lw.snap.flush(lw.applied, t); err != nil {
		lw.c.snapshotErrors.Add(1)
		lw.logger.Warn("consumer: snapshot not written; will retry", "file", lw.opts.SnapshotFile, "err", err)
	}
}
