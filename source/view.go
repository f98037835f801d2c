package source

// View is a materialized view of the watched objects: a filter, which
// says which objects are in it, and a projection, which says what of
// them is published. With a view, the source reports the changes of the
// view, not of the cluster: an object that starts to match is Added, one
// that stops matching is Deleted (Reason ReasonLeftFilter), and an update
// that leaves the object's projection as it was is not reported at all.
// Package view implements it; any other implementation may be given to
// Options.View, from any module: a projection is a RawObject made with
// NewRawObject.
type View interface {
	// Apply evaluates the view on an object's state. It never fails: an
	// object the filter cannot be evaluated on is not in the view (the
	// view counts and logs that itself).
	Apply(res Resource, obj *RawObject) ViewResult
	// Current reports whether state, recorded with a published position,
	// was made by this view's definition: then an object found at that
	// position needs no new evaluation. A state made by another
	// definition (the filter or the projection changed between runs) or
	// by no view makes the source evaluate the object again, and publish
	// what changed in the view.
	Current(state string) bool
	// Unchanged reports whether an object published with state prev would
	// be published now, with state next, with the same content, so that
	// publishing it again can be left out.
	Unchanged(prev, next string) bool
}

// ViewResult is what a View makes of an object's state.
type ViewResult struct {
	// In reports whether the object is in the view.
	In bool
	// Object is what is published of the object when In: its projection,
	// or the object as it came when the view projects nothing.
	Object *RawObject
	// State is the object's state in the view, recorded with its
	// position (Delta.View).
	State string
}

// Suppressed is why a view kept a change of an object from being
// reported (Observer.Suppressed).
type Suppressed string

// The reasons a view suppresses a change.
const (
	// NotInView: the object does not match the filter, and was not in
	// the view before either, so there is nothing to publish.
	NotInView Suppressed = "filtered"
	// ProjectionUnchanged: the object is in the view, and what would be
	// published of it (its projection) is what was published last.
	ProjectionUnchanged Suppressed = "unchanged"
)
