package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"runtime/debug"
	"strings"
	"syscall"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Errors OpenFile, and the File's methods, wrap when the file is there but
// is not a checkpoint they can read. Neither is ever ignored: the bridge
// refuses to start on one unless told to start afresh (see SetAside).
var (
	// ErrEmpty: the file holds no bytes. OpenFile never leaves an empty
	// file behind (it creates a new file whole), so something else
	// emptied it, and what the checkpoint held is gone.
	ErrEmpty = errors.New("checkpoint file is empty")
	// ErrCorrupt: the file's bytes are not a whole, consistent
	// checkpoint: damaged pages, a truncated file, or not a checkpoint.
	ErrCorrupt = errors.New("checkpoint file is corrupt")
)

// advice ends every ErrEmpty and ErrCorrupt error: what to do about it.
const advice = "restore the file from a backup if there is one; otherwise move it aside (keep it for diagnosis) and the bridge starts afresh: " +
	"it publishes every object again, and a delete made while it was down is never published"

// unreadable is the error for the file at path that is not a checkpoint,
// found while doing op.
func unreadable(op, path string, kind error, cause error) error {
	if cause == nil {
		return fmt.Errorf("checkpoint: %s %s: %w; %s", op, path, kind, advice)
	}
	return fmt.Errorf("checkpoint: %s %s: %w: %w; %s", op, path, kind, cause, advice)
}

// guard runs fn, one use of bbolt, and turns a panic or a memory fault
// inside it into an error wrapping ErrCorrupt. bbolt trusts its file: it
// panics on a page that is not what it expects, and it reads pages through
// a memory map, where a page past the end of a truncated file is a fault
// that would otherwise kill the process. bbolt may be left holding locks
// or half-done state, so after one the File is broken: every later call
// fails with the same error, and Close closes only the file.
func (f *File) guard(op string, fn func() error) (err error) {
	if err := f.broken.Load(); err != nil {
		return *err
	}
	// Faults become panics on this goroutine only, which is the one bbolt
	// runs transactions and Open on.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = unreadable(op, f.path, ErrCorrupt, fmt.Errorf("bbolt: %v", r))
			f.broken.Store(&err)
		}
	}()
	return fn()
}

// openError sorts an error of bolt.Open: one about the file's contents
// (both meta pages invalid, a file too small to hold them) becomes
// ErrCorrupt; one from the operating system stays as it is.
func openError(path string, err error) error {
	var pathErr *fs.PathError
	var errno syscall.Errno
	switch {
	case errors.Is(err, bolterrors.ErrTimeout):
		return fmt.Errorf("checkpoint: open %s: %w", path, ErrLocked)
	case errors.As(err, &pathErr), errors.As(err, &errno):
		return fmt.Errorf("checkpoint: open %s: %w", path, err)
	default:
		return unreadable("open", path, ErrCorrupt, fmt.Errorf("bbolt: %w", err))
	}
}

// verify reads the whole file once, so that damage is found when the file
// is opened rather than in the middle of a run: every page the file claims
// lies within it; every bucket and position decodes; and bbolt's own
// consistency check (Tx.Check: page types, key order, freelist, pages
// neither reachable nor free) finds nothing. It costs about as much as
// loading every resource, once per start. It returns the object keys an
// earlier release stored whole past maxFileKey, for migrate.
func (f *File) verify(fileSize int64) (old []oldLongKeys, err error) {
	err = f.guard("open", func() error {
		return f.db.View(func(tx *bolt.Tx) error {
			if tx.Size() > fileSize {
				return unreadable("open", f.path, ErrCorrupt, fmt.Errorf("truncated: %d bytes, but its pages reach to %d", fileSize, tx.Size()))
			}
			// Reading every key and value first touches every page in
			// use on this goroutine, where a fault is caught: Tx.Check
			// reads on a goroutine of its own.
			err := tx.ForEach(func(name []byte, b *bolt.Bucket) error {
				resource, isObjects := strings.CutPrefix(string(name), objectsBucketPrefix)
				var keys [][]byte
				err := b.ForEach(func(k, v []byte) error {
					switch {
					case v == nil:
						return fmt.Errorf("bucket %q: key %q: a bucket where a value belongs", name, k)
					case isObjects:
						if _, _, err := decodeEntry(k, v); err != nil {
							return fmt.Errorf("%s: %w", resource, err)
						}
						if isOldLongKey(k) {
							// bbolt's bytes are valid only inside the
							// transaction.
							keys = append(keys, append([]byte(nil), k...))
						}
					}
					return nil
				})
				if len(keys) > 0 {
					old = append(old, oldLongKeys{bucket: append([]byte(nil), name...), keys: keys})
				}
				return err
			})
			if err != nil {
				return unreadable("open", f.path, ErrCorrupt, err)
			}
			var problems []error
			for err := range tx.Check() {
				if len(problems) < 3 {
					problems = append(problems, err)
				}
			}
			if len(problems) > 0 {
				return unreadable("open", f.path, ErrCorrupt, fmt.Errorf("bbolt check: %w", errors.Join(problems...)))
			}
			return nil
		})
	})
	return old, err
}
