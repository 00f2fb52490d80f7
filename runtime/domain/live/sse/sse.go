// Package sse writes and reads Server-Sent Events as the WHATWG HTML
// standard defines the text/event-stream format: the gateway's encoder
// and a client (a parser and a dialer) that tests, benchmarks and Go
// viewers use.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// AppendEvent appends one event to buf: "event:", "id:" when id is not
// empty, one "data:" line per line of data, and the blank line that
// dispatches it.
func AppendEvent(buf []byte, typ, id string, data []byte) []byte {
	if typ != "" {
		buf = append(buf, "event: "...)
		buf = append(buf, typ...)
		buf = append(buf, '\n')
	}
	if id != "" {
		buf = append(buf, "id: "...)
		buf = append(buf, id...)
		buf = append(buf, '\n')
	}
	for {
		i := bytes.IndexAny(data, "\r\n")
		buf = append(buf, "data: "...)
		if i < 0 {
			buf = append(buf, data...)
			buf = append(buf, '\n')
			break
		}
		buf = append(buf, data[:i]...)
		buf = append(buf, '\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	return append(buf, '\n')
}

// AppendComment appends a comment line (": text"), which clients ignore
// and which keeps idle connections alive through proxies and NATs.
func AppendComment(buf []byte, text string) []byte {
	buf = append(buf, ": "...)
	buf = append(buf, text...)
	return append(buf, "\n\n"...)
}

// Event is one dispatched event.
type Event struct {
	// Type is the event field, "message" when absent.
	Type string
	// ID is the last event ID after this event (it persists across events,
	// as in a browser); HasID says whether this event set it.
	ID    string
	HasID bool
	// Data is the event's data lines joined by "\n".
	Data []byte
}

// ErrLineTooLong is returned for a line longer than the Reader's limit.
var ErrLineTooLong = errors.New("sse: line too long")

// Reader parses an event stream.
type Reader struct {
	r   *bufio.Reader
	max int
	// lastID persists across events.
	lastID string
	// Retry is the last reconnection time the server set, in ms (0: none).
	Retry int
	// Comments counts comment lines seen (pings).
	Comments int
	// OnComment, when set, is called with each comment line's text (the
	// reading goroutine calls it).
	OnComment func(text []byte)
}

// NewReader returns a Reader of r whose lines are at most maxLine bytes
// (default 1 MiB when maxLine <= 0).
func NewReader(r io.Reader, maxLine int) *Reader {
	if maxLine <= 0 {
		maxLine = 1 << 20
	}
	return &Reader{r: bufio.NewReaderSize(r, 4096), max: maxLine}
}

// readLine returns the next line without its terminator (CRLF, LF or CR).
func (p *Reader) readLine() ([]byte, error) {
	var line []byte
	for {
		b, err := p.r.ReadByte()
		if err != nil {
			if err == io.EOF && len(line) > 0 {
				// A final unterminated line is discarded, as the standard says.
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		switch b {
		case '\n':
			return line, nil
		case '\r':
			if nb, err := p.r.Peek(1); err == nil && nb[0] == '\n' {
				p.r.ReadByte()
			}
			return line, nil
		}
		if len(line) >= p.max {
			return nil, ErrLineTooLong
		}
		line = append(line, b)
	}
}

// Next returns the next dispatched event. It returns io.EOF when the
// stream ends between events.
func (p *Reader) Next() (Event, error) {
	var (
		typ     string
		data    []byte
		hasData bool
		hasID   bool
	)
	for {
		line, err := p.readLine()
		if err != nil {
			return Event{}, err
		}
		if len(line) == 0 {
			if !hasData {
				// Nothing to dispatch: reset the buffers.
				typ, hasID = "", false
				continue
			}
			if typ == "" {
				typ = "message"
			}
			return Event{Type: typ, ID: p.lastID, HasID: hasID, Data: data}, nil
		}
		if line[0] == ':' {
			p.Comments++
			if p.OnComment != nil {
				p.OnComment(bytes.TrimPrefix(line[1:], []byte(" ")))
			}
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "event":
			typ = string(value)
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			data = append(data, value...)
			hasData = true
			if len(data) > p.max {
				return Event{}, ErrLineTooLong
			}
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				p.lastID = string(value)
				hasID = true
			}
		case "retry":
			if n, err := strconv.Atoi(string(value)); err == nil && n >= 0 && isDigits(value) {
				p.Retry = n
			}
		}
	}
}

func isDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

// String describes e for test failures.
func (e Event) String() string {
	return fmt.Sprintf("event=%s id=%s data=%s", e.Type, e.ID, e.Data)
}
