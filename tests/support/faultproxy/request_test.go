package main

import (
	"net/url"
	"testing"
)

func TestParseRequestNamesRequestsAsTheAPIServerDoes(t *testing.T) {
	cases := []struct {
		method, target string
		want           requestInfo
	}{
		{"GET", "/api/v1/namespaces/ns/pods", requestInfo{IsResource: true, Verb: "list", Namespace: "ns", Resource: "pods"}},
		{"GET", "/api/v1/namespaces/ns/pods?watch=true&resourceVersion=5", requestInfo{IsResource: true, Verb: "watch", Namespace: "ns", Resource: "pods"}},
		{"GET", "/api/v1/namespaces/ns/pods?watch=1", requestInfo{IsResource: true, Verb: "watch", Namespace: "ns", Resource: "pods"}},
		{"GET", "/api/v1/namespaces/ns/pods?watch=false", requestInfo{IsResource: true, Verb: "list", Namespace: "ns", Resource: "pods"}},
		{"GET", "/api/v1/watch/namespaces/ns/pods", requestInfo{IsResource: true, Verb: "watch", Namespace: "ns", Resource: "pods"}},
		{"GET", "/api/v1/namespaces/ns/pods/p", requestInfo{IsResource: true, Verb: "get", Namespace: "ns", Resource: "pods", Name: "p"}},
		{"GET", "/api/v1/pods", requestInfo{IsResource: true, Verb: "list", Resource: "pods"}},
		{"PUT", "/api/v1/namespaces/ns/pods/p/status", requestInfo{IsResource: true, Verb: "update", Namespace: "ns", Resource: "pods", Subresource: "status", Name: "p"}},
		{"PATCH", "/api/v1/namespaces/ns/pods/p/status", requestInfo{IsResource: true, Verb: "patch", Namespace: "ns", Resource: "pods", Subresource: "status", Name: "p"}},
		{"POST", "/api/v1/namespaces/ns/pods", requestInfo{IsResource: true, Verb: "create", Namespace: "ns", Resource: "pods"}},
		{"POST", "/api/v1/namespaces/ns/pods/p/binding", requestInfo{IsResource: true, Verb: "create", Namespace: "ns", Resource: "pods", Subresource: "binding", Name: "p"}},
		{"DELETE", "/api/v1/namespaces/ns/pods/p", requestInfo{IsResource: true, Verb: "delete", Namespace: "ns", Resource: "pods", Name: "p"}},
		{"DELETE", "/api/v1/namespaces/ns/pods", requestInfo{IsResource: true, Verb: "deletecollection", Namespace: "ns", Resource: "pods"}},
		{"GET", "/apis/star.dev/v1alpha1/nodeallocations?watch=true&fieldSelector=metadata.name%3Dn1", requestInfo{IsResource: true, Verb: "watch", Group: "star.dev", Resource: "nodeallocations", Name: "n1"}},
		{"GET", "/apis/star.dev/v1alpha1/nodeallocations?fieldSelector=metadata.name%3D%3Dn1", requestInfo{IsResource: true, Verb: "list", Group: "star.dev", Resource: "nodeallocations", Name: "n1"}},
		{"GET", "/apis/star.dev/v1alpha1/nodeallocations?fieldSelector=metadata.name%21%3Dn1", requestInfo{IsResource: true, Verb: "list", Group: "star.dev", Resource: "nodeallocations"}},
		{"PATCH", "/apis/star.dev/v1alpha1/nodeallocations/n1/status", requestInfo{IsResource: true, Verb: "patch", Group: "star.dev", Resource: "nodeallocations", Subresource: "status", Name: "n1"}},
		{"GET", "/apis/star.dev/v1alpha1/namespaces/ns/trainingjobs/j", requestInfo{IsResource: true, Verb: "get", Group: "star.dev", Namespace: "ns", Resource: "trainingjobs", Name: "j"}},
		{"GET", "/api/v1/namespaces/ns", requestInfo{IsResource: true, Verb: "get", Namespace: "ns", Resource: "namespaces", Name: "ns"}},
		{"PUT", "/api/v1/namespaces/ns/finalize", requestInfo{IsResource: true, Verb: "update", Namespace: "ns", Resource: "namespaces", Subresource: "finalize", Name: "ns"}},
		{"GET", "/api/v1/namespaces", requestInfo{IsResource: true, Verb: "list", Resource: "namespaces"}},
		{"GET", "/api", requestInfo{Verb: "get"}},
		{"GET", "/api/v1", requestInfo{Verb: "get"}},
		{"GET", "/apis/star.dev/v1alpha1", requestInfo{Verb: "get"}},
		{"GET", "/version", requestInfo{Verb: "get"}},
		{"GET", "/openapi/v3", requestInfo{Verb: "get"}},
	}
	for _, c := range cases {
		u, err := url.Parse(c.target)
		if err != nil {
			t.Fatal(err)
		}
		if got := parseRequest(c.method, u); got != c.want {
			t.Errorf("%s %s: got %+v, want %+v", c.method, c.target, got, c.want)
		}
	}
}
