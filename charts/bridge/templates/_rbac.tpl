{{/*
bridge.watchRules (list of <plural>[.<group>] names): one rule per API group
with get, list and watch on exactly the named resources of that group. One
rule per group, because a rule grants every listed resource in every listed
group.
*/}}
{{- define "bridge.watchRules" -}}
{{- $groups := dict }}
{{- range $name := . }}
{{- $parts := splitn "." 2 $name }}
{{- $group := default "" $parts._1 }}
{{- $_ := set $groups $group (append (default (list) (get $groups $group)) $parts._0) }}
{{- end }}
{{- range $group := keys $groups | sortAlpha }}
- apiGroups: [{{ $group | quote }}]
  resources: {{ get $groups $group | uniq | sortAlpha | toJson }}
  verbs: ["get", "list", "watch"]
{{- end }}
{{- end }}

{{/* bridge.subject: the bridge's ServiceAccount, as a binding subject. */}}
{{- define "bridge.subject" -}}
- kind: ServiceAccount
  name: {{ include "bridge.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
{{- end }}

{{/*
bridge.excluded (dict "root" . "group" G "resource" R): "true" when
watch.exclude excludes R of group G ("" is the core group): by name, or
by a group wildcard *.<g> that matches G or a group ending in .<g>.
*/}}
{{- define "bridge.excluded" -}}
{{- $group := .group }}
{{- $name := .resource }}
{{- if $group }}
{{- $name = printf "%s.%s" .resource $group }}
{{- end }}
{{- range $e := .root.Values.watch.exclude }}
{{- if eq $e $name }}true{{ end }}
{{- if and $group (hasPrefix "*." $e) }}
{{- $g := trimPrefix "*." $e }}
{{- if or (eq $group $g) (hasSuffix (printf ".%s" $g) $group) }}true{{ end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
bridge.allRules (dict "root" . "scope" S): the rules that let the bridge
read what watch.all selects, as far as RBAC can say it. RBAC grants and
never subtracts, so what must stay out is left out by construction:
- the core group: its watchable resources one by one, never secrets, and
  not the excluded ones;
- each built-in group of files/builtin-resources.yaml: "*", or, when
  watch.exclude names one of its resources, its other resources one by
  one; not at all when a group wildcard of watch.exclude matches it;
- each of watch.extraGroups: "*", unless a group wildcard matches it
  (which the chart refuses).
Beside them, with S "all" or "cluster", the definitions of CRDs and
aggregated APIs, which the bridge watches to follow the cluster.
S is "all" (a ClusterRole for every namespace), "namespaced" (a Role: the
namespaced resources) or "cluster" (a ClusterRole beside those Roles: the
cluster-scoped resources of the built-in groups, one by one, since "*"
in a ClusterRole would grant a group's namespaced resources everywhere).
*/}}
{{- define "bridge.allRules" -}}
{{- $root := .root }}
{{- $scope := .scope }}
{{- $builtin := $root.Files.Get "files/builtin-resources.yaml" | fromYaml }}
{{- $rules := list }}
{{- range $group := keys $builtin | sortAlpha }}
{{- $g := get $builtin $group }}
{{- $listed := list }}
{{- if ne $scope "cluster" }}
{{- $listed = concat $listed (default (list) $g.namespaced) }}
{{- end }}
{{- if ne $scope "namespaced" }}
{{- $listed = concat $listed (default (list) $g.cluster) }}
{{- end }}
{{- $kept := list }}
{{- range $r := $listed }}
{{- if not (or (and (eq $group "") (eq $r "secrets")) (include "bridge.excluded" (dict "root" $root "group" $group "resource" $r))) }}
{{- $kept = append $kept $r }}
{{- end }}
{{- end }}
{{- if $kept }}
{{- if or (eq $group "") (eq $scope "cluster") (ne (len $kept) (len $listed)) }}
{{- $rules = append $rules (dict "group" $group "resources" (sortAlpha $kept)) }}
{{- else }}
{{- $rules = append $rules (dict "group" $group "resources" (list "*")) }}
{{- end }}
{{- end }}
{{- end }}
{{- if ne $scope "cluster" }}
{{- range $group := $root.Values.watch.extraGroups | sortAlpha }}
{{- if not (include "bridge.excluded" (dict "root" $root "group" $group "resource" "*")) }}
{{- $rules = append $rules (dict "group" $group "resources" (list "*")) }}
{{- end }}
{{- end }}
{{- end }}
{{- if ne $scope "namespaced" }}
{{- /*
The bridge follows CRDs and aggregated APIs that come and go by watching
their definitions, also when watch.exclude leaves them out of what it
publishes.
*/}}
{{- $rules = append $rules (dict "group" "apiextensions.k8s.io" "resources" (list "customresourcedefinitions")) }}
{{- $rules = append $rules (dict "group" "apiregistration.k8s.io" "resources" (list "apiservices")) }}
{{- end }}
{{- range $r := $rules }}
- apiGroups: [{{ $r.group | quote }}]
  resources: {{ $r.resources | toJson }}
  verbs: ["get", "list", "watch"]
{{- end }}
{{- end }}
