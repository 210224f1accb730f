{{/*
Helpers of the KAOS chart, named kaos.<component>.<thing>.
*/}}

{{/* The chart name, as app.kubernetes.io/name. */}}
{{- define "kaos.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Prefix of every object name: the release name, plus the chart name unless it holds it. */}}
{{- define "kaos.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "kaos.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object: the standard app.kubernetes.io set plus commonLabels. */}}
{{- define "kaos.labels" -}}
helm.sh/chart: {{ include "kaos.chart" . }}
app.kubernetes.io/name: {{ include "kaos.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kaos
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* "<registry>/<repository>:<tag>" of a KAOS image; the tag defaults to appVersion.
Call with (list <image values> <root context>). */}}
{{- define "kaos.image" -}}
{{- $image := index . 0 }}
{{- $root := index . 1 }}
{{- $repository := $image.repository }}
{{- with $root.Values.images.registry }}
{{- $repository = printf "%s/%s" (trimSuffix "/" .) $repository }}
{{- end }}
{{- printf "%s:%s" $repository (default $root.Chart.AppVersion $image.tag) }}
{{- end }}

{{/* "<repository>:<tag>" of a third-party image (no registry prefix, explicit tag). */}}
{{- define "kaos.externalImage" -}}
{{- printf "%s:%s" .repository .tag }}
{{- end }}

{{/* ------------------------------------------------------------------ operator */}}

{{- define "kaos.operator.fullname" -}}
{{- printf "%s-operator" (include "kaos.fullname" .) }}
{{- end }}

{{- define "kaos.operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kaos.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "kaos.operator.labels" -}}
{{ include "kaos.labels" . }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "kaos.operator.serviceAccountName" -}}
{{- if .Values.operator.serviceAccount.create }}
{{- default (include "kaos.operator.fullname" .) .Values.operator.serviceAccount.name }}
{{- else }}
{{- .Values.operator.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "kaos.operator.image" -}}
{{- include "kaos.image" (list .Values.images.operator .) }}
{{- end }}

{{- define "kaos.operator.leaderElectionRoleName" -}}
{{- printf "%s-leader-election" (include "kaos.operator.fullname" .) }}
{{- end }}

{{/* -------------------------------------------------------------- devPgvector */}}

{{- define "kaos.devPgvector.fullname" -}}
{{- printf "%s-pgvector" (include "kaos.fullname" .) }}
{{- end }}

{{- define "kaos.devPgvector.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kaos.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: dev-pgvector
{{- end }}

{{- define "kaos.devPgvector.labels" -}}
{{ include "kaos.labels" . }}
app.kubernetes.io/component: dev-pgvector
{{- end }}

{{- define "kaos.devPgvector.connectionSecretName" -}}
{{- default (printf "%s-connection" (include "kaos.devPgvector.fullname" .)) .Values.devPgvector.connectionSecret.name }}
{{- end }}

{{/* The Service's DNS name, usable from every namespace. */}}
{{- define "kaos.devPgvector.host" -}}
{{- printf "%s.%s.svc" (include "kaos.devPgvector.fullname" .) .Release.Namespace }}
{{- end }}

{{/* The password: the given one, else the one already in the cluster (so upgrades keep
it), else a fresh random one. Rendered once, in devpgvector-secret.yaml. */}}
{{- define "kaos.devPgvector.password" -}}
{{- if .Values.devPgvector.password }}
{{- .Values.devPgvector.password }}
{{- else }}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "kaos.devPgvector.fullname" .) }}
{{- if and $existing $existing.data (hasKey $existing.data "password") }}
{{- index $existing.data "password" | b64dec }}
{{- else }}
{{- randAlphaNum 32 }}
{{- end }}
{{- end }}
{{- end }}

{{/* --------------------------------------------------------------- memory keys */}}

{{- define "kaos.memoryKeys.labels" -}}
{{ include "kaos.labels" . }}
app.kubernetes.io/component: memory-keys
{{- end }}

{{- define "kaos.memoryKeys.kekName" -}}
{{- default (printf "%s-memory-kek" (include "kaos.fullname" .)) .Values.memoryKeys.kek.name }}
{{- end }}

{{- define "kaos.memoryKeys.receiptKeyName" -}}
{{- default (printf "%s-memory-receipt-key" (include "kaos.fullname" .)) .Values.memoryKeys.receiptKey.name }}
{{- end }}

{{/* ---------------------------------------------------------------- validation */}}

{{/* Values that the schema cannot relate to each other: fail with one clear line. */}}
{{- define "kaos.validate" -}}
{{- $op := .Values.operator }}
{{- if and (gt (int $op.replicas) 1) (not $op.leaderElection.enabled) }}
{{- fail "operator.replicas > 1 needs operator.leaderElection.enabled=true: replicas without leader election would reconcile the same objects concurrently" }}
{{- end }}
{{- $mk := .Values.memoryKeys }}
{{- if and $mk.extraNamespaces (not (or $mk.kek.create $mk.receiptKey.create)) }}
{{- fail "memoryKeys.extraNamespaces needs memoryKeys.kek.create=true or memoryKeys.receiptKey.create=true: there is no Secret to create there" }}
{{- end }}
{{- if and .Values.posture.userIssuer (not .Values.posture.securityEnabled) }}
{{- fail "posture.userIssuer needs posture.securityEnabled=true: user identity is part of the secured posture" }}
{{- end }}
{{- $pdb := $op.podDisruptionBudget }}
{{- if $pdb.enabled }}
{{- if and (not (kindIs "invalid" $pdb.minAvailable)) (not (kindIs "invalid" $pdb.maxUnavailable)) }}
{{- fail "operator.podDisruptionBudget: set only one of minAvailable and maxUnavailable (set the other to null)" }}
{{- end }}
{{- if and (kindIs "invalid" $pdb.minAvailable) (kindIs "invalid" $pdb.maxUnavailable) }}
{{- fail "operator.podDisruptionBudget.enabled needs minAvailable or maxUnavailable" }}
{{- end }}
{{- end }}
{{- if and $op.metrics.serviceMonitor.enabled (not $op.metrics.service.enabled) }}
{{- fail "operator.metrics.serviceMonitor.enabled needs operator.metrics.service.enabled=true: the ServiceMonitor scrapes that Service" }}
{{- end }}
{{- if and (not $op.serviceAccount.create) (not $op.serviceAccount.name) }}
{{- fail "operator.serviceAccount.create=false needs operator.serviceAccount.name (an existing ServiceAccount)" }}
{{- end }}
{{- if eq $op.watchNamespace "kube-system" }}
{{- fail "operator.watchNamespace must not be kube-system: the operator has no business there" }}
{{- end }}
{{- if and .Values.gatewayAPI.enabled (not .Values.gatewayAPI.gateway.name) }}
{{- fail "gatewayAPI.enabled needs gatewayAPI.gateway.name: the Gateway the routes attach to" }}
{{- end }}
{{- if and (not .Values.devPgvector.enabled) .Values.devPgvector.connectionSecret.extraNamespaces }}
{{- fail "devPgvector.connectionSecret.extraNamespaces needs devPgvector.enabled=true" }}
{{- end }}
{{- end }}
