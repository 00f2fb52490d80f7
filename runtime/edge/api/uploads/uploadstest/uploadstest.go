// Package uploadstest builds the multipart/form-data bodies Discord's
// libraries send with a message's files (payload_json, then files[n]), so
// the tests of the upload decoder and of the routes that take uploads
// build them one way.
package uploadstest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/textproto"
)

// Part is one file part of a body.
type Part struct {
	// Field is the form field name (files[0]).
	Field string
	// Name is the part's filename.
	Name string
	// ContentType is the part's declared Content-Type.
	ContentType string
	// Data is the file's bytes.
	Data []byte
}

// File is the part named field carrying data as a file called name of
// content type ctype.
func File(field, name, ctype string, data []byte) Part {
	return Part{Field: field, Name: name, ContentType: ctype, Data: data}
}

// PNG returns a tiny PNG header, enough for a content sniffer to call it
// image/png.
func PNG() []byte {
	return []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00")
}

// Body returns the Content-Type and bytes of a body with payload (JSON,
// as the payload_json part; none when nil) and parts in order.
func Body(payload any, parts ...Part) (contentType string, body []byte) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if payload != nil {
		raw, err := json.Marshal(payload)
		if err != nil {
			panic(fmt.Sprintf("uploadstest: payload does not marshal: %v", err))
		}
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="payload_json"`)
		h.Set("Content-Type", "application/json")
		pw, _ := mw.CreatePart(h)
		_, _ = pw.Write(raw)
	}
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="%s"; filename="%s"`, p.Field, p.Name))
		h.Set("Content-Type", p.ContentType)
		pw, _ := mw.CreatePart(h)
		_, _ = pw.Write(p.Data)
	}
	_ = mw.Close()
	return mw.FormDataContentType(), buf.Bytes()
}
