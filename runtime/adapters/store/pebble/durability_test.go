package pebble_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/adapters/store/pebble"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// childEnv makes the test binary act as the writer process of
// TestDurabilityKill9: it writes into the directory it names and prints an
// "ack" line after every acknowledged write, until it is killed.
const childEnv = "CONCORD_PEBBLE_DURABILITY_DIR"

// TestDurabilityKill9 proves that every acknowledged write survives a
// kill -9 of the process: a child process (this test binary re-executed)
// writes messages and users from several goroutines and prints each write
// once acknowledged; the parent kills it with SIGKILL mid-stream, reopens
// the database and checks that every acknowledged write is there.
func TestDurabilityKill9(t *testing.T) {
	if dir := os.Getenv(childEnv); dir != "" {
		durabilityChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("spawns a process")
	}
	dir := t.TempDir()
	for round := range 3 { // kill the same database several times
		cmd := exec.Command(os.Args[0], "-test.run=^TestDurabilityKill9$", "-test.count=1")
		cmd.Env = append(os.Environ(), childEnv+"="+dir)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var msgs, users []string
		sc := bufio.NewScanner(out)
		killAt := 300 + 200*round
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 3 || f[0] != "ack" {
				continue
			}
			if f[1] == "msg" {
				msgs = append(msgs, f[2])
			} else {
				users = append(users, f[2])
			}
			if len(msgs)+len(users) == killAt {
				if err := cmd.Process.Kill(); err != nil { // SIGKILL
					t.Fatal(err)
				}
			}
		}
		// Acks already in the pipe when the kill landed count as well.
		err = cmd.Wait()
		if len(msgs)+len(users) < killAt {
			t.Fatalf("round %d: child stopped after %d acks: %v", round, len(msgs)+len(users), err)
		}
		if ws, ok := cmd.ProcessState.Sys().(interface{ Signaled() bool }); ok && !ws.Signaled() {
			t.Fatalf("round %d: child was not killed: %v", round, err)
		}

		s := open(t, dir)
		ctx := context.Background()
		ch := durabilityChannel(round)
		for _, v := range msgs {
			id, _ := snowflake.Parse(v)
			m, err := s.GetMessage(ctx, ch, id)
			if err != nil {
				t.Fatalf("round %d: acknowledged message %v lost: %v", round, id, err)
			}
			if m.Content != "durable "+v {
				t.Fatalf("round %d: message %v content %q", round, id, m.Content)
			}
		}
		for _, name := range users {
			if _, err := s.GetUserByName(ctx, name); err != nil {
				t.Fatalf("round %d: acknowledged user %s lost: %v", round, name, err)
			}
		}
		// The bucket index survived with the rows: scroll-back finds all.
		var seen int
		var before snowflake.ID
		for {
			page, err := s.ListMessages(ctx, ch, store.HistoryQuery{Before: before, Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				break
			}
			seen += len(page)
			before = page[len(page)-1].ID
		}
		if seen < len(msgs) {
			t.Fatalf("round %d: history holds %d messages, %d acknowledged", round, seen, len(msgs))
		}
		t.Logf("round %d: %d messages and %d users acknowledged before kill -9, all recovered (%d in history)",
			round, len(msgs), len(users), seen)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func durabilityChannel(round int) snowflake.ID { return snowflake.ID(1000 + round) }

func durabilityChild(dir string) {
	s, err := pebble.New(pebble.Config{Dir: dir, Logger: quietLogger()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	// Which round: the number of channels already written.
	round := 0
	ctx := context.Background()
	for {
		if b, _ := s.Buckets(ctx, durabilityChannel(round)); len(b) == 0 {
			break
		}
		round++
	}
	ch := durabilityChannel(round)
	var mu sync.Mutex
	ack := func(kind, v string) {
		mu.Lock()
		fmt.Fprintf(os.Stdout, "ack %s %s\n", kind, v) // unbuffered: a write(2) per line
		mu.Unlock()
	}
	t0 := time.Now().Add(-time.Duration(round) * 30 * 24 * time.Hour)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				// Spread over many buckets (one per ~hour of id time).
				id := snowflake.FromTime(t0.Add(time.Duration(i)*97*time.Minute)) | snowflake.ID(w)
				if i%10 == 9 {
					name := fmt.Sprintf("durable_%d_%d_%d", round, w, i)
					if err := s.CreateUser(ctx, store.User{ID: id, Username: name}); err != nil {
						fmt.Fprintln(os.Stderr, "child:", err)
						os.Exit(2)
					}
					ack("user", name)
					continue
				}
				m := store.Message{ID: id, ChannelID: ch, Content: "durable " + id.String()}
				if err := s.PutMessage(ctx, m); err != nil {
					fmt.Fprintln(os.Stderr, "child:", err)
					os.Exit(2)
				}
				ack("msg", id.String())
			}
		}()
	}
	go func() { time.Sleep(time.Minute); os.Exit(3) }() // never outlive a lost parent
	wg.Wait()
}
