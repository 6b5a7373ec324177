{{/* Names: everything is "<release>-<part>"; the release name is cut to 40 characters so that
"<release>-worker-<n>" stays a DNS label and the StatefulSet's revision label fits in 63. */}}
{{- define "horovod.base" -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- define "horovod.workers" -}}{{ include "horovod.base" . }}-worker{{- end -}}
{{- define "horovod.service" -}}{{ include "horovod.base" . }}-workers{{- end -}}
{{- define "horovod.launcher" -}}{{ include "horovod.base" . }}-launcher{{- end -}}
{{- define "horovod.keys" -}}{{ include "horovod.base" . }}-ssh{{- end -}}
{{- define "horovod.authorizedKeys" -}}{{ include "horovod.base" . }}-ssh-authorized-keys{{- end -}}
{{- define "horovod.keygen" -}}{{ include "horovod.base" . }}-keygen{{- end -}}

{{- define "horovod.selectorLabels" -}}
app.kubernetes.io/name: horovod
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
{{- define "horovod.labels" -}}
{{ include "horovod.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The image: [registry/]repository:tag, the tag defaulting to <appVersion>-cpu (the CPU
image `make images` builds; the GPU one is <appVersion>-gpu). */}}
{{- define "horovod.image" -}}
{{- $repo := .Values.image.repository -}}
{{- with .Values.image.registry }}{{ $repo = printf "%s/%s" . $repo }}{{ end -}}
{{- printf "%s:%s" $repo (.Values.image.tag | default (printf "%s-cpu" .Chart.AppVersion)) -}}
{{- end -}}

{{/* Ranks per worker: slotsPerWorker, else the GPUs each worker asks for, else 2. */}}
{{- define "horovod.slots" -}}
{{- $gpus := index (.Values.resources.limits | default dict) "nvidia.com/gpu" -}}
{{- .Values.slotsPerWorker | default $gpus | default 2 -}}
{{- end -}}

{{/* Pod-level settings every pod of the chart shares. */}}
{{- define "horovod.podCommon" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The environment of the launcher and the test pod: where horovodrun finds the hostfile, the
workers' ssh port and the key; the HOROVOD_* knobs and the user's env (horovodrun forwards
HOROVOD_*, NCCL_*, TF_*, PYTHON* to every rank). The launcher runs no rank: no GPU for it. */}}
{{- define "horovod.launcherEnv" -}}
- name: HOROVOD_HOSTFILE
  value: /run/horovod/hostfile
- name: HOROVOD_SSH_PORT
  value: {{ .Values.ssh.port | quote }}
- name: HOROVOD_SSH_IDENTITY_FILE
  value: /etc/horovod/ssh/id_ed25519
- name: NVIDIA_VISIBLE_DEVICES
  value: void
{{- range $k, $v := .Values.horovod }}
- name: {{ $k }}
  {{- /* toJson: a number from values is a float64, which toString would write as 3.3554432e+07 */}}
  value: {{ (kindIs "string" $v | ternary $v ($v | toJson)) | quote }}
{{- end }}
{{- with .Values.env }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The cluster entrypoint (python -m horovod.runner.cluster, as in compose/compose.yaml): the
workers found by the headless Service's DNS name, a bounded wait for each sshd that names the
silent ones, the hostfile; then the command given as the container's args. */}}
{{- define "horovod.discoveryCommand" -}}
- /usr/bin/tini
- --
- python
- -m
- horovod.runner.cluster
- --service
- {{ include "horovod.service" . }}
- --port
- {{ .Values.ssh.port | quote }}
- --slots
- {{ include "horovod.slots" . | quote }}
- --expect
- {{ (.Values.elastic.enabled | ternary .Values.elastic.minWorkers .Values.workers) | quote }}
- --timeout
- {{ .Values.discoveryTimeoutSeconds | quote }}
- --key-dir
- /etc/horovod/ssh
- --hostfile
- /run/horovod/hostfile
- --
{{- end -}}

{{/* The launcher's command in elastic mode: horovodrun with the elastic flags, then the rest of
.Values.command; the discovery is the same DNS lookup as the launcher's own, one look each time. */}}
{{- define "horovod.elasticCommand" -}}
{{- if ne (first .Values.command) "horovodrun" -}}
{{- fail "elastic.enabled needs a command that starts with horovodrun" -}}
{{- end -}}
{{- $slots := include "horovod.slots" . | int -}}
{{- $max := .Values.elastic.maxWorkers | default .Values.workers | int -}}
{{- if lt $max (.Values.elastic.minWorkers | int) -}}
{{- fail "elastic.maxWorkers is below elastic.minWorkers" -}}
{{- end -}}
- horovodrun
- --min-np
- {{ mul .Values.elastic.minWorkers $slots | quote }}
- --max-np
- {{ mul $max $slots | quote }}
- --host-discovery-script
- python -m horovod.runner.cluster --discover
- --elastic-timeout
- {{ .Values.elastic.timeoutSeconds | quote }}
{{- with .Values.elastic.resetLimit }}
- --reset-limit
- {{ . | quote }}
{{- end }}
{{- range rest .Values.command }}
- {{ . | quote }}
{{- end }}
{{- end -}}

{{/* Launcher-side pod spec shared by the launcher Job and the helm test pod. Short worker names
(<release>-worker-0, from the DNS server's reverse answers) resolve through the service's
search domain, as in the MPI Operator. */}}
{{- define "horovod.launcherPod" -}}
restartPolicy: Never
automountServiceAccountToken: false
dnsConfig:
  searches:
    - {{ include "horovod.service" . }}.{{ .Release.Namespace }}.svc.{{ .Values.clusterDomain }}
{{- include "horovod.podCommon" . }}
volumes:
  - name: ssh-key
    secret:
      secretName: {{ include "horovod.keys" . }}
      defaultMode: 0400
{{- end -}}
