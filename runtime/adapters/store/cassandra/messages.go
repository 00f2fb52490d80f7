package cassandra

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/clock"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Every column is always written with a non-null value — empty lists are
// empty frozen lists, a never-edited message has edited_at = the Unix
// epoch — so a send writes no cell tombstones and an edit (a full
// overwrite) clears whatever it no longer carries.

const messageCols = `message_id, guild_id, author_id, content, type, flags, tts, pinned, edited_at,
	reference_id, mention_everyone, mentions, mention_roles, attachments, nonce, embeds, components,
	webhook_id, webhook_name, webhook_avatar`

// attachmentUDT is the attachment user-defined type.
type attachmentUDT struct {
	ID          int64  `cql:"id"`
	Filename    string `cql:"filename"`
	Size        int    `cql:"size"`
	URL         string `cql:"url"`
	ContentType string `cql:"content_type"`
}

var unedited = time.Unix(0, 0).UTC()

func ids64(ids []snowflake.ID) []int64 {
	out := make([]int64, len(ids))
	for i, id := range ids {
		out[i] = int64(id)
	}
	return out
}

func idsFrom64(v []int64) []snowflake.ID {
	if len(v) == 0 {
		return nil
	}
	out := make([]snowflake.ID, len(v))
	for i, id := range v {
		out[i] = snowflake.ID(id)
	}
	return out
}

// messageRow is the scan target of one messages row.
type messageRow struct {
	id, guild, author, ref int64
	content, nonce         string
	embeds, components     *string // null in rows written before migration 3
	webhookID              *int64  // null in rows written before migration 5
	webhookName, webhookAv *string
	typ, flags             int
	tts, pinned, everyone  bool
	edited                 time.Time
	mentions, roles        []int64
	attachments            []attachmentUDT
}

func (r *messageRow) dest() []any {
	return []any{&r.id, &r.guild, &r.author, &r.content, &r.typ, &r.flags, &r.tts, &r.pinned, &r.edited,
		&r.ref, &r.everyone, &r.mentions, &r.roles, &r.attachments, &r.nonce, &r.embeds, &r.components,
		&r.webhookID, &r.webhookName, &r.webhookAv}
}

func (r *messageRow) message(ch snowflake.ID) store.Message {
	m := store.Message{
		ID: snowflake.ID(r.id), ChannelID: ch, GuildID: snowflake.ID(r.guild), AuthorID: snowflake.ID(r.author),
		Content: r.content, Type: r.typ, Flags: r.flags, TTS: r.tts, Pinned: r.pinned,
		ReferenceID: snowflake.ID(r.ref), MentionEveryone: r.everyone,
		Mentions: idsFrom64(r.mentions), MentionRoles: idsFrom64(r.roles), Nonce: r.nonce,
	}
	if r.embeds != nil {
		m.Embeds = *r.embeds
	}
	if r.components != nil {
		m.Components = *r.components
	}
	if r.webhookID != nil {
		m.WebhookID = snowflake.ID(*r.webhookID)
	}
	if r.webhookName != nil {
		m.WebhookName = *r.webhookName
	}
	if r.webhookAv != nil {
		m.WebhookAvatar = *r.webhookAv
	}
	if !r.edited.IsZero() && !r.edited.Equal(unedited) {
		m.EditedAt = r.edited.UTC()
	}
	for _, a := range r.attachments {
		m.Attachments = append(m.Attachments, store.Attachment{ID: snowflake.ID(a.ID), Filename: a.Filename,
			Size: a.Size, URL: a.URL, ContentType: a.ContentType})
	}
	return m
}

// PutMessage writes (or overwrites) a message, then records its bucket as
// non-empty. The bucket entry is written after the row is acknowledged,
// with a fresh timestamp, so a concurrent "bucket became empty" removal
// (which is timestamped before it looks) can never shadow it.
func (s *Store) PutMessage(ctx context.Context, m store.Message) error {
	b, err := s.bucketOf(ctx, m.ChannelID, m.ID)
	if err != nil {
		return err
	}
	stmt, args, size := messageInsert(m, b)
	err = s.session.Query(stmt, args...).Idempotent(true).ExecContext(ctx)
	if err != nil {
		return wrapErr("put message", err)
	}
	err = s.session.Query(bucketInsert, int64(m.ChannelID), b).Idempotent(true).ExecContext(ctx)
	if err != nil {
		return wrapErr("put message: record bucket", err)
	}
	s.observeWrite(ctx, m.ChannelID, m.ID, size)
	return nil
}

