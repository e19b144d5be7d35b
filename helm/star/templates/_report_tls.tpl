{{- /*
The report endpoint's TLS: "managed" (the operator makes and keeps its own certificate),
"secret" (an existing Secret, operator.reportTLS.secretName) or "" (plain HTTP).
*/ -}}
{{- define "star.reportTLSMode" -}}
{{- $tls := .Values.operator.reportTLS }}
{{- if $tls.enabled }}{{ ternary "secret" "managed" (ne $tls.secretName "") }}{{ end }}
{{- end }}

{{- /* The Secret the operator keeps its own certificate in. */ -}}
{{- define "star.reportTLSManagedSecret" -}}
{{- .Values.operator.reportTLS.managedSecretName | default (printf "%s-report-tls" (include "star.operatorName" .)) }}
{{- end }}
