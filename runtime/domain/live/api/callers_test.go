package api_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	userstore "github.com/concord-chat/concord/runtime/adapters/store/pebble"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live/api"
	"github.com/concord-chat/concord/runtime/domain/live/livetest"
)

// countingUsers counts account reads.
type countingUsers struct {
	store.Users
	reads atomic.Int64
}

func (u *countingUsers) GetUser(ctx context.Context, id snowflake.ID) (store.User, error) {
	u.reads.Add(1)
	return u.Users.GetUser(ctx, id)
}

func startWithUsers(t *testing.T, ttl time.Duration) (*livetest.Env, *countingUsers) {
	t.Helper()
	us, err := userstore.New(userstore.Config{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { us.Close() })
	users := &countingUsers{Users: us}
	e := livetest.Start(t, livetest.Backends{Users: users}, livetest.Options{NoRouter: true, API: api.Config{CallerTTL: ttl}})
	return e, users
}

func postStatus(e *livetest.Env, token, stream string, i int) (int, float64) {
	r := e.Do("POST", "/v1/streams/"+stream+"/comments", token, map[string]any{"text": fmt.Sprintf("c%d", i)})
	var body struct {
		Code float64 `json:"code"`
	}
	if r.Status != 201 {
		r.JSON(e.T, &body)
	}
	return r.Status, body.Code
}

// An author's account is read once per CallerTTL, not once per comment.
func TestAuthorReadOncePerTTL(t *testing.T) {
	e, users := startWithUsers(t, time.Hour)
	alice := e.NewUser()
	s := e.CreateStream(alice, "cached")
	e.Post(alice, s.ID, "first", 0)
	before := users.reads.Load()
	for i := range 5 {
		if st, code := postStatus(e, alice.Token, s.ID, i); st != 201 {
			t.Fatalf("post %d = %d %v", i, st, code)
		}
	}
	if n := users.reads.Load() - before; n != 0 {
		t.Fatalf("%d account reads for 5 comments within the TTL, want 0", n)
	}
	off, offUsers := startWithUsers(t, -1)
	bob := off.NewUser()
	s2 := off.CreateStream(bob, "uncached")
	off.Post(bob, s2.ID, "first", 0)
	before = offUsers.reads.Load()
	for i := range 3 {
		postStatus(off, bob.Token, s2.ID, i)
	}
	if n := offUsers.reads.Load() - before; n != 3 {
		t.Fatalf("%d account reads for 3 comments with the cache off, want 3", n)
	}
}

// A token reset made through another process (the generation bumped in
// the store, which this process's issuer never hears of) stops the old
// token within CallerTTL, although the token itself stays cached.
func TestTokenResetElsewhereTakesEffectWithinTTL(t *testing.T) {
	e, users := startWithUsers(t, 300*time.Millisecond)
	alice := e.NewUser()
	s := e.CreateStream(alice, "reset")
	e.Post(alice, s.ID, "before", 0)
	u, err := users.GetUser(context.Background(), alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	u.TokenGeneration++
	if err := users.PutUser(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	i := 0
	e.Eventually(30*time.Second, func() string {
		i++
		st, code := postStatus(e, alice.Token, s.ID, i)
		if st != 401 || code != 40001 {
			return fmt.Sprintf("old token after a reset elsewhere: %d %v, want 401 40001", st, code)
		}
		return ""
	})
}

// A reset through this process's issuer: the new token works at once
// (its generation is newer than the cached account's, so the account is
// read again), and from then on the old one is refused at once, cached
// or not.
func TestTokenResetHereNewTokenAtOnce(t *testing.T) {
	e, users := startWithUsers(t, time.Hour)
	alice := e.NewUser()
	s := e.CreateStream(alice, "reset")
	e.Post(alice, s.ID, "before", 0)
	if err := e.Issuer.Revoke(context.Background(), alice.ID); err != nil {
		t.Fatal(err)
	}
	u, err := users.GetUser(context.Background(), alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	fresh := e.Issuer.Mint(u)
	if st, code := postStatus(e, fresh, s.ID, 1); st != 201 {
		t.Fatalf("new token right after the reset: %d %v, want 201", st, code)
	}
	if st, code := postStatus(e, alice.Token, s.ID, 2); st != 401 || code != 40001 {
		t.Fatalf("old token after the new one was used: %d %v, want 401 40001", st, code)
	}
	if st, code := postStatus(e, alice.Token, s.ID, 3); st != 401 {
		t.Fatalf("old token again: %d %v, want 401", st, code)
	}
}
