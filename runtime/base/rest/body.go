package rest

import (
	"errors"
	"fmt"
	"io"
	"net/http"
)

// ReadBody reads at most limit bytes of a request body; a larger body, or
// one that cannot be read, is a 50035 form error.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, FormError("", "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Request body must be %d or fewer bytes.", limit))
	}
	if err != nil {
		return nil, FormError("", "BODY_READ_FAILED", "The request body could not be read.")
	}
	return body, nil
}
