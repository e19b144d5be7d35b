package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

type config struct {
	url      string
	token    string
	body     []byte
	rate     int
	duration time.Duration
	conns    int
	caFile   string
}

// result is what star-flood prints.
type result struct {
	Sent     int            `json:"sent"`
	ByStatus map[string]int `json:"by_status"`
	Errors   int            `json:"errors"`
	Seconds  float64        `json:"seconds"`
	Rate     float64        `json:"rate"`
	// The first transport error, for the log ("" when none).
	FirstError string `json:"first_error,omitempty"`
}

type tally struct {
	mu  sync.Mutex
	res result
}

func (t *tally) add(code int, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.res.Sent++
	if err != nil {
		t.res.Errors++
		if t.res.FirstError == "" {
			t.res.FirstError = err.Error()
		}
		return
	}
	t.res.ByStatus[strconv.Itoa(code)]++
}

func client(c config) (*http.Client, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: c.conns, MaxConnsPerHost: c.conns}
	if c.caFile != "" {
		pem, err := os.ReadFile(c.caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s: no PEM certificate", c.caFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}, nil
}

func post(hc *http.Client, c config) (int, error) {
	req, err := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(c.body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, nil
}

// run paces requests at c.rate for c.duration over c.conns workers; a request whose
// turn comes while every worker is busy waits for one (the rate achieved says so).
func run(c config) (result, error) {
	hc, err := client(c)
	if err != nil {
		return result{}, err
	}
	t := &tally{res: result{ByStatus: map[string]int{}}}
	ticks := make(chan struct{}, c.conns)
	var wg sync.WaitGroup
	for i := 0; i < c.conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range ticks {
				t.add(post(hc, c))
			}
		}()
	}
	start := time.Now()
	total := int(c.duration.Seconds() * float64(c.rate))
	for i := 0; i < total; i++ {
		if wait := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(c.rate))); wait > 0 {
			time.Sleep(wait)
		}
		ticks <- struct{}{}
	}
	close(ticks)
	wg.Wait()
	t.res.Seconds = time.Since(start).Seconds()
	t.res.Rate = float64(t.res.Sent) / t.res.Seconds
	return t.res, nil
}
