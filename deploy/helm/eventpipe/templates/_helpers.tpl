{{/* The chart's name, the release's full name (63 characters at most). */}}
{{- define "eventpipe.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "eventpipe.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "eventpipe.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "eventpipe.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "eventpipe.selectorLabels" -}}
app.kubernetes.io/name: {{ include "eventpipe.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "eventpipe.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "eventpipe.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "eventpipe.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* The pod's termination grace: the process's grace period plus the preStop sleep and a margin. */}}
{{- define "eventpipe.terminationGracePeriodSeconds" -}}
{{- $d := .Values.drain -}}
{{- add $d.gracePeriodSeconds $d.preStopSleepSeconds $d.terminationMarginSeconds -}}
{{- end -}}

{{/*
The environment of a role's container. Argument: dict "root" $ "role" <serve|relay|consume|migrate>.
*/}}
{{- define "eventpipe.env" -}}
{{- $root := .root -}}
{{- $role := .role -}}
{{- $v := $root.Values -}}
- name: EVENTPIPE_DYNAMODB_ENDPOINT
  value: {{ $v.config.dynamodbEndpoint | quote }}
{{- with $v.config.awsRegion }}
- name: AWS_REGION
  value: {{ . | quote }}
{{- end }}
{{- with $v.config.eventsTable }}
- name: EVENTPIPE_EVENTS_TABLE
  value: {{ . | quote }}
{{- end }}
{{- with $v.config.leasesTable }}
- name: EVENTPIPE_LEASES_TABLE
  value: {{ . | quote }}
{{- end }}
{{- with $v.config.analyticsTable }}
- name: EVENTPIPE_ANALYTICS_TABLE
  value: {{ . | quote }}
{{- end }}
{{- with $v.config.keysTable }}
- name: EVENTPIPE_KEYS_TABLE
  value: {{ . | quote }}
{{- end }}
- name: EVENTPIPE_KMS_ENDPOINT
  value: {{ $v.config.kmsEndpoint | quote }}
{{- with $v.config.kmsKeyId }}
- name: EVENTPIPE_KMS_KEY_ID
  value: {{ . | quote }}
{{- end }}
{{- with $v.kafka.brokers }}
- name: EVENTPIPE_KAFKA_BROKERS
  value: {{ . | quote }}
{{- end }}
{{- with $v.kafka.topicPrefix }}
- name: EVENTPIPE_TOPIC_PREFIX
  value: {{ . | quote }}
{{- end }}
{{- if $v.kafka.tls }}
- name: EVENTPIPE_KAFKA_TLS
  value: "true"
{{- end }}
{{- with $v.kafka.saslMechanism }}
- name: EVENTPIPE_KAFKA_SASL_MECHANISM
  value: {{ . | quote }}
{{- end }}
{{- with $v.kafka.saslUsername }}
- name: EVENTPIPE_KAFKA_SASL_USERNAME
  value: {{ . | quote }}
{{- end }}
{{- with $v.kafka.saslAwsRegion }}
- name: EVENTPIPE_KAFKA_SASL_AWS_REGION
  value: {{ . | quote }}
{{- end }}
{{- if ne $role "relay" }}
{{- with $v.config.postgresUrl }}
- name: EVENTPIPE_POSTGRES_URL
  value: {{ . | quote }}
{{- end }}
{{- with $v.config.elasticsearchUrl }}
- name: ELASTICSEARCH_URL
  value: {{ . | quote }}
{{- end }}
{{- with $v.config.elasticsearchUsername }}
- name: ELASTICSEARCH_USERNAME
  value: {{ . | quote }}
{{- end }}
{{- end }}
- name: EVENTPIPE_LOG_LEVEL
  value: {{ $v.config.logLevel | quote }}
{{- with $v.config.otlpEndpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ . | quote }}
- name: OTEL_SERVICE_NAME
  value: {{ printf "eventpipe-%s" $role | quote }}
{{- end }}
{{- if ne $role "migrate" }}
- name: EVENTPIPE_GRACE_PERIOD
  value: {{ printf "%ds" (int $v.drain.gracePeriodSeconds) | quote }}
