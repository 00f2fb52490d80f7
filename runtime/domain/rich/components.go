package rich

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/concord-chat/concord/runtime/base/rest"
)

// Component types.
const (
	ActionRow         = 1
	Button            = 2
	StringSelect      = 3
	TextInput         = 4
	UserSelect        = 5
	RoleSelect        = 6
	MentionableSelect = 7
	ChannelSelect     = 8
	Label             = 18
)

// Button styles.
const (
	ButtonLink    = 5
	ButtonPremium = 6
)

// Discord's component limits.
const (
	MaxRows        = 5
	MaxRowButtons  = 5
	maxCustomID    = 100
	maxButtonLabel = 80
	maxPlaceholder = 150
	maxOptions     = 25
	maxOptionText  = 100
	maxInputLabel  = 45
	maxInputValue  = 4000
)

type selectOption struct {
	Label       string          `json:"label"`
	Value       string          `json:"value"`
	Description *string         `json:"description"`
	Emoji       json.RawMessage `json:"emoji"`
	Default     bool            `json:"default"`
}

// component is the union of the component fields Concord checks; every
// other field is kept as the client sent it.
type component struct {
	Type        int               `json:"type"`
	CustomID    *string           `json:"custom_id"`
	Style       int               `json:"style"`
	Label       *string           `json:"label"`
	URL         *string           `json:"url"`
	SKUID       json.RawMessage   `json:"sku_id"`
	Options     []selectOption    `json:"options"`
	Placeholder *string           `json:"placeholder"`
	MinValues   *int              `json:"min_values"`
	MaxValues   *int              `json:"max_values"`
	MinLength   *int              `json:"min_length"`
	MaxLength   *int              `json:"max_length"`
	Value       *string           `json:"value"`
	Components  []json.RawMessage `json:"components"`
	Component   json.RawMessage   `json:"component"`
}

// Components validates a message's components (modal false) or a modal's
// (modal true) and returns them compacted, fields as sent. path names the
// list ("components", "data.components").
func Components(path string, in []json.RawMessage, modal bool) ([]json.RawMessage, error) {
	if len(in) > MaxRows {
		return nil, rest.FormError(path, "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", MaxRows))
	}
	v := validator{ids: map[string]bool{}, modal: modal}
	out := make([]json.RawMessage, 0, len(in))
	for i, raw := range in {
		p := path + "." + strconv.Itoa(i)
		c, err := decodeComponent(p, raw)
		if err != nil {
			return nil, err
		}
		switch {
		case c.Type == ActionRow:
			if err := v.row(p, c); err != nil {
				return nil, err
			}
		case modal && c.Type == Label:
			if err := v.label(p, c); err != nil {
				return nil, err
			}
		default:
			return nil, rest.FormError(p+".type", "UNION_TYPE_CHOICES", "Value of field \"type\" must be one of (1,).")
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return nil, rest.FormError(p, "JSON_INVALID", "The request body contains invalid JSON.")
		}
		out = append(out, buf.Bytes())
	}
	return out, nil
}

type validator struct {
	ids   map[string]bool
	modal bool
}

func decodeComponent(path string, raw json.RawMessage) (component, error) {
	var c component
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return c, rest.FormError(path, "MODEL_TYPE_CONVERT", "Only dictionaries may be used in a ModelType")
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return c, typeError(path, err)
	}
	return c, nil
}

func (v *validator) row(p string, row component) error {
	if len(row.Components) == 0 {
		return rest.FormError(p+".components", "BASE_TYPE_MIN_LENGTH", "Must be 1 or more in length.")
	}
	if v.modal {
		if len(row.Components) != 1 {
			return rest.FormError(p+".components", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 1 in length.")
		}
		c, err := decodeComponent(p+".components.0", row.Components[0])
		if err != nil {
			return err
		}
		if c.Type != TextInput {
			return rest.FormError(p+".components.0.type", "UNION_TYPE_CHOICES", "Value of field \"type\" must be one of (4,).")
		}
		return v.textInput(p+".components.0", c)
	}
	var buttons, selects int
	for i, raw := range row.Components {
		cp := p + ".components." + strconv.Itoa(i)
		c, err := decodeComponent(cp, raw)
		if err != nil {
			return err
		}
		switch c.Type {
		case Button:
			buttons++
			if err := v.button(cp, c); err != nil {
				return err
			}
		case StringSelect, UserSelect, RoleSelect, MentionableSelect, ChannelSelect:
			selects++
			if err := v.selectMenu(cp, c); err != nil {
				return err
			}
		default:
			return rest.FormError(cp+".type", "UNION_TYPE_CHOICES", "Value of field \"type\" must be one of (2, 3, 5, 6, 7, 8).")
		}
	}
	if buttons > MaxRowButtons {
		return rest.FormError(p+".components", "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", MaxRowButtons))
	}
	if selects > 0 && len(row.Components) > 1 {
		return rest.FormError(p+".components", "COMPONENT_LAYOUT_WIDTH_EXCEEDED", "The specified component exceeds the maximum width")
	}
	return nil
}

