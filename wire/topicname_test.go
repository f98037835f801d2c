package wire

import (
	"strings"
	"testing"
)

func TestCheckTopicName(t *testing.T) {
	for _, bad := range []string{"", ".", "..", "a/b", "a b", "ü", strings.Repeat("x", 250)} {
		if CheckTopicName(bad) == nil {
			t.Errorf("CheckTopicName(%q) = nil, want an error", bad)
		}
	}
	for _, good := range []string{"kube", "a.b_c-D9", strings.Repeat("x", 249)} {
		if err := CheckTopicName(good); err != nil {
			t.Errorf("CheckTopicName(%q): %v", good, err)
		}
	}
}
