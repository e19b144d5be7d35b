package main

import (
	"net/http"
	"net/url"
	"strings"
)

// requestInfo is what a request to the Kubernetes API asks for, named as the API server's
// RequestInfoFactory (k8s.io/apiserver/pkg/endpoints/request) names it for RBAC.
type requestInfo struct {
	IsResource  bool   // false for /version, /api, /apis/GROUP, /openapi/..., /healthz ...
	Verb        string // get list watch create update patch delete deletecollection
	Group       string // "" for the core group (/api/v1)
	Namespace   string // "" for cluster-scoped resources and requests across namespaces; a Namespace's own name
	Resource    string // plural: pods, nodeallocations
	Subresource string // status, binding, log ...; "" for the object itself
	Name        string // "" for collections (a fieldSelector metadata.name=X on a list or watch names X)
}

// namespaceSubresources are the subresources of a Namespace itself
// (/api/v1/namespaces/NAME/status), not namespaced resources called "status".
var namespaceSubresources = map[string]bool{"status": true, "finalize": true}

// parseRequest names the request's verb and target from its method, path and query.
func parseRequest(method string, u *url.URL) requestInfo {
	var info requestInfo
	parts := splitPath(u.Path)
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:] // api, v1
	case len(parts) >= 3 && parts[0] == "apis":
		info.Group = parts[1]
		parts = parts[3:] // apis, GROUP, VERSION
	default:
		return requestInfo{Verb: strings.ToLower(method)}
	}
	if len(parts) == 0 {
		return requestInfo{Verb: strings.ToLower(method)}
	}
	info.IsResource = true
	legacyWatch := false
	if parts[0] == "watch" { // the deprecated /api/v1/watch/... form
		legacyWatch = true
		parts = parts[1:]
	}
	switch method {
	case http.MethodPost:
		info.Verb = "create"
	case http.MethodGet, http.MethodHead:
		info.Verb = "get"
	case http.MethodPut:
		info.Verb = "update"
	case http.MethodPatch:
		info.Verb = "patch"
	case http.MethodDelete:
		info.Verb = "delete"
	default:
		info.Verb = strings.ToLower(method)
	}
	if legacyWatch {
		info.Verb = "watch"
	}
	if len(parts) >= 1 && parts[0] == "namespaces" && len(parts) >= 2 {
		info.Namespace = parts[1]
		if len(parts) >= 3 && !namespaceSubresources[parts[2]] {
			parts = parts[2:]
		}
	}
	info.Resource = parts[0]
	if len(parts) >= 2 {
		info.Name = parts[1]
	}
	if len(parts) >= 3 {
		info.Subresource = parts[2]
	}
	query := u.Query()
	if info.Name == "" && info.Verb == "get" {
		if isTrue(query.Get("watch")) {
			info.Verb = "watch"
		} else {
			info.Verb = "list"
		}
		info.Name = nameFromFieldSelector(query.Get("fieldSelector"))
	} else if info.Name == "" && info.Verb == "watch" {
		info.Name = nameFromFieldSelector(query.Get("fieldSelector"))
	}
	if info.Name == "" && info.Verb == "delete" {
		info.Verb = "deletecollection"
	}
	return info
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

func isTrue(v string) bool { return v == "true" || v == "1" }

// nameFromFieldSelector returns X of a selector that requires metadata.name=X (or ==X).
func nameFromFieldSelector(selector string) string {
	for _, term := range strings.Split(selector, ",") {
		term = strings.TrimSpace(term)
		if strings.HasPrefix(term, "metadata.name!=") {
			continue
		}
		if v, ok := strings.CutPrefix(term, "metadata.name=="); ok {
			return v
		}
		if v, ok := strings.CutPrefix(term, "metadata.name="); ok {
			return v
		}
	}
	return ""
}

// String is how the log names the request: "list pods in ns", "get nodeallocations/n1".
func (r requestInfo) String() string {
	if !r.IsResource {
		return r.Verb + " (not a resource)"
	}
	s := r.Verb + " " + r.Resource
	if r.Subresource != "" {
		s += "/" + r.Subresource
	}
	if r.Name != "" {
		s += " " + r.Name
	}
	if r.Namespace != "" {
		s += " in " + r.Namespace
	}
	return s
}
