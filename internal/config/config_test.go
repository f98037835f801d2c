package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubebus/bridge/envvar"
	"github.com/kubebus/bridge/internal/pipeline"
)

// vars lists the variable named by each *envvar.Error in err, in order.
func vars(err error) []string {
	var out []string
	var walk func(error)
	walk = func(err error) {
		var ve *envvar.Error
		if errors.As(err, &ve) && ve == err {
			out = append(out, ve.Var)
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
		}
	}
	walk(err)
	return out
}

func TestLoadInvalid(t *testing.T) {
	tests := []struct {
		name     string
		env      []string // BRIDGE_RESOURCES=configmaps is added unless the case sets it
		wantVars []string // the variables the error names, in order
		wantText []string // substrings the error must contain
	}{
		{name: "resources missing", env: []string{"BRIDGE_RESOURCES="}, wantVars: []string{"BRIDGE_RESOURCES"}, wantText: []string{"required"}},
		{name: "resources only separators", env: []string{"BRIDGE_RESOURCES= , ,"}, wantVars: []string{"BRIDGE_RESOURCES"}},
		{name: "resource pattern with a star inside", env: []string{"BRIDGE_RESOURCES=configmaps,*foo"}, wantVars: []string{"BRIDGE_RESOURCES"}, wantText: []string{`"*foo"`}},
		{name: "resource pattern with a star at the end", env: []string{"BRIDGE_RESOURCES=apps.*"}, wantVars: []string{"BRIDGE_RESOURCES"}, wantText: []string{`"apps.*"`}},
		{name: "exclusion of everything", env: []string{"BRIDGE_RESOURCES=*", "BRIDGE_EXCLUDE_RESOURCES=events,*"}, wantVars: []string{"BRIDGE_EXCLUDE_RESOURCES"}, wantText: []string{`"*"`}},
		{name: "exclusion not a name", env: []string{"BRIDGE_EXCLUDE_RESOURCES=Leases"}, wantVars: []string{"BRIDGE_EXCLUDE_RESOURCES"}, wantText: []string{`"Leases"`}},
		{name: "list concurrency zero", env: []string{"BRIDGE_LIST_CONCURRENCY=0"}, wantVars: []string{"BRIDGE_LIST_CONCURRENCY"}, wantText: []string{"positive"}},
		{name: "list concurrency unparsable", env: []string{"BRIDGE_LIST_CONCURRENCY=few"}, wantVars: []string{"BRIDGE_LIST_CONCURRENCY"}},
		{name: "label selector", env: []string{"BRIDGE_LABEL_SELECTOR=app in (a"}, wantVars: []string{"BRIDGE_LABEL_SELECTOR"}},
		{name: "label selector bad value", env: []string{"BRIDGE_LABEL_SELECTOR=app=-bad-"}, wantVars: []string{"BRIDGE_LABEL_SELECTOR"}},
		{name: "field selector", env: []string{"BRIDGE_FIELD_SELECTOR=metadata.name"}, wantVars: []string{"BRIDGE_FIELD_SELECTOR"}},
		{name: "namespace with upper case", env: []string{"BRIDGE_NAMESPACES=default,Team_A"}, wantVars: []string{"BRIDGE_NAMESPACES"}, wantText: []string{`"Team_A"`}},
		{name: "two bad namespaces", env: []string{"BRIDGE_NAMESPACES=a.b, ok ,-x"}, wantVars: []string{"BRIDGE_NAMESPACES", "BRIDGE_NAMESPACES"}, wantText: []string{`"a.b"`, `"-x"`}},
		{name: "cluster name", env: []string{"BRIDGE_CLUSTER_NAME=Prod Cluster"}, wantVars: []string{"BRIDGE_CLUSTER_NAME"}},
		{name: "unknown sink", env: []string{"BRIDGE_SINK=nope"}, wantVars: []string{"BRIDGE_SINK"}, wantText: []string{`"nope"`}},
		{name: "unknown checkpoint", env: []string{"BRIDGE_CHECKPOINT=weird"}, wantVars: []string{"BRIDGE_CHECKPOINT"}, wantText: []string{`"weird"`}},
		{name: "file checkpoint without a path", env: []string{"BRIDGE_CHECKPOINT=file:"}, wantVars: []string{"BRIDGE_CHECKPOINT"}},
		{name: "checkpoint kind in upper case", env: []string{"BRIDGE_CHECKPOINT=NONE"}, wantVars: []string{"BRIDGE_CHECKPOINT"}},
		{name: "kafka sink without brokers", env: []string{"BRIDGE_SINK=kafka", "BRIDGE_KAFKA_LAYOUT=latest"}, wantVars: []string{"BRIDGE_KAFKA_BROKERS", "BRIDGE_KAFKA_LAYOUT"}, wantText: []string{"required", `"latest"`}},
		{name: "kafka checkpoint topic", env: []string{"BRIDGE_CHECKPOINT=kafka:a/b", "BRIDGE_KAFKA_BROKERS=kafka:9092"}, wantVars: []string{"BRIDGE_CHECKPOINT"}},
		{name: "nats-kv checkpoint's connection", env: []string{"BRIDGE_CHECKPOINT=nats-kv:cp", "BRIDGE_NATS_URL=http://nats:4222", "BRIDGE_NATS_TLS_CA_FILE=/nonexistent/ca.pem"},
			wantVars: []string{"BRIDGE_NATS_URL", "BRIDGE_NATS_TLS_CA_FILE"}},
		{name: "checkpoint interval zero", env: []string{"BRIDGE_CHECKPOINT_INTERVAL=0s"}, wantVars: []string{"BRIDGE_CHECKPOINT_INTERVAL"}, wantText: []string{"positive"}},
		{name: "checkpoint interval negative", env: []string{"BRIDGE_CHECKPOINT_INTERVAL=-1s"}, wantVars: []string{"BRIDGE_CHECKPOINT_INTERVAL"}},
		{name: "checkpoint interval unparsable", env: []string{"BRIDGE_CHECKPOINT_INTERVAL=soon"}, wantVars: []string{"BRIDGE_CHECKPOINT_INTERVAL"}, wantText: []string{"not a valid"}},
		{name: "checkpoint interval without unit", env: []string{"BRIDGE_CHECKPOINT_INTERVAL=5"}, wantVars: []string{"BRIDGE_CHECKPOINT_INTERVAL"}},
		{name: "retry interval zero", env: []string{"BRIDGE_RETRY_MAX_INTERVAL=0"}, wantVars: []string{"BRIDGE_RETRY_MAX_INTERVAL"}},
		{name: "retry interval unparsable", env: []string{"BRIDGE_RETRY_MAX_INTERVAL=30 seconds"}, wantVars: []string{"BRIDGE_RETRY_MAX_INTERVAL"}},
		{name: "shutdown timeout negative", env: []string{"BRIDGE_SHUTDOWN_TIMEOUT=-5s"}, wantVars: []string{"BRIDGE_SHUTDOWN_TIMEOUT"}},
		{name: "watch stall timeout too short", env: []string{"BRIDGE_WATCH_STALL_TIMEOUT=1s"}, wantVars: []string{"BRIDGE_WATCH_STALL_TIMEOUT"}},
		{name: "workers zero", env: []string{"BRIDGE_WORKERS=0"}, wantVars: []string{"BRIDGE_WORKERS"}, wantText: []string{"positive"}},
		{name: "workers unparsable", env: []string{"BRIDGE_WORKERS=four"}, wantVars: []string{"BRIDGE_WORKERS"}, wantText: []string{"not a valid int"}},
		{name: "workers out of range", env: []string{"BRIDGE_WORKERS=99999999999999999999"}, wantVars: []string{"BRIDGE_WORKERS"}},
		{name: "batch size negative", env: []string{"BRIDGE_BATCH_SIZE=-1"}, wantVars: []string{"BRIDGE_BATCH_SIZE"}},
		{name: "batch size fractional", env: []string{"BRIDGE_BATCH_SIZE=1.5"}, wantVars: []string{"BRIDGE_BATCH_SIZE"}},
		{name: "max pending zero", env: []string{"BRIDGE_MAX_PENDING_PER_OBJECT=0"}, wantVars: []string{"BRIDGE_MAX_PENDING_PER_OBJECT"}},
		{name: "max pending unparsable", env: []string{"BRIDGE_MAX_PENDING_PER_OBJECT=lots"}, wantVars: []string{"BRIDGE_MAX_PENDING_PER_OBJECT"}},
		{name: "max pending bytes negative", env: []string{"BRIDGE_MAX_PENDING_BYTES=-1"}, wantVars: []string{"BRIDGE_MAX_PENDING_BYTES"}},
		{name: "max pending bytes with a unit", env: []string{"BRIDGE_MAX_PENDING_BYTES=16Mi"}, wantVars: []string{"BRIDGE_MAX_PENDING_BYTES"}},
		{name: "bool unparsable", env: []string{"BRIDGE_OLD_OBJECT=maybe"}, wantVars: []string{"BRIDGE_OLD_OBJECT"}, wantText: []string{"not a valid bool"}},
		{name: "old object with a filter", env: []string{"BRIDGE_OLD_OBJECT=true", "BRIDGE_FILTER=name != 'x'"}, wantVars: []string{"BRIDGE_OLD_OBJECT"}, wantText: []string{"cannot be combined", "(set: BRIDGE_FILTER)"}},
		{name: "old object with a projection", env: []string{"BRIDGE_OLD_OBJECT=1", "BRIDGE_FIELDS=spec", "BRIDGE_DROP_FIELDS=status"}, wantVars: []string{"BRIDGE_OLD_OBJECT"}, wantText: []string{"(set: BRIDGE_FIELDS, BRIDGE_DROP_FIELDS)"}},
		{name: "log level", env: []string{"BRIDGE_LOG_LEVEL=loud"}, wantVars: []string{"BRIDGE_LOG_LEVEL"}, wantText: []string{`"loud"`}},
		{name: "log format", env: []string{"BRIDGE_LOG_FORMAT=xml"}, wantVars: []string{"BRIDGE_LOG_FORMAT"}, wantText: []string{`"xml"`}},
		{name: "kube qps zero", env: []string{"BRIDGE_KUBE_QPS=0"}, wantVars: []string{"BRIDGE_KUBE_QPS"}, wantText: []string{"positive"}},
		{name: "kube qps negative", env: []string{"BRIDGE_KUBE_QPS=-1"}, wantVars: []string{"BRIDGE_KUBE_QPS"}},
		{name: "kube qps not a number", env: []string{"BRIDGE_KUBE_QPS=NaN"}, wantVars: []string{"BRIDGE_KUBE_QPS"}},
		{name: "kube qps infinite", env: []string{"BRIDGE_KUBE_QPS=+Inf"}, wantVars: []string{"BRIDGE_KUBE_QPS"}},
		{name: "kube qps unparsable", env: []string{"BRIDGE_KUBE_QPS=fast"}, wantVars: []string{"BRIDGE_KUBE_QPS"}, wantText: []string{"not a valid float32"}},
		{name: "kube qps out of range", env: []string{"BRIDGE_KUBE_QPS=1e39"}, wantVars: []string{"BRIDGE_KUBE_QPS"}},
		{name: "kube burst zero", env: []string{"BRIDGE_KUBE_BURST=0"}, wantVars: []string{"BRIDGE_KUBE_BURST"}, wantText: []string{"at least 1"}},
		{name: "kube burst fractional", env: []string{"BRIDGE_KUBE_BURST=1.5"}, wantVars: []string{"BRIDGE_KUBE_BURST"}},
		{name: "kube qps and burst", env: []string{"BRIDGE_KUBE_QPS=-0.5", "BRIDGE_KUBE_BURST=-3"}, wantVars: []string{"BRIDGE_KUBE_QPS", "BRIDGE_KUBE_BURST"}},
		{
			name: "several at once",
			env: []string{
				"BRIDGE_RESOURCES=",
				"BRIDGE_LABEL_SELECTOR=a in (",
				"BRIDGE_SINK=nope",
				"BRIDGE_CHECKPOINT=file:",
				"BRIDGE_CHECKPOINT_INTERVAL=never",
				"BRIDGE_WORKERS=-2",
				"BRIDGE_BATCH_SIZE=big",
				"BRIDGE_SHUTDOWN_TIMEOUT=0s",
				"BRIDGE_LOG_LEVEL=loud",
				"BRIDGE_LOG_FORMAT=xml",
			},
			// Values that did not parse come first, in field order, then
			// the checks, in field order.
			wantVars: []string{
				"BRIDGE_CHECKPOINT_INTERVAL",
				"BRIDGE_BATCH_SIZE",
				"BRIDGE_RESOURCES",
				"BRIDGE_LABEL_SELECTOR",
				"BRIDGE_SINK",
				"BRIDGE_CHECKPOINT",
				"BRIDGE_WORKERS",
				"BRIDGE_SHUTDOWN_TIMEOUT",
				"BRIDGE_LOG_LEVEL",
				"BRIDGE_LOG_FORMAT",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := tt.env
			if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "BRIDGE_RESOURCES=") }) {
				env = append([]string{"BRIDGE_RESOURCES=configmaps"}, env...)
			}
			c, err := Load(env)
			if err == nil {
				t.Fatalf("Load accepted %v: %+v", env, c)
			}
			if c != nil {
				t.Errorf("Load returned a config with its error")
			}
			if got := vars(err); !slices.Equal(got, tt.wantVars) {
				t.Errorf("error names %v, want %v\nerror: %v", got, tt.wantVars, err)
			}
			// Each problem is one line that starts with its variable.
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.wantVars) {
				t.Errorf("error has %d lines, want %d:\n%v", len(lines), len(tt.wantVars), err)
			}
			for i, line := range lines {
				if i < len(tt.wantVars) && !strings.HasPrefix(line, tt.wantVars[i]+": ") {
					t.Errorf("line %d = %q, want it to start with %s", i+1, line, tt.wantVars[i])
				}
			}
			for _, s := range tt.wantText {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error does not mention %s:\n%v", s, err)
				}
			}
		})
	}
}

