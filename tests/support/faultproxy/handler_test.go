package main

import (
	"bufio"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// testCA is a CA written to files, as the cluster's pki/ca.{crt,key}.
type testCA struct {
	cert              *x509.Certificate
	key               crypto.Signer
	certFile, keyFile string
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	dir := t.TempDir()
	ca := &testCA{cert: cert, key: key, certFile: filepath.Join(dir, "ca.crt"), keyFile: filepath.Join(dir, "ca.key")}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	os.WriteFile(ca.certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(ca.keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
	return ca
}

// client returns a client certificate for user in groups, and its files.
func (ca *testCA) client(t *testing.T, user string, groups ...string) (tls.Certificate, string, string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: user, Organization: groups},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, user+".crt"), filepath.Join(dir, user+".key")
	os.WriteFile(certFile, certPEM, 0o600)
	os.WriteFile(keyFile, keyPEM, 0o600)
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c, certFile, keyFile
}

// seen is what the upstream saw of one request.
type seen struct {
	path, user, auth, impersonateUser string
	impersonateGroups                 []string
}

// fakeAPIServer answers lists with {} and watches with the events written to its channel.
type fakeAPIServer struct {
	*httptest.Server
	mu     sync.Mutex
	seen   []seen
	events chan string
}

func newFakeAPIServer(t *testing.T, ca *testCA) *fakeAPIServer {
	f := &fakeAPIServer{events: make(chan string, 16)}
	f.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := seen{path: r.URL.RequestURI(), auth: r.Header.Get("Authorization"),
			impersonateUser: r.Header.Get("Impersonate-User"), impersonateGroups: r.Header.Values("Impersonate-Group")}
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			s.user = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		f.mu.Lock()
		f.seen = append(f.seen, s)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") != "true" {
			io.WriteString(w, `{"kind":"PodList","items":[]}`)
			return
		}
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for {
			select {
			case e := <-f.events:
				io.WriteString(w, e+"\n")
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	}))
	serving, err := servingCert(ca.cert, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	f.TLS = &tls.Config{Certificates: []tls.Certificate{serving}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: pool}
	f.EnableHTTP2 = true
	f.StartTLS()
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPIServer) last() seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[len(f.seen)-1]
}

// testProxy is the proxy in front of a fake API server, with a client that trusts it.
type testProxy struct {
	upstream *fakeAPIServer
	rules    *ruleSet
	url      string
	control  string
	ca       *testCA
	pool     *x509.CertPool
}

func newTestProxy(t *testing.T) *testProxy {
	ca := newTestCA(t)
	upstream := newFakeAPIServer(t, ca)
	_, adminCert, adminKey := ca.client(t, "admin", "system:masters")
	f := flags{upstream: upstream.URL, caCert: ca.certFile, caKey: ca.keyFile, clientCert: adminCert, clientKey: adminKey}
	p, rules, serverTLS, err := setup(f, log.New(io.Discard, "", 0))
	if err != nil {
		t.Fatal(err)
	}
	server := httptest.NewUnstartedServer(p)
	server.TLS = serverTLS
	server.EnableHTTP2 = true
	server.StartTLS()
	t.Cleanup(server.Close)
	control := httptest.NewServer(controlHandler(rules, p.traffic, log.New(io.Discard, "", 0)))
	t.Cleanup(control.Close)
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return &testProxy{upstream: upstream, rules: rules, url: server.URL, control: control.URL, ca: ca, pool: pool}
}

func (p *testProxy) client(certs ...tls.Certificate) *http.Client {
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: p.pool, Certificates: certs}, ForceAttemptHTTP2: true}}
}

func (p *testProxy) addRule(t *testing.T, rule string) {
	t.Helper()
	resp, err := http.Post(p.control+"/faults", "application/json", strings.NewReader(rule))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST /faults %s: %d %s", rule, resp.StatusCode, body)
	}
}

