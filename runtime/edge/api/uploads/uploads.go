// Package uploads receives, stores and serves message attachments for
// the REST API and the bot platform's interaction replies.
//
// A message body may be multipart/form-data: a payload_json part with the
// JSON body and files[n] parts (any part with a filename counts, as the
// libraries name them files[0], file, ...). Each file is spooled to a
// temporary file, bounded by Config.MaxFileBytes (25 MiB by default;
// larger is 413 / 40005) and at most MaxFiles of them, then stored in the
// object store under attachments/{channel}/{attachment}/{name}. The
// content type is sniffed from the bytes (http.DetectContentType), never
// taken from the client.
//
// Responses carry a URL on the serving origin, /api/v10/attachments/
// {channel}/{attachment}/{name}?ex=&is=&hm= — Discord's CDN shape: ex is
// the expiry and is the issue time (hex Unix seconds), hm an HMAC-SHA256
// over the path and both — valid for Config.URLTTL. The file route is
// open (the signature is the credential, as on Discord's CDN) and serves
// only images, video and audio inline; everything else is sent as a
// download, with nosniff and a sandboxing CSP, so an upload can never run
// as a page of this origin.
package uploads

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
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

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/adapters/store/objects"
	"github.com/concord-chat/concord/runtime/base/rest"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// MaxFiles is Discord's limit of files per message.
const MaxFiles = 10

// Errors of uploads, as Discord's.
var (
	ErrEntityTooLarge = &rest.Error{Status: http.StatusRequestEntityTooLarge, Code: 40005, Message: "Request entity too large"}
	ErrNoObjectStore  = &rest.Error{Status: http.StatusBadRequest, Code: 50035, Message: "Invalid Form Body: this server has no object store for attachments"}
)

// IDSource mints attachment ids.
type IDSource interface {
	Next() (snowflake.ID, error)
}

// Config configures a Store. Zero fields take the stated defaults.
type Config struct {
	// Objects holds the files; nil refuses uploads (ErrNoObjectStore).
	Objects objects.Store
	// Key signs URLs; every process serving the same objects shares it.
	// Empty: a random key of this process.
	Key []byte
	// IDs mints attachment ids. Required.
	IDs IDSource
	// MaxJSONBytes caps payload_json (default 1 MiB).
	MaxJSONBytes int64
	// MaxFileBytes caps each file (default 25 MiB).
	MaxFileBytes int64
	// URLTTL is how long a signed URL is valid (default 24 hours).
	URLTTL time.Duration
	// MediaURL is the origin of attachment URLs (scheme://host[:port]);
	// default: the origin of the request being served (WithBase).
	MediaURL string
	// Now returns the current time (default time.Now).
	Now func() time.Time
	// TempDir is where uploads are spooled (default os.TempDir()).
	TempDir string
}

// Store receives, stores, signs and serves attachments.
type Store struct {
	cfg Config
}

// New fills cfg's defaults and returns a Store.
func New(cfg Config) *Store {
	if cfg.MaxJSONBytes <= 0 {
		cfg.MaxJSONBytes = 1 << 20
	}
	if cfg.MaxFileBytes <= 0 {
		cfg.MaxFileBytes = 25 << 20
	}
	if cfg.URLTTL <= 0 {
		cfg.URLTTL = 24 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.TempDir == "" {
		cfg.TempDir = os.TempDir()
	}
	if len(cfg.Key) == 0 {
		cfg.Key = make([]byte, 32)
		_, _ = rand.Read(cfg.Key)
	}
	return &Store{cfg: cfg}
}

// Files are the uploads of one request, on disk until the request ends.
type Files []File

// Len is the number of files.
func (fs Files) Len() int { return len(fs) }

// RequestLimit is the largest multipart request a message may be: its
// payload_json, and MaxFiles files with room for each part's headers.
// Zero limits take the defaults (1 MiB of JSON, 25 MiB a file).
func RequestLimit(maxJSON, maxFile int64) int64 {
	if maxJSON <= 0 {
		maxJSON = 1 << 20
	}
	if maxFile <= 0 {
		maxFile = 25 << 20
	}
	return maxJSON + int64(MaxFiles)*(maxFile+4096)
}

// ReadPayload reads a message body: JSON (no files), or multipart with
// payload_json and files, which are removed from disk when the request
// ends.
func (s *Store) ReadPayload(w http.ResponseWriter, r *http.Request) ([]byte, Files, error) {
	mediaType, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mediaType != "multipart/form-data" {
		body, err := rest.ReadBody(w, r, s.cfg.MaxJSONBytes)
		return body, nil, err
	}
	limit := RequestLimit(s.cfg.MaxJSONBytes, s.cfg.MaxFileBytes)
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	body, files, err := Decode(r.Body, params["boundary"], s.cfg.MaxJSONBytes, s.cfg.MaxFileBytes, s.cfg.TempDir)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, nil, ErrEntityTooLarge
		}
		return nil, nil, err
	}
	context.AfterFunc(r.Context(), func() { Remove(files) })
	return body, files, nil
}

