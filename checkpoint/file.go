package checkpoint

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/kubebus/bridge/internal/jsonenc"
)

// File layout (bbolt). Every top-level bucket name carries a prefix or is a
// fixed word, so no resource name can collide with another bucket:
//
//	"objects/<resource>"   one bucket per resource
//	    <key>              JSON Position, e.g. {"uid":"…","rv":"12345"},
//	                       with "view":"…" when the object went through a view
//	"meta"                 one bucket for all resources
//	    <resource>         LastResourceVersion as raw bytes, e.g. "12345"
//
// <key> is "namespace/name" or "name"; <resource> is e.g. "deployments.apps".
const (
	objectsBucketPrefix = "objects/"
	metaBucket          = "meta"
)

// initialMmapSize is the address space mapped for the file at first:
// room for the checkpoint of some 300,000 objects.
const initialMmapSize = 64 << 20

// allocSize is how far the file grows past its last page when it must
// grow. bbolt's default, 16 MiB, applies whenever the mapping is larger
// than that, which initialMmapSize makes it from the start: a checkpoint
// of five objects would be a 16 MiB file (sparse, but copied whole by
// tools that do not keep holes). Growing 1 MiB at a time keeps the file
// within 1 MiB of its data and costs one more fsync per MiB of growth.
const allocSize = 1 << 20

// lockTimeout is how long OpenFile waits for another process to release
// the file before giving up with ErrLocked.
const lockTimeout = time.Second

// ErrLocked is returned (wrapped) by OpenFile when another process, most
// likely another bridge, holds the checkpoint file open.
var ErrLocked = errors.New("file is locked by another process")

// File is a Store kept in a single bbolt file. Each Commit is one bbolt
// transaction: it writes only the pages it changes and is fsync'd before
// Commit returns.
type File struct {
	db   *bolt.DB
	path string
	// fh is the descriptor bbolt opened, closed directly when bbolt is
	// broken (see guard).
	fh     *os.File
	broken atomic.Pointer[error]
}

var _ Store = (*File)(nil)

// OpenFile opens the checkpoint file at path, creating it (but not its
// directory) if there is none. The file is locked for exclusive use; if
// another process holds it, OpenFile fails after about a second with an
// error that wraps ErrLocked and names path.
//
// The whole file is read and checked before OpenFile returns. A file that
// is there but empty fails with ErrEmpty, and one that is damaged,
// truncated or not a checkpoint with ErrCorrupt; both errors name path and
// say what to do. OpenFile and the File's methods never panic on what the
// file holds.
func OpenFile(path string) (*File, error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := create(path); err != nil {
			return nil, fmt.Errorf("checkpoint: open %s: %w", path, err)
		}
	case err != nil:
		return nil, fmt.Errorf("checkpoint: open %s: %w", path, err)
	case fi.Mode().IsRegular() && fi.Size() == 0:
		return nil, unreadable("open", path, ErrEmpty, nil)
	}

	f := &File{path: path}
	opts := &bolt.Options{
		Timeout:      lockTimeout,
		FreelistType: bolt.FreelistMapType,
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			fh, err := os.OpenFile(name, flag, perm)
			f.fh = fh
			return fh, err
		},
	}
	if runtime.GOOS != "windows" {
		// Each time the file outgrows its mapping, bbolt maps it again and
		// first copies every key and value the transaction touched out of
		// the old mapping: a growing file's first flushes would do that
		// over and over. Mapping address space ahead costs no memory and
		// does not grow the file (it would on Windows).
		opts.InitialMmapSize = initialMmapSize
	}
	err = f.guard("open", func() error {
		f.db, err = bolt.Open(path, 0o600, opts)
		return err
	})
	if f.broken.Load() != nil {
		// bbolt panicked before it could close what it opened.
		if f.fh != nil {
			f.fh.Close()
		}
		return nil, err
	}
	if err != nil {
		return nil, openError(path, err)
	}
	f.db.AllocSize = allocSize
	if fi, err = f.fh.Stat(); err != nil {
		f.Close()
		return nil, fmt.Errorf("checkpoint: open %s: %w", path, err)
	}
	old, err := f.verify(fi.Size())
	if err == nil {
		err = f.migrate(old)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Path returns the path of the underlying file.
func (f *File) Path() string { return f.path }

// Load implements Store.
func (f *File) Load(ctx context.Context, resource string) (Snapshot, error) {
	if resource == "" {
		return Snapshot{}, fmt.Errorf("checkpoint: load: %w", errEmptyResource)
	}
	if err := ctx.Err(); err != nil {
		return Snapshot{}, fmt.Errorf("checkpoint: load %s: %w", resource, err)
	}
	snap := emptySnapshot()
	op := "load " + resource + " from"
	err := f.guard(op, func() error {
		return f.db.View(func(tx *bolt.Tx) error {
			if meta := tx.Bucket([]byte(metaBucket)); meta != nil {
				snap.LastResourceVersion = string(meta.Get([]byte(resource)))
			}
			b := tx.Bucket(objectsBucket(resource))
			if b == nil {
				return nil
			}
			n := 0
			return b.ForEach(func(k, v []byte) error {
				if n++; n%4096 == 0 {
					if err := ctx.Err(); err != nil {
						return err
					}
				}
				key, p, err := decodeEntry(k, v)
				if err != nil {
					return unreadable(op, f.path, ErrCorrupt, err)
				}
				snap.Objects[key] = p
				return nil
			})
		})
	})
	switch {
	case err == nil:
		return snap, nil
	case errors.Is(err, ErrCorrupt):
		return Snapshot{}, err
	default:
		return Snapshot{}, fmt.Errorf("checkpoint: load %s: %w", resource, err)
	}
}

var _ Lister = (*File)(nil)

// Resources implements Lister.
func (f *File) Resources(ctx context.Context) ([]string, error) {
	var out []string
	err := f.guard("list the resources of", func() error {
		return f.db.View(func(tx *bolt.Tx) error {
			return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
				res, ok := strings.CutPrefix(string(name), objectsBucketPrefix)
				if ok && b.Stats().KeyN > 0 {
					out = append(out, res)
				}
				return nil
			})
		})
	})
	return out, err
}

