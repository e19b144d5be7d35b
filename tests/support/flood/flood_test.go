package main

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

func TestFloodCountsEveryStatusAndSendsTheToken(t *testing.T) {
	var seen, authorized atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1)%2 == 0 {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.Header.Get("Authorization") == "Bearer tok" {
			authorized.Add(1)
		}
	}))
	defer srv.Close()
	res, err := run(config{url: srv.URL, token: "tok", body: []byte("{}"), rate: 200,
		duration: 100 * time.Millisecond, conns: 4})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 20 || res.ByStatus["200"]+res.ByStatus["401"] != 20 || res.Errors != 0 {
		t.Fatalf("got %+v, want 20 sent, all answered", res)
	}
	if int(authorized.Load()) != res.ByStatus["200"] {
		t.Fatalf("%d requests carried the token, %d answered 200", authorized.Load(), res.ByStatus["200"])
	}
}

func TestFloodCountsTransportErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	url := srv.URL
	srv.Close()
	res, err := run(config{url: url, body: nil, rate: 50, duration: 100 * time.Millisecond, conns: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != res.Sent || res.Sent != 5 || res.FirstError == "" {
		t.Fatalf("got %+v, want 5 transport errors", res)
	}
}

func TestFlagsNameTheBadField(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--rate", "1"}, "--url: required"},
		{[]string{"--url", "http://x", "--rate", "0"}, "--rate: must be > 0, got 0"},
		{[]string{"--url", "http://x", "--conns", "-1"}, "--conns: must be > 0, got -1"},
	} {
		if _, err := parseFlags(c.args); err == nil || err.Error() != c.want {
			t.Errorf("%v: got %v, want %q", c.args, err, c.want)
		}
	}
}
