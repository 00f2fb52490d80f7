package route

import (
	"net/http"
	"strings"
)

// latest is the version a request that names none is served as.
const latest = "/api/v10"

// DefaultVersion serves a request whose path names no API version as the
// latest one: "/api/webhooks/{id}/{token}" is "/api/v10/webhooks/{id}/{token}".
// Discord answers unversioned paths too, and the unversioned form is what
// a webhook object's url carries and what people paste into the services
// that post to it, so a server that only knew versioned paths would hand
// out webhook URLs that answer 404. A path naming a version this server
// does not serve ("/api/v6/…") is left alone and meets the handler's 404.
func DefaultVersion(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, "/api/")
		if !ok || versioned(rest) {
			next.ServeHTTP(w, r)
			return
		}
		r2 := new(http.Request)
		*r2 = *r
		u := *r.URL
		u.Path = latest + "/" + rest
		if raw, ok := strings.CutPrefix(u.RawPath, "/api/"); ok {
			u.RawPath = latest + "/" + raw
		}
		r2.URL = &u
		next.ServeHTTP(w, r2)
	})
}

// versioned reports whether path (below "/api/") starts with a version
// segment: "v" and digits.
func versioned(path string) bool {
	seg, _, _ := strings.Cut(path, "/")
	if len(seg) < 2 || seg[0] != 'v' {
		return false
	}
	for _, c := range seg[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
