package kafka

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kubebus/bridge/consumer"
	sinkkafka "github.com/kubebus/bridge/sink/kafka"
)

// The state read returns every record up to the end offsets at its start,
// one key's records in their order, and a position of those end offsets.
func TestReadStateUpToEndOffsets(t *testing.T) {
	e := newEnv(t, 3, nil)
	for rv := 1; rv <= 3; rv++ {
		for i := range 10 {
			e.put(fmt.Sprintf("cm-%d", i), rv)
		}
	}
	recs, pos := e.readState()
	if len(recs) != 30 {
		t.Fatalf("ReadState passed %d records, want 30", len(recs))
	}
	last := map[string]int{}
	for _, r := range recs {
		if r.Err != nil || r.Message == nil {
			t.Fatalf("record %q: message %v, error %v", r.Key, r.Message, r.Err)
		}
		if r.Key != r.Message.Subject {
			t.Errorf("record key %q, message subject %q", r.Key, r.Message.Subject)
		}
		rv := 0
		fmt.Sscan(r.Message.ResourceVersion, &rv)
		if rv <= last[r.Key] {
			t.Errorf("key %s: version %d after %d", r.Key, rv, last[r.Key])
		}
		last[r.Key] = rv
		if _, err := parsePosition(r.Position); err != nil {
			t.Errorf("record position: %v", err)
		}
	}
	p, err := parsePosition(pos)
	if err != nil {
		t.Fatal(err)
	}
	ends := e.c.EndOffsets(e.topic)
	for i, o := range p.offsets {
		if o != ends[int32(i)] {
			t.Errorf("position offset of partition %d is %d, end offset %d", i, o, ends[int32(i)])
		}
	}
	if age := time.Since(p.time); age < 0 || age > 30*time.Second {
		t.Errorf("position time is %s old", age)
	}
}

// An empty topic, and a topic with some empty partitions, do not hang
// the state read.
func TestReadStateEmpty(t *testing.T) {
	e := newEnv(t, 4, nil)
	recs, pos := e.readState()
	if len(recs) != 0 {
		t.Fatalf("empty topic: %d records", len(recs))
	}
	if p, err := parsePosition(pos); err != nil || !slices.Equal(p.offsets, []int64{0, 0, 0, 0}) {
		t.Fatalf("empty topic: position %q (%v)", pos, err)
	}
	e.put("only", 1) // one partition of four has a record
	recs, _ = e.readState()
	if got := ids(recs); !slices.Equal(got, []string{"uid-only-1"}) {
		t.Fatalf("one record: got %v", got)
	}
}

// A compacted topic gives each key's latest record and the tombstones
// (nil Message) of deleted keys, and its gaps do not hang the read.
func TestReadStateCompacted(t *testing.T) {
	e := newEnv(t, 2, nil)
	for rv := 1; rv <= 4; rv++ {
		for i := range 6 {
			e.put(fmt.Sprintf("cm-%d", i), rv)
		}
	}
	e.del("cm-0")
	e.del("cm-1")
	// Compaction never touches a partition's last batch: write more.
	for i := 2; i < 6; i++ {
		e.put(fmt.Sprintf("cm-%d", i), 5)
	}
	before := len(e.c.ReadAll(e.topic))
	e.c.Compact()
	after := len(e.c.ReadAll(e.topic))
	if after >= before {
		t.Fatalf("compaction dropped nothing: %d records before, %d after", before, after)
	}
	recs, _ := e.readState()
	live := map[string]string{}
	for _, r := range recs {
		switch {
		case r.Err != nil:
			t.Fatalf("record %q: %v", r.Key, r.Err)
		case r.Message == nil:
			delete(live, r.Key)
		default:
			live[r.Key] = r.Message.ResourceVersion
		}
	}
	want := map[string]string{"default/cm-2": "5", "default/cm-3": "5", "default/cm-4": "5", "default/cm-5": "5"}
	if fmt.Sprint(live) != fmt.Sprint(want) {
		t.Fatalf("state after compaction: %v, want %v", live, want)
	}
	if len(recs) != after {
		t.Errorf("ReadState passed %d records, the topic holds %d", len(recs), after)
	}
}

