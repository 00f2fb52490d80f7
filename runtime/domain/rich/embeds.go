package rich

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/concord-chat/concord/runtime/base/rest"
)

// Discord's embed limits.
const (
	MaxEmbeds           = 10
	MaxEmbedTotal       = 6000
	MaxEmbedTitle       = 256
	MaxEmbedDescription = 4096
	MaxEmbedFields      = 25
	MaxFieldName        = 256
	MaxFieldValue       = 1024
	MaxFooterText       = 2048
	MaxAuthorName       = 256
	maxURL              = 2048
	maxColor            = 0xFFFFFF
)

type embedMedia struct {
	URL    string `json:"url"`
	Width  int    `json:"width,omitempty"`
	Height int    `json:"height,omitempty"`
}

type embedFooter struct {
	Text    string  `json:"text"`
	IconURL *string `json:"icon_url,omitempty"`
}

type embedAuthor struct {
	Name    string  `json:"name"`
	URL     *string `json:"url,omitempty"`
	IconURL *string `json:"icon_url,omitempty"`
}

type embedField struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Inline bool   `json:"inline"`
}

// embed is the part of Discord's embed object a client may set.
type embed struct {
	Type        string       `json:"type"`
	Title       *string      `json:"title,omitempty"`
	Description *string      `json:"description,omitempty"`
	URL         *string      `json:"url,omitempty"`
	Timestamp   *string      `json:"timestamp,omitempty"`
	Color       *int         `json:"color,omitempty"`
	Footer      *embedFooter `json:"footer,omitempty"`
	Image       *embedMedia  `json:"image,omitempty"`
	Thumbnail   *embedMedia  `json:"thumbnail,omitempty"`
	Author      *embedAuthor `json:"author,omitempty"`
	Fields      []embedField `json:"fields,omitempty"`
}

// mediaOut is an image or thumbnail as Discord returns it.
type mediaOut struct {
	URL      string `json:"url"`
	ProxyURL string `json:"proxy_url"`
	Width    int    `json:"width,omitempty"`
	Height   int    `json:"height,omitempty"`
}

type embedOut struct {
	Type        string       `json:"type"`
	Title       *string      `json:"title,omitempty"`
	Description *string      `json:"description,omitempty"`
	URL         *string      `json:"url,omitempty"`
	Timestamp   *string      `json:"timestamp,omitempty"`
	Color       *int         `json:"color,omitempty"`
	Footer      *embedFooter `json:"footer,omitempty"`
	Image       *mediaOut    `json:"image,omitempty"`
	Thumbnail   *mediaOut    `json:"thumbnail,omitempty"`
	Author      *embedAuthor `json:"author,omitempty"`
	Fields      []embedField `json:"fields,omitempty"`
}

// Embeds validates a message's embeds against Discord's limits and
// returns them as Discord returns them (type "rich" by default, images
// with a proxy_url). path is the field name of the list ("embeds", or
// "data.embeds" in an interaction response).
func Embeds(path string, in []json.RawMessage) ([]json.RawMessage, error) {
	if len(in) > MaxEmbeds {
		return nil, rest.FormError(path, "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", MaxEmbeds))
	}
	out := make([]json.RawMessage, 0, len(in))
	total := 0
	for i, raw := range in {
		p := path + "." + strconv.Itoa(i)
		e, err := decodeEmbed(p, raw)
		if err != nil {
			return nil, err
		}
		n, err := e.check(p)
		if err != nil {
			return nil, err
		}
		total += n
		if total > MaxEmbedTotal {
			return nil, rest.FormError(path, "MAX_EMBED_SIZE_EXCEEDED", fmt.Sprintf("Embed size exceeds maximum size of %d", MaxEmbedTotal))
		}
		b, err := json.Marshal(e.out())
		if err != nil {
			return nil, fmt.Errorf("rich: encode embed: %w", err)
		}
		out = append(out, b)
	}
	return out, nil
}

func decodeEmbed(path string, raw json.RawMessage) (embed, error) {
	var e embed
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return e, rest.FormError(path, "MODEL_TYPE_CONVERT", "Only dictionaries may be used in a ModelType")
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		return e, typeError(path, err)
	}
	return e, nil
}

