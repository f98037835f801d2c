{{/*
bridge.validate fails the render with every problem the values have that
values.schema.json cannot see, each naming the value at fault.
*/}}
{{- define "bridge.validate" -}}
{{- $v := .Values }}
{{- $w := $v.watch }}
{{- $errs := list }}

{{- $all := concat $w.resources $w.clusterResources }}
{{- if not (or $all $w.all) }}
{{- $errs = append $errs "watch.resources or watch.clusterResources must name at least one resource, or watch.all must be true" }}
{{- end }}
{{- if ne (len $all) (len (uniq $all)) }}
{{- $errs = append $errs (printf "watch: a resource is listed twice in %s" (toJson $all)) }}
{{- end }}

{{- /* Built-in resources must be listed under the key of their scope. */}}
{{- $builtin := .Files.Get "files/builtin-resources.yaml" | fromYaml }}
{{- range $key, $names := dict "resources" $w.resources "clusterResources" $w.clusterResources }}
{{- range $name := $names }}
{{- $parts := splitn "." 2 $name }}
{{- $plural := $parts._0 }}
{{- $group := default "" $parts._1 }}
{{- if hasKey $builtin $group }}
{{- $g := get $builtin $group }}
{{- $namespaced := has $plural (default (list) $g.namespaced) }}
{{- $cluster := has $plural (default (list) $g.cluster) }}
{{- if and $namespaced (eq $key "clusterResources") }}
{{- $errs = append $errs (printf "watch.clusterResources: %s is namespaced; list it under watch.resources" $name) }}
{{- else if and $cluster (eq $key "resources") }}
{{- $errs = append $errs (printf "watch.resources: %s is cluster-scoped; list it under watch.clusterResources" $name) }}
{{- else if and (not $namespaced) (not $cluster) (eq $group "") }}
{{- $errs = append $errs (printf "watch.%s: %q is not a core resource that can be watched; name resources <plural>.<group>, like deployments.apps (short names, kinds and versions are not accepted)" $key $name) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{- /* watch.all: what the bridge selects and what RBAC grants must agree. */}}
{{- if $w.all }}
{{- $dns := "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*" }}
{{- range $e := $w.exclude }}
{{- if eq $e "*" }}
{{- $errs = append $errs "watch.exclude: \"*\" would exclude everything watch.all selects; name the resources to watch in watch.resources instead, with watch.all=false" }}
{{- else if not (or (regexMatch (printf "^\\*\\.%s$" $dns) $e) (regexMatch (printf "^%s$" $dns) $e)) }}
{{- $errs = append $errs (printf "watch.exclude: %q is neither a resource (<plural> or <plural>.<group>) nor a group wildcard (*.<group>)" $e) }}
{{- else if and (not (contains "." $e)) (not (has $e (concat (default (list) (get $builtin "").namespaced) (default (list) (get $builtin "").cluster)))) }}
{{- $errs = append $errs (printf "watch.exclude: %q is not a core resource; name resources <plural>.<group>, like replicasets.apps" $e) }}
{{- end }}
{{- end }}
{{- range $g := $w.extraGroups }}
{{- if hasKey $builtin $g }}
{{- $errs = append $errs (printf "watch.extraGroups: %s is a built-in group, which watch.all grants already; list only CRD and aggregated API groups" $g) }}
{{- else if include "bridge.excluded" (dict "root" $ "group" $g "resource" "*") }}
{{- $errs = append $errs (printf "watch.extraGroups: %s is excluded by watch.exclude; the bridge would not watch it" $g) }}
{{- end }}
{{- end }}
{{- else if $w.extraGroups }}
{{- $errs = append $errs "watch.extraGroups is used only with watch.all=true" }}
{{- end }}

{{- if gt (int $v.replicaCount) 1 }}
{{- if eq $v.checkpoint.type "file" }}
{{- $errs = append $errs (printf "checkpoint.type=file cannot be used with replicaCount=%d: only one pod can use the checkpoint file (a bbolt file on a ReadWriteOnce volume). Use checkpoint.type=nats-kv or kafka, or replicaCount=1" (int $v.replicaCount)) }}
{{- end }}
{{- if eq (toString $v.leaderElection.enabled) "false" }}
{{- $errs = append $errs (printf "leaderElection.enabled=false cannot be used with replicaCount=%d: every replica would publish every change and move the same checkpoint. Leave leaderElection.enabled unset (on with more than one replica) or set replicaCount=1" (int $v.replicaCount)) }}
{{- end }}
{{- end }}

{{- /* A rolling update runs the new pod beside the old one. */}}
{{- if and $v.strategy (eq (toString $v.strategy.type) "RollingUpdate") (or (not (include "bridge.leaderElection" .)) (eq $v.checkpoint.type "file")) }}
{{- $errs = append $errs "strategy.type=RollingUpdate needs leader election and a checkpoint other than file: otherwise the new pod publishes beside the old one (or waits on its checkpoint file) during the rollout. Leave strategy unset ({}), and the chart picks Recreate" }}
{{- end }}

{{- if and (include "bridge.usesNATS" .) (not $v.nats.urls) }}
{{- $errs = append $errs (printf "nats.urls is required with sink=%s and checkpoint.type=%s" $v.sink $v.checkpoint.type) }}
{{- end }}
{{- if and (include "bridge.usesKafka" .) (not $v.kafka.brokers) }}
{{- $errs = append $errs (printf "kafka.brokers is required with sink=%s and checkpoint.type=%s" $v.sink $v.checkpoint.type) }}
{{- end }}

{{- $errs = concat $errs (include "bridge.credentialProblems" (include "bridge.credentials" . | fromJson) | fromJsonArray) }}

{{- if and $v.oldObject (or (trim (toString $v.filter)) (trim (toString $v.fields)) (trim (toString $v.dropFields))) }}
{{- $errs = append $errs "oldObject=true cannot be combined with filter, fields or dropFields yet (the bridge refuses BRIDGE_OLD_OBJECT with BRIDGE_FILTER, BRIDGE_FIELDS or BRIDGE_DROP_FIELDS); unset one or the other" }}
{{- end }}

{{- if and $v.metrics.serviceMonitor.enabled (not $v.metrics.service.enabled) }}
{{- $errs = append $errs "metrics.serviceMonitor.enabled needs metrics.service.enabled" }}
{{- end }}

{{- if and (not $v.serviceAccount.create) (not $v.serviceAccount.name) }}
{{- $errs = append $errs "serviceAccount.name is required when serviceAccount.create is false" }}
{{- end }}

{{- $budget := include "bridge.shutdownSeconds" . | int }}
{{- if eq $budget 0 }}
{{- $errs = append $errs (printf "pipeline.shutdownTimeout=%v must be positive: it is the bridge's whole budget from SIGTERM to exit, and the bridge refuses a zero one" $v.pipeline.shutdownTimeout) }}
{{- end }}
{{- if and (not (kindIs "invalid" $v.terminationGracePeriodSeconds)) (le (int $v.terminationGracePeriodSeconds) $budget) }}
{{- $errs = append $errs (printf "terminationGracePeriodSeconds=%v must exceed pipeline.shutdownTimeout (%ds), the bridge's whole budget from SIGTERM to exit, or the kubelet kills it during its final checkpoint flush; leave it unset to have the chart add a margin" $v.terminationGracePeriodSeconds $budget) }}
{{- end }}

{{- $errs = concat $errs (include "bridge.replicaProblems" . | fromJsonArray) }}

{{- if $errs }}
{{- fail (printf "invalid values:\n- %s" (join "\n- " $errs)) }}
{{- end }}
{{- end }}

{{/*
bridge.credentialProblems (credentials, from bridge.credentials or
bridge.replicaCredentials): what is wrong with the bus credentials, as a
JSON list of messages naming the values (replica.* for the replica's).
Credentials come from existing Secrets only.
*/}}
{{- define "bridge.credentialProblems" -}}
{{- $at := ternary "replica." "" (eq .prefix "REPLICA") }}
{{- $errs := list }}
{{- $secretKeys := list }}
{{- $tlsKeys := list }}
{{- with .nats }}
{{- $secretKeys = concat $secretKeys (list (list "nats.passwordKey" .passwordKey) (list "nats.tokenKey" .tokenKey) (list "nats.credsKey" .credsKey) (list "nats.nkeySeedKey" .nkeySeedKey)) }}
{{- $tlsKeys = append $tlsKeys (list "nats.tls" .tls) }}
{{- if and .passwordKey (not .user) }}
{{- $errs = append $errs (printf "%snats.passwordKey needs %snats.user" $at $at) }}
{{- end }}
{{- end }}
{{- with .kafka }}
{{- $s := .sasl }}
{{- $secretKeys = concat $secretKeys (list (list "kafka.sasl.usernameKey" $s.usernameKey) (list "kafka.sasl.passwordKey" $s.passwordKey)) }}
{{- $tlsKeys = append $tlsKeys (list "kafka.tls" .tls) }}
{{- if and $s.username $s.usernameKey }}
{{- $errs = append $errs (printf "%skafka.sasl: set username or usernameKey, not both" $at) }}
{{- end }}
{{- if $s.mechanism }}
{{- if not (or $s.username $s.usernameKey) }}
{{- $errs = append $errs (printf "%skafka.sasl.mechanism=%s needs %skafka.sasl.username or %skafka.sasl.usernameKey" $at $s.mechanism $at $at) }}
{{- end }}
{{- if not $s.passwordKey }}
{{- $errs = append $errs (printf "%skafka.sasl.mechanism=%s needs %skafka.sasl.passwordKey, the key of %sexistingSecret that holds the password" $at $s.mechanism $at $at) }}
{{- end }}
{{- else if or $s.username $s.usernameKey $s.passwordKey }}
{{- $errs = append $errs (printf "%skafka.sasl: a username or password is set but %skafka.sasl.mechanism is not" $at $at) }}
{{- end }}
{{- end }}
{{- range $k := $secretKeys }}
{{- if and (index $k 1) (not $.secret) }}
{{- $errs = append $errs (printf "%s%s needs %sexistingSecret, the Secret that holds key %q" $at (index $k 0) $at (index $k 1)) }}
{{- end }}
{{- end }}
{{- range $t := $tlsKeys }}
{{- $name := printf "%s%s" $at (index $t 0) }}
{{- $tls := index $t 1 }}
{{- if and (or $tls.caKey $tls.certKey $tls.keyKey) (not (or $tls.existingSecret $.secret)) }}
{{- $errs = append $errs (printf "%s: the TLS keys need %s.existingSecret or %sexistingSecret" $name $name $at) }}
{{- end }}
{{- if ne (not $tls.certKey) (not $tls.keyKey) }}
{{- $errs = append $errs (printf "%s: certKey and keyKey go together" $name) }}
{{- end }}
{{- end }}
{{- toJson $errs }}
{{- end }}
