// Package voiceclient is a Discord voice protocol client for Concord's
// tests and benchmarks: the voice gateway over a real WebSocket (v8 with
// seq_ack, or v4) and UDP media with IP discovery and rtpsize encryption,
// the way the bot libraries speak it.
package voiceclient

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/concord-chat/concord/runtime/domain/voice/discovery"
	"github.com/concord-chat/concord/runtime/domain/voice/rtpsize"
	"github.com/concord-chat/concord/runtime/domain/voice/signaling"
)

// Options are what a library gets from VOICE_SERVER_UPDATE and
// VOICE_STATE_UPDATE, plus the test's choices.
type Options struct {
	Endpoint  string // host:port of the voice gateway
	GuildID   uint64
	UserID    uint64
	SessionID string
	Token     string
	// Mode is the encryption mode to select; default the first offered.
	Mode string
	// Version is the gateway version; default 8.
	Version int
	TLS     *tls.Config
	// NoHeartbeat disables the heartbeat loop (to test timeouts).
	NoHeartbeat bool
}

// Client is one connected voice client.
type Client struct {
	opt    Options
	ws     *websocket.Conn
	wmu    sync.Mutex
	Frames chan signaling.Frame
	closed chan struct{}
	// CloseCode is set when the server closed the socket with a code.
	closeCode int
	cmu       sync.Mutex
	seqAck    int

	Ready signaling.Ready
	UDP   *net.UDPConn
	Key   []byte
	Mode  string
	ciph  *rtpsize.Cipher
	seq   uint16
	ts    uint32
	nonce uint32
	// Public is the address IP discovery reported.
	Public netip.AddrPort
}

// ErrClosed carries the server's close code.
type ErrClosed struct{ Code int }

func (e ErrClosed) Error() string { return "voice gateway closed: " + strconv.Itoa(e.Code) }

// Open connects the gateway and reads Hello, without identifying.
func Open(ctx context.Context, opt Options) (*Client, error) {
	if opt.Version == 0 {
		opt.Version = 8
	}
	d := websocket.Dialer{TLSClientConfig: opt.TLS, HandshakeTimeout: 5 * time.Second}
	ws, _, err := d.DialContext(ctx, "wss://"+opt.Endpoint+"/?v="+strconv.Itoa(opt.Version), nil)
	if err != nil {
		return nil, fmt.Errorf("voiceclient: dial: %w", err)
	}
	c := &Client{opt: opt, ws: ws, Frames: make(chan signaling.Frame, 4096), closed: make(chan struct{}), seqAck: -1}
	go c.readLoop()
	hello, err := c.Next(ctx, signaling.OpHello)
	if err != nil {
		return nil, err
	}
	var h signaling.Hello
	if err := json.Unmarshal(hello.D, &h); err != nil {
		return nil, err
	}
	if !opt.NoHeartbeat {
		go c.heartbeat(time.Duration(h.HeartbeatInterval) * time.Millisecond)
	}
	return c, nil
}

