{{/*
The bridge's environment. A value that is "" or null leaves its variable
unset, so the bridge's default applies; booleans are always set.
*/}}

{{/* bridge.env (list NAME value): one variable with a literal value. */}}
{{- define "bridge.env" -}}
{{- $v := index . 1 }}
{{- if and (not (kindIs "invalid" $v)) (ne (toString $v) "") }}
- name: {{ index . 0 }}
  value: {{ toString $v | quote }}
{{- end }}
{{- end }}

{{/*
bridge.envInt (list NAME value): an integer. Numbers from values files may
arrive as floats, which toString would print as 1.048576e+06.
*/}}
{{- define "bridge.envInt" -}}
{{- $v := index . 1 }}
{{- if not (kindIs "invalid" $v) }}
- name: {{ index . 0 }}
  value: {{ int64 $v | toString | quote }}
{{- end }}
{{- end }}

{{/*
bridge.envNumber (list NAME value): a number that may have a fraction
(12.5), printed without an exponent when it is whole (50, not 5e+01).
*/}}
{{- define "bridge.envNumber" -}}
{{- $v := index . 1 }}
{{- if not (kindIs "invalid" $v) }}
{{- if eq (float64 (int64 $v)) (float64 $v) }}
{{- $v = int64 $v }}
{{- end }}
- name: {{ index . 0 }}
  value: {{ toString $v | quote }}
{{- end }}
{{- end }}

{{/* bridge.envSecret (list NAME secret key): a variable from a Secret key. */}}
{{- define "bridge.envSecret" -}}
{{- if index . 2 }}
- name: {{ index . 0 }}
  valueFrom:
    secretKeyRef:
      name: {{ index . 1 | quote }}
      key: {{ index . 2 | quote }}
{{- end }}
{{- end }}

{{/*
The bus credentials of a program, the bridge or the replica, as a dict:
secret, the Secret that the *Key values name keys of; nats and kafka, the
values of the buses it connects to ("" for one it does not); prefix, its
variables' (BRIDGE or REPLICA); dir, where its credential files are
mounted. bridge.credentials and bridge.replicaCredentials make it, as JSON.
*/}}
{{- define "bridge.credentials" -}}
{{- $v := .Values }}
{{- toJson (dict "secret" $v.existingSecret
    "nats" (and (include "bridge.usesNATS" .) $v.nats)
    "kafka" (and (include "bridge.usesKafka" .) $v.kafka)
    "prefix" "BRIDGE" "dir" (include "bridge.credentialsDir" .)) }}
{{- end }}

{{/*
bridge.credentialFiles (credentials): the Secret keys mounted as files, as
a JSON list of {secret, key, path, env}. path is relative to the
credentials' dir.
*/}}
{{- define "bridge.credentialFiles" -}}
{{- $s := .secret }}
{{- $files := list }}
{{- $sets := list }}
{{- with .nats }}
{{- $tlsSecret := default $s .tls.existingSecret }}
{{- $sets = append $sets (list
    (list $s .credsKey "nats.creds" "NATS_CREDS_FILE")
    (list $s .nkeySeedKey "nats.nk" "NATS_NKEY_SEED_FILE")
    (list $tlsSecret .tls.caKey "nats-ca.pem" "NATS_TLS_CA_FILE")
    (list $tlsSecret .tls.certKey "nats-cert.pem" "NATS_TLS_CERT_FILE")
    (list $tlsSecret .tls.keyKey "nats-key.pem" "NATS_TLS_KEY_FILE")) }}
{{- end }}
{{- with .kafka }}
{{- $tlsSecret := default $s .tls.existingSecret }}
{{- $sets = append $sets (list
    (list $tlsSecret .tls.caKey "kafka-ca.pem" "KAFKA_TLS_CA_FILE")
    (list $tlsSecret .tls.certKey "kafka-cert.pem" "KAFKA_TLS_CERT_FILE")
    (list $tlsSecret .tls.keyKey "kafka-key.pem" "KAFKA_TLS_KEY_FILE")) }}
{{- end }}
{{- range $set := $sets }}
{{- range $f := $set }}
{{- if index $f 1 }}
{{- $files = append $files (dict "secret" (index $f 0) "key" (index $f 1) "path" (index $f 2) "env" (printf "%s_%s" $.prefix (index $f 3))) }}
{{- end }}
{{- end }}
{{- end }}
{{- toJson $files }}
{{- end }}

