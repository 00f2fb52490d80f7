package live

import (
	"encoding/json"
	"time"
)

// SumViewers adds up the fresh reports of a board listing (ViewersPrefix):
// those taken less than ViewerTTL before now. Undecodable reports count
// as zero.
func SumViewers(reports map[string][]byte, now time.Time) int64 {
	var n int64
	for _, v := range reports {
		var r ViewerReport
		if json.Unmarshal(v, &r) != nil || r.Count < 0 {
			continue
		}
		if now.Sub(time.UnixMilli(r.At)) < ViewerTTL {
			n += r.Count
		}
	}
	return n
}