// A value that does not parse is reported once, by the parser, and not
// again by the check that would have looked at its zero value.
func TestLoadReportsAParseErrorOnce(t *testing.T) {
	_, err := Load([]string{"BRIDGE_RESOURCES=configmaps", "BRIDGE_WORKERS=x", "BRIDGE_RETRY_MAX_INTERVAL=x"})
	if got, want := vars(err), []string{"BRIDGE_WORKERS", "BRIDGE_RETRY_MAX_INTERVAL"}; !slices.Equal(got, want) {
		t.Errorf("error names %v, want %v:\n%v", got, want, err)
	}
	if strings.Contains(err.Error(), "positive") {
		t.Errorf("a value that did not parse was also checked:\n%v", err)
	}
}

// A value of BRIDGE_KAFKA_BATCH_SIZE that is not a number is reported
// against BRIDGE_KAFKA_BATCH_SIZE alone, not against BRIDGE_BATCH_SIZE,
// whose field has the same name.
func TestParseErrorNamesTheKafkaVariable(t *testing.T) {
	_, err := Load([]string{"BRIDGE_RESOURCES=configmaps", "BRIDGE_SINK=kafka", "BRIDGE_CHECKPOINT=none",
		"BRIDGE_KAFKA_BROKERS=kafka:9092", "BRIDGE_KAFKA_BATCH_SIZE=lots"})
	if got := vars(err); !slices.Equal(got, []string{"BRIDGE_KAFKA_BATCH_SIZE"}) {
		t.Errorf("variables at fault %v, want [BRIDGE_KAFKA_BATCH_SIZE]: %v", got, err)
	}
}

