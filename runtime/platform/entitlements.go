package platform

import (
	"github.com/concord-chat/concord/runtime/apirole"
	"github.com/concord-chat/concord/runtime/bots"
	"github.com/concord-chat/concord/runtime/entitlement"
	"github.com/concord-chat/concord/runtime/store"
)

// NewInstallSource is the entitlement.Source both modes read bots' grants
// from (apirole.NewInstallSource). A `concord serve` gateway node builds
// its lease manager on it.
func NewInstallSource(apps bots.Store, users store.Store) entitlement.Source {
	return apirole.NewInstallSource(apps, users)
}
