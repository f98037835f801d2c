package sink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/kubebus/bridge/wire"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func msg(key, rv string) *wire.Message {
	return &wire.Message{Subject: key, ResourceVersion: rv, Resource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}
}

func TestPublishInOrder(t *testing.T) {
	batch := []*wire.Message{msg("a", "1"), msg("b", "1"), msg("a", "2"), msg("c", "1"), msg("a", "3"), msg("b", "2")}

	t.Run("rounds hold one message per key, in order", func(t *testing.T) {
		var sent [][]string
		err := PublishInOrder(context.Background(), batch, func(_ context.Context, ms []*wire.Message) []error {
			var round []string
			for _, m := range ms {
				round = append(round, m.Key()+m.ResourceVersion)
			}
			sent = append(sent, round)
			return make([]error, len(ms))
		})
		if err != nil {
			t.Fatal(err)
		}
		want := [][]string{{"a1", "b1", "c1"}, {"a2", "b2"}, {"a3"}}
		if fmt.Sprint(sent) != fmt.Sprint(want) {
			t.Errorf("rounds %v, want %v", sent, want)
		}
	})

	t.Run("a failure stops the key's later messages only", func(t *testing.T) {
		boom := errors.New("boom")
		var accepted []string
		err := PublishInOrder(context.Background(), batch, func(_ context.Context, ms []*wire.Message) []error {
			errs := make([]error, len(ms))
			for i, m := range ms {
				if m.Key() == "a" && m.ResourceVersion == "2" {
					errs[i] = boom
					continue
				}
				accepted = append(accepted, m.Key()+m.ResourceVersion)
			}
			return errs
		})
		var be *BatchError
		if !errors.As(err, &be) || len(be.Errors) != len(batch) {
			t.Fatalf("error %v, want a BatchError for %d messages", err, len(batch))
		}
		wantErrs := []error{nil, nil, boom, nil, ErrEarlierFailed, nil}
		for i, e := range be.Errors {
			if !errors.Is(e, wantErrs[i]) || (wantErrs[i] == nil) != (e == nil) {
				t.Errorf("message %d: error %v, want %v", i, e, wantErrs[i])
			}
		}
		slices.Sort(accepted)
		if want := []string{"a1", "b1", "b2", "c1"}; !slices.Equal(accepted, want) {
			t.Errorf("accepted %v, want %v (a3 must not be sent after a2 failed)", accepted, want)
		}
	})

	t.Run("a terminal failure does not hold back later messages", func(t *testing.T) {
		var accepted []string
		err := PublishInOrder(context.Background(), batch, func(_ context.Context, ms []*wire.Message) []error {
			errs := make([]error, len(ms))
			for i, m := range ms {
				if m.Key() == "a" && m.ResourceVersion == "1" {
					errs[i] = Terminal(errors.New("too large"))
					continue
				}
				accepted = append(accepted, m.Key()+m.ResourceVersion)
			}
			return errs
		})
		var be *BatchError
		if !errors.As(err, &be) || !IsTerminal(be.Errors[0]) || be.Errors[2] != nil || be.Errors[4] != nil {
			t.Fatalf("error %v: want only the first message failed, terminally", err)
		}
		if len(accepted) != 5 {
			t.Errorf("accepted %v, want the 5 other messages", accepted)
		}
	})

	// The bridge replaces a too-large message by one without the object's
	// content, and sends the later messages after it: they must wait. A
	// replacement too large as well is skipped, and they need not.
	for _, tt := range []struct {
		name     string
		omitted  bool
		accepted int
	}{
		{"a too-large message holds back later messages", false, 3},
		{"a too-large replacement does not", true, 5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			batch := slices.Clone(batch)
			a1 := *batch[0]
			a1.ContentOmitted = tt.omitted
			batch[0] = &a1
			var accepted []string
			err := PublishInOrder(context.Background(), batch, func(_ context.Context, ms []*wire.Message) []error {
				errs := make([]error, len(ms))
				for i, m := range ms {
					if m.Key() == "a" && m.ResourceVersion == "1" {
						errs[i] = TooLarge(errors.New("2 MB over a 1 MB limit"))
						continue
					}
					accepted = append(accepted, m.Key()+m.ResourceVersion)
				}
				return errs
			})
			var be *BatchError
			if !errors.As(err, &be) || !IsTooLarge(be.Errors[0]) || !IsTerminal(be.Errors[0]) {
				t.Fatalf("error %v: want the first message too large, terminally", err)
			}
			if held := errors.Is(be.Errors[2], ErrEarlierFailed) && errors.Is(be.Errors[4], ErrEarlierFailed); held == tt.omitted {
				t.Errorf("later messages of a: errors %v, %v", be.Errors[2], be.Errors[4])
			}
			if len(accepted) != tt.accepted {
				t.Errorf("accepted %v, want %d messages", accepted, tt.accepted)
			}
		})
	}

	// An object's identity is its group-resource and key: the version it
	// was read at is only its form (a sink's record key or subject may not
	// even carry it), so its messages at two versions are ordered too.
	t.Run("same object at two versions of its resource is ordered together", func(t *testing.T) {
		v2 := msg("a", "2")
		v2.Resource.Version = "v2"
		var sent [][]string
		_ = PublishInOrder(context.Background(), []*wire.Message{msg("a", "1"), v2}, func(_ context.Context, ms []*wire.Message) []error {
			var round []string
			for _, m := range ms {
				round = append(round, m.Resource.Version+"/"+m.Key()+m.ResourceVersion)
			}
			sent = append(sent, round)
			return make([]error, len(ms))
		})
		if want := [][]string{{"v1/a1"}, {"v2/a2"}}; fmt.Sprint(sent) != fmt.Sprint(want) {
			t.Errorf("rounds %v, want %v", sent, want)
		}
	})

	t.Run("same key in different resources is not ordered together", func(t *testing.T) {
		other := msg("a", "9")
		other.Resource.Resource = "secrets"
		rounds := 0
		_ = PublishInOrder(context.Background(), []*wire.Message{msg("a", "1"), other}, func(_ context.Context, ms []*wire.Message) []error {
			rounds++
			return make([]error, len(ms))
		})
		if rounds != 1 {
			t.Errorf("%d rounds, want 1", rounds)
		}
	})
}
