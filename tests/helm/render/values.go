package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/xeipuuv/gojsonschema"
	yaml "gopkg.in/yaml.v2"
)

// yamlToMap parses a YAML mapping as helm does (YAML -> JSON -> Go): keys are strings,
// numbers float64. Empty input is an empty map.
func yamlToMap(data []byte) (map[string]interface{}, error) {
	var raw interface{}
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, err
	}
	if raw == nil {
		return map[string]interface{}{}, nil
	}
	v, ok := jsonValue(raw).(map[string]interface{})
	if !ok {
		return nil, fmt.Errorf("not a mapping at the top level")
	}
	return v, nil
}

// jsonValue turns what yaml.v2 decodes into what encoding/json would decode.
func jsonValue(v interface{}) interface{} {
	switch t := v.(type) {
	case map[interface{}]interface{}:
		m := make(map[string]interface{}, len(t))
		for k, e := range t {
			m[fmt.Sprint(k)] = jsonValue(e)
		}
		return m
	case map[string]interface{}:
		m := make(map[string]interface{}, len(t))
		for k, e := range t {
			m[k] = jsonValue(e)
		}
		return m
	case []interface{}:
		l := make([]interface{}, len(t))
		for i, e := range t {
			l[i] = jsonValue(e)
		}
		return l
	case int:
		return float64(t)
	case int64:
		return float64(t)
	case uint64:
		return float64(t)
	default:
		return v
	}
}

func deepCopy(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		return deepCopyMap(t)
	case []interface{}:
		l := make([]interface{}, len(t))
		for i, e := range t {
			l[i] = deepCopy(e)
		}
		return l
	default:
		return v
	}
}

func deepCopyMap(m map[string]interface{}) map[string]interface{} {
	out := make(map[string]interface{}, len(m))
	for k, v := range m {
		out[k] = deepCopy(v)
	}
	return out
}

