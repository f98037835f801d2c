package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubebus/bridge/test/poll"
)

// The poison scenario's figures.
const (
	// poisonObjects is how many normal ConfigMaps are churned around the
	// poisons.
	poisonObjects = 200
	// poisonLimit is the message size limit of the buses: small, so that
	// the oversize objects are cheap to make.
	poisonLimit = 64 << 10
	// poisonLongName is the length of a Role's name far past the NATS
	// server's control line (4 KiB) whose events still fit the limit: they
	// must arrive whole.
	poisonLongName = 5_000
	// poisonHugeName is the length of a Role's name past the limit on its
	// own, so that even its event without content cannot fit: the
	// documented exception, skipped.
	poisonHugeName = 100_000
	// poisonLogLine bounds every line the bridge logs, names of any
	// length included.
	poisonLogLine = 4 << 10
	poisonSeed    = 13
)

// Issue 11, poison objects: among 200 ConfigMaps that writers churn
// before, while and after the poisons arrive, the bridge watching
// ConfigMaps and Roles of one namespace meets a Role named with 5,000
// bytes (updated once), a Role whose 100,000-byte name alone passes the
// bus's 64 KiB limit, a ConfigMap that grows past the limit, and a
// ConfigMap past the limit that is then deleted. No single object stops
// the stream: the long name arrives whole; the update past the limit and
// the large object's added and deleted arrive without content, marked
// contentomitted (on Kafka, with the delete's tombstone); the Role whose
// identity alone cannot fit is the one documented exception, skipped,
// logged under a bounded name and counted. Changes made after the poisons
// still flow, readiness stays nil throughout, and the NATS connection
// never drops. Once the writers stop, the view the stream gives equals
// the LIST of ConfigMaps and Roles, less only that Role, with no
// resourceVersion going backwards; JetStream holds no duplicate and Kafka
// repeats a write only in place. A restart with the bus's checkpoint
// publishes nothing again.
func TestFaultPoisonObjects(t *testing.T) {
	forEachBusWith(t, busOptions{maxMessageBytes: poisonLimit}, func(t *testing.T, b bus) {
		ns := namespace(t, "fault-poison-"+b.name())
		env := withEnv(b.env(ns), map[string]string{"BRIDGE_RESOURCES": "configmaps,roles.rbac.authorization.k8s.io"})
		kinds := []watchedKind{configMaps, roles}
		ctx := t.Context()
		fast := fastKube(t)
		cms := fast.CoreV1().ConfigMaps(ns)
		rls := fast.RbacV1().Roles(ns)

		// The normal objects, there before the start.
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := g; i < poisonObjects; i += 8 {
					cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%03d", i)}, Data: map[string]string{"n": "0"}}
					if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
						t.Errorf("create %s: %v", cm.Name, err)
					}
				}
			})
		}
		wg.Wait()
		createRole := func(name string) *rbacv1.Role {
			t.Helper()
			r, err := rls.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create Role %s: %.300v", shortName(name), err)
			}
			return r
		}
		createRole("before")

		r := startBridge(t, env, nil)
		ready := watchReadiness(r.b)
		probe := newBusProbe(t, b, ns)
		w := startChurners(t, ns, poisonObjects, 4, poisonSeed)
		probe.waitGrown(t, 0, poisonObjects+100, "before the poisons")

		// The poisons, while the writers go on.
		long := createRole(longName("poison-long-", poisonLongName))
		long.Rules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}
		long, err := rls.Update(ctx, long, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("update Role %s: %.300v", shortName(long.Name), err)
		}
		huge := createRole(longName("poison-huge-", poisonHugeName))
		grows, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "poison-grows"}, Data: map[string]string{"n": "0"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		grows.Data = pageOf('x', 2*poisonLimit)
		if grows, err = cms.Update(ctx, grows, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		doomed, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "poison-doomed"}, Data: pageOf('x', 2*poisonLimit)}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := cms.Delete(ctx, doomed.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		poisoned := time.Now()

		// The poisons arrive (or, for the huge name, are skipped), and the
		// stream goes on after them.
		reader := newScopeReader(t, b, scope{ns: ns, kinds: kinds})
		poll.Until(t, time.Minute, func() (bool, string) {
			msgs := reader.read(t)
			var missing []string
			if got := eventsOf(msgs, long.Name); len(got) == 0 || got[len(got)-1].ResourceVersion != long.ResourceVersion {
				missing = append(missing, "Role "+shortName(long.Name)+" at "+long.ResourceVersion)
			}
			if got := eventsOf(msgs, grows.Name); len(got) == 0 || got[len(got)-1].ResourceVersion != grows.ResourceVersion {
				missing = append(missing, "poison-grows at "+grows.ResourceVersion)
			}
			if got := eventsOf(msgs, doomed.Name); len(got) == 0 || got[len(got)-1].Action != "deleted" {
				missing = append(missing, "the delete of poison-doomed")
			}
			if !strings.Contains(r.logs.String(), "skipping delta that cannot be published") {
				missing = append(missing, "the skip of Role "+shortName(huge.Name))
			}
			return len(missing) == 0, "not yet arrived: " + strings.Join(missing, ", ")
		})
		arrived := time.Since(poisoned)
		seen := probe.waitGrown(t, probe.count(), 300, "after the poisons")
		after := createRole("after")
		made := w.stop()

		reader.s.except = map[objectRef]string{
			{roles.kind, ns + "/" + huge.Name}: "its event without content is larger than the bus takes: skipped, logged and counted",
		}
		v, converged := reader.converge(t, time.Minute)
		msgs := reader.read(t)
		if len(r.done) > 0 {
			t.Fatal("the bridge stopped")
		}
		flips := ready.stop()
		if len(flips) != 1 || flips[0].err != nil {
			t.Errorf("readiness changed while running: %s", flips)
		}
		checkOrder(t, b, v, msgs)

		// Each poison, as documented.
		if got := eventsOf(msgs, long.Name); len(got) != 2 || got[0].Action != "added" || got[1].ResourceVersion != long.ResourceVersion ||
			contentOmitted(got[0]) || contentOmitted(got[1]) {
			t.Errorf("Role %s: %s; want added, then updated@%s, both whole", shortName(long.Name), describe(got), long.ResourceVersion)
		} else if !strings.Contains(string(got[1].Data), `"name":"`+long.Name+`"`) || !strings.Contains(string(got[1].Data), `"verbs":["get"]`) {
			t.Errorf("Role %s: updated@%s without its name or rules: %.300s", shortName(long.Name), long.ResourceVersion, got[1].Data)
		}
		if got := eventsOf(msgs, huge.Name); len(got) != 0 {
			t.Errorf("Role %s: %s; want nothing, skipped", shortName(huge.Name), describe(got))
		}
		if got := eventsOf(msgs, grows.Name); len(got) != 2 || got[1].Action != "updated" || got[1].ResourceVersion != grows.ResourceVersion || !contentOmitted(got[1]) {
			t.Errorf("poison-grows: %s; want added, then updated@%s without content", describe(got), grows.ResourceVersion)
		} else if why := identityOnly(got[1], string(grows.UID), grows.ResourceVersion); why != "" {
			t.Errorf("poison-grows: updated@%s: %s", grows.ResourceVersion, why)
		}
		if got := eventsOf(msgs, doomed.Name); len(got) != 2 || got[0].Action != "added" || got[1].Action != "deleted" || !contentOmitted(got[0]) || !contentOmitted(got[1]) {
			t.Errorf("poison-doomed: %s; want added and deleted, both without content", describe(got))
		} else if got[1].UID != string(doomed.UID) {
			t.Errorf("poison-doomed: deleted uid %s, want %s", got[1].UID, doomed.UID)
		}
		if ts := tombstones(t, b, ns); ts != nil && ts[ns+"/"+doomed.Name] != 1 {
			t.Errorf("poison-doomed: %d tombstones, want 1", ts[ns+"/"+doomed.Name])
		}
		omitted := 0
		for _, m := range msgs {
			if !contentOmitted(m) {
				continue
			}
			omitted++
			if m.Name != grows.Name && m.Name != doomed.Name {
				t.Errorf("%s %s@%s published without content", shortName(m.Name), m.Action, m.ResourceVersion)
			}
		}
		if got := eventsOf(msgs, after.Name); len(got) != 1 || got[0].ResourceVersion != after.ResourceVersion {
			t.Errorf("Role after: %s, want added@%s", describe(got), after.ResourceVersion)
		}

		// The skip is logged, naming the Role within a bounded line; the
		// connection never dropped.
		logs := r.logs.String()
		skips := 0
		for line := range strings.Lines(logs) {
			if len(line) > poisonLogLine {
				t.Errorf("a log line of %d bytes: %.300s", len(line), line)
			}
			if strings.Contains(line, "skipping delta that cannot be published") {
				skips++
				if !strings.Contains(line, "namespace="+ns) || !strings.Contains(line, "poison-huge-xxxx") {
					t.Errorf("the skip does not name the Role: %.500s", line)
				}
			}
		}
		if skips != 1 {
			t.Errorf("%d skips logged, want 1", skips)
		}
		for _, bad := range []string{"nats: disconnected", "nats: reconnected", "control line", "connection closed"} {
			if strings.Contains(logs, bad) {
				t.Errorf("the bridge logged %q while running", bad)
			}
		}
		r.stop(t)
		if got := stoppedFigures(t, r.logs.String()); got["skipped"] != 1 || got["contentOmitted"] != int64(omitted) {
			t.Errorf("the bridge counted %d skipped and %d published without content, want 1 and %d", got["skipped"], got["contentOmitted"], omitted)
		}

		// A restart publishes nothing again.
		before := b.readKinds(t, ns, kinds)
		r = startBridge(t, env, nil)
		r.stop(t)
		if again := newEvents(before, b.readKinds(t, ns, kinds)); len(again) > 0 {
			t.Errorf("the restart published %d events again: %s", len(again), describe(again))
		}
		if ts := tombstones(t, b, ns); ts != nil && ts[ns+"/"+doomed.Name] != 1 {
			t.Errorf("poison-doomed after a restart: %d tombstones, want 1", ts[ns+"/"+doomed.Name])
		}
		restart := stoppedFigures(t, r.logs.String())

		t.Logf("%s: %d changes made; %d events (%d without content, %d duplicates), %d on the probe; the poisons arrived %s after they were made; "+
			"the view equalled the LIST %s after the writers stopped, less %s; the restart published %d and skipped %d again; readiness: %s",
			b.name(), made, v.events, omitted, v.duplicates, seen, arrived.Round(time.Millisecond), converged.Round(time.Millisecond), strings.Join(v.excepted, ", "), restart["published"], restart["skipped"], flips)
	})
}

// stoppedFigure is one count of the line a bridge logs when it stops.
var stoppedFigure = regexp.MustCompile(` (published|contentOmitted|skipped|retried|abandoned)=(\d+)`)

// stoppedFigures returns the counts of the line the bridge logged when it
// stopped, by name.
func stoppedFigures(t *testing.T, logs string) map[string]int64 {
	t.Helper()
	for line := range strings.Lines(logs) {
		if !strings.Contains(line, "msg=stopped ") {
			continue
		}
		out := map[string]int64{}
		for _, m := range stoppedFigure.FindAllStringSubmatch(line, -1) {
			n, err := strconv.ParseInt(m[2], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			out[m[1]] = n
		}
		return out
	}
	t.Fatal("the bridge logged no stopped line")
	return nil
}
