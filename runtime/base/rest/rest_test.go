package rest_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/concord-chat/concord/runtime/base/rest"
)

var errGone = errors.New("test: gone")

var table = rest.Table{
	{errGone, http.StatusNotFound, 10004, "Unknown Guild"},
}

func TestTranslate(t *testing.T) {
	own := &rest.Error{Status: http.StatusBadRequest, Code: 30032, Message: "own"}
	for _, tc := range []struct {
		err    error
		status int
		code   int
	}{
		{fmt.Errorf("wrapped: %w", errGone), http.StatusNotFound, 10004},
		{fmt.Errorf("wrapped: %w", own), http.StatusBadRequest, 30032},
		{errors.New("anything else"), http.StatusInternalServerError, 0},
	} {
		ae := rest.Translate(tc.err, table)
		if ae.Status != tc.status || ae.Code != tc.code {
			t.Errorf("Translate(%v) = %d %d, want %d %d", tc.err, ae.Status, ae.Code, tc.status, tc.code)
		}
	}
}

func TestWriteFormError(t *testing.T) {
	rec := httptest.NewRecorder()
	rest.WriteError(rec, rest.FormError("options.3.name", "BASE_TYPE_BAD_LENGTH", "Too long."))
	want := `{"code":50035,"message":"Invalid Form Body","errors":{"options":{"3":{"name":{"_errors":[{"code":"BASE_TYPE_BAD_LENGTH","message":"Too long."}]}}}}}`
	if rec.Code != http.StatusBadRequest || rec.Body.String() != want {
		t.Fatalf("got %d %s\nwant 400 %s", rec.Code, rec.Body, want)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
}

func TestWriteRateLimit(t *testing.T) {
	rec := httptest.NewRecorder()
	rest.WriteError(rec, &rest.Error{Status: http.StatusTooManyRequests, Code: 20016, Message: "slow", RetryAfter: 1.2345})
	want := `{"code":20016,"global":false,"message":"slow","retry_after":1.235}`
	if rec.Code != http.StatusTooManyRequests || rec.Body.String() != want {
		t.Fatalf("got %d %s\nwant 429 %s", rec.Code, rec.Body, want)
	}
	if ra := rec.Header().Get("Retry-After"); ra != "2" {
		t.Fatalf("Retry-After %q", ra)
	}
}

func TestReadBodyLimit(t *testing.T) {
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(strings.Repeat("x", 11)))
	_, err := rest.ReadBody(rec, r, 10)
	var ae *rest.Error
	if !errors.As(err, &ae) || ae.Code != 50035 {
		t.Fatalf("ReadBody over the limit: %v", err)
	}
	r = httptest.NewRequest(http.MethodPost, "/", strings.NewReader("0123456789"))
	if b, err := rest.ReadBody(rec, r, 10); err != nil || string(b) != "0123456789" {
		t.Fatalf("ReadBody at the limit: %q %v", b, err)
	}
}
