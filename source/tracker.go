package source

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/kubebus/bridge/checkpoint"
	"github.com/kubebus/bridge/resourceversion"
)

// entry is all the source keeps of one object: enough to tell a change
// from a repeat, and to report the object's delete when a list finds it
// gone. Objects themselves are handed on and forgotten. What only some
// sources need (the view's state, the old object) is kept beside it, in
// the tracker's maps, so that an entry stays small.
type entry struct {
	id ident
	// prior marks a position loaded from the checkpoint and not yet matched
	// by a list or a watch event.
	prior bool
	// listing marks a state handed on by a list of the object's namespace
	// that has not ended yet: perhaps by an attempt that failed, served
	// by an API server whose cache was ahead of the one that serves the
	// list that ends.
	listing bool
	// out marks an object that is not in the view: nothing of it was
	// published, or its last delta was a Deleted one (it left the
	// filter). Without a view every object is in.
	out bool
	// fromBus marks a prior position that only the bus knew (see
	// priorFromBus): if no list matches it, it is a ghost on the bus.
	fromBus bool
}

// tracker turns what one resource's reflectors report (lists and watch
// events, through their stores) into deltas. It remembers each object's uid
// and resourceVersion, starting from the checkpoint of what was published
// before, so that a list, on start or after a watch could not resume,
// yields exactly what changed: unchanged objects nothing, changed ones
// Updated, new ones Added, and objects missing from it Deleted.
type tracker struct {
	res     Resource
	handler Handler
	keepOld bool
	log     *slog.Logger
	now     func() time.Time
	// view, when set, makes the deltas those of the view (see View).
	view     View
	observer Observer
	// startRV is the resource's revision when the source started, read
	// when the resource was published before (see dateFrom). What the
	// first list finds entering the stream that no change of the object
	// explains is dated by it, not by the object's older
	// resourceVersion: an object that may have left the view in an
	// earlier run (its delete dated by the object's resourceVersion
	// then, or by an earlier such revision), and, when the view may have
	// changed, an object whose state the new view changes. So a consumer
	// that saw the object leave takes it back.
	startRV string
	// lastRV is the resource's last committed resourceVersion when the
	// source started (checkpoint.Snapshot.LastResourceVersion).
	lastRV string
	// viewMoved reports that the view may differ from the one the prior
	// positions were published through (see viewChanged): intents are
	// then dated by startRV too.
	viewMoved bool
	// revision reads the resource's revision again (see newerStart);
	// waited is set once it was waited for.
	revision func() (string, error)
	waited   bool

	mu    sync.Mutex
	known map[string]entry
	// views holds the object's state in the view (Delta.View) when it is
	// in one, by key; olds its last state, kept only for
	// Options.OldObject.
	views map[string]string
	olds  map[string]*unstructured.Unstructured
	// lists counts the complete lists made by the reflector of each
	// namespace ("" for all namespaces); listRV is the resourceVersion of
	// its latest.
	lists  map[string]int
	listRV map[string]string
	// namespaces is how many reflectors the resource has; allListed is
	// closed once each has made its first list.
	namespaces int
	allListed  chan struct{}
	// ghosts counts the deletes of objects only the bus knew (ghosted).
	ghosts int
	// repairs are the keys whose states found by the first list repair
	// the bus (see busPrior.repairs); repaired counts them by kind.
	repairs  map[string]Drift
	repaired map[Drift]int
	// foreign are objects on the bus, by key and uid, that the cluster
	// holds and the source does not select (see confirmGhosts).
	foreign map[string]string
}

func newTracker(res Resource, prior map[string]checkpoint.Position, fromBus map[string]bool, namespaces int, h Handler, keepOld bool, log *slog.Logger) *tracker {
	known := make(map[string]entry, len(prior))
	views := map[string]string{}
	for k, p := range prior {
		known[k] = entry{id: newIdent(p.UID, p.ResourceVersion), prior: true, fromBus: fromBus[k]}
		if p.View != "" {
			views[k] = p.View
		}
	}
	return &tracker{res: res, known: known, views: views, olds: map[string]*unstructured.Unstructured{},
		handler: h, keepOld: keepOld, log: log, now: time.Now, observer: noObserver{},
		lists: map[string]int{}, listRV: map[string]string{},
		namespaces: namespaces, allListed: make(chan struct{})}
}

