package main

import (
	"strings"
	"testing"
)

func intp(v int) *int { return &v }

func TestRulesMatchVerbResourceNamespaceAndName(t *testing.T) {
	listPods := requestInfo{IsResource: true, Verb: "list", Namespace: "ns", Resource: "pods"}
	getPod := requestInfo{IsResource: true, Verb: "get", Namespace: "ns", Resource: "pods", Name: "p"}
	patchStatus := requestInfo{IsResource: true, Verb: "patch", Namespace: "ns", Resource: "pods", Subresource: "status", Name: "p"}
	listNodes := requestInfo{IsResource: true, Verb: "list", Resource: "nodes"}
	cases := []struct {
		rule Rule
		req  requestInfo
		want bool
	}{
		{Rule{Verb: "list", Resource: "pods"}, listPods, true},
		{Rule{Verb: "list", Resource: "pods", Namespace: "ns"}, listPods, true},
		{Rule{Verb: "list", Resource: "pods", Namespace: "other"}, listPods, false},
		{Rule{Verb: "get", Resource: "pods"}, listPods, false},
		{Rule{Verb: "*", Resource: "pods"}, listPods, true},
		{Rule{Verb: "list", Resource: "*"}, listNodes, true},
		{Rule{Verb: "list", Resource: "pods", Namespace: "ns"}, listNodes, false},
		{Rule{Verb: "get", Resource: "pods", Name: "p"}, getPod, true},
		{Rule{Verb: "get", Resource: "pods", Name: "q"}, getPod, false},
		{Rule{Verb: "list", Resource: "pods", Name: "p"}, listPods, false},
		{Rule{Verb: "patch", Resource: "pods"}, patchStatus, false}, // as in RBAC: pods is not pods/status
		{Rule{Verb: "patch", Resource: "pods/status"}, patchStatus, true},
		{Rule{Verb: "patch", Resource: "pods/*"}, patchStatus, true},
		{Rule{Verb: "patch", Resource: "*/status"}, patchStatus, true},
		{Rule{Verb: "get", Resource: "pods/*"}, getPod, false},
		{Rule{Verb: "get", Resource: "*"}, requestInfo{Verb: "get"}, false}, // /version and the like
	}
	for _, c := range cases {
		if got := c.rule.matches(c.req); got != c.want {
			t.Errorf("%+v on %s: got %v, want %v", c.rule, c.req, got, c.want)
		}
	}
}

func TestParseRulesNamesTheFieldThatIsWrong(t *testing.T) {
	cases := []struct{ json, want string }{
		{`{"resource":"pods","status":500}`, "verb: required"},
		{`{"verb":"lsit","resource":"pods","status":500}`, `verb: "lsit" is not one of`},
		{`{"verb":"list","status":500}`, "resource: required"},
		{`{"verb":"list","resource":"Pods","status":500}`, `resource: "Pods" is not`},
		{`{"verb":"list","resource":"pods/status/x","status":500}`, `resource: "pods/status/x" is not`},
		{`{"verb":"list","resource":"pods"}`, "no fault"},
		{`{"verb":"list","resource":"pods","status":200}`, "status: 200 is not an error code"},
		{`{"verb":"list","resource":"pods","status":500,"count":-1}`, "count: -1 is negative"},
		{`{"verb":"list","resource":"pods","latencyMs":-5}`, "latencyMs: -5 is negative"},
		{`{"verb":"list","resource":"pods","retryAfterSeconds":1,"latencyMs":1}`, "retryAfterSeconds: only with status"},
		{`{"verb":"list","resource":"pods","message":"x","latencyMs":1}`, "message: only with status"},
		{`{"verb":"list","resource":"pods","dropWatchAfterMs":10}`, `only with verb "watch", not "list"`},
		{`{"verb":"watch","resource":"pods","dropWatchAfterEvents":-1}`, "dropWatchAfterEvents: -1 is negative"},
		{`{"verb":"watch","resource":"pods","dropWatchAfterEvents":1,"status":500}`, "status: not with dropWatch"},
		{`{"verb":"watch","resource":"pods","abort":true,"latencyMs":1}`, "abort: only with dropWatch"},
		{`{"verb":"list","resource":"pods","status":"500"}`, `Rule.status of type int`},
		{`{"verb":"list","resource":"pods","statuss":500}`, `unknown field "statuss"`},
		{`[{"verb":"list","resource":"pods","status":500},{"verb":"list"}]`, "rule 1: resource: required"},
		{`{"verb":"list","resource":"pods","status":500} {}`, "more than one JSON value"},
	}
	for _, c := range cases {
		_, err := parseRules([]byte(c.json))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got error %v, want one containing %q", c.json, err, c.want)
		}
	}
	rules, err := parseRules([]byte(`[{"verb":"watch","resource":"pods","dropWatchAfterEvents":0},
		{"verb":"list","resource":"nodeallocations","status":429,"retryAfterSeconds":1,"count":2}]`))
	if err != nil || len(rules) != 2 || rules[0].DropWatchAfterEvents == nil || *rules[0].DropWatchAfterEvents != 0 {
		t.Fatalf("valid rules: %+v, %v", rules, err)
	}
}

func TestTheFirstRuleWithFaultsLeftAppliesAndEveryMatchCounts(t *testing.T) {
	var s ruleSet
	s.add([]Rule{
		{Verb: "list", Resource: "pods", Status: 500, Count: 2},
		{Verb: "*", Resource: "pods", LatencyMs: 10},
	})
	list := requestInfo{IsResource: true, Verb: "list", Resource: "pods"}
	var got []int
	for i := 0; i < 4; i++ {
		r, ok := s.take(list)
		if !ok {
			t.Fatalf("request %d: no rule", i)
		}
		got = append(got, r.ID)
	}
	if want := []int{1, 1, 2, 2}; !equal(got, want) {
		t.Errorf("rules applied %v, want %v", got, want)
	}
	if _, ok := s.take(requestInfo{IsResource: true, Verb: "list", Resource: "nodes"}); ok {
		t.Error("a rule applied to list nodes")
	}
	states := s.list()
	if states[0].Matched != 4 || states[0].Applied != 2 || states[1].Matched != 4 || states[1].Applied != 2 {
		t.Errorf("counters %+v", states)
	}
	if n := s.remove(1); n != 1 || len(s.list()) != 1 || s.list()[0].ID != 2 {
		t.Errorf("remove(1) = %d, left %+v", n, s.list())
	}
	if n := s.remove(7); n != 0 {
		t.Errorf("remove(7) = %d", n)
	}
	if added := s.add([]Rule{{Verb: "get", Resource: "pods", Status: 404}}); added[0].ID != 3 {
		t.Errorf("ids are not reused: got %d", added[0].ID)
	}
	if n := s.remove(0); n != 2 || len(s.list()) != 0 {
		t.Errorf("remove(0) = %d", n)
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
