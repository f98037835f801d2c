package checkpoint

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
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
	for i, r := range records {
		if err := r.validate(i); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("checkpoint: commit: %w", err)
	}
	// bbolt keeps a transaction's changes to a leaf in a sorted slice until
	// the commit splits it, so keys inserted out of order move that slice
	// again and again: quadratic in the batch for objects the file has not
	// seen yet. Applied in key order, each insert appends. Of two records
	// for one key the later still wins: they are ordered by their place
	// in the batch.
	order := make([]int, len(records))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int {
		a, b := &records[i], &records[j]
		if c := strings.Compare(a.Resource, b.Resource); c != 0 {
			return c
		}
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return cmp.Compare(i, j)
	})
	// bbolt keeps the keys and values it is given until the transaction
	// ends: they are written one after another into one buffer, sized for
	// all of them, rather than allocated one by one. A slice of it is
	// never written again, even when the buffer had to grow.
	size := 0
	for i := range records {
		size += min(len(records[i].Key), maxFileKey) + valueSize(&records[i])
	}
	buf := make([]byte, 0, size)
	err := f.guard("commit to", func() error {
		return f.db.Update(func(tx *bolt.Tx) error {
			meta, err := tx.CreateBucketIfNotExists([]byte(metaBucket))
			if err != nil {
				return fmt.Errorf("bucket %s: %w", metaBucket, err)
			}
			// Records come grouped by resource, so the bucket in use, and
			// its LastResourceVersion, are remembered; last keeps that of
			// every resource touched.
			var (
				res     string
				objects *bolt.Bucket
				cur     string
				last    = map[string]string{}
			)
			for _, i := range order {
				r := &records[i]
				if objects == nil || r.Resource != res {
					if objects != nil {
						last[res] = cur
					}
					name := objectsBucket(r.Resource)
					if objects, err = tx.CreateBucketIfNotExists(name); err != nil {
						return fmt.Errorf("bucket %s: %w", name, err)
					}
					res = r.Resource
					var seen bool
					if cur, seen = last[res]; !seen {
						cur = string(meta.Get([]byte(res)))
					}
				}
				start := len(buf)
				buf = appendFileKey(buf, r.Key)
				key := buf[start:len(buf):len(buf)]
				if r.Deleted {
					err = objects.Delete(key)
				} else {
					start = len(buf)
					buf = appendValue(buf, r.Key, r.Position)
					err = objects.Put(key, buf[start:len(buf):len(buf)])
				}
				if err != nil {
					return fmt.Errorf("%s %q: %w", r.Resource, key, err)
				}
				cur = LaterResourceVersion(cur, r.ResourceVersion)
			}
			last[res] = cur
			for resource, rv := range last {
				if rv == "" {
					continue
				}
				if err := meta.Put([]byte(resource), []byte(rv)); err != nil {
					return fmt.Errorf("%s: last resource version: %w", resource, err)
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
