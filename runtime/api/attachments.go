package api

import (
	"context"
	"net/http"

	"github.com/concord-chat/concord/runtime/api/uploads"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/store"
	"github.com/concord-chat/concord/runtime/wire"
)

// Attachments: multipart bodies (payload_json + files[n]) on message
// sends, webhook executions and webhook message edits, stored in the
// object store, signed and served by package uploads. See its doc for the
// limits, the sniffing and the URL signature.

// maxFiles is Discord's limit of files per message.
const maxFiles = uploads.MaxFiles

type attachmentRef = uploads.Ref

// readMessagePayload reads a JSON or multipart message body.
func (h *handler) readMessagePayload(w http.ResponseWriter, r *http.Request) ([]byte, uploads.Files, error) {
	return h.uploads.ReadPayload(w, r)
}

// saveAttachments stores the uploaded files of a message in channelID.
func (h *handler) saveAttachments(ctx context.Context, channelID snowflake.ID, refs []attachmentRef, files uploads.Files) ([]store.Attachment, error) {
	return h.uploads.Save(ctx, channelID, refs, files)
}

// attachmentURLs signs the attachment URLs of a rendered message.
func (h *handler) attachmentURLs(ctx context.Context, atts []wire.Attachment) {
	h.uploads.Sign(ctx, atts)
}

// getAttachment is GET /attachments/{channel}/{attachment}/{name}.
func (h *handler) getAttachment(w http.ResponseWriter, r *http.Request) error {
	return h.uploads.Serve(w, r)
}
