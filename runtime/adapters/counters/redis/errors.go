package redis

import "errors"

// ErrAuth means the server refused the credentials: none were given to a
// server that requires them (NOAUTH), or the user name or password is
// wrong (WRONGPASS). Retrying does not help; fix --redis-password
// (CONCORD_REDIS_PASSWORD) or the URL's user:password.
var ErrAuth = errors.New("redis: authentication failed")
