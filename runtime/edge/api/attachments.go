package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/wire"
	"github.com/concord-chat/concord/runtime/edge/api/uploads"
)

// Attachments: multipart bodies (payload_json + files[n]) on message
// sends, webhook executions and webhook message edits, stored in the
// object store, signed and served by package uploads. See its doc for the
// limits, the sniffing and the URL signature.

// maxFiles is Discord's limit of files per message.
const maxFiles = uploads.MaxFiles

type attachmentRef = uploads.Ref

// readMessagePayload reads a JSON or multipart message body.
func (wr *writes) readMessagePayload(w http.ResponseWriter, r *http.Request) ([]byte, uploads.Files, error) {
	return wr.uploads.ReadPayload(w, r)
}

// saveAttachments stores the uploaded files of a message in channelID.
func (wr *writes) saveAttachments(ctx context.Context, channelID snowflake.ID, refs []attachmentRef, files uploads.Files) ([]store.Attachment, error) {
	return wr.uploads.Save(ctx, channelID, refs, files)
}

// attachmentURLs signs the attachment URLs of a rendered message.
func (v *views) attachmentURLs(ctx context.Context, atts []wire.Attachment) {
	v.uploads.Sign(ctx, atts)
}

// getAttachment is GET /attachments/{channel}/{attachment}/{name}.
func (h *messageHandler) getAttachment(w http.ResponseWriter, r *http.Request) error {
	return h.uploads.Serve(w, r)
}

// forgetAttachments deletes the objects of deleted messages' attachments
// (after the answer: a failure is only logged).
func (wr *writes) forgetAttachments(ctx context.Context, atts []store.Attachment) {
	if len(atts) == 0 {
		return
	}
	if err := wr.uploads.Forget(ctx, atts); err != nil {
		wr.log.Warn("attachment objects left behind", "err", err)
	}
}

// forgetChannels deletes the attachment objects of deleted channels
// (before the answer, so that a deleted channel's files are gone when it
// is acknowledged; a failure is only logged).
func (wr *writes) forgetChannels(ctx context.Context, ids ...snowflake.ID) {
	bg, cancel := background(ctx)
	defer cancel()
	if err := wr.uploads.ForgetChannels(bg, ids); err != nil {
		wr.log.Warn("attachment objects of deleted channels left behind", "channels", ids, "err", err)
	}
}

// editAttachments applies an edit's attachments array and files to m:
// the array lists the existing attachments to keep (by id) and names new
// uploads by index; without an array every existing one is kept and the
// files are added. Removed attachments are returned for forgetting.
func (wr *writes) editAttachments(ctx context.Context, m *store.Message, refs *[]attachmentRef, files uploads.Files) ([]store.Attachment, error) {
	if refs == nil && len(files) == 0 {
		return nil, nil
	}
	keep := []store.Attachment{}
	var news []attachmentRef
	if refs != nil {
		for _, ref := range *refs {
			if old, ok := uploads.Find(m.Attachments, ref.ID); ok && !ref.IsNew() {
				keep = append(keep, old)
			} else {
				news = append(news, ref)
			}
		}
	} else {
		keep = append(keep, m.Attachments...)
	}
	if len(keep)+len(files) > maxFiles {
		return nil, formError("attachments", "BASE_TYPE_MAX_LENGTH", "Must be 10 or fewer in length.")
	}
	added, err := wr.saveAttachments(ctx, m.ChannelID, news, files)
	if err != nil {
		return nil, err
	}
	var removed []store.Attachment
	for _, a := range m.Attachments {
		if _, ok := findByID(keep, a.ID); !ok {
			removed = append(removed, a)
		}
	}
	m.Attachments = append(keep, added...)
	return removed, nil
}

func findByID(list []store.Attachment, id snowflake.ID) (store.Attachment, bool) {
	for _, a := range list {
		if a.ID == id {
			return a, true
		}
	}
	return store.Attachment{}, false
}

// addedAttachments are the attachments of after that before did not have
// (an edit's new files).
func addedAttachments(before, after []store.Attachment) []store.Attachment {
	var out []store.Attachment
	for _, a := range after {
		if _, ok := findByID(before, a.ID); !ok {
			out = append(out, a)
		}
	}
	return out
}

// writeMessage creates (create) or updates a message through the guild
// service's write path, with the attachment objects of the write: added
// were stored for it and are deleted again when the write is refused
// (nothing names them; after a store failure the message may name them,
// so they stay); removed are the ones an edit dropped, deleted once it is
// written.
func (wr *writes) writeMessage(ctx context.Context, create bool, mw guild.MessageWrite, added, removed []store.Attachment) (guild.Written, error) {
	write := wr.messages.Update
	if create {
		write = wr.messages.Create
	}
	out, err := write(ctx, mw)
	bg, cancel := background(ctx)
	defer cancel()
	switch {
	case err == nil:
		wr.forgetAttachments(bg, removed)
	case !errors.Is(err, guild.ErrUnavailable):
		wr.forgetAttachments(bg, added)
	}
	return out, err
}
