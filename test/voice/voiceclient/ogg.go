package voiceclient

import (
	"bytes"
	"errors"
	"fmt"
	"os"
)

// ReadOggOpus returns the Opus packets of an Ogg Opus file, without the
// OpusHead and OpusTags header packets: exactly what a library sends, one
// packet per RTP datagram.
func ReadOggOpus(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var packets [][]byte
	var cur []byte
	for len(b) > 0 {
		if len(b) < 27 || !bytes.Equal(b[:4], []byte("OggS")) {
			return nil, errors.New("voiceclient: not an Ogg page")
		}
		nseg := int(b[26])
		if len(b) < 27+nseg {
			return nil, errors.New("voiceclient: truncated Ogg page")
		}
		segs := b[27 : 27+nseg]
		body := b[27+nseg:]
		total := 0
		for _, s := range segs {
			total += int(s)
		}
		if len(body) < total {
			return nil, errors.New("voiceclient: truncated Ogg body")
		}
		off := 0
		for _, s := range segs {
			cur = append(cur, body[off:off+int(s)]...)
			off += int(s)
			if s < 255 {
				packets = append(packets, cur)
				cur = nil
			}
		}
		b = body[total:]
	}
	if len(packets) < 2 || !bytes.HasPrefix(packets[0], []byte("OpusHead")) {
		return nil, fmt.Errorf("voiceclient: %s is not Ogg Opus", path)
	}
	return packets[2:], nil
}
