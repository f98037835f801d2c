package checkpoint

import (
	"context"
	"testing"
)

func TestDiscard(t *testing.T) {
	s := Discard()
	ctx := context.Background()
	if err := s.Commit(ctx, []Record{put("configmaps", "ns/a", "u1", "5")}); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	assertSnapshot(t, mustLoad(t, s, "configmaps"), Snapshot{})
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}
