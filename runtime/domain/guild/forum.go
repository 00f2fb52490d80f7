package guild

import (
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/permissions"
)

// Forum channels (type 15) hold posts: public threads each opened with a
// starter message that has the thread's id. A post is created with
// SEND_MESSAGES in the forum (not CREATE_PUBLIC_THREADS), nobody sends in
// the forum itself, and a post carries at most maxAppliedTags of the
// forum's available tags; moderated tags are for MANAGE_THREADS. Who sees
// a post is decided like any thread's, from the forum's permissions.

// Discord's forum limits.
const (
	maxForumTags    = 20
	maxTagName      = 20
	maxAppliedTags  = 5
	forumPostNeeded = permissions.SendMessages
)

// validateForumTags checks a forum's available tags: at most 20, names of
// 1 to 20 characters, unique ids.
func validateForumTags(tags []store.ForumTag) error {
	if len(tags) > maxForumTags {
		return fmt.Errorf("%d available tags: %w", len(tags), ErrInvalid)
	}
	seen := make(map[snowflake.ID]bool, len(tags))
	for _, t := range tags {
		if n := utf8.RuneCountInString(t.Name); n < 1 || n > maxTagName {
			return fmt.Errorf("tag name length %d: %w", n, ErrInvalid)
		}
		if t.ID == 0 || seen[t.ID] {
			return fmt.Errorf("tag id %d: %w", t.ID, ErrInvalid)
		}
		seen[t.ID] = true
	}
	return nil
}

// checkAppliedTags checks tags for a post of forum: at most 5, each one of
// the forum's, moderated ones only with MANAGE_THREADS (held in p).
func checkAppliedTags(forum store.Channel, tags []snowflake.ID, p permissions.Bits) error {
	if len(tags) > maxAppliedTags {
		return fmt.Errorf("%d applied tags: %w", len(tags), ErrInvalid)
	}
	for i, id := range tags {
		if slices.Contains(tags[:i], id) {
			return fmt.Errorf("tag %d applied twice: %w", id, ErrInvalid)
		}
		j := slices.IndexFunc(forum.AvailableTags, func(t store.ForumTag) bool { return t.ID == id })
		if j < 0 {
			return fmt.Errorf("tag %d is not one of forum %d's: %w", id, forum.ID, ErrInvalid)
		}
		if forum.AvailableTags[j].Moderated && !p.Has(permissions.ManageThreads) {
			return fmt.Errorf("moderated tag %d: %w", id, ErrMissingPermissions)
		}
	}
	return nil
}
