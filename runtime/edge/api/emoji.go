package api

import (
	"net/http"
	"regexp"
	"unicode"
	"unicode/utf8"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// errUnknownEmoji is Discord's answer for an emoji that is neither a
// unicode emoji nor a well-formed custom one.
var errUnknownEmoji = &apiError{Status: http.StatusBadRequest, Code: 10014, Message: "Unknown Emoji"}

var customEmoji = regexp.MustCompile(`^(?:a:)?([A-Za-z0-9_~]{1,32}):([0-9]{1,20})$`)

// reactionEmoji parses the {emoji} of a reaction route: a unicode emoji,
// or a custom emoji as name:id (a:name:id for animated ones). It returns
// the store key (the emoji, or name:id) and the wire emoji.
func reactionEmoji(s string) (string, wire.Emoji, error) {
	if m := customEmoji.FindStringSubmatch(s); m != nil {
		id, err := snowflake.Parse(m[2])
		if err != nil || id == 0 {
			return "", wire.Emoji{}, errUnknownEmoji
		}
		return m[1] + ":" + m[2], wire.Emoji{ID: &id, Name: m[1], Animated: len(s) > 2 && s[:2] == "a:"}, nil
	}
	if !isUnicodeEmoji(s) {
		return "", wire.Emoji{}, errUnknownEmoji
	}
	return s, wire.Emoji{Name: s}, nil
}

// emojiFromKey is the wire emoji of a stored reaction key.
func emojiFromKey(key string) wire.Emoji {
	if m := customEmoji.FindStringSubmatch(key); m != nil {
		if id, err := snowflake.Parse(m[2]); err == nil {
			return wire.Emoji{ID: &id, Name: m[1]}
		}
	}
	return wire.Emoji{Name: key}
}

// isUnicodeEmoji accepts one emoji sequence: symbols (So, Sk: skin tones),
// joiners, variation selectors, keycaps, tags and regional indicators,
// with at least one symbol, and at most 64 bytes. It refuses text,
// control characters and the zero byte (reaction keys never hold one).
func isUnicodeEmoji(s string) bool {
	if s == "" || len(s) > 64 || !utf8.ValidString(s) {
		return false
	}
	symbols := 0
	for i, r := range s {
		switch {
		case unicode.Is(unicode.So, r), unicode.Is(unicode.Sk, r) && r >= 0x1F3FB:
			symbols++
		case r == 0x203C || r == 0x2049 || r == 0x3030 || r == 0x303D:
			symbols++ // ‼ ⁉ 〰 〽 are punctuation in Unicode, emoji in practice
		case r == 0x200D, r == 0xFE0F, r == 0xFE0E, r == 0x20E3, r >= 0xE0020 && r <= 0xE007F:
		case (r >= '0' && r <= '9' || r == '#' || r == '*') && i == 0 && len(s) > 1:
			// keycap base: must be followed by FE0F/20E3 (checked below)
			rest := s[1:]
			if r2, _ := utf8.DecodeRuneInString(rest); r2 != 0xFE0F && r2 != 0x20E3 {
				return false
			}
			symbols++
		default:
			return false
		}
	}
	return symbols > 0
}
