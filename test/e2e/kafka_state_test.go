package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/internal/bridge"
	"github.com/kubebus/bridge/internal/metrics"
	"github.com/kubebus/bridge/sink/kafka"
	"github.com/kubebus/bridge/test/eventdata"
	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/test/poll"
	"github.com/kubebus/bridge/wire"
)

// Acceptance 5 (Kafka): in the state layout a deleted object's records
// leave the topic at compaction, its tombstone once
// BRIDGE_KAFKA_DELETE_RETENTION has passed, while every live object keeps
// its latest record; what the topic holds then equals the API server's
// LIST.
func TestKafkaStateDeletesCompactAway(t *testing.T) {
	ns := namespace(t, "kstate-del")
	c := kafkatest.Start(t)
	// Long enough that a compaction right after the deletes keeps their
	// tombstones, short enough to wait for.
	const deleteRetention = 15 * time.Second
	topic := wire.TopicFor("kube-"+ns, configMaps.gvr.GroupResource())
	b := startBridge(t, kafkaEnv(c,
		"BRIDGE_RESOURCES", "configmaps",
		"BRIDGE_NAMESPACES", ns,
		"BRIDGE_CLUSTER_NAME", "e2e",
		"BRIDGE_KAFKA_TOPIC_PREFIX", "kube-"+ns,
		// One partition, so that the later record below follows the
		// tombstones in their partition: kfake, like Kafka, never
		// compacts a partition's last batch.
		"BRIDGE_KAFKA_PARTITIONS", "1",
		"BRIDGE_KAFKA_DELETE_RETENTION", deleteRetention.String(),
	), nil)
	for name, want := range map[string]string{"cleanup.policy": "compact", "retention.ms": "-1", "delete.retention.ms": "15000"} {
		if got := c.TopicConfig(topic, name); got != want {
			t.Errorf("%s: %s=%q, want %q", topic, name, got, want)
		}
	}

	ctx := t.Context()
	cms := kube(t).CoreV1().ConfigMaps(ns)
	for i := range 12 {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}, Data: map[string]string{"v": "0"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		updateConfigMap(t, ns, fmt.Sprintf("cm-%d", i), "1")
	}
	var deleted []string
	for i := 6; i < 12; i++ {
		name := fmt.Sprintf("cm-%d", i)
		if err := cms.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		deleted = append(deleted, ns+"/"+name)
	}
	// Every delete's tombstone is in the topic.
	poll.Until(t, 60*time.Second, func() (bool, string) {
		st := stateOf(t, c, topic)
		missing := slices.DeleteFunc(slices.Clone(deleted), func(k string) bool { return st.tombstoned[k] })
		return len(missing) == 0, fmt.Sprintf("no tombstone yet for %v", missing)
	})
	// A later record, in a batch of its own after the tombstones.
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "later"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 60*time.Second, func() (bool, string) {
		_, ok := stateOf(t, c, topic).live[ns+"/later"]
		return ok, "the later ConfigMap is not in the topic yet"
	})
	b.stop(t)

	// A compaction within the delete retention drops every record a
	// later one supersedes (the deleted events among them) and keeps the
	// tombstones.
	firstTombstone := time.Now()
	for _, r := range c.ReadAll(topic) {
		if r.Value == nil && r.Timestamp.Before(firstTombstone) {
			firstTombstone = r.Timestamp
		}
	}
	c.Compact()
	if age := time.Since(firstTombstone); age >= deleteRetention {
		t.Fatalf("the first tombstone is %s old, past the delete retention %s, before the test could compact within it", age, deleteRetention)
	}
	recs := c.ReadAll(topic)
	perKey := map[string]int{}
	for _, r := range recs {
		perKey[string(r.Key)]++
	}
	st := stateOf(t, c, topic)
	for _, k := range deleted {
		if !st.tombstoned[k] || perKey[k] != 1 {
			t.Errorf("%s: %d records after a compaction within the delete retention, want its tombstone alone", k, perKey[k])
		}
	}
	equalsList(t, ns, st)

	// Past the delete retention, a compaction drops the tombstones too.
	poll.Until(t, 2*deleteRetention+30*time.Second, func() (bool, string) {
		c.Compact()
		var left []string
		for _, r := range c.ReadAll(topic) {
			if slices.Contains(deleted, string(r.Key)) {
				left = append(left, fmt.Sprintf("%s@%d", r.Key, r.Offset))
			}
		}
		return len(left) == 0, fmt.Sprintf("records of deleted objects left: %v", left)
	})
	recs = c.ReadAll(topic)
	perKey = map[string]int{}
	for _, r := range recs {
		perKey[string(r.Key)]++
	}
	for k, n := range perKey {
		if n != 1 {
			t.Errorf("%s: %d records after compaction, want its latest alone", k, n)
		}
	}
	equalsList(t, ns, stateOf(t, c, topic))
}

