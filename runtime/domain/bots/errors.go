package bots

import (
	"errors"
	"net/http"

	"github.com/concord-chat/concord/runtime/base/rest"
)

// Errors of the bot platform. Implementations of the consumed interfaces
// (Guilds, Messages) return errors wrapping the ones they name so that the
// handler maps them to Discord's codes.
var (
	// ErrUnknownApplication means the application does not exist or the
	// caller may not see it.
	ErrUnknownApplication = errors.New("bots: unknown application")
	// ErrUnknownCommand means the application command does not exist.
	ErrUnknownCommand = errors.New("bots: unknown application command")
	// ErrUnknownInteraction means the interaction does not exist, its token
	// does not match, or its acknowledgement window has passed.
	ErrUnknownInteraction = errors.New("bots: unknown interaction")
	// ErrAlreadyAcknowledged means a second callback for one interaction.
	ErrAlreadyAcknowledged = errors.New("bots: interaction already acknowledged")
	// ErrInvalidWebhookToken means an interaction token used for followups
	// is unknown, forged or older than the token lifetime.
	ErrInvalidWebhookToken = errors.New("bots: invalid webhook token")
	// ErrUnknownWebhook means the interaction is not acknowledged yet, so
	// it has no followup webhook.
	ErrUnknownWebhook = errors.New("bots: unknown webhook")
	// ErrUnknownGuild means the guild does not exist (Guilds).
	ErrUnknownGuild = errors.New("bots: unknown guild")
	// ErrUnknownChannel means the channel does not exist (Guilds).
	ErrUnknownChannel = errors.New("bots: unknown channel")
	// ErrUnknownMember means the user is not a member of the guild (Guilds).
	ErrUnknownMember = errors.New("bots: unknown member")
	// ErrUnknownMessage means the message does not exist (Messages).
	ErrUnknownMessage = errors.New("bots: unknown message")
	// ErrThreadArchived means the message is in an archived thread, whose
	// messages nobody may change (Messages): Discord's 50083.
	ErrThreadArchived = errors.New("bots: thread is archived")
	// ErrMissingAccess means the caller cannot see the resource (Guilds),
	// or the application is not installed in the guild.
	ErrMissingAccess = errors.New("bots: missing access")
	// ErrMissingPermissions means the caller lacks a permission (Guilds).
	ErrMissingPermissions = errors.New("bots: missing permissions")
	// ErrUnauthorized means the request carries no valid credentials.
	ErrUnauthorized = errors.New("bots: unauthorized")
	// ErrBotsForbidden means a bot called a route only users may call.
	ErrBotsForbidden = errors.New("bots: bots cannot use this endpoint")
	// ErrUnavailable means a dependency or the store cannot serve now.
	ErrUnavailable = errors.New("bots: unavailable")
	// ErrNotFound is returned by Store for missing records.
	ErrNotFound = errors.New("bots: not found")
	// ErrExists is returned by Store.CreateApplication for a taken id or
	// bot user.
	ErrExists = errors.New("bots: already exists")
	// ErrBadSignature means an interaction request's Ed25519 signature is
	// missing, malformed, forged or stale (VerifyRequest).
	ErrBadSignature = errors.New("bots: invalid request signature")
	// ErrEndpoint means an interactions endpoint failed verification or
	// delivery (private address, redirect, bad status, huge response).
	ErrEndpoint = errors.New("bots: interactions endpoint rejected")
	// ErrConfig means the Config or Deps are unusable.
	ErrConfig = errors.New("bots: invalid config")
)

// APIError is a Discord error body with its HTTP status. Handlers return
// it for errors that need a specific shape (50035 form errors).
type APIError = rest.Error

// errorTable maps errors to Discord errors, checked in order with
// errors.Is: the one place where errors cross this package's HTTP boundary.
var errorTable = rest.Table{
	{ErrUnauthorized, http.StatusUnauthorized, 40001, "401: Unauthorized"},
	{ErrUnknownApplication, http.StatusNotFound, 10002, "Unknown Application"},
	{ErrUnknownCommand, http.StatusNotFound, 10063, "Unknown application command"},
	{ErrUnknownInteraction, http.StatusNotFound, 10062, "Unknown interaction"},
	{ErrAlreadyAcknowledged, http.StatusBadRequest, 40060, "Interaction has already been acknowledged."},
	{ErrInvalidWebhookToken, http.StatusUnauthorized, 50027, "Invalid Webhook Token"},
	{ErrUnknownWebhook, http.StatusNotFound, 10015, "Unknown Webhook"},
	{ErrUnknownGuild, http.StatusNotFound, 10004, "Unknown Guild"},
	{ErrUnknownChannel, http.StatusNotFound, 10003, "Unknown Channel"},
	{ErrUnknownMember, http.StatusNotFound, 10007, "Unknown Member"},
	{ErrUnknownMessage, http.StatusNotFound, 10008, "Unknown Message"},
	{ErrThreadArchived, http.StatusBadRequest, 50083, "Thread is archived"},
	{ErrMissingAccess, http.StatusForbidden, 50001, "Missing Access"},
	{ErrMissingPermissions, http.StatusForbidden, 50013, "Missing Permissions"},
	{ErrBotsForbidden, http.StatusForbidden, 20001, "Bots cannot use this endpoint"},
	{ErrUnavailable, http.StatusServiceUnavailable, 0, "503: Service Unavailable"},
}

// toAPIError translates any error into the Discord error to send.
func toAPIError(err error) *APIError { return rest.Translate(err, errorTable) }

// FormError returns a 50035 Invalid Form Body error naming a field path
// such as "name" or "options.3.description" (array indexes are path
// elements). An empty path puts the error at the top level.
func FormError(path, code, message string) *APIError { return rest.FormError(path, code, message) }

// writeJSON writes v with Content-Type exactly application/json.
func writeJSON(w http.ResponseWriter, status int, v any) { rest.WriteJSON(w, status, v) }

// writeError sends err as Discord error JSON.
func writeError(w http.ResponseWriter, err error) { rest.WriteError(w, toAPIError(err)) }
