package rest

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
)

// WriteJSON writes v with Content-Type exactly application/json. A value
// that does not marshal is sent as a 500 error body instead.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"message":"500: Internal Server Error","code":0}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// WriteError sends ae as Discord error JSON. A 429 gets Discord's rate
// limit body (retry_after in seconds, rounded to milliseconds, global
// false) and its Retry-After, Via and X-RateLimit-Scope headers.
func WriteError(w http.ResponseWriter, ae *Error) {
	if ae.Status == http.StatusTooManyRequests {
		h := w.Header()
		h.Set("Retry-After", strconv.Itoa(int(math.Ceil(ae.RetryAfter))))
		h.Set("Via", "1.1 concord")
		h.Set("X-RateLimit-Scope", "user")
		WriteJSON(w, ae.Status, map[string]any{
			"message":     ae.Message,
			"code":        ae.Code,
			"retry_after": math.Round(ae.RetryAfter*1000) / 1000,
			"global":      false,
		})
		return
	}
	WriteJSON(w, ae.Status, ae)
}
