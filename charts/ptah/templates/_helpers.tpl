{{/* The manager image: repository@digest when a digest is given, else repository:tag. */}}
{{- define "ptah.image" -}}
{{- with .Values.image -}}
{{- if .digest }}{{ .repository }}@{{ .digest }}{{ else }}{{ .repository }}:{{ .tag }}{{ end -}}
{{- end -}}
{{- end -}}

{{/* The runner image: runnerImage's fields, each defaulting to image's. */}}
{{- define "ptah.runnerImage" -}}
{{- $repository := .Values.runnerImage.repository | default .Values.image.repository -}}
{{- $digest := .Values.runnerImage.digest -}}
{{- if and (not $digest) (eq $repository .Values.image.repository) }}{{ $digest = .Values.image.digest }}{{ end -}}
{{- if $digest }}{{ $repository }}@{{ $digest }}{{ else }}{{ $repository }}:{{ .Values.runnerImage.tag | default .Values.image.tag }}{{ end -}}
{{- end -}}

{{/*
The generated serving certificate as YAML (ca, crt, key; base64): the one already in the Secret when the chart wrote
it before, so an upgrade keeps it, else a new CA (10 years) and a certificate it signs for the Service.
*/}}
{{- define "ptah.generatedCertificate" -}}
{{- $secret := lookup "v1" "Secret" .Release.Namespace .Values.webhook.certificate.secretName -}}
{{- if and $secret (index ($secret.data | default dict) "ca.crt") -}}
ca: {{ index $secret.data "ca.crt" }}
crt: {{ index $secret.data "tls.crt" }}
key: {{ index $secret.data "tls.key" }}
{{- else -}}
{{- $service := printf "ptah-webhook.%s.svc" .Release.Namespace -}}
{{- $ca := genCA "ptah-webhook-ca" 3650 -}}
{{- $cert := genSignedCert $service nil (list $service (printf "%s.cluster.local" $service)) 3650 $ca -}}
ca: {{ $ca.Cert | b64enc }}
crt: {{ $cert.Cert | b64enc }}
key: {{ $cert.Key | b64enc }}
{{- end -}}
{{- end -}}
