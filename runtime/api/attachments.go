package api

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/concord-chat/concord/runtime/guild"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/store"
	"github.com/concord-chat/concord/runtime/store/objects"
	"github.com/concord-chat/concord/runtime/wire"
)

// Attachments.
//
// A message, a webhook execution or an edit may be multipart/form-data:
// a payload_json part with the JSON body and files[n] parts (any part
// with a filename counts, as the libraries name them files[0], file,
// ...). Each file is spooled to a temporary file, bounded by
// Config.MaxFileBytes (25 MiB by default; larger is 413 / 40005) and at
// most maxFiles of them, then stored in the object store under
// attachments/{channel}/{attachment}/{name}. The content type is sniffed
// from the bytes (http.DetectContentType), never taken from the client.
//
// Responses carry a URL on this server, /api/v10/attachments/{channel}/
// {attachment}/{name}?ex=&is=&hm= — Discord's CDN shape: ex is the expiry
// and is the issue time (hex Unix seconds), hm an HMAC-SHA256 over the
// path and both — valid for Config.AttachmentURLTTL. The file route is
// open (the signature is the credential, as on Discord's CDN) and serves
// only images, video and audio inline; everything else is sent as a
// download, with nosniff and a sandboxing CSP, so an upload can never run
// as a page of this origin.

// maxFiles is Discord's limit of files per message.
const maxFiles = 10

var (
	errEntityTooLarge = &apiError{Status: http.StatusRequestEntityTooLarge, Code: 40005, Message: "Request entity too large"}
	errNoObjectStore  = &apiError{Status: http.StatusBadRequest, Code: 50035, Message: "Invalid Form Body: this server has no object store for attachments"}
)

// upload is one received file, spooled to disk until stored.
type upload struct {
	// index is n of files[n] (the order of arrival for other names).
	index    int
	filename string
	path     string
	size     int64
	sniffed  string
}

// attachmentRef is an element of a payload's attachments array: a new
// upload named by its files[n] index (id), or an existing attachment to
// keep (edits).
type attachmentRef struct {
	ID          json.RawMessage `json:"id"`
	Filename    string          `json:"filename"`
	Description string          `json:"description"`
}

// index returns the files[n] index a new upload's id names.
func (a attachmentRef) index() (int, bool) {
	s := strings.Trim(string(a.ID), `"`)
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 0 && n < 1000
}

// isNew reports whether the id is a small upload index rather than an
// existing attachment's snowflake.
func (a attachmentRef) isNew() bool {
	_, ok := a.index()
	return ok
}

func findAttachment(list []store.Attachment, raw json.RawMessage) (store.Attachment, bool) {
	id, err := snowflake.Parse(strings.Trim(string(raw), `"`))
	if err != nil {
		return store.Attachment{}, false
	}
	for _, a := range list {
		if a.ID == id {
			return a, true
		}
	}
	return store.Attachment{}, false
}

// readMessagePayload reads a message body: JSON, or multipart with
// payload_json and files. The caller's files are removed from disk when
// the request ends.
func (h *handler) readMessagePayload(w http.ResponseWriter, r *http.Request) ([]byte, []upload, error) {
	mediaType, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mediaType != "multipart/form-data" {
		body, err := readBody(w, r, h.cfg.MaxBodyBytes)
		return body, nil, err
	}
	limit := h.cfg.MaxBodyBytes + int64(maxFiles)*(h.cfg.MaxFileBytes+4096)
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	body, files, err := decodeMultipart(r.Body, params["boundary"], h.cfg.MaxBodyBytes, h.cfg.MaxFileBytes, os.TempDir())
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, nil, errEntityTooLarge
		}
		return nil, nil, err
	}
	context.AfterFunc(r.Context(), func() { removeUploads(files) })
	return body, files, nil
}

func removeUploads(files []upload) {
	for _, f := range files {
		_ = os.Remove(f.path)
	}
}

