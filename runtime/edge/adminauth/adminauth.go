// Package adminauth guards Concord's admin endpoints (/admin/...: drain,
// session hand-off, guild statistics) with a bearer credential, the admin
// token. A request without the token, or with another one, is answered 401
// with Discord's JSON error and never reaches an admin handler; with no
// token configured every admin request is refused, so the endpoints are
// off.
//
// A cluster's admin token is by default derived from the token-signing key
// every node of the cluster already shares (Derive), so the nodes' calls to
// each other's admin endpoints and the operator's calls (which reads the
// cluster's server key secret) agree without a second secret, and a leaked
// admin token does not let anyone mint user tokens. An explicit token
// (--admin-token, CONCORD_ADMIN_TOKEN) replaces the derived one.
//
// The token goes in "Authorization: Bearer <token>", or in the
// X-Concord-Admin-Token header for callers whose Authorization header a
// proxy consumes (the Kubernetes API server's service proxy strips it).
package adminauth

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/concord-chat/concord/runtime/base/rest"
)

// Header is the alternative header carrying the admin token.
const Header = "X-Concord-Admin-Token"

// derivationLabel separates the admin token from every other use of the
// server key's HMAC (token signatures MAC the token's head, never this).
const derivationLabel = "concord admin token v1"

// Derive returns the admin token of a cluster whose token-signing key is
// serverKey: base64url(HMAC-SHA256(serverKey, "concord admin token v1")).
func Derive(serverKey []byte) string {
	m := hmac.New(sha256.New, serverKey)
	m.Write([]byte(derivationLabel))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Guard returns h behind the admin token: requests without it get 401.
// An empty token refuses every request.
func Guard(token string, h http.Handler) http.Handler {
	want := []byte(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(want) == 0 || subtle.ConstantTimeCompare([]byte(presented(r)), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="concord-admin"`)
			rest.WriteError(w, &rest.Error{Status: http.StatusUnauthorized, Code: 0, Message: "401: Unauthorized"})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// presented is the token the request carries ("" for none).
func presented(r *http.Request) string {
	if v := r.Header.Get(Header); v != "" {
		return v
	}
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(v)
	}
	return ""
}

// Set puts token on an outgoing admin request.
func Set(r *http.Request, token string) {
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
}
