// Package view is the bridge's materialized view of the watched objects:
// a filter (BRIDGE_FILTER, a CEL expression, package filter) that says
// which objects are in it, and a projection (BRIDGE_FIELDS,
// BRIDGE_DROP_FIELDS) that says what of them is published. A Definition
// implements source.View: the source reports the view's changes, not the
// cluster's.
//
// Guarantees:
//
//   - An object is in the view when the filter is true for it. An
//     evaluation that fails (a missing member, a value of another type,
//     the cost limit) counts as false; it is counted (ErrorObserver) and
//     logged at most once per ten seconds per resource, with the object's
//     key and the error, never the object.
//   - What is published of an object is its projection, made at the byte
//     level from the API server's bytes (rawobject.Project): members left
//     out, every other byte as sent.
//   - Each object in the view has a state, recorded with its position in
//     the checkpoint: the definition that made it and a hash of what was
//     published (xxhash64 of the projection less metadata.resourceVersion).
//     Equal hashes mean equal content, so an update that changes nothing
//     the view publishes is not published, across restarts too; a new
//     definition is told apart from the one a state was made by.
//   - Without a filter or a projection, Apply hands the object on as it
//     came, decodes nothing and hashes nothing.
//   - Only the members of the object the filter reads are decoded
//     (filter.Reads, rawobject.Meta.Extract), from where Scan found them.
package view

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/kubebus/bridge/internal/filter"
	"github.com/kubebus/bridge/internal/rawaccess"
	"github.com/kubebus/bridge/internal/rawobject"
	"github.com/kubebus/bridge/source"
)

// Config is a view's definition, parsed.
type Config struct {
	// Filter, when set, is the filter; nil lets every object in.
	Filter *filter.Filter
	// Fields, when not nil, are the paths the projection keeps (with the
	// object's identity); nil keeps everything.
	Fields []rawobject.Path
	// DropFields are the paths the projection leaves out.
	DropFields []rawobject.Path
	// KeepManagedFields keeps metadata.managedFields in what is
	// published, as BRIDGE_KEEP_MANAGED_FIELDS does without a view.
	KeepManagedFields bool
}

// Defined reports whether c filters or projects at all.
func (c Config) Defined() bool { return c.Filter != nil || c.projects() }

func (c Config) projects() bool { return c.Fields != nil || len(c.DropFields) > 0 }

// ErrorObserver is told of each evaluation of the filter that failed.
type ErrorObserver interface {
	FilterError(resource string)
}

// errorLogEvery bounds how often failed evaluations are logged per
// resource: one bad filter would otherwise log a line per object.
const errorLogEvery = 10 * time.Second

// Definition is a compiled view. It is safe for concurrent use.
type Definition struct {
	cfg      Config
	id       string // "" without a view; ends in 'p' when it projects
	reads    filter.Reads
	readTree *rawobject.Tree
	proj     rawobject.Projection

	obs     ErrorObserver
	log     *slog.Logger
	mu      sync.Mutex
	logging map[string]*rate.Sometimes // by resource
}

var _ source.View = (*Definition)(nil)

// New returns the view of cfg. obs and log are told of failed
// evaluations; either may be nil.
func New(cfg Config, obs ErrorObserver, log *slog.Logger) *Definition {
	d := &Definition{cfg: cfg, obs: obs, log: log, logging: map[string]*rate.Sometimes{}}
	if !cfg.Defined() {
		return d
	}
	d.id = definitionID(cfg)
	if cfg.Filter != nil {
		d.reads = cfg.Filter.Reads()
		var paths []rawobject.Path
		if d.reads.Whole {
			paths = append(paths, rawobject.Path{})
		}
		for _, p := range d.reads.Paths {
			paths = append(paths, namePath(p...))
		}
		if d.reads.Labels {
			paths = append(paths, namePath("metadata", "labels"))
		}
		if d.reads.Annotations {
			paths = append(paths, namePath("metadata", "annotations"))
		}
		if len(paths) > 0 {
			d.readTree = rawobject.NewTree(paths)
		}
	}
	d.proj.KeepManagedFields = cfg.KeepManagedFields
	if cfg.Fields != nil {
		d.proj.Keep = rawobject.NewTree(cfg.Fields)
	}
	if len(cfg.DropFields) > 0 {
		d.proj.Drop = rawobject.NewTree(cfg.DropFields)
	}
	return d
}

// Defined reports whether the view filters or projects.
func (d *Definition) Defined() bool { return d.id != "" }

// ID identifies the definition, as states carry it; "" without a view.
func (d *Definition) ID() string { return d.id }