// decodeMultipart reads a multipart message body from rd: the
// payload_json part (at most maxJSON bytes; a part named content etc. is
// not supported, as the libraries always send payload_json) and up to
// maxFiles file parts of at most maxFile bytes each, spooled into dir.
// On error nothing stays on disk.
func decodeMultipart(rd io.Reader, boundary string, maxJSON, maxFile int64, dir string) (body []byte, files []upload, err error) {
	if boundary == "" {
		return nil, nil, formError("", "CONTENT_TYPE_INVALID", "multipart/form-data needs a boundary")
	}
	defer func() {
		if err != nil {
			removeUploads(files)
			files = nil
		}
	}()
	mr := multipart.NewReader(rd, boundary)
	for {
		part, perr := mr.NextPart()
		if perr == io.EOF {
			break
		}
		if perr != nil {
			var mbe *http.MaxBytesError
			if errors.As(perr, &mbe) {
				return nil, files, perr
			}
			return nil, files, formError("", "MULTIPART_INVALID", "The multipart body could not be parsed.")
		}
		name := part.FormName()
		switch {
		case name == "payload_json":
			if body != nil {
				return nil, files, formError("payload_json", "DUPLICATE", "payload_json was sent twice.")
			}
			b, rerr := io.ReadAll(io.LimitReader(part, maxJSON+1))
			if rerr != nil {
				return nil, files, multipartReadErr(rerr)
			}
			if int64(len(b)) > maxJSON {
				return nil, files, errEntityTooLarge
			}
			body = b
		case part.FileName() != "":
			if len(files) >= maxFiles {
				return nil, files, formError("files", "BASE_TYPE_MAX_LENGTH", "Must be 10 or fewer in length.")
			}
			idx := len(files)
			if n, ok := fileIndex(name); ok {
				idx = n
			}
			for _, f := range files {
				if f.index == idx {
					return nil, files, formError(fmt.Sprintf("files[%d]", idx), "DUPLICATE", "This file was sent twice.")
				}
			}
			u, serr := spool(part, dir, maxFile)
			if serr != nil {
				return nil, files, serr
			}
			u.index = idx
			u.filename = cleanFilename(part.FileName())
			files = append(files, u)
		default:
			// Other form fields are ignored, as Discord ignores them when
			// payload_json is present.
			if _, derr := io.Copy(io.Discard, io.LimitReader(part, maxJSON+1)); derr != nil {
				return nil, files, multipartReadErr(derr)
			}
		}
	}
	if body == nil {
		body = []byte("{}")
	}
	return body, files, nil
}

func multipartReadErr(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return err
	}
	return formError("", "MULTIPART_INVALID", "The multipart body could not be parsed.")
}

// fileIndex reads n from a part named files[n].
func fileIndex(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, "files[")
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, "]")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n >= 1000 {
		return 0, false
	}
	return n, true
}

// spool copies one file part to a temporary file, sniffing its type.
func spool(part io.Reader, dir string, maxFile int64) (upload, error) {
	f, err := os.CreateTemp(dir, "concord-upload-*")
	if err != nil {
		return upload{}, errors.Join(guild.ErrUnavailable, err)
	}
	u := upload{path: f.Name()}
	head := make([]byte, 512)
	n, err := io.ReadFull(part, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		f.Close()
		os.Remove(u.path)
		return upload{}, multipartReadErr(err)
	}
	head = head[:n]
	u.sniffed = http.DetectContentType(head)
	if _, err := f.Write(head); err != nil {
		f.Close()
		os.Remove(u.path)
		return upload{}, errors.Join(guild.ErrUnavailable, err)
	}
	rest, err := io.Copy(f, io.LimitReader(part, maxFile-int64(n)+1))
	cerr := f.Close()
	if err != nil {
		os.Remove(u.path)
		return upload{}, multipartReadErr(err)
	}
	if cerr != nil {
		os.Remove(u.path)
		return upload{}, errors.Join(guild.ErrUnavailable, cerr)
	}
	u.size = int64(n) + rest
	if u.size > maxFile {
		os.Remove(u.path)
		return upload{}, errEntityTooLarge
	}
	return u, nil
}

// cleanFilename keeps the last path element of a client's filename,
// without control characters, at most 255 bytes; empty becomes "file".
func cleanFilename(name string) string {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, name)
	for len(name) > 255 {
		_, size := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-size]
	}
	if name == "" || name == "." || name == ".." {
		return "file"
	}
	return name
}

// keyName is a filename reduced to the characters an object key allows.
func keyName(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 100 {
			break
		}
	}
	s := strings.Trim(b.String(), ".")
	if s == "" {
		return "file"
	}
	return s
}

