package app

import (
	"strings"
	"testing"
)

// An unknown store scheme is refused with an error that does not repeat
// the URL's password.
func TestUnknownStoreRedacted(t *testing.T) {
	_, err := OpenStore(t.Context(), Config{Store: "bogus://u:s3cret@db/ks", Logger: nil})
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("OpenStore(unknown scheme) error = %v; want one without the password", err)
	}
}