// Connect runs the whole handshake: identify, Ready, IP discovery, select
// protocol, session description.
func Connect(ctx context.Context, opt Options) (*Client, error) {
	c, err := Open(ctx, opt)
	if err != nil {
		return nil, err
	}
	if err := c.Identify(ctx); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.Media(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Identify sends op 0 and waits for Ready.
func (c *Client) Identify(ctx context.Context) error {
	c.SendOp(signaling.OpIdentify, map[string]any{
		"server_id": strconv.FormatUint(c.opt.GuildID, 10), "user_id": strconv.FormatUint(c.opt.UserID, 10),
		"session_id": c.opt.SessionID, "token": c.opt.Token, "max_dave_protocol_version": 0})
	f, err := c.Next(ctx, signaling.OpReady)
	if err != nil {
		return err
	}
	return json.Unmarshal(f.D, &c.Ready)
}

// Media does IP discovery and selects the UDP protocol.
func (c *Client) Media(ctx context.Context) error {
	raddr := &net.UDPAddr{IP: net.ParseIP(c.Ready.IP), Port: c.Ready.Port}
	u, err := net.DialUDP("udp4", nil, raddr)
	if err != nil {
		return fmt.Errorf("voiceclient: udp: %w", err)
	}
	c.UDP = u
	if _, err := u.Write(discovery.AppendRequest(nil, c.Ready.SSRC)); err != nil {
		return err
	}
	buf := make([]byte, 1500)
	_ = u.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		n, err := u.Read(buf)
		if err != nil {
			return fmt.Errorf("voiceclient: ip discovery: %w", err)
		}
		if ssrc, ap, err := discovery.ParseResponse(buf[:n]); err == nil && ssrc == c.Ready.SSRC {
			c.Public = ap
			break
		}
	}
	_ = u.SetReadDeadline(time.Time{})
	mode := c.opt.Mode
	if mode == "" {
		mode = c.Ready.Modes[0]
	}
	c.SendOp(signaling.OpSelectProtocol, map[string]any{"protocol": "udp",
		"data": map[string]any{"address": c.Public.Addr().String(), "port": c.Public.Port(), "mode": mode}})
	f, err := c.Next(ctx, signaling.OpSessionDescription)
	if err != nil {
		return err
	}
	var sd signaling.SessionDescription
	if err := json.Unmarshal(f.D, &sd); err != nil {
		return err
	}
	c.Mode = sd.Mode
	c.Key = make([]byte, len(sd.SecretKey))
	for i, v := range sd.SecretKey {
		c.Key[i] = byte(v)
	}
	c.ciph, err = rtpsize.New(sd.Mode, c.Key)
	return err
}

func (c *Client) readLoop() {
	defer close(c.closed)
	for {
		_, b, err := c.ws.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				c.cmu.Lock()
				c.closeCode = ce.Code
				c.cmu.Unlock()
			}
			return
		}
		var f signaling.Frame
		if json.Unmarshal(b, &f) != nil {
			continue
		}
		if f.Seq > 0 {
			c.cmu.Lock()
			c.seqAck = f.Seq
			c.cmu.Unlock()
		}
		select {
		case c.Frames <- f:
		default: // a test that does not read frames must not stall the socket
		}
	}
}

func (c *Client) heartbeat(every time.Duration) {
	if every <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-c.closed:
			return
		case <-t.C:
			c.cmu.Lock()
			ack := c.seqAck
			c.cmu.Unlock()
			if c.opt.Version >= 8 {
				c.SendOp(signaling.OpHeartbeat, map[string]any{"t": time.Now().UnixMilli(), "seq_ack": ack})
			} else {
				c.SendOp(signaling.OpHeartbeat, time.Now().UnixMilli())
			}
		}
	}
}

// SeqAck is the last sequence number received.
func (c *Client) SeqAck() int {
	c.cmu.Lock()
	defer c.cmu.Unlock()
	return c.seqAck
}

// SendOp writes one frame.
func (c *Client) SendOp(op signaling.Op, d any) {
	b, _ := json.Marshal(map[string]any{"op": op, "d": d})
	c.SendRaw(b)
}

// SendRaw writes raw bytes as a text frame.
func (c *Client) SendRaw(b []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.WriteMessage(websocket.TextMessage, b)
}

// Next waits for the next frame with op, skipping others.
func (c *Client) Next(ctx context.Context, op signaling.Op) (signaling.Frame, error) {
	for {
		select {
		case f := <-c.Frames:
			if f.Op == op {
				return f, nil
			}
		case <-c.closed:
			// Drain what arrived before the close.
			for {
				select {
				case f := <-c.Frames:
					if f.Op == op {
						return f, nil
					}
					continue
				default:
				}
				break
			}
			return signaling.Frame{}, ErrClosed{Code: c.CloseCode()}
		case <-ctx.Done():
			return signaling.Frame{}, fmt.Errorf("voiceclient: waiting for op %d: %w", op, ctx.Err())
		}
	}
}