// bucketInsert records a bucket in a channel's bucket list.
const bucketInsert = `INSERT INTO channel_buckets (channel_id, bucket) VALUES (?, ?)`

// messageInsert is the INSERT of m into bucket b, with the row's
// approximate size for the write metrics.
func messageInsert(m store.Message, b int64) (string, []any, int) {
	edited := unedited
	if !m.EditedAt.IsZero() {
		edited = m.EditedAt
	}
	atts := make([]attachmentUDT, len(m.Attachments))
	size := len(m.Content) + len(m.Nonce) + len(m.Embeds) + len(m.Components) + 64
	for i, a := range m.Attachments {
		atts[i] = attachmentUDT{ID: int64(a.ID), Filename: a.Filename, Size: a.Size, URL: a.URL, ContentType: a.ContentType}
		size += len(a.Filename) + len(a.URL) + len(a.ContentType) + 16
	}
	size += 8 * (len(m.Mentions) + len(m.MentionRoles))
	return `INSERT INTO messages (channel_id, bucket, ` + messageCols + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		[]any{int64(m.ChannelID), b, int64(m.ID), int64(m.GuildID), int64(m.AuthorID), m.Content, m.Type, m.Flags,
			m.TTS, m.Pinned, edited, int64(m.ReferenceID), m.MentionEveryone,
			ids64(m.Mentions), ids64(m.MentionRoles), atts, m.Nonce, m.Embeds, m.Components,
			int64(m.WebhookID), m.WebhookName, m.WebhookAvatar}, size
}

// GetMessage reads one message.
func (s *Store) GetMessage(ctx context.Context, ch, id snowflake.ID) (store.Message, error) {
	b, err := s.bucketOf(ctx, ch, id)
	if err != nil {
		return store.Message{}, err
	}
	var r messageRow
	err = s.session.Query(`SELECT `+messageCols+` FROM messages WHERE channel_id = ? AND bucket = ? AND message_id = ?`,
		int64(ch), b, int64(id)).ScanContext(ctx, r.dest()...)
	if err != nil {
		return store.Message{}, wrapErr(fmt.Sprintf("get message %v/%v", ch, id), err)
	}
	return r.message(ch), nil
}

// DeleteMessage deletes one message (a row tombstone); an unknown message
// is store.ErrNotFound. When the bucket becomes empty it leaves the
// channel's bucket list.
func (s *Store) DeleteMessage(ctx context.Context, ch, id snowflake.ID) error {
	b, err := s.bucketOf(ctx, ch, id)
	if err != nil {
		return err
	}
	var got int64
	err = s.session.Query(`SELECT message_id FROM messages WHERE channel_id = ? AND bucket = ? AND message_id = ?`,
		int64(ch), b, int64(id)).ScanContext(ctx, &got)
	if err != nil {
		return wrapErr(fmt.Sprintf("delete message %v/%v", ch, id), err)
	}
	err = s.session.Query(`DELETE FROM messages WHERE channel_id = ? AND bucket = ? AND message_id = ?`,
		int64(ch), b, int64(id)).Idempotent(true).ExecContext(ctx)
	if err != nil {
		return wrapErr("delete message", err)
	}
	if err := s.dropMessageExtras(ctx, ch, []snowflake.ID{id}); err != nil {
		return err
	}
	return s.pruneBucket(ctx, ch, b)
}

// pruneBucket removes bucket b from ch's bucket list when it holds no
// message. The removal is timestamped before the emptiness check, so a
// message written after the check (whose bucket entry is timestamped after
// its row was acknowledged) keeps its entry.
func (s *Store) pruneBucket(ctx context.Context, ch snowflake.ID, b int64) error {
	t0 := clock.Now().UnixMicro() // a write timestamp, compared with other nodes'
	var any int64
	err := s.session.Query(`SELECT message_id FROM messages WHERE channel_id = ? AND bucket = ? LIMIT 1`,
		int64(ch), b).ScanContext(ctx, &any)
	if err == nil {
		return nil
	}
	if !errors.Is(err, gocql.ErrNotFound) {
		return wrapErr("check bucket", err)
	}
	err = s.session.Query(`DELETE FROM channel_buckets USING TIMESTAMP ? WHERE channel_id = ? AND bucket = ?`,
		t0, int64(ch), b).Idempotent(true).ExecContext(ctx)
	return wrapErr("drop empty bucket", err)
}

