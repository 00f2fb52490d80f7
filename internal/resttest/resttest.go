// Package resttest is the JSON client of Concord's HTTP APIs that the
// test packages share: it sends a request with a JSON body and a token,
// and decodes a successful answer into the value the test hands it.
//
// Do reports what happened and leaves the verdict to the caller (a test
// that expects a 429, or retries through a node being killed); Call is
// for setup steps and fails the test on anything but a 2xx answer.
package resttest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// callTimeout bounds one Call, so that a node that stops answering fails
// the test that called it instead of hanging the test binary.
const callTimeout = time.Minute

// Do sends method url with body encoded as JSON (no body when body is
// nil) and token as the Authorization header (none when token is
// empty), through client (http.DefaultClient when nil). A 2xx answer is
// decoded into out when out is not nil. It returns the status and the
// answer's body; err is a request that could not be sent or read, or a
// 2xx body that did not decode.
func Do(ctx context.Context, client *http.Client, method, url, token string, body, out any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, fmt.Errorf("encode the body of %s %s: %w", method, url, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("read the answer to %s %s: %w", method, url, err)
	}
	if resp.StatusCode/100 == 2 && out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, raw, fmt.Errorf("decode the answer to %s %s (%q): %w", method, url, raw, err)
		}
	}
	return resp.StatusCode, raw, nil
}

// Call sends a request to the REST API (/api/v10) of the node at addr
// (host:port) with Do and fails the test unless the answer is 2xx and
// decodes into out.
func Call(t testing.TB, addr, token, method, path string, body, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	status, raw, err := Do(ctx, nil, method, "http://"+addr+"/api/v10"+path, token, body, out)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if status/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, path, status, raw)
	}
}
