package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/concord-chat/concord/runtime/platform"
)

// bindEntitlementFlags registers the bot revocation flags of `concord dev`
// (ADR-08, runtime/entitlement); each default comes from its environment
// variable when set.
func bindEntitlementFlags(fs *pflag.FlagSet, cfg *platform.EntitlementConfig) {
	durFlag(fs, &cfg.TTL, "entitlement-ttl", 10*time.Second,
		"bot entitlement lease TTL, renewed every half of it: the longest a revocation whose push was lost goes unapplied while the bot store answers")
	durFlag(fs, &cfg.Grace, "entitlement-grace", 5*time.Minute,
		"how long bot sessions keep running on entitlements that cannot be renewed (bot store or registry down) before they close; new bot identifies are refused meanwhile")
}
