package gateway

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zlib"
)

// compression is how a connection encodes outbound frames.
type compression int

const (
	// compressNone sends every frame as a text message.
	compressNone compression = iota
	// compressPayload (IDENTIFY compress:true) sends each dispatch as a
	// binary message holding one complete zlib stream; other frames stay
	// text. discordgo and discord.py inflate each binary frame on its own.
	compressPayload
	// compressStream (?compress=zlib-stream) sends every frame as a binary
	// message through one deflate context per connection, each message
	// ending with a Z_SYNC_FLUSH marker (00 00 ff ff).
	compressStream
)

// compressLevel trades ratio for CPU: gateway frames are small and many.
const compressLevel = zlib.BestSpeed

// streamCompressor is one connection's zlib-stream context.
type streamCompressor struct {
	out bytes.Buffer
	zw  *zlib.Writer
}

func newStreamCompressor() (*streamCompressor, error) {
	s := &streamCompressor{}
	zw, err := zlib.NewWriterLevel(&s.out, compressLevel)
	if err != nil {
		return nil, fmt.Errorf("gateway: zlib-stream writer: %w", err)
	}
	s.zw = zw
	return s, nil
}

// compress returns b deflated through the connection's context and
// sync-flushed. The result is valid until the next call.
func (s *streamCompressor) compress(b []byte) ([]byte, error) {
	s.out.Reset()
	if _, err := s.zw.Write(b); err != nil {
		return nil, fmt.Errorf("gateway: zlib-stream write: %w", err)
	}
	if err := s.zw.Flush(); err != nil {
		return nil, fmt.Errorf("gateway: zlib-stream flush: %w", err)
	}
	return s.out.Bytes(), nil
}

// payloadCompressor makes one independent zlib stream per frame. Its
// writers are pooled per node: payload compression keeps no state between
// frames.
type payloadCompressor struct {
	pool sync.Pool
}

// compress appends the zlib stream of b to dst[:0] and returns it.
func (p *payloadCompressor) compress(dst *bytes.Buffer, b []byte) ([]byte, error) {
	dst.Reset()
	zw, _ := p.pool.Get().(*zlib.Writer)
	if zw == nil {
		var err error
		if zw, err = zlib.NewWriterLevel(dst, compressLevel); err != nil {
			return nil, fmt.Errorf("gateway: zlib writer: %w", err)
		}
	} else {
		zw.Reset(dst)
	}
	defer p.pool.Put(zw)
	if _, err := zw.Write(b); err != nil {
		return nil, fmt.Errorf("gateway: zlib write: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("gateway: zlib close: %w", err)
	}
	return dst.Bytes(), nil
}
