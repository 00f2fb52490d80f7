package bots

import (
	"encoding/json"
	"fmt"
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
	Contexts                 flexInts          `json:"contexts,omitempty"`
	IntegrationTypes         flexInts          `json:"integration_types,omitempty"`
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