// DeleteMessages deletes many messages of one channel. Per bucket: when
// the ids cover every message the bucket holds, one range tombstone from
// its oldest to its newest message replaces the per-row tombstones and the
// bucket leaves the list (the whole bucket is dropped); otherwise the rows
// are deleted in one unlogged single-partition batch and the bucket is
// pruned if that emptied it. Unknown ids are ignored.
func (s *Store) DeleteMessages(ctx context.Context, ch snowflake.ID, ids []snowflake.ID) error {
	if len(ids) == 0 {
		return nil
	}
	ws, err := s.channelWidths(ctx, ch)
	if err != nil {
		return err
	}
	byBucket := map[int64]map[int64]bool{}
	for _, id := range ids {
		b := ws.bucket(id, s.cfg.DefaultBucketWidth)
		if byBucket[b] == nil {
			byBucket[b] = map[int64]bool{}
		}
		byBucket[b][int64(id)] = true
	}
	for b, set := range byBucket {
		if err := s.deleteInBucket(ctx, ch, b, set); err != nil {
			return err
		}
	}
	if err := s.dropMessageExtras(ctx, ch, ids); err != nil {
		return err
	}
	return nil
}

func (s *Store) deleteInBucket(ctx context.Context, ch snowflake.ID, b int64, set map[int64]bool) error {
	t0 := clock.Now().UnixMicro() // a write timestamp, compared with other nodes'
	iter := s.session.Query(`SELECT message_id FROM messages WHERE channel_id = ? AND bucket = ? LIMIT ?`,
		int64(ch), b, len(set)+1).PageSize(len(set) + 1).IterContext(ctx)
	var present []int64
	var id int64
	for iter.Scan(&id) {
		present = append(present, id)
	}
	if err := iter.Close(); err != nil {
		return wrapErr("bulk delete: read bucket", err)
	}
	if len(present) == 0 {
		return s.pruneBucket(ctx, ch, b)
	}
	covered := len(present) <= len(set)
	for _, id := range present {
		covered = covered && set[id]
	}
	if covered {
		// present is newest first; the range covers the whole bucket as
		// it was at t0. Rows written later (new ids, or timestamps after
		// t0) survive it.
		lo, hi := present[len(present)-1], present[0]
		err := s.session.Query(`DELETE FROM messages USING TIMESTAMP ? WHERE channel_id = ? AND bucket = ?
			AND message_id >= ? AND message_id <= ?`, t0, int64(ch), b, lo, hi).Idempotent(true).ExecContext(ctx)
		if err != nil {
			return wrapErr("bulk delete: drop bucket", err)
		}
		return s.pruneBucket(ctx, ch, b)
	}
	batch := s.session.Batch(gocql.UnloggedBatch)
	for _, id := range present {
		if set[id] {
			batch.Query(`DELETE FROM messages WHERE channel_id = ? AND bucket = ? AND message_id = ?`, int64(ch), b, id)
		}
	}
	// Ids of the set older than what was read are deleted too (they may
	// lie beyond the LIMIT).
	oldest := present[len(present)-1]
	for id := range set {
		if id < oldest {
			batch.Query(`DELETE FROM messages WHERE channel_id = ? AND bucket = ? AND message_id = ?`, int64(ch), b, id)
		}
	}
	if batch.Size() > 0 {
		if err := batch.ExecContext(ctx); err != nil {
			return wrapErr("bulk delete: delete rows", err)
		}
	}
	return s.pruneBucket(ctx, ch, b)
}

