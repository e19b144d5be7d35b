package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	yaml "gopkg.in/yaml.v2"
)

// Files is .Files: the chart's files outside templates/, with helm's accessors.
type Files map[string][]byte

// Get returns the file's content, "" when there is no such file.
func (f Files) Get(name string) string { return string(f[name]) }

// GetBytes returns the file's content, nil when there is no such file.
func (f Files) GetBytes(name string) []byte { return f[name] }

// Glob returns the files whose names match pattern ('*' does not cross '/').
func (f Files) Glob(pattern string) Files {
	out := Files{}
	for name, data := range f {
		if ok, _ := path.Match(pattern, name); ok {
			out[name] = data
		}
	}
	return out
}

// AsConfig renders the files as a ConfigMap's data: base name -> content.
func (f Files) AsConfig() string {
	m := map[string]string{}
	for name, data := range f {
		m[path.Base(name)] = string(data)
	}
	return toYAML(m)
}

// Lines returns the file's lines.
func (f Files) Lines(name string) []string {
	if f[name] == nil {
		return []string{}
	}
	return strings.Split(string(f[name]), "\n")
}

// VersionSet is .Capabilities.APIVersions.
type VersionSet []string

// Has reports whether the API version (group/version, or group/version/Kind) is served.
func (v VersionSet) Has(apiVersion string) bool {
	for _, x := range v {
		if x == apiVersion {
			return true
		}
	}
	return false
}

// KubeVersion is .Capabilities.KubeVersion.
type KubeVersion struct {
	Version, Major, Minor, GitVersion string
}

func (k KubeVersion) String() string { return k.Version }

// Capabilities is what the renderer claims the cluster serves: Kubernetes 1.32 with its
// standard groups, and the Prometheus operator's monitoring.coreos.com/v1.
type Capabilities struct {
	KubeVersion KubeVersion
	APIVersions VersionSet
	HelmVersion map[string]string
}

func defaultCapabilities() Capabilities {
	versions := VersionSet{
		"v1", "admissionregistration.k8s.io/v1", "apiextensions.k8s.io/v1", "apiregistration.k8s.io/v1",
		"apps/v1", "authentication.k8s.io/v1", "authorization.k8s.io/v1", "autoscaling/v1", "autoscaling/v2",
		"batch/v1", "certificates.k8s.io/v1", "coordination.k8s.io/v1", "discovery.k8s.io/v1",
		"events.k8s.io/v1", "flowcontrol.apiserver.k8s.io/v1", "networking.k8s.io/v1", "node.k8s.io/v1",
		"policy/v1", "rbac.authorization.k8s.io/v1", "scheduling.k8s.io/v1", "storage.k8s.io/v1",
		"monitoring.coreos.com/v1", "monitoring.coreos.com/v1/ServiceMonitor",
		"monitoring.coreos.com/v1/PrometheusRule", "monitoring.coreos.com/v1/PodMonitor",
	}
	return Capabilities{
		KubeVersion: KubeVersion{Version: "v1.32.0", Major: "1", Minor: "32", GitVersion: "v1.32.0"},
		APIVersions: versions,
		HelmVersion: map[string]string{"Version": "v3.16.0"},
	}
}

// toYAML marshals as helm's toYaml (sigs.k8s.io/yaml: through JSON, keys sorted), without
// the final newline; "" when v cannot be marshalled.
func toYAML(v interface{}) string {
	j, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	var obj interface{}
	if err := yaml.Unmarshal(j, &obj); err != nil {
		return ""
	}
	out, err := yaml.Marshal(obj)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(out), "\n")
}

func toJSON(v interface{}) string {
	out, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(out)
}

// fromYAML parses a mapping; on error the map holds the message under "Error", as helm's.
func fromYAML(s string) map[string]interface{} {
	m, err := yamlToMap([]byte(s))
	if err != nil {
		return map[string]interface{}{"Error": err.Error()}
	}
	return m
}

func fromYAMLArray(s string) []interface{} {
	var raw interface{}
	if err := yaml.Unmarshal([]byte(s), &raw); err != nil {
		return []interface{}{err.Error()}
	}
	l, ok := jsonValue(raw).([]interface{})
	if !ok {
		return []interface{}{"not a list"}
	}
	return l
}

