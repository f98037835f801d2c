{{/* Names, labels and small shared values. */}}

{{- define "bridge.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The release's full name, at most 63 characters (a label value and a DNS
label). It names the Deployment, the ServiceAccount, the Roles and the
leader-election Lease.
*/}}
{{- define "bridge.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Cluster-scoped objects (ClusterRole, ClusterRoleBinding) carry the release
namespace too, so that equal release names in two namespaces do not collide.
*/}}
{{- define "bridge.clusterObjectName" -}}
{{- printf "%s-%s" .Release.Namespace (include "bridge.fullname" .) }}
{{- end }}

{{- define "bridge.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "bridge.selectorLabels" -}}
app.kubernetes.io/name: {{ include "bridge.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "bridge.labels" -}}
helm.sh/chart: {{ include "bridge.chart" . }}
{{ include "bridge.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kubebus
{{- end }}

{{- define "bridge.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "bridge.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "bridge.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* "true" when leader election is on: as set, or when replicaCount > 1. */}}
{{- define "bridge.leaderElection" -}}
{{- if kindIs "bool" .Values.leaderElection.enabled }}
{{- ternary "true" "" .Values.leaderElection.enabled }}
{{- else }}
{{- ternary "true" "" (gt (int .Values.replicaCount) 1) }}
{{- end }}
{{- end }}

{{/* "true" when the checkpoint file lives on a PersistentVolumeClaim. */}}
{{- define "bridge.checkpointOnClaim" -}}
{{- if and (eq .Values.checkpoint.type "file") .Values.checkpoint.file.persistence.enabled }}true{{ end }}
{{- end }}

{{- define "bridge.checkpointClaimName" -}}
{{- default (printf "%s-checkpoint" (include "bridge.fullname" .)) .Values.checkpoint.file.persistence.existingClaim }}
{{- end }}

{{/* BRIDGE_CHECKPOINT. */}}
{{- define "bridge.checkpoint" -}}
{{- $c := .Values.checkpoint }}
{{- $default := printf "%s-checkpoint" (include "bridge.fullname" .) }}
{{- if eq $c.type "file" }}
{{- printf "file:%s/checkpoint.db" (include "bridge.checkpointDir" .) }}
{{- else if eq $c.type "nats-kv" }}
{{- printf "nats-kv:%s" (default $default $c.natsKV.bucket) }}
{{- else if eq $c.type "kafka" }}
{{- printf "kafka:%s" (default $default $c.kafka.topic) }}
{{- else }}
{{- "none" }}
{{- end }}
{{- end }}

{{- define "bridge.checkpointDir" -}}/var/lib/bridge{{- end }}
{{- define "bridge.credentialsDir" -}}/etc/bridge/credentials{{- end }}

{{- define "bridge.usesNATS" -}}
{{- if or (eq .Values.sink "nats") (eq .Values.checkpoint.type "nats-kv") }}true{{ end }}
{{- end }}

{{- define "bridge.usesKafka" -}}
{{- if or (eq .Values.sink "kafka") (eq .Values.checkpoint.type "kafka") }}true{{ end }}
{{- end }}

{{/*
bridge.shutdownSeconds is pipeline.shutdownTimeout (BRIDGE_SHUTDOWN_TIMEOUT;
"" is the bridge's default, 25s) in whole seconds, rounded up: the one
budget from SIGTERM to the bridge's exit.
*/}}
{{- define "bridge.shutdownSeconds" -}}
{{- $units := dict "ns" 0.000000001 "us" 0.000001 "µs" 0.000001 "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 }}
{{- $total := 0.0 }}
{{- range $part := regexFindAll "[0-9.]+(ns|us|µs|ms|s|m|h)" (default "25s" .Values.pipeline.shutdownTimeout) -1 }}
{{- $n := regexFind "^[0-9.]+" $part }}
{{- $total = addf $total (mulf (float64 $n) (get $units (trimPrefix $n $part))) }}
{{- end }}
{{- ceil $total | int }}
{{- end }}

{{/*
bridge.terminationGracePeriodSeconds is terminationGracePeriodSeconds, or
when it is unset the shutdown budget plus 5 s: the kubelet's and the
container runtime's own time to deliver SIGTERM and reap the process, so
that the bridge is never killed inside its budget (in the middle of its
final checkpoint flush).
*/}}
{{- define "bridge.terminationGracePeriodSeconds" -}}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds }}
{{- add (include "bridge.shutdownSeconds" . | int) 5 }}
{{- else }}
{{- .Values.terminationGracePeriodSeconds }}
{{- end }}
{{- end }}
