package rest

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Error is Discord's error body with its HTTP status. Handlers return it
// for errors that need a specific shape (50035 form errors, 404s of their
// own); Translate passes it through unchanged.
type Error struct {
	Status  int            `json:"-"`
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Errors  map[string]any `json:"errors,omitempty"`
	// RetryAfter is set for 429s, in seconds.
	RetryAfter float64 `json:"-"`
}

// Error describes the Discord error.
func (e *Error) Error() string { return fmt.Sprintf("%d %d %s", e.Status, e.Code, e.Message) }

// Table maps domain errors to Discord errors. Translate checks its rows in
// order with errors.Is, so a more specific error goes first.
type Table []struct {
	Err     error
	Status  int
	Code    int
	Message string
}

// Translate returns the Discord error to send for err: err itself when it
// is (or wraps) an *Error, else the first row of table that err matches,
// else a 500.
func Translate(err error, table Table) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	for _, row := range table {
		if errors.Is(err, row.Err) {
			return &Error{Status: row.Status, Code: row.Code, Message: row.Message}
		}
	}
	return &Error{Status: http.StatusInternalServerError, Code: 0, Message: "500: Internal Server Error"}
}

// fieldError is one leaf of a 50035 form error.
type fieldError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// FormError returns a 50035 Invalid Form Body error naming a field path
// such as "content" or "options.3.description" (array indexes are path
// elements). An empty path puts the error at the top level.
func FormError(path, code, message string) *Error {
	var tree map[string]any = map[string]any{"_errors": []fieldError{{Code: code, Message: message}}}
	if path != "" {
		parts := strings.Split(path, ".")
		for i := len(parts) - 1; i >= 0; i-- {
			tree = map[string]any{parts[i]: tree}
		}
	}
	return &Error{Status: http.StatusBadRequest, Code: 50035, Message: "Invalid Form Body", Errors: tree}
}
