// Package conformance runs unmodified Discord bot libraries — discordgo
// (Go) and discord.js (Node) — against a Concord platform started in the
// test, behind a TCP proxy that can cut every socket to force resumes.
package conformance
