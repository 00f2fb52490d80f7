package guild

import "github.com/concord-chat/concord/runtime/adapters/store"

// applyGradient sets a role's secondary and tertiary colours from a spec:
// nil keeps a colour, a negative value clears it.
func applyGradient(r *store.Role, spec RoleSpec) {
	set := func(dst **int, v *int) {
		switch {
		case v == nil:
		case *v < 0:
			*dst = nil
		default:
			c := *v
			*dst = &c
		}
	}
	set(&r.SecondaryColor, spec.SecondaryColor)
	set(&r.TertiaryColor, spec.TertiaryColor)
}
