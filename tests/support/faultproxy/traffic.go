package main

import "sync"

// traffic counts the requests the proxy has seen, by resource and verb as RBAC names them,
// and the watches it is streaming now, so that a test can ask how often a client retried
// or whether its watch is open.
type traffic struct {
	mu       sync.Mutex
	requests map[string]map[string]int // resource ("pods", "pods/status") -> verb -> requests
	watches  int
}

func newTraffic() *traffic { return &traffic{requests: map[string]map[string]int{}} }

// seen counts a request.
func (t *traffic) seen(info requestInfo) {
	resource := info.Resource
	if info.Subresource != "" {
		resource += "/" + info.Subresource
	}
	if !info.IsResource {
		resource = "-"
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.requests[resource] == nil {
		t.requests[resource] = map[string]int{}
	}
	t.requests[resource][info.Verb]++
}

// watchOpened counts a watch being streamed until the returned func is called.
func (t *traffic) watchOpened() func() {
	t.mu.Lock()
	t.watches++
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		t.watches--
		t.mu.Unlock()
	}
}

// snapshot is what GET /traffic answers.
func (t *traffic) snapshot() map[string]any {
	t.mu.Lock()
	defer t.mu.Unlock()
	requests := map[string]map[string]int{}
	for r, verbs := range t.requests {
		requests[r] = map[string]int{}
		for v, n := range verbs {
			requests[r][v] = n
		}
	}
	return map[string]any{"requests": requests, "activeWatches": t.watches}
}
