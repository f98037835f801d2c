package checkpoint

// Intent says that an object is about to be published for the first time:
// the checkpoint must know of it before its creation reaches the bus.
//
// A position is recorded only after the bus acknowledged it, and a Writer
// commits on an interval. Without intents, an object created, published
// and deleted around a crash would be on the bus but not in the
// checkpoint, and the restart could not tell consumers it is gone. So the
// pipeline makes an intent durable ([Writer.RecordIntents]) before it
// publishes a creation. On restart, an object listed whose position is an
// intent is published again as created (it may or may not have reached
// the bus), and one missing from the list is published as deleted.
//
// An intent is stored as a Position with the object's uid and no
// resourceVersion ({"uid":"…","rv":""}), as every release has stored it;
// [Position.IsIntent] tells one apart. The acknowledged position that
// follows replaces it.
type Intent struct {
	// Resource and Key name the object as in a Record.
	Resource string
	Key      string
	// UID is the object's uid.
	UID string
}

// Record is the record that stores i.
func (i Intent) Record() Record {
	return Record{Resource: i.Resource, Key: i.Key, Position: Position{UID: i.UID}}
}

// IsIntent reports whether p is an intent (see [Intent]): its object was
// about to be published for the first time, and no acknowledged position
// of it was recorded since.
func (p Position) IsIntent() bool { return p.ResourceVersion == "" }
