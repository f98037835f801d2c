package bridge

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/kubebus/bridge/checkpoint"
)

// openFileStore opens the file checkpoint at path. A file that is there
// but empty or corrupt stops the bridge with an error that names it and
// says what to do, unless BRIDGE_CHECKPOINT_FRESH_START is set: then the
// file is moved aside (kept for diagnosis), a warning is logged and
// counted in bridge_checkpoint_fresh_starts_total, and the bridge starts
// with an empty checkpoint. No file at all is a first start: a new one is
// made, silently.
func (b *Bridge) openFileStore(path string, log *slog.Logger) (checkpoint.Store, error) {
	s, err := checkpoint.OpenFile(path)
	var reason string
	switch {
	case err == nil:
		return s, nil
	case errors.Is(err, checkpoint.ErrEmpty):
		reason = "empty"
	case errors.Is(err, checkpoint.ErrCorrupt):
		reason = "corrupt"
	default:
		return nil, fmt.Errorf("bridge: BRIDGE_CHECKPOINT: %w", err)
	}
	if !b.cfg.CheckpointFreshStart {
		return nil, fmt.Errorf("bridge: BRIDGE_CHECKPOINT: %w; or set BRIDGE_CHECKPOINT_FRESH_START=true to have the bridge move it aside itself", err)
	}
	aside, moveErr := checkpoint.SetAside(path, time.Now())
	if moveErr != nil {
		return nil, fmt.Errorf("bridge: BRIDGE_CHECKPOINT_FRESH_START: %w, after: %w", moveErr, err)
	}
	log.Warn("checkpoint "+reason+": moved aside, starting afresh with an empty checkpoint: every object is published again, and deletes made while the bridge was down are never published",
		"path", path, "movedTo", aside, "reason", reason, "err", err)
	b.metrics.CheckpointFreshStart(reason)
	s, err = checkpoint.OpenFile(path)
	if err != nil {
		return nil, fmt.Errorf("bridge: BRIDGE_CHECKPOINT: %w", err)
	}
	return s, nil
}
