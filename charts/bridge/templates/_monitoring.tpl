{{/* Helpers of the Grafana dashboard and the PrometheusRule. */}}

{{/*
bridge.ruleSelector: the label matchers that pick this release's bridge in
the alerts: prometheusRule.selector, or the job and namespace of the series
the ServiceMonitor scrapes (the Prometheus Operator names the job after the
Service).
*/}}
{{- define "bridge.ruleSelector" -}}
{{- default (printf "job=%q,namespace=%q" (printf "%s-metrics" (include "bridge.fullname" .)) .Release.Namespace) .Values.prometheusRule.selector }}
{{- end }}

{{/*
bridge.newIncrease: PromQL for "counter grew by more than threshold within
window": its increase, or, for a series that appeared within window (a
vector's child is made at its first increment, so increase() never sees
that one), its value. Takes (list counter window threshold), counter with
its matchers.
*/}}
{{- define "bridge.newIncrease" -}}
{{- $c := index . 0 }}{{ $w := index . 1 }}{{ $n := index . 2 -}}
(increase({{ $c }}[{{ $w }}]) > {{ $n }} or ({{ $c }} > {{ $n }} unless {{ $c }} offset {{ $w }}))
{{- end }}

{{/*
bridge.alertLabels: the labels of an alert of severity, with
prometheusRule.alertLabels. Takes (list $ severity).
*/}}
{{- define "bridge.alertLabels" -}}
{{- $root := index . 0 -}}
labels:
  severity: {{ index . 1 | quote }}
  {{- with $root.Values.prometheusRule.alertLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}
