package chart

import (
	"path"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubebus/bridge/test/controlplane"
)

// replicaCredentialsDir is where the replica finds its bus credential files.
const replicaCredentialsDir = "/etc/replica/credentials"

// bridgeCredentials secures this release's bridge with credentials that
// may write: none of them may reach the replica.
var bridgeCredentials = []string{
	"--set", "existingSecret=bridge-writer",
	"--set", "nats.user=writer", "--set", "nats.passwordKey=nats-password", "--set", "nats.tls.caKey=nats-ca",
	"--set", "kafka.sasl.mechanism=scram-sha-512", "--set", "kafka.sasl.usernameKey=kafka-user", "--set", "kafka.sasl.passwordKey=kafka-password",
	"--set", "kafka.tls.caKey=kafka-ca",
}

// credentialCases are the replica's credentials for each kind of bus
// security, with the variables they must set: a literal value, or
// "secret/key" for a variable from a Secret key or a file projected from
// one.
var credentialCases = []struct {
	name string
	args []string
	want map[string]string
}{
	{"nats user and password",
		[]string{"--set", "sink=nats", "--set", "nats.urls={nats://bus:4222}",
			"--set", "replica.existingSecret=replica-reader", "--set", "replica.nats.user=reader", "--set", "replica.nats.passwordKey=password"},
		map[string]string{"REPLICA_NATS_USER": "reader", "REPLICA_NATS_PASSWORD": "replica-reader/password"}},
	{"nats token",
		[]string{"--set", "sink=nats", "--set", "nats.urls={nats://bus:4222}",
			"--set", "replica.existingSecret=replica-reader", "--set", "replica.nats.tokenKey=token"},
		map[string]string{"REPLICA_NATS_TOKEN": "replica-reader/token"}},
	{"nats creds file and nkey seed",
		[]string{"--set", "replica.bus=nats", "--set", "replica.nats.urls={nats://hub:4222}",
			"--set", "replica.existingSecret=replica-reader", "--set", "replica.nats.credsKey=reader.creds", "--set", "replica.nats.nkeySeedKey=seed"},
		map[string]string{"REPLICA_NATS_CREDS_FILE": "replica-reader/reader.creds", "REPLICA_NATS_NKEY_SEED_FILE": "replica-reader/seed"}},
	{"nats mutual TLS from a Secret of its own",
		[]string{"--set", "sink=nats", "--set", "nats.urls={tls://bus:4222}",
			"--set", "replica.existingSecret=replica-reader", "--set", "replica.nats.tokenKey=token",
			"--set", "replica.nats.tls.existingSecret=replica-tls-client", "--set", "replica.nats.tls.caKey=ca.crt",
			"--set", "replica.nats.tls.certKey=tls.crt", "--set", "replica.nats.tls.keyKey=tls.key"},
		map[string]string{"REPLICA_NATS_TOKEN": "replica-reader/token", "REPLICA_NATS_TLS_CA_FILE": "replica-tls-client/ca.crt",
			"REPLICA_NATS_TLS_CERT_FILE": "replica-tls-client/tls.crt", "REPLICA_NATS_TLS_KEY_FILE": "replica-tls-client/tls.key"}},
	{"kafka SCRAM and TLS",
		[]string{"--set", "sink=kafka", "--set", "kafka.brokers={k1:9093}",
			"--set", "replica.existingSecret=replica-reader",
			"--set", "replica.kafka.sasl.mechanism=scram-sha-256", "--set", "replica.kafka.sasl.usernameKey=user", "--set", "replica.kafka.sasl.passwordKey=password",
			"--set", "replica.kafka.tls.caKey=ca.crt", "--set", "replica.kafka.tls.serverName=kafka.internal"},
		map[string]string{"REPLICA_KAFKA_TLS": "true", "REPLICA_KAFKA_TLS_SERVER_NAME": "kafka.internal", "REPLICA_KAFKA_TLS_CA_FILE": "replica-reader/ca.crt",
			"REPLICA_KAFKA_SASL_MECHANISM": "scram-sha-256", "REPLICA_KAFKA_SASL_USERNAME": "replica-reader/user", "REPLICA_KAFKA_SASL_PASSWORD": "replica-reader/password"}},
	{"kafka literal user, system CAs",
		[]string{"--set", "sink=kafka", "--set", "kafka.brokers={k1:9093}",
			"--set", "replica.existingSecret=replica-reader", "--set", "replica.kafka.tls.enabled=true",
			"--set", "replica.kafka.sasl.mechanism=scram-sha-512", "--set", "replica.kafka.sasl.username=reader", "--set", "replica.kafka.sasl.passwordKey=password"},
		map[string]string{"REPLICA_KAFKA_TLS": "true", "REPLICA_KAFKA_SASL_MECHANISM": "scram-sha-512",
			"REPLICA_KAFKA_SASL_USERNAME": "reader", "REPLICA_KAFKA_SASL_PASSWORD": "replica-reader/password"}},
}