{{/* bridge.natsCredentialEnv (credentials): <prefix>_NATS_USER, _PASSWORD, _TOKEN. */}}
{{- define "bridge.natsCredentialEnv" -}}
{{- with .nats }}
{{- include "bridge.env" (list (printf "%s_NATS_USER" $.prefix) .user) }}
{{- include "bridge.envSecret" (list (printf "%s_NATS_PASSWORD" $.prefix) $.secret .passwordKey) }}
{{- include "bridge.envSecret" (list (printf "%s_NATS_TOKEN" $.prefix) $.secret .tokenKey) }}
{{- end }}
{{- end }}

{{/* bridge.kafkaCredentialEnv (credentials): <prefix>_KAFKA_TLS and _SASL_*. */}}
{{- define "bridge.kafkaCredentialEnv" -}}
{{- with .kafka }}
{{- $p := $.prefix }}
{{- $tls := .tls }}
{{- include "bridge.env" (list (printf "%s_KAFKA_TLS" $p) (not (not (or $tls.enabled $tls.caKey $tls.certKey $tls.keyKey $tls.serverName)))) }}
{{- include "bridge.env" (list (printf "%s_KAFKA_TLS_SERVER_NAME" $p) $tls.serverName) }}
{{- include "bridge.env" (list (printf "%s_KAFKA_SASL_MECHANISM" $p) .sasl.mechanism) }}
{{- include "bridge.env" (list (printf "%s_KAFKA_SASL_USERNAME" $p) .sasl.username) }}
{{- include "bridge.envSecret" (list (printf "%s_KAFKA_SASL_USERNAME" $p) $.secret .sasl.usernameKey) }}
{{- include "bridge.envSecret" (list (printf "%s_KAFKA_SASL_PASSWORD" $p) $.secret .sasl.passwordKey) }}
{{- end }}
{{- end }}

{{/* bridge.credentialFileEnv (credentials): a variable per credential file. */}}
{{- define "bridge.credentialFileEnv" -}}
{{- range $f := include "bridge.credentialFiles" . | fromJsonArray }}
- name: {{ $f.env }}
  value: {{ printf "%s/%s" $.dir $f.path | quote }}
{{- end }}
{{- end }}

{{/*
bridge.credentialsVolume (files, from bridge.credentialFiles): the volume
"credentials", a projection of each Secret's keys.
*/}}
{{- define "bridge.credentialsVolume" -}}
- name: credentials
  projected:
    defaultMode: 288 # 0440: the owner and fsGroup may read
    sources:
      {{- $bySecret := dict }}
      {{- range $f := . }}
      {{- $_ := set $bySecret $f.secret (append (default (list) (get $bySecret $f.secret)) (dict "key" $f.key "path" $f.path)) }}
      {{- end }}
      {{- range $secret := keys $bySecret | sortAlpha }}
      - secret:
          name: {{ $secret | quote }}
          items:
            {{- toYaml (get $bySecret $secret) | nindent 12 }}
      {{- end }}
{{- end }}