func fromJSON(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func fromJSONArray(s string) []interface{} {
	var l []interface{}
	if err := json.Unmarshal([]byte(s), &l); err != nil {
		return []interface{}{err.Error()}
	}
	return l
}

const maxIncludeDepth = 1000

// funcMap is sprig's text functions with helm's additions; include and tpl close over t.
func funcMap(t **template.Template) template.FuncMap {
	f := sprig.TxtFuncMap()
	delete(f, "env")
	delete(f, "expandenv")
	depth := map[string]int{}
	f["toYaml"] = toYAML
	f["toJson"] = toJSON
	f["fromYaml"] = fromYAML
	f["fromYamlArray"] = fromYAMLArray
	f["fromJson"] = fromJSON
	f["fromJsonArray"] = fromJSONArray
	f["toToml"] = func(interface{}) string { return "" }
	f["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil {
			return v, fmt.Errorf("%s", msg)
		}
		if s, ok := v.(string); ok && s == "" {
			return v, fmt.Errorf("%s", msg)
		}
		return v, nil
	}
	f["lookup"] = func(apiVersion, kind, namespace, name string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil
	}
	f["include"] = func(name string, data interface{}) (string, error) {
		if depth[name] > maxIncludeDepth {
			return "", fmt.Errorf("rendering template has a nested reference name: %s", name)
		}
		depth[name]++
		defer func() { depth[name]-- }()
		var buf bytes.Buffer
		err := (*t).ExecuteTemplate(&buf, name, data)
		return buf.String(), err
	}
	f["tpl"] = func(text string, data interface{}) (string, error) {
		clone, err := (*t).Clone()
		if err != nil {
			return "", err
		}
		parsed, err := clone.New("tpl").Parse(text)
		if err != nil {
			return "", fmt.Errorf("cannot parse template %q: %v", text, err)
		}
		var buf bytes.Buffer
		if err := parsed.Execute(&buf, data); err != nil {
			return "", fmt.Errorf("error during tpl function execution for %q: %v", text, err)
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}
	return f
}

// renderChart executes every template (partials, names starting with "_", only define)
// and returns the output of each by name ("CHART/templates/x.yaml"). NOTES.txt is
// executed (so that a broken one fails) but not returned, as in `helm template`.
func renderChart(c *chart, values map[string]interface{}, o options) (map[string]string, error) {
	var t *template.Template
	t = template.New(c.metadata.Name).Option("missingkey=zero").Funcs(funcMap(&t))
	var names []string
	for _, tf := range c.templates {
		name := c.metadata.Name + "/" + tf.name
		if _, err := t.New(name).Parse(string(tf.data)); err != nil {
			return nil, fmt.Errorf("parse error in %s: %v", name, err)
		}
		names = append(names, name)
	}
	files := Files{}
	for _, f := range c.files {
		files[f.name] = f.data
	}
	top := map[string]interface{}{
		"Values": values,
		"Release": map[string]interface{}{
			"Name": o.release, "Namespace": o.namespace, "Service": "Helm",
			"IsInstall": true, "IsUpgrade": false, "Revision": 1,
		},
		"Chart":        c.metadata,
		"Capabilities": defaultCapabilities(),
		"Files":        files,
	}
	out := map[string]string{}
	for _, name := range names {
		if strings.HasPrefix(path.Base(name), "_") {
			continue
		}
		data := map[string]interface{}{}
		for k, v := range top {
			data[k] = v
		}
		data["Template"] = map[string]interface{}{"Name": name, "BasePath": c.metadata.Name + "/templates"}
		var buf bytes.Buffer
		if err := t.ExecuteTemplate(&buf, name, data); err != nil {
			return nil, cleanExecError(err)
		}
		if path.Base(name) == "NOTES.txt" {
			continue
		}
		out[name] = strings.ReplaceAll(buf.String(), "<no value>", "")
	}
	return out, nil
}

var execErrorRE = regexp.MustCompile(`^template: (.*?:\d+:\d+): executing ".*?" at <.*?>: error calling (?:required|fail): (.*)$`)

// cleanExecError words a failed required/fail as helm does:
// "execution error at (star/templates/x.yaml:3:4): MESSAGE".
func cleanExecError(err error) error {
	if m := execErrorRE.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Errorf("execution error at (%s): %s", m[1], m[2])
	}
	return err
}

type manifest struct {
	source  string
	content string
	kind    string
}

// helm's install order; other kinds come after these.
var installOrder = []string{
	"PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange", "PodSecurityPolicy",
	"PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList", "ConfigMap", "StorageClass",
	"PersistentVolume", "PersistentVolumeClaim", "CustomResourceDefinition", "ClusterRole",
	"ClusterRoleList", "ClusterRoleBinding", "ClusterRoleBindingList", "Role", "RoleList", "RoleBinding",
	"RoleBindingList", "Service", "DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
	"HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress", "APIService",
}

var docSeparator = regexp.MustCompile(`(?:^|\s*\n)---\s*`)

// splitAndSort splits each template's output into documents, drops empty ones, checks
// each is a YAML mapping and orders them by kind (then template name, then position).
func splitAndSort(rendered map[string]string) ([]manifest, error) {
	rank := map[string]int{}
	for i, k := range installOrder {
		rank[k] = i
	}
	var names []string
	for name := range rendered {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []manifest
	for _, name := range names {
		for _, doc := range docSeparator.Split(rendered[name], -1) {
			doc = strings.TrimSpace(doc)
			if doc == "" {
				continue
			}
			var head struct {
				APIVersion string `yaml:"apiVersion"`
				Kind       string `yaml:"kind"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				return nil, fmt.Errorf("YAML parse error on %s: %v", name, err)
			}
			out = append(out, manifest{source: name, content: doc, kind: head.Kind})
		}
	}
	rankOf := func(kind string) int {
		if r, ok := rank[kind]; ok {
			return r
		}
		return len(installOrder)
	}
	sort.SliceStable(out, func(i, j int) bool { return rankOf(out[i].kind) < rankOf(out[j].kind) })
	return out, nil
}