// credentialEnv is the replica's bus credential variables: literal values,
// "secret/key" for a secretKeyRef, and for a file under
// replicaCredentialsDir the Secret and key projected to it.
func credentialEnv(t *testing.T, d *appsv1.Deployment) map[string]string {
	t.Helper()
	replicaEnv(t, d) // no variable twice, none the replica does not read
	got := map[string]string{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if !strings.HasPrefix(e.Name, "REPLICA_NATS_") && !strings.HasPrefix(e.Name, "REPLICA_KAFKA_") ||
			slices.Contains([]string{"REPLICA_NATS_URL", "REPLICA_NATS_STREAM", "REPLICA_NATS_SUBJECT_PREFIX", "REPLICA_NATS_SUBJECT",
				"REPLICA_KAFKA_BROKERS", "REPLICA_KAFKA_TOPIC_PREFIX"}, e.Name) {
			continue
		}
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			got[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		case e.ValueFrom != nil:
			t.Errorf("%s comes from neither a value nor a Secret key", e.Name)
		case strings.HasPrefix(e.Value, replicaCredentialsDir+"/"):
			got[e.Name] = projectedFrom(t, d, e.Value)
		default:
			got[e.Name] = e.Value
		}
	}
	return got
}

// projectedFrom is "secret/key" of the Secret key projected to file by the
// volume mounted, read-only and whole, at file's directory.
func projectedFrom(t *testing.T, d *appsv1.Deployment, file string) string {
	t.Helper()
	pod := d.Spec.Template.Spec
	dir, base := path.Split(file)
	for _, m := range pod.Containers[0].VolumeMounts {
		if m.MountPath+"/" != dir {
			continue
		}
		if !m.ReadOnly || m.SubPath != "" {
			t.Errorf("%s: volume %s is mounted writable or with subPath", file, m.Name)
		}
		for _, v := range pod.Volumes {
			if v.Name != m.Name {
				continue
			}
			if v.Projected == nil {
				t.Fatalf("%s: volume %s is not a projection of Secrets", file, v.Name)
			}
			if v.Projected.DefaultMode == nil || *v.Projected.DefaultMode != 0o440 {
				t.Errorf("%s: volume %s's mode is not 0440", file, v.Name)
			}
			for _, src := range v.Projected.Sources {
				if src.Secret == nil {
					t.Errorf("%s: volume %s projects something other than a Secret", file, v.Name)
					continue
				}
				for _, it := range src.Secret.Items {
					if it.Path == base {
						return src.Secret.Name + "/" + it.Key
					}
				}
			}
			t.Fatalf("%s: volume %s projects no %s", file, v.Name, base)
		}
	}
	t.Fatalf("%s is in no mounted volume", file)
	return ""
}

// replicaRendering renders the replica with args and returns the objects
// and its Deployment.
func replicaRendering(t *testing.T, args ...string) ([]*unstructured.Unstructured, *appsv1.Deployment) {
	t.Helper()
	manifest, err := template(t, "x", "default", append(slices.Clone(replicaAuth), args...)...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeManifest(manifest)
	if err != nil {
		t.Fatal(err)
	}
	return objs, namedDeployment(t, objs, "x-bridge-replica")
}

// usesSecret says whether the pod reads Secret name, by a variable or a
// volume.
func usesSecret(d *appsv1.Deployment, name string) bool {
	pod := d.Spec.Template.Spec
	for _, c := range pod.Containers {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == name {
				return true
			}
		}
	}
	for _, v := range pod.Volumes {
		if v.Secret != nil && v.Secret.SecretName == name {
			return true
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.Secret != nil && s.Secret.Name == name {
					return true
				}
			}
		}
	}
	return false
}

