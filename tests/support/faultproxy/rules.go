package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
)

// Rule is one fault: which requests it matches and what it does to them. It is what
// POST /faults takes (one object or an array) and what GET /faults lists.
type Rule struct {
	// Which requests, as the API server names them for RBAC; every field given must match.
	Verb      string `json:"verb"`                // get list watch create update patch delete deletecollection, or "*"
	Resource  string `json:"resource"`            // plural: "pods", "pods/status"; as in RBAC "*" is any resource but no subresource, "pods/*" any of pods' subresources
	Namespace string `json:"namespace,omitempty"` // "": any namespace, and cluster-scoped resources
	Name      string `json:"name,omitempty"`      // "": any; a list or watch has one only with fieldSelector metadata.name=X
	Count     int    `json:"count,omitempty"`     // the first Count matching requests get the fault; 0: all of them

	// What happens to them. Latency may go with either of the others.
	Status            int    `json:"status,omitempty"`            // answer with this code (400..599) and a Status body instead of forwarding
	RetryAfterSeconds int    `json:"retryAfterSeconds,omitempty"` // with Status: a Retry-After header (client-go retries 429 and 5xx that carry one)
	Message           string `json:"message,omitempty"`           // with Status: the Status's message
	LatencyMs         int    `json:"latencyMs,omitempty"`         // wait this long before answering or forwarding
	// Watches only: end the stream once it has carried this many events (0: as soon as it
	// started), or this long after it started, whichever comes first.
	DropWatchAfterEvents *int `json:"dropWatchAfterEvents,omitempty"`
	DropWatchAfterMs     *int `json:"dropWatchAfterMs,omitempty"`
	// With a watch drop: reset the connection (HTTP/2 RST_STREAM, HTTP/1.1 close without
	// the final chunk), as a network failure would; false: end the response cleanly, as
	// the API server does when a watch times out.
	Abort bool `json:"abort,omitempty"`
}

var verbs = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}

// validate says what is wrong with the rule, naming the field.
func (r *Rule) validate() error {
	if r.Verb == "" {
		return errors.New(`verb: required (one of ` + strings.Join(verbs, ", ") + `, or "*")`)
	}
	if r.Verb != "*" && !slices.Contains(verbs, r.Verb) {
		return fmt.Errorf(`verb: %q is not one of %s, or "*"`, r.Verb, strings.Join(verbs, ", "))
	}
	if r.Resource == "" {
		return errors.New(`resource: required (a plural such as "pods", "pods/status" or "*")`)
	}
	resource, sub, _ := strings.Cut(r.Resource, "/")
	if resource == "" || strings.Contains(sub, "/") || strings.HasSuffix(r.Resource, "/") || resource != strings.ToLower(resource) {
		return fmt.Errorf(`resource: %q is not RESOURCE or RESOURCE/SUBRESOURCE in lower case (e.g. "pods", "pods/status")`, r.Resource)
	}
	if r.Count < 0 {
		return fmt.Errorf("count: %d is negative (0 means every matching request)", r.Count)
	}
	if r.Status != 0 && (r.Status < 400 || r.Status > 599) {
		return fmt.Errorf("status: %d is not an error code (400..599)", r.Status)
	}
	if r.RetryAfterSeconds < 0 {
		return fmt.Errorf("retryAfterSeconds: %d is negative", r.RetryAfterSeconds)
	}
	if r.RetryAfterSeconds > 0 && r.Status == 0 {
		return errors.New("retryAfterSeconds: only with status")
	}
	if r.Message != "" && r.Status == 0 {
		return errors.New("message: only with status")
	}
	if r.LatencyMs < 0 {
		return fmt.Errorf("latencyMs: %d is negative", r.LatencyMs)
	}
	drop := r.DropWatchAfterEvents != nil || r.DropWatchAfterMs != nil
	if r.DropWatchAfterEvents != nil && *r.DropWatchAfterEvents < 0 {
		return fmt.Errorf("dropWatchAfterEvents: %d is negative", *r.DropWatchAfterEvents)
	}
	if r.DropWatchAfterMs != nil && *r.DropWatchAfterMs < 0 {
		return fmt.Errorf("dropWatchAfterMs: %d is negative", *r.DropWatchAfterMs)
	}
	if drop && r.Verb != "watch" {
		return fmt.Errorf(`dropWatchAfterEvents, dropWatchAfterMs: only with verb "watch", not %q`, r.Verb)
	}
	if drop && r.Status != 0 {
		return errors.New("status: not with dropWatchAfterEvents or dropWatchAfterMs (a watch that is answered with an error never starts)")
	}
	if r.Abort && !drop {
		return errors.New("abort: only with dropWatchAfterEvents or dropWatchAfterMs")
	}
	if r.Status == 0 && r.LatencyMs == 0 && !drop {
		return errors.New("no fault: give status, latencyMs, dropWatchAfterEvents or dropWatchAfterMs")
	}
	return nil
}

