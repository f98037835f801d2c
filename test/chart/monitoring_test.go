package chart

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubebus/bridge/consumer"
	"github.com/kubebus/bridge/internal/metrics"
	"github.com/kubebus/bridge/source"
)

// The groups of the PrometheusRule: the bridge's alerts, and the alerts on
// the consumer package's metrics, which programs built with it export.
const (
	bridgeGroup   = "kubebus-bridge"
	consumerGroup = "kubebus-consumer"
)

// TestMonitoring: the Grafana dashboard and the PrometheusRule are
// rendered only when asked for. The dashboard's ConfigMap carries the
// sidecar's label and valid JSON; every alert has a severity, a summary
// and a description. Every expression, of the alerts, the dashboard's
// panels and its variables, is parsed by Prometheus' own PromQL parser,
// and every metric it names is one the bridge exports (the consumer
// group's: one the consumer package exports), so that a misspelt or
// renamed metric fails here rather than leave a panel empty or an alert
// that can never fire.
func TestMonitoring(t *testing.T) {
	t.Parallel()
	on := []string{"--set", "grafanaDashboard.enabled=true", "--set", "prometheusRule.enabled=true"}

	t.Run("off by default", func(t *testing.T) {
		t.Parallel()
		objs := renderArgs(t, "cdc", "cdc-system")
		for _, kind := range []string{"ConfigMap", "PrometheusRule"} {
			if got := only(objs, kind); len(got) > 0 {
				t.Errorf("the defaults render a %s (%s); want none", kind, got[0].GetName())
			}
		}
		objs = renderArgs(t, "cdc", "cdc-system", on...)
		for _, group := range ruleGroups(t, objs) {
			if group.Name == consumerGroup {
				t.Errorf("the consumer's alerts are rendered without prometheusRule.consumer.enabled")
			}
		}
	})

	t.Run("on", func(t *testing.T) {
		t.Parallel()
		objs := renderArgs(t, "cdc", "cdc-system", append(on, "--set", "prometheusRule.consumer.enabled=true")...)
		cm := dashboardConfigMap(t, objs)
		if cm.GetNamespace() != "cdc-system" {
			t.Errorf("dashboard ConfigMap in namespace %q, want the release's, cdc-system", cm.GetNamespace())
		}
		if v, ok := cm.GetLabels()["grafana_dashboard"]; !ok || v != "1" {
			t.Errorf("dashboard ConfigMap labels %v: want grafana_dashboard: \"1\", the label kube-prometheus-stack's Grafana sidecar looks for", cm.GetLabels())
		}
		rules := prometheusRule(t, objs)
		if rules.GetNamespace() != "cdc-system" {
			t.Errorf("PrometheusRule in namespace %q, want the release's, cdc-system", rules.GetNamespace())
		}

		bridge := bridgeMetrics(t)
		cons := consumerMetrics(t)
		checkDashboard(t, cm, bridge)

		groups := ruleGroups(t, objs)
		names := map[string][]string{}
		for _, g := range groups {
			for _, r := range g.Rules {
				names[g.Name] = append(names[g.Name], r.Alert)
			}
		}
		if !slices.Equal(slices.Sorted(maps.Keys(names)), []string{bridgeGroup, consumerGroup}) {
			t.Fatalf("PrometheusRule groups %v, want %s and %s", slices.Sorted(maps.Keys(names)), bridgeGroup, consumerGroup)
		}
		// Every alert is one that prometheusRule.disabled can name, and
		// the other way round.
		all := slices.Sorted(slices.Values(slices.Concat(names[bridgeGroup], names[consumerGroup])))
		if want := disableableAlerts(t); !slices.Equal(all, want) {
			t.Errorf("alerts %v; values.schema.json lets prometheusRule.disabled name %v", all, want)
		}

		// Only the release's bridge: every selector of the bridge's
		// alerts matches the job and namespace the ServiceMonitor scrapes.
		selector := []*labels.Matcher{
			labels.MustNewMatcher(labels.MatchEqual, "job", "cdc-bridge-metrics"),
			labels.MustNewMatcher(labels.MatchEqual, "namespace", "cdc-system"),
		}
		for _, g := range groups {
			known, sel := bridge, selector
			if g.Name == consumerGroup {
				known, sel = cons, nil
			}
			for _, r := range g.Rules {
				checkAlert(t, r)
				expr, err := parseExpr(r.Expr)
				if err != nil {
					t.Errorf("alert %s: %v\n%s", r.Alert, err, r.Expr)
					continue
				}
				checkNames(t, "alert "+r.Alert, expr, known)
				checkMatchers(t, "alert "+r.Alert, expr, sel)
			}
		}
	})

	t.Run("settings", func(t *testing.T) {
		t.Parallel()
		objs := renderArgs(t, "cdc", "cdc-system", append(on,
			"--set", "grafanaDashboard.namespace=monitoring",
			"--set", "grafanaDashboard.label=dashboards",
			"--set", "grafanaDashboard.labelValue=kubebus",
			"--set", "grafanaDashboard.annotations.grafana_folder=Kubebus",
			"--set", "prometheusRule.namespace=monitoring",
			"--set", "prometheusRule.labels.release=prometheus",
			"--set-string", `prometheusRule.selector=job="kubebus-bridge"`,
			"--set", "prometheusRule.alertLabels.team=platform",
			"--set", "prometheusRule.disabled={BridgeDriftRepaired}",
			"--set", "prometheusRule.sinkDown.for=1m",
			"--set", "prometheusRule.sinkDown.severity=page",
		)...)
		cm := dashboardConfigMap(t, objs)
		if cm.GetNamespace() != "monitoring" || cm.GetLabels()["dashboards"] != "kubebus" || cm.GetAnnotations()["grafana_folder"] != "Kubebus" {
			t.Errorf("dashboard ConfigMap in %q with labels %v and annotations %v: want namespace monitoring, label dashboards: kubebus, annotation grafana_folder: Kubebus",
				cm.GetNamespace(), cm.GetLabels(), cm.GetAnnotations())
		}
		if _, ok := cm.GetLabels()["grafana_dashboard"]; ok {
			t.Errorf("dashboard ConfigMap still carries the default label grafana_dashboard: %v", cm.GetLabels())
		}
		rules := prometheusRule(t, objs)
		if rules.GetNamespace() != "monitoring" || rules.GetLabels()["release"] != "prometheus" {
			t.Errorf("PrometheusRule in %q with labels %v: want namespace monitoring, label release: prometheus", rules.GetNamespace(), rules.GetLabels())
		}
		sel := []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "job", "kubebus-bridge")}
		seen := false
		for _, g := range ruleGroups(t, objs) {
			for _, r := range g.Rules {
				if r.Alert == "BridgeDriftRepaired" {
					t.Errorf("BridgeDriftRepaired rendered, though prometheusRule.disabled names it")
				}
				if r.Labels["team"] != "platform" {
					t.Errorf("alert %s: labels %v lack prometheusRule.alertLabels' team: platform", r.Alert, r.Labels)
				}
				if r.Alert == "BridgeSinkDown" {
					seen = true
					if r.For != "1m" || r.Labels["severity"] != "page" {
						t.Errorf("BridgeSinkDown: for %q, severity %q; want 1m and page, as set", r.For, r.Labels["severity"])
					}
				}
				expr, err := parseExpr(r.Expr)
				if err != nil {
					t.Errorf("alert %s: %v\n%s", r.Alert, err, r.Expr)
					continue
				}
				checkMatchers(t, "alert "+r.Alert, expr, sel)
			}
		}
		if !seen {
			t.Errorf("BridgeSinkDown not rendered")
		}
	})
}

