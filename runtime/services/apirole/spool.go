package apirole

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"

	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/edge/api/uploads"
)

// An upload (multipart/form-data: a message, webhook or interaction reply
// with files) can be ten files of the configured size each, far more than
// is sensible to hold in memory per request. The API node must still be
// able to send it again after a failed attempt, so it spools uploads to a
// temporary file; the guild node streams them to the REST handler, whose
// upload parser applies the per-file and per-message limits. No route
// reads an upload's body to find its guild.

// isUpload reports whether r carries a multipart/form-data body.
func isUpload(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "multipart/form-data"
}

// defaultMaxUpload bounds a spooled upload when the proxy is given no
// limit: the REST API's default.
var defaultMaxUpload = uploads.RequestLimit(0, 0)

// replayBody is a request body the proxy can send more than once: in
// memory, or spooled to a temporary file.
type replayBody struct {
	mem  []byte
	file *os.File
	size int64
}

// replayableBody reads r's body for replay: an upload to a temporary file of at
// most maxUpload bytes, anything else into memory up to maxProxyBody. The
// caller closes the result.
func replayableBody(w http.ResponseWriter, r *http.Request, maxUpload int64) (*replayBody, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return &replayBody{}, nil
	}
	if !isUpload(r) {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxProxyBody))
		if err != nil {
			return nil, err
		}
		return &replayBody{mem: b, size: int64(len(b))}, nil
	}
	f, err := os.CreateTemp("", "concord-upload-*")
	if err != nil {
		return nil, fmt.Errorf("apirole: spool upload: %w", err)
	}
	// Unlinked at once: the open file is all the proxy needs, and nothing
	// is left behind if the process dies mid-request.
	os.Remove(f.Name())
	n, err := io.Copy(f, http.MaxBytesReader(w, r.Body, maxUpload))
	if err != nil {
		f.Close()
		return nil, err
	}
	return &replayBody{file: f, size: n}, nil
}

// routing is the body the resolver reads: uploads route by path alone.
func (b *replayBody) routing() []byte { return b.mem }

// reader returns a fresh reader over the whole body.
func (b *replayBody) reader() io.ReadCloser {
	if b.file != nil {
		return io.NopCloser(io.NewSectionReader(b.file, 0, b.size))
	}
	return io.NopCloser(bytes.NewReader(b.mem))
}

// Close releases the spooled file.
func (b *replayBody) Close() error {
	if b.file != nil {
		return b.file.Close()
	}
	return nil
}

// maxUploadBody is the largest upload the api role spools: exactly what
// the REST API's upload parser takes, so a request is refused in the same
// place, with the same answer, in dev and in the split roles.
func maxUploadBody(cfg config.Config) int64 {
	return uploads.RequestLimit(0, cfg.MaxFileBytes)
}