func get(t *testing.T, c *http.Client, url string, header ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func TestAStatusRuleAnswersItsFirstCountRequestsThenForwards(t *testing.T) {
	p := newTestProxy(t)
	p.addRule(t, `{"verb":"list","resource":"pods","namespace":"ns","status":429,"retryAfterSeconds":3,"count":2}`)
	c := p.client()
	for i := 0; i < 2; i++ {
		resp, body := get(t, c, p.url+"/api/v1/namespaces/ns/pods")
		var status map[string]any
		json.Unmarshal([]byte(body), &status)
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3" || status["kind"] != "Status" ||
			status["reason"] != "TooManyRequests" || status["code"] != 429.0 {
			t.Fatalf("request %d: %d %v %s", i, resp.StatusCode, resp.Header, body)
		}
	}
	if resp, body := get(t, c, p.url+"/api/v1/namespaces/ns/pods"); resp.StatusCode != 200 || !strings.Contains(body, "PodList") {
		t.Fatalf("third: %d %s", resp.StatusCode, body)
	}
	if resp, _ := get(t, c, p.url+"/api/v1/namespaces/other/pods"); resp.StatusCode != 200 {
		t.Fatalf("another namespace: %d", resp.StatusCode)
	}
	resp, body := get(t, c, p.control+"/faults")
	var listed struct{ Rules []ruleState }
	if err := json.Unmarshal([]byte(body), &listed); err != nil || resp.StatusCode != 200 || len(listed.Rules) != 1 ||
		listed.Rules[0].Matched != 3 || listed.Rules[0].Applied != 2 || listed.Rules[0].ID != 1 {
		t.Fatalf("GET /faults: %d %s", resp.StatusCode, body)
	}
}

func TestALatencyRuleDelaysTheRequest(t *testing.T) {
	p := newTestProxy(t)
	p.addRule(t, `{"verb":"get","resource":"pods","name":"slow","latencyMs":300}`)
	c := p.client()
	start := time.Now()
	if resp, _ := get(t, c, p.url+"/api/v1/namespaces/ns/pods/slow"); resp.StatusCode != 200 || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("%d after %v", resp.StatusCode, time.Since(start))
	}
	start = time.Now()
	if get(t, c, p.url+"/api/v1/namespaces/ns/pods/fast"); time.Since(start) > 250*time.Millisecond {
		t.Errorf("another pod took %v", time.Since(start))
	}
}

func TestTheProxyAuthenticatesWithItsCertificateUnlessTheClientSendsAToken(t *testing.T) {
	p := newTestProxy(t)
	c := p.client()
	get(t, c, p.url+"/api/v1/pods")
	if s := p.upstream.last(); s.user != "admin" || s.auth != "" || s.impersonateUser != "" {
		t.Errorf("without a token: %+v", s)
	}
	get(t, c, p.url+"/api/v1/pods", "Authorization", "Bearer abc")
	if s := p.upstream.last(); s.user != "" || s.auth != "Bearer abc" {
		t.Errorf("with a token: %+v", s)
	}
}

func TestAClientCertificateIsImpersonated(t *testing.T) {
	p := newTestProxy(t)
	cert, _, _ := p.ca.client(t, "system:node:n1", "system:nodes", "extra")
	get(t, p.client(cert), p.url+"/api/v1/pods", "Impersonate-User", "someone-else")
	s := p.upstream.last()
	slices.Sort(s.impersonateGroups)
	if s.user != "admin" || s.impersonateUser != "system:node:n1" || strings.Join(s.impersonateGroups, ",") != "extra,system:nodes" {
		t.Errorf("%+v", s)
	}
}

// watch opens a watch through the proxy and returns its lines as they come, closed at its end.
func watch(t *testing.T, c *http.Client, url string) (<-chan string, <-chan error) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	resp, err := c.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("watch: %v %v", resp, err)
	}
	lines, end := make(chan string, 16), make(chan error, 1)
	go func() {
		defer resp.Body.Close()
		r := bufio.NewReader(resp.Body)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				close(lines)
				if err == io.EOF {
					err = nil
				}
				end <- err
				return
			}
			lines <- strings.TrimSpace(line)
		}
	}()
	return lines, end
}

func TestAWatchIsDroppedAfterItsEvents(t *testing.T) {
	for _, abort := range []bool{false, true} {
		t.Run(fmt.Sprintf("abort=%v", abort), func(t *testing.T) {
			p := newTestProxy(t)
			p.addRule(t, fmt.Sprintf(`{"verb":"watch","resource":"pods","dropWatchAfterEvents":2,"abort":%v}`, abort))
			lines, end := watch(t, p.client(), p.url+"/api/v1/namespaces/ns/pods?watch=true")
			for i := 0; i < 3; i++ {
				p.upstream.events <- fmt.Sprintf(`{"type":"ADDED","object":{"n":%d}}`, i)
			}
			var got []string
			for l := range lines {
				got = append(got, l)
			}
			err := <-end
			if len(got) != 2 || got[1] != `{"type":"ADDED","object":{"n":1}}` {
				t.Errorf("events %v", got)
			}
			if abort == (err == nil) {
				t.Errorf("the stream ended with %v", err)
			}
		})
	}
}

func TestAWatchIsDroppedAfterItsTime(t *testing.T) {
	p := newTestProxy(t)
	p.addRule(t, `{"verb":"watch","resource":"pods","namespace":"ns","dropWatchAfterMs":200}`)
	start := time.Now()
	lines, end := watch(t, p.client(), p.url+"/api/v1/namespaces/ns/pods?watch=true")
	p.upstream.events <- `{"type":"ADDED"}`
	for range lines {
	}
	if err := <-end; err != nil || time.Since(start) < 200*time.Millisecond {
		t.Errorf("ended with %v after %v", err, time.Since(start))
	}
}