// WaitClosed waits for the server to close the socket and returns the code.
func (c *Client) WaitClosed(ctx context.Context) (int, error) {
	select {
	case <-c.closed:
		return c.CloseCode(), nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// CloseCode is the server's close code, 0 before a close.
func (c *Client) CloseCode() int {
	c.cmu.Lock()
	defer c.cmu.Unlock()
	return c.closeCode
}

// Speaking sends op 5.
func (c *Client) Speaking(on bool) {
	v := 0
	if on {
		v = 1
	}
	c.SendOp(signaling.OpSpeaking, map[string]any{"speaking": v, "delay": 0, "ssrc": c.Ready.SSRC})
}

// Packet builds the next encrypted RTP packet carrying an Opus payload
// (payload type 120, +960 timestamp per 20 ms frame), as the libraries do.
func (c *Client) Packet(opus []byte) []byte {
	c.seq++
	c.ts += 960
	c.nonce++
	h := make([]byte, 12)
	h[0], h[1] = 0x80, 0x78
	binary.BigEndian.PutUint16(h[2:], c.seq)
	binary.BigEndian.PutUint32(h[4:], c.ts)
	binary.BigEndian.PutUint32(h[8:], c.Ready.SSRC)
	return c.ciph.Seal(nil, h, opus, c.nonce)
}

// SendOpus sends one Opus frame.
func (c *Client) SendOpus(opus []byte) error {
	_, err := c.UDP.Write(c.Packet(opus))
	return err
}

// Received is one forwarded packet, opened with this client's key.
type Received struct {
	SSRC    uint32
	Seq     uint16
	Payload []byte
}

// Recv reads the next RTP packet, skipping anything else.
func (c *Client) Recv(deadline time.Time) (Received, error) {
	buf := make([]byte, 1500)
	_ = c.UDP.SetReadDeadline(deadline)
	for {
		n, err := c.UDP.Read(buf)
		if err != nil {
			return Received{}, err
		}
		if n < 12 || buf[0]>>6 != 2 {
			continue
		}
		plain, h, _, err := c.ciph.Open(nil, buf[:n])
		if err != nil {
			return Received{}, fmt.Errorf("voiceclient: open forwarded packet: %w", err)
		}
		// Strip the extension body, as the libraries do.
		if buf[0]&0x10 != 0 {
			words := int(binary.BigEndian.Uint16(buf[h-2 : h]))
			if 4*words <= len(plain) {
				plain = plain[4*words:]
			}
		}
		return Received{SSRC: binary.BigEndian.Uint32(buf[8:12]), Seq: binary.BigEndian.Uint16(buf[2:4]), Payload: plain}, nil
	}
}

// Close sends a normal closure (leave) and closes the sockets.
func (c *Client) Close() {
	c.wmu.Lock()
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	c.wmu.Unlock()
	_ = c.ws.Close()
	if c.UDP != nil {
		_ = c.UDP.Close()
	}
}

// Drop closes the gateway socket abruptly (no close frame), as a network
// failure would; the UDP socket stays.
func (c *Client) Drop() { _ = c.ws.UnderlyingConn().Close() }

// Resume opens a new gateway socket for the same session and sends op 7
// with seq_ack, keeping the UDP socket and key.
func (c *Client) Resume(ctx context.Context, seqAck int) (*Client, error) {
	n, err := Open(ctx, c.opt)
	if err != nil {
		return nil, err
	}
	n.SendOp(signaling.OpResume, map[string]any{"server_id": strconv.FormatUint(c.opt.GuildID, 10),
		"session_id": c.opt.SessionID, "token": c.opt.Token, "seq_ack": seqAck})
	n.Ready, n.UDP, n.Key, n.Mode, n.ciph, n.seq, n.ts, n.nonce, n.Public = c.Ready, c.UDP, c.Key, c.Mode, c.ciph, c.seq, c.ts, c.nonce, c.Public
	n.cmu.Lock()
	n.seqAck = seqAck
	n.cmu.Unlock()
	return n, nil
}
