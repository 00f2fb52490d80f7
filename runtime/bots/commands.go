package bots

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Command types.
const (
	CommandChatInput = 1
	CommandUser      = 2
	CommandMessage   = 3
)

// Option types.
const (
	OptionSubCommand      = 1
	OptionSubCommandGroup = 2
	OptionString          = 3
	OptionInteger         = 4
	OptionBoolean         = 5
	OptionUser            = 6
	OptionChannel         = 7
	OptionRole            = 8
	OptionMentionable     = 9
	OptionNumber          = 10
	OptionAttachment      = 11
)

// Limits of command definitions (Discord's).
const (
	maxOptions      = 25
	maxChoices      = 25
	maxCommandChars = 8000
	maxLengthLimit  = 6000
	// maxIntegerValue is the largest integer option bound (2^53).
	maxIntegerValue = 1 << 53
)

// chatInputName is the rule for chat-input command and option names.
var chatInputName = regexp.MustCompile(`^[-_\p{L}\p{N}]{1,32}$`)

// PermBits is an optional permission bitset: null when unset, else a
// decimal string; it decodes from a string, a number or null.
type PermBits struct {
	Set bool
	V   uint64
}

// MarshalJSON encodes null or the decimal string.
func (b PermBits) MarshalJSON() ([]byte, error) {
	if !b.Set {
		return []byte("null"), nil
	}
	return []byte(`"` + strconv.FormatUint(b.V, 10) + `"`), nil
}

// UnmarshalJSON accepts "8", 8 and null.
func (b *PermBits) UnmarshalJSON(data []byte) error {
	var o optBits
	if err := o.UnmarshalJSON(data); err != nil {
		return err
	}
	*b = PermBits(o)
	return nil
}

// CommandDef is an application command definition as a client sends it.
type CommandDef struct {
	Type                     int               `json:"type"`
	Name                     string            `json:"name"`
	NameLocalizations        map[string]string `json:"name_localizations,omitempty"`
	Description              string            `json:"description"`
	DescriptionLocalizations map[string]string `json:"description_localizations,omitempty"`
	Options                  []CommandOption   `json:"options,omitempty"`
	DefaultMemberPermissions PermBits          `json:"default_member_permissions"`
	DMPermission             *bool             `json:"dm_permission,omitempty"`
	NSFW                     bool              `json:"nsfw"`
	Contexts                 []int             `json:"contexts,omitempty"`
	IntegrationTypes         []int             `json:"integration_types,omitempty"`
}

// CommandOption is one option (or subcommand) of a chat-input command.
type CommandOption struct {
	Type                     int               `json:"type"`
	Name                     string            `json:"name"`
	NameLocalizations        map[string]string `json:"name_localizations,omitempty"`
	Description              string            `json:"description"`
	DescriptionLocalizations map[string]string `json:"description_localizations,omitempty"`
	Required                 bool              `json:"required,omitempty"`
	Choices                  []CommandChoice   `json:"choices,omitempty"`
	Options                  []CommandOption   `json:"options,omitempty"`
	ChannelTypes             []int             `json:"channel_types,omitempty"`
	MinValue                 *float64          `json:"min_value,omitempty"`
	MaxValue                 *float64          `json:"max_value,omitempty"`
	MinLength                *int              `json:"min_length,omitempty"`
	MaxLength                *int              `json:"max_length,omitempty"`
	Autocomplete             bool              `json:"autocomplete,omitempty"`
}

// CommandChoice is a fixed choice of a string, integer or number option.
type CommandChoice struct {
	Name              string            `json:"name"`
	NameLocalizations map[string]string `json:"name_localizations,omitempty"`
	Value             json.RawMessage   `json:"value"`
}

// DecodeCommand decodes and validates one command definition. Errors are
// *APIError 50035 naming the offending field ("options.2.name").
func DecodeCommand(body []byte) (CommandDef, error) {
	var def CommandDef
	if err := decodeJSON(body, &def); err != nil {
		return CommandDef{}, err
	}
	if err := ValidateCommand(&def, ""); err != nil {
		return CommandDef{}, err
	}
	return def, nil
}

