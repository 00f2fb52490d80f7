package fleet

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/domain/voice"
	"github.com/concord-chat/concord/runtime/domain/voice/token"
)

// watchRegistry adds the voice nodes' snapshot to memRegistry.
type watchRegistry struct {
	*memRegistry
	nodes []registry.Node
}

func (w *watchRegistry) Watch(ctx context.Context, role string) (<-chan registry.Snapshot, error) {
	ch := make(chan registry.Snapshot, 1)
	if role == NodeRole {
		ch <- registry.Snapshot{Revision: 1, Nodes: w.nodes}
	}
	go func() { <-ctx.Done(); close(ch) }()
	return ch, nil
}

// TestRegistryCommands: the fleet of a cluster posts the guild's commands
// to the node hosting the server (found by the node name in its load
// report), signed with the key the guild handed it, in the order decided,
// retrying a server error.
func TestRegistryCommands(t *testing.T) {
	key, _ := token.GenerateKey()
	v := token.Verifier{Keys: []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}}
	got := make(chan token.Command, 10)
	var mu sync.Mutex
	fail := 1 // the first post fails: the fleet retries it
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != voice.ControlPath {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		f := fail > 0
		fail--
		mu.Unlock()
		if f {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		b, _ := io.ReadAll(r.Body)
		c, err := v.VerifyCommand(string(b), time.Now())
		if err != nil {
			t.Errorf("command did not verify: %v", err)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		got <- c
		_ = json.NewEncoder(w).Encode(voice.ControlResult{Applied: true})
	}))
	t.Cleanup(hs.Close)

	mem := &memRegistry{kv: map[string][]byte{}}
	reg := &watchRegistry{memRegistry: mem, nodes: []registry.Node{{Name: "pod-7", Roles: []string{NodeRole}, HTTPAddr: strings.TrimPrefix(hs.URL, "http://")}}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := (Reporter{Registry: reg}).ReportLoad(ctx, voice.Load{Server: "sfu-a", Node: "pod-7", Endpoint: "127.0.0.1:1", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	f := NewRegistry(reg, RegistryConfig{Poll: 20 * time.Millisecond})
	ran := make(chan struct{})
	go func() { defer close(ran); _ = f.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-ran })

	// Without the key nothing is sent (and nothing blocks).
	f.SetServerVoiceState(ctx, "sfu-a", 1, 2, 3, true, false)
	f.UseSigningKey(key)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := f.controlAddr("sfu-a"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the fleet never learned the node's address")
		}
		_ = f.Refresh(ctx)
		time.Sleep(10 * time.Millisecond) // the watch and the poll have no event to await here
	}
	f.SetServerVoiceState(ctx, "sfu-a", 1, 2, 3, true, true)
	f.Disconnect(ctx, "sfu-a", 1, 2, 3)
	want := []token.Command{
		{Server: "sfu-a", Op: token.OpState, GuildID: 1, ChannelID: 2, UserID: 3, Mute: true, Deaf: true},
		{Server: "sfu-a", Op: token.OpDisconnect, GuildID: 1, ChannelID: 2, UserID: 3},
	}
	for i, w := range want {
		select {
		case c := <-got:
			if c.Server != w.Server || c.Op != w.Op || c.GuildID != w.GuildID || c.UserID != w.UserID || c.Mute != w.Mute || c.Deaf != w.Deaf {
				t.Fatalf("command %d: %+v, want %+v", i, c, w)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("command %d never arrived", i)
		}
	}
	select {
	case c := <-got:
		t.Fatalf("unexpected command %+v (the one sent without a key?)", c)
	default:
	}
}
