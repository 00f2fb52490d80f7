package model

import (
	"crypto/rand"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

// defaultChecks is how many sequences `go test` runs (rapid divides it by
// five under -short); -model.checks changes it. workers sequences run at
// once, each worker a rapid.Check of its share against the same server.
const (
	defaultChecks = 2000
	workers       = 2
)

var checks = flag.Int("model.checks", defaultChecks, "number of random action sequences TestModel runs (sets -rapid.checks per worker)")

// TestMain sets rapid's checks from -model.checks and its seed: the one
// given with -rapid.seed, else CONCORD_MODEL_SEED, else a fresh random one
// per run. The seed is printed before the run, so every run — a failing
// one in CI above all — says how to replay it; rapid's own failure message
// adds the seed of the failing sequence itself.
func TestMain(m *testing.M) {
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["rapid.checks"] {
		if err := flag.Set("rapid.checks", strconv.Itoa((*checks+workers-1)/workers)); err != nil {
			panic(err)
		}
	}
	if !set["rapid.seed"] {
		seed := os.Getenv("CONCORD_MODEL_SEED")
		if seed == "" {
			var b [8]byte
			if _, err := rand.Read(b[:]); err != nil {
				panic(err)
			}
			seed = strconv.FormatUint(binary.LittleEndian.Uint64(b[:])>>1, 10)
		}
		if err := flag.Set("rapid.seed", seed); err != nil {
			fmt.Fprintf(os.Stderr, "model: CONCORD_MODEL_SEED=%q: %v\n", seed, err)
			os.Exit(2)
		}
	}
	fmt.Printf("model: rapid seed %s (replay: go test -count=1 -run TestModel ./test/model/ -rapid.seed=%[1]s)\n", flag.Lookup("rapid.seed").Value)
	os.Exit(m.Run())
}

// TestModel runs random sequences of actions by three people, a bot and
// the guild owner against a real server and checks every REST answer and
// every gateway dispatch against the reference model (world_test.go):
// no action the model forbids succeeds, every action it allows does, and
// no user receives any content or id of a channel at a moment the model
// says they could not see it. A failing sequence is shrunk by rapid to a
// minimal one and printed action by action.
func TestModel(t *testing.T) {
	s := startServer(t)
	st := &stats{allowed: map[string]int{}, refused: map[string]int{}}
	t.Cleanup(func() { t.Logf("allowed %v; refused %v; dispatches checked %d", st.allowed, st.refused, st.events) })
	for i := range workers {
		t.Run("worker-"+strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			runModel(t, s, st, i)
		})
	}
}

// runModel is one worker's rapid.Check. Every worker runs from the one
// printed seed; worker k first draws and drops k values, so the workers
// explore different sequences that the seed still replays.
func runModel(t *testing.T, s *server, st *stats, worker int) {
	rapid.Check(t, func(t *rapid.T) {
		for k := range worker {
			rapid.Uint64().Draw(t, "worker offset "+strconv.Itoa(k))
		}
		w := newWorld(t, s)
		w.stats = st
		step := func(fn func(*rapid.T)) func(*rapid.T) {
			return func(t *rapid.T) {
				w.action++
				fn(t)
				w.snap()
			}
		}
		t.Repeat(map[string]func(*rapid.T){
			"join":      step(w.join),
			"leave":     step(w.leave),
			"role":      step(w.role),
			"overwrite": step(w.overwrite),
			"rolebits":  step(w.editRole),
			"channels":  step(w.channels),
			"typing":    step(w.typing),
			"pin":       step(w.pin),
			"react":     step(w.react),
			"send":      step(w.send),
			"send2":     step(w.send),
			"edit":      step(w.edit),
			"delete":    step(w.remove),
			"bulk":      step(w.bulk),
			"history":   step(w.history),
			"get":       step(w.get),
			"dm":        step(w.openDM),
			"dmsend":    step(w.sendDM),
			"reconnect": step(w.reconnect),
			"drop":      step(w.drop),
			"resume":    step(w.resume),
		})
		w.finish(t)
	})
}

// stats counts what the sequences exercised, so a run shows that allowed
// and forbidden outcomes of each action kind both occurred.
type stats struct {
	mu      sync.Mutex
	allowed map[string]int
	refused map[string]int
	events  int
}

func (s *stats) count(what string, allowed bool) {
	kind, _, _ := strings.Cut(what, " ")
	s.mu.Lock()
	defer s.mu.Unlock()
	if allowed {
		s.allowed[kind]++
	} else {
		s.refused[kind]++
	}
}
