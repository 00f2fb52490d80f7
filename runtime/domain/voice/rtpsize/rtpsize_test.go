package rtpsize

import (
	"bytes"
	"crypto/rand"
	"errors"
	"testing"
)

func key(t testing.TB) []byte {
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

func rtpHeader(ext bool, cc int) []byte {
	h := []byte{0x80 | byte(cc), 0x78, 0x12, 0x34, 0, 0, 0x03, 0xc0, 0xde, 0xad, 0xbe, 0xef}
	for i := 0; i < cc; i++ {
		h = append(h, 1, 2, 3, byte(i))
	}
	if ext {
		h[0] |= 0x10
		h = append(h, 0xbe, 0xde, 0x00, 0x01)
	}
	return h
}

func TestSealOpenBothModes(t *testing.T) {
	for _, mode := range Modes {
		for _, ext := range []bool{false, true} {
			c, err := New(mode, key(t))
			if err != nil {
				t.Fatal(err)
			}
			hdr := rtpHeader(ext, 2)
			plain := []byte("\x10\x00\x00\x00opus-frame-bytes")
			pkt := c.Seal(nil, hdr, plain, 7)
			if !bytes.Equal(pkt[:len(hdr)], hdr) {
				t.Fatalf("%s: header not in the clear", mode)
			}
			if got := len(pkt); got != len(hdr)+len(plain)+Overhead {
				t.Fatalf("%s: length %d", mode, got)
			}
			if !bytes.Equal(pkt[len(pkt)-4:], []byte{0, 0, 0, 7}) {
				t.Fatalf("%s: counter % x", mode, pkt[len(pkt)-4:])
			}
			got, h, ctr, err := c.Open(nil, pkt)
			if err != nil || h != len(hdr) || ctr != 7 || !bytes.Equal(got, plain) {
				t.Fatalf("%s ext=%v: open = %q %d %d %v", mode, ext, got, h, ctr, err)
			}
			// Any flipped bit, in the header (AAD), body, tag or counter, fails.
			for i := range pkt {
				bad := bytes.Clone(pkt)
				bad[i] ^= 0x01
				if i == 0 {
					bad[i] ^= 0x02 // keep version 2 but change the header
				}
				if _, _, _, err := c.Open(nil, bad); err == nil {
					t.Fatalf("%s: flipped byte %d still opened", mode, i)
				}
			}
			other, _ := New(mode, key(t))
			if _, _, _, err := other.Open(nil, pkt); !errors.Is(err, ErrAuth) {
				t.Fatalf("%s: wrong key: %v", mode, err)
			}
		}
	}
}

func TestHeaderLenRejects(t *testing.T) {
	for name, pkt := range map[string][]byte{
		"short":       {0x80, 0x78},
		"version 1":   append([]byte{0x40}, make([]byte, 40)...),
		"cc overflow": append([]byte{0x8f}, make([]byte, 30)...),
	} {
		if _, err := HeaderLen(pkt); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := New("xsalsa20_poly1305", key(t)); !errors.Is(err, ErrUnknownMode) {
		t.Fatalf("unknown mode: %v", err)
	}
}

func TestReplayWindow(t *testing.T) {
	var w ReplayWindow
	for _, tc := range []struct {
		c    uint32
		want bool
	}{{10, true}, {10, false}, {11, true}, {9, true}, {9, false}, {100, true}, {36, false}, {37, true}, {37, false},
		{0xffffffff, false}, {200, true}} {
		if got := w.Accept(tc.c); got != tc.want {
			t.Fatalf("Accept(%d) = %v, want %v", tc.c, got, tc.want)
		}
	}
	var wrap ReplayWindow
	wrap.Accept(0xfffffffe)
	if !wrap.Accept(0xffffffff) || !wrap.Accept(0) || !wrap.Accept(1) || wrap.Accept(0xfffffffe) {
		t.Fatal("wrap-around")
	}
}

func FuzzOpen(f *testing.F) {
	k := bytes.Repeat([]byte{7}, KeySize)
	for _, mode := range Modes {
		c, _ := New(mode, k)
		f.Add(mode == ModeXChaCha20, c.Seal(nil, rtpHeader(true, 1), []byte("payload"), 1))
	}
	f.Add(true, []byte{0x90, 0x78, 0, 0})
	x, _ := New(ModeXChaCha20, k)
	g, _ := New(ModeAES256GCM, k)
	f.Fuzz(func(t *testing.T, xchacha bool, pkt []byte) {
		c := g
		if xchacha {
			c = x
		}
		plain, h, ctr, err := c.Open(nil, pkt)
		if err != nil {
			return
		}
		// Whatever opens must seal back to the same bytes.
		if again := c.Seal(nil, pkt[:h], plain, ctr); !bytes.Equal(again, pkt) {
			t.Fatalf("reseal differs:\n% x\n% x", again, pkt)
		}
	})
}

func BenchmarkOpenSeal(b *testing.B) {
	for _, mode := range Modes {
		b.Run(mode, func(b *testing.B) {
			c, _ := New(mode, key(b))
			pkt := c.Seal(nil, rtpHeader(false, 0), make([]byte, 120), 1)
			buf := make([]byte, 0, 1500)
			out := make([]byte, 0, 1500)
			b.SetBytes(int64(len(pkt)))
			for i := 0; i < b.N; i++ {
				plain, h, _, err := c.Open(buf[:0], pkt)
				if err != nil {
					b.Fatal(err)
				}
				out = c.Seal(out[:0], pkt[:h], plain, uint32(i))
			}
		})
	}
}
