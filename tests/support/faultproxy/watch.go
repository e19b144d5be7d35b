package main

import (
	"errors"
	"io"
	"mime"
	"sync"
	"time"
)

// errWatchAborted is what a dropped watch's body returns when the rule says abort: the
// reverse proxy then aborts the handler, which resets the client's stream.
var errWatchAborted = errors.New("watch aborted by star-faultproxy")

// eventFramer finds where watch events end in a stream of bytes.
type eventFramer interface {
	// next returns the index just past the first event end in p, or -1 if p ends within an event.
	next(p []byte) int
}

// jsonFramer: the API server writes one JSON object per line.
type jsonFramer struct{}

func (jsonFramer) next(p []byte) int {
	for i, b := range p {
		if b == '\n' {
			return i + 1
		}
	}
	return -1
}

// protobufFramer: each event is a 4-byte big-endian length and that many bytes.
type protobufFramer struct {
	header    int    // header bytes read of the current frame
	length    uint32 // the frame's length as far as read
	remaining uint32 // payload bytes left once the header is complete
}

func (f *protobufFramer) next(p []byte) int {
	for i := 0; i < len(p); {
		if f.header < 4 {
			f.length = f.length<<8 | uint32(p[i])
			f.header++
			i++
			if f.header == 4 {
				f.remaining = f.length
				if f.remaining == 0 {
					f.header, f.length = 0, 0
					return i
				}
			}
			continue
		}
		n := uint32(len(p) - i)
		if n < f.remaining {
			f.remaining -= n
			return -1
		}
		i += int(f.remaining)
		f.header, f.length, f.remaining = 0, 0, 0
		return i
	}
	return -1
}

// framerFor returns the framer of a watch response's content type, nil if it has none.
func framerFor(contentType string) eventFramer {
	mediaType, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil
	}
	switch mediaType {
	case "application/json":
		return jsonFramer{}
	case "application/vnd.kubernetes.protobuf":
		return &protobufFramer{}
	}
	return nil
}

// droppingBody passes a watch stream through until it has carried `events` whole events
// (if events >= 0) or `after` has passed since it was made (if after >= 0), then ends it:
// io.EOF, or errWatchAborted with abort.
type droppingBody struct {
	body   io.ReadCloser
	framer eventFramer // nil: events are not counted
	left   int         // events still to pass; < 0: unlimited
	abort  bool
	timer  *time.Timer
	onDrop func(reason string)

	mu      sync.Mutex
	dropped bool
	reason  string
}

func newDroppingBody(body io.ReadCloser, framer eventFramer, events int, after time.Duration, abort bool,
	onDrop func(string)) *droppingBody {
	d := &droppingBody{body: body, framer: framer, left: events, abort: abort, onDrop: onDrop}
	if events >= 0 && framer == nil {
		d.left = -1
	}
	if after >= 0 {
		d.timer = time.AfterFunc(after, func() {
			if d.drop("after " + after.String()) {
				body.Close() // unblocks a Read waiting for the next event
			}
		})
	}
	return d
}

// drop marks the stream dropped; false if it was already.
func (d *droppingBody) drop(reason string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dropped {
		return false
	}
	d.dropped, d.reason = true, reason
	if d.onDrop != nil {
		d.onDrop(reason)
	}
	return true
}

func (d *droppingBody) isDropped() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dropped
}

func (d *droppingBody) end() error {
	if d.abort {
		return errWatchAborted
	}
	return io.EOF
}

func (d *droppingBody) Read(p []byte) (int, error) {
	if d.left == 0 {
		d.drop("after its events")
	}
	if d.isDropped() {
		return 0, d.end()
	}
	n, err := d.body.Read(p)
	if d.isDropped() { // the timer fired while this Read waited
		return 0, d.end()
	}
	if d.left > 0 {
		for off := 0; off < n; {
			k := d.framer.next(p[off:n])
			if k < 0 {
				break
			}
			off += k
			d.left--
			if d.left == 0 {
				d.drop("after its events")
				return off, nil // the rest of p is not passed on; the next Read ends the stream
			}
		}
	}
	return n, err
}

func (d *droppingBody) Close() error {
	if d.timer != nil {
		d.timer.Stop()
	}
	return d.body.Close()
}
