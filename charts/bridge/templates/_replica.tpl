{{/*
Helpers of the replica, the read-only Kubernetes API server fed by the bus
(values under replica). Its objects are named <fullname>-replica and carry
labels of their own: app.kubernetes.io/name is <name>-replica, so that no
selector of the bridge's (its Deployment, metrics Service,
PodDisruptionBudget, ServiceMonitor) selects a replica's pod, and no
selector of the replica's selects a bridge.
*/}}

{{- define "bridge.replicaName" -}}
{{- printf "%s-replica" (include "bridge.fullname" . | trunc 55 | trimSuffix "-") }}
{{- end }}

{{- define "bridge.replicaSelectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-replica" (include "bridge.name" . | trunc 55 | trimSuffix "-") }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: replica
{{- end }}

{{- define "bridge.replicaLabels" -}}
helm.sh/chart: {{ include "bridge.chart" . }}
{{ include "bridge.replicaSelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kubebus
{{- end }}

{{/* The bus the replica reads: replica.bus, or the bridge's sink. */}}
{{- define "bridge.replicaBus" -}}
{{- default .Values.sink .Values.replica.bus }}
{{- end }}

{{/*
The replica's bus credentials (see bridge.credentials), for the bus it
reads, from replica.existingSecret and replica.nats or replica.kafka only:
never the bridge's, which may write to the bus.
*/}}
{{- define "bridge.replicaCredentials" -}}
{{- $r := .Values.replica }}
{{- $bus := include "bridge.replicaBus" . }}
{{- toJson (dict "secret" $r.existingSecret
    "nats" (and (eq $bus "nats") $r.nats)
    "kafka" (and (eq $bus "kafka") $r.kafka)
    "prefix" "REPLICA" "dir" (printf "%s/credentials" (include "bridge.replicaDir" .))) }}
{{- end }}

{{/* Where the replica finds its files; each is a volume of its own. */}}
{{- define "bridge.replicaDir" -}}/etc/replica{{- end }}

{{- define "bridge.replicaTLSSecret" -}}
{{- default (printf "%s-tls" (include "bridge.replicaName" .)) .Values.replica.tls.existingSecret }}
{{- end }}

{{- define "bridge.replicaRulesSecret" -}}
{{- default (printf "%s-rules" (include "bridge.replicaName" .)) .Values.replica.rules.existingSecret }}
{{- end }}

{{/*
bridge.replicaDNSNames: the names a client may reach the replica's Service
by inside the cluster, then replica.tls.dnsNames, as a JSON list.
*/}}
{{- define "bridge.replicaDNSNames" -}}
{{- $svc := include "bridge.replicaName" . }}
{{- $ns := .Release.Namespace }}
{{- toJson (concat (list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns)) .Values.replica.tls.dnsNames) }}
{{- end }}

{{/*
bridge.replicaProblems: what is wrong with the replica's values that the
schema cannot see, as a JSON list of messages; [] when the replica is off.
*/}}
{{- define "bridge.replicaProblems" -}}
{{- $v := .Values }}
{{- $r := $v.replica }}
{{- $errs := list }}
{{- if $r.enabled }}
{{- $bus := include "bridge.replicaBus" . }}
{{- if not (has $bus (list "nats" "kafka")) }}
{{- $errs = append $errs (printf "replica.bus must be nats or kafka: the bridge's sink is %s, which the replica cannot read; set replica.bus and the bus's address (replica.nats.urls or replica.kafka.brokers)" $v.sink) }}
{{- end }}
{{- if and (eq $bus "nats") (not (or $r.nats.urls $v.nats.urls)) }}
{{- $errs = append $errs "replica.nats.urls (or the bridge's nats.urls) is required with replica.bus=nats" }}
{{- end }}
{{- if and (eq $bus "kafka") (not (or $r.kafka.brokers $v.kafka.brokers)) }}
{{- $errs = append $errs "replica.kafka.brokers (or the bridge's kafka.brokers) is required with replica.bus=kafka" }}
{{- end }}
{{- /* Reading this release's bridge: it must write what the replica reads. */}}
{{- if eq $bus $v.sink }}
{{- if and (eq $bus "nats") (eq $v.nats.layout "history") }}
{{- $errs = append $errs "replica.enabled needs the state layout, but nats.layout=history: the replica reads each object's latest message, which the history layout does not keep. Use nats.layout=state (a new stream, see docs/nats.md), or point the replica at another bus with replica.bus and replica.nats" }}
{{- end }}
{{- if and (eq $bus "nats") (eq $v.nats.mode "core") }}
{{- $errs = append $errs "replica.enabled needs JetStream, but nats.mode=core keeps nothing for the replica to read" }}
{{- end }}
{{- if and (eq $bus "kafka") (eq $v.kafka.layout "history") }}
{{- $errs = append $errs "replica.enabled needs the state layout, but kafka.layout=history: the replica reads compacted topics, each object's latest record. Use kafka.layout=state, or point the replica at another bus with replica.bus and replica.kafka" }}
{{- end }}
{{- if and (eq $bus "kafka") $v.kafka.topic }}
{{- $errs = append $errs (printf "replica.enabled cannot read kafka.topic=%s: the replica reads a topic per resource, <prefix>.<resource>[.<group>]; leave kafka.topic unset" $v.kafka.topic) }}
{{- end }}
{{- end }}
{{- if not (or $r.rules.grants $r.rules.existingSecret) }}
{{- $errs = append $errs "replica.rules.grants or replica.rules.existingSecret is required with replica.enabled: the access rules say who may read what, and without them the replica serves nobody" }}
{{- else if and $r.rules.grants $r.rules.existingSecret }}
{{- $errs = append $errs "replica.rules: set grants or existingSecret, not both" }}
{{- end }}
{{- if not (or $r.clientCA.existingSecret $r.clientCA.existingConfigMap $r.tokens.existingSecret) }}
{{- $errs = append $errs "replica.clientCA (existingSecret or existingConfigMap) or replica.tokens.existingSecret is required with replica.enabled: nothing is served unauthenticated" }}
{{- end }}
{{- if and $r.clientCA.existingSecret $r.clientCA.existingConfigMap }}
{{- $errs = append $errs "replica.clientCA: set existingSecret or existingConfigMap, not both" }}
{{- end }}
{{- if and $r.tls.existingSecret $r.tls.dnsNames }}
{{- $errs = append $errs (printf "replica.tls.dnsNames names the generated certificate's extra names, but replica.tls.existingSecret=%s brings its own certificate" $r.tls.existingSecret) }}
{{- end }}
{{- $errs = concat $errs (include "bridge.credentialProblems" (include "bridge.replicaCredentials" . | fromJson) | fromJsonArray) }}
{{- if eq (int $r.port) (int $r.metricsPort) }}
{{- $errs = append $errs (printf "replica.port and replica.metricsPort are both %d: the API (TLS) and the metrics (plain HTTP) need a port each" (int $r.port)) }}
{{- end }}
{{- end }}
{{- toJson $errs }}
{{- end }}

{{/* bridge.replicaEnv: the replica's environment (REPLICA_*). */}}
{{- define "bridge.replicaEnv" -}}
{{- $v := .Values }}
{{- $r := $v.replica }}
{{- $bus := include "bridge.replicaBus" . }}
{{- $dir := include "bridge.replicaDir" . }}
{{- $creds := include "bridge.replicaCredentials" . | fromJson }}
{{- include "bridge.env" (list "REPLICA_BUS" $bus) }}
{{- if eq $bus "nats" }}
{{- include "bridge.env" (list "REPLICA_NATS_URL" (join "," (default $v.nats.urls $r.nats.urls))) }}
{{- include "bridge.env" (list "REPLICA_NATS_STREAM" (default $v.nats.stream $r.nats.stream)) }}
{{- include "bridge.env" (list "REPLICA_NATS_SUBJECT_PREFIX" (default $v.nats.subjectPrefix $r.nats.subjectPrefix)) }}
{{- include "bridge.env" (list "REPLICA_NATS_SUBJECT" (default $v.nats.subject $r.nats.subject)) }}
{{- include "bridge.natsCredentialEnv" $creds }}
{{- else if eq $bus "kafka" }}
{{- include "bridge.env" (list "REPLICA_KAFKA_BROKERS" (join "," (default $v.kafka.brokers $r.kafka.brokers))) }}
{{- include "bridge.env" (list "REPLICA_KAFKA_TOPIC_PREFIX" (default $v.kafka.topicPrefix $r.kafka.topicPrefix)) }}
{{- include "bridge.kafkaCredentialEnv" $creds }}
{{- end }}
{{- include "bridge.credentialFileEnv" $creds }}
{{- include "bridge.env" (list "REPLICA_LISTEN" (printf ":%d" (int $r.port))) }}
{{- include "bridge.env" (list "REPLICA_TLS_CERT_FILE" (printf "%s/tls/tls.crt" $dir)) }}
{{- include "bridge.env" (list "REPLICA_TLS_KEY_FILE" (printf "%s/tls/tls.key" $dir)) }}
{{- if or $r.clientCA.existingSecret $r.clientCA.existingConfigMap }}
{{- include "bridge.env" (list "REPLICA_CLIENT_CA_FILE" (printf "%s/client-ca/ca.crt" $dir)) }}
{{- end }}
{{- if $r.tokens.existingSecret }}
{{- include "bridge.env" (list "REPLICA_TOKEN_FILE" (printf "%s/tokens/tokens.csv" $dir)) }}
{{- end }}
{{- include "bridge.env" (list "REPLICA_RULES_FILE" (printf "%s/rules/rules.yaml" $dir)) }}
{{- include "bridge.env" (list "REPLICA_METRICS_ADDR" (printf ":%d" (int $r.metricsPort))) }}
{{- include "bridge.envInt" (list "REPLICA_WATCH_QUEUE" $r.watchQueue) }}
{{- include "bridge.env" (list "REPLICA_LOG_LEVEL" (default $v.log.level $r.logLevel)) }}
{{- $limits := default (dict) (default (dict) $r.resources).limits }}
{{- if $limits.memory }}
{{- $names := list }}
{{- range $e := default (list) $r.extraEnv }}{{- $names = append $names $e.name }}{{- end }}
{{- if not (has "GOMEMLIMIT" $names) }}
- name: GOMEMLIMIT
  valueFrom:
    resourceFieldRef:
      containerName: replica
      resource: limits.memory
{{- end }}
{{- end }}
{{- with $r.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}
