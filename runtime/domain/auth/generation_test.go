package auth

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// tokenUsers is a map of accounts for the issuer.
type tokenUsers map[snowflake.ID]store.User

func (m tokenUsers) CreateUser(_ context.Context, u store.User) error { m[u.ID] = u; return nil }
func (m tokenUsers) PutUser(_ context.Context, u store.User) error    { m[u.ID] = u; return nil }
func (m tokenUsers) GetUser(_ context.Context, id snowflake.ID) (store.User, error) {
	u, ok := m[id]
	if !ok {
		return store.User{}, store.ErrNotFound
	}
	return u, nil
}
func (m tokenUsers) GetUserByName(context.Context, string) (store.User, error) {
	return store.User{}, store.ErrNotFound
}

// The generation read from a token is the one the issuer minted it with
// (so a change of the token format fails here, not in production).
func TestTokenGenerationOfMintedTokens(t *testing.T) {
	users := tokenUsers{}
	iss, err := New(Config{Key: bytes.Repeat([]byte("k"), 32)}, users)
	if err != nil {
		t.Fatal(err)
	}
	for _, gen := range []uint32{0, 1, 7, 1 << 20, ^uint32(0)} {
		u := store.User{ID: snowflake.ID(1000 + gen%97), Username: "u", TokenGeneration: gen}
		users[u.ID] = u
		tok := iss.Mint(u)
		got, ok := TokenGeneration(tok)
		if !ok || got != gen {
			t.Fatalf("TokenGeneration(%q) = %d, %v; want %d", tok, got, ok, gen)
		}
	}
	for _, bad := range []string{"", ".", "..", "a.b", "a..b", "a.bbbb.c", "a.AAAAAAAAAAAAAAAA", "a.AAAAAAAAAAAAAAAAAA.c",
		"a.AAAAAAAAAAAAAAA!.c", "a.AAAAAAAAAAAAAAAA=.c"} {
		if g, ok := TokenGeneration(bad); ok {
			t.Errorf("TokenGeneration(%q) = %d, true; want false", bad, g)
		}
	}
}

// FuzzTokenGeneration: any header text is refused or read without a
// panic, and what is read is the first four bytes of the middle part.
func FuzzTokenGeneration(f *testing.F) {
	f.Add("MTIz.AAAAAQAAAABnZ2dn.c2ln")
	f.Add("a.b.c")
	f.Add("..")
	f.Add("x.AAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAA.y")
	f.Fuzz(func(t *testing.T, s string) {
		gen, ok := TokenGeneration(s)
		if !ok {
			return
		}
		first, last := strings.IndexByte(s, '.'), strings.LastIndexByte(s, '.')
		b, err := base64.RawURLEncoding.DecodeString(s[first+1 : last])
		if err != nil || len(b) != 12 || binary.BigEndian.Uint32(b) != gen {
			t.Fatalf("TokenGeneration(%q) = %d from %x (%v)", s, gen, b, err)
		}
	})
}