// renderArgs renders the chart's defaults, with args, as release in
// namespace.
func renderArgs(t *testing.T, release, namespace string, args ...string) []*unstructured.Unstructured {
	t.Helper()
	manifest, err := template(t, release, namespace, args...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeManifest(manifest)
	if err != nil {
		t.Fatalf("%v\n%s", err, manifest)
	}
	return objs
}

// dashboardConfigMap returns the one ConfigMap among objs: the dashboard's.
func dashboardConfigMap(t *testing.T, objs []*unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	cms := only(objs, "ConfigMap")
	if len(cms) != 1 {
		t.Fatalf("%d ConfigMaps rendered, want 1, the dashboard's", len(cms))
	}
	return cms[0]
}

// prometheusRule returns the one PrometheusRule among objs.
func prometheusRule(t *testing.T, objs []*unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	rs := only(objs, "PrometheusRule")
	if len(rs) != 1 {
		t.Fatalf("%d PrometheusRules rendered, want 1", len(rs))
	}
	if rs[0].GetAPIVersion() != "monitoring.coreos.com/v1" {
		t.Errorf("PrometheusRule of %s, want monitoring.coreos.com/v1", rs[0].GetAPIVersion())
	}
	return rs[0]
}

// ruleGroup is a group of a PrometheusRule, as the Prometheus Operator
// defines it (the fields the chart uses).
type ruleGroup struct {
	Name  string      `json:"name"`
	Rules []alertRule `json:"rules"`
}

// alertRule is an alerting rule of a group.
type alertRule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// ruleGroups decodes the groups of the one PrometheusRule among objs,
// strictly: a field the chart misspells fails.
func ruleGroups(t *testing.T, objs []*unstructured.Unstructured) []ruleGroup {
	t.Helper()
	spec, err := json.Marshal(prometheusRule(t, objs).Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Groups []ruleGroup `json:"groups"`
	}
	dec := json.NewDecoder(strings.NewReader(string(spec)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("PrometheusRule spec: %v\n%s", err, spec)
	}
	return s.Groups
}

// checkAlert: an alert has a name, a severity, a summary and a
// description.
func checkAlert(t *testing.T, r alertRule) {
	t.Helper()
	if r.Alert == "" {
		t.Errorf("a rule without an alert name: %q", r.Expr)
	}
	if r.Labels["severity"] == "" {
		t.Errorf("alert %s has no severity label", r.Alert)
	}
	for _, a := range []string{"summary", "description"} {
		if strings.TrimSpace(r.Annotations[a]) == "" {
			t.Errorf("alert %s has no %s annotation", r.Alert, a)
		}
	}
	if r.For != "" {
		if _, err := model.ParseDuration(r.For); err != nil {
			t.Errorf("alert %s: for %q: %v", r.Alert, r.For, err)
		}
	}
}

// disableableAlerts are the alert names values.schema.json allows in
// prometheusRule.disabled, sorted.
func disableableAlerts(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Properties struct {
			PrometheusRule struct {
				Properties struct {
					Disabled struct {
						Items struct {
							Enum []string `json:"enum"`
						} `json:"items"`
					} `json:"disabled"`
				} `json:"properties"`
			} `json:"prometheusRule"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return slices.Sorted(slices.Values(s.Properties.PrometheusRule.Properties.Disabled.Items.Enum))
}

// checkDashboard: the ConfigMap holds the chart's dashboard, valid JSON,
// with a datasource variable that every panel and query uses, and job,
// namespace and pod variables; every query of its panels and variables
// parses and names only metrics the bridge exports.
func checkDashboard(t *testing.T, cm *unstructured.Unstructured, known exported) {
	t.Helper()
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	if len(data) != 1 {
		t.Fatalf("dashboard ConfigMap has keys %v, want one dashboard", slices.Sorted(maps.Keys(data)))
	}
	var text string
	for k, v := range data {
		if !strings.HasSuffix(k, ".json") {
			t.Errorf("dashboard ConfigMap key %q: the sidecar wants a .json file name", k)
		}
		text = v
	}
	file, err := os.ReadFile(filepath.Join(chartDir, "dashboards", "bridge.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(text) != strings.TrimSpace(string(file)) {
		t.Errorf("the ConfigMap's dashboard differs from dashboards/bridge.json")
	}
	var dash struct {
		UID        string  `json:"uid"`
		Title      string  `json:"title"`
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name       string          `json:"name"`
				Type       string          `json:"type"`
				Query      json.RawMessage `json:"query"`
				Datasource *datasource     `json:"datasource"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal([]byte(text), &dash); err != nil {
		t.Fatalf("dashboard: not valid JSON: %v", err)
	}
	if dash.UID == "" || dash.Title == "" {
		t.Errorf("dashboard without uid or title")
	}

	vars := map[string]string{}
	for _, v := range dash.Templating.List {
		vars[v.Name] = v.Type
		if v.Type != "query" {
			continue
		}
		checkDatasource(t, "variable "+v.Name, v.Datasource)
		// label_values(<selector>, <label>), as a string or as
		// {"query": "..."} (how Grafana saves it since 10).
		var q string
		if json.Unmarshal(v.Query, &q) != nil {
			var o struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &o); err != nil {
				t.Errorf("variable %s: query %s: %v", v.Name, v.Query, err)
			}
			q = o.Query
		}
		m := regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`).FindStringSubmatch(q)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(<selector>, <label>)", v.Name, q)
			continue
		}
		expr, err := parseExpr(grafanaSubst(m[1]))
		if err != nil {
			t.Errorf("variable %s: %v\n%s", v.Name, err, q)
			continue
		}
		checkNames(t, "variable "+v.Name, expr, known)
	}
	for name, typ := range map[string]string{"datasource": "datasource", "job": "query", "namespace": "query", "pod": "query"} {
		if vars[name] != typ {
			t.Errorf("dashboard: variable %s is %q, want a %s variable", name, vars[name], typ)
		}
	}

	queries := 0
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			checkDatasource(t, "panel "+p.Title, p.Datasource)
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, q := range p.Targets {
				queries++
				where := fmt.Sprintf("panel %q, query %s", p.Title, q.RefID)
				checkDatasource(t, where, q.Datasource)
				expr, err := parseExpr(grafanaSubst(q.Expr))
				if err != nil {
					t.Errorf("%s: %v\n%s", where, err, q.Expr)
					continue
				}
				checkNames(t, where, expr, known)
				// Each query follows the job, namespace and pod picked.
				for _, v := range []string{"$job", "$namespace", "$pod"} {
					if !strings.Contains(q.Expr, v) {
						t.Errorf("%s does not follow %s: %s", where, v, q.Expr)
					}
				}
			}
		}
	}
	walk(dash.Panels)
	if queries == 0 {
		t.Errorf("dashboard has no queries")
	}
}

// panel is a Grafana panel, or a row that may hold panels.
type panel struct {
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	Targets    []struct {
		RefID      string      `json:"refId"`
		Expr       string      `json:"expr"`
		Datasource *datasource `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// checkDatasource: the dashboard queries the Prometheus its datasource
// variable picks, never one of a particular Grafana.
func checkDatasource(t *testing.T, where string, ds *datasource) {
	t.Helper()
	if ds == nil || ds.Type != "prometheus" || ds.UID != "${datasource}" {
		t.Errorf("%s: datasource %+v, want {prometheus ${datasource}}", where, ds)
	}
}

// grafanaSubst replaces Grafana's variables in a query by values such as
// Grafana would put there: durations for its interval variables, a name
// for the dashboard's own ($job, ${pod}).
func grafanaSubst(q string) string {
	q = strings.NewReplacer("$__rate_interval", "1m", "${__rate_interval}", "1m",
		"$__interval", "30s", "${__interval}", "30s", "$__range", "6h", "${__range}", "6h").Replace(q)
	return regexp.MustCompile(`\$\{?\w+\}?`).ReplaceAllString(q, "x")
}

// parseExpr parses a PromQL expression with Prometheus' parser, as
// Prometheus and Grafana's Prometheus data source evaluate it.
func parseExpr(q string) (parser.Expr, error) {
	return parser.NewParser(parser.Options{}).ParseExpr(q)
}

// metricNames are the metric names expr selects: the names of its vector
// selectors, or their __name__ matchers. A __name__ matched by a regular
// expression cannot be checked, and is returned as an error.
func metricNames(expr parser.Expr) ([]string, error) {
	var names []string
	var errs []error
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		if vs.Name != "" {
			names = append(names, vs.Name)
		}
		for _, m := range vs.LabelMatchers {
			if m.Name != model.MetricNameLabel || m.Value == vs.Name {
				continue
			}
			if m.Type != labels.MatchEqual {
				errs = append(errs, fmt.Errorf("%s: a metric name matched by %s cannot be checked", vs, m.Type))
				continue
			}
			names = append(names, m.Value)
		}
		return nil
	})
	slices.Sort(names)
	return slices.Compact(names), errors.Join(errs...)
}

// checkNames: every metric expr selects is one known exports.
func checkNames(t *testing.T, where string, expr parser.Expr, known exported) {
	t.Helper()
	names, err := metricNames(expr)
	if err != nil {
		t.Errorf("%s: %v", where, err)
	}
	if len(names) == 0 {
		t.Errorf("%s selects no metric: %s", where, expr)
	}
	for _, name := range names {
		if err := known.check(name); err != nil {
			t.Errorf("%s: %v", where, err)
		}
	}
}

// checkMatchers: every vector selector of expr has the matchers of want
// (none when want is empty).
func checkMatchers(t *testing.T, where string, expr parser.Expr, want []*labels.Matcher) {
	t.Helper()
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		for _, w := range want {
			if !slices.ContainsFunc(vs.LabelMatchers, func(m *labels.Matcher) bool {
				return m.Name == w.Name && m.Type == w.Type && m.Value == w.Value
			}) {
				t.Errorf("%s: %s lacks %s, so it would also select other releases' bridges", where, vs, w)
			}
		}
		return nil
	})
}