// TestReplicaCredentials: replica.existingSecret and the replica's *Key
// values become REPLICA_* variables from secretKeyRef and files projected
// read-only under /etc/replica/credentials, for the bus the replica reads
// only; the bridge's credentials, beside them, reach the replica never,
// and without replica.existingSecret the replica has none.
func TestReplicaCredentials(t *testing.T) {
	t.Parallel()
	for _, c := range credentialCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, d := replicaRendering(t, slices.Concat(bridgeCredentials, c.args)...)
			want(t, "credential variables", credentialEnv(t, d), c.want)
			if usesSecret(d, "bridge-writer") {
				t.Error("the replica reads the bridge's Secret")
			}
			bridge := namedDeployment(t, mustObjs(t, slices.Concat(bridgeCredentials, c.args)), "x-bridge")
			// A bridge on stdout, beside a replica of another bus, has no
			// bus to read its Secret for.
			if !slices.Contains(c.args, "replica.bus=nats") && !usesSecret(bridge, "bridge-writer") {
				t.Error("the bridge does not read its Secret: the check above proves nothing")
			}
			if usesSecret(bridge, "replica-reader") || usesSecret(bridge, "replica-tls-client") {
				t.Error("the bridge reads the replica's Secret")
			}
		})
	}

	t.Run("nothing without replica.existingSecret", func(t *testing.T) {
		t.Parallel()
		for _, bus := range [][]string{
			{"--set", "sink=nats", "--set", "nats.urls={nats://bus:4222}"},
			{"--set", "sink=kafka", "--set", "kafka.brokers={k1:9093}"},
		} {
			_, d := replicaRendering(t, slices.Concat(bridgeCredentials, bus)...)
			got := credentialEnv(t, d)
			if bus[1] == "sink=kafka" {
				want(t, bus[1]+": credential variables", got, map[string]string{"REPLICA_KAFKA_TLS": "false"})
			} else {
				want(t, bus[1]+": credential variables", got, map[string]string{})
			}
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.Name == "credentials" || v.Projected != nil {
					t.Errorf("%s: volume %s without replica.existingSecret", bus[1], v.Name)
				}
			}
			if usesSecret(d, "bridge-writer") {
				t.Errorf("%s: the replica reads the bridge's Secret", bus[1])
			}
		}
	})

	t.Run("the other bus's values are not used", func(t *testing.T) {
		t.Parallel()
		_, d := replicaRendering(t, "--set", "sink=nats", "--set", "nats.urls={nats://bus:4222}",
			"--set", "replica.existingSecret=replica-reader", "--set", "replica.nats.tokenKey=token",
			"--set", "replica.kafka.sasl.mechanism=plain", "--set", "replica.kafka.sasl.username=u", "--set", "replica.kafka.sasl.passwordKey=p",
			"--set", "replica.kafka.tls.caKey=ca")
		want(t, "credential variables", credentialEnv(t, d), map[string]string{"REPLICA_NATS_TOKEN": "replica-reader/token"})
	})
}

// mustObjs renders x in default with replicaAuth and args.
func mustObjs(t *testing.T, args []string) []*unstructured.Unstructured {
	t.Helper()
	objs, _ := replicaRendering(t, args...)
	return objs
}

// TestReplicaCredentialsRefused: credentials the replica could not use are
// refused, with messages naming the replica's values.
func TestReplicaCredentialsRefused(t *testing.T) {
	t.Parallel()
	nats := []string{"--set", "sink=nats", "--set", "nats.urls={nats://bus:4222}"}
	kafka := []string{"--set", "sink=kafka", "--set", "kafka.brokers={k:9092}"}
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"nats keys without the Secret", slices.Concat(nats, []string{"--set", "replica.nats.tokenKey=token", "--set", "replica.nats.credsKey=creds"}),
			[]string{`replica.nats.tokenKey needs replica.existingSecret, the Secret that holds key "token"`, `replica.nats.credsKey needs replica.existingSecret`}},
		{"the bridge's Secret is not the replica's", slices.Concat(nats, []string{"--set", "existingSecret=bridge-writer", "--set", "replica.nats.passwordKey=password", "--set", "replica.nats.user=reader"}),
			[]string{"replica.nats.passwordKey needs replica.existingSecret"}},
		{"nats password without a user", slices.Concat(nats, []string{"--set", "replica.existingSecret=r", "--set", "replica.nats.passwordKey=password"}),
			[]string{"replica.nats.passwordKey needs replica.nats.user"}},
		{"nats TLS keys without a Secret", slices.Concat(nats, []string{"--set", "replica.nats.tls.caKey=ca", "--set", "replica.nats.tls.certKey=crt"}),
			[]string{"replica.nats.tls: the TLS keys need replica.nats.tls.existingSecret or replica.existingSecret", "replica.nats.tls: certKey and keyKey go together"}},
		{"kafka SASL half set", slices.Concat(kafka, []string{"--set", "replica.existingSecret=r", "--set", "replica.kafka.sasl.mechanism=scram-sha-256"}),
			[]string{"replica.kafka.sasl.mechanism=scram-sha-256 needs replica.kafka.sasl.username or replica.kafka.sasl.usernameKey",
				"replica.kafka.sasl.mechanism=scram-sha-256 needs replica.kafka.sasl.passwordKey, the key of replica.existingSecret"}},
		{"kafka SASL without a mechanism", slices.Concat(kafka, []string{"--set", "replica.existingSecret=r", "--set", "replica.kafka.sasl.passwordKey=p"}),
			[]string{"replica.kafka.sasl: a username or password is set but replica.kafka.sasl.mechanism is not"}},
		{"kafka user twice", slices.Concat(kafka, []string{"--set", "replica.existingSecret=r", "--set", "replica.kafka.sasl.mechanism=plain",
			"--set", "replica.kafka.sasl.username=u", "--set", "replica.kafka.sasl.usernameKey=u", "--set", "replica.kafka.sasl.passwordKey=p"}),
			[]string{"replica.kafka.sasl: set username or usernameKey, not both"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := template(t, "x", "default", slices.Concat(replicaAuth, c.args)...)
			if err == nil {
				t.Fatalf("%v rendered; want the chart to refuse it", c.args)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("want the message to hold %q, got:\n%s", w, err)
				}
			}
		})
	}
}