// Commit implements Store. It checks ctx before it starts and again before
// the transaction is committed; once the commit has begun it runs to
// completion.
func (f *File) Commit(ctx context.Context, records []Record) error {
	if len(records) == 0 {
		return nil
	}
	if len(records) > math.MaxInt32 {
		return fmt.Errorf("checkpoint: commit %d records: more than %d in one commit", len(records), math.MaxInt32)
	}
	for i, r := range records {
		if err := r.validate(i); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("checkpoint: commit: %w", err)
	}
	// bbolt keeps the keys and values it is given until the transaction
	// ends: they are written one after another into one buffer, sized for
	// all of them, rather than allocated one by one. A slice of it is
	// never written again, even when the buffer had to grow.
	size := 0
	for i := range records {
		size += min(len(records[i].Key), maxFileKey) + valueSize(&records[i])
	}
	buf := make([]byte, 0, size)
	entries := make([]commitEntry, len(records))
	var resources commitResources
	for i := range records {
		r := &records[i]
		start := len(buf)
		buf = appendFileKey(buf, r.Key)
		entries[i] = commitEntry{key: buf[start:len(buf):len(buf)], res: resources.index(r.Resource), rec: int32(i)}
	}
	err := f.guard("commit to", func() error {
		return f.db.Update(func(tx *bolt.Tx) error {
			meta, err := tx.CreateBucketIfNotExists([]byte(metaBucket))
			if err != nil {
				return fmt.Errorf("bucket %s: %w", metaBucket, err)
			}
			// LaterResourceVersion depends on the order of the versions
			// it is given when they are not comparable: each resource's
			// is advanced from the stored one through its records in the
			// order of the batch, before they are put in the order of the
			// file.
			for k := range resources.list {
				rs := &resources.list[k]
				rs.stored = string(meta.Get([]byte(rs.name)))
				rs.last = rs.stored
			}
			for _, e := range entries {
				rs := &resources.list[e.res]
				rs.last = LaterResourceVersion(rs.last, records[e.rec].ResourceVersion)
			}
			// bbolt keeps a transaction's changes to a leaf in a sorted
			// slice until the commit splits it, so keys inserted out of
			// order move that slice again and again: quadratic in the batch
			// for objects the file has not seen yet. Applied in the order
			// of their bbolt keys, resource by resource, each insert
			// appends. Of two records for one key the later still wins:
			// they are ordered by their place in the batch.
			slices.SortFunc(entries, func(a, b commitEntry) int {
				if c := cmp.Compare(a.res, b.res); c != 0 {
					return c
				}
				if c := bytes.Compare(a.key, b.key); c != 0 {
					return c
				}
				return cmp.Compare(a.rec, b.rec)
			})
			var objects *bolt.Bucket
			res := int32(-1)
			for _, e := range entries {
				r := &records[e.rec]
				if e.res != res {
					res = e.res
					name := objectsBucket(r.Resource)
					if objects, err = tx.CreateBucketIfNotExists(name); err != nil {
						return fmt.Errorf("bucket %s: %w", name, err)
					}
				}
				if r.Deleted {
					err = objects.Delete(e.key)
				} else {
					start := len(buf)
					buf = appendValue(buf, r.Key, r.Position)
					err = objects.Put(e.key, buf[start:len(buf):len(buf)])
				}
				if err != nil {
					return fmt.Errorf("%s %q: %w", r.Resource, e.key, err)
				}
			}
			// A LastResourceVersion that did not move is not written
			// again, so that a commit of intents alone, which carry no
			// resourceVersion, leaves the meta bucket's pages as they are.
			for _, rs := range resources.list {
				if rs.last == rs.stored {
					continue
				}
				if err := meta.Put([]byte(rs.name), []byte(rs.last)); err != nil {
					return fmt.Errorf("%s: last resource version: %w", rs.name, err)
				}
			}
			// Returning an error rolls the transaction back.
			return ctx.Err()
		})
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrCorrupt):
		return err
	default:
		return fmt.Errorf("checkpoint: commit %d records: %w", len(records), err)
	}
}