// Every variable that can fail to parse, given a value that does not,
// is the one variable the error names, whichever configuration holds it.
func TestParseErrorNamesItsVariable(t *testing.T) {
	base := []string{"BRIDGE_RESOURCES=configmaps", "BRIDGE_SINK=kafka", "BRIDGE_CHECKPOINT=none", "BRIDGE_KAFKA_BROKERS=kafka:9092"}
	for name, f := range variables() {
		switch f.Type.Kind() {
		case reflect.Bool, reflect.Int, reflect.Int64, reflect.Float32:
		default:
			continue
		}
		t.Run(name, func(t *testing.T) {
			_, err := Load(append(slices.Clip(base), name+"=lots"))
			if got := vars(err); !slices.Equal(got, []string{name}) {
				t.Errorf("variables at fault %v, want [%s]: %v", got, name, err)
			}
		})
	}
}

// Within each struct Load parses with one call, no two fields share a
// name, so that a parse error, which names only the field, finds its
// variable.
func TestParsedFieldNamesAreUnique(t *testing.T) {
	var c Config
	for _, part := range c.parts() {
		seen := map[string]string{}
		for name, f := range parsedBy(reflect.TypeOf(part).Elem()) {
			if other, ok := seen[f.Name]; ok {
				t.Errorf("%T: field %s is both %s and %s", part, f.Name, other, name)
			}
			seen[f.Name] = name
		}
	}
}

