// Package filter is the live path's sync filter: the cheap, local check
// every comment passes before the API appends it (blocked terms and links,
// bans at user, creator and stream level, the account-age rule, per-user
// rate limits and slow mode, the duplicate-text check). Rules and bans
// arrive through the board (Directory), so a check reads memory and the
// shared counters only.
package filter

import (
	"strings"
	"unicode"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

var folder = cases.Fold()

// Normalize folds s for matching: compatibility decomposition (so
// full-width, ligature and styled letters become plain ones), combining
// marks and invisible format characters (zero-width joiners, soft
// hyphens) removed, case folded, and every run of non-letters and
// non-digits turned into one space, with a space at each end so that
// " term " matches whole words only.
func Normalize(s string) string {
	s = norm.NFKD.String(s)
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte(' ')
	space := true
	for _, r := range s {
		switch {
		case unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Cf, r):
			continue
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
			space = false
		default:
			if !space {
				b.WriteByte(' ')
				space = true
			}
		}
	}
	if !space {
		b.WriteByte(' ')
	}
	return folder.String(b.String())
}

// term returns the match form of a blocked term: normalized, with the
// surrounding spaces kept so it matches whole words.
func term(t string) string {
	n := Normalize(t)
	if strings.TrimSpace(n) == "" {
		return ""
	}
	return n
}

// hasLink reports whether raw text holds a link: a scheme, "www.", or a
// dotted host name with a common top-level domain.
func hasLink(raw string) bool {
	l := strings.ToLower(norm.NFKC.String(raw))
	if strings.Contains(l, "://") || strings.Contains(l, "www.") {
		return true
	}
	for _, f := range strings.FieldsFunc(l, func(r rune) bool { return unicode.IsSpace(r) || r == '(' || r == ')' || r == '<' || r == '>' }) {
		f = strings.TrimRight(f, ".,!?;:'\"")
		i := strings.LastIndexByte(f, '.')
		if i <= 0 || i == len(f)-1 {
			continue
		}
		tld := f[i+1:]
		if j := strings.IndexByte(tld, '/'); j >= 0 {
			tld = tld[:j]
		}
		if linkTLDs[tld] {
			return true
		}
	}
	return false
}

var linkTLDs = map[string]bool{}

func init() {
	for _, t := range strings.Fields("com net org io co gg tv me ly app dev xyz info biz ru cn uk de fr us link site online shop top club live stream") {
		linkTLDs[t] = true
	}
}
