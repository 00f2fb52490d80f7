package wire

import (
	"strconv"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Bits is a permission bitset encoded as a decimal JSON string.
type Bits uint64

// MarshalJSON encodes the bits as a decimal string.
func (b Bits) MarshalJSON() ([]byte, error) {
	out := make([]byte, 0, 22)
	out = append(out, '"')
	out = strconv.AppendUint(out, uint64(b), 10)
	return append(out, '"'), nil
}

// UnmarshalJSON accepts a decimal string or a JSON number; null is 0.
func (b *Bits) UnmarshalJSON(data []byte) error {
	v, _, err := ParseBits(data)
	if err != nil {
		return err
	}
	*b = Bits(v)
	return nil
}

// ParseBits reads a permission bitset as clients send it: a decimal JSON
// string, a JSON number, or null (0, null true). A bad value returns
// strconv.ParseUint's error.
func ParseBits(data []byte) (v uint64, null bool, err error) {
	s := string(data)
	if s == "null" {
		return 0, true, nil
	}
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	v, err = strconv.ParseUint(s, 10, 64)
	return v, false, err
}

// User is Discord's user object.
type User struct {
	ID            snowflake.ID `json:"id"`
	Username      string       `json:"username"`
	Discriminator string       `json:"discriminator"`
	GlobalName    *string      `json:"global_name"`
	Avatar        *string      `json:"avatar"`
	Bot           bool         `json:"bot"`
	System        bool         `json:"system"`
	PublicFlags   int          `json:"public_flags"`
	Flags         int          `json:"flags"`
}

// UserFrom converts a stored account.
func UserFrom(u store.User) User {
	var gn *string
	if u.GlobalName != "" {
		s := u.GlobalName
		gn = &s
	}
	return User{
		ID:            u.ID,
		Username:      u.Username,
		Discriminator: "0",
		GlobalName:    gn,
		Bot:           u.Bot,
	}
}

// CurrentUser is GET /users/@me: the user plus the fields only its owner sees.
type CurrentUser struct {
	User
	MFAEnabled bool    `json:"mfa_enabled"`
	Verified   bool    `json:"verified"`
	Locale     string  `json:"locale"`
	Email      *string `json:"email"`
}

// CurrentUserFrom converts a stored account for its owner.
func CurrentUserFrom(u store.User) CurrentUser {
	return CurrentUser{User: UserFrom(u), Verified: true, Locale: "en-US"}
}
