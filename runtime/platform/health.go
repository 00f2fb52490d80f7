package platform

import (
	"fmt"
	"net/http"
)

// HandleHealth registers GET /healthz (always 200 while the process
// serves) and GET /readyz (200 when ready reports true, else 503) on mux.
// `concord dev` and every `concord serve` node use the same probes.
func HandleHealth(mux *http.ServeMux, ready func() bool) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		if !ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready")
			return
		}
		fmt.Fprintln(w, "ok")
	})
}
