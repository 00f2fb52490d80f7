package gateway

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
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
	// compressZstdStream (?compress=zstd-stream) sends every frame as a
	// binary message through one zstd frame per connection, each message
	// ending at a flushed block: a streaming decoder fed message after
	// message yields exactly one payload per message.
	compressZstdStream
)

// parseCompress maps the connection URL's compress parameter to a mode;
// anything else (absent, unknown) is no transport compression, as Discord
// treats it.
func parseCompress(v string) compression {
	switch v {
	case "zlib-stream":
		return compressStream
	case "zstd-stream":
		return compressZstdStream
	}
	return compressNone
}

// streamCompressor is one connection's compression context: each call
// returns b compressed and flushed, valid until the next call.
type streamCompressor interface {
	compress(b []byte) ([]byte, error)
}

// newStreamCompressor makes the context of a streaming mode.
func newStreamCompressor(comp compression) (streamCompressor, error) {
	if comp == compressZstdStream {
		return newZstdStream()
	}
	return newZlibStream()
}

// compressLevel trades ratio for CPU: gateway frames are small and many.
const compressLevel = zlib.BestSpeed

// zlibStream is one connection's zlib-stream context.
type zlibStream struct {
	out bytes.Buffer
	zw  *zlib.Writer
}

func newZlibStream() (*zlibStream, error) {
	s := &zlibStream{}
	zw, err := zlib.NewWriterLevel(&s.out, compressLevel)
	if err != nil {
		return nil, fmt.Errorf("gateway: zlib-stream writer: %w", err)
	}
	s.zw = zw
	return s, nil
}

// compress returns b deflated through the connection's context and
// sync-flushed. The result is valid until the next call.
func (s *zlibStream) compress(b []byte) ([]byte, error) {
	s.out.Reset()
	if _, err := s.zw.Write(b); err != nil {
		return nil, fmt.Errorf("gateway: zlib-stream write: %w", err)
	}
	if err := s.zw.Flush(); err != nil {
		return nil, fmt.Errorf("gateway: zlib-stream flush: %w", err)
	}
	return s.out.Bytes(), nil
}

// zstdWindow is the back-reference distance of zstd-stream. Gateway
// payloads are mostly under a few KiB and repeat each other's keys and
// ids, so 64 KiB catches nearly all the redundancy while keeping the
// encoder's history per connection small; the decoder is told the size in
// the frame header and needs no more.
const zstdWindow = 64 << 10

// zstdStream is one connection's zstd-stream context: a single zstd frame
// that never ends while the connection lives, flushed after every message.
// The encoder runs synchronously on the caller (concurrency 1): the
// socket's owner calls it, and a per-connection goroutine would cost more
// than the work.
type zstdStream struct {
	out bytes.Buffer
	zw  *zstd.Encoder
}

func newZstdStream() (*zstdStream, error) {
	s := &zstdStream{}
	zw, err := zstd.NewWriter(&s.out,
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderConcurrency(1),
		zstd.WithWindowSize(zstdWindow),
		zstd.WithLowerEncoderMem(true),
		zstd.WithEncoderCRC(false))
	if err != nil {
		return nil, fmt.Errorf("gateway: zstd-stream writer: %w", err)
	}
	s.zw = zw
	return s, nil
}

// compress returns b compressed into the connection's zstd frame and
// flushed. The result is valid until the next call.
func (s *zstdStream) compress(b []byte) ([]byte, error) {
	s.out.Reset()
	if _, err := s.zw.Write(b); err != nil {
		return nil, fmt.Errorf("gateway: zstd-stream write: %w", err)
	}
	if err := s.zw.Flush(); err != nil {
		return nil, fmt.Errorf("gateway: zstd-stream flush: %w", err)
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