// object is one object as a list or a watch event reports it to the
// tracker: its identity, and the object to hand on, decoded (the parsed
// path) or as the API server sent it (the raw path).
type object struct {
	namespace, name, uid, rv string
	parsed                   *unstructured.Unstructured
	raw                      *RawObject
}

func parsedObject(u *unstructured.Unstructured) object {
	return object{namespace: u.GetNamespace(), name: u.GetName(), uid: string(u.GetUID()), rv: u.GetResourceVersion(), parsed: u}
}

func (o *object) key() string { return ObjectKey(o.namespace, o.name) }

// replace takes a complete list of decoded objects made by the reflector
// of namespace ns, as listItem and endList do.
func (t *tracker) replace(ns string, items []*unstructured.Unstructured, rv string) (relist bool) {
	listed := make(map[string]bool, len(items))
	for _, u := range items {
		o := parsedObject(u)
		t.listItem(o)
		listed[o.key()] = true
	}
	return t.endList(ns, listed, rv)
}

// listItem hands on an object that a list reports, compared with what is
// known of it, marked snapshot: as it arrives when the list is streamed,
// or once the whole list is in. A list retried after it failed midway
// hands its objects on again: those handed on before, unchanged, produce
// nothing.
func (t *tracker) listItem(o object) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.observe(o, true)
}

// endList takes the end of a complete list made by the reflector of
// namespace ns ("" for all namespaces) at resourceVersion rv, whose
// objects were handed to listItem; listed holds their keys. Known objects
// of the namespace that it lacks are deleted: on a later list (a relist),
// all of them; on the first list of a namespace, those that an earlier
// attempt at it handed on, while positions from the checkpoint that it
// does not match stay until finishInitialList, since another namespace's
// list may match them. An object that an earlier attempt at the list
// handed on at a resourceVersion newer than rv stays too: the list is
// older than that state (an API server whose cache lags served it), and
// the watch from rv brings the object's later states, its delete
// included. It reports whether this was a relist.
func (t *tracker) endList(ns string, listed map[string]bool, rv string) (relist bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lists[ns]++
	t.listRV[ns] = rv
	relist = t.lists[ns] > 1
	var gone []string
	for k, e := range t.known {
		if !inNamespaceKey(k, ns) {
			continue
		}
		newer := e.listing && e.id.olderThan(rv)
		if e.listing {
			e.listing = false
			t.known[k] = e
		}
		if !listed[k] && (relist || !e.prior) && !newer {
			gone = append(gone, k)
		}
	}
	slices.Sort(gone)
	for _, k := range gone {
		e := t.known[k]
		pos := t.position(k, e)
		t.forget(k)
		if !e.out {
			t.handler.OnDelta(t.vanished(k, pos, rv))
		}
	}
	if !relist && len(t.lists) == t.namespaces {
		close(t.allListed)
	}
	return relist
}

// inNamespaceKey reports whether the object of key belongs to the list of
// namespace ns ("" for all namespaces).
func inNamespaceKey(key, ns string) bool {
	return ns == "" || strings.HasPrefix(key, ns+"/")
}

// observe hands on an object that a list or a watch's ADDED event reports,
// compared with what is known of it. Called with t.mu held.
func (t *tracker) observe(u object, listed bool) {
	key := u.key()
	e, found := t.known[key]
	switch {
	case !found:
		t.enter(key, u, listed, listed)
	case e.id.hasUID(u.uid) && e.id.notNewer(u.rv) && t.current(key, e):
		// Published before, unchanged since (in a view of the same
		// definition); or an older state than the one known, which a
		// list served from a lagging cache can hold, or than the
		// revision a change of the view was dated by: handing it on
		// would take the object back in time.
		e.prior = false
		e.listing = e.listing || listed
		if t.keepOld && t.olds[key] == nil {
			t.olds[key] = u.parsed
		}
		t.known[key] = e
	case e.id.hasUID(u.uid) && e.id.isIntent():
		// An intent (checkpoint.Intent): the object may or may not
		// have been published; publish it as created (or, when it is
		// not in the view, as gone from it).
		t.change(key, e, u, listed, true)
	case e.id.hasUID(u.uid):
		t.change(key, e, u, listed, listed || e.prior)
	default:
		// Deleted and created again unseen: the old object was gone
		// before the new one was made.
		if !e.out {
			t.handler.OnDelta(t.ghosted(t.vanished(key, t.position(key, e), u.rv), e))
		}
		t.enter(key, u, listed, true)
	}
}