func TestTheControlAPIRefusesBadRulesAndRemovesRules(t *testing.T) {
	p := newTestProxy(t)
	resp, err := http.Post(p.control+"/faults", "application/json", strings.NewReader(`{"verb":"list","resource":"pods","status":99}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(body), `"error":"status: 99 is not an error code`) {
		t.Errorf("bad rule: %d %s", resp.StatusCode, body)
	}
	p.addRule(t, `[{"verb":"list","resource":"pods","status":500},{"verb":"get","resource":"pods","status":404}]`)
	del := func(path string) (int, string) {
		req, _ := http.NewRequest("DELETE", p.control+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	if code, body := del("/faults/1"); code != 200 || body != `{"removed":1}` {
		t.Errorf("DELETE /faults/1: %d %s", code, body)
	}
	if code, _ := del("/faults/1"); code != 404 {
		t.Errorf("DELETE /faults/1 again: %d", code)
	}
	if code, body := del("/faults"); code != 200 || body != `{"removed":1}` {
		t.Errorf("DELETE /faults: %d %s", code, body)
	}
}

func TestBadFlagsNameTheFlag(t *testing.T) {
	ca := newTestCA(t)
	other := newTestCA(t)
	_, cert, key := ca.client(t, "admin")
	ok := flags{upstream: "https://127.0.0.1:6443", caCert: ca.certFile, caKey: ca.keyFile}
	cases := []struct {
		change func(*flags)
		want   string
	}{
		{func(f *flags) { f.upstream = "" }, "--upstream: required"},
		{func(f *flags) { f.upstream = "127.0.0.1:6443" }, "--upstream: \"127.0.0.1:6443\" is not"},
		{func(f *flags) { f.upstream = "https://127.0.0.1:6443/api" }, "has a path"},
		{func(f *flags) { f.caKey = "" }, "--ca-cert and --ca-key: both required"},
		{func(f *flags) { f.caKey = other.keyFile }, "--ca-key: " + other.keyFile + " is not the key of"},
		{func(f *flags) { f.caCert = "/nonexistent" }, "--ca-cert: open /nonexistent"},
		{func(f *flags) { f.caCert = cert }, "is not a CA certificate"},
		{func(f *flags) { f.clientCert = cert }, "--client-cert and --client-key: give both"},
		{func(f *flags) { f.clientCert, f.clientKey = cert, ca.keyFile }, "--client-cert, --client-key:"},
		{func(f *flags) { f.upstreamCA = key }, "--upstream-ca: " + key + " holds no PEM certificate"},
		{func(f *flags) { f.rulesFile = writeFile(t, `{"verb":"list"}`) }, "--rules: "},
	}
	for _, c := range cases {
		f := ok
		c.change(&f)
		_, _, _, err := setup(f, log.New(io.Discard, "", 0))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error containing %q", err, c.want)
		}
	}
	f := ok
	f.rulesFile = writeFile(t, `[{"verb":"list","resource":"pods","status":500,"count":1}]`)
	if _, rules, _, err := setup(f, log.New(io.Discard, "", 0)); err != nil || len(rules.list()) != 1 {
		t.Errorf("--rules: %v", err)
	}
}

func writeFile(t *testing.T, text string) string {
	path := filepath.Join(t.TempDir(), "rules.json")
	os.WriteFile(path, []byte(text), 0o600)
	return path
}

func TestTrafficCountsRequestsAndTheWatchesOpenNow(t *testing.T) {
	p := newTestProxy(t)
	c := p.client()
	traffic := func() (result struct {
		Requests      map[string]map[string]int
		ActiveWatches int
	}) {
		_, body := get(t, http.DefaultClient, p.control+"/traffic")
		if err := json.Unmarshal([]byte(body), &result); err != nil {
			t.Fatalf("GET /traffic: %s", body)
		}
		return result
	}
	waitForWatches := func(n int) {
		for i := 0; traffic().ActiveWatches != n; i++ {
			if i == 500 {
				t.Fatalf("active watches: %d, want %d", traffic().ActiveWatches, n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for i := 0; i < 2; i++ {
		get(t, c, p.url+"/api/v1/namespaces/ns/pods")
	}
	if n := traffic().Requests["pods"]["list"]; n != 2 {
		t.Fatalf("pods list: %d, want 2", n)
	}
	p.addRule(t, `{"verb":"watch","resource":"pods","dropWatchAfterEvents":1}`)
	lines, end := watch(t, c, p.url+"/api/v1/namespaces/ns/pods?watch=true")
	waitForWatches(1)
	p.upstream.events <- `{"type":"ADDED","object":{"n":0}}`
	for range lines {
	}
	<-end
	waitForWatches(0)
	if n := traffic().Requests["pods"]["watch"]; n != 1 {
		t.Fatalf("pods watch: %d, want 1", n)
	}
}
