// render: prints a chart's manifests as `helm template` does, where no helm binary can
// run. Go's text/template with sprig v3 and helm's own functions, so the chart's
// templates are executed by the same engine helm uses.
//
//	render CHART_DIR [--values FILE]... [--set key=value]... [--namespace NS]
//	       [--name RELEASE] [--include-crds]
//
// Values: the chart's values.yaml, then each --values file, then each --set, merged as
// helm merges them (maps key by key; null removes a key), then checked against
// values.schema.json. Output: one "---\n# Source: CHART/PATH\n" document per manifest,
// ordered by kind as helm installs them; CRDs (crds/) first with --include-crds.
// Exit status: 0 rendered, 1 a schema violation, a failed `required`/`fail` or any other
// error (one "Error: ..." line on stderr), 2 bad usage.
package main

import (
	"fmt"
	"os"
	"strings"
)

type options struct {
	chartDir    string
	valueFiles  []string
	sets        []string
	namespace   string
	release     string
	includeCRDs bool
}

const usage = "usage: render CHART_DIR [--values FILE]... [--set key=value]... " +
	"[--namespace NS] [--name RELEASE] [--include-crds]"

// parseArgs reads the command line; accepts --flag value and --flag=value.
func parseArgs(args []string) (options, error) {
	o := options{namespace: "default", release: "release-name"}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := a, "", false
		if strings.HasPrefix(a, "--") {
			if eq := strings.IndexByte(a, '='); eq >= 0 {
				name, value, hasValue = a[:eq], a[eq+1:], true
			}
		}
		takeValue := func() (string, error) {
			if hasValue {
				return value, nil
			}
			if i+1 >= len(args) {
				return "", fmt.Errorf("%s needs a value", name)
			}
			i++
			return args[i], nil
		}
		var err error
		switch name {
		case "--values", "-f":
			var v string
			if v, err = takeValue(); err == nil {
				o.valueFiles = append(o.valueFiles, v)
			}
		case "--set":
			var v string
			if v, err = takeValue(); err == nil {
				o.sets = append(o.sets, v)
			}
		case "--namespace", "-n":
			o.namespace, err = takeValue()
		case "--name":
			o.release, err = takeValue()
		case "--include-crds":
			if hasValue {
				err = fmt.Errorf("--include-crds takes no value")
			}
			o.includeCRDs = true
		case "-h", "--help":
			fmt.Println(usage)
			os.Exit(0)
		default:
			if strings.HasPrefix(a, "-") {
				err = fmt.Errorf("unknown flag %s", a)
			} else if o.chartDir == "" {
				o.chartDir = a
			} else {
				err = fmt.Errorf("unexpected argument %q (one CHART_DIR only)", a)
			}
		}
		if err != nil {
			return o, err
		}
	}
	if o.chartDir == "" {
		return o, fmt.Errorf("CHART_DIR is required")
	}
	if o.release == "" || o.namespace == "" {
		return o, fmt.Errorf("--name and --namespace must not be empty")
	}
	return o, nil
}

func main() {
	o, err := parseArgs(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error: %v\n%s\n", err, usage)
		os.Exit(2)
	}
	out, err := run(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error: %v\n", err)
		os.Exit(1)
	}
	fmt.Print(out)
}

// run loads the chart, merges and checks the values, renders and orders the manifests.
func run(o options) (string, error) {
	c, err := loadChart(o.chartDir)
	if err != nil {
		return "", err
	}
	user := map[string]interface{}{}
	for _, f := range o.valueFiles {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("values file: %v", err)
		}
		v, err := yamlToMap(data)
		if err != nil {
			return "", fmt.Errorf("values file %s: %v", f, err)
		}
		mergeInto(user, v)
	}
	for _, s := range o.sets {
		if err := parseSet(s, user); err != nil {
			return "", fmt.Errorf("--set %s: %v", s, err)
		}
	}
	values := coalesce(deepCopyMap(c.values), user)
	if c.schema != nil {
		if err := validateValues(c.metadata.Name, c.schema, values); err != nil {
			return "", err
		}
	}
	rendered, err := renderChart(c, values, o)
	if err != nil {
		return "", err
	}
	manifests, err := splitAndSort(rendered)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if o.includeCRDs {
		for _, crd := range c.crds {
			fmt.Fprintf(&b, "---\n# Source: %s/%s\n%s\n", c.metadata.Name, crd.name, crd.data)
		}
	}
	for _, m := range manifests {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.source, m.content)
	}
	return b.String(), nil
}