{{- define "bridge.containerEnv" -}}
{{- $v := .Values }}
{{- $creds := include "bridge.credentials" . | fromJson }}
{{- $w := $v.watch }}
{{- $resources := concat $w.resources $w.clusterResources }}
{{- if $w.all }}
{{- $resources = prepend $resources "*" }}
{{- end }}
{{- include "bridge.env" (list "BRIDGE_RESOURCES" (join "," $resources)) }}
{{- if $w.all }}
{{- include "bridge.env" (list "BRIDGE_EXCLUDE_RESOURCES" (ternary (join "," $w.exclude) "none" (not (empty $w.exclude)))) }}
{{- end }}
{{- include "bridge.envInt" (list "BRIDGE_LIST_CONCURRENCY" $w.listConcurrency) }}
{{- include "bridge.envNumber" (list "BRIDGE_KUBE_QPS" $v.kubeClient.qps) }}
{{- include "bridge.envInt" (list "BRIDGE_KUBE_BURST" $v.kubeClient.burst) }}
{{- include "bridge.env" (list "BRIDGE_NAMESPACES" (join "," $w.namespaces)) }}
{{- include "bridge.env" (list "BRIDGE_LABEL_SELECTOR" $w.labelSelector) }}
{{- include "bridge.env" (list "BRIDGE_FIELD_SELECTOR" $w.fieldSelector) }}
{{- include "bridge.env" (list "BRIDGE_WATCH_STALL_TIMEOUT" $w.stallTimeout) }}
{{- include "bridge.env" (list "BRIDGE_CLUSTER_NAME" $v.clusterName) }}
{{- include "bridge.env" (list "BRIDGE_SINK" $v.sink) }}
{{- include "bridge.env" (list "BRIDGE_CHECKPOINT" (include "bridge.checkpoint" .)) }}
{{- include "bridge.env" (list "BRIDGE_CHECKPOINT_INTERVAL" $v.checkpoint.interval) }}
{{- include "bridge.env" (list "BRIDGE_RECONCILE_INTERVAL" $v.checkpoint.reconcileInterval) }}
{{- if and (eq $v.checkpoint.type "file") $v.checkpoint.file.freshStart }}
- name: BRIDGE_CHECKPOINT_FRESH_START
  value: "true"
{{- end }}
{{- include "bridge.env" (list "BRIDGE_KEEP_MANAGED_FIELDS" $v.keepManagedFields) }}
{{- include "bridge.env" (list "BRIDGE_OLD_OBJECT" $v.oldObject) }}
{{- include "bridge.env" (list "BRIDGE_FILTER" $v.filter) }}
{{- include "bridge.env" (list "BRIDGE_FIELDS" $v.fields) }}
{{- include "bridge.env" (list "BRIDGE_DROP_FIELDS" $v.dropFields) }}
{{- include "bridge.envInt" (list "BRIDGE_WORKERS" $v.pipeline.workers) }}
{{- include "bridge.envInt" (list "BRIDGE_BATCH_SIZE" $v.pipeline.batchSize) }}
{{- include "bridge.envInt" (list "BRIDGE_MAX_PENDING_PER_OBJECT" $v.pipeline.maxPendingPerObject) }}
{{- include "bridge.envInt" (list "BRIDGE_MAX_PENDING_BYTES" $v.pipeline.maxPendingBytes) }}
{{- include "bridge.env" (list "BRIDGE_RETRY_MAX_INTERVAL" $v.pipeline.retryMaxInterval) }}
{{- include "bridge.env" (list "BRIDGE_SHUTDOWN_TIMEOUT" $v.pipeline.shutdownTimeout) }}
{{- include "bridge.env" (list "BRIDGE_LOG_LEVEL" $v.log.level) }}
{{- include "bridge.env" (list "BRIDGE_LOG_FORMAT" $v.log.format) }}
{{- include "bridge.env" (list "BRIDGE_METRICS_ADDR" (printf ":%d" (int $v.metrics.port))) }}
{{- if $v.metrics.pprof }}
- name: BRIDGE_PPROF
  value: "true"
{{- end }}
{{- if include "bridge.leaderElection" . }}
- name: BRIDGE_LEADER_ELECTION
  value: "true"
- name: BRIDGE_LEADER_ELECTION_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: BRIDGE_LEADER_ELECTION_NAME
  value: {{ include "bridge.fullname" . | quote }}
