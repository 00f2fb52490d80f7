// Package rtpsize is the transport encryption of Discord's voice UDP: the
// "_rtpsize" AEAD modes, where the RTP header up to and including the
// 4-byte extension header (not its body) is sent in the clear as additional
// data, followed by the ciphertext of the rest, the 16-byte tag and a
// 4-byte big-endian nonce counter.
//
// The SFU opens a speaker's packet with the speaker's key and seals the
// same header and plaintext with each listener's key, so the Opus payload
// reaches listeners byte-identical without ever being decoded.
package rtpsize

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/crypto/chacha20poly1305"
)

// Encryption modes, as Discord names them in Ready and Select Protocol.
const (
	ModeXChaCha20 = "aead_xchacha20_poly1305_rtpsize"
	ModeAES256GCM = "aead_aes256_gcm_rtpsize"
)

// Modes lists the supported modes in the server's order of preference.
var Modes = []string{ModeAES256GCM, ModeXChaCha20}

// KeySize is the secret key length of every mode.
const KeySize = 32

// TagSize is the AEAD tag length of every mode.
const TagSize = 16

// NonceSize is the counter sent after the tag.
const NonceSize = 4

// Overhead is what sealing adds to a plaintext.
const Overhead = TagSize + NonceSize

// MaxPacket bounds a voice datagram; anything larger is dropped unread.
const MaxPacket = 1500

// Errors from header parsing and Open.
var (
	ErrShort       = errors.New("rtpsize: packet too short")
	ErrNotRTP      = errors.New("rtpsize: not an RTP v2 packet")
	ErrAuth        = errors.New("rtpsize: authentication failed")
	ErrUnknownMode = errors.New("rtpsize: unknown encryption mode")
)

// Supported reports whether mode is one this package implements.
func Supported(mode string) bool { return mode == ModeXChaCha20 || mode == ModeAES256GCM }

// HeaderLen returns the length of pkt's unencrypted part: 12 bytes, 4 per
// CSRC, and the 4-byte extension header when the X bit is set.
func HeaderLen(pkt []byte) (int, error) {
	if len(pkt) < 12 {
		return 0, ErrShort
	}
	if pkt[0]>>6 != 2 {
		return 0, ErrNotRTP
	}
	n := 12 + 4*int(pkt[0]&0x0f)
	if pkt[0]&0x10 != 0 {
		n += 4
	}
	if len(pkt) < n+Overhead {
		return 0, ErrShort
	}
	return n, nil
}

// Cipher seals and opens packets with one session's key.
type Cipher struct {
	mode string
	aead cipher.AEAD
}

// New returns a Cipher for mode and key.
func New(mode string, key []byte) (*Cipher, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("rtpsize: key is %d bytes, want %d", len(key), KeySize)
	}
	var (
		a   cipher.AEAD
		err error
	)
	switch mode {
	case ModeXChaCha20:
		a, err = chacha20poly1305.NewX(key)
	case ModeAES256GCM:
		var b cipher.Block
		if b, err = aes.NewCipher(key); err == nil {
			a, err = cipher.NewGCM(b)
		}
	default:
		return nil, fmt.Errorf("%w: %q", ErrUnknownMode, mode)
	}
	if err != nil {
		return nil, fmt.Errorf("rtpsize: %s: %w", mode, err)
	}
	return &Cipher{mode: mode, aead: a}, nil
}

// Mode returns the cipher's mode.
func (c *Cipher) Mode() string { return c.mode }

// Open authenticates and decrypts pkt, appending the plaintext (extension
// body and payload) to dst. It returns the plaintext, the header length and
// the packet's nonce counter.
func (c *Cipher) Open(dst, pkt []byte) (plain []byte, headerLen int, counter uint32, err error) {
	if len(pkt) > MaxPacket {
		return nil, 0, 0, ErrShort
	}
	h, err := HeaderLen(pkt)
	if err != nil {
		return nil, 0, 0, err
	}
	ctr := pkt[len(pkt)-NonceSize:]
	var nonce [chacha20poly1305.NonceSizeX]byte
	copy(nonce[:], ctr)
	plain, err = c.aead.Open(dst, nonce[:c.aead.NonceSize()], pkt[h:len(pkt)-NonceSize], pkt[:h])
	if err != nil {
		return nil, 0, 0, ErrAuth
	}
	return plain, h, binary.BigEndian.Uint32(ctr), nil
}

// Seal appends to dst the packet header, the sealed plaintext and counter
// as the nonce. header must be the unencrypted part (see HeaderLen).
func (c *Cipher) Seal(dst, header, plain []byte, counter uint32) []byte {
	var nonce [chacha20poly1305.NonceSizeX]byte
	binary.BigEndian.PutUint32(nonce[:], counter)
	dst = append(dst, header...)
	dst = c.aead.Seal(dst, nonce[:c.aead.NonceSize()], plain, header)
	return binary.BigEndian.AppendUint32(dst, counter)
}

// ReplayWindow refuses packets whose nonce counter was already accepted or
// is more than 64 behind the highest one seen. Counters may wrap; a jump of
// more than half the space is taken as old.
type ReplayWindow struct {
	top    uint32
	bitmap uint64
	seen   bool
}

// Accept records counter and reports whether it is new.
func (w *ReplayWindow) Accept(counter uint32) bool {
	if !w.seen {
		w.seen, w.top, w.bitmap = true, counter, 1
		return true
	}
	d := counter - w.top // modular distance ahead of top
	switch {
	case d == 0:
		return false
	case d < 1<<31: // ahead
		if d >= 64 {
			w.bitmap = 1
		} else {
			w.bitmap = w.bitmap<<d | 1
		}
		w.top = counter
		return true
	default: // behind
		back := w.top - counter
		if back >= 64 || w.bitmap&(1<<back) != 0 {
			return false
		}
		w.bitmap |= 1 << back
		return true
	}
}