// A partition whose last offset holds no record a consumer is given (here
// a transaction marker) does not hang the state read, nor the first
// progress record of a Follow.
func TestReadStateTailWithoutRecord(t *testing.T) {
	e := newEnv(t, 1, nil)
	e.put("plain", 1)
	e.putInTransaction("in-txn", 1)
	end := e.c.EndOffsets(e.topic)[0]
	if end != 3 {
		t.Fatalf("end offset %d, want 3 (two records and a commit marker)", end)
	}
	recs, pos := e.readState()
	if got := ids(recs); !slices.Equal(got, []string{"uid-plain-1", "uid-in-txn-1"}) {
		t.Fatalf("got %v", got)
	}
	if !strings.HasSuffix(pos, ".3") {
		t.Fatalf("position %q does not end at offset 3", pos)
	}
	// A Follow from before the marker reaches the end too.
	from := recs[1].Position
	if !strings.HasSuffix(from, ".2") {
		t.Fatalf("position after the last record %q, want offset 2", from)
	}
	f := e.follow(from)
	recs = waitFor(t, f, "a progress record", func(r []consumer.Record) bool { return progressCount(r) > 0 })
	if !strings.HasSuffix(recs[0].Position, ".3") {
		t.Fatalf("progress at %q, want offset 3", recs[0].Position)
	}
}

// With one topic for every resource, keys carry the resource and the
// records of other resources are passed on as they are, tombstones with
// their key.
func TestSharedTopicKeys(t *testing.T) {
	c := newEnv(t, 1, nil).c
	c.CreateTopic("kube", 2, map[string]string{"cleanup.policy": "compact", "retention.ms": "-1"})
	log, err := NewLog(c.Client(), Config{Topic: "kube"}, consumer.Options{Resource: configmaps})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, c: c, topic: "kube", log: log, produce: c.Client(kgo.DefaultProduceTopic("kube"))}
	bridge := sinkkafka.Config{Topic: "kube"}
	cm := message("a", 1)
	secret := message("a", 1)
	secret.ID, secret.Source, secret.Resource.Resource = "secret-a", "/clusters/c1/api/v1/secrets", "secrets"
	e.send(record(bridge.KeyOf(cm), cm))
	e.send(record(bridge.KeyOf(secret), secret))
	e.send(record(bridge.KeyOf(secret), nil))
	recs, _ := e.readState()
	got := map[string]string{}
	for _, r := range recs {
		v := "tombstone"
		if r.Message != nil {
			v = r.Message.Resource.Resource
		}
		got[r.Key] += v + ";"
	}
	want := map[string]string{"configmaps/default/a": "configmaps;", "secrets/default/a": "secrets;tombstone;"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("records by key: %v, want %v", got, want)
	}
}

// Bad input names what is wrong.
func TestNewLogErrors(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, tc := range []struct {
		name string
		cl   *kgo.Client
		cfg  Config
		opts consumer.Options
		want string
	}{
		{"no client", nil, Config{}, consumer.Options{Resource: configmaps}, "no client"},
		{"no resource", cl, Config{}, consumer.Options{}, "Options.Resource is empty"},
		{"bad topic", cl, Config{Topic: "a/b"}, consumer.Options{Resource: configmaps}, `topic name "a/b" has '/'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewLog(tc.cl, tc.cfg, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewLog: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// A topic that does not exist is an error naming it, not an empty state.
func TestReadStateMissingTopic(t *testing.T) {
	c := newEnv(t, 1, nil).c
	log, err := NewLog(c.Client(), Config{TopicPrefix: "other"}, consumer.Options{Resource: configmaps})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = log.ReadState(ctx, func(consumer.Record) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "topic other.configmaps") || !strings.Contains(err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("ReadState of a missing topic: %v", err)
	}
}
