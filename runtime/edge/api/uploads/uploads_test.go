package uploads

import (
	"bytes"
	"github.com/concord-chat/concord/runtime/edge/api/uploads/uploadstest"
	"os"
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	ct, body := uploadstest.Body(map[string]any{"content": "x"},
		uploadstest.File("files[0]", "dir/a.png", "text/html", uploadstest.PNG()), uploadstest.File("file", "b.txt", "image/png", []byte("hello")))
	boundary := strings.TrimPrefix(ct, "multipart/form-data; boundary=")
	dir := t.TempDir()
	payload, files, err := Decode(bytes.NewReader(body), boundary, 1<<10, 1<<10, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer Remove(files)
	if string(payload) != `{"content":"x"}` || len(files) != 2 {
		t.Fatalf("payload %s, %d files", payload, len(files))
	}
	if f := files[0]; f.index != 0 || f.filename != "a.png" || f.sniffed != "image/png" || f.size != int64(len(uploadstest.PNG())) {
		t.Fatalf("first file = %+v", f)
	}
	if f := files[1]; f.index != 1 || f.filename != "b.txt" || !strings.HasPrefix(f.sniffed, "text/plain") {
		t.Fatalf("second file = %+v", f)
	}
	if _, _, err := Decode(bytes.NewReader(body), boundary, 1<<10, 8, dir); err != ErrEntityTooLarge {
		t.Fatalf("file over the limit: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 2 {
		t.Fatalf("%d files on disk after a failed decode (want the first decode's 2)", len(left))
	}
}

// FuzzMultipart feeds the multipart decoder arbitrary bodies: it must
// never panic, never keep more than MaxFiles files or a file above the
// limit, and leave nothing on disk when it fails.
func FuzzMultipart(f *testing.F) {
	_, ok := uploadstest.Body(map[string]any{"content": "x"}, uploadstest.File("files[0]", "a.png", "image/png", uploadstest.PNG()))
	f.Add(ok, "")
	f.Add([]byte("--b\r\nContent-Disposition: form-data; name=\"payload_json\"\r\n\r\n{}\r\n--b--\r\n"), "b")
	f.Add([]byte("--b\r\nContent-Disposition: form-data; name=\"files[9999999999]\"; filename=\"x\"\r\n\r\nx\r\n--b--\r\n"), "b")
	f.Add([]byte("garbage"), "b")
	f.Fuzz(func(t *testing.T, body []byte, boundary string) {
		if boundary == "" {
			// Use the writer's boundary for the seeded well-formed body.
			if i := bytes.Index(body, []byte("\r\n")); i > 2 {
				boundary = string(body[2:i])
			}
		}
		dir := t.TempDir()
		payload, files, err := Decode(bytes.NewReader(body), boundary, 1<<10, 64, dir)
		left, _ := os.ReadDir(dir)
		if err != nil {
			if len(left) != 0 || files != nil {
				t.Fatalf("failed decode left %d files on disk, %d uploads", len(left), len(files))
			}
			return
		}
		if len(files) > MaxFiles || len(left) != len(files) || len(payload) > 1<<10 {
			t.Fatalf("%d files, %d on disk, payload %d", len(files), len(left), len(payload))
		}
		for _, u := range files {
			if u.size > 64 || u.filename == "" || strings.ContainsAny(u.filename, "/\\") {
				t.Fatalf("upload %+v", u)
			}
		}
		Remove(files)
	})
}