// saveAttachments stores the uploaded files of a message in channelID.
// refs (the payload's attachments array) may rename uploads by index; a
// ref naming no upload is a 50035.
func (h *handler) saveAttachments(ctx context.Context, channelID snowflake.ID, refs []attachmentRef, files []upload) ([]store.Attachment, error) {
	names := make(map[int]string)
	for i, ref := range refs {
		n, ok := ref.index()
		found := false
		for _, f := range files {
			found = found || ok && f.index == n
		}
		if !found {
			return nil, formError(fmt.Sprintf("attachments.%d.id", i), "ATTACHMENT_NOT_FOUND", "No file was uploaded for this attachment.")
		}
		if ref.Filename != "" {
			names[n] = cleanFilename(ref.Filename)
		}
	}
	if len(files) == 0 {
		return nil, nil
	}
	if h.objects == nil {
		return nil, errNoObjectStore
	}
	out := make([]store.Attachment, 0, len(files))
	for _, f := range files {
		id, err := h.ids.Next()
		if err != nil {
			return nil, errors.Join(guild.ErrUnavailable, err)
		}
		name := f.filename
		if n, ok := names[f.index]; ok {
			name = n
		}
		key := fmt.Sprintf("attachments/%d/%d/%s", channelID, id, keyName(name))
		fh, err := os.Open(f.path)
		if err != nil {
			return nil, errors.Join(guild.ErrUnavailable, err)
		}
		err = h.objects.Put(ctx, key, fh, f.size, f.sniffed)
		fh.Close()
		if err != nil {
			return nil, errors.Join(guild.ErrUnavailable, err)
		}
		out = append(out, store.Attachment{ID: id, Filename: name, Size: int(f.size), URL: key, ContentType: f.sniffed})
	}
	return out, nil
}

// signAttachment returns the query of a signed attachment URL for path
// (channel/attachment/name), issued at now.
func (h *handler) signAttachment(path string, now time.Time) string {
	is := strconv.FormatInt(now.Unix(), 16)
	ex := strconv.FormatInt(now.Add(h.cfg.AttachmentURLTTL).Unix(), 16)
	return "ex=" + ex + "&is=" + is + "&hm=" + h.attachmentMAC(path, ex, is)
}

func (h *handler) attachmentMAC(path, ex, is string) string {
	m := hmac.New(sha256.New, h.attachKey)
	m.Write([]byte("attachment\x00" + path + "\x00" + ex + "\x00" + is))
	return hex.EncodeToString(m.Sum(nil))
}

type baseKey struct{}

// withBase remembers the scheme and host of the request, the origin of
// the attachment URLs rendered while serving it.
func withBase(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), baseKey{}, requestBase(r))))
	})
}

// attachmentURLs rewrites the stored keys of a rendered message's
// attachments into signed URLs.
func (h *handler) attachmentURLs(ctx context.Context, atts []wire.Attachment) {
	base := h.cfg.MediaURL
	if base == "" {
		base, _ = ctx.Value(baseKey{}).(string)
	}
	now := h.cfg.Now()
	for i := range atts {
		a := &atts[i]
		path, ok := strings.CutPrefix(a.URL, "attachments/")
		if !ok {
			continue // a URL stored by something else: left as it is
		}
		a.URL = base + "/api/v10/attachments/" + path + "?" + h.signAttachment(path, now)
		a.ProxyURL = a.URL
	}
}

// inlineTypes are the sniffed types served for display; every other file
// is a download.
func inline(ct string) bool {
	for _, p := range []string{"image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp", "video/", "audio/"} {
		if strings.HasPrefix(ct, p) {
			return true
		}
	}
	return false
}

// getAttachment is GET /attachments/{channel}/{attachment}/{name}: the
// signed file route.
func (h *handler) getAttachment(w http.ResponseWriter, r *http.Request) error {
	path := r.PathValue("channel") + "/" + r.PathValue("attachment") + "/" + r.PathValue("name")
	q := r.URL.Query()
	ex, is, hm := q.Get("ex"), q.Get("is"), q.Get("hm")
	exp, err := strconv.ParseInt(ex, 16, 64)
	if err != nil || !hmac.Equal([]byte(hm), []byte(h.attachmentMAC(path, ex, is))) {
		return &apiError{Status: http.StatusUnauthorized, Code: 0, Message: "This content is no longer available."}
	}
	if h.cfg.Now().Unix() >= exp {
		return &apiError{Status: http.StatusNotFound, Code: 0, Message: "This content is no longer available."}
	}
	if h.objects == nil {
		return &apiError{Status: http.StatusNotFound, Code: 0, Message: "404: Not Found"}
	}
	rc, info, err := h.objects.Get(r.Context(), "attachments/"+path)
	if errors.Is(err, objects.ErrNotFound) {
		return &apiError{Status: http.StatusNotFound, Code: 0, Message: "404: Not Found"}
	}
	if err != nil {
		return errors.Join(guild.ErrUnavailable, err)
	}
	defer rc.Close()
	hd := w.Header()
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	hd.Set("Cache-Control", "private, max-age="+strconv.FormatInt(max(0, exp-h.cfg.Now().Unix()), 10))
	hd.Set("Content-Length", strconv.FormatInt(info.Size, 10))
	if inline(info.ContentType) {
		hd.Set("Content-Type", info.ContentType)
	} else {
		hd.Set("Content-Type", "application/octet-stream")
		hd.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": r.PathValue("name")}))
	}
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = io.Copy(w, rc)
	}
	return nil
}
