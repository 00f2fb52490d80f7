package platform

import (
	"net/http"

	"github.com/gorilla/websocket"
)

// UpgradeOr sends every WebSocket upgrade to gw and everything else to
// next: discord.py connects to its default gateway URL, the root path, so
// an upgrade anywhere outside the REST routes reaches the gateway, in
// `concord dev` and on the gateway nodes of `concord serve`.
func UpgradeOr(gw, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if websocket.IsWebSocketUpgrade(r) {
			gw.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}
