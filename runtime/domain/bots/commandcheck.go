package bots

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

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
