package sink

import (
	"context"
	"errors"

	"github.com/kubebus/bridge/wire"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ErrEarlierFailed fails a message that was not sent because an earlier
// message with the same key in the same batch failed.
var ErrEarlierFailed = errors.New("not sent: an earlier message with the same key failed")

// RoundFunc publishes msgs, no two of which share a key, and returns one
// error per message, nil where the message was accepted. It may publish
// them concurrently or asynchronously.
type RoundFunc func(ctx context.Context, msgs []*wire.Message) []error

// PublishInOrder publishes a batch with publish so that, for every object
// (group-resource and key), a message is accepted only after every earlier
// message of that object was.
// It sends the batch in rounds: round r holds the r-th message of each key.
// Once a key's message fails in a way that holds the key (HoldsKey: a
// retry may fix it, or it is too large and the bridge sends a smaller
// replacement), its later messages are not sent and fail with
// ErrEarlierFailed. Any other terminal failure does not hold them back:
// the bridge skips that message and goes on.
//
// Sinks that publish asynchronously use it to keep the Sink contract: a
// failure is never followed by an accepted later message of the same key,
// so a retry cannot put an older version of an object after a newer one.
// A batch with one message per key, the common case, is a single round.
//
// It returns nil when every message was accepted, otherwise a *BatchError.
func PublishInOrder(ctx context.Context, msgs []*wire.Message, publish RoundFunc) error {
	errs := make([]error, len(msgs))
	failed := false
	failedKeys := map[objectID]bool{} // keys whose later messages wait
	for _, round := range rounds(msgs) {
		var (
			batch []*wire.Message
			index []int
		)
		for _, i := range round {
			if failedKeys[identity(msgs[i])] {
				errs[i] = ErrEarlierFailed
				continue
			}
			batch = append(batch, msgs[i])
			index = append(index, i)
		}
		if len(batch) == 0 {
			continue
		}
		res := publish(ctx, batch)
		for j, i := range index {
			if j < len(res) {
				errs[i] = res[j]
			} else {
				errs[i] = errors.New("sink: publisher returned no result for this message")
			}
			if errs[i] != nil {
				failed = true
				if HoldsKey(msgs[i], errs[i]) {
					failedKeys[identity(msgs[i])] = true
				}
			}
		}
	}
	if !failed {
		return nil
	}
	return &BatchError{Errors: errs}
}

// objectID is what orders messages: the object's group-resource and key.
// The version a message was read at is left out: it is the object's form,
// not its identity.
type objectID struct {
	resource schema.GroupResource
	key      string
}

func identity(m *wire.Message) objectID { return objectID{m.Resource.GroupResource(), m.Key()} }

// rounds groups message indexes so that round r holds the r-th message of
// every identity, in batch order.
func rounds(msgs []*wire.Message) [][]int {
	count := make(map[objectID]int, len(msgs))
	var out [][]int
	for i, m := range msgs {
		id := identity(m)
		r := count[id]
		count[id] = r + 1
		if r == len(out) {
			out = append(out, nil)
		}
		out[r] = append(out[r], i)
	}
	return out
}