// dateFrom prepares the first list's dating: snap is what was published
// of the resource before, and revision reads the resource's current
// revision. A resource of which nothing was committed needs none, and
// costs no read: nothing of it can have left the stream. Otherwise the
// revision is read whatever the view, since what the checkpoint holds
// cannot tell whether an earlier run had one: a filter's definition is
// kept only in the positions published through it, and a new filter
// publishes again neither the objects that stay in it unchanged nor
// those that leave it (their positions go); positions merged from the
// bus carry no view state at all. It returns the revision read, "" when
// none was.
func (t *tracker) dateFrom(snap checkpoint.Snapshot, revision func() (string, error)) (string, error) {
	t.viewMoved = viewChanged(t.view, snap.Objects, snap.LastResourceVersion)
	if snap.LastResourceVersion == "" && !t.viewMoved {
		return "", nil
	}
	rv, err := revision()
	if err != nil {
		return "", err
	}
	t.startRV, t.lastRV, t.revision = rv, snap.LastResourceVersion, revision
	return rv, nil
}

// How long, and how often, newerStart reads the revision again. The API
// server renews its identity lease every 10 s (and a cluster with nodes
// or controllers writes far more often), so a revision moves within it.
const (
	newerWait = 30 * time.Second
	newerPoll = 200 * time.Millisecond
)

// newerStart makes startRV newer than lastRV, reading the revision again
// until it is, for at most newerWait. A state dated by startRV must be
// newer than every delta committed before (a consumer drops a state at
// the resourceVersion it holds), and the revision read at start is not
// when nothing at all was written to the cluster since the last one was
// committed. Run calls it before the lists begin, so that nothing is
// dated past the list it came from; it waits once at most (later calls,
// from dated, return at once).
func (t *tracker) newerStart() {
	if t.waited || t.revision == nil {
		return
	}
	t.waited = true
	if c, err := resourceversion.Compare(t.startRV, t.lastRV); err != nil || c > 0 {
		return
	}
	t.log.Info("the resource's revision is the last one published: waiting for it to move, to date what enters the stream again by it",
		"resource", t.res.Name(), "resourceVersion", t.startRV)
	deadline := t.now().Add(newerWait)
	for t.now().Before(deadline) {
		time.Sleep(newerPoll)
		rv, err := t.revision()
		if err != nil {
			t.log.Warn("reading the resource's revision again failed", "resource", t.res.Name(), "err", err)
			return
		}
		if resourceversion.Before(t.lastRV, rv) {
			t.startRV = rv
			return
		}
	}
	t.log.Warn("the resource's revision did not move past the last one published; objects that enter the stream again unchanged are dated by it, and a consumer that saw them leave at it may keep them out until they change",
		"resource", t.res.Name(), "resourceVersion", t.startRV, "waited", newerWait)
}

// viewChanged reports whether the view the tracker applies may differ
// from the one the objects in prior were published through, given the
// resource's last committed resourceVersion. A position's state cannot
// tell: an object whose projection a new definition left as it was is
// not published, and keeps the state of the definition before. So any
// view, now or then (a state says so, or every object left it), on a
// resource published before, counts; only a first start, or a start
// without a view after runs without one, does not.
func viewChanged(v View, prior map[string]checkpoint.Position, lastRV string) bool {
	if v == nil || (len(prior) == 0 && lastRV == "") {
		return false
	}
	if !v.Current("") || len(prior) == 0 {
		return true
	}
	for _, p := range prior {
		if p.View != "" {
			return true
		}
	}
	return false
}