// TestReplicaCredentialsSchema: the schema refuses replica credential
// values of the wrong form.
func TestReplicaCredentialsSchema(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, set, want string }{
		{"secret name", "replica.existingSecret=Reader", "at '/replica/existingSecret'"},
		{"key", "replica.nats.passwordKey=a/b", "at '/replica/nats/passwordKey'"},
		{"tls secret", "replica.nats.tls.existingSecret=A_B", "at '/replica/nats/tls/existingSecret'"},
		{"mechanism", "replica.kafka.sasl.mechanism=gssapi", "at '/replica/kafka/sasl/mechanism'"},
		{"tls enabled", "replica.kafka.tls.enabled=yes", "at '/replica/kafka/tls/enabled'"},
		{"misspelled", "replica.nats.tls.ca=x", "additional properties 'ca' not allowed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := template(t, "x", "default", "--set", c.set)
			if err == nil {
				t.Fatalf("--set %s rendered; want the schema to refuse it", c.set)
			}
			if msg := err.Error(); !strings.Contains(msg, "values don't meet the specifications of the schema") || !strings.Contains(msg, c.want) {
				t.Errorf("--set %s: want a schema error with %q, got:\n%s", c.set, c.want, msg)
			}
		})
	}
}

// TestReplicaCredentialsAPIServer: a real kube-apiserver accepts every
// object of each credential case by a server-side dry run, without a
// warning, and helm's NOTES say what a secured bus needs when the replica
// has no Secret of its own.
func TestReplicaCredentialsAPIServer(t *testing.T) {
	t.Parallel()
	cp := controlplane.ForTest(t)
	c := newCluster(t, cp.RESTConfig())
	const ns = "replica-credentials"
	c.createNamespaces(t, ns)
	for _, cc := range credentialCases {
		t.Run("dry-run/"+cc.name, func(t *testing.T) {
			manifest, err := template(t, "x", ns, slices.Concat(replicaAuth, bridgeCredentials, cc.args)...)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := decodeManifest(manifest)
			if err != nil {
				t.Fatal(err)
			}
			dryRunObjects(t, c, objs)
		})
	}
	notes := func(t *testing.T, args ...string) string {
		out, err := runHelm(t, slices.Concat([]string{"install", "x", chartDir, "--namespace", ns, "--dry-run=server", "--kubeconfig", cp.KubeconfigPath()}, replicaAuth, args)...)
		if err != nil {
			t.Fatal(err)
		}
		_, n, ok := strings.Cut(out, "NOTES:\n")
		if !ok {
			t.Fatalf("no NOTES:\n%s", out)
		}
		return n
	}
	const need = "A secured bus needs replica.existingSecret\nwith read-only credentials"
	t.Run("notes/no Secret", func(t *testing.T) {
		n := notes(t, slices.Concat(bridgeCredentials, []string{"--set", "sink=nats", "--set", "nats.urls={nats://bus:4222}"})...)
		for _, w := range []string{"The replica connects to nats without credentials: it reuses none of the\nbridge's", need} {
			if !strings.Contains(n, w) {
				t.Errorf("NOTES lack %q:\n%s", w, n)
			}
		}
	})
	t.Run("notes/its own Secret", func(t *testing.T) {
		n := notes(t, credentialCases[0].args...)
		if strings.Contains(n, need) {
			t.Errorf("NOTES ask for replica.existingSecret, which is set:\n%s", n)
		}
	})
}
