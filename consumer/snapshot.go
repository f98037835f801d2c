package consumer

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// snapshotFormat is written in the file, so that a later format is told
// apart from a damaged file.
const snapshotFormat = "1"

// snapshotFlushEvery is how often a watch writes its changes to the
// snapshot: often enough that a restart replays little, rarely enough
// that fsyncs cost nothing (one a second, whatever the rate of events).
const snapshotFlushEvery = time.Second

// snapshotPositionEvery is how often a snapshot whose objects did not
// change is written for its position alone: the position must stay well
// within the bus's grace period for deletes (a day by default) to be
// resumable, and an idle informer should not fsync every second.
const snapshotPositionEvery = time.Minute

// snapshotLockTimeout is how long opening waits for another process that
// holds the file. A file is one ListerWatcher's; waiting longer would
// only delay the error.
const snapshotLockTimeout = 2 * time.Second

var (
	bucketMeta    = []byte("meta")
	bucketObjects = []byte("objects")
	keyFormat     = []byte("format")
	keyPosition   = []byte("position")
	keyNarrowing  = []byte("narrowing")
)

// snapshot is the on-disk copy of what an informer holds: per object key,
// the dedupe state and, for held objects, the object's JSON as the API
// server served it; and the position the whole copy is at. Changes wait
// in memory until flushed, together with their position, in one
// transaction. It is not safe for concurrent use.
type snapshot struct {
	path      string
	narrowing string // the Options the file was written for
	db        *bolt.DB
	pending   map[string][]byte // nil value: the key is gone
	cleared   bool              // flush first empties the file
	lastFlush time.Time
	lastPos   string // the position last written
}

// snapValue is one key's value in the file.
type snapValue struct {
	Bus     uint64          `json:"b"`           // entry.bus
	UID     string          `json:"u"`           // hex of entry.uid.b
	UIDText bool            `json:"t,omitempty"` // entry.uid.text
	RV      string          `json:"r"`           // "" when it did not parse
	Held    bool            `json:"h,omitempty"`
	Object  json.RawMessage `json:"o,omitempty"` // the held object, as served
}

func toSnap(e entry, obj json.RawMessage) snapValue {
	return snapValue{Bus: e.bus, UID: hex.EncodeToString(e.uid.b[:]), UIDText: e.uid.text, RV: e.rv.String(), Held: e.held, Object: obj}
}

func (v snapValue) entry() (entry, error) {
	e := entry{bus: v.Bus, rv: parseRV(v.RV), held: v.Held}
	e.uid.text = v.UIDText
	if len(v.UID) != 2*len(e.uid.b) {
		return entry{}, fmt.Errorf("uid %q", v.UID)
	}
	if _, err := hex.Decode(e.uid.b[:], []byte(v.UID)); err != nil {
		return entry{}, fmt.Errorf("uid %q", v.UID)
	}
	if v.Held && len(v.Object) == 0 {
		return entry{}, errors.New("held object missing")
	}
	return e, nil
}

// errSnapshotDamaged wraps every error reading the file's content.
var errSnapshotDamaged = errors.New("snapshot unreadable")

// openSnapshot opens or creates the file at path. A file bbolt cannot
// open is set aside as path.damaged and a new one is made; damaged says
// why. A file another process holds is an error.
func openSnapshot(path, narrowing string) (s *snapshot, damaged error, err error) {
	s = &snapshot{path: path, narrowing: narrowing, pending: make(map[string][]byte)}
	s.db, err = s.open()
	if err != nil && !errors.Is(err, errSnapshotDamaged) {
		return nil, nil, err
	}
	if err != nil {
		damaged = err
		if rerr := os.Rename(path, path+".damaged"); rerr != nil {
			return nil, damaged, fmt.Errorf("consumer: snapshot %s: set aside: %w", path, rerr)
		}
		if s.db, err = s.open(); err != nil {
			return nil, damaged, err
		}
	}
	return s, damaged, nil
}

func (s *snapshot) open() (db *bolt.DB, err error) {
	defer func() {
		if p := recover(); p != nil {
			db, err = nil, fmt.Errorf("consumer: snapshot %s: %w: %v", s.path, errSnapshotDamaged, p)
		}
	}()
	db, err = bolt.Open(s.path, 0o600, &bolt.Options{Timeout: snapshotLockTimeout, FreelistType: bolt.FreelistMapType})
	switch {
	case errors.Is(err, bolterrors.ErrTimeout):
		return nil, fmt.Errorf("consumer: snapshot %s: held by another process: %w", s.path, err)
	case err != nil:
		return nil, fmt.Errorf("consumer: snapshot %s: %w: %w", s.path, errSnapshotDamaged, err)
	}
	return db, nil
}

