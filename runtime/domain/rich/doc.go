// Package rich checks and normalises the rich parts of a Discord message
// that clients send as JSON: embeds and message components (action rows,
// buttons, selects, text inputs). Both the REST API and the bot platform
// (interaction replies, webhooks) validate through it, so a message has
// the same limits whichever way it was posted.
//
// Errors are Discord's 50035 Invalid Form Body, naming the field path
// ("embeds.0.fields.3.value"), as *rest.Error.
package rich