- name: BRIDGE_LEADER_ELECTION_IDENTITY
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- include "bridge.env" (list "BRIDGE_LEADER_ELECTION_LEASE_DURATION" $v.leaderElection.leaseDuration) }}
{{- include "bridge.env" (list "BRIDGE_LEADER_ELECTION_RENEW_DEADLINE" $v.leaderElection.renewDeadline) }}
{{- include "bridge.env" (list "BRIDGE_LEADER_ELECTION_RETRY_PERIOD" $v.leaderElection.retryPeriod) }}
{{- else }}
- name: BRIDGE_LEADER_ELECTION
  value: "false"
{{- end }}
{{- if include "bridge.usesNATS" . }}
{{- $n := $v.nats }}
{{- include "bridge.env" (list "BRIDGE_NATS_URL" (join "," $n.urls)) }}
{{- include "bridge.natsCredentialEnv" $creds }}
{{- include "bridge.env" (list "BRIDGE_NATS_MODE" $n.mode) }}
{{- include "bridge.env" (list "BRIDGE_NATS_SUBJECT_PREFIX" $n.subjectPrefix) }}
{{- include "bridge.env" (list "BRIDGE_NATS_LAYOUT" $n.layout) }}
{{- include "bridge.env" (list "BRIDGE_NATS_DELETE_TTL" $n.deleteTTL) }}
{{- include "bridge.env" (list "BRIDGE_NATS_SUBJECT" $n.subject) }}
{{- include "bridge.env" (list "BRIDGE_NATS_CE_MODE" $n.ceMode) }}
{{- include "bridge.env" (list "BRIDGE_NATS_STREAM" $n.stream) }}
{{- include "bridge.env" (list "BRIDGE_NATS_CREATE_STREAM" $n.createStream) }}
{{- include "bridge.env" (list "BRIDGE_NATS_STREAM_MAX_AGE" $n.streamMaxAge) }}
{{- include "bridge.envInt" (list "BRIDGE_NATS_STREAM_REPLICAS" $n.streamReplicas) }}
{{- include "bridge.env" (list "BRIDGE_NATS_DUPLICATE_WINDOW" $n.duplicateWindow) }}
{{- include "bridge.envInt" (list "BRIDGE_NATS_MAX_IN_FLIGHT" $n.maxInFlight) }}
{{- include "bridge.env" (list "BRIDGE_NATS_ACK_TIMEOUT" $n.ackTimeout) }}
{{- include "bridge.env" (list "BRIDGE_NATS_RECONNECT_MAX_WAIT" $n.reconnectMaxWait) }}
{{- end }}
{{- if include "bridge.usesKafka" . }}
{{- $k := $v.kafka }}
{{- include "bridge.env" (list "BRIDGE_KAFKA_BROKERS" (join "," $k.brokers)) }}
{{- include "bridge.env" (list "BRIDGE_KAFKA_CLIENT_ID" $k.clientId) }}
{{- include "bridge.env" (list "BRIDGE_KAFKA_TOPIC_PREFIX" $k.topicPrefix) }}
{{- include "bridge.env" (list "BRIDGE_KAFKA_TOPIC" $k.topic) }}
{{- include "bridge.env" (list "BRIDGE_KAFKA_CREATE_TOPICS" $k.createTopics) }}
{{- include "bridge.envInt" (list "BRIDGE_KAFKA_PARTITIONS" $k.partitions) }}
{{- include "bridge.envInt" (list "BRIDGE_KAFKA_REPLICATION_FACTOR" $k.replicationFactor) }}
{{- include "bridge.env" (list "BRIDGE_KAFKA_LAYOUT" $k.layout) }}
{{- include "bridge.env" (list "BRIDGE_KAFKA_DELETE_RETENTION" $k.deleteRetention) }}
{{- $configs := list }}
{{- range $name := keys $k.topicConfigs | sortAlpha }}
{{- $value := get $k.topicConfigs $name }}
{{- /* YAML numbers arrive as floats: 604800000 would print as 6.048e+08. */}}
{{- if and (kindIs "float64" $value) (eq (float64 (int64 $value)) $value) }}
{{- $value = int64 $value }}
{{- end }}
{{- $configs = append $configs (printf "%s=%v" $name $value) }}
{{- end }}
{{- include "bridge.env" (list "BRIDGE_KAFKA_TOPIC_CONFIGS" (join "," $configs)) }}
{{- include "bridge.env" (list "BRIDGE_KAFKA_CE_MODE" $k.ceMode) }}
{{- include "bridge.env" (list "BRIDGE_KAFKA_TOMBSTONES" $k.tombstones) }}
{{- include "bridge.env" (list "BRIDGE_KAFKA_REQUIRED_ACKS" $k.requiredAcks) }}
{{- include "bridge.envInt" (list "BRIDGE_KAFKA_BATCH_SIZE" $k.batchSize) }}
{{- include "bridge.env" (list "BRIDGE_KAFKA_BATCH_TIMEOUT" $k.batchTimeout) }}
{{- include "bridge.env" (list "BRIDGE_KAFKA_COMPRESSION" $k.compression) }}
{{- include "bridge.envInt" (list "BRIDGE_KAFKA_MAX_MESSAGE_BYTES" $k.maxMessageBytes) }}
{{- include "bridge.kafkaCredentialEnv" $creds }}
{{- end }}
{{- include "bridge.credentialFileEnv" $creds }}
{{- /*
The Go runtime does not read the container's memory limit: GOMEMLIMIT
tells it, so that the garbage collector works harder as the heap nears the
limit instead of letting it grow to twice what is live. An extraEnv
GOMEMLIMIT replaces it.
*/}}
{{- $limits := default (dict) (default (dict) $v.resources).limits }}
{{- if $limits.memory }}
{{- $names := list }}
{{- range $e := default (list) $v.extraEnv }}{{- $names = append $names $e.name }}{{- end }}
{{- if not (has "GOMEMLIMIT" $names) }}
- name: GOMEMLIMIT
  valueFrom:
    resourceFieldRef:
      containerName: bridge
      resource: limits.memory
{{- end }}
{{- end }}
{{- with $v.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}