// commitEntry is one record of a commit, ordered for the file by its
// resource, then by its bbolt key, then by its place in the batch.
type commitEntry struct {
	key []byte // the record's bbolt key (fileKey)
	res int32  // the record's resource, an index into commitResources.list
	rec int32  // the record's index in the batch
}

// commitResources numbers the resources of a commit in the order they
// first appear.
type commitResources struct {
	list []commitResource
	// byName is the number of each resource, made only once a commit
	// touches a second resource.
	byName map[string]int32
	cur    int32 // the number last returned
}

// commitResource is one resource a commit touches.
type commitResource struct {
	name string
	// stored is its LastResourceVersion before the commit, last after it.
	stored, last string
}

// index returns the number of resource, numbering it if it has none yet.
// Records come grouped by resource, so the number last returned is
// checked before any other.
func (rs *commitResources) index(resource string) int32 {
	if len(rs.list) > 0 && rs.list[rs.cur].name == resource {
		return rs.cur
	}
	if n, ok := rs.byName[resource]; ok {
		rs.cur = n
		return n
	}
	if len(rs.list) == 1 {
		rs.byName = map[string]int32{rs.list[0].name: 0}
	}
	rs.cur = int32(len(rs.list))
	rs.list = append(rs.list, commitResource{name: resource})
	if rs.byName != nil {
		rs.byName[resource] = rs.cur
	}
	return rs.cur
}

// appendPosition appends p as the JSON Load reads, {"uid":"…","rv":"…"}
// and "view":"…" when p has a View: the bytes encoding/json writes for it
// with HTML escaping off.
func appendPosition(dst []byte, p Position) []byte {
	dst = append(dst, `{"uid":`...)
	dst = jsonenc.AppendString(dst, p.UID)
	dst = append(dst, `,"rv":`...)
	dst = jsonenc.AppendString(dst, p.ResourceVersion)
	if p.View != "" {
		dst = append(dst, `,"view":`...)
		dst = jsonenc.AppendString(dst, p.View)
	}
	return append(dst, '}')
}

// Close implements Store. Calling it more than once is harmless.
func (f *File) Close() error {
	if f.broken.Load() != nil {
		// bbolt may hold its own locks after a panic: only the file is
		// closed, which releases the lock other processes see.
		if err := f.fh.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
			return fmt.Errorf("checkpoint: close %s: %w", f.path, err)
		}
		return nil
	}
	if err := f.db.Close(); err != nil {
		return fmt.Errorf("checkpoint: close %s: %w", f.path, err)
	}
	return nil
}

func objectsBucket(resource string) []byte {
	return []byte(objectsBucketPrefix + resource)
}
