package permissions

import (
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// refGuild is a deliberately naive model of one guild for the property
// tests: plain maps of the inputs, no interning, no cache. refChannel and
// refBase follow the text of section 4 of discord-api-v10.md step by step
// and share no code with the engine.
type refGuild struct {
	guildID  snowflake.ID
	owner    snowflake.ID
	roles    map[snowflake.ID]Bits        // role id -> bits; guildID = @everyone
	channels map[snowflake.ID][]Overwrite // channel id -> overwrites as given
	members  map[snowflake.ID]Member      // user id -> member as given
}

func newRefGuild(guildID, owner snowflake.ID) *refGuild {
	return &refGuild{
		guildID:  guildID,
		owner:    owner,
		roles:    map[snowflake.ID]Bits{},
		channels: map[snowflake.ID][]Overwrite{},
		members:  map[snowflake.ID]Member{},
	}
}

// refHasRole: the member lists the role, it exists, and it is not @everyone
// (the @everyone overwrite is step 3, never step 4).
func (g *refGuild) refHasRole(m Member, role snowflake.ID) bool {
	if role == g.guildID {
		return false
	}
	if _, exists := g.roles[role]; !exists {
		return false
	}
	for _, r := range m.Roles {
		if r == role {
			return true
		}
	}
	return false
}

func (g *refGuild) refTimedOut(m Member, now time.Time) bool {
	return !m.TimeoutUntil.IsZero() && m.TimeoutUntil.After(now)
}

// refBaseBits: @everyone's bits OR the bits of each of the member's roles.
func (g *refGuild) refBaseBits(m Member) Bits {
	base := g.roles[g.guildID]
	for id, bits := range g.roles {
		if g.refHasRole(m, id) {
			base |= bits
		}
	}
	return base
}

func (g *refGuild) refBase(user snowflake.ID, now time.Time) Bits {
	m, ok := g.members[user]
	if !ok {
		return 0
	}
	// (1) owner -> all
	if user == g.owner {
		return All
	}
	// (2) base; ADMINISTRATOR -> all
	base := g.refBaseBits(m)
	if base&Administrator == Administrator {
		return All
	}
	if g.refTimedOut(m, now) {
		base = base & (ViewChannel | ReadMessageHistory)
	}
	return base
}

func (g *refGuild) refChannel(user, channelID snowflake.ID, now time.Time) Bits {
	m, ok := g.members[user]
	if !ok {
		return 0
	}
	ows, ok := g.channels[channelID]
	if !ok {
		return 0
	}
	// (1) owner -> all
	if user == g.owner {
		return All
	}
	// (2) base; ADMINISTRATOR -> all
	p := g.refBaseBits(m)
	if p&Administrator == Administrator {
		return All
	}
	// (3) @everyone overwrite: deny then allow. The last overwrite given
	// for a target is the one that counts.
	for i := len(ows) - 1; i >= 0; i-- {
		ow := ows[i]
		if !ow.Member && ow.ID == g.guildID {
			p = p &^ ow.Deny
			p = p | ow.Allow
			break
		}
	}
	// (4) OR of the allows and OR of the denies of the member's roles'
	// overwrites, deny then allow.
	var allow, deny Bits
	seen := map[snowflake.ID]bool{}
	for i := len(ows) - 1; i >= 0; i-- {
		ow := ows[i]
		if ow.Member || seen[ow.ID] {
			continue
		}
		seen[ow.ID] = true
		if g.refHasRole(m, ow.ID) {
			allow = allow | ow.Allow
			deny = deny | ow.Deny
		}
	}
	p = p &^ deny
	p = p | allow
	// (5) the member's own overwrite, last.
	for i := len(ows) - 1; i >= 0; i-- {
		ow := ows[i]
		if ow.Member && ow.ID == user {
			p = p &^ ow.Deny
			p = p | ow.Allow
			break
		}
	}
	// Implicit: no VIEW_CHANNEL -> no other channel permission.
	if p&ViewChannel == 0 {
		return 0
	}
	// No SEND_MESSAGES -> no MENTION_EVERYONE, SEND_TTS_MESSAGES,
	// ATTACH_FILES, EMBED_LINKS.
	if p&SendMessages == 0 {
		p = p &^ MentionEveryone
		p = p &^ SendTTSMessages
		p = p &^ AttachFiles
		p = p &^ EmbedLinks
	}
	// No CONNECT -> no other voice permission.
	if p&Connect == 0 {
		for _, v := range []Bits{Speak, MuteMembers, DeafenMembers, MoveMembers,
			UseVAD, PrioritySpeaker, Stream, RequestToSpeak, UseEmbeddedActivities,
			UseSoundboard, UseExternalSounds, SetVoiceChannelStatus} {
			p = p &^ v
		}
	}
	// Timeout in the future -> only VIEW_CHANNEL and READ_MESSAGE_HISTORY
	// (owners and administrators returned above).
	if g.refTimedOut(m, now) {
		p = p & (ViewChannel | ReadMessageHistory)
	}
	return p
}

// compute runs Compute (the shadow check's from-scratch path) over the
// reference's inputs; ok is false for a user or channel the guild does not
// have, which Compute is never asked about.
func (g *refGuild) compute(user, channelID snowflake.ID, now time.Time) (Bits, bool) {
	m, ok := g.members[user]
	ows, chOK := g.channels[channelID]
	if !ok || !chOK {
		return 0, false
	}
	return Compute(Inputs{
		GuildID: g.guildID, OwnerID: g.owner, Member: m, Overwrites: ows, Now: now,
		Role: func(id snowflake.ID) (Bits, bool) { b, ok := g.roles[id]; return b, ok },
	}), true
}