// Buckets lists ch's non-empty buckets, newest first.
func (s *Store) Buckets(ctx context.Context, ch snowflake.ID) ([]int64, error) {
	iter := s.session.Query(`SELECT bucket FROM channel_buckets WHERE channel_id = ?`, int64(ch)).IterContext(ctx)
	var out []int64
	var b int64
	for iter.Scan(&b) {
		out = append(out, b)
	}
	return out, wrapErr("list buckets", iter.Close())
}

// clampLimit applies HistoryQuery's limit rules: 0 is 50, then 1..100.
func clampLimit(n int) int {
	switch {
	case n == 0:
		return 50
	case n < 1:
		return 1
	case n > 100:
		return 100
	}
	return n
}

// ListMessages returns a page of history, newest first, walking only the
// channel's non-empty buckets.
func (s *Store) ListMessages(ctx context.Context, ch snowflake.ID, q store.HistoryQuery) ([]store.Message, error) {
	limit := clampLimit(q.Limit)
	switch {
	case q.Around != 0:
		return s.around(ctx, ch, q.Around, limit)
	case q.Before != 0:
		return s.older(ctx, ch, q.Before, limit)
	case q.After != 0:
		return s.newer(ctx, ch, q.After, limit)
	}
	return s.older(ctx, ch, 0, limit)
}

// older returns up to limit messages with ids < before (all when before
// is 0), newest first.
func (s *Store) older(ctx context.Context, ch, before snowflake.ID, limit int) ([]store.Message, error) {
	bq := s.session.Query(`SELECT bucket FROM channel_buckets WHERE channel_id = ?`, int64(ch))
	if before != 0 {
		top, err := s.bucketOf(ctx, ch, before)
		if err != nil {
			return nil, err
		}
		bq = s.session.Query(`SELECT bucket FROM channel_buckets WHERE channel_id = ? AND bucket <= ?`, int64(ch), top)
	}
	var pre *prefetch
	if before == 0 {
		// The newest page (a channel being opened) usually lies in the
		// bucket of the current time: read it while the bucket list is
		// read, saving a round trip when the guess is right.
		cur, err := s.bucketOf(ctx, ch, snowflake.FromTime(time.Now()))
		if err != nil {
			return nil, err
		}
		pre = s.prefetch(ctx, ch, cur, limit, s.session.Query(`SELECT `+messageCols+
			` FROM messages WHERE channel_id = ? AND bucket = ? LIMIT ?`, int64(ch), cur, limit))
	}
	return s.walk(ctx, ch, bq, limit, pre, func(b int64, n int) *gocql.Query {
		if before == 0 {
			return s.session.Query(`SELECT `+messageCols+` FROM messages WHERE channel_id = ? AND bucket = ? LIMIT ?`,
				int64(ch), b, n)
		}
		return s.session.Query(`SELECT `+messageCols+` FROM messages WHERE channel_id = ? AND bucket = ?
			AND message_id < ? LIMIT ?`, int64(ch), b, int64(before), n)
	})
}

// newer returns up to limit messages with ids > after, the ones right
// after it, newest first.
func (s *Store) newer(ctx context.Context, ch, after snowflake.ID, limit int) ([]store.Message, error) {
	low, err := s.bucketOf(ctx, ch, after)
	if err != nil {
		return nil, err
	}
	bq := s.session.Query(`SELECT bucket FROM channel_buckets WHERE channel_id = ? AND bucket >= ?
		ORDER BY bucket ASC`, int64(ch), low)
	out, err := s.walk(ctx, ch, bq, limit, nil, func(b int64, n int) *gocql.Query {
		return s.session.Query(`SELECT `+messageCols+` FROM messages WHERE channel_id = ? AND bucket = ?
			AND message_id > ? ORDER BY message_id ASC LIMIT ?`, int64(ch), b, int64(after), n)
	})
	slices.Reverse(out)
	return out, err
}

