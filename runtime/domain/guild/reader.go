package guild

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/auth"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// ReaderStore is what a Reader reads: guilds and channels, and users.
type ReaderStore interface {
	store.Guilds
	store.Users
}

// Reader answers from the store alone what needs no guild's actor: a
// session's identify (READY's user, its guilds on the session's shard and
// its private channels), which guild a channel belongs to, and whether a
// user is a recipient of a private channel. It runs no goroutine and
// sends nothing.
//
// Every Service reads through its own Reader (Service.Identify,
// ChannelGuild, User), whose caches its actors keep current. A process
// that runs no guild but reads them — a gateway node's identify, a
// read-state node mapping channels to guilds — opens a Reader alone
// instead of a Service with no actor and nowhere to deliver.
type Reader struct {
	store ReaderStore
	auth  *auth.Issuer
	// channelGuild caches channel id → guild id (0 for private
	// channels); a Service's actors store and delete entries as channels
	// are created and deleted.
	channelGuild sync.Map
	// users caches user objects by id; accounts do not change name.
	users sync.Map
}

// NewReader returns the Reader on st; iss verifies Identify's tokens (nil:
// Identify fails with ErrUnavailable).
func NewReader(st ReaderStore, iss *auth.Issuer) *Reader {
	return &Reader{store: st, auth: iss}
}

// Identify verifies a token and intents and returns READY's parts. Errors:
// ErrAuthenticationFailed, ErrInvalidIntents, ErrInvalidShard, or
// ErrUnavailable wrapping a store failure.
func (r *Reader) Identify(ctx context.Context, token string, sess event.Session) (event.Ready, error) {
	if r.auth == nil {
		return event.Ready{}, fmt.Errorf("identify: %w: no token issuer", ErrUnavailable)
	}
	if sess.Intents&^intentsDefined != 0 {
		return event.Ready{}, fmt.Errorf("intents %d: %w", sess.Intents, ErrInvalidIntents)
	}
	if sess.ShardCount < 0 || (sess.ShardCount > 0 && (sess.ShardID < 0 || sess.ShardID >= sess.ShardCount)) ||
		(sess.ShardCount == 0 && sess.ShardID != 0) {
		return event.Ready{}, fmt.Errorf("shard [%d, %d]: %w", sess.ShardID, sess.ShardCount, ErrInvalidShard)
	}
	userID, err := r.auth.Verify(ctx, token)
	if errors.Is(err, auth.ErrInvalidToken) {
		return event.Ready{}, fmt.Errorf("identify: %w", ErrAuthenticationFailed)
	}
	if err != nil {
		return event.Ready{}, fmt.Errorf("identify: %w: %w", ErrUnavailable, err)
	}
	u, err := r.store.GetUser(ctx, userID)
	if err != nil {
		return event.Ready{}, storeErr("identify", err)
	}
	guilds, err := r.store.UserGuilds(ctx, userID)
	if err != nil {
		return event.Ready{}, storeErr("identify", err)
	}
	sess.UserID = userID
	ready := event.Ready{UserID: userID, Bot: u.Bot, User: mustJSON(wire.UserFrom(u)), Guilds: []snowflake.ID{}}
	for _, g := range guilds {
		if onShard(sess, g) {
			ready.Guilds = append(ready.Guilds, g)
		}
	}
	if u.Bot {
		ready.ApplicationID = u.ID
	}
	private := []wire.Channel{}
	if sess.ShardCount <= 1 || sess.ShardID == 0 {
		chans, err := r.store.PrivateChannels(ctx, userID)
		if err != nil {
			return event.Ready{}, storeErr("identify", err)
		}
		for _, c := range chans {
			private = append(private, r.wireChannel(ctx, c, userID))
		}
	}
	ready.PrivateChannels = json.RawMessage(mustJSON(private))
	return ready, nil
}

// ChannelGuild returns the guild a channel belongs to (0 for private
// channels), from the cache or the store.
func (r *Reader) ChannelGuild(ctx context.Context, channelID snowflake.ID) (snowflake.ID, error) {
	if v, ok := r.channelGuild.Load(channelID); ok {
		return v.(snowflake.ID), nil
	}
	c, err := r.store.GetChannel(ctx, channelID)
	if errors.Is(err, store.ErrNotFound) {
		return 0, fmt.Errorf("channel %d: %w", channelID, ErrUnknownChannel)
	}
	if err != nil {
		return 0, fmt.Errorf("channel %d: %w: %w", channelID, ErrUnavailable, err)
	}
	r.channelGuild.Store(channelID, c.GuildID)
	return c.GuildID, nil
}

// User returns a user's object from the cache or the store.
func (r *Reader) User(ctx context.Context, id snowflake.ID) (wire.User, error) {
	if v, ok := r.users.Load(id); ok {
		return v.(wire.User), nil
	}
	u, err := r.store.GetUser(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return wire.User{}, fmt.Errorf("user %d: %w", id, ErrUnknownUser)
	}
	if err != nil {
		return wire.User{}, fmt.Errorf("user %d: %w: %w", id, ErrUnavailable, err)
	}
	w := wire.UserFrom(u)
	r.users.Store(id, w)
	return w, nil
}

// CanViewPrivate reports whether channel is a private channel (a DM or
// group DM) that lists user among its recipients, as the store has it
// now: a Reader holds no private channel, so a recipient removed on
// another node is not seen through a stale copy. A guild channel, or a
// store failure, answers false; guild channels are their owner's to
// decide.
func (r *Reader) CanViewPrivate(ctx context.Context, user, channel snowflake.ID) bool {
	c, err := r.store.GetChannel(ctx, channel)
	return err == nil && c.GuildID == 0 && slices.Contains(c.Recipients, user)
}

// wireChannel converts a private channel for viewer: the other
// recipients as user objects (those the store does not have are left
// out).
func (r *Reader) wireChannel(ctx context.Context, c store.Channel, viewer snowflake.ID) wire.Channel {
	users := make([]wire.User, 0, len(c.Recipients))
	for _, id := range c.Recipients {
		if id == viewer {
			continue
		}
		if u, err := r.User(ctx, id); err == nil {
			users = append(users, u)
		}
	}
	return wire.ChannelFrom(c, users)
}