// wantDefaults is what Load makes of BRIDGE_RESOURCES=configmaps alone: every
// other setting at its default.
var wantDefaults = Config{
	Resources:           []string{"configmaps"},
	ExcludeResources:    []string{"events", "events.events.k8s.io", "leases.coordination.k8s.io"},
	ListConcurrency:     4,
	ClusterName:         "default",
	Sink:                "stdout",
	Checkpoint:          "file:bridge-checkpoint.db",
	CheckpointInterval:  time.Second,
	ReconcileInterval:   time.Hour,
	Workers:             4,
	BatchSize:           500,
	MaxPendingPerObject: 16,
	MaxPendingBytes:     8 << 20,
	RetryMaxInterval:    30 * time.Second,
	ShutdownTimeout:     25 * time.Second,
	WatchStallTimeout:   2 * time.Minute,
	LogLevel:            "info",
	LogFormat:           "json",
	MetricsAddr:         ":9090",
	LeaderElectionName:  "kubebus-bridge",
	LeaseDuration:       15 * time.Second,
	RenewDeadline:       10 * time.Second,
	RetryPeriod:         2 * time.Second,
	KubeQPS:             50,
	KubeBurst:           100,
}

func TestLoadValid(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		want Config
	}{
		{
			name: "wantDefaults",
			env:  []string{"BRIDGE_RESOURCES=configmaps"},
			want: wantDefaults,
		},
		{
			name: "empty values take the wantDefaults",
			env:  []string{"BRIDGE_RESOURCES=configmaps", "BRIDGE_WORKERS=", "BRIDGE_SINK=", "BRIDGE_CLUSTER_NAME=", "BRIDGE_CHECKPOINT_INTERVAL="},
			want: wantDefaults,
		},
		{
			name: "everything set",
			env: []string{
				"BRIDGE_RESOURCES=a, b,",
				"BRIDGE_NAMESPACES= team-a ,,team-b,team-a",
				"BRIDGE_LABEL_SELECTOR=app in (web,api),tier!=db",
				"BRIDGE_FIELD_SELECTOR=metadata.name!=skip",
				"BRIDGE_CLUSTER_NAME=eu-1.example.com",
				"BRIDGE_SINK=stdout",
				"BRIDGE_CHECKPOINT=none",
				"BRIDGE_CHECKPOINT_INTERVAL=250ms",
				"BRIDGE_RECONCILE_INTERVAL=0",
				"BRIDGE_KEEP_MANAGED_FIELDS=true",
				"BRIDGE_OLD_OBJECT=1",
				"BRIDGE_WORKERS=8",
				"BRIDGE_BATCH_SIZE=1",
				"BRIDGE_MAX_PENDING_PER_OBJECT=2",
				"BRIDGE_MAX_PENDING_BYTES=1048576",
				"BRIDGE_RETRY_MAX_INTERVAL=1m30s",
				"BRIDGE_SHUTDOWN_TIMEOUT=10s",
				"BRIDGE_WATCH_STALL_TIMEOUT=30s",
				"BRIDGE_LOG_LEVEL=debug",
				"BRIDGE_LOG_FORMAT=text",
				"BRIDGE_EXCLUDE_RESOURCES=none",
				"BRIDGE_LIST_CONCURRENCY=2",
				"BRIDGE_KUBE_QPS=7.5",
				"BRIDGE_KUBE_BURST=1",
				"KUBECONFIG=/etc/kube/config",
				"UNRELATED=ignored",
				"NOT_A_PAIR",
			},
			want: Config{
				Resources:           []string{"a", "b"},
				ExcludeResources:    []string{"none"},
				ListConcurrency:     2,
				Namespaces:          []string{"team-a", "team-b"},
				LabelSelector:       "app in (web,api),tier!=db",
				FieldSelector:       "metadata.name!=skip",
				ClusterName:         "eu-1.example.com",
				Sink:                "stdout",
				Checkpoint:          "none",
				CheckpointInterval:  250 * time.Millisecond,
				KeepManagedFields:   true,
				OldObject:           true,
				Workers:             8,
				BatchSize:           1,
				MaxPendingPerObject: 2,
				MaxPendingBytes:     1 << 20,
				RetryMaxInterval:    90 * time.Second,
				ShutdownTimeout:     10 * time.Second,
				WatchStallTimeout:   30 * time.Second,
				LogLevel:            "debug",
				LogFormat:           "text",
				MetricsAddr:         ":9090",
				LeaderElectionName:  "kubebus-bridge",
				LeaseDuration:       15 * time.Second,
				RenewDeadline:       10 * time.Second,
				RetryPeriod:         2 * time.Second,
				KubeQPS:             7.5,
				KubeBurst:           1,
				Kubeconfig:          "/etc/kube/config",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(tt.env)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			// Compare the bridge's own settings; the nested configurations
			// of individual sinks have tests of their own.
			got, want := reflect.ValueOf(*c), reflect.ValueOf(tt.want)
			for i := range got.NumField() {
				f := got.Type().Field(i)
				if f.Type.Kind() == reflect.Struct || !f.IsExported() {
					continue
				}
				if !reflect.DeepEqual(got.Field(i).Interface(), want.Field(i).Interface()) {
					t.Errorf("%s = %#v, want %#v", f.Name, got.Field(i).Interface(), want.Field(i).Interface())
				}
			}
			if err := c.Validate(); err != nil {
				t.Errorf("Validate of a loaded config: %v", err)
			}
		})
	}
}