// mergeInto merges src into dst as helm merges successive --values files: maps key by
// key, anything else replaced.
func mergeInto(dst, src map[string]interface{}) {
	for k, v := range src {
		if sm, ok := v.(map[string]interface{}); ok {
			if dm, ok := dst[k].(map[string]interface{}); ok {
				mergeInto(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

// coalesce lays the user's values over the chart's defaults as helm does: maps merge
// key by key, a user null removes the chart's key, anything else is the user's.
func coalesce(defaults, user map[string]interface{}) map[string]interface{} {
	out := deepCopyMap(user)
	for k, dv := range defaults {
		uv, present := out[k]
		switch {
		case !present:
			out[k] = dv
		case uv == nil:
			delete(out, k)
		default:
			dm, dIsMap := dv.(map[string]interface{})
			um, uIsMap := uv.(map[string]interface{})
			if dIsMap && uIsMap {
				out[k] = coalesce(dm, um)
			}
		}
	}
	return out
}

// validateValues checks the merged values against the chart's JSON schema; the error
// lists every violation with the path of the value it concerns.
func validateValues(chartName string, schema []byte, values map[string]interface{}) error {
	result, err := gojsonschema.Validate(gojsonschema.NewBytesLoader(schema), gojsonschema.NewGoLoader(values))
	if err != nil {
		return fmt.Errorf("values.schema.json: %v", err)
	}
	if result.Valid() {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "values don't meet the specifications of the schema(s) in the following chart(s):\n%s:", chartName)
	for _, e := range result.Errors() {
		fmt.Fprintf(&b, "\n- %s", e.String())
	}
	return fmt.Errorf("%s", b.String())
}

// parseSet applies one --set argument (helm's syntax: a.b.c=v, a[0]=v, lists {x,y},
// several pairs separated by commas, "\," and "\." escaped) to values.
func parseSet(arg string, values map[string]interface{}) error {
	for _, pair := range splitTop(arg, ',') {
		eq := indexUnescaped(pair, '=')
		if eq < 0 {
			return fmt.Errorf("key %q has no value (want key=value)", pair)
		}
		key, raw := pair[:eq], pair[eq+1:]
		path, err := parseKey(key)
		if err != nil {
			return err
		}
		var v interface{}
		if strings.HasPrefix(raw, "{") && strings.HasSuffix(raw, "}") {
			list := []interface{}{}
			if inner := raw[1 : len(raw)-1]; inner != "" {
				for _, item := range splitTop(inner, ',') {
					list = append(list, typedValue(unescape(item)))
				}
			}
			v = list
		} else {
			v = typedValue(unescape(raw))
		}
		if err := setPath(values, path, v); err != nil {
			return fmt.Errorf("%s: %v", key, err)
		}
	}
	return nil
}

// typedValue: true/false, null, integers (not with a leading zero) as int64, else the string.
func typedValue(s string) interface{} {
	switch s {
	case "true":
		return true
	case "false":
		return false
	case "null":
		return nil
	}
	if s == "0" || (s != "" && s[0] != '0' && !(s[0] == '-' && len(s) > 1 && s[1] == '0')) {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i
		}
	}
	return s
}

type keyPart struct {
	name  string
	index int // -1: a map key
}

// parseKey splits a.b[2].c into its parts.
func parseKey(key string) ([]keyPart, error) {
	var parts []keyPart
	for _, seg := range splitEscaped(key, '.') {
		name := seg
		var idx []int
		for strings.HasSuffix(name, "]") {
			open := strings.LastIndexByte(name, '[')
			if open < 0 {
				return nil, fmt.Errorf("key %q: unmatched ]", key)
			}
			n, err := strconv.Atoi(name[open+1 : len(name)-1])
			if err != nil || n < 0 {
				return nil, fmt.Errorf("key %q: bad index %q", key, name[open+1:len(name)-1])
			}
			idx = append([]int{n}, idx...)
			name = name[:open]
		}
		if name == "" && len(parts) == 0 {
			return nil, fmt.Errorf("key %q: empty name", key)
		}
		if name != "" {
			parts = append(parts, keyPart{name: unescape(name), index: -1})
		} else if len(idx) == 0 {
			return nil, fmt.Errorf("key %q: empty name", key)
		}
		for _, i := range idx {
			parts = append(parts, keyPart{index: i})
		}
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("empty key")
	}
	return parts, nil
}

// setPath stores v at path, making maps and lists on the way.
func setPath(root map[string]interface{}, path []keyPart, v interface{}) error {
	var cur interface{} = root
	var assign func(interface{}) // stores a new container in the parent
	for i, p := range path {
		last := i == len(path)-1
		if p.index < 0 {
			m, ok := cur.(map[string]interface{})
			if !ok {
				m = map[string]interface{}{}
				assign(m)
			}
			if last {
				m[p.name] = v
				return nil
			}
			name := p.name
			assign = func(n interface{}) { m[name] = n }
			cur = m[name]
			continue
		}
		l, ok := cur.([]interface{})
		if !ok {
			l = []interface{}{}
		}
		for len(l) <= p.index {
			l = append(l, nil)
		}
		if assign == nil {
			return fmt.Errorf("a list index needs a name before it")
		}
		assign(l)
		if last {
			l[p.index] = v
			return nil
		}
		idx := p.index
		assign = func(n interface{}) { l[idx] = n }
		cur = l[idx]
	}
	return nil
}

// splitTop splits s at sep outside {...} and not after a backslash.
func splitTop(s string, sep byte) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '{':
			depth++
		case '}':
			if depth > 0 {
				depth--
			}
		case sep:
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// splitEscaped splits at sep not after a backslash (the escapes are kept).
func splitEscaped(s string, sep byte) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
		} else if s[i] == sep {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

func indexUnescaped(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
		} else if s[i] == c {
			return i
		}
	}
	return -1
}

func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