// walk reads buckets from bq in its order and, in each, rows from
// rows(bucket, still needed) until limit messages are collected.
//
// Sparse history spreads a page over many buckets, and one query per
// bucket in turn would cost a round trip each. So the walk fans out: it
// reads one bucket, and while pages come up short it reads the next 2, 4,
// 8 then 16 buckets concurrently (each with the remaining limit), keeping
// the rows in bucket order. A page across 34 sparse buckets takes 6 rounds
// instead of 34; at most 16 × limit rows are read beyond what is needed.
//
// pre, when not nil, holds rows of one bucket already being read; walk
// uses them instead of querying that bucket again.
func (s *Store) walk(ctx context.Context, ch snowflake.ID, bq *gocql.Query, limit int, pre *prefetch,
	rows func(b int64, n int) *gocql.Query) ([]store.Message, error) {
	var out []store.Message
	biter := bq.PageSize(64).IterContext(ctx)
	fan := 1
	var buckets []int64
	var b int64
	for len(out) < limit {
		buckets = buckets[:0]
		for len(buckets) < fan && biter.Scan(&b) {
			buckets = append(buckets, b)
		}
		if len(buckets) == 0 {
			break
		}
		need := limit - len(out)
		pages := make([][]store.Message, len(buckets))
		errs := make([]error, len(buckets))
		var wg sync.WaitGroup
		for i, b := range buckets {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if pre != nil && pre.bucket == b && pre.limit >= need {
					<-pre.done
					pages[i], errs[i] = pre.rows, pre.err
					return
				}
				pages[i], errs[i] = s.readRows(ctx, ch, rows(b, need), need)
			}()
		}
		wg.Wait()
		for i := range buckets {
			if errs[i] != nil {
				biter.Close()
				return nil, errs[i]
			}
			out = append(out, pages[i][:min(len(pages[i]), limit-len(out))]...)
		}
		fan = min(2*fan, 16)
	}
	if err := biter.Close(); err != nil {
		return nil, wrapErr("list buckets", err)
	}
	return out, nil
}

// prefetch is one bucket's rows read speculatively.
type prefetch struct {
	bucket int64
	limit  int
	done   chan struct{}
	rows   []store.Message
	err    error
}

// prefetch starts reading q's rows (bucket b, at most limit) in the
// background.
func (s *Store) prefetch(ctx context.Context, ch snowflake.ID, b int64, limit int, q *gocql.Query) *prefetch {
	p := &prefetch{bucket: b, limit: limit, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.rows, p.err = s.readRows(ctx, ch, q, limit)
	}()
	return p
}

// readRows runs a messages query and decodes its rows.
func (s *Store) readRows(ctx context.Context, ch snowflake.ID, q *gocql.Query, n int) ([]store.Message, error) {
	iter := q.PageSize(n).IterContext(ctx)
	var out []store.Message
	var r messageRow
	for iter.Scan(r.dest()...) {
		out = append(out, r.message(ch))
		r = messageRow{}
	}
	if err := iter.Close(); err != nil {
		return nil, wrapErr("list messages", err)
	}
	return out, nil
}

// around returns the message at id when it exists and, of the remaining
// slots, half (rounded down) newer and the rest older; a side short of
// messages gives its slots to the other.
func (s *Store) around(ctx context.Context, ch, id snowflake.ID, limit int) ([]store.Message, error) {
	// The message itself and both sides are read concurrently; each side
	// reads up to limit, enough whether or not the message exists.
	var self store.Message
	var newer, older []store.Message
	var selfErr, newErr, oldErr error
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); self, selfErr = s.GetMessage(ctx, ch, id) }()
	go func() { defer wg.Done(); newer, newErr = s.newer(ctx, ch, id, limit) }()
	go func() { defer wg.Done(); older, oldErr = s.older(ctx, ch, id, limit) }()
	wg.Wait()
	exists := selfErr == nil
	if selfErr != nil && !isNotFound(selfErr) {
		return nil, selfErr
	}
	if newErr != nil {
		return nil, newErr
	}
	if oldErr != nil {
		return nil, oldErr
	}
	rest := limit
	if exists {
		rest--
	}
	nNew := rest / 2
	nOld := rest - nNew
	if len(newer) < nNew {
		nOld += nNew - len(newer)
		nNew = len(newer)
	}
	if len(older) < nOld {
		nNew = min(len(newer), nNew+nOld-len(older))
		nOld = len(older)
	}
	out := make([]store.Message, 0, limit)
	out = append(out, newer[len(newer)-nNew:]...) // the nNew oldest of newer, newest first
	if exists {
		out = append(out, self)
	}
	return append(out, older[:nOld]...), nil
}
