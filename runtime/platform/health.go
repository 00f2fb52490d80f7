package platform

import (
	"net/http"

	"github.com/concord-chat/concord/runtime/app"
)

// HandleHealth registers GET /healthz and GET /readyz on mux, the probes
// of every Concord process (app.HandleHealth).
func HandleHealth(mux *http.ServeMux, ready func() bool) { app.HandleHealth(mux, ready) }
