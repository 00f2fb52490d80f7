package cluster

import (
	"net/http"

	"github.com/concord-chat/concord/runtime/rest"
)

// writeError answers status with msg in Discord's error shape.
func writeError(w http.ResponseWriter, status int, msg string) {
	rest.WriteError(w, &rest.Error{Status: status, Message: msg})
}