// dated dates d, a delta of the first list that no change of its object
// explains, by startRV when the object itself is older than it. A delete
// may carry the resourceVersion a consumer holds; any other state must be
// newer (see newerStart). Called with t.mu held.
func (t *tracker) dated(d *Delta) {
	if t.startRV == "" {
		return
	}
	if d.Type != Deleted {
		t.newerStart()
	}
	if resourceversion.Before(d.ResourceVersion, t.startRV) {
		d.ResourceVersion = t.startRV
	}
}

// current reports whether what is known of e was found under the view
// in use: otherwise an unchanged object is compared again.
func (t *tracker) current(key string, e entry) bool {
	return t.view == nil || e.out || t.view.Current(t.views[key])
}

// enter hands on an object not known before (or known as another
// object, since deleted) as Added, when it is in the view. Called with
// t.mu held.
func (t *tracker) enter(key string, u object, listed, snapshot bool) {
	in, v := t.apply(u)
	t.remember(key, u, v, listed)
	if !in {
		t.observer.Suppressed(t.res, NotInView)
		return
	}
	d := t.delta(Added, u, snapshot)
	t.viewed(&d, v)
	t.repairing(&d, key, listed)
	if listed && !resourceversion.Before(t.lastRV, u.rv) {
		// Not changed since the last delta committed: it may have left
		// the view, in an earlier run, at that resourceVersion or at a
		// dated revision.
		t.dated(&d)
	}
	t.handler.OnDelta(d)
}

// change hands on a new state of a known object e, as its change in the
// view: Updated, or Added when it enters the view, Deleted
// (ReasonLeftFilter) when it leaves, nothing when the view does not
// change. Called with t.mu held.
func (t *tracker) change(key string, e entry, u object, listed, snapshot bool) {
	in, v := t.apply(u)
	was, old := t.views[key], t.olds[key]
	t.remember(key, u, v, listed)
	intent := e.id.isIntent()
	// An object no newer than known compared again: the view changed,
	// not it.
	redo := !intent && e.id.notNewer(u.rv)
	emit := func(d Delta) {
		if redo || (intent && t.viewMoved) {
			t.dated(&d)
		}
		if d.Type != Deleted {
			t.repairing(&d, key, listed)
		}
		t.handler.OnDelta(d)
	}
	switch {
	case !in && (e.out && !intent):
		t.observer.Suppressed(t.res, NotInView)
		return
	case !in:
		// Gone from the view: deleted from the stream, though the
		// object stays.
		d := t.delta(Deleted, u, snapshot)
		t.viewed(&d, v)
		d.View, d.Reason = "", ReasonLeftFilter
		emit(d)
		return
	case e.out || intent:
		d := t.delta(Added, u, snapshot)
		t.viewed(&d, v)
		emit(d)
		return
	}
	// In the view before and after: an Updated delta, unless what is
	// published of the object stays the same. A state recorded without
	// a content hash ("") says nothing of content, so a new
	// resourceVersion is a change then.
	if t.view != nil && (redo || (was != "" && v.State != "")) && t.view.Unchanged(was, v.State) {
		t.observer.Suppressed(t.res, ProjectionUnchanged)
		return
	}
	d := t.delta(Updated, u, snapshot)
	t.viewed(&d, v)
	if t.keepOld {
		d.OldObject = old
	}
	emit(d)
}

// apply evaluates the view on u: whether it is in, and what is
// published of it.
func (t *tracker) apply(u object) (bool, ViewResult) {
	if t.view == nil || u.raw == nil {
		return true, ViewResult{In: true, Object: u.raw}
	}
	v := t.view.Apply(t.res, u.raw)
	return v.In, v
}

// viewed makes d carry what the view publishes of its object.
func (t *tracker) viewed(d *Delta, v ViewResult) {
	if v.Object != nil {
		d.Raw = v.Object
	}
	d.View = v.State
}

// update hands on an object that a watch's MODIFIED event reports.
func (t *tracker) update(u *unstructured.Unstructured) { t.updateObject(parsedObject(u)) }