func (v *validator) customID(p string, id *string) error {
	if id == nil {
		return rest.FormError(p+".custom_id", "BASE_TYPE_REQUIRED", "This field is required")
	}
	if n := utf8.RuneCountInString(*id); n < 1 || n > maxCustomID {
		return rest.FormError(p+".custom_id", "BASE_TYPE_BAD_LENGTH", fmt.Sprintf("Must be between 1 and %d in length.", maxCustomID))
	}
	if v.ids[*id] {
		return rest.FormError(p+".custom_id", "COMPONENT_CUSTOM_ID_DUPLICATED", "Component custom id cannot be duplicated")
	}
	v.ids[*id] = true
	return nil
}

func maxLen(p string, s *string, max int) error {
	if s != nil && utf8.RuneCountInString(*s) > max {
		return rest.FormError(p, "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", max))
	}
	return nil
}

func (v *validator) button(p string, c component) error {
	if err := maxLen(p+".label", c.Label, maxButtonLabel); err != nil {
		return err
	}
	switch c.Style {
	case 1, 2, 3, 4:
		if c.URL != nil {
			return rest.FormError(p+".url", "BUTTON_COMPONENT_URL_NOT_ALLOWED", "A url cannot be specified for a non-link button")
		}
		return v.customID(p, c.CustomID)
	case ButtonLink:
		if c.CustomID != nil {
			return rest.FormError(p+".custom_id", "BUTTON_COMPONENT_CUSTOM_ID_NOT_ALLOWED", "A custom id cannot be specified for a link button")
		}
		if c.URL == nil {
			return rest.FormError(p+".url", "BUTTON_COMPONENT_URL_REQUIRED", "A url must be specified for a link button")
		}
		return checkURL(p+".url", c.URL, false)
	case ButtonPremium:
		return rest.FormError(p+".style", "BUTTON_COMPONENT_INVALID_STYLE", "Premium buttons need a SKU; Concord has no SKUs.")
	}
	return rest.FormError(p+".style", "BASE_TYPE_CHOICES", "Value must be one of {1, 2, 3, 4, 5, 6}.")
}

func (v *validator) selectMenu(p string, c component) error {
	if err := v.customID(p, c.CustomID); err != nil {
		return err
	}
	if err := maxLen(p+".placeholder", c.Placeholder, maxPlaceholder); err != nil {
		return err
	}
	minV, maxV := 1, 1
	if c.MinValues != nil {
		minV = *c.MinValues
		if minV < 0 || minV > maxOptions {
			return rest.FormError(p+".min_values", "NUMBER_TYPE_MAX", "int value should be between 0 and 25.")
		}
	}
	if c.MaxValues != nil {
		maxV = *c.MaxValues
		if maxV < 1 || maxV > maxOptions {
			return rest.FormError(p+".max_values", "NUMBER_TYPE_MAX", "int value should be between 1 and 25.")
		}
	}
	if minV > maxV {
		return rest.FormError(p+".min_values", "SELECT_COMPONENT_MIN_VALUES_GREATER_THAN_MAX", "min_values must be less than or equal to max_values")
	}
	if c.Type != StringSelect {
		if len(c.Options) > 0 {
			return rest.FormError(p+".options", "SELECT_COMPONENT_OPTIONS_NOT_ALLOWED", "Options are only allowed on string selects")
		}
		return nil
	}
	if n := len(c.Options); n < 1 || n > maxOptions {
		return rest.FormError(p+".options", "BASE_TYPE_BAD_LENGTH", fmt.Sprintf("Must be between 1 and %d in length.", maxOptions))
	}
	if maxV > len(c.Options) {
		return rest.FormError(p+".max_values", "SELECT_COMPONENT_MAX_VALUES_EXCEEDS_OPTIONS", "max_values must be less than or equal to the number of options")
	}
	values := map[string]bool{}
	for i, o := range c.Options {
		op := p + ".options." + strconv.Itoa(i)
		for _, f := range []struct{ name, v string }{{"label", o.Label}, {"value", o.Value}} {
			if n := utf8.RuneCountInString(f.v); n < 1 || n > maxOptionText {
				return rest.FormError(op+"."+f.name, "BASE_TYPE_BAD_LENGTH", fmt.Sprintf("Must be between 1 and %d in length.", maxOptionText))
			}
		}
		if err := maxLen(op+".description", o.Description, maxOptionText); err != nil {
			return err
		}
		if values[o.Value] {
			return rest.FormError(op+".value", "SELECT_COMPONENT_OPTION_VALUE_DUPLICATED", "Select option values must be unique")
		}
		values[o.Value] = true
	}
	return nil
}

