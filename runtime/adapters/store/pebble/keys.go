package pebble

import (
	"encoding/binary"
	"strings"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Key space. Every key starts with a one-byte table tag; ids are 8-byte
// big-endian so byte order is numeric order; "desc" fields are stored as
// their bitwise complement so that forward iteration yields newest first.
//
//	'm' channel bucket^ id^           -> message (codec.go)
//	'b' channel bucket^               -> (empty) non-empty bucket index
//	'g' guild                         -> guild
//	'c' channel                       -> channel (global, GetChannel)
//	'C' guild channel                 -> channel (copy, for LoadGuild)
//	'r' guild role                    -> role
//	'M' guild user                    -> member
//	'u' user guild                    -> (empty) user -> guilds index
//	'p' recipient channel             -> (empty) recipient -> private channels
//	'i' code                          -> invite
//	'I' guild code                    -> (empty) guild -> invites index
//	'U' user                          -> user
//	'n' lower(username)               -> user id (8 bytes), unique names
//	'o' shard(1) id(8)                -> outbox entry (outbox.go)
//
// A message's partition is (channel, bucket) and rows cluster by id
// descending inside it, the same layout the Cassandra adapter uses. The
// bucket itself is also stored complemented, so one channel's rows are, in
// key order, newest bucket first and newest message first.
const (
	tagMessage      = 'm'
	tagBucket       = 'b'
	tagGuild        = 'g'
	tagChannel      = 'c'
	tagGuildChannel = 'C'
	tagRole         = 'r'
	tagMember       = 'M'
	tagUserGuild    = 'u'
	tagPrivate      = 'p'
	tagInvite       = 'i'
	tagGuildInvite  = 'I'
	tagUser         = 'U'
	tagUsername     = 'n'
	// moderation.go
	tagReaction = 'x'
	tagPin      = 'P'
	tagBan      = 'B'
	tagAudit    = 'A'
	// webhooks.go
	tagWebhook      = 'w'
	tagGuildWebhook = 'W'
	tagThreadMember = 'T'
	// outbox.go
	tagOutbox = 'o'
)

func appendU64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

func key1(tag byte, a snowflake.ID) []byte {
	return appendU64(append(make([]byte, 0, 9), tag), uint64(a))
}

func key2(tag byte, a, b snowflake.ID) []byte {
	k := appendU64(append(make([]byte, 0, 17), tag), uint64(a))
	return appendU64(k, uint64(b))
}

// bucketPrefix is the key prefix of one message partition.
func bucketPrefix(ch snowflake.ID, bucket int64) []byte {
	k := appendU64(append(make([]byte, 0, 25), tagMessage), uint64(ch))
	return appendU64(k, ^uint64(bucket))
}

func messageKey(ch snowflake.ID, bucket int64, id snowflake.ID) []byte {
	return appendU64(bucketPrefix(ch, bucket), ^uint64(id))
}

// messageKeyID decodes the id of a message key.
func messageKeyID(k []byte) snowflake.ID {
	return snowflake.ID(^binary.BigEndian.Uint64(k[17:25]))
}

func bucketIndexKey(ch snowflake.ID, bucket int64) []byte {
	k := appendU64(append(make([]byte, 0, 17), tagBucket), uint64(ch))
	return appendU64(k, ^uint64(bucket))
}

func bucketIndexBucket(k []byte) int64 { return int64(^binary.BigEndian.Uint64(k[9:17])) }

func inviteKey(code string) []byte { return append([]byte{tagInvite}, code...) }

func guildInviteKey(g snowflake.ID, code string) []byte {
	return append(key1(tagGuildInvite, g), code...)
}

// usernameKey folds case so that names are unique case-insensitively.
func usernameKey(name string) []byte {
	return append([]byte{tagUsername}, strings.ToLower(name)...)
}

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil // no upper bound
}
