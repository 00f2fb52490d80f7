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

// decodeWith feeds messages (grouped by connection) to a decoder script,
// one JSON line each, and returns the text decoded from each message.
func decodeWith(t *testing.T, mode string, conns [][][]byte, cmd *exec.Cmd) [][]string {
	t.Helper()
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	for ci, msgs := range conns {
		for _, m := range msgs {
			if err := enc.Encode(map[string]any{"mode": mode, "conn": ci, "msg": base64.StdEncoding.EncodeToString(m)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v: %s", cmd.Path, err, stderr.Bytes())
	}
	got := make([][]string, len(conns))
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Conn int    `json:"conn"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("decoder line %q: %v", sc.Bytes(), err)
		}
		got[line.Conn] = append(got[line.Conn], line.Text)
	}
	for ci := range conns {
		if len(got[ci]) != len(conns[ci]) {
			t.Fatalf("connection %d: %d messages decoded, want %d", ci, len(got[ci]), len(conns[ci]))
		}
	}
	return got
}

// realDecoders returns the decoder commands of a mode: discord.py's (the
// conformance venv's python, CONCORD_PY) for both, and Node's zlib for
// zlib-stream (Node 20 has no zstd).
func realDecoders(t *testing.T, mode string) []*exec.Cmd {
	t.Helper()
	py := os.Getenv("CONCORD_PY")
	if py == "" {
		t.Fatal("CONCORD_PY is not set: run hack/test-deps.sh and source ~/.cache/concord/test-env.sh (the conformance venv has discord.py and zstandard)")
	}
	cmds := []*exec.Cmd{exec.Command(py, "testdata/stream_decode.py")}
	if mode == "zlib-stream" {
		node, err := exec.LookPath("node")
		if err != nil {
			t.Fatalf("node is not installed (hack/test-deps.sh installs it for the discord.js conformance tests): %v", err)
		}
		cmds = append(cmds, exec.Command(node, "testdata/zlib_inflate.js"))
	}
	return cmds
}

// TestStreamParkRealDecoders decodes a session whose encoder the node
// parked twice while it was idle (and which got a heartbeat ACK while
// parked) with the clients' own decoders, one decoder object for the
// connection: each message must decode to exactly its payload.
func TestStreamParkRealDecoders(t *testing.T) {
	for _, mode := range []string{"zlib-stream", "zstd-stream"} {
		t.Run(mode, func(t *testing.T) {
			rec := recordParkedSession(t, mode)
			for _, cmd := range realDecoders(t, mode) {
				got := decodeWith(t, mode, [][][]byte{rec.msgs}, cmd)
				for i, text := range got[0] {
					var f wireFrame
					if err := json.Unmarshal([]byte(text), &f); err != nil {
						t.Fatalf("%s: message %d decoded to %q, not one JSON payload: %v", cmd.Path, i, text, err)
					}
					if !f.matches(rec.want[i]) {
						t.Fatalf("%s: message %d: op %d t %v d %s, want %s", cmd.Path, i, f.Op, deref(f.T), f.D, rec.want[i])
					}
				}
			}
		})
	}
}

// TestStreamParkScriptRealDecoders runs TestStreamParkContinues's script
// (parks, control frames while parked, runs a fresh encoder codes with
// repeat offsets) and, for zstd, the repeat-offset probe, through the
// clients' decoders: the reference zstd library (libzstd, through
// zstandard) and zlib itself.
func TestStreamParkScriptRealDecoders(t *testing.T) {
	steps := parkTestSteps()
	for _, comp := range []compression{compressStream, compressZstdStream} {
		mode := map[compression]string{compressStream: "zlib-stream", compressZstdStream: "zstd-stream"}[comp]
		t.Run(mode, func(t *testing.T) {
			msgs, want, _ := runParkScript(t, comp, steps)
			conns := [][][]byte{msgs}
			wants := [][]string{nil}
			prev := 0
			for _, w := range want {
				wants[0] = append(wants[0], string(w[prev:]))
				prev = len(w)
			}
			if comp == compressZstdStream {
				msg := []byte(`{"d":"xxxxxxxxxxxxxxxxxxxxxxxxabcdabcdabcdabcd1234567812345678123456780000"}`)
				conns = append(conns, [][]byte{zstdRepResetStream(t, msg)})
				wants = append(wants, []string{string(repResetWant(msg))})
			}
			for _, cmd := range realDecoders(t, mode) {
				got := decodeWith(t, mode, conns, cmd)
				for ci := range conns {
					for i := range got[ci] {
						if got[ci][i] != wants[ci][i] {
							t.Fatalf("%s: connection %d message %d decoded to %q, want %q", cmd.Path, ci, i, got[ci][i], wants[ci][i])
						}
					}
				}
			}
		})
	}
}
