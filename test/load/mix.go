package load

import "fmt"

// mixEvent returns round's event of the realistic mix, the dispatches a
// busy guild's member sees: MESSAGE_CREATE with member and author (two in
// six), MESSAGE_CREATE with a rich embed, PRESENCE_UPDATE, TYPING_START and
// GUILD_MEMBER_LIST_UPDATE, with ids and names repeating as they do in one
// guild. Each `d` starts with the harness's "round" and "ts" keys. The
// shapes are those of runtime/edge/gateway's compression benchmark, so the
// end-to-end rows compare with its per-event figures.
func mixEvent(round int, ts int64) (string, []byte) {
	users := []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"}
	i := round
	u := users[i%len(users)]
	id := 1580000000000000000 + int64(i)*4096
	uid := 1570000000000000000 + int64(i%len(users))*17
	head := fmt.Sprintf(`{"round":%d,"ts":%d,`, round, ts)
	switch i % 6 {
	case 0, 1:
		return "MESSAGE_CREATE", fmt.Appendf(nil, `%s"type":0,"tts":false,"timestamp":"2026-12-06T05:%02d:%02d.000000+00:00","pinned":false,"mentions":[],"mention_roles":[],"mention_everyone":false,"member":{"roles":["1560000000000000001"],"premium_since":null,"pending":false,"nick":null,"mute":false,"joined_at":"2026-11-01T10:00:00.000000+00:00","flags":0,"deaf":false,"communication_disabled_until":null,"avatar":null},"id":"%d","flags":0,"embeds":[],"edited_timestamp":null,"content":"message %d from %s about the match tonight","components":[],"channel_id":"1560000000000000100","author":{"username":"%s","public_flags":0,"id":"%d","global_name":"%s","discriminator":"0","avatar":null},"attachments":[],"guild_id":"1560000000000000000"}`, head, i%60, i%60, id, i, u, u, uid, u)
	case 2:
		return "MESSAGE_CREATE", fmt.Appendf(nil, `%s"type":0,"tts":false,"timestamp":"2026-12-06T05:%02d:%02d.000000+00:00","pinned":false,"mentions":[],"mention_roles":[],"mention_everyone":false,"id":"%d","flags":0,"embeds":[{"type":"rich","url":"https://example.org/articles/%d","title":"Article %d","description":"A longer description of the linked page that a bot put into its embed, with a few sentences of text.","color":5814783,"fields":[{"name":"Score","value":"%d","inline":true},{"name":"Author","value":"%s","inline":true}],"footer":{"text":"example.org"}}],"edited_timestamp":null,"content":"","components":[],"channel_id":"1560000000000000100","author":{"username":"newsbot","public_flags":0,"id":"1570000000000009999","global_name":null,"discriminator":"0","bot":true,"avatar":null},"attachments":[],"guild_id":"1560000000000000000"}`, head, i%60, i%60, id, i, i, i*7, u)
	case 3:
		return "PRESENCE_UPDATE", fmt.Appendf(nil, `%s"user":{"id":"%d"},"status":"%s","guild_id":"1560000000000000000","client_status":{"desktop":"%[3]s"},"activities":[]}`, head, uid, []string{"online", "idle", "dnd"}[i%3])
	case 4:
		return "TYPING_START", fmt.Appendf(nil, `%s"user_id":"%d","timestamp":%d,"member":{"user":{"username":"%s","id":"%[2]d","global_name":"%[4]s","discriminator":"0","avatar":null},"roles":[],"nick":null,"joined_at":"2026-11-01T10:00:00.000000+00:00"},"channel_id":"1560000000000000100","guild_id":"1560000000000000000"}`, head, uid, 1796000000+i, u)
	default:
		return "GUILD_MEMBER_LIST_UPDATE", fmt.Appendf(nil, `%s"ops":[{"op":"UPDATE","index":%d,"item":{"member":{"user":{"username":"%s","id":"%d","global_name":"%[3]s","discriminator":"0","avatar":null},"roles":["1560000000000000001"],"presence":{"user":{"id":"%[4]d"},"status":"online","client_status":{"web":"online"},"activities":[]},"nick":null,"joined_at":"2026-11-01T10:00:00.000000+00:00"}}}],"online_count":812,"member_count":1520,"id":"everyone","guild_id":"1560000000000000000","groups":[{"id":"online","count":812},{"id":"offline","count":708}]}`, head, i%100, u, uid)
	}
}