func (t *tracker) updateObject(u object) {
	t.mu.Lock()
	defer t.mu.Unlock()
	key := u.key()
	e, found := t.known[key]
	if !found || !e.id.hasUID(u.uid) || e.prior {
		t.observe(u, false)
		return
	}
	if e.id.notNewer(u.rv) {
		return // nothing newer than what is known
	}
	t.change(key, e, u, false, false)
}

// add hands on an object that a watch's ADDED event reports.
func (t *tracker) add(u *unstructured.Unstructured) { t.addObject(parsedObject(u)) }

func (t *tracker) addObject(u object) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.observe(u, false)
}

// remove hands on the final state of an object that a watch's DELETED
// event reports.
func (t *tracker) remove(u *unstructured.Unstructured) { t.removeObject(parsedObject(u)) }

func (t *tracker) removeObject(u object) {
	t.mu.Lock()
	defer t.mu.Unlock()
	key := u.key()
	e, found := t.known[key]
	t.forget(key)
	in, v := t.apply(u)
	if found && e.id.hasUID(u.uid) {
		in = !e.out // was it in the view: then it leaves it
	}
	if !in {
		t.observer.Suppressed(t.res, NotInView)
		return
	}
	d := t.delta(Deleted, u, false)
	t.viewed(&d, v)
	d.View = ""
	t.handler.OnDelta(d)
}

// remember records u as the object's latest known state, in the view or
// not as v says, and marks it listing when a list reports it. The
// strings are copied so that nothing of the object stays reachable.
func (t *tracker) remember(key string, u object, v ViewResult, listing bool) {
	e := entry{id: newIdent(u.uid, u.rv), listing: listing, out: !v.In}
	if e.id.odd != nil {
		e.id.odd = &oddIdent{uid: strings.Clone(u.uid), rv: strings.Clone(u.rv)}
	}
	// A new key replaces the one stored too: it is copied.
	key = strings.Clone(key)
	t.known[key] = e
	if v.State != "" {
		t.views[key] = v.State
	} else {
		delete(t.views, key)
	}
	if t.keepOld {
		t.olds[key] = u.parsed
	}
}

// forget drops what the tracker keeps of the object of key.
func (t *tracker) forget(key string) {
	delete(t.known, key)
	delete(t.views, key)
	delete(t.olds, key)
}

// position is what was last published of the object of key, as the
// checkpoint records it.
func (t *tracker) position(key string, e entry) checkpoint.Position {
	return checkpoint.Position{UID: e.id.UID(), ResourceVersion: e.id.RV(), View: t.views[key]}
}

// newestList is the highest resourceVersion of the reflectors' latest
// lists. Called with t.mu held.
func (t *tracker) newestList() string {
	newest := ""
	for _, rv := range t.listRV {
		if newest == "" || resourceversion.Before(newest, rv) {
			newest = rv
		}
	}
	return newest
}

// finishInitialList reports every checkpointed object that no list or
// watch event matched as deleted, and ends the initial diff. Call it once
// every reflector has listed. It returns how many deletes it reported. The
// deletes carry the resourceVersion of the list that found the objects
// gone, so that an object's resourceVersions never go backwards in the
// stream, even when its live delete was published before a crash and not
// checkpointed.
//
// Objects that only the bus knew (Options.Bus) are not reported: they are
// returned, as ghosts to confirm, since the bus may hold objects of the
// cluster that this source does not select (another bridge's, under
// another selector).
func (t *tracker) finishInitialList() (int, []ghost) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var gone []string
	for k, e := range t.known {
		if e.prior {
			gone = append(gone, k)
		}
	}
	slices.Sort(gone)
	rv := t.newestList()
	var ghosts []ghost
	for _, k := range gone {
		e := t.known[k]
		pos := t.position(k, e)
		t.forget(k)
		if e.fromBus {
			ghosts = append(ghosts, ghost{key: k, pos: pos, rv: rv})
			continue
		}
		t.handler.OnDelta(t.vanished(k, pos, rv))
	}
	return len(gone) - len(ghosts), ghosts
}

// retire reports every object the tracker knows, in the view, as
// deleted, and forgets them all: its resource is no longer served. The
// deletes carry the newest resourceVersion the tracker knows, so that an
// object's resourceVersions never go backwards in the stream. It returns
// how many deletes it reported.
func (t *tracker) retire() int { return t.retireWith("") }