func (v *validator) textInput(p string, c component) error {
	if err := v.customID(p, c.CustomID); err != nil {
		return err
	}
	if c.Style != 1 && c.Style != 2 {
		return rest.FormError(p+".style", "BASE_TYPE_CHOICES", "Value must be one of {1, 2}.")
	}
	if err := maxLen(p+".label", c.Label, maxInputLabel); err != nil {
		return err
	}
	if err := maxLen(p+".value", c.Value, maxInputValue); err != nil {
		return err
	}
	if err := maxLen(p+".placeholder", c.Placeholder, maxOptionText); err != nil {
		return err
	}
	if c.MinLength != nil && (*c.MinLength < 0 || *c.MinLength > maxInputValue) {
		return rest.FormError(p+".min_length", "NUMBER_TYPE_MAX", "int value should be between 0 and 4000.")
	}
	if c.MaxLength != nil && (*c.MaxLength < 1 || *c.MaxLength > maxInputValue) {
		return rest.FormError(p+".max_length", "NUMBER_TYPE_MAX", "int value should be between 1 and 4000.")
	}
	return nil
}

// label is a modal's label component wrapping one text input or select.
func (v *validator) label(p string, c component) error {
	if c.Label == nil || *c.Label == "" {
		return rest.FormError(p+".label", "BASE_TYPE_REQUIRED", "This field is required")
	}
	if err := maxLen(p+".label", c.Label, maxInputLabel); err != nil {
		return err
	}
	inner, err := decodeComponent(p+".component", c.Component)
	if err != nil {
		return err
	}
	switch inner.Type {
	case TextInput:
		if inner.Style == 0 {
			inner.Style = 1
		}
		return v.textInput(p+".component", inner)
	case StringSelect, UserSelect, RoleSelect, MentionableSelect, ChannelSelect:
		return v.selectMenu(p+".component", inner)
	}
	return rest.FormError(p+".component.type", "UNION_TYPE_CHOICES", "Value of field \"type\" must be one of (3, 4, 5, 6, 7, 8).")
}

// Interactive is one component a user can interact with.
type Interactive struct {
	CustomID string
	Type     int
	// Options are a string select's option values.
	Options []string
	// Disabled reports a disabled button or select.
	Disabled bool
}

// Find returns the interactive component with customID in a stored
// components list (the JSON array a message carries), or false: a
// component interaction must name a component its message shows.
func Find(stored string, customID string) (Interactive, bool) {
	var rows []json.RawMessage
	if stored == "" || json.Unmarshal([]byte(stored), &rows) != nil {
		return Interactive{}, false
	}
	var walk func(list []json.RawMessage, depth int) (Interactive, bool)
	walk = func(list []json.RawMessage, depth int) (Interactive, bool) {
		for _, raw := range list {
			var c struct {
				component
				Disabled bool `json:"disabled"`
			}
			if json.Unmarshal(raw, &c) != nil {
				continue
			}
			if c.CustomID != nil && *c.CustomID == customID && c.Type != ActionRow {
				it := Interactive{CustomID: customID, Type: c.Type, Disabled: c.Disabled}
				for _, o := range c.Options {
					it.Options = append(it.Options, o.Value)
				}
				return it, true
			}
			if depth < 3 && len(c.Components) > 0 {
				if it, ok := walk(c.Components, depth+1); ok {
					return it, true
				}
			}
		}
		return Interactive{}, false
	}
	return walk(rows, 0)
}
