// star-faultproxy is a reverse proxy in front of a Kubernetes API server that injects the
// faults a real server does not produce on demand: error answers (500, 429 with
// Retry-After ...), latency, and watches that end or break after a while or a number of
// events. Rules select requests by verb, resource, namespace and name, as RBAC names
// them, and are added and read through a control API on a separate loopback port.
//
//	star-faultproxy --upstream https://127.0.0.1:6443 --ca-cert DIR/pki/ca.crt --ca-key DIR/pki/ca.key \
//	    --client-cert DIR/pki/admin.crt --client-key DIR/pki/admin.key
//
// prints "control on http://127.0.0.1:C" and then, once serving,
// "listening on https://127.0.0.1:P". See README.md for the rules and the control API.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"
)

type flags struct {
	upstream, upstreamCA  string
	clientCert, clientKey string
	caCert, caKey         string
	listen, controlListen string
	rulesFile             string
}

func main() {
	var f flags
	flag.StringVar(&f.upstream, "upstream", "", "the API server, https://HOST:PORT (required)")
	flag.StringVar(&f.upstreamCA, "upstream-ca", "", "CA bundle to verify the API server with (default: --ca-cert)")
	flag.StringVar(&f.clientCert, "client-cert", "", "client certificate the proxy authenticates upstream with (e.g. the cluster admin's)")
	flag.StringVar(&f.clientKey, "client-key", "", "its private key")
	flag.StringVar(&f.caCert, "ca-cert", "", "CA certificate that signs the proxy's serving certificate and verifies clients' certificates (required)")
	flag.StringVar(&f.caKey, "ca-key", "", "the CA's private key (required)")
	flag.StringVar(&f.listen, "listen", "127.0.0.1:0", "address of the proxy (HTTPS)")
	flag.StringVar(&f.controlListen, "control-listen", "127.0.0.1:0", "address of the control API (plain HTTP; keep it on loopback)")
	flag.StringVar(&f.rulesFile, "rules", "", "JSON file with rules to start with (a rule or an array, as POST /faults takes)")
	flag.Parse()
	if flag.NArg() > 0 {
		fail(2, fmt.Errorf("unexpected argument %q", flag.Arg(0)))
	}
	logger := log.New(os.Stderr, "star-faultproxy: ", log.Lmicroseconds)
	if err := run(f, logger); err != nil {
		var usage usageError
		if errors.As(err, &usage) {
			fail(2, err)
		}
		fail(1, err)
	}
}

type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

func fail(code int, err error) {
	fmt.Fprintln(os.Stderr, "star-faultproxy:", err)
	os.Exit(code)
}

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// setup checks the flags and builds what run serves.
func setup(f flags, logger *log.Logger) (*proxy, *ruleSet, *tls.Config, error) {
	if f.upstream == "" {
		return nil, nil, nil, usagef("--upstream: required (the API server, https://HOST:PORT)")
	}
	upstream, err := url.Parse(f.upstream)
	if err != nil || (upstream.Scheme != "https" && upstream.Scheme != "http") || upstream.Host == "" {
		return nil, nil, nil, usagef("--upstream: %q is not http(s)://HOST:PORT", f.upstream)
	}
	if upstream.Path != "" && upstream.Path != "/" || upstream.RawQuery != "" {
		return nil, nil, nil, usagef("--upstream: %q has a path or query; give only scheme, host and port", f.upstream)
	}
	upstream.Path = ""
	if f.caCert == "" || f.caKey == "" {
		return nil, nil, nil, usagef("--ca-cert and --ca-key: both required (the CA that signs the proxy's serving certificate)")
	}
	if (f.clientCert == "") != (f.clientKey == "") {
		return nil, nil, nil, usagef("--client-cert and --client-key: give both or neither")
	}
	ca, caKey, err := loadCA(f.caCert, f.caKey)
	if err != nil {
		return nil, nil, nil, usageError{err}
	}
	serving, err := servingCert(ca, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	upstreamCA := f.upstreamCA
	if upstreamCA == "" {
		upstreamCA = f.caCert
	}
	roots, err := certPool(upstreamCA)
	if err != nil {
		return nil, nil, nil, usagef("--upstream-ca: %w", err)
	}
	var clientCerts []tls.Certificate
	if f.clientCert != "" {
		c, err := tls.LoadX509KeyPair(f.clientCert, f.clientKey)
		if err != nil {
			return nil, nil, nil, usagef("--client-cert, --client-key: %w", err)
		}
		clientCerts = []tls.Certificate{c}
	}
	rules := &ruleSet{}
	if f.rulesFile != "" {
		data, err := os.ReadFile(f.rulesFile)
		if err != nil {
			return nil, nil, nil, usagef("--rules: %w", err)
		}
		parsed, err := parseRules(data)
		if err != nil {
			return nil, nil, nil, usagef("--rules: %s: %w", f.rulesFile, err)
		}
		rules.add(parsed)
	}
	transport := func(certs []tls.Certificate) *http.Transport {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = nil
		t.TLSClientConfig = &tls.Config{RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12}
		t.ForceAttemptHTTP2 = true
		t.MaxIdleConnsPerHost = 100
		return t
	}
	p := newProxy(upstream, transport(clientCerts), transport(nil), rules, newTraffic(), logger)
	clientCAs := x509.NewCertPool()
	clientCAs.AddCert(ca)
	serverTLS := &tls.Config{
		Certificates: []tls.Certificate{serving},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    clientCAs,
		MinVersion:   tls.VersionTLS12,
	}
	return p, rules, serverTLS, nil
}

func certPool(file string) (*x509.CertPool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return pool, nil
}

func run(f flags, logger *log.Logger) error {
	p, rules, serverTLS, err := setup(f, logger)
	if err != nil {
		return err
	}
	controlLn, err := net.Listen("tcp", f.controlListen)
	if err != nil {
		return usagef("--control-listen: %w", err)
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return usagef("--listen: %w", err)
	}
	control := &http.Server{Handler: controlHandler(rules, p.traffic, logger), ErrorLog: logger, ReadHeaderTimeout: 10 * time.Second}
	server := &http.Server{Handler: p, TLSConfig: serverTLS, ErrorLog: logger, ReadHeaderTimeout: 30 * time.Second}
	errs := make(chan error, 2)
	go func() { errs <- control.Serve(controlLn) }()
	go func() { errs <- server.ServeTLS(ln, "", "") }()
	fmt.Printf("control on http://%s\n", controlLn.Addr())
	fmt.Printf("listening on https://%s\n", ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	select {
	case err := <-errs:
		return err
	case <-ctx.Done():
	}
	server.Close()
	control.Close()
	return nil
}
