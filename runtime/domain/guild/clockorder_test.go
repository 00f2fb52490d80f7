package guild

import (
	"errors"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// TestMessageIDsStayAfterTheChannelsLast: a channel's last message was
// minted by an earlier owner of the guild whose clock ran ahead (the
// fault suite's clock fault: the owner 45 s ahead, then the guild moved
// or the clock put right). The next owner's clock mints ids behind it: a
// message with such an id would sit before messages readers already saw.
// The actor refuses it (ErrUnavailable, the sender retries) while the gap
// is beyond its wait, and waits out a small gap.
func TestMessageIDsStayAfterTheChannelsLast(t *testing.T) {
	f := newFixture(t)
	g := f.secretGuild()
	send := func(svc *Service, content string) (Written, error) {
		return svc.Messages.Create(bg, MessageWrite{Check: CheckSend, UserID: g.owner.ID,
			Message:  store.Message{ChannelID: g.general.ID, AuthorID: g.owner.ID, Content: content},
			Mentions: &Mentions{}, Render: render(g.owner)})
	}
	// The earlier owner's message, 45 s ahead of this node's clock.
	ahead := snowflake.Compose(time.Now().Add(45*time.Second), 9, 9, 0)
	if err := f.store.PutMessage(bg, store.Message{ID: ahead, ChannelID: g.general.ID, GuildID: g.guild.Guild.ID,
		AuthorID: g.owner.ID, Content: "from a clock 45 s ahead"}); err != nil {
		t.Fatal(err)
	}
	// This node loads the guild afresh (as a new owner would).
	svc := f.newService(Config{})
	w, err := send(svc, "behind")
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("send with this node's clock 45 s behind the channel's last message %d: %v, id %d; want ErrUnavailable",
			ahead, err, w.Message.ID)
	}

	// A gap within the wait: the actor waits for its clock to pass it.
	near := snowflake.Compose(time.Now().Add(300*time.Millisecond), 9, 9, 0)
	if err := f.store.PutMessage(bg, store.Message{ID: near, ChannelID: g.secret.ID, GuildID: g.guild.Guild.ID,
		AuthorID: g.owner.ID, Content: "from a clock 300 ms ahead"}); err != nil {
		t.Fatal(err)
	}
	svc = f.newService(Config{})
	w, err = svc.Messages.Create(bg, MessageWrite{Check: CheckSend, UserID: g.owner.ID,
		Message:  store.Message{ChannelID: g.secret.ID, AuthorID: g.owner.ID, Content: "after"},
		Mentions: &Mentions{}, Render: render(g.owner)})
	if err != nil {
		t.Fatal(err)
	}
	if w.Message.ID <= near {
		t.Fatalf("message id %d not after the channel's last %d", w.Message.ID, near)
	}
}
