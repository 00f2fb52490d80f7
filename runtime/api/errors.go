package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/concord-chat/concord/runtime/auth"
	"github.com/concord-chat/concord/runtime/guild"
	"github.com/concord-chat/concord/runtime/store"
)

// Errors raised by the REST layer itself.
var (
	errUnknownMessage = errors.New("api: unknown message")
	errUnknownInvite  = errors.New("api: unknown invite")
	errUnauthorized   = errors.New("api: unauthorized")
	errEmptyMessage   = errors.New("api: empty message")
	errNotAuthor      = errors.New("api: message authored by another user")
	errTooOld         = errors.New("api: message too old to bulk delete")
)

// apiError is Discord's error body with its HTTP status.
type apiError struct {
	Status  int            `json:"-"`
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Errors  map[string]any `json:"errors,omitempty"`
	// RetryAfter is set for 429s.
	RetryAfter float64 `json:"-"`
}

// Error describes the Discord error.
func (e *apiError) Error() string { return fmt.Sprintf("%d %d %s", e.Status, e.Code, e.Message) }

// errorTable maps domain errors to Discord errors, checked in order with
// errors.Is: the one place where errors cross the REST boundary.
var errorTable = []struct {
	err     error
	status  int
	code    int
	message string
}{
	{errUnauthorized, http.StatusUnauthorized, 40001, "401: Unauthorized"},
	{auth.ErrInvalidToken, http.StatusUnauthorized, 40001, "401: Unauthorized"},
	{guild.ErrUnknownGuild, http.StatusNotFound, 10004, "Unknown Guild"},
	{guild.ErrUnknownChannel, http.StatusNotFound, 10003, "Unknown Channel"},
	{guild.ErrUnknownMember, http.StatusNotFound, 10007, "Unknown Member"},
	{errUnknownMessage, http.StatusNotFound, 10008, "Unknown Message"},
	{guild.ErrUnknownRole, http.StatusNotFound, 10011, "Unknown Role"},
	{guild.ErrUnknownUser, http.StatusNotFound, 10013, "Unknown User"},
	{errUnknownInvite, http.StatusNotFound, 10006, "Unknown Invite"},
	{guild.ErrMissingAccess, http.StatusForbidden, 50001, "Missing Access"},
	{errNotAuthor, http.StatusForbidden, 50005, "Cannot edit a message authored by another user"},
	{guild.ErrMissingPermissions, http.StatusForbidden, 50013, "Missing Permissions"},
	{errEmptyMessage, http.StatusBadRequest, 50006, "Cannot send an empty message"},
	{guild.ErrNotText, http.StatusBadRequest, 50008, "Cannot send messages in a non-text channel"},
	{errTooOld, http.StatusBadRequest, 50034, "You can only bulk delete messages that are under 14 days old."},
	{guild.ErrInvalid, http.StatusBadRequest, 50035, "Invalid Form Body"},
	{guild.ErrUnavailable, http.StatusServiceUnavailable, 0, "503: Service Unavailable"},
	{store.ErrUnavailable, http.StatusServiceUnavailable, 0, "503: Service Unavailable"},
}

// toAPIError translates any error into the Discord error to send.
func toAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var se *guild.SlowmodeError
	if errors.As(err, &se) {
		return &apiError{
			Status:     http.StatusTooManyRequests,
			Code:       20016,
			Message:    "This action cannot be performed due to slowmode rate limit.",
			RetryAfter: se.RetryAfter.Seconds(),
		}
	}
	for _, row := range errorTable {
		if errors.Is(err, row.err) {
			return &apiError{Status: row.status, Code: row.code, Message: row.message}
		}
	}
	return &apiError{Status: http.StatusInternalServerError, Code: 0, Message: "500: Internal Server Error"}
}

// fieldError is one leaf of a 50035 form error.
type fieldError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// formError returns a 50035 error naming a field path such as "content"
// or "message_reference.message_id" (array indexes are path elements:
// "messages.3"). An empty path puts the error at the top level.
func formError(path, code, message string) *apiError {
	leaf := map[string]any{"_errors": []fieldError{{Code: code, Message: message}}}
	var tree map[string]any = leaf
	if path != "" {
		parts := strings.Split(path, ".")
		for i := len(parts) - 1; i >= 0; i-- {
			tree = map[string]any{parts[i]: tree}
		}
	}
	return &apiError{Status: http.StatusBadRequest, Code: 50035, Message: "Invalid Form Body", Errors: tree}
}

// writeError sends err as Discord error JSON.
func writeError(w http.ResponseWriter, err error) {
	ae := toAPIError(err)
	if ae.Status == http.StatusTooManyRequests {
		h := w.Header()
		h.Set("Retry-After", strconv.Itoa(int(math.Ceil(ae.RetryAfter))))
		h.Set("Via", "1.1 concord")
		h.Set("X-RateLimit-Scope", "user")
		writeJSON(w, ae.Status, map[string]any{
			"message":     ae.Message,
			"code":        ae.Code,
			"retry_after": math.Round(ae.RetryAfter*1000) / 1000,
			"global":      false,
		})
		return
	}
	writeJSON(w, ae.Status, ae)
}

// writeJSON writes v with Content-Type exactly application/json.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"message":"500: Internal Server Error","code":0}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
