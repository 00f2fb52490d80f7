package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/klauspost/compress/flate"
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
// returns b compressed and flushed, valid until the next call. park drops
// the encoder's state (back to a node-wide pool) while the stream stays
// open: the next message continues the same transport stream with a fresh
// encoder, so the client's one long-lived decoder keeps working.
type streamCompressor interface {
	compress(b []byte) ([]byte, error)
	// control returns b, a non-dispatch frame, as the next message of the
	// stream without waking a parked encoder (a heartbeat ACK to an idle
	// session costs no encoder); an active one compresses it as usual.
	control(b []byte) ([]byte, error)
	// park returns the encoder to its pool; false if it held none.
	park() bool
	// parked reports whether the context holds no encoder.
	parked() bool
}

// newStreamCompressor makes the context of a streaming mode. It holds no
// encoder until the first message.
func newStreamCompressor(comp compression) streamCompressor {
	if comp == compressZstdStream {
		return &zstdStream{}
	}
	return &zlibStream{}
}

// compressLevel trades ratio for CPU: gateway frames are small and many.
const compressLevel = zlib.BestSpeed

// zlibHeader is the two-byte zlib header of a BestSpeed stream (deflate,
// 32 KiB window, FLEVEL 0), the bytes zlib.NewWriterLevel(BestSpeed)
// writes. The stream's Adler-32 trailer would only follow the final block,
// and a zlib-stream connection never ends its stream (the socket closes
// instead), so the stream is the header and then raw deflate blocks.
var zlibHeader = []byte{0x78, 0x01}

// syncMarker is the empty stored block that ends every zlib-stream
// message (Z_SYNC_FLUSH); clients look for it at a message's end.
var syncMarker = []byte{0x00, 0x00, 0x00, 0xff, 0xff}

// flateWriters pools raw deflate writers across connections. A writer
// taken from it is reset: no history, so its first blocks make no
// back-reference before the point where it joins a stream.
var flateWriters sync.Pool

// zlibStream is one connection's zlib-stream context: the zlib header,
// then raw deflate blocks, each message ending with a sync flush.
//
// Why an encoder can be dropped and replaced mid-stream: after a sync
// flush the stream is at a byte boundary between blocks, the last of
// which was not final, and the decoder's only state is its 32 KiB window
// of output (and the running Adler-32, checked only after a final block,
// which never comes). Blocks from a fresh writer make back-references
// only into what that writer itself produced since, which the decoder has
// just decoded at the same distances, so they decode as a continuation of
// the stream. TestZlibStreamParkContinues decodes the blocks after a
// re-acquisition on their own to prove none reaches further back.
type zlibStream struct {
	out     bytes.Buffer
	fw      *flate.Writer // nil while parked
	started bool          // the zlib header has been sent
}

// begin resets out and writes the header the first time.
func (s *zlibStream) begin() {
	s.out.Reset()
	if !s.started {
		s.out.Write(zlibHeader)
		s.started = true
	}
}

// compress returns b deflated through the connection's context and
// sync-flushed. The result is valid until the next call.
func (s *zlibStream) compress(b []byte) ([]byte, error) {
	s.begin()
	if s.fw == nil {
		fw, _ := flateWriters.Get().(*flate.Writer)
		if fw == nil {
			var err error
			if fw, err = flate.NewWriter(&s.out, compressLevel); err != nil {
				return nil, fmt.Errorf("gateway: zlib-stream writer: %w", err)
			}
		} else {
			fw.Reset(&s.out)
		}
		s.fw = fw
	}
	if _, err := s.fw.Write(b); err != nil {
		return nil, fmt.Errorf("gateway: zlib-stream write: %w", err)
	}
	if err := s.fw.Flush(); err != nil {
		return nil, fmt.Errorf("gateway: zlib-stream flush: %w", err)
	}
	return s.out.Bytes(), nil
}

// control sends b in stored (uncompressed) deflate blocks while parked:
// valid in any decoder state, and the frames it carries are tiny.
func (s *zlibStream) control(b []byte) ([]byte, error) {
	if s.fw != nil {
		return s.compress(b)
	}
	s.begin()
	for len(b) > 0 {
		n := min(len(b), 0xffff)
		s.out.Write([]byte{0x00, byte(n), byte(n >> 8), ^byte(n), ^byte(n >> 8)})
		s.out.Write(b[:n])
		b = b[n:]
	}
	s.out.Write(syncMarker)
	return s.out.Bytes(), nil
}

func (s *zlibStream) park() bool {
	s.out = bytes.Buffer{}
	if s.fw == nil {
		return false
	}
	s.fw.Reset(nil)
	flateWriters.Put(s.fw)
	s.fw = nil
	return true
}

func (s *zlibStream) parked() bool { return s.fw == nil }

