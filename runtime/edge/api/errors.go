package api

import (
	"errors"
	"net/http"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/rest"
	"github.com/concord-chat/concord/runtime/domain/auth"
	"github.com/concord-chat/concord/runtime/domain/guild"
)

// Errors raised by the REST layer itself.
var (
	errUnknownMessage = errors.New("api: unknown message")
	errUnknownInvite  = errors.New("api: unknown invite")
	errUnauthorized   = errors.New("api: unauthorized")
	errEmptyMessage   = errors.New("api: empty message")
	errNotAuthor      = errors.New("api: message authored by another user")
	errTooOld         = errors.New("api: message too old to bulk delete")
	errSystemMessage  = errors.New("api: action on a system message")
)

// apiError is Discord's error body with its HTTP status.
type apiError = rest.Error

// errorTable maps domain errors to Discord errors, checked in order with
// errors.Is: the one place where errors cross the REST boundary.
var errorTable = rest.Table{
	{errUnauthorized, http.StatusUnauthorized, 40001, "401: Unauthorized"},
	{auth.ErrInvalidToken, http.StatusUnauthorized, 40001, "401: Unauthorized"},
	{guild.ErrUnknownGuild, http.StatusNotFound, 10004, "Unknown Guild"},
	{guild.ErrUnknownChannel, http.StatusNotFound, 10003, "Unknown Channel"},
	{guild.ErrUnknownMember, http.StatusNotFound, 10007, "Unknown Member"},
	{errUnknownMessage, http.StatusNotFound, 10008, "Unknown Message"},
	{guild.ErrUnknownRole, http.StatusNotFound, 10011, "Unknown Role"},
	{guild.ErrUnknownUser, http.StatusNotFound, 10013, "Unknown User"},
	{errUnknownInvite, http.StatusNotFound, 10006, "Unknown Invite"},
	{guild.ErrUnknownBan, http.StatusNotFound, 10026, "Unknown Ban"},
	{guild.ErrBanned, http.StatusForbidden, 40007, "The user is banned from this guild."},
	{guild.ErrMissingAccess, http.StatusForbidden, 50001, "Missing Access"},
	{errNotAuthor, http.StatusForbidden, 50005, "Cannot edit a message authored by another user"},
	{guild.ErrMissingPermissions, http.StatusForbidden, 50013, "Missing Permissions"},
	{errEmptyMessage, http.StatusBadRequest, 50006, "Cannot send an empty message"},
	{guild.ErrCannotMessageUser, http.StatusForbidden, 50007, "Cannot send messages to this user"},
	{guild.ErrNotText, http.StatusBadRequest, 50008, "Cannot send messages in a non-text channel"},
	{errTooOld, http.StatusBadRequest, 50034, "You can only bulk delete messages that are under 14 days old."},
	{guild.ErrInvalid, http.StatusBadRequest, 50035, "Invalid Form Body"},
	{guild.ErrWrongChannelType, http.StatusBadRequest, 50024, "Cannot execute action on this channel type"},
	{guild.ErrThreadArchived, http.StatusBadRequest, 50083, "Thread is archived"},
	{guild.ErrUnknownThreadMember, http.StatusNotFound, 10007, "Unknown Member"},
	{guild.ErrThreadExists, http.StatusBadRequest, 160004, "A thread has already been created for this message"},
	{guild.ErrThreadLocked, http.StatusBadRequest, 160005, "Thread is locked"},
	{errSystemMessage, http.StatusBadRequest, 50021, "Cannot execute action on a system message"},
	{guild.ErrNotInVoice, http.StatusBadRequest, 40032, "Target user is not connected to voice."},
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
	return rest.Translate(err, errorTable)
}

// formError returns a 50035 error naming a field path such as "content"
// or "message_reference.message_id" (array indexes are path elements:
// "messages.3"). An empty path puts the error at the top level.
func formError(path, code, message string) *apiError { return rest.FormError(path, code, message) }

// writeError sends err as Discord error JSON.
func writeError(w http.ResponseWriter, err error) { rest.WriteError(w, toAPIError(err)) }

// writeJSON writes v with Content-Type exactly application/json.
func writeJSON(w http.ResponseWriter, status int, v any) { rest.WriteJSON(w, status, v) }