// load passes every key of the file to fn and returns the position the
// file is at; "" when it has none (new, cleared, or written for other
// Options). Errors reading the file wrap errSnapshotDamaged.
func (s *snapshot) load(fn func(key string, v snapValue) error) (pos string, err error) {
	defer func() {
		if p := recover(); p != nil {
			pos, err = "", fmt.Errorf("consumer: snapshot %s: %w: %v", s.path, errSnapshotDamaged, p)
		}
	}()
	err = s.db.View(func(tx *bolt.Tx) error {
		meta, objects := tx.Bucket(bucketMeta), tx.Bucket(bucketObjects)
		if meta == nil || objects == nil || string(meta.Get(keyNarrowing)) != s.narrowing {
			return nil
		}
		if f := string(meta.Get(keyFormat)); f != snapshotFormat {
			return fmt.Errorf("format %q, want %q", f, snapshotFormat)
		}
		pos = string(meta.Get(keyPosition))
		if pos == "" {
			return nil
		}
		return objects.ForEach(func(k, b []byte) error {
			var v snapValue
			if err := json.Unmarshal(b, &v); err != nil {
				return fmt.Errorf("key %q: %w", k, err)
			}
			return fn(string(k), v)
		})
	})
	if err != nil {
		return "", fmt.Errorf("consumer: snapshot %s: %w: %w", s.path, errSnapshotDamaged, err)
	}
	return pos, nil
}

// object returns the JSON of the last state of the object of key the
// snapshot holds, flushed or not.
func (s *snapshot) object(key string) (obj json.RawMessage) {
	b, ok := s.pending[key]
	if !ok && !s.cleared {
		func() {
			defer func() { _ = recover() }() // a damaged file only loses this state
			_ = s.db.View(func(tx *bolt.Tx) error {
				if objects := tx.Bucket(bucketObjects); objects != nil {
					b = append([]byte(nil), objects.Get([]byte(key))...)
				}
				return nil
			})
		}()
	}
	var v snapValue
	if len(b) == 0 || json.Unmarshal(b, &v) != nil {
		return nil
	}
	return v.Object
}

// put records key's new value; del, that key is gone; clear, that the
// whole content is replaced.
func (s *snapshot) put(key string, v snapValue) {
	b, _ := json.Marshal(v) // cannot fail: strings and valid JSON
	s.pending[key] = b
}

func (s *snapshot) del(key string) { s.pending[key] = nil }

// forget drops the changes not yet written.
func (s *snapshot) forget() { clear(s.pending) }

func (s *snapshot) clear() {
	clear(s.pending)
	s.cleared = true
}

// due reports whether a flush at pos is due.
func (s *snapshot) due(pos string, now time.Time) bool {
	since := now.Sub(s.lastFlush)
	return s.cleared || (len(s.pending) > 0 && since >= snapshotFlushEvery) ||
		(pos != s.lastPos && since >= snapshotPositionEvery)
}

// flush writes the pending changes and the position pos they bring the
// file to, in one transaction.
func (s *snapshot) flush(pos string, now time.Time) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("consumer: snapshot %s: write: %v", s.path, p)
		}
	}()
	err = s.db.Update(func(tx *bolt.Tx) error {
		if s.cleared {
			for _, name := range [][]byte{bucketMeta, bucketObjects} {
				if err := tx.DeleteBucket(name); err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
					return err
				}
			}
		}
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		objects, err := tx.CreateBucketIfNotExists(bucketObjects)
		if err != nil {
			return err
		}
		for k, b := range s.pending {
			if b == nil {
				err = objects.Delete([]byte(k))
			} else {
				err = objects.Put([]byte(k), b)
			}
			if err != nil {
				return err
			}
		}
		for k, v := range map[string]string{string(keyFormat): snapshotFormat, string(keyNarrowing): s.narrowing, string(keyPosition): pos} {
			if err := meta.Put([]byte(k), []byte(v)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("consumer: snapshot %s: write: %w", s.path, err)
	}
	clear(s.pending)
	s.cleared = false
	s.lastFlush = now
	s.lastPos = pos
	return nil
}

func (s *snapshot) close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("consumer: snapshot %s: close: %w", s.path, err)
	}
	return nil
}
