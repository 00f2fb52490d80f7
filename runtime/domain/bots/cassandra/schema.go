package cassandra

import "github.com/concord-chat/concord/runtime/adapters/store/cassandra"

// migrationsTable records the bot tables' migrations (and holds their
// lock), apart from the main store's schema_migrations.
const migrationsTable = "bots_schema_migrations"

// interactionTableOpts are the options of the interaction tables. Their
// rows expire (TTL) after Config.InteractionTTL, so a replica that missed
// a delete can only bring back a row that expires soon anyway; the
// tombstones live 3 hours (Cassandra's default max_hint_window), not 10
// days, and lightweight transactions' Paxos state as long.
const interactionTableOpts = `gc_grace_seconds = 10800
	AND comment = 'Concord bot interactions: see runtime/domain/bots/cassandra'`

// migrations are the bot tables' schema versions. Never edit an applied
// one: append.
var migrations = []cassandra.Migration{
	{Version: 1, Name: "bot platform", Stmts: []string{
		`CREATE TABLE IF NOT EXISTS bot_applications (
			app_id bigint PRIMARY KEY, bot_user_id bigint, owner_id bigint, doc text)`,
		`CREATE TABLE IF NOT EXISTS bot_applications_by_bot (
			bot_user_id bigint PRIMARY KEY, app_id bigint)`,
		`CREATE TABLE IF NOT EXISTS bot_applications_by_owner (
			owner_id bigint, app_id bigint, PRIMARY KEY ((owner_id), app_id))`,
		`CREATE TABLE IF NOT EXISTS bot_commands (
			app_id bigint, guild_id bigint, command_id bigint, doc text,
			PRIMARY KEY ((app_id, guild_id), command_id))`,
		`CREATE TABLE IF NOT EXISTS bot_installations (
			guild_id bigint, app_id bigint, doc text, PRIMARY KEY ((guild_id), app_id))`,
		`CREATE TABLE IF NOT EXISTS bot_interactions (
			interaction_id bigint PRIMARY KEY, version bigint, doc text
		) WITH ` + interactionTableOpts,
		`CREATE TABLE IF NOT EXISTS bot_interactions_by_minute (
			minute bigint, interaction_id bigint, PRIMARY KEY ((minute), interaction_id)
		) WITH ` + interactionTableOpts,
		`CREATE TABLE IF NOT EXISTS bot_interaction_minutes (
			shard int, minute bigint, PRIMARY KEY ((shard), minute)
		) WITH ` + interactionTableOpts,
	}},
}
