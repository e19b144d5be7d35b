package main

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// containerEnv resolves a container's environment as a kubelet does: envFrom, then env
// (values with $(VAR) references, fieldRef, resourceFieldRef, secretKeyRef and
// configMapKeyRef), after HOSTNAME and a PATH for the host.
func containerEnv(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod,
	c *corev1.Container) ([]string, map[string]string, error) {
	vars := map[string]string{}
	order := []string{}
	set := func(k, v string) {
		if _, seen := vars[k]; !seen {
			order = append(order, k)
		}
		vars[k] = v
	}
	set("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	set("HOSTNAME", podHostname(pod))
	for _, from := range c.EnvFrom {
		data, err := envFromData(ctx, client, pod.Namespace, from)
		if err != nil {
			return nil, nil, err
		}
		for k, v := range data {
			set(from.Prefix+k, v)
		}
	}
	for _, e := range c.Env {
		v, err := envValue(ctx, client, pod, c, e, vars)
		if err != nil {
			return nil, nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		set(e.Name, v)
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vars[k])
	}
	return out, vars, nil
}

func podHostname(pod *corev1.Pod) string {
	if pod.Spec.Hostname != "" {
		return pod.Spec.Hostname
	}
	return pod.Name
}

func envValue(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod,
	c *corev1.Container, e corev1.EnvVar, vars map[string]string) (string, error) {
	src := e.ValueFrom
	switch {
	case src == nil:
		return expand(e.Value, vars), nil
	case src.FieldRef != nil:
		return fieldValue(pod, src.FieldRef.FieldPath)
	case src.ResourceFieldRef != nil:
		return resourceValue(c, src.ResourceFieldRef)
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		s, err := client.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err == nil {
			if v, ok := s.Data[ref.Key]; ok {
				return string(v), nil
			}
			err = fmt.Errorf("secret %s has no key %s", ref.Name, ref.Key)
		}
		if ref.Optional != nil && *ref.Optional {
			return "", nil
		}
		return "", err
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		m, err := client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err == nil {
			if v, ok := m.Data[ref.Key]; ok {
				return v, nil
			}
			err = fmt.Errorf("configmap %s has no key %s", ref.Name, ref.Key)
		}
		if ref.Optional != nil && *ref.Optional {
			return "", nil
		}
		return "", err
	}
	return "", fmt.Errorf("unsupported valueFrom")
}

func envFromData(ctx context.Context, client kubernetes.Interface, ns string,
	from corev1.EnvFromSource) (map[string]string, error) {
	out := map[string]string{}
	if ref := from.SecretRef; ref != nil {
		s, err := client.CoreV1().Secrets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			if ref.Optional != nil && *ref.Optional {
				return out, nil
			}
			return nil, fmt.Errorf("envFrom secret %s: %w", ref.Name, err)
		}
		for k, v := range s.Data {
			out[k] = string(v)
		}
	}
	if ref := from.ConfigMapRef; ref != nil {
		m, err := client.CoreV1().ConfigMaps(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			if ref.Optional != nil && *ref.Optional {
				return out, nil
			}
			return nil, fmt.Errorf("envFrom configmap %s: %w", ref.Name, err)
		}
		for k, v := range m.Data {
			out[k] = v
		}
	}
	return out, nil
}

func fieldValue(pod *corev1.Pod, path string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return pod.Status.PodIP, nil
	case "status.hostIP", "status.hostIPs":
		return pod.Status.HostIP, nil
	}
	for prefix, m := range map[string]map[string]string{
		"metadata.labels['": pod.Labels, "metadata.annotations['": pod.Annotations} {
		if key, ok := strings.CutPrefix(path, prefix); ok && strings.HasSuffix(key, "']") {
			return m[strings.TrimSuffix(key, "']")], nil
		}
	}
	return "", fmt.Errorf("unsupported fieldRef %q", path)
}

func resourceValue(c *corev1.Container, ref *corev1.ResourceFieldSelector) (string, error) {
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok {
		return "", fmt.Errorf("unsupported resourceFieldRef %q", ref.Resource)
	}
	list := c.Resources.Limits
	if kind == "requests" {
		list = c.Resources.Requests
	}
	q, found := list[corev1.ResourceName(name)]
	if !found {
		return "0", nil
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		if name == "cpu" {
			return fmt.Sprint((q.MilliValue() + 999) / 1000), nil
		}
		return fmt.Sprint(q.Value()), nil
	}
	if name == "cpu" {
		return fmt.Sprint((q.MilliValue() + divisor.MilliValue() - 1) / divisor.MilliValue()), nil
	}
	return fmt.Sprint((q.Value() + divisor.Value() - 1) / divisor.Value()), nil
}

// expand replaces $(NAME) by NAME's value where NAME is defined, and $$ by $, as
// Kubernetes expands container commands, arguments and env values.
func expand(s string, vars map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		if s[i+1] == '$' {
			b.WriteByte('$')
			i++
			continue
		}
		if s[i+1] == '(' {
			if end := strings.IndexByte(s[i+2:], ')'); end >= 0 {
				name := s[i+2 : i+2+end]
				if v, ok := vars[name]; ok {
					b.WriteString(v)
					i += 2 + end
					continue
				}
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
