package platform

import (
	"context"

	"github.com/concord-chat/concord/runtime/apirole"
	"github.com/concord-chat/concord/runtime/counters"
)

// OpenCounters opens the counters backend cfg.Redis names, as the api
// role does (apirole.OpenCounters); `concord serve` gateway nodes share
// bots' identify counters through it.
func OpenCounters(ctx context.Context, cfg Config) (counters.Counters, error) {
	return apirole.OpenCounters(ctx, cfg)
}