// The view's variables are kept as written, for the view to compile and
// to report positions in; only a blank value is taken for unset.
func TestLoadView(t *testing.T) {
	tests := []struct {
		name    string
		env     []string
		want    ViewConfig
		defined bool
	}{
		{name: "unset", want: ViewConfig{}},
		{name: "blank", env: []string{"BRIDGE_FILTER= \t", "BRIDGE_FIELDS= ", "BRIDGE_DROP_FIELDS=\n"}, want: ViewConfig{}},
		{
			name: "kept verbatim",
			env: []string{
				`BRIDGE_FILTER=  object.status.phase != "Running" && labels["a=b"] == 'x, y'`,
				"BRIDGE_FIELDS=spec, metadata.labels ",
				`BRIDGE_DROP_FIELDS=status,metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]`,
			},
			want: ViewConfig{
				Filter:     `  object.status.phase != "Running" && labels["a=b"] == 'x, y'`,
				Fields:     "spec, metadata.labels ",
				DropFields: `status,metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]`,
			},
			defined: true,
		},
		{name: "filter only", env: []string{"BRIDGE_FILTER=true"}, want: ViewConfig{Filter: "true"}, defined: true},
		{name: "drop fields only", env: []string{"BRIDGE_DROP_FIELDS=status"}, want: ViewConfig{DropFields: "status"}, defined: true},
		{name: "old object without a view", env: []string{"BRIDGE_OLD_OBJECT=true", "BRIDGE_FILTER= "}, want: ViewConfig{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(append([]string{"BRIDGE_RESOURCES=configmaps"}, tt.env...))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if c.View != tt.want {
				t.Errorf("View = %#v, want %#v", c.View, tt.want)
			}
			if got := c.View.Defined(); got != tt.defined {
				t.Errorf("Defined() = %v, want %v", got, tt.defined)
			}
		})
	}
}

