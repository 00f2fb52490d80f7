package auth

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/adapters/store/pebble"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

var fastParams = Params{Time: 1, MemoryKiB: 64, Threads: 1}

func newIssuer(t *testing.T) (*Issuer, *pebble.Store) {
	t.Helper()
	st, err := pebble.New(pebble.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	iss, err := New(Config{Key: []byte(strings.Repeat("k", 32)), Password: fastParams}, st)
	if err != nil {
		t.Fatal(err)
	}
	return iss, st
}

func TestNewRejectsShortKey(t *testing.T) {
	if _, err := New(Config{Key: []byte("short")}, nil); !errors.Is(err, ErrConfig) {
		t.Fatalf("err = %v", err)
	}
}

func TestMintVerifyRevoke(t *testing.T) {
	ctx := context.Background()
	iss, st := newIssuer(t)
	u := store.User{ID: snowflake.ID(175928847299117063), Username: "alice", CreatedAt: time.Now()}
	if err := st.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	tok := iss.Mint(u)
	if strings.Count(tok, ".") != 2 {
		t.Fatalf("token %q has not three parts", tok)
	}
	id, err := iss.Verify(ctx, tok)
	if err != nil || id != u.ID {
		t.Fatalf("verify = %d, %v", id, err)
	}
	// Tampering with any part fails.
	parts := strings.Split(tok, ".")
	other := iss.Mint(store.User{ID: 42})
	forged := strings.Split(other, ".")[0] + "." + parts[1] + "." + parts[2]
	for _, bad := range []string{"", "a.b", tok + "x", forged, "..", parts[0] + ".." + parts[2]} {
		if _, err := iss.Verify(ctx, bad); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("verify(%q) = %v", bad, err)
		}
	}
	// A token of another key fails.
	iss2, err := New(Config{Key: []byte(strings.Repeat("z", 32))}, st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := iss2.Verify(ctx, tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("other key: %v", err)
	}
	// Revocation bites at once and durably.
	if err := iss.Revoke(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := iss.Verify(ctx, tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("revoked token verified: %v", err)
	}
	fresh, _ := st.GetUser(ctx, u.ID)
	if fresh.TokenGeneration != 1 {
		t.Fatalf("stored generation = %d", fresh.TokenGeneration)
	}
	newTok := iss.Mint(fresh)
	if _, err := iss.Verify(ctx, newTok); err != nil {
		t.Fatalf("new token: %v", err)
	}
	// A new issuer (restart) loads the generation from the store.
	iss3, _ := New(Config{Key: []byte(strings.Repeat("k", 32))}, st)
	if _, err := iss3.Verify(ctx, tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("revoked token verified after restart: %v", err)
	}
	if _, err := iss3.Verify(ctx, newTok); err != nil {
		t.Fatalf("new token after restart: %v", err)
	}
	// Unknown users fail.
	if _, err := iss.Verify(ctx, iss.Mint(store.User{ID: 8})); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("token of unknown user: %v", err)
	}
}

func TestPasswords(t *testing.T) {
	h, err := HashPassword("correct horse", fastParams)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=64,t=1,p=1$") {
		t.Fatalf("hash %q", h)
	}
	h2, _ := HashPassword("correct horse", fastParams)
	if h == h2 {
		t.Fatal("same salt twice")
	}
	if err := CheckPassword(h, "correct horse"); err != nil {
		t.Fatal(err)
	}
	if err := CheckPassword(h, "wrong horse"); !errors.Is(err, ErrWrongPassword) {
		t.Fatalf("wrong password: %v", err)
	}
	for _, bad := range []string{"", "$argon2i$v=19$m=64,t=1,p=1$c2FsdA$aGFzaA", "$argon2id$v=19$m=0,t=1,p=1$c2FsdA$aGFzaA", "$argon2id$v=19$m=64,t=1,p=1$!!$aGFzaA"} {
		if err := CheckPassword(bad, "x"); !errors.Is(err, ErrBadHash) {
			t.Errorf("CheckPassword(%q) = %v", bad, err)
		}
	}
}

