// star-flood sends HTTP(S) POST requests at a fixed rate for a fixed time and prints
// what came back as one JSON line: how many were sent, the count of each status code,
// transport errors, and the rate achieved. The abuse tests use it as a tenant hammering
// an endpoint (reports, the rendezvous store).
//
//	star-flood --url URL [--token T] [--body-file F | --body S] [--rate N] [--duration D]
//	           [--conns N] [--ca-file F]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "star-flood:", err)
		os.Exit(2)
	}
	res, err := run(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "star-flood:", err)
		os.Exit(1)
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("star-flood", flag.ContinueOnError)
	fs.StringVar(&c.url, "url", "", "where to POST (required)")
	fs.StringVar(&c.token, "token", "", "bearer token to send (none when empty)")
	body := fs.String("body", "{}", "request body")
	bodyFile := fs.String("body-file", "", "request body from this file (instead of --body)")
	fs.IntVar(&c.rate, "rate", 100, "requests per second, > 0")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long to send, > 0")
	fs.IntVar(&c.conns, "conns", 8, "concurrent connections, > 0")
	fs.StringVar(&c.caFile, "ca-file", "", "PEM CA bundle that verifies an https URL")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.body = []byte(*body)
	if *bodyFile != "" {
		b, err := os.ReadFile(*bodyFile)
		if err != nil {
			return c, fmt.Errorf("--body-file: %w", err)
		}
		c.body = b
	}
	return c, c.check()
}

func (c config) check() error {
	switch {
	case c.url == "":
		return fmt.Errorf("--url: required")
	case c.rate <= 0:
		return fmt.Errorf("--rate: must be > 0, got %d", c.rate)
	case c.duration <= 0:
		return fmt.Errorf("--duration: must be > 0, got %s", c.duration)
	case c.conns <= 0:
		return fmt.Errorf("--conns: must be > 0, got %d", c.conns)
	}
	return nil
}
