package platform

import "github.com/concord-chat/concord/runtime/app"

// Gate is the HTTP handler of a process whose backends are still
// connecting (app.Gate): /healthz 200, /readyz 503, everything else 503
// with Retry-After, until Open switches it to the platform's handler.
type Gate = app.Gate
