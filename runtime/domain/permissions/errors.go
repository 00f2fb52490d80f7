package permissions

import "errors"

// ErrInvalid is returned when text is not a permission bitfield.
var ErrInvalid = errors.New("permissions: invalid bitfield")