// upload is one received file, spooled to disk until stored.
type File struct {
	// index is n of files[n] (the order of arrival for other names).
	index    int
	filename string
	path     string
	size     int64
	sniffed  string
}

// Ref is an element of a payload's attachments array: a new
// upload named by its files[n] index (id), or an existing attachment to
// keep (edits).
type Ref struct {
	ID          json.RawMessage `json:"id"`
	Filename    string          `json:"filename"`
	Description string          `json:"description"`
}

// Index returns the files[n] index a new upload's id names.
func (a Ref) Index() (int, bool) {
	s := strings.Trim(string(a.ID), `"`)
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 0 && n < 1000
}

// IsNew reports whether the id is a small upload index rather than an
// existing attachment's snowflake.
func (a Ref) IsNew() bool {
	_, ok := a.Index()
	return ok
}

func Find(list []store.Attachment, raw json.RawMessage) (store.Attachment, bool) {
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

// Remove deletes the files from disk.
func Remove(files []File) {
	for _, f := range files {
		_ = os.Remove(f.path)
	}
}

// Decode reads a multipart message body from rd: the
// payload_json part (at most maxJSON bytes; a part named content etc. is
// not supported, as the libraries always send payload_json) and up to
// MaxFiles file parts of at most maxFile bytes each, spooled into dir.
// On error nothing stays on disk.
func Decode(rd io.Reader, boundary string, maxJSON, maxFile int64, dir string) (body []byte, files []File, err error) {
	if boundary == "" {
		return nil, nil, rest.FormError("", "CONTENT_TYPE_INVALID", "multipart/form-data needs a boundary")
	}
	defer func() {
		if err != nil {
			Remove(files)
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
			return nil, files, rest.FormError("", "MULTIPART_INVALID", "The multipart body could not be parsed.")
		}
		name := part.FormName()
		switch {
		case name == "payload_json":
			if body != nil {
				return nil, files, rest.FormError("payload_json", "DUPLICATE", "payload_json was sent twice.")
			}
			b, rerr := io.ReadAll(io.LimitReader(part, maxJSON+1))
			if rerr != nil {
				return nil, files, multipartReadErr(rerr)
			}
			if int64(len(b)) > maxJSON {
				return nil, files, ErrEntityTooLarge
			}
			body = b
		case part.FileName() != "":
			if len(files) >= MaxFiles {
				return nil, files, rest.FormError("files", "BASE_TYPE_MAX_LENGTH", "Must be 10 or fewer in length.")
			}
			idx := len(files)
			if n, ok := fileIndex(name); ok {
				idx = n
			}
			for _, f := range files {
				if f.index == idx {
					return nil, files, rest.FormError(fmt.Sprintf("files[%d]", idx), "DUPLICATE", "This file was sent twice.")
				}
			}
			u, serr := spool(part, dir, maxFile)
			if serr != nil {
				return nil, files, serr
			}
			u.index = idx
			u.filename = CleanFilename(part.FileName())
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
	return rest.FormError("", "MULTIPART_INVALID", "The multipart body could not be parsed.")
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
func spool(part io.Reader, dir string, maxFile int64) (File, error) {
	f, err := os.CreateTemp(dir, "concord-upload-*")
	if err != nil {
		return File{}, errors.Join(store.ErrUnavailable, err)
	}
	u := File{path: f.Name()}
	head := make([]byte, 512)
	n, err := io.ReadFull(part, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		f.Close()
		os.Remove(u.path)
		return File{}, multipartReadErr(err)
	}
	head = head[:n]
	u.sniffed = http.DetectContentType(head)
	if _, err := f.Write(head); err != nil {
		f.Close()
		os.Remove(u.path)
		return File{}, errors.Join(store.ErrUnavailable, err)
	}
	rest, err := io.Copy(f, io.LimitReader(part, maxFile-int64(n)+1))
	cerr := f.Close()
	if err != nil {
		os.Remove(u.path)
		return File{}, multipartReadErr(err)
	}
	if cerr != nil {
		os.Remove(u.path)
		return File{}, errors.Join(store.ErrUnavailable, cerr)
	}
	u.size = int64(n) + rest
	if u.size > maxFile {
		os.Remove(u.path)
		return File{}, ErrEntityTooLarge
	}
	return u, nil
}

// CleanFilename keeps the last path element of a client's filename,
// without control characters, at most 255 bytes; empty becomes "file".
func CleanFilename(name string) string {
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

// Save stores the uploaded files of a message in channelID.
// refs (the payload's attachments array) may rename uploads by index; a
// ref naming no upload is a 50035.
func (s *Store) Save(ctx context.Context, channelID snowflake.ID, refs []Ref, files []File) ([]store.Attachment, error) {
	names := make(map[int]string)
	for i, ref := range refs {
		n, ok := ref.Index()
		found := false
		for _, f := range files {
			found = found || ok && f.index == n
		}
		if !found {
			return nil, rest.FormError(fmt.Sprintf("attachments.%d.id", i), "ATTACHMENT_NOT_FOUND", "No file was uploaded for this attachment.")
		}
		if ref.Filename != "" {
			names[n] = CleanFilename(ref.Filename)
		}
	}
	if len(files) == 0 {
		return nil, nil
	}
	if s.cfg.Objects == nil {
		return nil, ErrNoObjectStore
	}
	out := make([]store.Attachment, 0, len(files))
	for _, f := range files {
		id, err := s.cfg.IDs.Next()
		if err != nil {
			return nil, errors.Join(store.ErrUnavailable, err)
		}
		name := f.filename
		if n, ok := names[f.index]; ok {
			name = n
		}
		key := fmt.Sprintf("attachments/%d/%d/%s", channelID, id, keyName(name))
		fh, err := os.Open(f.path)
		if err != nil {
			return nil, errors.Join(store.ErrUnavailable, err)
		}
		err = s.cfg.Objects.Put(ctx, key, fh, f.size, f.sniffed)
		fh.Close()
		if err != nil {
			return nil, errors.Join(store.ErrUnavailable, err)
		}
		out = append(out, store.Attachment{ID: id, Filename: name, Size: int(f.size), URL: key, ContentType: f.sniffed})
	}
	return out, nil
}

// sign returns the query of a signed attachment URL for path
// (channel/attachment/name), issued at now.
func (s *Store) sign(path string, now time.Time) string {
	is := strconv.FormatInt(now.Unix(), 16)
	ex := strconv.FormatInt(now.Add(s.cfg.URLTTL).Unix(), 16)
	return "ex=" + ex + "&is=" + is + "&hm=" + s.mac(path, ex, is)
}

func (s *Store) mac(path, ex, is string) string {
	m := hmac.New(sha256.New, s.cfg.Key)
	m.Write([]byte("attachment\x00" + path + "\x00" + ex + "\x00" + is))
	return hex.EncodeToString(m.Sum(nil))
}

type baseKey struct{}

// WithBase remembers the scheme and host of each request, the origin of
// the attachment URLs rendered while serving it.
func WithBase(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), baseKey{}, requestBase(r))))
	})
}

