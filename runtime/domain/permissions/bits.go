// Package permissions computes Discord-style permission bitfields for one
// guild: the guild-level base permissions of a member and their effective
// permissions in a channel after overwrites, with a cache keyed by role set
// and channel that the guild actor keeps next to its state.
//
// The algorithm is the documented one (section 4 of discord-api-v10.md):
//
//  1. the guild owner has every permission;
//  2. base = @everyone | each of the member's roles; ADMINISTRATOR in base
//     means every permission;
//  3. the channel's @everyone overwrite: p &^= deny; p |= allow;
//  4. the OR of the allows and the OR of the denies of every role overwrite
//     matching one of the member's roles, applied deny then allow;
//  5. the member's own overwrite, deny then allow.
//
// Then the implicit rules: without VIEW_CHANNEL no channel permission is
// left; without SEND_MESSAGES the member also loses MENTION_EVERYONE,
// SEND_TTS_MESSAGES, ATTACH_FILES and EMBED_LINKS (SendImplied); without
// CONNECT the member loses every other voice permission (VoiceImplied).
// A member whose timeout lies in the future keeps only VIEW_CHANNEL and
// READ_MESSAGE_HISTORY of what they had, unless they are the owner or an
// administrator.
package permissions

import "strconv"

// Bits is a permission bitfield. It encodes as a decimal JSON string and
// decodes from a JSON string or number, as Discord does.
type Bits uint64

// Permission bits, from the reference table (section 4 of discord-api-v10.md).
const (
	CreateInstantInvite    Bits = 1 << 0
	KickMembers            Bits = 1 << 1
	BanMembers             Bits = 1 << 2
	Administrator          Bits = 1 << 3
	ManageChannels         Bits = 1 << 4
	ManageGuild            Bits = 1 << 5
	AddReactions           Bits = 1 << 6
	ViewAuditLog           Bits = 1 << 7
	PrioritySpeaker        Bits = 1 << 8
	Stream                 Bits = 1 << 9
	ViewChannel            Bits = 1 << 10
	SendMessages           Bits = 1 << 11
	SendTTSMessages        Bits = 1 << 12
	ManageMessages         Bits = 1 << 13
	EmbedLinks             Bits = 1 << 14
	AttachFiles            Bits = 1 << 15
	ReadMessageHistory     Bits = 1 << 16
	MentionEveryone        Bits = 1 << 17
	UseExternalEmojis      Bits = 1 << 18
	ViewGuildInsights      Bits = 1 << 19
	Connect                Bits = 1 << 20
	Speak                  Bits = 1 << 21
	MuteMembers            Bits = 1 << 22
	DeafenMembers          Bits = 1 << 23
	MoveMembers            Bits = 1 << 24
	UseVAD                 Bits = 1 << 25
	ChangeNickname         Bits = 1 << 26
	ManageNicknames        Bits = 1 << 27
	ManageRoles            Bits = 1 << 28
	ManageWebhooks         Bits = 1 << 29
	ManageGuildExpressions Bits = 1 << 30
	UseApplicationCommands Bits = 1 << 31
	RequestToSpeak         Bits = 1 << 32
	ManageEvents           Bits = 1 << 33
	ManageThreads          Bits = 1 << 34
	CreatePublicThreads    Bits = 1 << 35
	CreatePrivateThreads   Bits = 1 << 36
	UseExternalStickers    Bits = 1 << 37
	SendMessagesInThreads  Bits = 1 << 38
	UseEmbeddedActivities  Bits = 1 << 39
	ModerateMembers        Bits = 1 << 40
	UseSoundboard          Bits = 1 << 42
	CreateGuildExpressions Bits = 1 << 43
	CreateEvents           Bits = 1 << 44
	UseExternalSounds      Bits = 1 << 45
	SendVoiceMessages      Bits = 1 << 46
	SetVoiceChannelStatus  Bits = 1 << 48
	SendPolls              Bits = 1 << 49
	UseExternalApps        Bits = 1 << 50
	PinMessages            Bits = 1 << 51
	BypassSlowmode         Bits = 1 << 52
)