// retireWith is retire, its deletes marked with reason.
func (t *tracker) retireWith(reason Reason) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	rv := t.newestList()
	keys := make([]string, 0, len(t.known))
	for k, e := range t.known {
		keys = append(keys, k)
		if !e.id.isIntent() && e.id.olderThan(rv) {
			rv = e.id.RV()
		}
	}
	slices.Sort(keys)
	n := 0
	for _, k := range keys {
		e := t.known[k]
		pos := t.position(k, e)
		t.forget(k)
		if !e.out {
			d := t.vanished(k, pos, rv)
			d.Reason = reason
			t.handler.OnDelta(d)
			n++
		}
	}
	t.known = map[string]entry{}
	t.views = map[string]string{}
	t.olds = map[string]*unstructured.Unstructured{}
	return n
}

// size is how many objects the tracker knows.
func (t *tracker) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.known)
}

func (t *tracker) delta(typ DeltaType, u object, snapshot bool) Delta {
	return Delta{
		Type:            typ,
		Resource:        t.res,
		Namespace:       u.namespace,
		Name:            u.name,
		UID:             types.UID(u.uid),
		ResourceVersion: u.rv,
		Observed:        t.now(),
		Snapshot:        snapshot,
		Object:          u.parsed,
		Raw:             u.raw,
	}
}

// vanished is the delete of an object known only by its key and the
// position last published for it. Its object carries that identity (no
// resourceVersion when the position is an intent); the
// delta carries rv, a resourceVersion by which the object was gone (the
// last published one when rv is empty).
func (t *tracker) vanished(key string, pos checkpoint.Position, rv string) Delta {
	if rv == "" {
		rv = pos.ResourceVersion
	}
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(t.res.APIVersion())
	u.SetKind(t.res.Kind)
	u.SetNamespace(ns)
	u.SetName(name)
	if pos.UID != "" {
		u.SetUID(types.UID(pos.UID))
	}
	if !pos.IsIntent() {
		u.SetResourceVersion(pos.ResourceVersion)
	}
	return Delta{
		Type:            Deleted,
		Resource:        t.res,
		Namespace:       ns,
		Name:            name,
		UID:             types.UID(pos.UID),
		ResourceVersion: rv,
		Observed:        t.now(),
		Snapshot:        true,
		Object:          u,
	}
}

// ghosted marks d, the delete of the object of e, as a repair when only
// the bus knew the object: it was never in the checkpoint, so the bus
// held it though the cluster did not.
func (t *tracker) ghosted(d Delta, e entry) Delta {
	if e.fromBus && e.prior {
		d.Reason = ReasonReconciled
		t.ghosts++
	}
	return d
}

// repairing marks d, a state of the object of key that a list found, as a
// repair of the bus when the bus lacked the object, or held it older,
// though the checkpoint held it as published. Called with t.mu held.
func (t *tracker) repairing(d *Delta, key string, listed bool) {
	kind, ok := t.repairs[key]
	if !listed || !ok {
		return
	}
	delete(t.repairs, key)
	d.Reason = ReasonReconciled
	if t.repaired == nil {
		t.repaired = map[Drift]int{}
	}
	t.repaired[kind]++
}

// ghost is an object the bus holds live that the tracker does not know
// in the view: its position on the bus, and the resourceVersion by which
// it was found gone.
type ghost struct {
	key string
	pos checkpoint.Position
	rv  string
	// known is true when the tracker knows the object, out of the view:
	// the cluster holds it, but the stream must not.
	known bool
}

// deleteGhost hands on the delete of g, marked ReasonReconciled, unless
// the tracker has come to know an object in the view under its key
// meanwhile. It reports whether it did.
func (t *tracker) deleteGhost(g ghost) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.known[g.key]; ok && !e.out {
		return false
	}
	d := t.vanished(g.key, g.pos, g.rv)
	d.Reason = ReasonReconciled
	t.ghosts++
	t.handler.OnDelta(d)
	return true
}

func typeName(obj any) string { return fmt.Sprintf("%T", obj) }
