// Package voice tests Concord's SFU over real sockets: a Go client speaking
// Discord's voice protocol (package voiceclient), and the real bot
// libraries (@discordjs/voice, discord.py) in the integration tests.
package voice
