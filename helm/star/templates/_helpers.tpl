{{/*
Names, labels and image references shared by every template.
*/}}

{{/* The chart's name, or nameOverride. */}}
{{- define "star.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The release's base name (63 characters at most, DNS-1123): fullnameOverride, else the
release name when it already contains the chart's name, else RELEASE-CHART.
*/}}
{{- define "star.fullname" -}}
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

{{/* Component names: RELEASE-operator, RELEASE-agent (55 + 8 characters at most). */}}
{{- define "star.operatorName" -}}
{{- printf "%s-operator" (include "star.fullname" . | trunc 54 | trimSuffix "-") }}
{{- end }}

{{- define "star.agentName" -}}
{{- printf "%s-agent" (include "star.fullname" . | trunc 57 | trimSuffix "-") }}
{{- end }}

{{- define "star.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Kubernetes recommended labels (app.kubernetes.io/*) on every object. */}}
{{- define "star.labels" -}}
helm.sh/chart: {{ include "star.chart" . }}
app.kubernetes.io/name: {{ include "star.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: star
{{- end }}

{{/* Selector labels of one component: call with (dict "ctx" $ "component" "operator"). */}}
{{- define "star.selectorLabels" -}}
app.kubernetes.io/name: {{ include "star.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* Every label of one component's objects: call as star.selectorLabels. */}}
{{- define "star.componentLabels" -}}
{{ include "star.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/*
An image reference REGISTRY/NAME:TAG (REGISTRY/ left out when image.registry is empty);
TAG is image.tag, else the chart's appVersion. Call with (dict "ctx" $ "name" NAME).
*/}}
{{- define "star.image" -}}
{{- $registry := .ctx.Values.image.registry | trimSuffix "/" }}
{{- $tag := .ctx.Values.image.tag | default .ctx.Chart.AppVersion }}
{{- if $registry }}
{{- printf "%s/%s:%s" $registry .name $tag }}
{{- else }}
{{- printf "%s:%s" .name $tag }}
{{- end }}
{{- end }}

{{/* Leader election is on whenever more than one operator replica runs. */}}
{{- define "star.leaderElect" -}}
{{- if gt (int .Values.operator.replicas) 1 }}true{{ end }}
{{- end }}

{{/* Where the operator keeps its Lease: the watched namespace, else the release's. */}}
{{- define "star.leaseNamespace" -}}
{{- .Values.operator.watchNamespace | default .Release.Namespace }}
{{- end }}

{{/* The URL pods reach the report endpoint at (STAR_CONTROLLER_URL). */}}
{{- define "star.reportURL" -}}
{{- if .Values.operator.reportURL }}
{{- .Values.operator.reportURL }}
{{- else }}
{{- printf "%s://%s.%s.svc:%d" (ternary "https" "http" .Values.operator.reportTLS.enabled) (include "star.operatorName" .) .Release.Namespace (int .Values.operator.reportPort) }}
{{- end }}
{{- end }}
