package consumer

import (
	"context"
	"errors"

	"github.com/kubebus/bridge/wire"
)

// ErrExpired is wrapped by the errors of a Log whose position can no
// longer be followed: the bus may have dropped a record that came after it
// (a delete whose grace period ended, a compacted tombstone), or the stream
// or topic was recreated. A ListerWatcher answers it with 410 Gone, so the
// informer's reflector lists again, as it does against an API server.
var ErrExpired = errors.New("consumer: position no longer held by the bus")

// Log is one resource's messages on one bus, in the bus's order. A Log
// does not filter by namespace, label or cluster, and does not drop
// repeats: the ListerWatcher does.
//
// Positions are opaque strings made by the Log. They become the
// resourceVersions an informer sees, so they hold only printable ASCII.
// Methods may be called concurrently; each call reads on its own.
type Log interface {
	// ReadState passes to fn, in bus order, the records that make up the
	// state the bus holds now (in the state layout, the latest record of
	// every object key; records of one key in their order), and returns
	// the position just after the last record it read. A Follow from that
	// position continues with no gap and no overlap. An error from fn is
	// returned as it is.
	ReadState(ctx context.Context, fn func(Record) error) (position string, err error)

	// Follow passes to fn each record after the position from, in bus
	// order, until ctx ends (it then returns ctx.Err()) or fn returns an
	// error (returned as it is). It also passes progress records (Key
	// empty): one as soon as it has read everything the bus held when it
	// started, and then at least every few seconds while nothing arrives,
	// each carrying the position it has reached. It returns an error
	// wrapping ErrExpired, at once or later, when the bus may no longer
	// hold every record after from, or when from is not a position of
	// this Log.
	Follow(ctx context.Context, from string, fn func(Record) error) error
}

// Record is one message of a Log.
type Record struct {
	// Key identifies the object on the bus: the NATS subject, or the Kafka
	// record key. Empty for a progress record.
	Key string
	// Message is the decoded event. It is nil for a progress record, for
	// a record that says the key's object is gone without an event (a
	// Kafka tombstone, a NATS delete marker), and when Err is set.
	Message *wire.Message
	// Cluster is the cluster a record without a Message names: a Kafka
	// tombstone's ce_cluster header. The ListerWatcher applies such a
	// record only when it is Options.Cluster. Empty when the record names
	// none (a tombstone of a bridge older than the header, a NATS delete
	// marker, whose subject says the cluster): it is then applied to the
	// key's object, whatever its cluster.
	Cluster string
	// Err is why the record could not be decoded; the ListerWatcher
	// counts and logs it and goes on.
	Err error
	// Position is the position just after this record: a Follow from it
	// starts with the next record.
	Position string
}

// Progress reports whether r is a progress record: no message, only a
// position reached.
func (r Record) Progress() bool { return r.Key == "" }