// Sign rewrites the stored keys of a rendered message's attachments into
// signed URLs.
func (s *Store) Sign(ctx context.Context, atts []wire.Attachment) {
	base := s.cfg.MediaURL
	if base == "" {
		base, _ = ctx.Value(baseKey{}).(string)
	}
	now := s.cfg.Now()
	for i := range atts {
		a := &atts[i]
		path, ok := strings.CutPrefix(a.URL, "attachments/")
		if !ok {
			continue // a URL stored by something else: left as it is
		}
		a.URL = base + "/api/v10/attachments/" + path + "?" + s.sign(path, now)
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

// Serve answers GET /attachments/{channel}/{attachment}/{name} (path
// values of those names): the signed file route.
func (s *Store) Serve(w http.ResponseWriter, r *http.Request) error {
	path := r.PathValue("channel") + "/" + r.PathValue("attachment") + "/" + r.PathValue("name")
	q := r.URL.Query()
	ex, is, hm := q.Get("ex"), q.Get("is"), q.Get("hm")
	exp, err := strconv.ParseInt(ex, 16, 64)
	if err != nil || !hmac.Equal([]byte(hm), []byte(s.mac(path, ex, is))) {
		return &rest.Error{Status: http.StatusUnauthorized, Code: 0, Message: "This content is no longer available."}
	}
	if s.cfg.Now().Unix() >= exp {
		return &rest.Error{Status: http.StatusNotFound, Code: 0, Message: "This content is no longer available."}
	}
	if s.cfg.Objects == nil {
		return &rest.Error{Status: http.StatusNotFound, Code: 0, Message: "404: Not Found"}
	}
	rc, info, err := s.cfg.Objects.Get(r.Context(), "attachments/"+path)
	if errors.Is(err, objects.ErrNotFound) {
		return &rest.Error{Status: http.StatusNotFound, Code: 0, Message: "404: Not Found"}
	}
	if err != nil {
		return errors.Join(store.ErrUnavailable, err)
	}
	defer rc.Close()
	hd := w.Header()
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	hd.Set("Cache-Control", "private, max-age="+strconv.FormatInt(max(0, exp-s.cfg.Now().Unix()), 10))
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

// requestBase is the scheme and host the request came in on.
func requestBase(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// Pending binds a request's files to the store that keeps them, for
// callers that learn the channel later (interaction replies).
type Pending struct {
	s     *Store
	Files Files
}

// Pending returns files bound to s.
func (s *Store) Pending(files Files) *Pending { return &Pending{s: s, Files: files} }

// Len is the number of files.
func (p *Pending) Len() int {
	if p == nil {
		return 0
	}
	return len(p.Files)
}

// Save stores the files in channelID; refs is the payload's attachments
// array (JSON, possibly empty). Refs naming existing attachments (by
// snowflake, in edits) are not uploads and are left to the caller.
func (p *Pending) Save(ctx context.Context, channelID snowflake.ID, refs json.RawMessage) ([]store.Attachment, error) {
	var all, rs []Ref
	if len(refs) > 0 && string(refs) != "null" {
		if err := json.Unmarshal(refs, &all); err != nil {
			return nil, rest.FormError("attachments", "BASE_TYPE_LIST", "Must be an array.")
		}
	}
	for _, r := range all {
		if r.IsNew() {
			rs = append(rs, r)
		}
	}
	if p == nil {
		if len(rs) > 0 {
			return nil, rest.FormError("attachments.0.id", "ATTACHMENT_NOT_FOUND", "No file was uploaded for this attachment.")
		}
		return nil, nil
	}
	return p.s.Save(ctx, channelID, rs, p.Files)
}

// ForgetChannels deletes the objects of every attachment posted in the
// channels (deleted ones: their messages are gone). Like Forget it is
// best effort.
func (s *Store) ForgetChannels(ctx context.Context, ids []snowflake.ID) error {
	if s.cfg.Objects == nil {
		return nil
	}
	var errs []error
	for _, id := range ids {
		if err := s.cfg.Objects.DeletePrefix(ctx, fmt.Sprintf("attachments/%d", id)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Forget deletes the objects of attachments whose message is gone; it
// is best effort (an object left behind costs space, nothing else: no
// URL to it can be signed any more).
func (s *Store) Forget(ctx context.Context, atts []store.Attachment) error {
	if s.cfg.Objects == nil {
		return nil
	}
	var errs []error
	for _, a := range atts {
		if strings.HasPrefix(a.URL, "attachments/") {
			if err := s.cfg.Objects.Delete(ctx, a.URL); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