// definitionID is the first 8 hex digits of SHA-256 of cfg, normalized,
// with a 'p' when cfg projects.
func definitionID(cfg Config) string {
	var b strings.Builder
	if cfg.Filter != nil {
		b.WriteString(cfg.Filter.String())
	}
	b.WriteString("\x00fields")
	if cfg.Fields != nil {
		for _, p := range cfg.Fields {
			b.WriteString("\x00" + p.String())
		}
	} else {
		b.WriteString("\x00*")
	}
	b.WriteString("\x00drop")
	for _, p := range cfg.DropFields {
		b.WriteString("\x00" + p.String())
	}
	b.WriteString("\x00managedFields=" + strconv.FormatBool(cfg.KeepManagedFields))
	sum := sha256.Sum256([]byte(b.String()))
	id := hex.EncodeToString(sum[:4])
	if cfg.projects() {
		id += "p"
	}
	return id
}

func namePath(names ...string) rawobject.Path {
	p := make(rawobject.Path, len(names))
	for i, n := range names {
		p[i] = rawobject.Step{Name: n}
	}
	return p
}

// Apply implements source.View.
func (d *Definition) Apply(res source.Resource, obj *source.RawObject) source.ViewResult {
	if d.id == "" {
		return source.ViewResult{In: true, Object: obj}
	}
	in := d.cfg.Filter == nil || d.match(res, obj)
	out, hash := obj, uint64(0)
	switch {
	case d.cfg.projects() || (d.cfg.KeepManagedFields && in):
		data, m, h := rawaccess.Meta(obj).Project(nil, obj.Data(), &d.proj)
		if d.cfg.projects() {
			out = rawaccess.New(data, m).(*source.RawObject)
		}
		hash = h
	case in:
		hash = rawaccess.Meta(obj).Hash(obj.Data())
	}
	r := source.ViewResult{In: in, Object: out}
	if in {
		r.State = d.id + "." + strconv.FormatUint(hash, 16)
	}
	return r
}

// match evaluates the filter on obj, counting and logging a failure.
func (d *Definition) match(res source.Resource, obj *source.RawObject) bool {
	m := rawaccess.Meta(obj)
	v := filter.Vars{Resource: res.Name(), Namespace: m.Namespace, Name: m.Name}
	if d.readTree != nil {
		o, err := m.Extract(obj.Data(), d.readTree)
		if err != nil {
			d.failed(res, obj, err)
			return false
		}
		v.Object = o
		if d.reads.Labels {
			v.Labels = stringMap(o, "labels")
		}
		if d.reads.Annotations {
			v.Annotations = stringMap(o, "annotations")
		}
	}
	ok, err := d.cfg.Filter.Match(&v)
	if err != nil {
		d.failed(res, obj, err)
		return false
	}
	return ok
}

// stringMap is metadata.<member> of o as the labels and annotations
// variables hold it: its string values.
func stringMap(o map[string]any, member string) map[string]string {
	md, _ := o["metadata"].(map[string]any)
	m, _ := md[member].(map[string]any)
	out := make(map[string]string, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

func (d *Definition) failed(res source.Resource, obj *source.RawObject, err error) {
	if d.obs != nil {
		d.obs.FilterError(res.Name())
	}
	if d.log == nil {
		return
	}
	d.mu.Lock()
	s := d.logging[res.Name()]
	if s == nil {
		s = &rate.Sometimes{Interval: errorLogEvery}
		d.logging[res.Name()] = s
	}
	d.mu.Unlock()
	s.Do(func() {
		d.log.Warn("the filter failed on an object, which is taken as not matching; such failures are logged at most once per 10s per resource and counted in bridge_filter_errors_total",
			"resource", res.Name(), "key", source.ObjectKey(obj.Meta().Namespace, obj.Meta().Name), "err", err)
	})
}

// Current implements source.View: state was made by this definition.
// Without a view, a state made by a view that projected nothing is
// current too: what it published is the whole object, as now.
func (d *Definition) Current(state string) bool {
	id, _, _ := strings.Cut(state, ".")
	if d.id == "" {
		return !projecting(id)
	}
	return id == d.id
}

// Unchanged implements source.View.
func (d *Definition) Unchanged(prev, next string) bool {
	pid, ph, pok := strings.Cut(prev, ".")
	nid, nh, nok := strings.Cut(next, ".")
	if pok && nok {
		return ph == nh
	}
	return !projecting(pid) && !projecting(nid)
}

// projecting reports whether a definition id is that of a view that
// projects.
func projecting(id string) bool { return strings.HasSuffix(id, "p") }