// zstdWindow is the back-reference distance of zstd-stream. Gateway
// payloads are mostly under a few KiB and repeat each other's keys and
// ids, so 64 KiB catches nearly all the redundancy while keeping the
// encoder's history per connection small; the decoder is told the size in
// the frame header and needs no more.
const zstdWindow = 64 << 10

// zstdEncoders pools zstd-stream encoders across connections.
var zstdEncoders sync.Pool

// newZstdEncoder makes a zstd-stream encoder writing to w. It runs
// synchronously on the caller (concurrency 1): the socket's owner calls
// it, and a per-connection goroutine would cost more than the work.
func newZstdEncoder(w io.Writer) (*zstd.Encoder, error) {
	zw, err := zstd.NewWriter(w,
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderConcurrency(1),
		zstd.WithWindowSize(zstdWindow),
		zstd.WithLowerEncoderMem(true),
		zstd.WithEncoderCRC(false))
	if err != nil {
		return nil, fmt.Errorf("gateway: zstd-stream writer: %w", err)
	}
	return zw, nil
}

// zstdStream is one connection's zstd-stream context: a single zstd frame
// that never ends while the connection lives, flushed after every message.
// It must stay one frame: discord.py's decoder (the zstandard package's
// decompressobj, and Python's compression.zstd) decodes one frame and
// refuses data after its end, so a parked encoder cannot end the frame
// and a new one start another.
//
// Why an encoder can be dropped and replaced inside the frame: at a flushed
// block boundary the decoder's state is its window of output, the three
// repeat offsets, and the previous block's entropy tables. A fresh encoder
// writes blocks that reach back only into its own output (which the
// decoder has, at the same distances), and its first block describes its
// own tables rather than repeating earlier ones; it assumes the repeat
// offsets a frame starts with, 1, 4 and 8. The decoder's are whatever the
// dropped encoder left, so before the fresh encoder's first block the
// stream carries zstdRepReset: three tiny blocks whose matches, at offsets
// 8, 4 and 1, set the decoder's repeat offsets to 1, 4, 8. They decode
// to 17 spaces before the next message's JSON, which JSON allows
// (RFC 8259 section 2: whitespace may precede a value). The fresh
// encoder's frame header is cut off its output.
type zstdStream struct {
	out     bytes.Buffer
	zw      *zstd.Encoder // nil while parked
	started bool          // the frame header has been sent
	// cutHeader: the encoder joined an open frame, so the frame header it
	// writes before its first block is cut from the output.
	cutHeader bool
}

// zstdRepReset is three compressed blocks (not last), each one sequence
// with every symbol in RLE mode, so the bit streams are only the offset's
// extra bits behind the end marker:
//
//	block 1: 8 literal spaces, match offset 8 length 3 (offset code 3,
//	         extra bits 3: offset value 11 = 8+3)
//	block 2: no literals, match offset 4 length 3 (code 2, extra 3: 7)
//	block 3: no literals, match offset 1 length 3 (code 2, extra 0: 4)
//
// Each new offset pushes the repeat offsets down: after the three they are
// 1, 4, 8, as at a frame's start. Output: 11 + 3 + 3 spaces.
var zstdRepReset = []byte{
	// block header: size 15, compressed, not last: 15<<3 | 2<<1
	0x7c, 0x00, 0x00,
	// raw literals, size 8, then the literals
	0x40, ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ',
	// 1 sequence; LL, OF, ML in RLE mode; codes LL 8, OF 3, ML 0 (length 3)
	0x01, 0x54, 0x08, 0x03, 0x00,
	// bit stream: marker bit 3, extra bits 011
	0x0b,
	// block 2: size 7
	0x3c, 0x00, 0x00,
	0x00,
	0x01, 0x54, 0x00, 0x02, 0x00,
	// marker bit 2, extra bits 11
	0x07,
	// block 3: size 7
	0x3c, 0x00, 0x00,
	0x00,
	0x01, 0x54, 0x00, 0x02, 0x00,
	// marker bit 2, extra bits 00
	0x04,
}

// zstdRepResetSpaces is how many bytes zstdRepReset decodes to.
const zstdRepResetSpaces = 17

// acquire gives s an encoder from the pool, writing to out. The first
// message of the connection starts the frame; later ones continue it.
func (s *zstdStream) acquire() error {
	zw, _ := zstdEncoders.Get().(*zstd.Encoder)
	if zw == nil {
		var err error
		if zw, err = newZstdEncoder(&s.out); err != nil {
			return err
		}
	} else {
		zw.Reset(&s.out)
	}
	s.zw = zw
	if s.started {
		// The frame is open: cut the encoder's frame header, and put the
		// repeat-offset reset before its first block.
		s.out.Write(zstdRepReset)
		s.cutHeader = true
	}
	s.started = true
	return nil
}

