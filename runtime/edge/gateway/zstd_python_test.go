//go:build integration

package gateway

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
)

// TestZstdStreamIndependentDecoder feeds a zstd-stream session's messages,
// across a RESUME, to the Python zstandard package's streaming decoder (the
// reference zstd library, not the encoder's own Go decoder), one message
// at a time, and requires each to decode on its own to exactly one
// complete payload. CONCORD_PY is the conformance venv's python
// (hack/test-deps.sh).
func TestZstdStreamIndependentDecoder(t *testing.T) {
	py := os.Getenv("CONCORD_PY")
	if py == "" {
		t.Fatal("CONCORD_PY is not set: run hack/test-deps.sh and source ~/.cache/concord/test-env.sh (the conformance venv has zstandard)")
	}
	rec := recordZstdSession(t)
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	for ci, msgs := range rec.conns {
		for _, m := range msgs {
			if err := enc.Encode(map[string]any{"conn": ci, "msg": base64.StdEncoding.EncodeToString(m)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	cmd := exec.Command(py, "testdata/zstd_decode.py")
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python decoder: %v: %s", err, stderr.Bytes())
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	var got [2][]wireFrame
	for sc.Scan() {
		var line struct {
			Conn int    `json:"conn"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("decoder line %q: %v", sc.Bytes(), err)
		}
		var f wireFrame
		if err := json.Unmarshal([]byte(line.Text), &f); err != nil {
			t.Fatalf("connection %d: a message decoded to %q, not one JSON payload: %v", line.Conn, line.Text, err)
		}
		got[line.Conn] = append(got[line.Conn], f)
	}
	for ci, want := range rec.want {
		if len(got[ci]) != len(want) {
			t.Fatalf("connection %d: %d payloads decoded, want %d", ci, len(got[ci]), len(want))
		}
		for i, w := range want {
			if !got[ci][i].matches(w) {
				t.Fatalf("connection %d payload %d: op %d t %v d %s, want %s", ci, i, got[ci][i].Op, deref(got[ci][i].T), got[ci][i].D, w)
			}
		}
	}
}
