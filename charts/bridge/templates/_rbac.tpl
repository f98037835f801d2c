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
