{{/*
Labels of every object: the plain manifests' app.kubernetes.io/name, then Helm's standard labels
(test/integration/helm.test.ts allows exactly these four beyond deploy/kubernetes).
*/}}
{{/* The chart's name (nameOverride): app.kubernetes.io/name and the pods' selector. */}}
{{- define "skewgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end }}

{{/*
The stem of every object's name (fullnameOverride, else the release name when it holds the chart's
name, else release-name): "skewgate" for a release named skewgate, so that the names are those of
deploy/kubernetes; another release gets names of its own, cluster-scoped ones included.
*/}}
{{- define "skewgate.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "skewgate.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/* The gateway's namespaced objects: Deployment, Service, ConfigMap, ServiceAccount, PDB. */}}
{{- define "skewgate.gatewayName" -}}
{{- printf "%s-gateway" (include "skewgate.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end }}

{{- define "skewgate.labels" -}}
app.kubernetes.io/name: {{ include "skewgate.name" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The gateway's pods: the Deployment's selector, the Service's, the PDB's, the anti-affinity's. */}}
{{- define "skewgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "skewgate.name" . }}
app.kubernetes.io/component: gateway
{{- end }}

{{- define "skewgate.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The pod's mounts that the config names (the cluster CA, the ServiceAccount token). */}}
{{- define "skewgate.clusterCaFile" -}}/etc/skewgate/cluster-ca/ca.crt{{- end }}
{{- define "skewgate.tokenFile" -}}/var/run/secrets/skewgate/token{{- end }}
{{- define "skewgate.configFile" -}}/etc/skewgate/config/skewgate.yaml{{- end }}

{{/*
skewgate.yaml: .Values.config, with `apiservers` from .Values.apiservers (each with the cluster CA
and the pod's token) and `telemetry` from .Values.telemetry.
*/}}
{{- define "skewgate.config" -}}
{{- $cfg := deepCopy .Values.config -}}
{{- if hasKey $cfg "apiservers" -}}
{{- fail "config.apiservers: set the seed in `apiservers` (name and url): the chart adds each one's CA file and token" -}}
{{- end -}}
{{- if hasKey $cfg "telemetry" -}}
{{- fail "config.telemetry: set `telemetry` (tracing endpoint, sampling, Prometheus port) instead" -}}
{{- end -}}
{{- $seed := required "apiservers is required: the seed, the control-plane apiservers a pod starts from, each by its node's address (name: <node hostname>, url: https://<node IP>:6443); see examples/kubeadm.yaml" (.Values.apiservers | default nil) -}}
{{- $apiservers := list -}}
{{- range (default (list) $seed) -}}
{{- $a := dict "caFile" (include "skewgate.clusterCaFile" $) "credentials" (dict "tokenFile" (include "skewgate.tokenFile" $)) -}}
{{- $apiservers = append $apiservers (merge (deepCopy .) $a) -}}
{{- end -}}
{{- $t := .Values.telemetry -}}
{{- $telemetry := dict "serviceName" $t.serviceName -}}
{{- if $t.tracing.endpoint -}}
{{- $_ := set $telemetry "tracing" (dict "enabled" true "endpoint" $t.tracing.endpoint "protocol" $t.tracing.protocol "samplerRatio" $t.tracing.samplerRatio "envoy" $t.tracing.envoy) -}}
{{- end -}}
{{- if $t.metrics.prometheus.enabled -}}
{{- $_ := set $telemetry "metrics" (dict "prometheus" (dict "listen" (printf "0.0.0.0:%d" (int $t.metrics.prometheus.port)))) -}}
{{- end -}}
{{- $_ := set $cfg "apiservers" $apiservers -}}
{{- $_ := set $cfg "telemetry" $telemetry -}}
{{- toYaml $cfg -}}
{{- end }}

{{/* The restricted profile's container securityContext, for all three containers. */}}
{{- define "skewgate.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end }}
