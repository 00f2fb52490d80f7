package bots

import (
	"slices"
	"strconv"

	"github.com/concord-chat/concord/runtime/domain/rich"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// checkComponentUse refuses a component interaction that names a
// component its message does not show (a forged click), one of another
// type, a disabled one, or select values the select does not offer.
func checkComponentUse(m wire.Message, d componentData) error {
	it, ok := rich.Find(wire.JoinRaw(m.Components), d.CustomID)
	if !ok {
		return FormError("data.custom_id", "COMPONENT_UNKNOWN", "The message has no component with this custom_id.")
	}
	if d.ComponentType != 0 && d.ComponentType != it.Type {
		return FormError("data.component_type", "COMPONENT_TYPE_MISMATCH", "The component with this custom_id is of type "+strconv.Itoa(it.Type)+".")
	}
	if it.Disabled {
		return FormError("data.custom_id", "COMPONENT_DISABLED", "The component is disabled.")
	}
	if it.Type == rich.StringSelect {
		for i, v := range d.Values {
			if !slices.Contains(it.Options, v) {
				return FormError("data.values."+strconv.Itoa(i), "COMPONENT_VALUE_UNKNOWN", "The select offers no such value.")
			}
		}
	}
	return nil
}
