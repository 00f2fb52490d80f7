package conformance

import (
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/concord-chat/concord/runtime/config"
)

// shardMessage is a MESSAGE_CREATE seen by one shard.
type shardMessage struct {
	shard int
	m     *discordgo.MessageCreate
}

// TestDiscordgoShards runs an unmodified discordgo v0.29 bot with four
// shards (ShardID/ShardCount on four sessions) for an application
// installed in guilds spread over every shard, and checks that each
// shard's READY lists exactly its guilds and that each guild's
// MESSAGE_CREATE arrives on shard (guild_id >> 22) % 4 only. /gateway/bot
// recommends one shard for these few guilds and reports the identify
// budget the four identifies used.
func TestDiscordgoShards(t *testing.T) {
	const shards = 4
	s := startServerWith(t, func(c *config.Config) { c.Identify.Concurrency = shards })
	owner, _ := s.register("shards-owner")
	a := createApp(t, s, owner, "Sharded")

	shardOf := func(guildID string) int {
		id, err := strconv.ParseUint(guildID, 10, 64)
		must(t, err, "parse guild id")
		return int((id >> 22) % shards)
	}
	// Guild ids carry their creation millisecond: create guilds until
	// every shard has at least one.
	channelOf := map[string]string{}
	covered := map[int]bool{}
	for i := 0; len(covered) < shards; i++ {
		if i == 200 {
			t.Fatalf("200 guilds cover shards %v only", covered)
		}
		g, c := newGuild(t, owner, "Shard guild "+strconv.Itoa(i))
		channelOf[g] = c
		covered[shardOf(g)] = true
		install(t, owner, a, g, permViewChannel|permSendMessages|permReadHistory)
	}

	var gb struct {
		Shards            int `json:"shards"`
		SessionStartLimit struct {
			Total          int `json:"total"`
			Remaining      int `json:"remaining"`
			MaxConcurrency int `json:"max_concurrency"`
		} `json:"session_start_limit"`
	}
	a.bot.do("GET", "/gateway/bot", nil, &gb)
	if gb.Shards != 1 || gb.SessionStartLimit.Total != 1000 || gb.SessionStartLimit.Remaining != 1000 ||
		gb.SessionStartLimit.MaxConcurrency != shards {
		t.Fatalf("/gateway/bot before identifying = %+v", gb)
	}

	var mu sync.Mutex
	readyGuilds := map[int][]string{}
	readies := make(chan int, shards)
	messages := make(chan shardMessage, 256)
	for i := range shards {
		dg, err := discordgo.New("Bot " + a.Token)
		must(t, err, "discordgo.New")
		dg.Client = &http.Client{Transport: rewriteTransport{host: s.proxy.addr()}}
		dg.ShouldRetryOnRateLimit = false
		dg.ShardID, dg.ShardCount = i, shards
		dg.Identify.Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages
		dg.AddHandler(func(_ *discordgo.Session, e *discordgo.Ready) {
			ids := make([]string, 0, len(e.Guilds))
			for _, g := range e.Guilds {
				ids = append(ids, g.ID)
			}
			mu.Lock()
			readyGuilds[i] = ids
			mu.Unlock()
			readies <- i
		})
		dg.AddHandler(func(_ *discordgo.Session, e *discordgo.MessageCreate) { messages <- shardMessage{shard: i, m: e} })
		must(t, dg.Open(), "open shard "+strconv.Itoa(i))
		t.Cleanup(func() { dg.Close() })
	}
	seen := map[int]bool{}
	for len(seen) < shards {
		seen[waitFor(t, readies, "READY on every shard", func(int) bool { return true })] = true
	}
	mu.Lock()
	for shard, ids := range readyGuilds {
		for _, g := range ids {
			if shardOf(g) != shard {
				t.Errorf("shard %d READY lists guild %s of shard %d", shard, g, shardOf(g))
			}
		}
		want := 0
		for g := range channelOf {
			if shardOf(g) == shard {
				want++
			}
		}
		if len(ids) != want {
			t.Errorf("shard %d READY lists %d guilds, want %d", shard, len(ids), want)
		}
	}
	mu.Unlock()

	// One message per guild, posted by the owner; then every arrival is
	// checked against its guild's shard.
	posted := map[string]string{} // message id → guild id
	for g, c := range channelOf {
		var m struct {
			ID string `json:"id"`
		}
		owner.do("POST", "/channels/"+c+"/messages", map[string]any{"content": "to shard " + strconv.Itoa(shardOf(g))}, &m)
		posted[m.ID] = g
	}
	got := map[string]int{}
	deadline := time.After(20 * time.Second)
	for len(got) < len(posted) {
		select {
		case sm := <-messages:
			g, ok := posted[sm.m.ID]
			if !ok {
				continue
			}
			if sm.m.GuildID != g {
				t.Errorf("message %s guild_id %s, want %s", sm.m.ID, sm.m.GuildID, g)
			}
			if want := shardOf(g); sm.shard != want {
				t.Errorf("guild %s message on shard %d, want shard %d", g, sm.shard, want)
			}
			if prev, dup := got[sm.m.ID]; dup {
				t.Errorf("message %s arrived on shards %d and %d", sm.m.ID, prev, sm.shard)
			}
			got[sm.m.ID] = sm.shard
		case <-deadline:
			t.Fatalf("MESSAGE_CREATE arrived for %d of %d guilds: %v", len(got), len(posted), got)
		}
	}

	a.bot.do("GET", "/gateway/bot", nil, &gb)
	if gb.SessionStartLimit.Remaining != 1000-shards {
		t.Errorf("/gateway/bot remaining after %d identifies = %d", shards, gb.SessionStartLimit.Remaining)
	}
}