// matches says whether the rule selects the request.
func (r *Rule) matches(req requestInfo) bool {
	if !req.IsResource {
		return false
	}
	if r.Verb != "*" && r.Verb != req.Verb {
		return false
	}
	resource, sub, _ := strings.Cut(r.Resource, "/")
	if resource != "*" && resource != req.Resource {
		return false
	}
	if sub != req.Subresource && (sub != "*" || req.Subresource == "") {
		return false
	}
	if r.Namespace != "" && r.Namespace != req.Namespace {
		return false
	}
	return r.Name == "" || r.Name == req.Name
}

// parseRules reads one rule or an array of rules, strictly: an unknown field is an error.
func parseRules(data []byte) ([]Rule, error) {
	data = bytes.TrimSpace(data)
	var rules []Rule
	if len(data) > 0 && data[0] == '[' {
		if err := decodeStrict(data, &rules); err != nil {
			return nil, err
		}
	} else {
		var one Rule
		if err := decodeStrict(data, &one); err != nil {
			return nil, err
		}
		rules = []Rule{one}
	}
	for i := range rules {
		if err := rules[i].validate(); err != nil {
			if len(rules) > 1 {
				return nil, fmt.Errorf("rule %d: %w", i, err)
			}
			return nil, err
		}
	}
	return rules, nil
}

func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("not a rule: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("not a rule: more than one JSON value")
	}
	return nil
}

// ruleState is a rule in the proxy with its counters.
type ruleState struct {
	ID int `json:"id"`
	Rule
	Matched int `json:"matched"` // requests its selector matched
	Applied int `json:"applied"` // of them, those that got its fault
}

// ruleSet holds the rules in the order they were added. Safe for concurrent use.
type ruleSet struct {
	mu     sync.Mutex
	rules  []*ruleState
	nextID int
}

// add appends rules and returns them with their ids.
func (s *ruleSet) add(rules []Rule) []ruleState {
	s.mu.Lock()
	defer s.mu.Unlock()
	var added []ruleState
	for _, r := range rules {
		s.nextID++
		st := &ruleState{ID: s.nextID, Rule: r}
		s.rules = append(s.rules, st)
		added = append(added, *st)
	}
	return added
}

// take counts the request against every rule it matches and returns a copy of the
// first of them that has faults left (with its counters after this request), if any.
func (s *ruleSet) take(req requestInfo) (ruleState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var chosen *ruleState
	for _, r := range s.rules {
		if !r.matches(req) {
			continue
		}
		r.Matched++
		if chosen == nil && (r.Count == 0 || r.Applied < r.Count) {
			r.Applied++
			chosen = r
		}
	}
	if chosen == nil {
		return ruleState{}, false
	}
	return *chosen, true
}

func (s *ruleSet) list() []ruleState {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ruleState, 0, len(s.rules))
	for _, r := range s.rules {
		out = append(out, *r)
	}
	return out
}

// remove drops the rule with id (all rules for id 0) and returns how many it dropped.
func (s *ruleSet) remove(id int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == 0 {
		n := len(s.rules)
		s.rules = nil
		return n
	}
	for i, r := range s.rules {
		if r.ID == id {
			s.rules = slices.Delete(s.rules, i, i+1)
			return 1
		}
	}
	return 0
}