// Issue 12, acceptance 1 (Kafka part): with the broker's retention at
// seconds, far below its week, the state layout's topic still holds every
// live object's latest record once that time has passed, while a topic of
// the history layout (the behaviour before the state layout) has lost them.
func TestKafkaStateOutlivesRetention(t *testing.T) {
	ns := namespace(t, "kstate-ret")
	const retention = 3 * time.Second
	c := kafkatest.Start(t, kafkatest.WithBrokerConfigs(map[string]string{"log.retention.ms": fmt.Sprint(retention.Milliseconds())}))
	env := func(prefix, layout string) map[string]string {
		return kafkaEnv(c,
			"BRIDGE_RESOURCES", "configmaps",
			"BRIDGE_NAMESPACES", ns,
			"BRIDGE_CLUSTER_NAME", "e2e",
			"BRIDGE_KAFKA_TOPIC_PREFIX", prefix,
			"BRIDGE_KAFKA_PARTITIONS", "3",
			"BRIDGE_KAFKA_LAYOUT", layout)
	}
	stateTopic := wire.TopicFor("state-"+ns, configMaps.gvr.GroupResource())
	historyTopic := wire.TopicFor("history-"+ns, configMaps.gvr.GroupResource())
	bs := startBridge(t, env("state-"+ns, string(kafka.LayoutState)), nil)
	bh := startBridge(t, env("history-"+ns, string(kafka.LayoutHistory)), nil)

	ctx := t.Context()
	cms := kube(t).CoreV1().ConfigMaps(ns)
	for i := range 30 {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}, Data: map[string]string{"v": "0"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		updateConfigMap(t, ns, fmt.Sprintf("cm-%d", i), "1")
	}
	for i := 25; i < 30; i++ {
		if err := cms.Delete(ctx, fmt.Sprintf("cm-%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Both topics hold the whole state before the retention passes.
	for _, topic := range []string{stateTopic, historyTopic} {
		poll.Until(t, 60*time.Second, func() (bool, string) {
			d := listDiff(list.Items, stateOf(t, c, topic))
			return d == "", topic + ": " + d
		})
	}
	bs.stop(t)
	bh.stop(t)
	if got := c.TopicConfig(stateTopic, "retention.ms"); got != "-1" {
		t.Errorf("%s: retention.ms=%q, want -1", stateTopic, got)
	}

	// The history topic loses every record once the retention has passed
	// (kfake applies retention when it compacts).
	stopped := time.Now()
	poll.Until(t, 10*retention+30*time.Second, func() (bool, string) {
		c.Compact()
		n := len(c.ReadAll(historyTopic))
		return n == 0, fmt.Sprintf("%s still holds %d records", historyTopic, n)
	})
	t.Logf("%s emptied by retention %s after the bridges stopped", historyTopic, time.Since(stopped).Round(time.Millisecond))
	if d := listDiff(list.Items, stateOf(t, c, historyTopic)); d == "" {
		t.Errorf("%s: the history layout kept the state past the retention", historyTopic)
	}
	// The state topic keeps every live object's latest record.
	c.Compact()
	if d := listDiff(list.Items, stateOf(t, c, stateTopic)); d != "" {
		t.Errorf("%s after the broker's retention of %s: %s", stateTopic, retention, d)
	}
	equalsList(t, ns, stateOf(t, c, stateTopic))
}

// updateConfigMap sets data v of a ConfigMap.
func updateConfigMap(t *testing.T, ns, name, v string) {
	t.Helper()
	cms := kube(t).CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{"v": v}
	if _, err := cms.Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// topicState is what a consumer that reads a topic from its start learns:
// per key, the latest event of each live object and whether a key's last
// record was a tombstone.
type topicState struct {
	live       map[string]liveObject
	tombstoned map[string]bool
}

type liveObject struct{ uid, rv string }

// stateOf reads topic from its start and folds its records per key, as a
// consumer would.
func stateOf(t *testing.T, c *kafkatest.Cluster, topic string) topicState {
	t.Helper()
	st := topicState{live: map[string]liveObject{}, tombstoned: map[string]bool{}}
	for _, r := range c.ReadAll(topic) {
		key := string(r.Key)
		if r.Value == nil {
			delete(st.live, key)
			st.tombstoned[key] = true
			continue
		}
		m, _ := decodeRecord(t, r)
		delete(st.tombstoned, key)
		if m.Action == "deleted" {
			delete(st.live, key)
			continue
		}
		st.live[key] = liveObject{uid: m.UID, rv: objectRV(m)}
	}
	return st
}

// objectRV is the resourceVersion of the object an event carries: the
// event's own, except for a change of a view that no change of the object
// explains, which the bridge dates by a later revision.
func objectRV(m *wire.Message) string {
	if rv, err := eventdata.ObjectResourceVersion(m.Data); err == nil && rv != "" {
		return rv
	}
	return m.ResourceVersion
}

// listDiff says how st differs from the ConfigMaps items, "" when it
// holds exactly them, each at its uid and resourceVersion.
func listDiff(items []corev1.ConfigMap, st topicState) string {
	var diffs []string
	want := map[string]bool{}
	for _, cm := range items {
		key := cm.Namespace + "/" + cm.Name
		want[key] = true
		got, ok := st.live[key]
		switch {
		case !ok:
			diffs = append(diffs, key+" missing")
		case got != liveObject{string(cm.UID), cm.ResourceVersion}:
			diffs = append(diffs, fmt.Sprintf("%s at uid %s rv %s, want uid %s rv %s", key, got.uid, got.rv, cm.UID, cm.ResourceVersion))
		}
	}
	for key := range st.live {
		if !want[key] {
			diffs = append(diffs, key+" not in the LIST")
		}
	}
	slices.Sort(diffs)
	if len(diffs) > 8 {
		diffs = append(diffs[:8], fmt.Sprintf("and %d more", len(diffs)-8))
	}
	return strings.Join(diffs, "; ")
}

// equalsList checks that st holds exactly the ConfigMaps of ns the API
// server lists.
func equalsList(t *testing.T, ns string, st topicState) {
	t.Helper()
	list, err := kube(t).CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d := listDiff(list.Items, st); d != "" {
		t.Errorf("the topic's state differs from the LIST: %s", d)
	}
}

// In the state layout a topic that exists without compaction is used as it
// is, with a warning that names it and its policy and
// bridge_kafka_topic_not_compacted at 1; a topic the bridge created is at
// 0. The checkpoint topic keeps its own configs and is not reported.
func TestKafkaStateWarnsOfTopicNotCompacted(t *testing.T) {
	ns := namespace(t, "kstate-warn")
	c := kafkatest.Start(t)
	old := wire.TopicFor("kube-"+ns, configMaps.gvr.GroupResource())
	c.CreateTopic(old, 1, nil) // the broker's defaults, as before the state layout
	created := wire.TopicFor("kube-"+ns, schema.GroupResource{Resource: "secrets"})
	checkpointTopic := "ckpt-" + ns
	m := metrics.New()
	b := startBridgeWith(t, kafkaEnv(c,
		"BRIDGE_RESOURCES", "configmaps,secrets",
		"BRIDGE_NAMESPACES", ns,
		"BRIDGE_CLUSTER_NAME", "e2e",
		"BRIDGE_KAFKA_TOPIC_PREFIX", "kube-"+ns,
		"BRIDGE_CHECKPOINT", "kafka:"+checkpointTopic,
	), bridge.WithMetrics(m))

	warned := false
	for line := range strings.Lines(b.logs.String()) {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "topic is not compacted") &&
			strings.Contains(line, "topic="+old) && strings.Contains(line, "cleanupPolicy=delete") {
			warned = true
		}
		if strings.Contains(line, "level=WARN") && (strings.Contains(line, created) || strings.Contains(line, checkpointTopic)) {
			t.Errorf("a warning about a compacted topic: %s", line)
		}
	}
	if !warned {
		t.Errorf("no warning names %s and its cleanup.policy delete", old)
	}
	got := seriesOf(t, m, "bridge_kafka_topic_not_compacted", "topic")
	want := map[string]float64{old: 1, created: 0}
	if len(got) != len(want) || got[old] != 1 || got[created] != 0 {
		t.Errorf("bridge_kafka_topic_not_compacted = %v, want %v", got, want)
	}
	if p := c.TopicConfig(old, "cleanup.policy"); p != "delete" {
		t.Errorf("%s: cleanup.policy changed to %q", old, p)
	}
	// The checkpoint topic is created as before: compacted, without the
	// state layout's configs.
	if p, r := c.TopicConfig(checkpointTopic, "cleanup.policy"), c.TopicConfig(checkpointTopic, "delete.retention.ms"); p != "compact" || r != "86400000" {
		t.Errorf("%s: cleanup.policy=%q delete.retention.ms=%q, want compact and the broker's 86400000", checkpointTopic, p, r)
	}

	// The topic is used as it is.
	if _, err := kube(t).CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 60*time.Second, func() (bool, string) {
		_, ok := stateOf(t, c, old).live[ns+"/a"]
		return ok, "ConfigMap a is not in " + old
	})
}
