package api

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
)

// Error codes of the live-comments API (docs/live-comments.md lists them).
const (
	CodeGeneral          = 0
	CodeUnknownStream    = 10090
	CodeUnknownComment   = 10091
	CodeUnknownUser      = 10013
	CodeUnauthorized     = 40001
	CodeBanned           = 40007
	CodeMissingPerms     = 50013
	CodeEmptyComment     = 50006
	CodeInvalidForm      = 50035
	CodeInvalidJSON      = 50109
	CodeSlowMode         = 20016
	CodeBlockedTerm      = 200000
	CodeAccountTooNew    = 200001
	CodeBlockedLink      = 240000
	CodeStreamEnded      = 190001
	CodeNonceInFlight    = 190002
	CodeUnavailable      = 130000
	CodeUnknownRoute     = 0
	maxBody              = 16 << 10
	messageUnavailable   = "The live comments service is temporarily unavailable."
	messageUnauthorized  = "401: Unauthorized"
	messageMissingPerms  = "Missing Permissions"
	messageUnknownStream = "Unknown Stream"
)

// Error is the API's error body: {"code", "message"}, plus "reason" for a
// filter rejection, "retry_after" for a 429 and "errors" for form errors.
type Error struct {
	Status     int            `json:"-"`
	Code       int            `json:"code"`
	Message    string         `json:"message"`
	Reason     string         `json:"reason,omitempty"`
	Errors     map[string]any `json:"errors,omitempty"`
	RetryAfter float64        `json:"retry_after,omitempty"`
}

func (e *Error) Error() string {
	return strconv.Itoa(e.Status) + " " + strconv.Itoa(e.Code) + " " + e.Message
}

func apiErr(status, code int, msg string) *Error {
	return &Error{Status: status, Code: code, Message: msg}
}

var (
	errUnauthorized   = apiErr(http.StatusUnauthorized, CodeUnauthorized, messageUnauthorized)
	errForbidden      = apiErr(http.StatusForbidden, CodeMissingPerms, messageMissingPerms)
	errUnknownStream  = apiErr(http.StatusNotFound, CodeUnknownStream, messageUnknownStream)
	errUnknownComment = apiErr(http.StatusNotFound, CodeUnknownComment, "Unknown Comment")
	errUnknownUser    = apiErr(http.StatusNotFound, CodeUnknownUser, "Unknown User")
	errEnded          = apiErr(http.StatusConflict, CodeStreamEnded, "This stream has ended.")
	errInvalidJSON    = apiErr(http.StatusBadRequest, CodeInvalidJSON, "The request body contains invalid JSON.")
	errUnavailable    = apiErr(http.StatusServiceUnavailable, CodeUnavailable, messageUnavailable)
	errNotFound       = apiErr(http.StatusNotFound, CodeUnknownRoute, "404: Not Found")
)

// formErr is a 50035 naming the field.
func formErr(field, code, msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeInvalidForm, Message: "Invalid Form Body",
		Errors: map[string]any{field: map[string]any{"_errors": []map[string]string{{"code": code, "message": msg}}}}}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"code":0,"message":"500: Internal Server Error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

func writeError(w http.ResponseWriter, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = apiErr(http.StatusInternalServerError, CodeGeneral, "500: Internal Server Error")
	}
	if e.Status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(e.RetryAfter))))
		e.RetryAfter = math.Round(e.RetryAfter*1000) / 1000
	}
	writeJSON(w, e.Status, e)
}
