package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	"github.com/concord-chat/concord/runtime/base/rest"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// reqID is a snowflake in a request body: a JSON string or number. A bad
// value fails as a type error so the decoder names its field.
type reqID snowflake.ID

// UnmarshalJSON accepts "123", 123 and null.
func (id *reqID) UnmarshalJSON(b []byte) error {
	var v snowflake.ID
	if err := v.UnmarshalJSON(b); err != nil {
		return &json.UnmarshalTypeError{Value: "snowflake " + truncate(string(b), 30), Type: reflect.TypeFor[snowflake.ID]()}
	}
	*id = reqID(v)
	return nil
}

// reqBits is a permission bitset in a request body: a decimal string or a
// JSON number.
type reqBits uint64

// UnmarshalJSON accepts "1024", 1024 and null.
func (b *reqBits) UnmarshalJSON(data []byte) error {
	v, _, err := wire.ParseBits(data)
	if err != nil {
		return &json.UnmarshalTypeError{Value: "bitfield " + truncate(string(data), 30), Type: reflect.TypeFor[uint64]()}
	}
	*b = reqBits(v)
	return nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func ids(in []reqID) []snowflake.ID {
	out := make([]snowflake.ID, 0, len(in))
	for _, id := range in {
		out = append(out, snowflake.ID(id))
	}
	return out
}

// readBody reads at most limit bytes of a request body; a larger body is a
// 50035 form error.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	return rest.ReadBody(w, r, limit)
}

// decodeJSON decodes body into dst, ignoring unknown fields, and turns
// decoding failures into 50035 errors naming the field. An empty body
// decodes as {}.
func decodeJSON(body []byte, dst any) error {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		body = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return formError("", "JSON_INVALID", "The request body contains trailing data.")
	}
	return nil
}

func jsonError(err error) *apiError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return formError("", "MODEL_TYPE_CONVERT", "Only dictionaries may be used in a ModelType")
		}
		code, msg := typeErrorCode(te)
		return formError(te.Field, code, msg)
	}
	return formError("", "JSON_INVALID", "The request body contains invalid JSON.")
}

func typeErrorCode(te *json.UnmarshalTypeError) (string, string) {
	switch {
	case te.Type == reflect.TypeFor[snowflake.ID]():
		return "NUMBER_TYPE_COERCE", fmt.Sprintf("Value %q is not snowflake.", strings.TrimPrefix(te.Value, "snowflake "))
	case te.Type.Kind() == reflect.String:
		return "BASE_TYPE_STRING", "Must be a string."
	case te.Type.Kind() == reflect.Bool:
		return "BASE_TYPE_BOOLEAN", "Must be either true or false."
	case te.Type.Kind() == reflect.Slice:
		return "BASE_TYPE_LIST", "Must be an array."
	case te.Type.Kind() >= reflect.Int && te.Type.Kind() <= reflect.Float64:
		return "NUMBER_TYPE_COERCE", "Must be a number."
	}
	return "MODEL_TYPE_CONVERT", "Invalid type."
}

// decodeRequest reads and decodes a JSON request body.
func (b bodyLimit) decodeRequest(w http.ResponseWriter, r *http.Request, dst any) error {
	body, err := b.readBody(w, r)
	if err != nil {
		return err
	}
	return decodeJSON(body, dst)
}

// nullable records whether a JSON field was present and null, for PATCH
// bodies where null clears a value.
type nullable[T any] struct {
	Set   bool
	Null  bool
	Value T
}

// UnmarshalJSON records presence and nullness.
func (n *nullable[T]) UnmarshalJSON(b []byte) error {
	n.Set = true
	if string(b) == "null" {
		n.Null = true
		return nil
	}
	return json.Unmarshal(b, &n.Value)
}
