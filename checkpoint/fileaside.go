package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"time"

	bolt "go.etcd.io/bbolt"
)

// SetAside renames the checkpoint file at path, one that OpenFile refused
// with ErrEmpty or ErrCorrupt, to path.unreadable-<UTC time> in the same
// directory, and returns the new name. The file is kept, not deleted: it
// may be wanted to find out what happened to it. A later OpenFile of path
// then starts a new, empty checkpoint.
func SetAside(path string, now time.Time) (string, error) {
	base := path + ".unreadable-" + now.UTC().Format("20060102T150405Z")
	aside := base
	for i := 1; ; i++ {
		if _, err := os.Lstat(aside); errors.Is(err, fs.ErrNotExist) {
			break
		}
		if i == 100 {
			return "", fmt.Errorf("checkpoint: set aside %s: %s and 99 more names are taken", path, base)
		}
		aside = fmt.Sprintf("%s-%d", base, i)
	}
	if err := os.Rename(path, aside); err != nil {
		return "", fmt.Errorf("checkpoint: set aside %s: %w", path, err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return "", fmt.Errorf("checkpoint: set aside %s: %w", path, err)
	}
	return aside, nil
}

// create makes a new, empty checkpoint file at path, whole: bbolt writes
// its first pages into a temporary file of a unique name in the same
// directory (path.new-<random>), which is then linked to path. A crash
// leaves either no file at path or a complete one, never an empty or
// half-written one that the next start would take for a damaged
// checkpoint. Of two processes creating the same file, one wins and the
// other's file is discarded; bbolt's lock then decides which one runs.
// Each removes only its own temporary file, in every case, so neither can
// remove, or link, the other's while it is being written. (A crash in the
// middle of a create leaves its temporary file behind: another process's
// may be in use, so none is removed but one's own.)
func create(path string) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	fh, err := os.CreateTemp(dir, base+".new-*")
	if err != nil {
		return err
	}
	tmp := fh.Name()
	defer os.Remove(tmp)
	if err := fh.Close(); err != nil {
		return err
	}
	// bbolt lays out a new checkpoint in a file that is there but empty.
	db, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: lockTimeout})
	if err != nil {
		return err
	}
	if err := db.Close(); err != nil {
		return err
	}
	// A link never replaces a file another process created meanwhile, as
	// a rename would; a file system without links gets the rename.
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, fs.ErrExist) {
		if err := os.Rename(tmp, path); err != nil {
			return err
		}
	}
	return syncDir(dir)
}

// syncDir makes a rename or a link in dir durable. Windows cannot sync a
// directory, nor needs to.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