- name: EVENTPIPE_DRAIN_DELAY
  value: {{ printf "%ds" (int $v.drain.drainDelaySeconds) | quote }}
{{- end }}
{{- if eq $role "serve" }}
- name: EVENTPIPE_HTTP_ADDR
  value: {{ printf ":%d" (int $v.serve.httpPort) | quote }}
{{- if $v.serve.operatorPort }}
- name: EVENTPIPE_OPERATOR_ADDR
  value: {{ printf ":%d" (int $v.serve.operatorPort) | quote }}
{{- end }}
{{- if $v.auth.enabled }}
{{- with $v.auth.issuer }}
- name: EVENTPIPE_AUTH_ISSUER
  value: {{ . | quote }}
{{- end }}
{{- with $v.auth.audience }}
- name: EVENTPIPE_AUTH_AUDIENCE
  value: {{ . | quote }}
{{- end }}
{{- with $v.auth.jwksUrl }}
- name: EVENTPIPE_AUTH_JWKS_URL
  value: {{ . | quote }}
{{- end }}
{{- else }}
- name: EVENTPIPE_AUTH
  value: "off"
{{- end }}
{{- if $v.auth.requireSignedCommands }}
- name: EVENTPIPE_REQUIRE_SIGNED_COMMANDS
  value: "true"
{{- end }}
{{- end }}
{{- range $name, $s := $v.secretFiles }}
{{- if and $s.existingSecret (has $role $s.roles) }}
- name: {{ $s.env }}
  value: {{ printf "/var/run/secrets/eventpipe/%s/%s" (kebabcase $name) $s.key | quote }}
{{- end }}
{{- end }}
{{- with $v.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The secret volumes and mounts of a role: dict "root" $ "role" <role>. */}}
{{- define "eventpipe.secretVolumes" -}}
{{- $role := .role -}}
{{- range $name, $s := .root.Values.secretFiles }}
{{- if and $s.existingSecret (has $role $s.roles) }}
- name: {{ printf "secret-%s" (kebabcase $name) }}
  secret:
    secretName: {{ $s.existingSecret }}
    defaultMode: 0440
    items:
      - key: {{ $s.key }}
        path: {{ $s.key }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "eventpipe.secretMounts" -}}
{{- $role := .role -}}
{{- range $name, $s := .root.Values.secretFiles }}
{{- if and $s.existingSecret (has $role $s.roles) }}
- name: {{ printf "secret-%s" (kebabcase $name) }}
  mountPath: {{ printf "/var/run/secrets/eventpipe/%s" (kebabcase $name) }}
  readOnly: true
{{- end }}
{{- end }}
{{- end -}}

{{/* The three probes on a port named by .port (the port's name). */}}
{{- define "eventpipe.probes" -}}
{{- $p := .root.Values.probes -}}
startupProbe:
  httpGet:
    path: /startupz
    port: {{ .port }}
  periodSeconds: {{ $p.startup.periodSeconds }}
  timeoutSeconds: {{ $p.startup.timeoutSeconds }}
  failureThreshold: {{ $p.startup.failureThreshold }}
readinessProbe:
  httpGet:
    path: /readyz
    port: {{ .port }}
  periodSeconds: {{ $p.readiness.periodSeconds }}
  timeoutSeconds: {{ $p.readiness.timeoutSeconds }}
  failureThreshold: {{ $p.readiness.failureThreshold }}
livenessProbe:
  httpGet:
    path: /livez
    port: {{ .port }}
  periodSeconds: {{ $p.liveness.periodSeconds }}
  timeoutSeconds: {{ $p.liveness.timeoutSeconds }}
  failureThreshold: {{ $p.liveness.failureThreshold }}
{{- end -}}

{{/*
A long-running role's pod template. Argument: dict
  "root" $  "role" serve|relay|consume  "component" <label>
  "args" [command args]  "ports" [{name, containerPort}]  "probePort" <port name>
  "resources" {}  "affinity" {}
*/}}
{{- define "eventpipe.podTemplate" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
metadata:
  labels:
    {{- include "eventpipe.selectorLabels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
    {{- with $v.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with $v.podAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  serviceAccountName: {{ include "eventpipe.serviceAccountName" $root }}
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: {{ include "eventpipe.terminationGracePeriodSeconds" $root }}
  securityContext:
    {{- toYaml $v.podSecurityContext | nindent 4 }}
  {{- with $v.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  {{- with $v.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  containers:
    - name: {{ .role }}
      image: {{ include "eventpipe.image" $root }}
      imagePullPolicy: {{ $v.image.pullPolicy }}
      args:
        {{- toYaml .args | nindent 8 }}
      ports:
        {{- range .ports }}
        - name: {{ .name }}
          containerPort: {{ .containerPort }}
          protocol: TCP
        {{- end }}
      env:
        {{- include "eventpipe.env" (dict "root" $root "role" .role) | nindent 8 }}
      {{- include "eventpipe.probes" (dict "root" $root "port" .probePort) | nindent 6 }}
      {{- if $v.drain.preStopSleepSeconds }}
      lifecycle:
        preStop:
          sleep:
            seconds: {{ $v.drain.preStopSleepSeconds }}
      {{- end }}
      resources:
        {{- toYaml .resources | nindent 8 }}
      securityContext:
        {{- toYaml $v.securityContext | nindent 8 }}
      {{- $mounts := include "eventpipe.secretMounts" (dict "root" $root "role" .role) }}
      {{- if $mounts }}
      volumeMounts:
        {{- $mounts | nindent 8 }}
      {{- end }}
  {{- $volumes := include "eventpipe.secretVolumes" (dict "root" $root "role" .role) }}
  {{- if $volumes }}
  volumes:
    {{- $volumes | nindent 4 }}
  {{- end }}
{{- end -}}