// check validates one embed and returns its character count towards the
// 6,000 total (title, description, field names and values, footer text,
// author name).
func (e *embed) check(p string) (int, error) {
	if e.Type == "" {
		e.Type = "rich"
	}
	total := 0
	length := func(field string, s string, max int) error {
		n := utf8.RuneCountInString(s)
		total += n
		if n > max {
			return rest.FormError(p+"."+field, "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", max))
		}
		return nil
	}
	required := func(field, s string) error {
		if strings.TrimSpace(s) == "" {
			return rest.FormError(p+"."+field, "BASE_TYPE_REQUIRED", "This field is required")
		}
		return nil
	}
	if e.Title != nil {
		if err := length("title", *e.Title, MaxEmbedTitle); err != nil {
			return 0, err
		}
	}
	if e.Description != nil {
		if err := length("description", *e.Description, MaxEmbedDescription); err != nil {
			return 0, err
		}
	}
	if len(e.Fields) > MaxEmbedFields {
		return 0, rest.FormError(p+".fields", "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", MaxEmbedFields))
	}
	for i, f := range e.Fields {
		fp := "fields." + strconv.Itoa(i)
		if err := required(fp+".name", f.Name); err != nil {
			return 0, err
		}
		if err := required(fp+".value", f.Value); err != nil {
			return 0, err
		}
		if err := length(fp+".name", f.Name, MaxFieldName); err != nil {
			return 0, err
		}
		if err := length(fp+".value", f.Value, MaxFieldValue); err != nil {
			return 0, err
		}
	}
	if e.Footer != nil {
		if err := required("footer.text", e.Footer.Text); err != nil {
			return 0, err
		}
		if err := length("footer.text", e.Footer.Text, MaxFooterText); err != nil {
			return 0, err
		}
		if err := checkURL(p+".footer.icon_url", e.Footer.IconURL, true); err != nil {
			return 0, err
		}
	}
	if e.Author != nil {
		if err := required("author.name", e.Author.Name); err != nil {
			return 0, err
		}
		if err := length("author.name", e.Author.Name, MaxAuthorName); err != nil {
			return 0, err
		}
		if err := checkURL(p+".author.url", e.Author.URL, false); err != nil {
			return 0, err
		}
		if err := checkURL(p+".author.icon_url", e.Author.IconURL, true); err != nil {
			return 0, err
		}
	}
	if err := checkURL(p+".url", e.URL, false); err != nil {
		return 0, err
	}
	for _, m := range []struct {
		name string
		v    *embedMedia
	}{{"image", e.Image}, {"thumbnail", e.Thumbnail}} {
		if m.v == nil {
			continue
		}
		if err := required(m.name+".url", m.v.URL); err != nil {
			return 0, err
		}
		if err := checkURL(p+"."+m.name+".url", &m.v.URL, true); err != nil {
			return 0, err
		}
	}
	if e.Color != nil && (*e.Color < 0 || *e.Color > maxColor) {
		return 0, rest.FormError(p+".color", "NUMBER_TYPE_MAX", fmt.Sprintf("int value should be less than or equal to %d.", maxColor))
	}
	if e.Timestamp != nil {
		ts, err := parseTimestamp(*e.Timestamp)
		if err != nil {
			return 0, rest.FormError(p+".timestamp", "DATE_TYPE_PARSE", fmt.Sprintf("Could not parse %s. Should be ISO8601.", truncate(*e.Timestamp, 40)))
		}
		*e.Timestamp = ts
	}
	if total == 0 && e.Image == nil && e.Thumbnail == nil && e.URL == nil {
		return 0, rest.FormError(p+".description", "BASE_TYPE_REQUIRED", "This field is required")
	}
	return total, nil
}

func (e *embed) out() embedOut {
	media := func(m *embedMedia) *mediaOut {
		if m == nil {
			return nil
		}
		return &mediaOut{URL: m.URL, ProxyURL: m.URL, Width: m.Width, Height: m.Height}
	}
	return embedOut{
		Type: e.Type, Title: e.Title, Description: e.Description, URL: e.URL, Timestamp: e.Timestamp,
		Color: e.Color, Footer: e.Footer, Image: media(e.Image), Thumbnail: media(e.Thumbnail),
		Author: e.Author, Fields: e.Fields,
	}
}

// checkURL accepts http(s) URLs and, for images, attachment:// references.
func checkURL(path string, s *string, image bool) error {
	if s == nil {
		return nil
	}
	if len(*s) > maxURL {
		return rest.FormError(path, "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", maxURL))
	}
	u, err := url.Parse(*s)
	if err != nil || u.Scheme == "" {
		return rest.FormError(path, "URL_TYPE_INVALID_URL", "Not a well formed URL.")
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" {
			return rest.FormError(path, "URL_TYPE_INVALID_URL", "Not a well formed URL.")
		}
		return nil
	case "attachment":
		if image {
			return nil
		}
	}
	return rest.FormError(path, "URL_TYPE_INVALID_SCHEME", fmt.Sprintf("Scheme %q is not supported. Scheme must be one of ('http', 'https').", truncate(u.Scheme, 20)))
}

// parseTimestamp accepts ISO 8601 times and returns them as Discord
// writes them (UTC, +00:00).
func parseTimestamp(s string) (string, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC().Format("2006-01-02T15:04:05.000000+00:00"), nil
		}
	}
	return "", fmt.Errorf("rich: timestamp %q", s)
}

// typeError names the field of a JSON type error under path.
func typeError(path string, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := path
		if te.Field != "" {
			field = path + "." + te.Field
		}
		switch te.Type.Kind().String() {
		case "string":
			return rest.FormError(field, "BASE_TYPE_STRING", "Must be a string.")
		case "bool":
			return rest.FormError(field, "BASE_TYPE_BOOLEAN", "Must be either true or false.")
		case "slice":
			return rest.FormError(field, "BASE_TYPE_LIST", "Must be an array.")
		case "int", "int64", "float64":
			return rest.FormError(field, "NUMBER_TYPE_COERCE", "Must be a number.")
		}
		return rest.FormError(field, "MODEL_TYPE_CONVERT", "Only dictionaries may be used in a ModelType")
	}
	return rest.FormError(path, "JSON_INVALID", "The request body contains invalid JSON.")
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
