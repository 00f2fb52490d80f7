package bots

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"

	"github.com/concord-chat/concord/runtime/base/rest"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// readBody reads at most limit bytes of a request body; a larger body is a
// 50035 form error.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	return rest.ReadBody(w, r, limit)
}

// decodeJSON decodes body into v; type errors name their field. Unknown
// fields are ignored, as Discord does.
func decodeJSON(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	err := json.Unmarshal(body, v)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return FormError(te.Field, "BASE_TYPE_BAD_TYPE", fmt.Sprintf("Value is not a valid %s.", te.Type))
	}
	return FormError("", "INVALID_JSON", "The request body is not valid JSON.")
}

// decodeRequest reads and decodes a request body into v.
func (h *Handler) decodeRequest(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := readBody(w, r, h.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	return decodeJSON(body, v)
}

// optBits is a permission bitset in a request body: a decimal string, a
// JSON number or null (Set false).
type optBits struct {
	Set bool
	V   uint64
}

// UnmarshalJSON accepts "1024", 1024 and null.
func (b *optBits) UnmarshalJSON(data []byte) error {
	v, null, err := wire.ParseBits(data)
	if err != nil {
		return &json.UnmarshalTypeError{Value: "bitfield", Type: bitsType}
	}
	*b = optBits{Set: !null, V: v}
	return nil
}

var bitsType = reflect.TypeFor[uint64]()
