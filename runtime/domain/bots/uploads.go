package bots

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Uploads reads the files of multipart interaction responses, followups
// and @original edits (payload_json + files[n]); the REST API's attachment
// store (runtime/edge/api/uploads) implements it through the platform. Without
// it the files of a multipart body are ignored.
type Uploads interface {
	// ReadPayload reads a JSON or multipart body and the files it
	// carries, kept until the request ends.
	ReadPayload(w http.ResponseWriter, r *http.Request) ([]byte, PendingFiles, error)
}

// PendingFiles are the files of one request, stored once the channel of
// the message is known.
type PendingFiles interface {
	Len() int
	// Save stores them as attachments of a message in channelID; refs is
	// the payload's attachments array.
	Save(ctx context.Context, channelID snowflake.ID, refs json.RawMessage) ([]store.Attachment, error)
}

type filesKey struct{}

// withFiles carries a callback's files to respond.
func withFiles(ctx context.Context, f PendingFiles) context.Context {
	if f == nil {
		return ctx
	}
	return context.WithValue(ctx, filesKey{}, f)
}

// saveFiles stores the files of the request ctx carries (or those given)
// for a message in channelID; nil when there are none and refs names
// none.
func saveFiles(ctx context.Context, f PendingFiles, channelID snowflake.ID, refs json.RawMessage) ([]store.Attachment, error) {
	if f == nil {
		f, _ = ctx.Value(filesKey{}).(PendingFiles)
	}
	if f == nil || f.Len() == 0 {
		if hasRefs(refs) {
			return nil, FormError("attachments.0.id", "ATTACHMENT_NOT_FOUND", "No file was uploaded for this attachment.")
		}
		return nil, nil
	}
	return f.Save(ctx, channelID, refs)
}

// hasRefs reports whether an attachments array names a new upload (an
// index, not an existing attachment's snowflake).
func hasRefs(refs json.RawMessage) bool {
	var list []struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(refs, &list) != nil {
		return false
	}
	for _, r := range list {
		var n uint64
		if json.Unmarshal(r.ID, &n) == nil && n < 1000 {
			return true
		}
		var s string
		if json.Unmarshal(r.ID, &s) == nil && len(s) > 0 && len(s) < 4 {
			return true
		}
	}
	return false
}

// editFiles is the new attachment list of an edit: nil (unchanged) when it
// carries neither files nor an attachments array; else the new uploads
// (kept attachments of the old message are not carried over: an
// interaction reply's edit replaces its files, the libraries resend the
// list they keep as uploads).
func editFiles(ctx context.Context, d messageData, channelID snowflake.ID) (*[]store.Attachment, error) {
	if d.files == nil || d.files.Len() == 0 {
		if string(d.Attachments) == "[]" {
			empty := []store.Attachment{}
			return &empty, nil // an empty list removes the files
		}
		return nil, nil
	}
	atts, err := saveFiles(ctx, d.files, channelID, d.Attachments)
	if err != nil {
		return nil, err
	}
	if atts == nil {
		atts = []store.Attachment{}
	}
	return &atts, nil
}
