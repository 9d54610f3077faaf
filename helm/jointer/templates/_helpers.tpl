{{/*
Expand the name of the chart.
*/}}
{{- define "jointer.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name of the release's resources; truncated to 63 characters (DNS label limit).
*/}}
{{- define "jointer.fullname" -}}
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
Chart name and version, for the helm.sh/chart label.
*/}}
{{- define "jointer.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of every resource.
*/}}
{{- define "jointer.labels" -}}
helm.sh/chart: {{ include "jointer.chart" . }}
{{ include "jointer.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Selector labels (immutable in a Deployment: never add to them).
*/}}
{{- define "jointer.selectorLabels" -}}
app.kubernetes.io/name: {{ include "jointer.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Annotations of every resource (possibly empty).
*/}}
{{- define "jointer.annotations" -}}
{{- with .Values.additionalAnnotations }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/*
The ServiceAccount's name.
*/}}
{{- define "jointer.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "jointer.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The controller image: repository@digest when a digest is set, else repository:tag (tag
defaults to the chart's appVersion).
*/}}
{{- define "jointer.image" -}}
{{- $image := .Values.image }}
{{- $karpenter := (.Values.controller.image | default dict) }}
{{- if and $karpenter.repository (ne $karpenter.repository "public.ecr.aws/karpenter/controller") }}
{{- $image = $karpenter }}
{{- end }}
{{- if $image.digest }}
{{- printf "%s@%s" $image.repository $image.digest }}
{{- else }}
{{- printf "%s:%s" (required "image.repository is required" $image.repository) (default .Chart.AppVersion $image.tag) }}
{{- end }}
{{- end }}

{{/*
FEATURE_GATES from settings.featureGates: `nodeRepair: true` becomes `NodeRepair=true`,
in key order.
*/}}
{{- define "jointer.featureGates" -}}
{{- $gates := list }}
{{- range $name, $enabled := .Values.settings.featureGates }}
{{- $gates = append $gates (printf "%s%s=%t" (upper (substr 0 1 $name)) (substr 1 (len $name) $name) $enabled) }}
{{- end }}
{{- join "," $gates }}
{{- end }}
