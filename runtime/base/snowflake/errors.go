package snowflake

import "errors"

var (
	// ErrInvalid is returned (wrapped) when text is not a snowflake.
	ErrInvalid = errors.New("snowflake: invalid id")
	// ErrClockBackwards is returned (wrapped) by Next when the clock went
	// back further than Config.MaxBackwardsWait behind the last id issued.
	ErrClockBackwards = errors.New("snowflake: clock moved backwards")
	// ErrTimeRange is returned (wrapped) by Next when the clock is before
	// Epoch or past the 42-bit range (year 2154).
	ErrTimeRange = errors.New("snowflake: time outside the id range")
	// ErrConfig is returned (wrapped) by New for an invalid Config.
	ErrConfig = errors.New("snowflake: invalid generator config")
)
