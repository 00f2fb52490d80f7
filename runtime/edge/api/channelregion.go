package api

import (
	"strings"
)

// checkRTCRegion refuses an rtc_region that names no region of GET
// /voice/regions (the voice fleet's regions), with Discord's form error;
// null (automatic) always passes. It returns the stored form: "" for
// null.
func (h *voiceHandler) checkRTCRegion(v nullable[string]) (string, error) {
	if v.Null || v.Value == "" {
		return "", nil
	}
	ids := []string{}
	for _, rg := range h.voice.Regions() {
		if rg.ID == v.Value {
			return v.Value, nil
		}
		ids = append(ids, "'"+rg.ID+"'")
	}
	return "", formError("rtc_region", "BASE_TYPE_CHOICES", "Value must be one of ("+strings.Join(ids, ", ")+").")
}
