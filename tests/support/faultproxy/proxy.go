package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// proxy forwards requests to the API server, applying the first matching rule's fault.
type proxy struct {
	rules    *ruleSet
	traffic  *traffic
	upstream *url.URL
	rp       *httputil.ReverseProxy
	log      *log.Logger
}

type faultKey struct{}

// newProxy forwards to upstream: with withCert (the proxy's own client certificate) unless
// the request carries an Authorization header, which goes on unchanged through
// withoutCert (the API server would otherwise authenticate the certificate, not the token).
func newProxy(upstream *url.URL, withCert, withoutCert http.RoundTripper, rules *ruleSet, seen *traffic,
	logger *log.Logger) *proxy {
	p := &proxy{rules: rules, traffic: seen, upstream: upstream, log: logger}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      authRouting{withCert: withCert, withoutCert: withoutCert},
		FlushInterval:  -1,
		ModifyResponse: p.modifyResponse,
		ErrorLog:       logger,
	}
	return p
}

type authRouting struct{ withCert, withoutCert http.RoundTripper }

func (a authRouting) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("Authorization") != "" {
		return a.withoutCert.RoundTrip(r)
	}
	return a.withCert.RoundTrip(r)
}

// rewrite points the request at the API server. A client that authenticated to the proxy
// with a certificate of the CA (and sent no Authorization header) is impersonated: the
// proxy's identity acts as the certificate's user (CN) and groups (O), so that RBAC and
// the Node authorizer see the client, not the proxy.
func (p *proxy) rewrite(pr *httputil.ProxyRequest) {
	pr.SetURL(p.upstream)
	in := pr.In
	if in.TLS == nil || len(in.TLS.VerifiedChains) == 0 || in.Header.Get("Authorization") != "" {
		return
	}
	for h := range pr.Out.Header {
		if strings.HasPrefix(strings.ToLower(h), "impersonate-") {
			pr.Out.Header.Del(h)
		}
	}
	subject := in.TLS.VerifiedChains[0][0].Subject
	pr.Out.Header.Set("Impersonate-User", subject.CommonName)
	for _, g := range subject.Organization {
		pr.Out.Header.Add("Impersonate-Group", g)
	}
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	info := parseRequest(r.Method, r.URL)
	p.traffic.seen(info)
	if info.Verb == "watch" {
		defer p.traffic.watchOpened()()
	}
	rule, ok := p.rules.take(info)
	if !ok {
		p.rp.ServeHTTP(w, r)
		return
	}
	of := "every"
	if rule.Count > 0 {
		of = fmt.Sprintf("%d/%d", rule.Applied, rule.Count)
	}
	prefix := fmt.Sprintf("rule %d (%s): %s:", rule.ID, of, info)
	if rule.LatencyMs > 0 {
		p.log.Printf("%s delayed %d ms", prefix, rule.LatencyMs)
		select {
		case <-time.After(time.Duration(rule.LatencyMs) * time.Millisecond):
		case <-r.Context().Done():
			return
		}
	}
	if rule.Status != 0 {
		p.log.Printf("%s answered %d", prefix, rule.Status)
		writeStatus(w, rule)
		return
	}
	if rule.DropWatchAfterEvents != nil || rule.DropWatchAfterMs != nil {
		r = r.WithContext(context.WithValue(r.Context(), faultKey{}, faultOf{rule: rule, prefix: prefix}))
	}
	p.rp.ServeHTTP(w, r)
}

type faultOf struct {
	rule   ruleState
	prefix string
}

// modifyResponse wraps the body of a watch that a rule drops.
func (p *proxy) modifyResponse(resp *http.Response) error {
	f, ok := resp.Request.Context().Value(faultKey{}).(faultOf)
	if !ok || resp.StatusCode != http.StatusOK {
		return nil
	}
	events, after := -1, time.Duration(-1)
	if f.rule.DropWatchAfterEvents != nil {
		events = *f.rule.DropWatchAfterEvents
	}
	if f.rule.DropWatchAfterMs != nil {
		after = time.Duration(*f.rule.DropWatchAfterMs) * time.Millisecond
	}
	contentType := resp.Header.Get("Content-Type")
	framer := framerFor(contentType)
	if events >= 0 && framer == nil {
		p.log.Printf("%s cannot count the events of a %q stream: dropped by time only", f.prefix, contentType)
	}
	how := "ended"
	if f.rule.Abort {
		how = "aborted"
	}
	resp.Body = newDroppingBody(resp.Body, framer, events, after, f.rule.Abort, func(reason string) {
		p.log.Printf("%s watch %s %s", f.prefix, how, reason)
	})
	return nil
}

var reasons = map[int]string{
	400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed",
	406: "NotAcceptable", 409: "Conflict", 410: "Expired", 413: "RequestEntityTooLarge",
	415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests", 500: "InternalError",
	503: "ServiceUnavailable", 504: "Timeout",
}

// writeStatus answers as the API server answers errors: a metav1.Status.
func writeStatus(w http.ResponseWriter, rule ruleState) {
	msg := rule.Message
	if msg == "" {
		msg = fmt.Sprintf("injected by star-faultproxy (rule %d)", rule.ID)
	}
	reason := reasons[rule.Status]
	if reason == "" {
		reason = "Unknown"
	}
	status := map[string]any{
		"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
		"status": "Failure", "message": msg, "reason": reason, "code": rule.Status,
	}
	if rule.RetryAfterSeconds > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(rule.RetryAfterSeconds))
		status["details"] = map[string]any{"retryAfterSeconds": rule.RetryAfterSeconds}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rule.Status)
	json.NewEncoder(w).Encode(status)
}

// controlHandler serves the control API:
//
//	GET    /faults       {"rules": [rule with "id", "matched", "applied"], ...}
//	POST   /faults       a rule or an array of rules; 201 {"rules": [the rules with their ids]}
//	DELETE /faults       removes every rule: {"removed": N}
//	DELETE /faults/{id}  removes one: {"removed": 1}, 404 if there is none
//	GET    /traffic      {"requests": {resource: {verb: N}}, "activeWatches": N}
func controlHandler(rules *ruleSet, seen *traffic, logger *log.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /traffic", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, seen.snapshot())
	})
	mux.HandleFunc("GET /faults", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"rules": rules.list()})
	})
	mux.HandleFunc("POST /faults", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": err.Error()})
			return
		}
		parsed, err := parseRules(body)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": err.Error()})
			return
		}
		added := rules.add(parsed)
		for _, r := range added {
			text, _ := json.Marshal(r.Rule)
			logger.Printf("rule %d added: %s", r.ID, text)
		}
		writeJSON(w, http.StatusCreated, map[string]any{"rules": added})
	})
	mux.HandleFunc("DELETE /faults", func(w http.ResponseWriter, r *http.Request) {
		n := rules.remove(0)
		logger.Printf("%d rules removed", n)
		writeJSON(w, http.StatusOK, map[string]any{"removed": n})
	})
	mux.HandleFunc("DELETE /faults/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.Atoi(r.PathValue("id"))
		if err != nil || id <= 0 {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "id: not a rule id: " + r.PathValue("id")})
			return
		}
		if rules.remove(id) == 0 {
			writeJSON(w, http.StatusNotFound, map[string]any{"error": fmt.Sprintf("id: no rule %d", id)})
			return
		}
		logger.Printf("rule %d removed", id)
		writeJSON(w, http.StatusOK, map[string]any{"removed": 1})
	})
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
