package bots

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Headers of a signed interaction request.
const (
	HeaderSignature = "X-Signature-Ed25519"
	HeaderTimestamp = "X-Signature-Timestamp"
)

// DefaultMaxSkew is how far a signed request's timestamp may be from the
// verifier's clock before it is refused as stale.
const DefaultMaxSkew = 5 * time.Minute

// maxSignedBody caps the body a Verifier reads.
const maxSignedBody = 4 << 20

// signRequest sets the signature headers on r for body: Ed25519 over the
// decimal Unix timestamp followed by the raw body, as Discord signs.
func signRequest(r *http.Request, priv ed25519.PrivateKey, now time.Time, body []byte) {
	ts := strconv.FormatInt(now.Unix(), 10)
	msg := make([]byte, 0, len(ts)+len(body))
	msg = append(append(msg, ts...), body...)
	r.Header.Set(HeaderSignature, hex.EncodeToString(ed25519.Sign(priv, msg)))
	r.Header.Set(HeaderTimestamp, ts)
}

// Verifier checks signed interaction requests as a bot's endpoint must.
type Verifier struct {
	// Key is the application's verify key (its public key).
	Key ed25519.PublicKey
	// MaxSkew bounds the timestamp's distance from Now (default
	// DefaultMaxSkew); it refuses replays of old captured requests.
	MaxSkew time.Duration
	// Now returns the current time (default time.Now).
	Now func() time.Time
}

// Verify reads r's body, checks its signature headers and returns the body
// (r.Body is replaced so it can be read again). Missing, malformed, forged
// and stale signatures fail with ErrBadSignature; an endpoint answers
// them with 401.
func (v Verifier) Verify(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxSignedBody+1))
	if err != nil {
		return nil, fmt.Errorf("%w: read body: %w", ErrBadSignature, err)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if len(body) > maxSignedBody {
		return nil, fmt.Errorf("%w: body over %d bytes", ErrBadSignature, maxSignedBody)
	}
	ts := r.Header.Get(HeaderTimestamp)
	sig, err := hex.DecodeString(r.Header.Get(HeaderSignature))
	if err != nil || len(sig) != ed25519.SignatureSize {
		return nil, fmt.Errorf("%w: malformed %s", ErrBadSignature, HeaderSignature)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%w: malformed %s", ErrBadSignature, HeaderTimestamp)
	}
	if len(v.Key) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: verify key has %d bytes", ErrBadSignature, len(v.Key))
	}
	msg := make([]byte, 0, len(ts)+len(body))
	msg = append(append(msg, ts...), body...)
	if !ed25519.Verify(v.Key, msg, sig) {
		return nil, fmt.Errorf("%w: signature does not verify", ErrBadSignature)
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	skew := v.MaxSkew
	if skew <= 0 {
		skew = DefaultMaxSkew
	}
	if d := now().Sub(time.Unix(sec, 0)); d > skew || d < -skew {
		return nil, fmt.Errorf("%w: timestamp %s is %v away from now", ErrBadSignature, ts, d.Round(time.Second))
	}
	return body, nil
}

// VerifyRequest checks r against the hex-decoded verify key pub with the
// wall clock and DefaultMaxSkew; see Verifier.Verify.
func VerifyRequest(pub ed25519.PublicKey, r *http.Request) ([]byte, error) {
	return Verifier{Key: pub}.Verify(r)
}