// Load reads only the environment it is given, so tests and embedders are
// not at the mercy of the process environment.
func TestLoadIgnoresProcessEnvironment(t *testing.T) {
	t.Setenv("BRIDGE_RESOURCES", "configmaps")
	t.Setenv("BRIDGE_WORKERS", "7")
	_, err := Load(nil)
	if got := vars(err); !slices.Equal(got, []string{"BRIDGE_RESOURCES"}) {
		t.Fatalf("Load(nil) = %v, want only BRIDGE_RESOURCES missing", err)
	}
	c, err := Load([]string{"BRIDGE_RESOURCES=secrets"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Workers != 4 || !slices.Equal(c.Resources, []string{"secrets"}) {
		t.Errorf("Load read the process environment: %+v", c)
	}
}

func TestValidate(t *testing.T) {
	valid := func() Config {
		c, err := Load([]string{"BRIDGE_RESOURCES=configmaps"})
		if err != nil {
			t.Fatal(err)
		}
		return *c
	}
	tests := []struct {
		name     string
		change   func(c *Config)
		wantVars []string
	}{
		{"valid", func(*Config) {}, nil},
		{"zero config", func(c *Config) { *c = Config{} }, []string{
			"BRIDGE_RESOURCES", "BRIDGE_LIST_CONCURRENCY", "BRIDGE_CLUSTER_NAME", "BRIDGE_SINK", "BRIDGE_CHECKPOINT", "BRIDGE_CHECKPOINT_INTERVAL",
			"BRIDGE_WORKERS", "BRIDGE_BATCH_SIZE", "BRIDGE_MAX_PENDING_PER_OBJECT", "BRIDGE_MAX_PENDING_BYTES", "BRIDGE_RETRY_MAX_INTERVAL",
			"BRIDGE_WATCH_STALL_TIMEOUT", "BRIDGE_SHUTDOWN_TIMEOUT", "BRIDGE_LOG_LEVEL", "BRIDGE_LOG_FORMAT",
			"BRIDGE_KUBE_QPS", "BRIDGE_KUBE_BURST",
		}},
		{"file checkpoint with a path", func(c *Config) { c.Checkpoint = "file:/var/lib/bridge/cp.db" }, nil},
		{"negative durations", func(c *Config) { c.RetryMaxInterval, c.ShutdownTimeout = -time.Second, -1 }, []string{"BRIDGE_RETRY_MAX_INTERVAL", "BRIDGE_SHUTDOWN_TIMEOUT"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.change(&c)
			err := c.Validate()
			if got := vars(err); !slices.Equal(got, tt.wantVars) {
				t.Errorf("Validate names %v, want %v:\n%v", got, tt.wantVars, err)
			}
			if (err == nil) != (tt.wantVars == nil) {
				t.Errorf("Validate = %v", err)
			}
		})
	}
}

// Validate reports on the config and leaves it as it was: the values Load
// parsed stay those it parsed, however often it is called and whatever
// was changed since.
func TestValidateDoesNotChangeTheConfig(t *testing.T) {
	c, err := Load([]string{"BRIDGE_RESOURCES=configmaps", "BRIDGE_SINK=nats", "BRIDGE_NATS_URL=nats://h:4222", "BRIDGE_FILTER=name == 'a'"})
	if err != nil {
		t.Fatal(err)
	}
	settings, sel, view := c.NATSSettings(), c.Selection(), c.ViewDefinition()
	c.Sink, c.Resources, c.View.Filter = SinkStdout, []string{"nonsense..."}, "!"
	first := c.Validate()
	if first == nil {
		t.Fatal("Validate of a changed config = nil, want its problems")
	}
	if second := c.Validate(); second == nil || second.Error() != first.Error() {
		t.Errorf("Validate again = %v, want %v", second, first)
	}
	if c.NATSSettings() != settings {
		t.Error("Validate replaced the NATS settings Load parsed")
	}
	if !reflect.DeepEqual(c.Selection(), sel) {
		t.Error("Validate replaced the selection Load parsed")
	}
	if c.ViewDefinition().Filter != view.Filter {
		t.Error("Validate replaced the view Load compiled")
	}
}

// The pipeline's settings default to what internal/pipeline declares,
// whether their variables are unset or empty.
func TestPipelineDefaults(t *testing.T) {
	for _, environ := range [][]string{
		{"BRIDGE_RESOURCES=configmaps"},
		{"BRIDGE_RESOURCES=configmaps", "BRIDGE_WORKERS=", "BRIDGE_BATCH_SIZE=", "BRIDGE_MAX_PENDING_PER_OBJECT=", "BRIDGE_MAX_PENDING_BYTES=", "BRIDGE_RETRY_MAX_INTERVAL="},
	} {
		c, err := Load(environ)
		if err != nil {
			t.Fatal(err)
		}
		type settings struct {
			workers, batch, pending int
			pendingBytes            int64
			retry                   time.Duration
		}
		got := settings{c.Workers, c.BatchSize, c.MaxPendingPerObject, c.MaxPendingBytes, c.RetryMaxInterval}
		want := settings{pipeline.DefaultWorkers, pipeline.DefaultBatchSize, pipeline.DefaultMaxPendingPerObject, pipeline.DefaultMaxPendingBytes, pipeline.DefaultMaxRetryInterval}
		if got != want {
			t.Errorf("Load(%q) = %+v, want %+v", environ, got, want)
		}
	}
}

func TestCheckpointKind(t *testing.T) {
	tests := []struct {
		value string
		kind  CheckpointKind
		arg   string
	}{
		{"none", CheckpointNone, ""},
		{"file:cp.db", CheckpointFile, "cp.db"},
		{"file:/abs/path:with:colons", CheckpointFile, "/abs/path:with:colons"},
		{"file:", CheckpointFile, ""},
		{"weird", "", ""},
		{"file", "", ""},
		{"", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			c := Config{Checkpoint: tt.value}
			kind, arg := c.CheckpointKind()
			if kind != tt.kind || arg != tt.arg {
				t.Errorf("CheckpointKind() = %q, %q; want %q, %q", kind, arg, tt.kind, tt.arg)
			}
		})
	}
}

func TestLevel(t *testing.T) {
	tests := []struct {
		value   string
		want    slog.Level
		wantErr bool
	}{
		{"debug", slog.LevelDebug, false},
		{"info", slog.LevelInfo, false},
		{"warn", slog.LevelWarn, false},
		{"error", slog.LevelError, false},
		{"ERROR", slog.LevelError, false},
		{"loud", 0, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			c := Config{LogLevel: tt.value}
			got, err := c.Level()
			if (err != nil) != tt.wantErr {
				t.Fatalf("Level() error = %v, want error %v", err, tt.wantErr)
			}
			if !tt.wantErr && got != tt.want {
				t.Errorf("Level() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestHelpListsEveryVariable(t *testing.T) {
	var out bytes.Buffer
	if err := Help(&out); err != nil {
		t.Fatalf("Help: %v", err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if fields := strings.Fields(lines[0]); !slices.Equal(fields, []string{"VARIABLE", "DEFAULT", "MEANING"}) {
		t.Errorf("header = %q", lines[0])
	}
	rows := map[string][]string{}
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) < 3 {
			t.Errorf("row %q has no meaning", line)
			continue
		}
		rows[f[0]] = f
	}

	n := 0
	for name, f := range envFields(reflect.TypeFor[Config]()) {
		n++
		t.Run(name, func(t *testing.T) {
			row, ok := rows[name]
			if !ok {
				t.Fatalf("Help does not list %s", name)
			}
			def, ok := defaultOf(name, f)
			if !ok {
				def = "-"
			}
			if row[1] != def {
				t.Errorf("default = %q, want %q", row[1], def)
			}
			help := f.Tag.Get("help")
			if help == "" {
				t.Fatalf("field %s has no help tag", f.Name)
			}
			if got := strings.Join(row[2:], " "); got != strings.Join(strings.Fields(help), " ") {
				t.Errorf("meaning = %q, want %q", got, help)
			}
		})
	}
	if len(rows) != n {
		t.Errorf("Help lists %d variables, the struct has %d", len(rows), n)
	}
	// The variables the bridge documents; a new field must be added here,
	// and a removed one noticed.
	for _, name := range []string{
		"BRIDGE_RESOURCES", "BRIDGE_NAMESPACES", "BRIDGE_LABEL_SELECTOR", "BRIDGE_FIELD_SELECTOR",
		"BRIDGE_FILTER", "BRIDGE_FIELDS", "BRIDGE_DROP_FIELDS",
		"BRIDGE_CLUSTER_NAME", "BRIDGE_SINK", "BRIDGE_CHECKPOINT", "BRIDGE_CHECKPOINT_INTERVAL",
		"BRIDGE_KEEP_MANAGED_FIELDS", "BRIDGE_OLD_OBJECT", "BRIDGE_WORKERS", "BRIDGE_BATCH_SIZE",
		"BRIDGE_MAX_PENDING_PER_OBJECT", "BRIDGE_MAX_PENDING_BYTES", "BRIDGE_RETRY_MAX_INTERVAL", "BRIDGE_SHUTDOWN_TIMEOUT",
		"BRIDGE_LOG_LEVEL", "BRIDGE_LOG_FORMAT", "KUBECONFIG",
	} {
		if _, ok := rows[name]; !ok {
			t.Errorf("Help does not list %s", name)
		}
	}
}

// envFields yields every field with an env tag in t and, depth first, in
// the struct fields without one or tagged env:"-" (such as a sink's own
// configuration, which Load parses on its own), with its variable's name:
// the env tag after the envPrefix tags of the structs it is in.
func envFields(t reflect.Type) iter.Seq2[string, reflect.StructField] {
	return func(yield func(string, reflect.StructField) bool) {
		var walk func(t reflect.Type, prefix string) bool
		walk = func(t reflect.Type, prefix string) bool {
			for f := range t.Fields() {
				switch {
				case f.Tag.Get("env") != "" && f.Tag.Get("env") != "-":
					name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
					if !yield(prefix+name, f) {
						return false
					}
				case f.Type.Kind() == reflect.Struct:
					if !walk(f.Type, prefix+f.Tag.Get("envPrefix")) {
						return false
					}
				}
			}
			return true
		}
		walk(t, "")
	}
}

type failingWriter struct{}

var errWrite = errors.New("closed pipe")

func (failingWriter) Write([]byte) (int, error) { return 0, errWrite }

func TestHelpWriteError(t *testing.T) {
	if err := Help(failingWriter{}); !errors.Is(err, errWrite) {
		t.Errorf("Help = %v, want the writer's error", err)
	}
}

// Load parses the settings of the sinks and checkpoints in use, once, and
// leaves those of the others unchecked.
func TestLoadParsesSinkSettings(t *testing.T) {
	for _, tc := range []struct {
		name        string
		env         []string
		nats, kafka bool // whether Load parsed them
	}{
		{"stdout ignores the buses' settings", []string{"BRIDGE_NATS_URL=http://x", "BRIDGE_KAFKA_LAYOUT=latest"}, false, false},
		{"nats sink", []string{"BRIDGE_SINK=nats"}, true, false},
		{"kafka sink", []string{"BRIDGE_SINK=kafka", "BRIDGE_KAFKA_BROKERS=kafka:9092"}, false, true},
		{"nats sink, kafka checkpoint", []string{"BRIDGE_SINK=nats", "BRIDGE_CHECKPOINT=kafka:cp", "BRIDGE_KAFKA_BROKERS=kafka:9092"}, true, true},
		{"nats-kv checkpoint", []string{"BRIDGE_CHECKPOINT=nats-kv:cp"}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(append([]string{"BRIDGE_RESOURCES=configmaps"}, tc.env...))
			if err != nil {
				t.Fatal(err)
			}
			if (c.NATSSettings() != nil) != tc.nats || (c.KafkaSettings() != nil) != tc.kafka {
				t.Errorf("NATS parsed %v, Kafka parsed %v; want %v, %v", c.NATSSettings() != nil, c.KafkaSettings() != nil, tc.nats, tc.kafka)
			}
			if tc.kafka {
				want := c.KafkaSettings()
				if got := c.KafkaCheckpoint(); !got.CreateTopic || got.ReplicationFactor != want.ReplicationFactor ||
					got.MaxMessageBytes != want.MaxMessageBytes || got.BatchTimeout != want.BatchTimeout {
					t.Errorf("checkpoint store's settings %+v differ from the sink's", got)
				}
			}
		})
	}
}

// Printing, logging or marshalling the whole configuration shows no
// password or token, whichever bus they are for.
func TestFormattedConfigHidesSecrets(t *testing.T) {
	const natsPW, natsToken, kafkaPW = "nats-pa55word", "nats-t0ken", "kafka-pa55word"
	c, err := Load([]string{
		"BRIDGE_RESOURCES=configmaps", "BRIDGE_SINK=kafka", "BRIDGE_CHECKPOINT=nats-kv:cp",
		"BRIDGE_NATS_URL=nats://bridge:" + natsPW + "@nats:4222", "BRIDGE_NATS_USER=bridge", "BRIDGE_NATS_PASSWORD=" + natsPW,
		"BRIDGE_KAFKA_BROKERS=kafka:9092", "BRIDGE_KAFKA_SASL_MECHANISM=plain", "BRIDGE_KAFKA_SASL_USERNAME=bridge", "BRIDGE_KAFKA_SASL_PASSWORD=" + kafkaPW,
	})
	if err != nil {
		t.Fatal(err)
	}
	withToken := *c
	withToken.NATS.User, withToken.NATS.Password, withToken.NATS.Token = "", "", natsToken
	var logged bytes.Buffer
	for _, h := range []slog.Handler{slog.NewJSONHandler(&logged, nil), slog.NewTextHandler(&logged, nil)} {
		slog.New(h).Info("config", "config", c, "withToken", withToken, "nats", c.NATSSettings(), "kafka", c.KafkaSettings())
	}
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{
		"%v": fmt.Sprintf("%v", c), "%+v": fmt.Sprintf("%+v", c), "%#v": fmt.Sprintf("%#v", c), "%+v with a token": fmt.Sprintf("%+v", withToken),
		"settings": fmt.Sprintf("%+v %+v", c.NATSSettings(), c.KafkaSettings()), "slog": logged.String(), "json": string(js),
	} {
		for _, secret := range []string{natsPW, natsToken, kafkaPW} {
			if strings.Contains(out, secret) {
				t.Errorf("%s shows %s:\n%s", name, secret, out)
			}
		}
	}
}

// A token given as the user of a BRIDGE_NATS_URL entry never shows in an
// error, even when the entry is refused.
func TestNATSURLTokenNeverInErrors(t *testing.T) {
	const token = "s3cr3t-t0ken"
	for _, url := range []string{"https://" + token + "@nats:4222", "nats://" + token + "@:4222"} {
		_, err := Load([]string{"BRIDGE_RESOURCES=configmaps", "BRIDGE_SINK=nats", "BRIDGE_CHECKPOINT=none", "BRIDGE_NATS_URL=" + url})
		if err == nil || strings.Contains(err.Error(), token) {
			t.Errorf("BRIDGE_NATS_URL=%s: error shows the token: %v", url, err)
		}
	}
}
