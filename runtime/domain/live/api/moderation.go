package api

import (
	"net/http"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/filter"
)

// banRecord is the value of a ban key: who banned, when.
type banRecord struct {
	By snowflake.ID `json:"by"`
	At int64        `json:"at"`
}

func (a *API) banValue(by snowflake.ID) []byte {
	b, _ := jsonMarshal(banRecord{By: by, At: a.now().UnixMilli()})
	return b
}

// moderatorStream authenticates a moderator (or the creator) of the
// path's stream.
func (a *API) moderatorStream(r *http.Request) (live.Stream, snowflake.ID, error) {
	me, err := a.mustUser(r)
	if err != nil {
		return live.Stream{}, 0, err
	}
	s, err := a.stream(r.Context(), r)
	if err != nil {
		return live.Stream{}, 0, err
	}
	if !s.IsModerator(me) {
		return live.Stream{}, 0, errForbidden
	}
	return s, me, nil
}

func (a *API) putStreamBan(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	s, me, err := a.moderatorStream(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var body struct {
		RemoveRecent bool `json:"remove_recent"`
	}
	if err := decode(w, r, &body, true); err != nil {
		a.fail(w, r, err)
		return
	}
	uid, err := snowflake.Parse(r.PathValue("user"))
	if err != nil {
		a.fail(w, r, errUnknownUser)
		return
	}
	if uid == s.CreatorID {
		a.fail(w, r, errForbidden)
		return
	}
	if err := a.d.Board.Put(ctx, filter.StreamBanKey(s.ID, uid), a.banValue(me), registry.Persistent); err != nil {
		a.fail(w, r, err)
		return
	}
	if body.RemoveRecent {
		evs, err := a.d.Recent.Range(ctx, s.ID, -1, 0, live.RecentSize)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		var theirs []live.Comment
		for _, ev := range evs {
			if ev.Comment != nil && ev.Comment.Author.ID == uid {
				theirs = append(theirs, *ev.Comment)
			}
		}
		if err := a.retract(ctx, &s, theirs, "author banned"); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) deleteStreamBan(w http.ResponseWriter, r *http.Request) {
	s, _, err := a.moderatorStream(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	uid, err := snowflake.Parse(r.PathValue("user"))
	if err != nil {
		a.fail(w, r, errUnknownUser)
		return
	}
	if err := a.d.Board.Delete(r.Context(), filter.StreamBanKey(s.ID, uid)); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) putCreatorBan(w http.ResponseWriter, r *http.Request)    { a.creatorBan(w, r, true) }
func (a *API) deleteCreatorBan(w http.ResponseWriter, r *http.Request) { a.creatorBan(w, r, false) }

// creatorBan bans a user from every stream of the caller, present and
// future.
func (a *API) creatorBan(w http.ResponseWriter, r *http.Request, ban bool) {
	me, err := a.mustUser(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	uid, err := snowflake.Parse(r.PathValue("user"))
	if err != nil {
		a.fail(w, r, errUnknownUser)
		return
	}
	if uid == me {
		a.fail(w, r, errForbidden)
		return
	}
	key := filter.CreatorBanKey(me, uid)
	if ban {
		err = a.d.Board.Put(r.Context(), key, a.banValue(me), registry.Persistent)
	} else {
		err = a.d.Board.Delete(r.Context(), key)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
