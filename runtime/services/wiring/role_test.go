package wiring

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestAdminHandler: the process's own admin endpoints answer the patterns
// they serve, a role's endpoint answers the rest, and a role's route never
// shadows the process's.
func TestAdminHandler(t *testing.T) {
	own, roles := http.NewServeMux(), http.NewServeMux()
	own.HandleFunc("POST /admin/drain", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("own drain")) })
	own.HandleFunc("GET /admin/guilds/{id}", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("guild " + r.PathValue("id"))) })
	b := &Builder{Parts: Parts{Admin: roles}}
	b.HandleAdmin("POST /admin/drain", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("role drain")) }))
	b.HandleAdmin("GET /admin/voice/load", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("role load")) }))
	h := AdminHandler(own, roles)
	for _, tc := range []struct{ method, path, want string }{
		{"POST", "/admin/drain", "own drain"},
		{"GET", "/admin/guilds/42", "guild 42"}, // the pattern's path values reach the handler
		{"GET", "/admin/voice/load", "role load"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		if rec.Body.String() != tc.want {
			t.Fatalf("%s %s: %q, want %q", tc.method, tc.path, rec.Body.String(), tc.want)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/admin/nothing", nil))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("unknown admin path: %d, want 404", rec.Code)
	}
	// Without an admin mux a role's admin routes are dropped, not served
	// elsewhere.
	(&Builder{}).HandleAdmin("GET /admin/x", http.NotFoundHandler())
	if AdminHandler(own, nil) != http.Handler(own) {
		t.Fatal("AdminHandler without roles is not the process's own mux")
	}
}