// exported answers which metric names a registry exports.
type exported struct {
	name string // of the exporter, for messages
	reg  *prometheus.Registry
	// types are those of the families the registry gathers: the
	// vectors' only once a child was made, but every histogram without
	// labels.
	types map[string]dto.MetricType
}

func newExported(t *testing.T, name string, reg *prometheus.Registry) exported {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("%s: gather: %v", name, err)
	}
	types := map[string]dto.MetricType{}
	for _, mf := range mfs {
		types[mf.GetName()] = mf.GetType()
	}
	return exported{name: name, reg: reg, types: types}
}

// check returns an error unless the registry exports series named name:
// a registered metric of that name, or the _bucket, _sum or _count
// series of a histogram (_sum and _count of a summary).
func (e exported) check(name string) error {
	if e.registered(name) {
		return nil
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok || !e.registered(base) {
			continue
		}
		switch typ, ok := e.types[base]; {
		case !ok:
			return fmt.Errorf("%s: %s has no series to tell its type by; have the test observe it", name, base)
		case typ == dto.MetricType_HISTOGRAM, typ == dto.MetricType_SUMMARY && suffix != "_bucket":
			return nil
		default:
			return fmt.Errorf("%s: %s is a %s, which has no %s series", name, base, typ, suffix)
		}
	}
	return fmt.Errorf("%s does not export %s", e.name, name)
}

