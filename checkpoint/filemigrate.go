package checkpoint

import (
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// oldLongKeys are the object keys of one resource's bucket that a release
// before bounded keys stored whole, past maxFileKey: bbolt keys of 1,025
// bytes to 32 KiB that are object keys themselves, not bounded keys.
type oldLongKeys struct {
	bucket []byte
	keys   [][]byte
}

// isOldLongKey reports whether k, a bbolt key of an objects bucket, is an
// object key past maxFileKey stored whole.
func isOldLongKey(k []byte) bool { return len(k) > maxFileKey && !isLongKey(k) }

// migrate moves every entry of old to its bounded key (fileKey), in one
// transaction: Commit writes and deletes only the bounded key, so an entry
// left under its whole key would outlive the object's delete, and every
// start would find the object deleted while away and publish its delete
// again. Where the bounded key is already there, written since by this
// release, it is the later position and the whole key is only removed.
func (f *File) migrate(old []oldLongKeys) error {
	if len(old) == 0 {
		return nil
	}
	err := f.guard("open", func() error {
		return f.db.Update(func(tx *bolt.Tx) error {
			for _, o := range old {
				b := tx.Bucket(o.bucket)
				for _, k := range o.keys {
					bk := fileKey(string(k))
					if b.Get(bk) == nil {
						p, err := DecodePosition(b.Get(k))
						if err != nil {
							return fmt.Errorf("bucket %q: key %q: %w", o.bucket, k, err)
						}
						if err := b.Put(bk, appendValue(nil, string(k), p)); err != nil {
							return fmt.Errorf("bucket %q: key %q: %w", o.bucket, bk, err)
						}
					}
					if err := b.Delete(k); err != nil {
						return fmt.Errorf("bucket %q: key %q: %w", o.bucket, k, err)
					}
				}
			}
			return nil
		})
	})
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return fmt.Errorf("checkpoint: open %s: move long keys of an earlier release to their bounded keys: %w", f.path, err)
	}
	return err
}
