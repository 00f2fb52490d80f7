package api

import "github.com/concord-chat/concord/runtime/domain/guild"

// roleColors is a role's colors object in a request. Newer libraries send
// it instead of (or beside) color; its primary_color is the role's color.
type roleColors struct {
	PrimaryColor   *int          `json:"primary_color"`
	SecondaryColor nullable[int] `json:"secondary_color"`
	TertiaryColor  nullable[int] `json:"tertiary_color"`
}

// checkExtras validates the parts of a role body beyond the basic fields
// and sets them on spec: colors fills Color and the gradient colours;
// role icons and unicode emoji are refused, as Discord refuses them for
// guilds without the ROLE_ICONS feature (Concord guilds have none).
func (req *roleRequest) checkExtras(spec *guild.RoleSpec) error {
	if req.Icon != nil && *req.Icon != "" {
		return formError("icon", "ROLE_ICONS_NOT_AVAILABLE", "This server needs more boosts to perform this action: role icons are not available on Concord.")
	}
	if req.Emoji != nil && *req.Emoji != "" {
		return formError("unicode_emoji", "ROLE_ICONS_NOT_AVAILABLE", "This server needs more boosts to perform this action: role icons are not available on Concord.")
	}
	c := req.Colors
	if c == nil {
		return nil
	}
	check := func(field string, v int) error {
		if v < 0 || v > 0xFFFFFF {
			return formError("colors."+field, "NUMBER_TYPE_MAX", "int value should be less than or equal to 16777215.")
		}
		return nil
	}
	if c.PrimaryColor != nil {
		if err := check("primary_color", *c.PrimaryColor); err != nil {
			return err
		}
		spec.Color = c.PrimaryColor
	}
	for _, g := range []struct {
		field string
		v     nullable[int]
		dst   **int
	}{{"secondary_color", c.SecondaryColor, &spec.SecondaryColor}, {"tertiary_color", c.TertiaryColor, &spec.TertiaryColor}} {
		if !g.v.Set {
			continue
		}
		v := -1 // null clears the colour
		if !g.v.Null {
			if err := check(g.field, g.v.Value); err != nil {
				return err
			}
			v = g.v.Value
		}
		*g.dst = &v
	}
	if c.TertiaryColor.Set && !c.TertiaryColor.Null && (!c.SecondaryColor.Set || c.SecondaryColor.Null) {
		return formError("colors.secondary_color", "BASE_TYPE_REQUIRED", "A tertiary colour needs a secondary colour.")
	}
	return nil
}