// All is the OR of every defined permission bit. Bits 41 and 47 are not
// defined and are not part of All.
const All = CreateInstantInvite | KickMembers | BanMembers | Administrator |
	ManageChannels | ManageGuild | AddReactions | ViewAuditLog | PrioritySpeaker |
	Stream | ViewChannel | SendMessages | SendTTSMessages | ManageMessages |
	EmbedLinks | AttachFiles | ReadMessageHistory | MentionEveryone |
	UseExternalEmojis | ViewGuildInsights | Connect | Speak | MuteMembers |
	DeafenMembers | MoveMembers | UseVAD | ChangeNickname | ManageNicknames |
	ManageRoles | ManageWebhooks | ManageGuildExpressions | UseApplicationCommands |
	RequestToSpeak | ManageEvents | ManageThreads | CreatePublicThreads |
	CreatePrivateThreads | UseExternalStickers | SendMessagesInThreads |
	UseEmbeddedActivities | ModerateMembers | UseSoundboard | CreateGuildExpressions |
	CreateEvents | UseExternalSounds | SendVoiceMessages | SetVoiceChannelStatus |
	SendPolls | UseExternalApps | PinMessages | BypassSlowmode

// DefaultEveryone is what Concord gives the @everyone role of a new guild.
// It is Discord's classic default, 104324673 (0x637DE41: CREATE_INSTANT_INVITE,
// ADD_REACTIONS, STREAM, VIEW_CHANNEL, SEND_MESSAGES, SEND_TTS_MESSAGES,
// EMBED_LINKS, ATTACH_FILES, READ_MESSAGE_HISTORY, MENTION_EVERYONE,
// USE_EXTERNAL_EMOJIS, CONNECT, SPEAK, USE_VAD, CHANGE_NICKNAME), plus the
// member-level permissions Discord added since and grants to @everyone in new
// guilds: USE_APPLICATION_COMMANDS, REQUEST_TO_SPEAK, CREATE_PUBLIC_THREADS,
// CREATE_PRIVATE_THREADS, USE_EXTERNAL_STICKERS, SEND_MESSAGES_IN_THREADS,
// USE_EMBEDDED_ACTIVITIES, USE_SOUNDBOARD, CREATE_GUILD_EXPRESSIONS,
// CREATE_EVENTS, USE_EXTERNAL_SOUNDS, SEND_VOICE_MESSAGES, SEND_POLLS and
// USE_EXTERNAL_APPS. No moderation or management bit is in it.
const DefaultEveryone = CreateInstantInvite | AddReactions | Stream | ViewChannel |
	SendMessages | SendTTSMessages | EmbedLinks | AttachFiles | ReadMessageHistory |
	MentionEveryone | UseExternalEmojis | Connect | Speak | UseVAD | ChangeNickname |
	UseApplicationCommands | RequestToSpeak | CreatePublicThreads |
	CreatePrivateThreads | UseExternalStickers | SendMessagesInThreads |
	UseEmbeddedActivities | UseSoundboard | CreateGuildExpressions | CreateEvents |
	UseExternalSounds | SendVoiceMessages | SendPolls | UseExternalApps

// SendImplied are the permissions a member loses in a channel where they
// lack SEND_MESSAGES.
const SendImplied = MentionEveryone | SendTTSMessages | AttachFiles | EmbedLinks

// VoiceImplied are the voice permissions a member loses in a channel where
// they lack CONNECT.
const VoiceImplied = Speak | MuteMembers | DeafenMembers | MoveMembers | UseVAD |
	PrioritySpeaker | Stream | RequestToSpeak | UseEmbeddedActivities |
	UseSoundboard | UseExternalSounds | SetVoiceChannelStatus

// TimeoutAllowed is what a timed-out member keeps (of what they had).
const TimeoutAllowed = ViewChannel | ReadMessageHistory

// Has reports whether every bit of p is set in b.
func (b Bits) Has(p Bits) bool { return b&p == p }

// String returns the decimal form, as Discord sends it.
func (b Bits) String() string { return strconv.FormatUint(uint64(b), 10) }

// MarshalJSON encodes the bitfield as a decimal JSON string.
func (b Bits) MarshalJSON() ([]byte, error) {
	out := make([]byte, 0, 22)
	out = append(out, '"')
	out = strconv.AppendUint(out, uint64(b), 10)
	return append(out, '"'), nil
}

// UnmarshalJSON accepts a decimal JSON string or a JSON number; null is 0.
func (b *Bits) UnmarshalJSON(data []byte) error {
	s := string(data)
	if s == "null" {
		*b = 0
		return nil
	}
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	if s == "" || len(s) > 20 {
		return ErrInvalid
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return ErrInvalid
	}
	*b = Bits(v)
	return nil
}

// implicit applies the implicit channel rules to the result of the
// overwrite steps.
func implicit(p Bits) Bits {
	if p&ViewChannel == 0 {
		return 0
	}
	if p&SendMessages == 0 {
		p &^= SendImplied
	}
	if p&Connect == 0 {
		p &^= VoiceImplied
	}
	return p
}
