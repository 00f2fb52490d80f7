package memberlist

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// client mirrors what a Discord client holds for one list: the rows at
// the indexes of its ranges, updated only by the operations it receives.
type client struct {
	ranges []Range
	rows   map[int]string
}

func newClient() *client { return &client{rows: make(map[int]string)} }

func (c *client) covers(i int) bool {
	for _, r := range c.ranges {
		if r[0] <= i && i <= r[1] {
			return true
		}
	}
	return false
}

// apply runs ops as a client does: INSERT and DELETE splice the row array
// (rows after the index move by one), then rows outside the ranges are
// forgotten.
func (c *client) apply(t *testing.T, ops []Op) {
	t.Helper()
	for _, o := range ops {
		next := make(map[int]string, len(c.rows))
		switch o.Op {
		case OpSync:
			maps.Copy(next, c.rows)
			for i := o.Range[0]; i <= o.Range[1]; i++ {
				delete(next, i)
			}
			for k, it := range o.Items {
				next[o.Range[0]+k] = string(it)
			}
		case OpInvalidate:
			maps.Copy(next, c.rows)
			for i := o.Range[0]; i <= o.Range[1]; i++ {
				delete(next, i)
			}
		case OpInsert:
			for i, r := range c.rows {
				if i >= o.Index {
					i++
				}
				next[i] = r
			}
			next[o.Index] = string(o.Item)
		case OpDelete:
			for i, r := range c.rows {
				switch {
				case i == o.Index:
				case i > o.Index:
					next[i-1] = r
				default:
					next[i] = r
				}
			}
		case OpUpdate:
			maps.Copy(next, c.rows)
			next[o.Index] = string(o.Item)
		default:
			t.Fatalf("unknown op %q", o.Op)
		}
		for i := range next {
			if !c.covers(i) {
				delete(next, i)
			}
		}
		c.rows = next
	}
}

// check compares the client's rows with the list's.
func (c *client) check(t *testing.T, l *List, what string) {
	t.Helper()
	n := l.Len()
	for _, r := range c.ranges {
		for i := r[0]; i <= r[1]; i++ {
			got, has := c.rows[i]
			if i >= n {
				if has {
					t.Fatalf("%s: client holds row %d beyond the list's %d rows: %s", what, i, n, got)
				}
				continue
			}
			want := string(l.Rows(i, i)[0])
			if headerID(got) != headerID(want) {
				t.Fatalf("%s: client row %d = %q, want %q", what, i, got, want)
			}
		}
	}
}

// deliver applies a dispatch to the clients, checking every payload
// parses and that no session appears twice.
func deliver(t *testing.T, d Dispatch, clients map[event.SessionID]*client) map[event.SessionID]int {
	t.Helper()
	got := make(map[event.SessionID]int)
	for _, v := range d.Variants {
		var p struct {
			GuildID snowflake.ID `json:"guild_id"`
			ID      string       `json:"id"`
			Ops     []struct {
				Op string `json:"op"`
			} `json:"ops"`
			Groups []GroupCount `json:"groups"`
		}
		if err := json.Unmarshal(v.Payload, &p); err != nil {
			t.Fatalf("payload %s: %v", v.Payload, err)
		}
		if len(p.Ops) != len(v.Ops) {
			t.Fatalf("payload has %d ops, variant %d", len(p.Ops), len(v.Ops))
		}
		for _, s := range v.Sessions {
			got[s.ID]++
			if got[s.ID] > 1 {
				t.Fatalf("session %s twice in one dispatch", s.ID)
			}
			c := clients[s.ID]
			if c == nil {
				t.Fatalf("dispatch to unknown session %s", s.ID)
			}
			c.apply(t, v.Ops)
		}
	}
	return got
}

// naiveRows renders the expected list with a plain sort, independently of
// the tree: hoisted groups by position (highest first), online, offline.
func naiveRows(members map[snowflake.ID]Member, hoisted []Role, showOffline bool) []string {
	roles := slices.Clone(hoisted)
	slices.SortFunc(roles, func(a, b Role) int {
		if a.Position != b.Position {
			return b.Position - a.Position
		}
		return cmp.Compare(a.ID, b.ID)
	})
	groupIDs := []string{}
	for _, r := range roles {
		groupIDs = append(groupIDs, r.ID.String())
	}
	groupIDs = append(groupIDs, GroupOnline, GroupOffline)
	byGroup := make([][]Member, len(groupIDs))
	for _, m := range members {
		g := len(groupIDs) - 2
		if m.Status == StatusOffline {
			if !showOffline {
				continue
			}
			g = len(groupIDs) - 1
		} else {
			for i, r := range roles {
				if slices.Contains(m.Roles, r.ID) {
					g = i
					break
				}
			}
		}
		byGroup[g] = append(byGroup[g], m)
	}
	var out []string
	for g, ms := range byGroup {
		if len(ms) == 0 {
			continue
		}
		slices.SortFunc(ms, func(a, b Member) int {
			if c := strings.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)); c != 0 {
				return c
			}
			return cmp.Compare(a.UserID, b.UserID)
		})
		out = append(out, fmt.Sprintf(`{"group":{"id":%q,"count":%d}}`, groupIDs[g], len(ms)))
		for _, m := range ms {
			out = append(out, `{"member":`+string(m.Data)+`}`)
		}
	}
	return out
}

func listRows(l *List) []string {
	var out []string
	for _, r := range l.Rows(0, l.Len()-1) {
		out = append(out, string(r))
	}
	return out
}

func member(id snowflake.ID, name, status string, roles ...snowflake.ID) Member {
	return Member{
		UserID: id,
		Name:   name,
		Roles:  roles,
		Status: status,
		Data:   json.RawMessage(fmt.Sprintf(`{"user":{"id":"%d"},"name":%q,"status":%q,"roles":%d}`, id, name, status, len(roles))),
	}
}

func session(id string, user snowflake.ID) event.Session {
	return event.Session{ID: event.SessionID(id), UserID: user, Node: "node-" + id[len(id)-1:]}
}

// headerID reduces a group header row to its id: header counts are a
// snapshot, kept current by each payload's `groups`, not by row updates.
// Member rows are returned unchanged.
func headerID(row string) string {
	if head, _, ok := strings.Cut(row, `,"count":`); ok && strings.HasPrefix(row, `{"group":`) {
		return head
	}
	return row
}
