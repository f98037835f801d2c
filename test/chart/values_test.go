package chart

import (
	"strings"
	"testing"
)

// TestSchemaRejects: values.schema.json refuses values the bridge cannot
// use, and helm's message points at the value.
func TestSchemaRejects(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		set  string
		want string // in helm's message, after the schema error header
	}{
		{"short name", "watch.resources={deploy}", "at '/watch/resources/0': value must be one of 'configmaps'"},
		{"singular", "watch.resources={pod}", "at '/watch/resources/0'"},
		{"short name of a cluster resource", "watch.clusterResources={no}", "at '/watch/clusterResources/0'"},
		{"kind", "watch.resources={Deployment}", "at '/watch/resources/0'"},
		{"version", "watch.resources={deployments.v1.apps}", "at '/watch/resources/0'"},
		{"core version", "watch.resources={configmaps.v1}", "at '/watch/resources/0'"},
		{"repeated resource", "watch.resources={pods,pods}", "at '/watch/resources'"},
		{"unknown sink", "sink=redis", "at '/sink': value must be one of 'stdout', 'nats', 'kafka'"},
		{"unknown checkpoint", "checkpoint.type=etcd", "at '/checkpoint/type'"},
		{"misspelled value", "replicas=2", "additional properties 'replicas' not allowed"},
		{"no replicas", "replicaCount=0", "at '/replicaCount'"},
		{"namespace", "watch.namespaces={Team_A}", "at '/watch/namespaces/0'"},
		{"log level", "log.level=verbose", "at '/log/level'"},
		{"duration", "pipeline.shutdownTimeout=25", "at '/pipeline/shutdownTimeout'"},
		{"nats url", "nats.urls={nats.example.com:4222}", "at '/nats/urls/0'"},
		{"broker", "kafka.brokers={kafka.example.com}", "at '/kafka/brokers/0'"},
		{"sasl mechanism", "kafka.sasl.mechanism=gssapi", "at '/kafka/sasl/mechanism'"},
		{"kafka layout", "kafka.layout=latest", "at '/kafka/layout'"},
		{"kafka delete retention", "kafka.deleteRetention=1day", "at '/kafka/deleteRetention'"},
		{"bucket", "checkpoint.natsKV.bucket=a.b", "at '/checkpoint/natsKV/bucket'"},
		{"stream replicas", "nats.streamReplicas=7", "at '/nats/streamReplicas'"},
		{"nats layout", "nats.layout=both", "at '/nats/layout'"},
		{"delete TTL", "nats.deleteTTL=a day", "at '/nats/deleteTTL'"},
		{"leader election", "leaderElection.enabled=maybe", "at '/leaderElection/enabled'"},
		{"filter not a string", "filter=true", "at '/filter'"},
		{"fields as a list", "fields={spec,status}", "at '/fields'"},
		{"drop fields as a number", "dropFields=1", "at '/dropFields'"},
		{"exclusion: a wildcard that is not a group", "watch.exclude={*foo}", "at '/watch/exclude/0'"},
		{"exclusion: a group then a wildcard", "watch.exclude={apps.*}", "at '/watch/exclude/0'"},
		{"exclusion: everything", "watch.exclude={*}", "at '/watch/exclude/0'"},
		{"exclusion: a version", "watch.exclude={deployments.v1.apps}", "at '/watch/exclude/0'"},
		{"exclusion: a short name", "watch.exclude={ev}", "at '/watch/exclude/0'"},
		{"exclusion: repeated", "watch.exclude={events,events}", "at '/watch/exclude'"},
		{"extra group: upper case", "watch.extraGroups={Example.COM}", "at '/watch/extraGroups/0'"},
		{"extra group: a wildcard", "watch.extraGroups={*.example.com}", "at '/watch/extraGroups/0'"},
		{"watch.all not a boolean", "watch.all=yes", "at '/watch/all'"},
		{"list concurrency", "watch.listConcurrency=0", "at '/watch/listConcurrency'"},
		{"qps", "kubeClient.qps=0", "at '/kubeClient/qps'"},
		{"burst", "kubeClient.burst=0", "at '/kubeClient/burst'"},
		{"misspelled client value", "kubeClient.QPS=5", "additional properties 'QPS' not allowed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := template(t, "x", "default", "--set", c.set)
			if err == nil {
				t.Fatalf("--set %s rendered; want the schema to refuse it", c.set)
			}
			msg := err.Error()
			if !strings.Contains(msg, "values don't meet the specifications of the schema") || !strings.Contains(msg, c.want) {
				t.Errorf("--set %s: want a schema error with %q, got:\n%s", c.set, c.want, msg)
			}
		})
	}
}

