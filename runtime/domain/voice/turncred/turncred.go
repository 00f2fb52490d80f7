// Package turncred mints time-limited TURN credentials: the shared-secret
// scheme coturn implements with use-auth-secret and static-auth-secret
// (the "TURN REST API"). The username is "<expiry unix seconds>:<user>",
// the credential base64(HMAC-SHA1(secret, username)); the TURN server
// recomputes the credential from the username and refuses it once the
// expiry passed. Each voice session gets its own, so a credential leaked
// from one browser works for no one after it expires, and no TURN user
// database has to be kept.
package turncred

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Mint returns the username and credential admitting user to the TURN
// server until expires.
func Mint(secret, user string, expires time.Time) (username, credential string) {
	username = strconv.FormatInt(expires.Unix(), 10) + ":" + user
	return username, Credential(secret, username)
}

// Credential is the credential of username under secret.
func Credential(secret, username string) string {
	m := hmac.New(sha1.New, []byte(secret))
	m.Write([]byte(username))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Expiry reads the expiry out of a minted username.
func Expiry(username string) (time.Time, error) {
	ts, _, ok := strings.Cut(username, ":")
	if !ok {
		return time.Time{}, errors.New("turncred: username has no expiry")
	}
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return time.Time{}, errors.New("turncred: username expiry is not a number")
	}
	return time.Unix(n, 0), nil
}