// DecodeCommands decodes and validates a bulk overwrite: at most 200
// definitions with unique (type, name).
func DecodeCommands(body []byte) ([]CommandDef, error) {
	var defs []CommandDef
	if err := decodeJSON(body, &defs); err != nil {
		return nil, err
	}
	if len(defs) > 200 {
		return nil, FormError("", "BASE_TYPE_MAX_LENGTH", "Must be 200 or fewer in length.")
	}
	seen := make(map[string]bool, len(defs))
	for i := range defs {
		if err := ValidateCommand(&defs[i], strconv.Itoa(i)); err != nil {
			return nil, err
		}
		key := strconv.Itoa(defs[i].Type) + "/" + defs[i].Name
		if seen[key] {
			return nil, FormError(strconv.Itoa(i)+".name", "APPLICATION_COMMANDS_DUPLICATE_NAME", "Application command names must be unique.")
		}
		seen[key] = true
	}
	return defs, nil
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

func runes(s string) int { return utf8.RuneCountInString(s) }

// ValidateCommand checks def in place (filling the default type) under the
// error path prefix path.
func ValidateCommand(def *CommandDef, path string) error {
	if def.Type == 0 {
		def.Type = CommandChatInput
	}
	if def.Type < CommandChatInput || def.Type > CommandMessage {
		return FormError(join(path, "type"), "BASE_TYPE_CHOICES", "Value must be one of (1, 2, 3).")
	}
	chat := def.Type == CommandChatInput
	if err := checkName(def.Name, chat, join(path, "name")); err != nil {
		return err
	}
	for k, v := range def.NameLocalizations {
		if err := checkName(v, chat, join(path, "name_localizations."+k)); err != nil {
			return err
		}
	}
	if chat {
		if err := checkDescription(def.Description, join(path, "description")); err != nil {
			return err
		}
		for k, v := range def.DescriptionLocalizations {
			if err := checkDescription(v, join(path, "description_localizations."+k)); err != nil {
				return err
			}
		}
		if err := checkOptions(def.Options, join(path, "options"), 0); err != nil {
			return err
		}
	} else {
		if def.Description != "" {
			return FormError(join(path, "description"), "APPLICATION_COMMAND_DESCRIPTION_NOT_ALLOWED", "User and message commands cannot have a description.")
		}
		if len(def.Options) > 0 {
			return FormError(join(path, "options"), "APPLICATION_COMMAND_OPTIONS_NOT_ALLOWED", "User and message commands cannot have options.")
		}
	}
	for i, c := range def.Contexts {
		if c < 0 || c > 2 {
			return FormError(join(path, "contexts."+strconv.Itoa(i)), "BASE_TYPE_CHOICES", "Value must be one of (0, 1, 2).")
		}
	}
	for i, c := range def.IntegrationTypes {
		if c < 0 || c > 1 {
			return FormError(join(path, "integration_types."+strconv.Itoa(i)), "BASE_TYPE_CHOICES", "Value must be one of (0, 1).")
		}
	}
	normalize(def)
	if n := commandChars(def); n > maxCommandChars {
		return FormError(path, "APPLICATION_COMMAND_TOO_LARGE", fmt.Sprintf("Command exceeds maximum size (%d).", maxCommandChars))
	}
	return nil
}

func checkName(name string, chat bool, path string) error {
	if chat {
		if !chatInputName.MatchString(name) {
			return FormError(path, "APPLICATION_COMMAND_INVALID_NAME", "Command name is invalid: 1-32 letters, numbers, '-' or '_'.")
		}
		if strings.ToLower(name) != name {
			return FormError(path, "APPLICATION_COMMAND_INVALID_NAME", "Command name must be lower case.")
		}
		return nil
	}
	if n := runes(name); n < 1 || n > 32 || strings.TrimSpace(name) != name {
		return FormError(path, "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 32 in length.")
	}
	return nil
}

func checkDescription(d, path string) error {
	if n := runes(d); n < 1 || n > 100 {
		return FormError(path, "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
	}
	return nil
}

// checkOptions validates one option list; depth 0 is the command's own
// list, 1 a subcommand group's or subcommand's, 2 a grouped subcommand's.
func checkOptions(opts []CommandOption, path string, depth int) error {
	if len(opts) > maxOptions {
		return FormError(path, "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", maxOptions))
	}
	names := make(map[string]bool, len(opts))
	subs, plain := 0, 0
	optional := false
	for i := range opts {
		o := &opts[i]
		p := join(path, strconv.Itoa(i))
		if o.Type < OptionSubCommand || o.Type > OptionAttachment {
			return FormError(join(p, "type"), "BASE_TYPE_CHOICES", "Value must be between 1 and 11.")
		}
		if err := checkName(o.Name, true, join(p, "name")); err != nil {
			return err
		}
		for k, v := range o.NameLocalizations {
			if err := checkName(v, true, join(p, "name_localizations."+k)); err != nil {
				return err
			}
		}
		if names[o.Name] {
			return FormError(join(p, "name"), "APPLICATION_COMMAND_OPTIONS_DUPLICATE_NAME", "Option names must be unique.")
		}
		names[o.Name] = true
		if err := checkDescription(o.Description, join(p, "description")); err != nil {
			return err
		}
		for k, v := range o.DescriptionLocalizations {
			if err := checkDescription(v, join(p, "description_localizations."+k)); err != nil {
				return err
			}
		}
		switch o.Type {
		case OptionSubCommandGroup:
			subs++
			if depth != 0 {
				return FormError(join(p, "type"), "APPLICATION_COMMAND_OPTION_TYPE_INVALID", "Subcommand groups can only be top-level options.")
			}
			for j := range o.Options {
				if o.Options[j].Type != OptionSubCommand {
					return FormError(join(p, "options."+strconv.Itoa(j)+".type"), "APPLICATION_COMMAND_OPTION_TYPE_INVALID", "Subcommand groups can only contain subcommands.")
				}
			}
			if len(o.Options) == 0 {
				return FormError(join(p, "options"), "BASE_TYPE_REQUIRED", "Subcommand groups need at least one subcommand.")
			}
			if err := checkOptions(o.Options, join(p, "options"), 1); err != nil {
				return err
			}
		case OptionSubCommand:
			subs++
			if depth > 1 {
				return FormError(join(p, "type"), "APPLICATION_COMMAND_OPTION_TYPE_INVALID", "Subcommands cannot be nested this deep.")
			}
			for j := range o.Options {
				if t := o.Options[j].Type; t == OptionSubCommand || t == OptionSubCommandGroup {
					return FormError(join(p, "options."+strconv.Itoa(j)+".type"), "APPLICATION_COMMAND_OPTION_TYPE_INVALID", "Subcommands cannot contain subcommands.")
				}
			}
			if err := checkOptions(o.Options, join(p, "options"), 2); err != nil {
				return err
			}
		default:
			plain++
			if len(o.Options) > 0 {
				return FormError(join(p, "options"), "APPLICATION_COMMAND_OPTIONS_NOT_ALLOWED", "Only subcommands and groups have options.")
			}
			if o.Required && optional {
				return FormError(join(p, "required"), "APPLICATION_COMMAND_OPTIONS_REQUIRED_INVALID", "Required options must be placed before non-required options.")
			}
			if !o.Required {
				optional = true
			}
			if err := checkValueOption(o, p); err != nil {
				return err
			}
		}
		if o.Type == OptionSubCommand || o.Type == OptionSubCommandGroup {
			if o.Required {
				return FormError(join(p, "required"), "APPLICATION_COMMAND_OPTION_TYPE_INVALID", "Subcommands cannot be required.")
			}
			if len(o.Choices) > 0 || o.Autocomplete || len(o.ChannelTypes) > 0 || o.MinValue != nil || o.MaxValue != nil ||
				o.MinLength != nil || o.MaxLength != nil {
				return FormError(p, "APPLICATION_COMMAND_OPTION_TYPE_INVALID", "Subcommands and groups have no value constraints.")
			}
		}
	}
	if subs > 0 && plain > 0 {
		return FormError(path, "APPLICATION_COMMAND_OPTION_TYPE_INVALID", "Subcommands and groups cannot be mixed with other options.")
	}
	return nil
}

// checkValueOption validates the value constraints of a non-subcommand
// option.
func checkValueOption(o *CommandOption, p string) error {
	numeric := o.Type == OptionInteger || o.Type == OptionNumber
	if len(o.Choices) > 0 {
		if o.Type != OptionString && !numeric {
			return FormError(join(p, "choices"), "APPLICATION_COMMAND_OPTION_CHOICES_NOT_ALLOWED", "Only string, integer and number options have choices.")
		}
		if o.Autocomplete {
			return FormError(join(p, "autocomplete"), "APPLICATION_COMMAND_AUTOCOMPLETE_WITH_CHOICES", "Autocomplete cannot be set with choices.")
		}
		if len(o.Choices) > maxChoices {
			return FormError(join(p, "choices"), "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", maxChoices))
		}
		for j, c := range o.Choices {
			cp := join(p, "choices."+strconv.Itoa(j))
			if n := runes(c.Name); n < 1 || n > 100 {
				return FormError(join(cp, "name"), "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
			}
			if err := checkChoiceValue(o.Type, c.Value, join(cp, "value")); err != nil {
				return err
			}
		}
	}
	if o.Autocomplete && o.Type != OptionString && !numeric {
		return FormError(join(p, "autocomplete"), "APPLICATION_COMMAND_OPTION_TYPE_INVALID", "Only string, integer and number options autocomplete.")
	}
	if o.MinValue != nil || o.MaxValue != nil {
		if !numeric {
			return FormError(join(p, "min_value"), "APPLICATION_COMMAND_OPTION_TYPE_INVALID", "Only integer and number options have min_value and max_value.")
		}
		for _, v := range []*float64{o.MinValue, o.MaxValue} {
			if v != nil && (math.IsNaN(*v) || math.Abs(*v) > maxIntegerValue || (o.Type == OptionInteger && *v != math.Trunc(*v))) {
				return FormError(join(p, "min_value"), "NUMBER_TYPE_COERCE", "Value is not a valid bound.")
			}
		}
		if o.MinValue != nil && o.MaxValue != nil && *o.MinValue > *o.MaxValue {
			return FormError(join(p, "max_value"), "NUMBER_TYPE_MIN", "max_value must not be less than min_value.")
		}
	}
	if o.MinLength != nil || o.MaxLength != nil {
		if o.Type != OptionString {
			return FormError(join(p, "min_length"), "APPLICATION_COMMAND_OPTION_TYPE_INVALID", "Only string options have min_length and max_length.")
		}
		if o.MinLength != nil && (*o.MinLength < 0 || *o.MinLength > maxLengthLimit) {
			return FormError(join(p, "min_length"), "NUMBER_TYPE_MAX", "Must be between 0 and 6000.")
		}
		if o.MaxLength != nil && (*o.MaxLength < 1 || *o.MaxLength > maxLengthLimit) {
			return FormError(join(p, "max_length"), "NUMBER_TYPE_MAX", "Must be between 1 and 6000.")
		}
		if o.MinLength != nil && o.MaxLength != nil && *o.MinLength > *o.MaxLength {
			return FormError(join(p, "max_length"), "NUMBER_TYPE_MIN", "max_length must not be less than min_length.")
		}
	}
	if len(o.ChannelTypes) > 0 && o.Type != OptionChannel {
		return FormError(join(p, "channel_types"), "APPLICATION_COMMAND_OPTION_TYPE_INVALID", "Only channel options have channel_types.")
	}
	return nil
}

// checkChoiceValue checks a choice's value against its option type.
func checkChoiceValue(typ int, raw json.RawMessage, path string) error {
	switch typ {
	case OptionString:
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return FormError(path, "BASE_TYPE_BAD_TYPE", "Value must be a string.")
		}
		if n := runes(s); n < 1 || n > 100 {
			return FormError(path, "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
		}
	case OptionInteger:
		var n json.Number
		if json.Unmarshal(raw, &n) != nil {
			return FormError(path, "BASE_TYPE_BAD_TYPE", "Value must be an integer.")
		}
		v, err := strconv.ParseInt(n.String(), 10, 64)
		if err != nil || v > maxIntegerValue || v < -maxIntegerValue {
			return FormError(path, "NUMBER_TYPE_COERCE", "Value must be an integer between -2^53 and 2^53.")
		}
	case OptionNumber:
		var v float64
		if json.Unmarshal(raw, &v) != nil || math.Abs(v) > maxIntegerValue {
			return FormError(path, "NUMBER_TYPE_COERCE", "Value must be a number between -2^53 and 2^53.")
		}
	}
	return nil
}

// commandChars counts the characters Discord's 8000-character limit
// covers: names, descriptions and choice values, everywhere.
func commandChars(def *CommandDef) int {
	n := runes(def.Name) + runes(def.Description)
	var walk func([]CommandOption)
	walk = func(opts []CommandOption) {
		for _, o := range opts {
			n += runes(o.Name) + runes(o.Description)
			for _, c := range o.Choices {
				n += runes(c.Name) + len(c.Value)
			}
			walk(o.Options)
		}
	}
	walk(def.Options)
	return n
}

// normalize makes empty collections nil and choice values compact, so a
// stored definition encodes and decodes to itself.
func normalize(def *CommandDef) {
	if len(def.NameLocalizations) == 0 {
		def.NameLocalizations = nil
	}
	if len(def.DescriptionLocalizations) == 0 {
		def.DescriptionLocalizations = nil
	}
	if len(def.Contexts) == 0 {
		def.Contexts = nil
	}
	if len(def.IntegrationTypes) == 0 {
		def.IntegrationTypes = nil
	}
	def.Options = normalizeOptions(def.Options)
}

func normalizeOptions(opts []CommandOption) []CommandOption {
	if len(opts) == 0 {
		return nil
	}
	for i := range opts {
		o := &opts[i]
		if len(o.NameLocalizations) == 0 {
			o.NameLocalizations = nil
		}
		if len(o.DescriptionLocalizations) == 0 {
			o.DescriptionLocalizations = nil
		}
		if len(o.ChannelTypes) == 0 {
			o.ChannelTypes = nil
		}
		if len(o.Choices) == 0 {
			o.Choices = nil
		}
		for j := range o.Choices {
			c := &o.Choices[j]
			if len(c.NameLocalizations) == 0 {
				c.NameLocalizations = nil
			}
			var buf bytes.Buffer
			if json.Compact(&buf, c.Value) == nil {
				c.Value = buf.Bytes()
			}
		}
		o.Options = normalizeOptions(o.Options)
	}
	return opts
}