// TestChartRefuses: the chart's own checks, for what the schema cannot see,
// refuse with a message naming the values and what to do instead, and
// report every problem at once.
func TestChartRefuses(t *testing.T) {
	t.Parallel()
	nats := []string{"--set", "sink=nats", "--set", "nats.urls={nats://nats:4222}"}
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"file checkpoint with two replicas", []string{"--set", "replicaCount=2"},
			[]string{"checkpoint.type=file cannot be used with replicaCount=2: only one pod can use the checkpoint file (a bbolt file on a ReadWriteOnce volume). Use checkpoint.type=nats-kv or kafka, or replicaCount=1"}},
		{"file checkpoint without a volume, two replicas", []string{"--set", "replicaCount=2", "--set", "checkpoint.file.persistence.enabled=false"},
			[]string{"checkpoint.type=file cannot be used with replicaCount=2"}},
		{"two replicas without leader election", append([]string{"--set", "replicaCount=2", "--set", "checkpoint.type=nats-kv", "--set", "leaderElection.enabled=false"}, nats...),
			[]string{"leaderElection.enabled=false cannot be used with replicaCount=2"}},
		{"rolling update without leader election", []string{"--set", "strategy.type=RollingUpdate"},
			[]string{"strategy.type=RollingUpdate needs leader election and a checkpoint other than file"}},
		{"rolling update with a file checkpoint", []string{"--set", "strategy.type=RollingUpdate", "--set", "leaderElection.enabled=true"},
			[]string{"strategy.type=RollingUpdate needs leader election and a checkpoint other than file"}},
		{"cluster-scoped resource as namespaced", []string{"--set", "watch.resources={configmaps,nodes}"},
			[]string{"watch.resources: nodes is cluster-scoped; list it under watch.clusterResources"}},
		{"cluster-scoped resource of a group as namespaced", []string{"--set", "watch.resources={storageclasses.storage.k8s.io}"},
			[]string{"watch.resources: storageclasses.storage.k8s.io is cluster-scoped"}},
		{"namespaced resource as cluster-scoped", []string{"--set", "watch.clusterResources={deployments.apps}"},
			[]string{"watch.clusterResources: deployments.apps is namespaced; list it under watch.resources"}},
		{"short name, without the schema", []string{"--skip-schema-validation", "--set", "watch.resources={deploy}"},
			[]string{`watch.resources: "deploy" is not a core resource that can be watched; name resources <plural>.<group>, like deployments.apps`}},
		{"zero shutdown budget", []string{"--set-string", "pipeline.shutdownTimeout=0"},
			[]string{"pipeline.shutdownTimeout=0 must be positive"}},
		{"zero shutdown budget with a unit", []string{"--set-string", "pipeline.shutdownTimeout=0s"},
			[]string{"pipeline.shutdownTimeout=0s must be positive"}},
		{"nothing to watch", []string{"--set-json", "watch.resources=[]"},
			[]string{"watch.resources or watch.clusterResources must name at least one resource"}},
		{"listed under both keys", []string{"--set", "watch.resources={widgets.example.com}", "--set", "watch.clusterResources={widgets.example.com}"},
			[]string{"a resource is listed twice"}},
		{"nats without servers", []string{"--set", "sink=nats"},
			[]string{"nats.urls is required with sink=nats"}},
		{"kafka checkpoint without brokers", []string{"--set", "checkpoint.type=kafka"},
			[]string{"kafka.brokers is required with sink=stdout and checkpoint.type=kafka"}},
		{"secret key without a secret", append([]string{"--set", "nats.user=bridge", "--set", "nats.passwordKey=password"}, nats...),
			[]string{`nats.passwordKey needs existingSecret, the Secret that holds key "password"`}},
		{"TLS key without a secret", append([]string{"--set", "nats.tls.caKey=ca.crt"}, nats...),
			[]string{"nats.tls: the TLS keys need nats.tls.existingSecret or existingSecret"}},
		{"client certificate without its key", append([]string{"--set", "existingSecret=s", "--set", "nats.tls.certKey=tls.crt"}, nats...),
			[]string{"nats.tls: certKey and keyKey go together"}},
		{"SASL without a password", []string{"--set", "sink=kafka", "--set", "kafka.brokers={k:9092}", "--set", "kafka.sasl.mechanism=plain", "--set", "kafka.sasl.username=u"},
			[]string{"kafka.sasl.mechanism=plain needs kafka.sasl.passwordKey"}},
		{"SASL user twice", []string{"--set", "sink=kafka", "--set", "kafka.brokers={k:9092}", "--set", "existingSecret=s", "--set", "kafka.sasl.mechanism=plain", "--set", "kafka.sasl.username=u", "--set", "kafka.sasl.usernameKey=user", "--set", "kafka.sasl.passwordKey=p"},
			[]string{"kafka.sasl: set username or usernameKey, not both"}},
		{"SASL password without a mechanism", []string{"--set", "sink=kafka", "--set", "kafka.brokers={k:9092}", "--set", "existingSecret=s", "--set", "kafka.sasl.passwordKey=p"},
			[]string{"kafka.sasl: a username or password is set but kafka.sasl.mechanism is not"}},
		{"old object with a projection", []string{"--set", "oldObject=true", "--set", "dropFields=status"},
			[]string{"oldObject=true cannot be combined with filter, fields or dropFields yet"}},
		{"old object with a filter", []string{"--set", "oldObject=true", "--set-string", "filter=name != 'x'"},
			[]string{"oldObject=true cannot be combined with filter, fields or dropFields yet"}},
		{"ServiceMonitor without its Service", []string{"--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.service.enabled=false"},
			[]string{"metrics.serviceMonitor.enabled needs metrics.service.enabled"}},
		{"no ServiceAccount", []string{"--set", "serviceAccount.create=false"},
			[]string{"serviceAccount.name is required when serviceAccount.create is false"}},
		{"extra group that is built in", []string{"--set", "watch.all=true", "--set", "watch.extraGroups={apps}"},
			[]string{"watch.extraGroups: apps is a built-in group, which watch.all grants already"}},
		{"extra group that is excluded", []string{"--set", "watch.all=true", "--set", "watch.extraGroups={stable.example.com}", "--set", "watch.exclude={events,*.example.com}"},
			[]string{"watch.extraGroups: stable.example.com is excluded by watch.exclude"}},
		{"extra groups without watch.all", []string{"--set", "watch.extraGroups={example.com}"},
			[]string{"watch.extraGroups is used only with watch.all=true"}},
		{"exclusion of everything, without the schema", []string{"--skip-schema-validation", "--set", "watch.all=true", "--set", "watch.exclude={*}"},
			[]string{`watch.exclude: "*" would exclude everything watch.all selects`}},
		{"exclusion that is no pattern, without the schema", []string{"--skip-schema-validation", "--set", "watch.all=true", "--set", "watch.exclude={apps.*}"},
			[]string{`watch.exclude: "apps.*" is neither a resource (<plural> or <plural>.<group>) nor a group wildcard (*.<group>)`}},
		{"exclusion by short name, without the schema", []string{"--skip-schema-validation", "--set", "watch.all=true", "--set", "watch.exclude={ev}"},
			[]string{`watch.exclude: "ev" is not a core resource`}},
		{"grace period inside the shutdown budget", []string{"--set", "pipeline.shutdownTimeout=1m", "--set", "terminationGracePeriodSeconds=60"},
			[]string{"terminationGracePeriodSeconds=60 must exceed pipeline.shutdownTimeout (60s)"}},
		{"every problem at once", []string{"--set", "replicaCount=3", "--set", "watch.resources={nodes}", "--set", "sink=kafka"},
			[]string{"checkpoint.type=file cannot be used with replicaCount=3", "nodes is cluster-scoped", "kafka.brokers is required"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := template(t, "x", "default", c.args...)
			if err == nil {
				t.Fatalf("%v rendered; want the chart to refuse it", c.args)
			}
			for _, want := range c.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%v: want the message to hold %q, got:\n%s", c.args, want, err)
				}
			}
		})
	}
}