func TestStripPrefix(t *testing.T) {
	for in, want := range map[string]string{"Bot abc": "abc", "Bearer abc": "abc", "abc": "abc", "bot abc": "abc", "": ""} {
		if got := StripPrefix(in); got != want {
			t.Errorf("StripPrefix(%q) = %q", in, got)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	st, err := pebble.New(pebble.Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	iss, _ := New(Config{Key: []byte(strings.Repeat("k", 32))}, st)
	u := store.User{ID: 1234, Username: "bench"}
	st.CreateUser(context.Background(), u)
	tok := iss.Mint(u)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		if _, err := iss.Verify(ctx, tok); err != nil {
			b.Fatal(err)
		}
	}
}

// TestVerifyCanonicalOnly: a token whose last character differs only in
// the bits base64 leaves unused, or with a CR/LF inside (which base64
// skips), decodes to the same bytes yet must not verify.
func TestVerifyCanonicalOnly(t *testing.T) {
	ctx := context.Background()
	iss, st := newIssuer(t)
	u := store.User{ID: snowflake.ID(175928847299117063), Username: "alice", CreatedAt: time.Now()}
	if err := st.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	tok := iss.Mint(u)
	if _, err := iss.Verify(ctx, tok); err != nil {
		t.Fatalf("canonical token: %v", err)
	}
	variants := lowBitVariants(t, tok)
	if len(variants) == 0 {
		t.Fatal("no low-bit variant of the signature's last character")
	}
	parts := strings.Split(tok, ".")
	variants = append(variants, parts[0]+"."+parts[1]+"."+parts[2][:10]+"\n"+parts[2][10:],
		parts[0]+"."+parts[1]+"."+parts[2]+"\r\n")
	for _, v := range variants {
		if _, err := iss.Verify(ctx, v); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("verify(%q) = %v, want ErrInvalidToken", v, err)
		}
	}
}

// lowBitVariants returns tok with its last character replaced by each other
// character that decodes to the same bytes.
func lowBitVariants(t *testing.T, tok string) []string {
	t.Helper()
	want, err := enc.DecodeString(tok[strings.LastIndexByte(tok, '.')+1:])
	if err != nil {
		t.Fatal(err)
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	var out []string
	for _, c := range alphabet {
		v := tok[:len(tok)-1] + string(c)
		if v == tok {
			continue
		}
		if got, err := enc.DecodeString(v[strings.LastIndexByte(v, '.')+1:]); err == nil && string(got) == string(want) {
			out = append(out, v)
		}
	}
	return out
}

// FuzzVerify: Verify never panics on any text, and whatever it accepts is
// exactly the minted token (the only spelling of it).
func FuzzVerify(f *testing.F) {
	ctx := context.Background()
	st, err := pebble.New(pebble.Config{Dir: f.TempDir()})
	if err != nil {
		f.Fatal(err)
	}
	defer st.Close()
	iss, err := New(Config{Key: []byte(strings.Repeat("k", 32)), Password: fastParams}, st)
	if err != nil {
		f.Fatal(err)
	}
	u := store.User{ID: snowflake.ID(175928847299117063), Username: "alice", CreatedAt: time.Now()}
	if err := st.CreateUser(ctx, u); err != nil {
		f.Fatal(err)
	}
	tok := iss.Mint(u)
	f.Add(tok)
	f.Add(tok[:len(tok)-1] + "t")
	f.Add("a.b.c")
	f.Add("..")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := iss.Verify(ctx, s)
		if err == nil && (s != tok || id != u.ID) {
			t.Fatalf("Verify accepted %q (id %d), minted %q", s, id, tok)
		}
	})
}

// TestRevokeReachesOtherIssuers: two processes of a cluster, each with its
// issuer over the shared store. A revocation on one stops the old token on
// the other once the other's kept generation is older than GenerationTTL,
// and the new token the first mints works on the other at once.
func TestRevokeReachesOtherIssuers(t *testing.T) {
	ctx := context.Background()
	a, st := newIssuer(t)
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	b, err := New(Config{Key: []byte(strings.Repeat("k", 32)), Password: fastParams, Now: clock, GenerationTTL: 5 * time.Second}, st)
	if err != nil {
		t.Fatal(err)
	}
	u := store.User{ID: snowflake.ID(175928847299117064), Username: "bob", CreatedAt: time.Now()}
	if err := st.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	old := a.Mint(u)
	if _, err := b.Verify(ctx, old); err != nil { // b keeps generation 0
		t.Fatalf("b: %v", err)
	}
	if err := a.Revoke(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	fresh, _ := st.GetUser(ctx, u.ID)
	newTok := a.Mint(fresh)
	if _, err := b.Verify(ctx, newTok); err != nil {
		t.Fatalf("b refuses the token minted after the revocation: %v", err)
	}
	if _, err := b.Verify(ctx, old); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("b, having read the newer generation: old token = %v", err)
	}

	// A revocation b hears nothing of: b trusts its generation for the
	// TTL, then reads it again.
	if err := a.Revoke(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Verify(ctx, newTok); err != nil {
		t.Fatalf("within the TTL b still trusts its generation: %v", err)
	}
	now = now.Add(5 * time.Second)
	if _, err := b.Verify(ctx, newTok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("a token revoked elsewhere still verifies after the TTL: %v", err)
	}
	// b's own mint uses the newest generation it knows.
	again, _ := st.GetUser(ctx, u.ID)
	if _, err := a.Verify(ctx, b.Mint(again)); err != nil {
		t.Fatalf("a refuses b's token: %v", err)
	}
}
