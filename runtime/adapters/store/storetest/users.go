package storetest

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
)

func newUser(name string) store.User {
	return store.User{
		ID: rid(), Username: name, GlobalName: "Global " + name,
		PasswordHash:    "$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA",
		TokenGeneration: 3, CreatedAt: ms(time.Now()),
	}
}

func testUsers(t *testing.T, s store.Store) {
	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		ctx := ctxT(t)
		u := newUser(rname("alice"))
		noErr(t, "CreateUser", s.CreateUser(ctx, u))
		got, err := s.GetUser(ctx, u.ID)
		noErr(t, "GetUser", err)
		equal(t, "GetUser", got, u)
		got, err = s.GetUserByName(ctx, u.Username)
		noErr(t, "GetUserByName", err)
		equal(t, "GetUserByName", got, u)

		bot := store.User{ID: rid(), Username: rname("bot"), Bot: true}
		noErr(t, "CreateUser bot", s.CreateUser(ctx, bot))
		got, err = s.GetUser(ctx, bot.ID)
		noErr(t, "GetUser bot", err)
		equal(t, "GetUser bot", got, bot)
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		ctx := ctxT(t)
		_, err := s.GetUser(ctx, rid())
		wantErr(t, "GetUser unknown", err, store.ErrNotFound)
		_, err = s.GetUserByName(ctx, rname("nobody"))
		wantErr(t, "GetUserByName unknown", err, store.ErrNotFound)
	})

	t.Run("UniqueUsername", func(t *testing.T) {
		t.Parallel()
		ctx := ctxT(t)
		name := rname("Bob")
		u := newUser(name)
		noErr(t, "CreateUser", s.CreateUser(ctx, u))
		for _, taken := range []string{name, strings.ToLower(name), strings.ToUpper(name)} {
			wantErr(t, "CreateUser "+taken, s.CreateUser(ctx, newUser(taken)), store.ErrExists)
			got, err := s.GetUserByName(ctx, taken)
			noErr(t, "GetUserByName "+taken, err)
			equal(t, "GetUserByName "+taken, got, u)
		}
		// Creating the same id again is a conflict too.
		again := u
		again.Username = rname("other")
		wantErr(t, "CreateUser same id", s.CreateUser(ctx, again), store.ErrExists)
		got, err := s.GetUser(ctx, u.ID)
		noErr(t, "GetUser", err)
		equal(t, "user after failed creates", got, u)
	})

	t.Run("Update", func(t *testing.T) {
		t.Parallel()
		ctx := ctxT(t)
		u := newUser(rname("carol"))
		noErr(t, "CreateUser", s.CreateUser(ctx, u))
		u.TokenGeneration++
		u.GlobalName = "Carol"
		noErr(t, "PutUser", s.PutUser(ctx, u))
		got, err := s.GetUser(ctx, u.ID)
		noErr(t, "GetUser", err)
		equal(t, "GetUser after update", got, u)

		// Only the case changes: still the same user by any spelling.
		u.Username = strings.ToUpper(u.Username)
		noErr(t, "PutUser recase", s.PutUser(ctx, u))
		got, err = s.GetUserByName(ctx, strings.ToLower(u.Username))
		noErr(t, "GetUserByName after recase", err)
		equal(t, "GetUserByName after recase", got, u)

		// A rename frees the old name.
		old := u.Username
		u.Username = rname("dave")
		noErr(t, "PutUser rename", s.PutUser(ctx, u))
		got, err = s.GetUserByName(ctx, u.Username)
		noErr(t, "GetUserByName new name", err)
		equal(t, "GetUserByName new name", got, u)
		_, err = s.GetUserByName(ctx, old)
		wantErr(t, "GetUserByName old name", err, store.ErrNotFound)
		noErr(t, "CreateUser with the freed name", s.CreateUser(ctx, newUser(old)))
	})

	t.Run("ConcurrentCreate", func(t *testing.T) {
		t.Parallel()
		ctx := ctxT(t)
		name := rname("race")
		const n = 16
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				spelled := name
				if i%2 == 1 {
					spelled = strings.ToUpper(name)
				}
				errs[i] = s.CreateUser(ctx, newUser(spelled))
			}()
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, store.ErrExists):
				t.Fatalf("CreateUser: %v", err)
			}
		}
		if ok != 1 {
			t.Fatalf("%d of %d concurrent CreateUser calls for one name succeeded, want 1", ok, n)
		}
	})
}
