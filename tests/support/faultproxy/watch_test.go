package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// chunks is a body that returns one chunk per Read and then blocks until closed.
type chunks struct {
	parts  [][]byte
	closed chan struct{}
}

func newChunks(parts ...[]byte) *chunks { return &chunks{parts: parts, closed: make(chan struct{})} }

func (c *chunks) Read(p []byte) (int, error) {
	if len(c.parts) == 0 {
		<-c.closed
		return 0, errors.New("read on closed body")
	}
	n := copy(p, c.parts[0])
	c.parts[0] = c.parts[0][n:]
	if len(c.parts[0]) == 0 {
		c.parts = c.parts[1:]
	}
	return n, nil
}

func (c *chunks) Close() error {
	select {
	case <-c.closed:
	default:
		close(c.closed)
	}
	return nil
}

func readAll(t *testing.T, r io.Reader) (string, error) {
	t.Helper()
	done := make(chan struct{})
	var buf bytes.Buffer
	var err error
	go func() {
		defer close(done)
		_, err = io.Copy(&buf, r)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end")
	}
	return buf.String(), err
}

func TestAJSONWatchEndsAfterItsEventsAtAnEventBoundary(t *testing.T) {
	body := newChunks([]byte(`{"type":"ADDED","object":{"a":1}}`+"\n"+`{"type":"MOD`), []byte(`IFIED"}`+"\n"+`{"type":"DELETED"}`+"\n"))
	d := newDroppingBody(body, framerFor("application/json"), 2, -1, false, nil)
	got, err := readAll(t, d)
	want := `{"type":"ADDED","object":{"a":1}}` + "\n" + `{"type":"MODIFIED"}` + "\n"
	if err != nil || got != want {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
}

func TestAWatchDroppedAfterNoEventsCarriesNothing(t *testing.T) {
	d := newDroppingBody(newChunks([]byte("{}\n")), jsonFramer{}, 0, -1, false, nil)
	if got, err := readAll(t, d); err != nil || got != "" {
		t.Errorf("got %q, %v", got, err)
	}
}

func TestAProtobufWatchEndsAfterItsFrames(t *testing.T) {
	frame := func(payload string) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
		return append(b, payload...)
	}
	stream := append(append(append(frame("first"), frame("")...), frame("third")...), frame("fourth")...)
	// Split mid-header and mid-payload.
	d := newDroppingBody(newChunks(stream[:2], stream[2:7], stream[7:]), framerFor("application/vnd.kubernetes.protobuf;stream=watch"),
		3, -1, false, nil)
	got, err := readAll(t, d)
	want := string(append(append(frame("first"), frame("")...), frame("third")...))
	if err != nil || got != want {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
}

func TestAWatchEndsAfterItsTimeEvenWhileWaitingForAnEvent(t *testing.T) {
	var reasons []string
	start := time.Now()
	d := newDroppingBody(newChunks([]byte("{}\n")), jsonFramer{}, -1, 100*time.Millisecond, false,
		func(r string) { reasons = append(reasons, r) })
	got, err := readAll(t, d)
	if err != nil || got != "{}\n" || time.Since(start) < 100*time.Millisecond {
		t.Errorf("got %q, %v after %v", got, err, time.Since(start))
	}
	if len(reasons) != 1 || !strings.Contains(reasons[0], "100ms") {
		t.Errorf("reasons %v", reasons)
	}
}

func TestAnAbortedWatchEndsWithAnError(t *testing.T) {
	d := newDroppingBody(newChunks([]byte("{}\n{}\n")), jsonFramer{}, 1, -1, true, nil)
	got, err := readAll(t, d)
	if got != "{}\n" || !errors.Is(err, errWatchAborted) {
		t.Errorf("got %q, %v", got, err)
	}
}

func TestEventsOfAnUnknownStreamAreNotCounted(t *testing.T) {
	if framerFor("application/cbor-seq") != nil || framerFor("") != nil {
		t.Error("a framer for a stream it cannot frame")
	}
	d := newDroppingBody(newChunks([]byte("{}\n")), nil, 0, 50*time.Millisecond, false, nil)
	if got, err := readAll(t, d); err != nil || got != "{}\n" {
		t.Errorf("got %q, %v", got, err)
	}
}