// compress returns b compressed into the connection's zstd frame and
// flushed. The result is valid until the next call.
func (s *zstdStream) compress(b []byte) ([]byte, error) {
	s.out.Reset()
	if s.zw == nil {
		if err := s.acquire(); err != nil {
			return nil, err
		}
	}
	mark := s.out.Len()
	if _, err := s.zw.Write(b); err != nil {
		return nil, fmt.Errorf("gateway: zstd-stream write: %w", err)
	}
	if err := s.zw.Flush(); err != nil {
		return nil, fmt.Errorf("gateway: zstd-stream flush: %w", err)
	}
	out := s.out.Bytes()
	if s.cutHeader {
		// The header starts where the encoder's output does, after the
		// reset blocks.
		n, err := zstdFrameHeaderLen(out[mark:])
		if err != nil {
			return nil, err
		}
		copy(out[mark:], out[mark+n:])
		out = out[:len(out)-n]
		s.cutHeader = false
	}
	return out, nil
}

// control sends b as a raw (uncompressed) block while parked: a raw block
// uses and changes none of the decoder's state but its window.
func (s *zstdStream) control(b []byte) ([]byte, error) {
	if s.zw != nil || !s.started {
		return s.compress(b)
	}
	s.out.Reset()
	for len(b) > 0 {
		n := min(len(b), zstdWindow)
		h := uint32(n) << 3 // raw block, not last
		s.out.Write([]byte{byte(h), byte(h >> 8), byte(h >> 16)})
		s.out.Write(b[:n])
		b = b[n:]
	}
	return s.out.Bytes(), nil
}

func (s *zstdStream) park() bool {
	s.out = bytes.Buffer{}
	if s.zw == nil {
		return false
	}
	s.zw.Reset(nil)
	zstdEncoders.Put(s.zw)
	s.zw = nil
	return true
}

func (s *zstdStream) parked() bool { return s.zw == nil }

// zstdFrameHeaderLen returns the length of the zstd frame header (magic
// number included) at the start of b.
func zstdFrameHeaderLen(b []byte) (int, error) {
	if len(b) < 5 || b[0] != 0x28 || b[1] != 0xb5 || b[2] != 0x2f || b[3] != 0xfd {
		return 0, errors.New("gateway: zstd-stream: encoder output does not start with a frame header")
	}
	fhd := b[4]
	n := 5
	single := fhd&0x20 != 0
	if !single {
		n++ // window descriptor
	}
	n += [4]int{0, 1, 2, 4}[fhd&3] // dictionary id
	switch fhd >> 6 {
	case 0:
		if single {
			n++
		}
	case 1:
		n += 2
	case 2:
		n += 4
	case 3:
		n += 8
	}
	if fhd&0x04 != 0 {
		return 0, errors.New("gateway: zstd-stream: encoder writes checksums, which an endless frame cannot carry")
	}
	if len(b) < n {
		return 0, errors.New("gateway: zstd-stream: short frame header")
	}
	return n, nil
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

// compressStream runs out through the connection's stream context, as a
// control frame (ctl) or a dispatch, and keeps the idle check armed while
// the context holds an encoder. Its caller owns the socket.
func (c *conn) compressStream(out []byte, ctl bool) ([]byte, error) {
	wasParked := c.stream.parked()
	var z []byte
	var err error
	if ctl {
		z, err = c.stream.control(out)
	} else {
		z, err = c.stream.compress(out)
	}
	if err != nil || c.stream.parked() {
		return z, err
	}
	c.compLast = c.node.cfg.Now().UnixNano()
	if wasParked {
		c.node.metrics.compressorsActive.Inc()
		if c.compIdleFn == nil {
			c.compIdleFn = c.checkCompressIdle
		}
		c.node.wheel.arm(&c.compIdle, c.node.cfg.CompressIdle, c.compIdleFn, 0)
	}
	return z, nil
}

// checkCompressIdle is the wheel callback of the idle check: a stream
// context that sent nothing for Config.CompressIdle gives its encoder
// back to the pool; otherwise the check is re-armed for when it would be.
// A busy connection's writer goroutine owns the context, so the check
// waits for it to go idle again.
func (c *conn) checkCompressIdle(uint64) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if c.stream == nil || c.stream.parked() {
		return
	}
	idle := c.node.cfg.CompressIdle
	if !c.busy {
		since := time.Duration(c.node.cfg.Now().UnixNano() - c.compLast)
		if since >= idle {
			if c.stream.park() {
				c.node.metrics.compressorsActive.Dec()
				c.node.metrics.compressorParks.Inc()
			}
			return
		}
		idle -= since
	}
	c.node.wheel.arm(&c.compIdle, idle, c.compIdleFn, 0)
}

// releaseStream gives a closed connection's encoder back to the pool.
func (c *conn) releaseStream() {
	c.node.wheel.stop(&c.compIdle)
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if c.stream != nil && c.stream.park() {
		c.node.metrics.compressorsActive.Dec()
	}
}
