package sse

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
)

// Stream is an open event stream.
type Stream struct {
	*Reader
	// Response is the HTTP response; its body is the stream.
	Response *http.Response
	cancel   context.CancelFunc
}

// Close ends the stream.
func (s *Stream) Close() error {
	s.cancel()
	return s.Response.Body.Close()
}

// Dial opens url with Accept: text/event-stream and the given headers
// (Authorization, Last-Event-ID). A status other than 200 or another
// content type is an error that carries the body's start.
func Dial(ctx context.Context, client *http.Client, url string, header http.Header) (*Stream, error) {
	if client == nil {
		client = http.DefaultClient
	}
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("sse: request: %w", err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("sse: dial %s: %w", url, err)
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode != http.StatusOK || mt != "text/event-stream" {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		cancel()
		return nil, &StatusError{Code: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Body: string(b)}
	}
	return &Stream{Reader: NewReader(resp.Body, 0), Response: resp, cancel: cancel}, nil
}

// StatusError is a stream that did not open.
type StatusError struct {
	Code        int
	ContentType string
	Body        string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("sse: status %d (%s): %s", e.Code, e.ContentType, e.Body)
}