// registered reports whether the registry holds a collector that
// describes a metric named name, whether or not it has series now (a
// vector before its first child). It asks the registry itself: a
// descriptor of a registered name with other help and labels is refused
// (see prometheus.Desc), one of a new name is taken, and given back.
func (e exported) registered(name string) bool {
	if !model.LegacyValidation.IsValidMetricName(name) {
		return false
	}
	probe := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        name,
		Help:        "test/chart's probe for a registered name",
		ConstLabels: prometheus.Labels{"test_chart_probe": "1"},
	})
	if err := e.reg.Register(probe); err != nil {
		return true
	}
	e.reg.Unregister(probe)
	return false
}

// bridgeMetrics is the bridge's registry, as cmd/bridge builds it: the
// metrics, the gauges read at scrape time, and the watches' health.
func bridgeMetrics(t *testing.T) exported {
	t.Helper()
	m := metrics.New()
	zero := func() float64 { return 0 }
	m.Watch(metrics.Gauges{PendingDeltas: zero, PendingBytes: zero, HeldSeconds: zero, Holding: zero, CheckpointLag: zero, LastCheckpoint: time.Now, SinkUp: zero})
	m.Watches(func() []source.WatchStatus { return nil })
	// A histogram shows its type only once gathered.
	m.PublishDuration(time.Millisecond)
	m.ReconcileRun(time.Second, nil)
	return newExported(t, "the bridge", m.Registry)
}

// consumerMetrics is the registry of a program that uses the consumer
// package, with one ListerWatcher.
func consumerMetrics(t *testing.T) exported {
	t.Helper()
	reg := prometheus.NewRegistry()
	lw, err := consumer.NewListerWatcher(noLog{}, consumer.Options{
		Cluster:    "default",
		Resource:   schema.GroupResource{Resource: "configmaps"},
		Name:       "configmaps",
		Registerer: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lw.Close() })
	return newExported(t, "the consumer package", reg)
}

// noLog is a consumer.Log never read: the ListerWatcher is only built.
type noLog struct{}

func (noLog) ReadState(context.Context, func(consumer.Record) error) (string, error) {
	return "", errors.New("noLog: not read")
}

func (noLog) Follow(context.Context, string, func(consumer.Record) error) error {
	return errors.New("noLog: not read")
}
