package main

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	yaml "gopkg.in/yaml.v2"
)

// Metadata is Chart.yaml, exposed to templates as .Chart with helm's field names.
type Metadata struct {
	Name         string            `yaml:"name"`
	Home         string            `yaml:"home"`
	Sources      []string          `yaml:"sources"`
	Version      string            `yaml:"version"`
	Description  string            `yaml:"description"`
	Keywords     []string          `yaml:"keywords"`
	Maintainers  []interface{}     `yaml:"maintainers"`
	Icon         string            `yaml:"icon"`
	APIVersion   string            `yaml:"apiVersion"`
	Condition    string            `yaml:"condition"`
	Tags         string            `yaml:"tags"`
	AppVersion   string            `yaml:"appVersion"`
	Deprecated   bool              `yaml:"deprecated"`
	Annotations  map[string]string `yaml:"annotations"`
	KubeVersion  string            `yaml:"kubeVersion"`
	Dependencies []interface{}     `yaml:"dependencies"`
	Type         string            `yaml:"type"`
}

type file struct {
	name string // slash-separated, relative to the chart directory
	data []byte
}

type chart struct {
	metadata  Metadata
	values    map[string]interface{}
	schema    []byte // nil when the chart has no values.schema.json
	templates []file // templates/**, by name
	files     []file // everything else helm exposes as .Files, by name
	crds      []file // crds/*.yaml|yml|json, by name (also in files, as in helm)
}

// loadChart reads a chart directory as helm's loader sorts its files.
func loadChart(dir string) (*chart, error) {
	c := &chart{values: map[string]interface{}{}}
	raw, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return nil, fmt.Errorf("chart: %v", err)
	}
	if err := yaml.UnmarshalStrict(raw, &c.metadata); err != nil {
		return nil, fmt.Errorf("chart: Chart.yaml: %v", err)
	}
	if c.metadata.APIVersion != "v2" {
		return nil, fmt.Errorf("chart: Chart.yaml: apiVersion must be v2, got %q", c.metadata.APIVersion)
	}
	if c.metadata.Name == "" || c.metadata.Version == "" {
		return nil, fmt.Errorf("chart: Chart.yaml: name and version are required")
	}
	err = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if info.IsDir() {
			if rel == "charts" {
				return fmt.Errorf("subcharts (charts/) are not supported")
			}
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		switch {
		case rel == "Chart.yaml" || rel == "Chart.lock" || rel == ".helmignore":
		case rel == "values.yaml":
			v, err := yamlToMap(data)
			if err != nil {
				return fmt.Errorf("values.yaml: %v", err)
			}
			c.values = v
		case rel == "values.schema.json":
			c.schema = data
		case strings.HasPrefix(rel, "templates/"):
			c.templates = append(c.templates, file{rel, data})
		default:
			c.files = append(c.files, file{rel, data})
			ext := path.Ext(rel)
			if strings.HasPrefix(rel, "crds/") && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
				c.crds = append(c.crds, file{rel, data})
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("chart %s: %v", dir, err)
	}
	for _, l := range [][]file{c.templates, c.files, c.crds} {
		sort.Slice(l, func(i, j int) bool { return l[i].name < l[j].name })
	}
	return c, nil
}
